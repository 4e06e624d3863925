//! SYNC_MASTER replication waits: per-connection acks, policies, up-front decisions, exact
//! deadlines, event-driven completion in offset order.

mod common;

use common::*;
use logship_core::classic::*;
use logship_core::*;

/// A master at `end` with one streaming connection per entry of `firsts` (first report each),
/// every transmit already written.
fn master_with(policy: AckPolicy, end: Offset, firsts: &[Offset], clock: &Clock) -> Master {
    let config = MasterConfig { ack_policy: policy, ha_max_gap_not_in_sync: 1_000, ..master_config() };
    let mut m = Master::new(config, clock.at(0), LogBounds { min: 0, max: end }).unwrap();
    for (i, &first) in firsts.iter().enumerate() {
        let conn = ConnId(i as u64 + 1);
        m.handle_input(clock.at(0), MasterInput::Accepted { conn }).unwrap();
        m.handle_input(clock.at(0), MasterInput::Received { conn, data: report(first) }).unwrap();
    }
    let out = drain_master(&mut m).0;
    sent_all(&mut m, clock.at(0), &out);
    m
}

fn ack(m: &mut Master, clock: &Clock, ms: u64, conn: u64, offset: Offset) -> Vec<MasterOutput> {
    m.handle_input(clock.at(ms), MasterInput::Received { conn: ConnId(conn), data: report(offset) }).unwrap();
    drain_master(m).0
}

fn wait(
    m: &mut Master,
    clock: &Clock,
    ms: u64,
    id: u64,
    offset: Offset,
    deadline_ms: u64,
) -> Vec<MasterOutput> {
    let input = MasterInput::AwaitReplication { id: WaitId(id), offset, deadline: clock.at(deadline_ms) };
    m.handle_input(clock.at(ms), input).unwrap();
    drain_master(m).0
}

#[test]
fn wait_completes_when_a_slave_acks_the_end_of_the_message() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[100], &clock);
    m.handle_input(clock.at(1), MasterInput::Appended { end: 229 }).unwrap();
    let out = drain_master(&mut m).0;
    sent_all(&mut m, clock.at(1), &out);
    assert!(wait_results(&wait(&mut m, &clock, 1, 7, 229, 3_001)).is_empty());
    assert!(wait_results(&ack(&mut m, &clock, 2, 1, 228)).is_empty(), "one byte short");
    assert_eq!(wait_results(&ack(&mut m, &clock, 3, 1, 229)), [(WaitId(7), Ok(229))]);
    assert_eq!(m.pending_waits(), 0);
}

#[test]
fn wait_already_covered_completes_at_once() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[100], &clock);
    assert_eq!(wait_results(&wait(&mut m, &clock, 0, 1, 80, 10)), [(WaitId(1), Ok(80))]);
}

#[test]
fn wait_times_out_exactly_at_the_deadline() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[0], &clock);
    let out = wait(&mut m, &clock, 0, 1, 100, 3_000);
    assert!(wait_results(&out).is_empty());
    let (_, timeout) = drain_master(&mut m);
    assert_eq!(timeout, clock.at(3_000), "the deadline is a timer, not a polling loop");
    m.handle_timeout(clock.at(2_999));
    assert!(wait_results(&drain_master(&mut m).0).is_empty());
    // An ack arriving exactly at the deadline is too late: the deadline check runs first.
    let out = ack(&mut m, &clock, 3_000, 1, 100);
    assert_eq!(wait_results(&out), [(WaitId(1), Err(WaitError::Timeout))]);
}

#[test]
fn ack_just_before_the_deadline_succeeds() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[0], &clock);
    let _ = wait(&mut m, &clock, 0, 1, 100, 3_000);
    assert_eq!(wait_results(&ack(&mut m, &clock, 2_999, 1, 100)), [(WaitId(1), Ok(100))]);
}

#[test]
fn completions_are_in_offset_order_without_head_of_line_blocking() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 300, &[0], &clock);
    // Arrival order differs from offset order; a far wait does not hold up near ones.
    let _ = wait(&mut m, &clock, 0, 1, 300, 3_000);
    let _ = wait(&mut m, &clock, 0, 2, 100, 3_000);
    let _ = wait(&mut m, &clock, 0, 3, 200, 3_000);
    assert_eq!(wait_results(&ack(&mut m, &clock, 1, 1, 250)), [(WaitId(2), Ok(100)), (WaitId(3), Ok(200))]);
    assert_eq!(m.pending_waits(), 1);
}

#[test]
fn no_slave_is_slave_not_available_up_front() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[], &clock);
    assert_eq!(
        wait_results(&wait(&mut m, &clock, 0, 1, 100, 3_000)),
        [(WaitId(1), Err(WaitError::SlaveNotAvailable))]
    );
}

#[test]
fn a_connected_slave_that_has_not_reported_is_not_available() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[], &clock);
    m.handle_input(clock.at(0), MasterInput::Accepted { conn: ConnId(9) }).unwrap();
    assert_eq!(
        wait_results(&wait(&mut m, &clock, 0, 1, 100, 3_000)),
        [(WaitId(1), Err(WaitError::SlaveNotAvailable))]
    );
}

#[test]
fn gap_of_ha_max_gap_not_in_sync_is_slave_not_available() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 1_500, &[500], &clock); // gap 1000 == limit
    assert_eq!(
        wait_results(&wait(&mut m, &clock, 0, 1, 1_500, 3_000)),
        [(WaitId(1), Err(WaitError::SlaveNotAvailable))]
    );
    let _ = ack(&mut m, &clock, 1, 1, 501); // gap 999
    assert!(wait_results(&wait(&mut m, &clock, 1, 2, 1_500, 3_000)).is_empty());
}

#[test]
fn quorum_of_three_needs_two_slaves() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::Quorum { in_sync_replicas: 3 }, 100, &[100, 100], &clock);
    m.handle_input(clock.at(1), MasterInput::Appended { end: 200 }).unwrap();
    let out = drain_master(&mut m).0;
    sent_all(&mut m, clock.at(1), &out);
    let _ = wait(&mut m, &clock, 1, 1, 200, 3_000);
    assert!(wait_results(&ack(&mut m, &clock, 2, 1, 200)).is_empty(), "one slave plus the master is two");
    assert_eq!(wait_results(&ack(&mut m, &clock, 3, 2, 200)), [(WaitId(1), Ok(200))]);
}

#[test]
fn quorum_that_cannot_be_met_is_in_sync_replicas_not_enough_up_front() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::Quorum { in_sync_replicas: 3 }, 100, &[100], &clock);
    assert_eq!(
        wait_results(&wait(&mut m, &clock, 0, 1, 100, 3_000)),
        [(WaitId(1), Err(WaitError::InSyncReplicasNotEnough))]
    );
}

#[test]
fn all_in_sync_waits_for_every_in_sync_slave() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AllInSync, 100, &[100, 100], &clock);
    m.handle_input(clock.at(1), MasterInput::Appended { end: 200 }).unwrap();
    let out = drain_master(&mut m).0;
    sent_all(&mut m, clock.at(1), &out);
    let _ = wait(&mut m, &clock, 1, 1, 200, 3_000);
    assert!(wait_results(&ack(&mut m, &clock, 2, 2, 200)).is_empty());
    assert_eq!(wait_results(&ack(&mut m, &clock, 3, 1, 200)), [(WaitId(1), Ok(200))]);
}

#[test]
fn acks_are_per_connection_so_a_closed_slave_satisfies_nothing() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[100, 0], &clock);
    m.handle_input(clock.at(1), MasterInput::Closed { conn: ConnId(1) }).unwrap();
    let _ = drain_master(&mut m);
    // RocketMQ's global push2SlaveMaxOffset would still say 100 here.
    assert!(wait_results(&wait(&mut m, &clock, 1, 1, 100, 3_000)).is_empty());
    assert_eq!(m.replicated(), Some(0));
}

#[test]
fn a_reconnecting_slave_does_not_satisfy_waits_with_a_stale_ack() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[50], &clock);
    let _ = wait(&mut m, &clock, 0, 1, 100, 3_000);
    // The same slave reconnects on a new connection after losing bytes: it reports 40.
    m.handle_input(clock.at(1), MasterInput::Closed { conn: ConnId(1) }).unwrap();
    m.handle_input(clock.at(1), MasterInput::Accepted { conn: ConnId(2) }).unwrap();
    m.handle_input(clock.at(1), MasterInput::Received { conn: ConnId(2), data: report(40) }).unwrap();
    assert!(wait_results(&drain_master(&mut m).0).is_empty());
    assert_eq!(m.replicated(), Some(40));
}

#[test]
fn forged_ack_releases_no_waiter() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[100], &clock);
    m.handle_input(clock.at(1), MasterInput::Appended { end: 200 }).unwrap();
    let _ = wait(&mut m, &clock, 1, 1, 200, 3_000);
    // An intruder connects and claims far more than it was sent.
    m.handle_input(clock.at(2), MasterInput::Accepted { conn: ConnId(66) }).unwrap();
    m.handle_input(clock.at(2), MasterInput::Received { conn: ConnId(66), data: report(100) }).unwrap();
    let out = drain_master(&mut m).0;
    assert!(wait_results(&out).is_empty());
    let out = ack(&mut m, &clock, 3, 66, 1 << 40);
    assert!(wait_results(&out).is_empty());
    assert_eq!(closes(&out).len(), 1);
    assert_eq!(m.pending_waits(), 1);
}

#[test]
fn a_completed_wait_is_never_revoked() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[100], &clock);
    let out = wait(&mut m, &clock, 0, 1, 100, 3_000);
    assert_eq!(wait_results(&out), [(WaitId(1), Ok(100))]);
    m.handle_input(clock.at(1), MasterInput::Closed { conn: ConnId(1) }).unwrap();
    m.handle_timeout(clock.at(5_000));
    assert!(wait_results(&drain_master(&mut m).0).is_empty());
}

#[test]
fn cancelled_wait_ends_in_exactly_one_wait_done() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[0], &clock);
    let _ = wait(&mut m, &clock, 0, 1, 100, 3_000);
    m.handle_input(clock.at(1), MasterInput::CancelWait { id: WaitId(1) }).unwrap();
    assert_eq!(wait_results(&drain_master(&mut m).0), [(WaitId(1), Err(WaitError::Cancelled))]);
    m.handle_input(clock.at(1), MasterInput::CancelWait { id: WaitId(1) }).unwrap();
    m.handle_timeout(clock.at(3_000));
    assert!(wait_results(&drain_master(&mut m).0).is_empty());
}

#[test]
fn wait_misuse_is_refused() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[0], &clock);
    let _ = wait(&mut m, &clock, 0, 1, 100, 3_000);
    let dup = MasterInput::AwaitReplication { id: WaitId(1), offset: 50, deadline: clock.at(9) };
    assert_eq!(m.handle_input(clock.at(0), dup), Err(ApiMisuse::DuplicateWait(WaitId(1))));
    let beyond = MasterInput::AwaitReplication { id: WaitId(2), offset: 101, deadline: clock.at(9) };
    assert_eq!(m.handle_input(clock.at(0), beyond), Err(ApiMisuse::WaitBeyondEnd { offset: 101, end: 100 }));
}

/// Waits count every streaming connection's ack, however many slaves there are (more than a
/// master keeps inline for its per-put checks).
#[test]
fn a_quorum_of_ten_among_twelve_slaves_counts_every_connections_ack() {
    let clock = Clock::new();
    let firsts = [100; 12];
    let mut m = master_with(AckPolicy::Quorum { in_sync_replicas: 11 }, 100, &firsts, &clock);
    m.handle_input(clock.at(1), MasterInput::Appended { end: 200 }).unwrap();
    let out = drain_master(&mut m).0;
    sent_all(&mut m, clock.at(1), &out);
    assert!(wait_results(&wait(&mut m, &clock, 1, 1, 200, 3_001)).is_empty());
    for conn in 1..=9 {
        assert!(wait_results(&ack(&mut m, &clock, 2, conn, 200)).is_empty(), "{conn} of 10 acked");
    }
    assert_eq!(wait_results(&ack(&mut m, &clock, 3, 12, 200)), [(WaitId(1), Ok(200))]);
}

/// Under AnySlave, the one connection that acked counts even when it is the last of many.
#[test]
fn any_slave_counts_the_ack_of_the_last_of_many_connections() {
    let clock = Clock::new();
    let mut m = master_with(AckPolicy::AnySlave, 100, &[100; 11], &clock);
    m.handle_input(clock.at(1), MasterInput::Appended { end: 300 }).unwrap();
    let out = drain_master(&mut m).0;
    sent_all(&mut m, clock.at(1), &out);
    assert!(wait_results(&wait(&mut m, &clock, 1, 1, 300, 3_001)).is_empty());
    assert_eq!(wait_results(&ack(&mut m, &clock, 2, 11, 300)), [(WaitId(1), Ok(300))]);
}
