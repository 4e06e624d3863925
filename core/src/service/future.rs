//! The boxed future the service's object-safe traits return ([`MasterService`](crate::service::MasterService),
//! [`Coordinator`](crate::service::coordinator::Coordinator)...): a leaf, so that every module
//! declaring such a trait can name it.

use std::future::Future;
use std::pin::Pin;

/// A boxed future a service handle returns through its trait.
pub type ServiceFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
