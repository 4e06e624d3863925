//! Bugs planted on purpose in shipped code paths, to show that the simulator catches each
//! (issue 27): a seed sweep must fail with the bug planted and pass without it.
//!
//! Each [`Plant`] names one hook in the code that ships. A hook is live only in a debug build
//! with the `planted-bugs` feature, and only on the thread that runs `with_planted`: a
//! release build has no hook at all (each is the constant `false` and compiles away), and a
//! test that plants nothing, or another test's thread, sees the unplanted code.

/// A deliberately planted bug.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Plant {
    /// The master service's lease fence removed: its put gate takes puts while the lease is
    /// closed, and a put whose lease closed under it is acknowledged anyway.
    LeaseFenceRemoved,
    /// A classic slave reports the bytes it received, not those its log stored (or, when it
    /// acknowledges on flush, made durable).
    ReportBeforeStore,
    /// An AutoSwitch slave that acknowledges durable bytes only (`AckOn::Flushed`) acknowledges
    /// bytes its log wrote but has not flushed.
    AckBeforeFlush,
}

#[cfg(all(feature = "planted-bugs", debug_assertions))]
thread_local! {
    static PLANTED: std::cell::Cell<Option<Plant>> = const { std::cell::Cell::new(None) };
}

/// Whether `plant` is planted on this thread now (never, in a release build or without the
/// `planted-bugs` feature).
#[inline(always)]
pub(crate) fn planted(plant: Plant) -> bool {
    #[cfg(all(feature = "planted-bugs", debug_assertions))]
    {
        PLANTED.with(|p| p.get() == Some(plant))
    }
    #[cfg(not(all(feature = "planted-bugs", debug_assertions)))]
    {
        let _ = plant;
        false
    }
}

/// Runs `f` with `plant` planted on this thread, and removes it after (also when `f`
/// panics). Debug builds with the `planted-bugs` feature only.
#[cfg(all(feature = "planted-bugs", debug_assertions))]
pub fn with_planted<T>(plant: Plant, f: impl FnOnce() -> T) -> T {
    struct Unplant(Option<Plant>);
    impl Drop for Unplant {
        fn drop(&mut self) {
            PLANTED.with(|p| p.set(self.0));
        }
    }
    let _unplant = Unplant(PLANTED.with(|p| p.replace(Some(plant))));
    f()
}
