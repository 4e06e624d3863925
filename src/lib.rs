//! logship: RocketMQ-compatible master/slave commit-log replication.
//!
//! This facade re-exports the workspace crates.
#![forbid(unsafe_code)]

pub use logship_core as core;
pub use logship_smol as smol;
pub use logship_store as store;
pub use logship_tokio as tokio;
