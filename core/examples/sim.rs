//! Runs the deterministic cluster simulator over a range of seeds and prints what it covered.
//!
//! ```sh
//! cargo run -p logship-core --features sim --example sim            # seeds 0..100
//! SIM_SEED=0x2a cargo run -p logship-core --features sim --example sim   # one seed
//! SIM_SEED=1000 SIM_RUNS=500 cargo run -p logship-core --features sim --example sim
//! SIM_TRACE=1 SIM_SEED=0x2a cargo run -p logship-core --features sim --example sim   # every event
//! ```

use std::process::ExitCode;

use logship_core::sim::{SimConfig, Stats, run_seed, seeds_from_env};

fn main() -> ExitCode {
    let seeds = seeds_from_env(0, 100);
    let config = SimConfig {
        print_trace: std::env::var_os("SIM_TRACE").is_some(),
        restart_fence: std::env::var_os("SIM_NO_FENCE").is_none(),
        close_stale_connections: std::env::var_os("SIM_KEEP_STALE").is_none(),
        replay_command: "SIM_SEED={seed} cargo run -p logship-core --features sim --example sim".into(),
        ..SimConfig::default()
    };
    let mut total = Stats::default();
    for seed in seeds {
        match run_seed(seed, &config) {
            Ok(outcome) => {
                if seeds.runs <= 10 {
                    println!("seed {seed:#x}: ok, trace {:#018x}\n  {}", outcome.trace_hash, outcome.summary);
                }
                total.merge(&outcome.stats);
            }
            Err(failure) => {
                eprintln!("{failure}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!("{} seed(s) from {:#x} passed", seeds.runs, seeds.start);
    print!("{total}");
    ExitCode::SUCCESS
}
