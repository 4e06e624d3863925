#![no_main]
//! Fuzz target `autoswitch_slave_session`: the body is `logship_core::autoswitch::fuzzing::slave_session`, which also runs under `cargo test`.
//! Virtual time starts at one instant read once per process; the body itself reads no clock.

use std::sync::OnceLock;
use std::time::Instant;

static ORIGIN: OnceLock<Instant> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let origin = *ORIGIN.get_or_init(Instant::now);
    logship_core::autoswitch::fuzzing::slave_session(origin, data)
});
