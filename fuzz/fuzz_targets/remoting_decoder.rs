#![no_main]
//! Fuzz target `remoting_decoder`: the body is `logship_remoting::fuzzing::remoting_decoder`, which also runs under `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| logship_remoting::fuzzing::remoting_decoder(data));
