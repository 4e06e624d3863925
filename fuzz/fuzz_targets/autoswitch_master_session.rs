#![no_main]
//! Fuzz target `autoswitch_master_session`: the body is `logship_core::autoswitch::fuzzing::master_session`, which also runs under `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| logship_core::autoswitch::fuzzing::master_session(data));
