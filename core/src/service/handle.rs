//! What every adapter's service handles offer, as traits: code that runs a master or a slave
//! on any adapter (an embedder's, or the tests that pair adapters) holds a
//! `Box<dyn MasterService<L>>` or `Box<dyn SlaveService>` instead of one type per adapter.
//! Each adapter's handle also has the same methods as inherent `async fn`s.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use crate::log::{MessageLog, PutResult};
use crate::service::{MasterStatus, SlaveStatus};

/// A boxed future a service handle returns through its trait.
pub type ServiceFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A running master service, on whichever adapter.
pub trait MasterService<L: MessageLog>: Send + Sync {
    /// The address slaves connect to.
    fn local_addr(&self) -> SocketAddr;

    /// Appends `message`, then waits as the role requires (see the adapters' `MasterHandle::put`).
    fn put(&self, message: L::Message) -> ServiceFuture<'_, PutResult>;

    /// A status snapshot; `None` once the service stopped.
    fn status(&self) -> ServiceFuture<'_, Option<MasterStatus>>;

    /// Stops the service (see the adapters' `MasterHandle::shutdown`).
    fn shutdown(&self) -> ServiceFuture<'_, ()>;
}

/// A running slave service, on whichever adapter.
pub trait SlaveService: Send + Sync {
    /// A status snapshot; `None` once the service stopped.
    fn status(&self) -> ServiceFuture<'_, Option<SlaveStatus>>;

    /// Closes the connection, flushes the log and stops.
    fn shutdown(&self) -> ServiceFuture<'_, ()>;
}
