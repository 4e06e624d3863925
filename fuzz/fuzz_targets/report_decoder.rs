#![no_main]
//! Fuzz target `report_decoder`: the body is `logship_core::fuzzing::report_decoder`, which also runs under `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| logship_core::fuzzing::report_decoder(data));
