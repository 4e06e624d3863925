//! logship-core: the sans-IO heart of logship.
#![forbid(unsafe_code)]

pub mod log;

pub use log::{LogBounds, LogRead, LogSpan, LogWrite, MessageLog, Offset, PutResult, PutStatus};
