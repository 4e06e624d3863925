#![no_main]
//! Fuzz target `autoswitch_slave_frames`: the body is `logship_core::autoswitch::fuzzing::slave_frames`, which also runs under `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| logship_core::autoswitch::fuzzing::slave_frames(data));
