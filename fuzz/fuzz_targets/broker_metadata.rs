#![no_main]
//! Fuzz target `broker_metadata`: the body is `logship_broker::fuzzing::broker_metadata`, which also runs under `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| logship_broker::fuzzing::broker_metadata(data));
