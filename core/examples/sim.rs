//! Runs the deterministic cluster simulator over a range of seeds and prints what it covered.
//!
//! ```sh
//! cargo run -p logship-core --features sim --example sim            # seeds 0..100
//! SIM_SEED=0x2a cargo run -p logship-core --features sim --example sim   # one seed
//! SIM_SEED=1000 SIM_RUNS=500 cargo run -p logship-core --features sim --example sim
//! SIM_TRACE=1 SIM_SEED=0x2a cargo run -p logship-core --features sim --example sim   # every event
//! SIM_KEEP_GOING=1 SIM_RUNS=100000 cargo run --release -p logship-core --features sim --example sim
//! ```
//!
//! Other knobs: `SIM_ALL_FAULTS=1` (every fault at once), `SIM_DEFAULT_CONFIGS=1` (RocketMQ's
//! default timers and sizes), `SIM_FAULT_SECS`, `SIM_LIVENESS_SECS`, `SIM_MAX_BYTES`,
//! `SIM_NO_FENCE=1` and `SIM_LOOPBACK=1` (show the classic protocol's limits).

use std::process::ExitCode;
use std::time::Duration;

use logship_core::sim::{FaultRates, SimConfig, Stats, run_seed, seeds_from_env};
use logship_core::{MasterConfig, SlaveConfig};

fn main() -> ExitCode {
    let seeds = seeds_from_env(0, 100);
    let var = |name: &str| std::env::var(name).ok();
    let secs = |name: &str, default: u64| {
        Duration::from_secs(var(name).and_then(|v| v.parse().ok()).unwrap_or(default))
    };
    // RocketMQ's own defaults (5 s heartbeat, 20 s housekeeping, 5 s reconnect, 32 KiB
    // batches, 1 GiB segments) need longer phases.
    let defaults = var("SIM_DEFAULT_CONFIGS").is_some();
    let config = SimConfig {
        master: defaults.then(MasterConfig::default),
        slave: defaults.then(SlaveConfig::default),
        faults: var("SIM_ALL_FAULTS").is_some().then(FaultRates::all),
        fault_time: secs("SIM_FAULT_SECS", if defaults { 300 } else { 20 }),
        liveness_timeout: secs("SIM_LIVENESS_SECS", if defaults { 600 } else { 120 }),
        max_bytes: var("SIM_MAX_BYTES").and_then(|v| v.parse().ok()).unwrap_or(96 * 1024),
        print_trace: std::env::var_os("SIM_TRACE").is_some(),
        restart_fence: std::env::var_os("SIM_NO_FENCE").is_none(),
        loopback_slaves: std::env::var_os("SIM_LOOPBACK").is_some(),
        replay_command: "SIM_SEED={seed} cargo run -p logship-core --features sim --example sim".into(),
        ..SimConfig::default()
    };
    let keep_going = std::env::var_os("SIM_KEEP_GOING").is_some();
    let mut failed = 0u64;
    let mut total = Stats::default();
    for seed in seeds {
        match run_seed(seed, &config) {
            Ok(outcome) => {
                if seeds.runs <= 10 {
                    println!("seed {seed:#x}: ok, trace {:#018x}\n  {}", outcome.trace_hash, outcome.summary);
                }
                total.merge(&outcome.stats);
            }
            Err(failure) if keep_going => {
                eprintln!("FAILED seed {seed:#x}: {}", failure.violation);
                failed += 1;
            }
            Err(failure) => {
                eprintln!("{failure}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "{} seed(s) from {:#x}: {} passed, {failed} failed",
        seeds.runs,
        seeds.start,
        seeds.runs - failed
    );
    print!("{total}");
    if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
