#![no_main]
//! Fuzz target `autoswitch_slave_session`: the body is `logship_core::autoswitch::fuzzing::slave_session`, which also runs under `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| logship_core::autoswitch::fuzzing::slave_session(data));
