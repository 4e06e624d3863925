//! Lock helpers shared by the commit log and its worker threads.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard};

/// Locks a mutex, ignoring poisoning: every critical section publishes its effects atomically at
/// its end, so a panic inside one leaves nothing half-visible.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Read-locks an `RwLock`, ignoring poisoning (see [`lock`]).
pub(crate) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}
