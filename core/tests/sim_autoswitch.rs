//! The simulator in AutoSwitch mode (`SimConfig::protocol = Protocol::AutoSwitch`): groups of
//! 2-5 brokers running the production AutoSwitch drivers, elected by a fake coordinator in
//! epochs, under crashes, partitions and resets, checked after every step.
//!
//! Replay one seed: `SIM_SEED=0x2a cargo test -p logship-core --test sim_autoswitch swarm -- --nocapture`
//! The soak:        `cargo test --release -p logship-core --test sim_autoswitch soak -- --ignored --nocapture`

use logship_core::sim::{Protocol, Seeds, SimConfig, Stats, run_seed, seeds_from_env};

fn config() -> SimConfig {
    SimConfig {
        protocol: Protocol::AutoSwitch,
        replay_command:
            "SIM_SEED={seed} cargo test -p logship-core --test sim_autoswitch swarm -- --nocapture".into(),
        print_trace: std::env::var("SIM_TRACE").is_ok(),
        ..SimConfig::default()
    }
}

fn run_all(seeds: Seeds, config: &SimConfig) -> Stats {
    let mut total = Stats::default();
    for seed in seeds {
        match run_seed(seed, config) {
            Ok(outcome) => total.merge(&outcome.stats),
            Err(failure) => panic!("\n{failure}"),
        }
    }
    total
}

#[test]
fn swarm_seeds_keep_every_autoswitch_invariant() {
    let seeds = seeds_from_env(0, 200);
    let total = run_all(seeds, &config());
    eprintln!("{} seed(s) from {:#x}:\n{total}", seeds.runs, seeds.start);
}
