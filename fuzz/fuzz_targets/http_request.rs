#![no_main]
//! Fuzz target `http_request`: the body is `logship::request::fuzz_http_request`, which also runs under `cargo test`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| logship::request::fuzz_http_request(data));
