//! `logship bench --quick` as a smoke run: it runs every scenario, prints each, and closes its
//! stores before it removes their directories. Nothing here times anything.

use std::process::Command;

#[test]
fn bench_quick_runs_and_prints_every_scenario() {
    let out = Command::new(env!("CARGO_BIN_EXE_logship"))
        .args(["bench", "--quick"])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run logship bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed:\n{stdout}\n{stderr}");
    for scenario in [
        "a new slave joins: 8 MiB of 129-byte messages, logship -> logship",
        "a new slave joins: 60 MiB of 1 KiB messages, logship -> logship",
        "a master rolls: put p99",
        "SYNC put p99, 1 producer, new slave process",
        "SYNC puts/s, 64 producers, new slave process",
        "idle replication latency p50",
        "SYNC puts/s, 64 producer(s)",
    ] {
        assert!(stdout.contains(scenario), "no {scenario:?} row:\n{stdout}");
    }
    assert!(!stderr.contains("clean shutdown failed"), "a store closed after its directory went:\n{stderr}");
}
