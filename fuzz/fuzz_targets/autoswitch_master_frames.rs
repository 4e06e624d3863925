#![no_main]
//! Fuzz target `autoswitch_master_frames`: the body is `logship_core::autoswitch::fuzzing::master_frames`, which also runs under `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| logship_core::autoswitch::fuzzing::master_frames(data));
