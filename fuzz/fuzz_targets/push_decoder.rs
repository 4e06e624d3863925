#![no_main]
//! Fuzz target `push_decoder`: the body is `logship_core::fuzzing::push_decoder`, which also runs under `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| logship_core::fuzzing::push_decoder(data));
