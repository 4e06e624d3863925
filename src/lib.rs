#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub use logship_core as core;
pub use logship_smol as smol;
pub use logship_store as store;
pub use logship_tokio as tokio;

#[cfg(feature = "etcd")]
pub mod coordinator;
pub mod request;
