//! Bugs planted in shipped code paths (`logship_core::planted`): a sweep of simulator seeds
//! fails with each one planted, and the seed that failed passes without it. So a change that
//! reintroduces one of these bugs fails the simulator's seed sweeps. Debug builds only: a
//! release build has no planted bug.
//!
//! Run: `cargo test -p logship-core --test sim_planted -- --nocapture` (prints the seed each
//! bug fails first, and its violation).
#![cfg(debug_assertions)]

use std::time::Duration;

use logship_core::planted::{Plant, with_planted};
use logship_core::sim::{Protocol, SimConfig, Violation, run_seed};

/// Seeds a sweep runs at most before it must have failed.
const SWEEP: u64 = 100;

fn classic() -> SimConfig {
    SimConfig {
        replay_command: "a planted bug: see core/tests/sim_planted.rs (seed {seed})".into(),
        ..SimConfig::default()
    }
}

fn autoswitch() -> SimConfig {
    SimConfig {
        protocol: Protocol::AutoSwitch,
        fault_time: Duration::from_secs(8),
        liveness_timeout: Duration::from_secs(60),
        ..classic()
    }
}

/// With `plant` planted, a sweep of at most [`SWEEP`] seeds fails with a violation `expected`
/// accepts, and the seed that failed passes unplanted.
fn the_sweep_catches(plant: Plant, config: &SimConfig, expected: fn(&Violation) -> bool) {
    let found = with_planted(plant, || {
        (0..SWEEP).find_map(|seed| run_seed(seed, config).err().map(|f| (seed, f.violation)))
    });
    let Some((seed, violation)) = found else {
        panic!("{plant:?} planted: no seed of 0..{SWEEP} failed, the simulator misses this bug");
    };
    eprintln!("{plant:?} planted: seed {seed:#x} fails: {violation}");
    assert!(expected(&violation), "{plant:?} planted: seed {seed:#x} failed otherwise: {violation:?}");
    if let Err(f) = run_seed(seed, config) {
        panic!("seed {seed:#x} fails without the bug too:\n{f}");
    }
}

#[test]
fn a_master_acknowledging_without_its_lease_fence_fails_a_seed() {
    the_sweep_catches(Plant::LeaseFenceRemoved, &autoswitch(), |v| {
        matches!(v, Violation::AckedWithoutLease { .. })
    });
}

#[test]
fn a_classic_slave_reporting_bytes_before_they_are_stored_fails_a_seed() {
    the_sweep_catches(Plant::ReportBeforeStore, &classic(), |v| {
        matches!(v, Violation::ReportBeyondStored { .. })
    });
}

#[test]
fn an_autoswitch_slave_acknowledging_unflushed_bytes_fails_a_seed() {
    // A slave that acknowledges only durable bytes loses the unflushed ones in a machine crash:
    // the group's confirmOffset then names bytes no sync-state-set member holds.
    the_sweep_catches(Plant::AckBeforeFlush, &autoswitch(), |v| {
        matches!(
            v,
            Violation::ExposedBeyondHeld { .. }
                | Violation::AckedNotOnMaster { .. }
                | Violation::AckedTruncated { .. }
                | Violation::ConfirmedDiffer { .. }
        )
    });
}

#[test]
fn nothing_is_planted_outside_with_planted() {
    // The hooks are per thread and removed after: the seeds the sweeps failed pass here.
    with_planted(Plant::LeaseFenceRemoved, || ());
    for seed in [1, 21, 29] {
        run_seed(seed, &classic()).unwrap_or_else(|f| panic!("\n{f}"));
        run_seed(seed, &autoswitch()).unwrap_or_else(|f| panic!("\n{f}"));
    }
}
