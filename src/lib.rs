#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub use logship_core as core;
pub use logship_smol as smol;
pub use logship_store as store;
pub use logship_tokio as tokio;

/// The Rust examples of `docs/embedding.md`, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/embedding.md")]
pub struct EmbeddingGuide;

#[cfg(feature = "etcd")]
pub mod coordinator;
pub mod request;
pub mod status;
