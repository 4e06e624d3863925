//! logship-tokio: binds the logship core to tokio.
#![forbid(unsafe_code)]
