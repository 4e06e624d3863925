//! logship-smol: binds the logship core to async-io / smol.
#![forbid(unsafe_code)]
