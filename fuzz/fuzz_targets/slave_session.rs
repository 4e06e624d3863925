#![no_main]
//! Fuzz target `slave_session`: the body is `logship_core::fuzzing::slave_session`, which also runs under `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| logship_core::fuzzing::slave_session(data));
