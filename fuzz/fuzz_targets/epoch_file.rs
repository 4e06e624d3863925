#![no_main]
//! Fuzz target `epoch_file`: the body is `logship_store::fuzzing::epoch_file`, which also runs under `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| logship_store::fuzzing::epoch_file(data));
