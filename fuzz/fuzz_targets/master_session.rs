#![no_main]
//! Fuzz target `master_session`: the body is `logship_core::fuzzing::master_session`, which also runs under `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| logship_core::fuzzing::master_session(data));
