use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::time::Instant;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn member(id: i64, epoch: i32, max_offset: u64) -> MemberState {
    MemberState {
        broker_id: id,
        epoch,
        max_offset,
        ha_addr: addr(10_000 + id as u16),
        http_addr: addr(20_000 + id as u16),
    }
}

fn record(epoch: i32, master: i64, set: &[i64], set_epoch: i32) -> GroupRecord {
    GroupRecord {
        master_epoch: epoch,
        master_id: master,
        master_ha_addr: addr(10_000 + master as u16),
        master_http_addr: addr(20_000 + master as u16),
        sync_state_set: set.iter().copied().collect(),
        sync_state_set_epoch: set_epoch,
    }
}

const GOOD: &str = "logship-group-record 1\nmasterEpoch=3\nmasterId=1\nmasterHaAddress=127.0.0.1:10912\n\
masterHttpAddress=[::1]:8080\nsyncStateSet=0,1,2\nsyncStateSetEpoch=4\n";

#[test]
fn group_record_encoding_is_the_documented_text() {
    let r = GroupRecord::decode(GOOD.as_bytes()).unwrap();
    assert_eq!(r.master_epoch, 3);
    assert_eq!(r.master_id, 1);
    assert_eq!(r.master_http_addr, "[::1]:8080".parse().unwrap());
    assert_eq!(r.sync_state_set, BTreeSet::from([0, 1, 2]));
    assert_eq!(r.sync_state_set_epoch, 4);
    assert_eq!(r.encode(), GOOD.as_bytes());
}

#[test]
fn group_record_decoder_refuses_malformed_values_with_typed_errors() {
    let with = |from: &str, to: &str| GOOD.replacen(from, to, 1);
    let cases: Vec<(String, RecordError)> = vec![
        (
            with("logship-group-record 1", "logship-group-record 2"),
            RecordError::UnsupportedVersion { found: 2 },
        ),
        (
            with("logship-group-record 1", "logship-group-recordx 1"),
            RecordError::BadHeader { expected: "logship-group-record" },
        ),
        (
            with("logship-group-record 1", "logship-group-record +1"),
            RecordError::BadHeader { expected: "logship-group-record" },
        ),
        (String::new(), RecordError::BadHeader { expected: "logship-group-record" }),
        (with("masterEpoch=3\n", ""), RecordError::MissingField { line: 2, expected: "masterEpoch" }),
        (
            GOOD.trim_end_matches("syncStateSetEpoch=4\n").to_owned(),
            RecordError::MissingField { line: 7, expected: "syncStateSetEpoch" },
        ),
        (with("masterEpoch=3", "masterEpoch=0"), bad("masterEpoch", "0", "must be at least 1")),
        (with("masterEpoch=3", "masterEpoch=-3"), bad("masterEpoch", "-3", "must be at least 1")),
        (with("masterEpoch=3", "masterEpoch=03"), bad("masterEpoch", "03", "not in canonical form")),
        (with("masterEpoch=3", "masterEpoch=+3"), bad("masterEpoch", "+3", "not a decimal integer")),
        (with("masterEpoch=3", "masterEpoch=2147483648"), bad("masterEpoch", "2147483648", "out of range")),
        (with("masterId=1", "masterId=-1"), bad("masterId", "-1", "must not be negative")),
        (with("masterId=1", "masterId=7"), RecordError::MasterNotInSet { master: 7 }),
        (
            with("127.0.0.1:10912", "localhost:10912"),
            bad("masterHaAddress", "localhost:10912", "not an IP:port socket address"),
        ),
        (
            with("127.0.0.1:10912", "127.0.0.1:0"),
            bad("masterHaAddress", "127.0.0.1:0", "not a reachable address (port 0 or unspecified IP)"),
        ),
        (
            with("127.0.0.1:10912", "0.0.0.0:10912"),
            bad("masterHaAddress", "0.0.0.0:10912", "not a reachable address (port 0 or unspecified IP)"),
        ),
        (
            with("[::1]:8080", "[0:0::1]:8080"),
            bad("masterHttpAddress", "[0:0::1]:8080", "not in canonical form"),
        ),
        (with("0,1,2", "0,2,1"), bad("syncStateSet", "0,2,1", "members are not strictly ascending")),
        (with("0,1,2", "0,1,1,2"), bad("syncStateSet", "0,1,1,2", "members are not strictly ascending")),
        (with("0,1,2", ""), bad("syncStateSet", "", "must hold at least the master")),
        (with("0,1,2", "0,1,"), bad("syncStateSet", "", "not a decimal integer")),
        (
            with("masterId=1\nmasterHa", "masterHa"),
            RecordError::MissingField { line: 3, expected: "masterId" },
        ),
        (with("masterId=1", "masterID=1"), RecordError::MissingField { line: 3, expected: "masterId" }),
        (format!("{GOOD}x=1\n"), RecordError::TrailingContent),
        (GOOD.trim_end_matches('\n').to_owned(), RecordError::Unterminated),
        (with("\n", "\r\n"), RecordError::BadHeader { expected: "logship-group-record" }),
    ];
    for (text, expected) in cases {
        assert_eq!(GroupRecord::decode(text.as_bytes()), Err(expected), "decoding {text:?}");
    }
    let mut huge = GOOD.as_bytes().to_vec();
    huge.resize(MAX_RECORD_LEN + 1, b'\n');
    assert_eq!(
        GroupRecord::decode(&huge),
        Err(RecordError::TooLong { len: MAX_RECORD_LEN + 1, max: MAX_RECORD_LEN })
    );
    assert_eq!(GroupRecord::decode(b"logship-group-record 1\n\xff\n"), Err(RecordError::NotUtf8));
    let big_set = (0..=MAX_SET_MEMBERS as i64).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    let text = with("0,1,2", &big_set);
    assert!(matches!(
        GroupRecord::decode(text.as_bytes()),
        Err(RecordError::BadValue { field: "syncStateSet", .. })
    ));
}

fn bad(field: &'static str, value: &str, reason: &'static str) -> RecordError {
    RecordError::BadValue { field, value: value.to_owned(), reason }
}

#[test]
fn member_state_round_trips_and_refuses_offsets_past_63_bits() {
    let m = member(2, 7, 3 << 30);
    assert_eq!(MemberState::decode(&m.encode()), Ok(m.clone()));
    let text = String::from_utf8(m.encode())
        .unwrap()
        .replace("maxOffset=3221225472", "maxOffset=9223372036854775808");
    assert_eq!(
        MemberState::decode(text.as_bytes()),
        Err(bad("maxOffset", "9223372036854775808", "exceeds RocketMQ's 63-bit offsets"))
    );
    assert_eq!(
        MemberState::decode(GOOD.as_bytes()),
        Err(RecordError::BadHeader { expected: "logship-group-member" })
    );
}

fn arb_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), 1..=u16::MAX).prop_map(|(ip, port)| SocketAddr::from((ip, port))),
        (any::<[u16; 8]>(), 1..=u16::MAX).prop_map(|(ip, port)| SocketAddr::from((ip, port))),
    ]
    .prop_filter("reachable", |a| !a.ip().is_unspecified())
}

fn arb_record() -> impl Strategy<Value = GroupRecord> {
    (
        1..=i32::MAX,
        0..=i64::MAX,
        arb_addr(),
        arb_addr(),
        prop::collection::btree_set(0..=i64::MAX, 0..20),
        1..=i32::MAX,
    )
        .prop_map(|(master_epoch, master_id, ha, http, mut set, set_epoch)| {
            set.insert(master_id);
            GroupRecord {
                master_epoch,
                master_id,
                master_ha_addr: ha,
                master_http_addr: http,
                sync_state_set: set,
                sync_state_set_epoch: set_epoch,
            }
        })
}

proptest! {
    #[test]
    fn group_record_round_trips(r in arb_record()) {
        prop_assert_eq!(GroupRecord::decode(&r.encode()), Ok(r));
    }

    #[test]
    fn member_state_round_trips(id in 0..=i64::MAX, epoch in 0..=i32::MAX, off in 0..=i64::MAX as u64, ha in arb_addr(), http in arb_addr()) {
        let m = MemberState { broker_id: id, epoch, max_offset: off, ha_addr: ha, http_addr: http };
        prop_assert_eq!(MemberState::decode(&m.encode()), Ok(m));
    }

    /// Fuzz-style: any bytes decode to an error or to the one record that encodes to them.
    #[test]
    fn group_record_decoder_accepts_only_canonical_encodings(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(r) = GroupRecord::decode(&bytes) {
            prop_assert_eq!(r.encode(), bytes.clone());
        }
        if let Ok(m) = MemberState::decode(&bytes) {
            prop_assert_eq!(m.encode(), bytes);
        }
    }

    /// Fuzz-style: one byte of a valid encoding changed, inserted or removed never panics and
    /// decodes only to a record that encodes back to exactly those bytes.
    #[test]
    fn mutated_group_record_is_refused_or_canonical(r in arb_record(), pos in any::<prop::sample::Index>(), byte in any::<u8>(), op in 0..3u8) {
        let mut bytes = r.encode();
        let i = pos.index(bytes.len());
        match op {
            0 => bytes[i] = byte,
            1 => bytes.insert(i, byte),
            _ => { bytes.remove(i); }
        }
        if let Ok(decoded) = GroupRecord::decode(&bytes) {
            prop_assert_eq!(decoded.encode(), bytes);
        }
    }
}

#[test]
fn live_master_means_no_election() {
    let r = record(3, 1, &[1, 2], 2);
    let live = [member(1, 3, 10), member(2, 3, 99)];
    assert_eq!(choose_master(Some(&r), true, &live, ElectionPolicy::default()), Choice::MasterAlive(1));
}

#[test]
fn a_restarted_master_without_its_mastership_competes_like_any_member() {
    // Broker 1 is the record's master, restarted: live as a member, its mastership gone.
    let r = record(3, 1, &[1, 2], 2);
    let live = [member(1, 3, 10), member(2, 3, 99)];
    assert_eq!(
        choose_master(Some(&r), false, &live, ElectionPolicy::default()),
        Choice::Elect { winner: 2, unclean: false }
    );
    let live = [member(1, 3, 100), member(2, 3, 99)];
    assert_eq!(
        choose_master(Some(&r), false, &live, ElectionPolicy::default()),
        Choice::Elect { winner: 1, unclean: false }
    );
    let next = elected_record(Some(&r), &live[0]).unwrap();
    assert_eq!((next.master_id, next.master_epoch), (1, 4));
}

#[test]
fn highest_epoch_then_offset_wins_compared_as_64_bit_integers() {
    let r = record(3, 1, &[1, 2, 3, 4], 2);
    let policy = ElectionPolicy::default();
    // RocketMQ #10578: `(int)(a - b)` ranks 3 GiB below 1 GiB (the difference wraps negative).
    let live = [member(2, 3, 1 << 30), member(3, 3, 3 << 30)];
    assert_eq!(choose_master(Some(&r), false, &live, policy), Choice::Elect { winner: 3, unclean: false });
    // Offsets 2^32 apart: the truncated difference is 0, a tie; the larger must win.
    let live = [member(2, 3, 5), member(3, 3, (1 << 32) + 5)];
    assert_eq!(choose_master(Some(&r), false, &live, policy), Choice::Elect { winner: 3, unclean: false });
    // The epoch ranks before the offset.
    let live = [member(2, 3, 1 << 40), member(4, 2, 1 << 41), member(3, 3, 1 << 41)];
    assert_eq!(choose_master(Some(&r), false, &live, policy), Choice::Elect { winner: 3, unclean: false });
    // A tie goes to the lowest id, whatever the order the members were read in.
    let live = [member(4, 3, 7), member(2, 3, 7)];
    assert_eq!(choose_master(Some(&r), false, &live, policy), Choice::Elect { winner: 2, unclean: false });
}

#[test]
fn only_live_members_of_the_set_compete_and_unclean_election_needs_the_policy() {
    let r = record(3, 1, &[1, 2], 2);
    // Broker 5 is outside the set, far ahead: a set member still wins.
    let live = [member(5, 3, 1 << 40), member(2, 3, 10)];
    assert_eq!(
        choose_master(Some(&r), false, &live, ElectionPolicy::default()),
        Choice::Elect { winner: 2, unclean: false }
    );
    // No set member is live: no election by default.
    let live = [member(5, 3, 1 << 40), member(6, 3, 10)];
    assert_eq!(choose_master(Some(&r), false, &live, ElectionPolicy::default()), Choice::NoCandidate);
    assert_eq!(choose_master(Some(&r), false, &[], ElectionPolicy { unclean: true }), Choice::NoCandidate);
    assert_eq!(
        choose_master(Some(&r), false, &live, ElectionPolicy { unclean: true }),
        Choice::Elect { winner: 5, unclean: true }
    );
    // Before the first election every live broker competes.
    assert_eq!(
        choose_master(None, false, &live, ElectionPolicy::default()),
        Choice::Elect { winner: 5, unclean: false }
    );
}

#[test]
fn elected_record_writes_the_next_epoch_and_a_set_of_the_winner_only() {
    let r = record(3, 1, &[1, 2, 3], 5);
    let next = elected_record(Some(&r), &member(2, 3, 10)).unwrap();
    assert_eq!(next, GroupRecord { sync_state_set_epoch: 6, ..record(4, 2, &[2], 6) });
    // A winner whose log holds an epoch above the record's (the record was lost): above both.
    let next = elected_record(None, &member(2, 9, 10)).unwrap();
    assert_eq!((next.master_epoch, next.sync_state_set_epoch), (10, 1));
    let r = record(i32::MAX, 1, &[1, 2], 5);
    assert_eq!(elected_record(Some(&r), &member(2, 3, 10)), Err(ElectionError::EpochExhausted));
}

#[test]
fn set_change_only_by_the_master_of_the_current_epochs() {
    let r = record(4, 1, &[1, 2, 3], 6);
    let change = |proposer, epoch, set_epoch, set: &[i64]| SetChange {
        proposer,
        master_epoch: epoch,
        sync_state_set_epoch: set_epoch,
        new_set: set.iter().copied().collect(),
    };
    assert_eq!(
        apply_set_change(&r, &change(1, 4, 6, &[1, 2])),
        Ok(GroupRecord { sync_state_set_epoch: 7, ..record(4, 1, &[1, 2], 7) })
    );
    // An old master of epoch 3 still thinking it is master.
    assert_eq!(
        apply_set_change(&record(4, 1, &[1, 2, 3], 6), &change(1, 3, 6, &[1])),
        Err(SetChangeRefusal::StaleMasterEpoch { proposed: 3, current: 4 })
    );
    assert_eq!(
        apply_set_change(&r, &change(2, 4, 6, &[2])),
        Err(SetChangeRefusal::NotMaster { proposer: 2, master: 1 })
    );
    assert_eq!(
        apply_set_change(&r, &change(1, 4, 5, &[1])),
        Err(SetChangeRefusal::StaleSetEpoch { proposed: 5, current: 6 })
    );
    assert_eq!(
        apply_set_change(&r, &change(1, 4, 6, &[2, 3])),
        Err(SetChangeRefusal::MasterNotInSet { master: 1 })
    );
    assert_eq!(apply_set_change(&r, &change(1, 4, 6, &[1, 2, 3])), Err(SetChangeRefusal::Unchanged));
    assert_eq!(apply_set_change(&r, &change(1, 4, 6, &[-1, 1])), Err(SetChangeRefusal::InvalidMember(-1)));
    let big: Vec<i64> = (1..=MAX_SET_MEMBERS as i64 + 1).collect();
    assert_eq!(
        apply_set_change(&r, &change(1, 4, 6, &big)),
        Err(SetChangeRefusal::TooLarge(MAX_SET_MEMBERS + 1))
    );
}

#[test]
fn memory_record_swaps_only_at_the_expected_revision() {
    let mut cell = MemoryRecord::new();
    assert_eq!(cell.read(), (0, None));
    let r = record(1, 1, &[1], 1);
    assert_eq!(cell.compare_and_swap(0, r.clone()), Ok(1));
    assert_eq!(cell.compare_and_swap(0, r.clone()), Err(CasConflict { expected: 0, found: 1 }));
    assert_eq!(cell.read(), (1, Some(&r)));
}

#[derive(Clone, Debug)]
enum Step {
    /// Contender `i` reads the record.
    Read(usize),
    /// Contender `i` campaigns from what it last read, seeing the contenders in `live` as live.
    Campaign(usize, u8),
    /// Contender `i` proposes a set from what it last read.
    Propose(usize, u8),
}

fn arb_step(n: usize) -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..n).prop_map(Step::Read),
        (0..n, any::<u8>()).prop_map(|(i, live)| Step::Campaign(i, live)),
        (0..n, any::<u8>()).prop_map(|(i, set)| Step::Propose(i, set)),
    ]
}

proptest! {
    /// No two masters in one epoch, epochs only grow, and every committed set change is the
    /// master's of that epoch, under any interleaving of reads and compare-and-swap attempts
    /// from stale reads.
    #[test]
    fn no_two_masters_in_one_epoch_under_any_interleaving(
        steps in prop::collection::vec(arb_step(5), 1..120),
        offsets in prop::collection::vec(0..4u64, 5),
        unclean in any::<bool>(),
    ) {
        let policy = ElectionPolicy { unclean };
        let mut cell = MemoryRecord::new();
        let mut reads: Vec<(Revision, Option<GroupRecord>)> = vec![(0, None); 5];
        let mut masters: BTreeMap<i32, i64> = BTreeMap::new();
        let mut last: Option<GroupRecord> = None;
        for step in steps {
            let (i, proposal) = match step {
                Step::Read(i) => {
                    let (rev, r) = cell.read();
                    reads[i] = (rev, r.cloned());
                    continue;
                }
                Step::Campaign(i, live) => {
                    let live: Vec<MemberState> = (0..5)
                        .filter(|&j| j == i || live & (1 << j) != 0)
                        .map(|j| member(j as i64, reads[j].1.as_ref().map_or(0, |r| r.master_epoch), offsets[j] << 31))
                        .collect();
                    let (_, read) = &reads[i];
                    let master_live = read.as_ref().is_some_and(|r| live.iter().any(|m| m.broker_id == r.master_id));
                    match choose_master(read.as_ref(), master_live, &live, policy) {
                        Choice::Elect { winner, .. } if winner == i as i64 => {
                            let me = live.iter().find(|m| m.broker_id == winner).unwrap();
                            (i, elected_record(read.as_ref(), me).unwrap())
                        }
                        _ => continue,
                    }
                }
                Step::Propose(i, set) => {
                    let Some(read) = reads[i].1.clone() else { continue };
                    let change = SetChange {
                        proposer: i as i64,
                        master_epoch: read.master_epoch,
                        sync_state_set_epoch: read.sync_state_set_epoch,
                        new_set: (0..5).filter(|&j| j == i || set & (1 << j) != 0).map(|j| j as i64).collect(),
                    };
                    match apply_set_change(&read, &change) {
                        Ok(next) => (i, next),
                        Err(_) => continue,
                    }
                }
            };
            if cell.compare_and_swap(reads[i].0, proposal.clone()).is_ok() {
                // Every committed record: the master is in its set, and no epoch has two masters.
                prop_assert!(proposal.sync_state_set.contains(&proposal.master_id));
                let master = *masters.entry(proposal.master_epoch).or_insert(proposal.master_id);
                prop_assert_eq!(master, proposal.master_id, "two masters in epoch {}", proposal.master_epoch);
                if let Some(prev) = &last {
                    prop_assert!(proposal.master_epoch >= prev.master_epoch);
                    prop_assert!(proposal.sync_state_set_epoch > prev.sync_state_set_epoch);
                    if proposal.master_epoch == prev.master_epoch {
                        // A set change: made by that epoch's master only.
                        prop_assert_eq!(proposal.master_id, prev.master_id);
                        prop_assert_eq!(i as i64, prev.master_id);
                    } else {
                        prop_assert_eq!(proposal.sync_state_set.len(), 1);
                    }
                }
                last = Some(proposal);
            }
        }
    }
}

#[test]
fn lease_guard_is_closed_until_the_first_renewal() {
    let guard = LeaseGuard::new(Duration::from_millis(500));
    assert!(!guard.is_open(Instant::ZERO));
    assert_eq!(guard.open_until(), None);
}

#[test]
fn lease_guard_closes_the_margin_before_the_lease_could_expire() {
    let mut guard = LeaseGuard::new(Duration::from_millis(500));
    guard.renewed(Instant::from_millis(1_000), Duration::from_secs(3));
    assert_eq!(guard.open_until(), Some(Instant::from_millis(3_500)));
    assert!(guard.is_open(Instant::from_millis(3_499)));
    assert!(!guard.is_open(Instant::from_millis(3_500)));
    // A later renewal extends it; a late answer to an earlier request does not move it back.
    guard.renewed(Instant::from_millis(2_000), Duration::from_secs(3));
    guard.renewed(Instant::from_millis(1_500), Duration::from_secs(3));
    assert_eq!(guard.open_until(), Some(Instant::from_millis(4_500)));
    // A TTL no larger than the margin never opens it.
    let mut short = LeaseGuard::new(Duration::from_secs(2));
    short.renewed(Instant::ZERO, Duration::from_secs(2));
    assert!(!short.is_open(Instant::ZERO));
}

#[test]
fn lost_lease_closes_the_guard_for_good() {
    let mut guard = LeaseGuard::new(Duration::from_millis(500));
    guard.renewed(Instant::ZERO, Duration::from_secs(3));
    // etcd answers a keep-alive of an expired lease with TTL 0.
    guard.renewed(Instant::from_millis(100), Duration::ZERO);
    assert!(guard.is_lost());
    assert!(!guard.is_open(Instant::from_millis(100)));
    guard.renewed(Instant::from_millis(200), Duration::from_secs(3));
    assert!(!guard.is_open(Instant::from_millis(200)));
    assert!(!guard.snapshot().is_open(Instant::from_millis(200)));
}

#[test]
fn lease_config_refuses_settings_that_cannot_fence() {
    assert_eq!(LeaseConfig::default().validate(), Ok(()));
    let with = |ttl, margin, renew| LeaseConfig { ttl, margin, renew_interval: renew };
    let s = Duration::from_secs;
    let ms = Duration::from_millis;
    assert_eq!(with(ms(1500), ms(100), ms(100)).validate(), Err(LeaseConfigError::Ttl(ms(1500))));
    assert_eq!(with(s(0), ms(100), ms(100)).validate(), Err(LeaseConfigError::Ttl(s(0))));
    assert_eq!(with(s(3), s(0), s(1)).validate(), Err(LeaseConfigError::ZeroMargin));
    assert_eq!(
        with(s(3), s(3), s(1)).validate(),
        Err(LeaseConfigError::MarginTooLarge { margin: s(3), ttl: s(3) })
    );
    assert_eq!(
        with(s(3), s(1), s(2)).validate(),
        Err(LeaseConfigError::RenewTooSlow { interval: s(2), open: s(2) })
    );
    assert_eq!(
        with(s(3), s(1), s(0)).validate(),
        Err(LeaseConfigError::RenewTooSlow { interval: s(0), open: s(2) })
    );
}

// ---- the audit of the group's keys ----

fn key(master: i64, epoch: i32, lease: i64, holder_live: bool) -> MastershipKey {
    MastershipKey::Present(Mastership {
        broker_id: master,
        master_epoch: epoch,
        lease,
        holder_live,
        revision: 1,
    })
}

fn view_of(
    revision: Revision,
    record: Option<GroupRecord>,
    mastership: MastershipKey,
    live: &[i64],
) -> GroupView {
    let master_live = record.as_ref().is_some_and(|r| mastership.holds(r));
    GroupView {
        record_revision: record.as_ref().map(|_| revision),
        record: record.map(|value| Versioned { revision, value }),
        record_error: None,
        master_live,
        mastership,
        live: live.iter().map(|&id| member(id, 1, 0)).collect(),
        unreadable_members: Vec::new(),
    }
}

/// A group of three whose master 1 of epoch 3 holds its mastership, as a broker's audit has
/// trusted it.
fn trusting_audit() -> (RecordAudit, GroupRecord) {
    let mut audit = RecordAudit::new();
    let good = record(3, 1, &[1, 2, 3], 5);
    let verdict = audit.check(&view_of(10, Some(good.clone()), key(1, 3, 7, true), &[1, 2, 3]));
    assert!(verdict.trusted && verdict.master_live && verdict.anomalies.is_empty(), "{verdict:?}");
    (audit, good)
}

#[test]
fn the_records_the_protocol_writes_are_trusted() {
    let (mut audit, good) = trusting_audit();
    // A set change by the master: same epoch and addresses, the set epoch one up.
    let shrunk = GroupRecord { sync_state_set: [1, 2].into(), sync_state_set_epoch: 6, ..good.clone() };
    let v = audit.check(&view_of(11, Some(shrunk.clone()), key(1, 3, 7, true), &[1, 2]));
    assert!(v.trusted && v.master_live && v.anomalies.is_empty(), "{v:?}");
    // The master's lease expires (its keys vanish): trusted, no master.
    let v = audit.check(&view_of(11, Some(shrunk.clone()), MastershipKey::Absent, &[2]));
    assert!(v.trusted && !v.master_live && v.act, "{v:?}");
    // An election by broker 2: a later epoch with its mastership key.
    let elected = elected_record(Some(&shrunk), &member(2, 3, 0)).unwrap();
    let v = audit.check(&view_of(12, Some(elected.clone()), key(2, 4, 8, true), &[2]));
    assert!(v.trusted && v.master_live && v.anomalies.is_empty(), "{v:?}");
    assert_eq!(v.record.map(|r| r.value), Some(elected));
    // The operator deletes the group (record and mastership): a fresh group, trusted.
    let v = audit.check(&view_of(0, None, MastershipKey::Absent, &[1, 2]));
    assert!(v.trusted && v.record.is_none() && v.anomalies.is_empty(), "{v:?}");
}

#[test]
fn a_record_no_election_wrote_is_refused_and_the_trusted_one_acted_on() {
    let (audit, good) = trusting_audit();
    // Broker 2 named master of epoch 4 while broker 1 holds the mastership of epoch 3.
    let forged = GroupRecord { master_epoch: 4, master_id: 2, sync_state_set: [2].into(), ..good.clone() };
    let v = audit.clone().check(&view_of(11, Some(forged), key(1, 3, 7, true), &[1, 2, 3]));
    assert!(!v.trusted && v.act && v.master_live, "the healthy master keeps its place: {v:?}");
    assert_eq!(v.record.as_ref().map(|r| &r.value), Some(&good));
    assert!(
        matches!(
            v.anomalies[..],
            [RecordAnomaly::MismatchesMastership { record_master: 2, key_master: 1, .. }]
        ),
        "{v:?}"
    );
    // The record deleted while broker 1 holds the mastership.
    let v = audit.clone().check(&view_of(0, None, key(1, 3, 7, true), &[1, 2, 3]));
    assert!(!v.trusted && v.master_live, "{v:?}");
    assert!(matches!(v.anomalies[..], [RecordAnomaly::MissingWithLiveMastership { key_master: 1, .. }]));
    // A record that does not decode (a set without its master).
    let mut undecodable = view_of(11, None, key(1, 3, 7, true), &[1, 2, 3]);
    undecodable.record_error =
        Some(Versioned { revision: 11, value: RecordError::MasterNotInSet { master: 1 } });
    undecodable.record_revision = Some(11);
    let v = audit.clone().check(&undecodable);
    assert!(!v.trusted && v.master_live && v.act, "{v:?}");
    assert!(
        v.anomalies.iter().any(|a| matches!(a, RecordAnomaly::Undecodable { revision: 11, .. })),
        "{v:?}"
    );
    assert!(v.anomalies[0].to_string().contains("does not decode"), "{}", v.anomalies[0]);
}

#[test]
fn epochs_going_back_second_masters_moved_addresses_and_strangers_are_refused() {
    let (audit, good) = trusting_audit();
    let cases = [
        (GroupRecord { master_epoch: 2, ..good.clone() }, "went back from 3 to 2"),
        (GroupRecord { sync_state_set_epoch: 4, ..good.clone() }, "epoch went back from 5 to 4"),
        (
            GroupRecord { master_ha_addr: addr(6666), sync_state_set_epoch: 6, ..good.clone() },
            "moved master 1",
        ),
        (
            GroupRecord { sync_state_set: [1, 99, 100].into(), sync_state_set_epoch: 6, ..good.clone() },
            "99, 100",
        ),
    ];
    for (forged, words) in cases {
        let key = key(forged.master_id, forged.master_epoch, 7, true);
        let v = audit.clone().check(&view_of(11, Some(forged.clone()), key, &[1, 2, 3]));
        assert!(!v.trusted, "{forged:?} was trusted");
        assert_eq!(v.record.as_ref().map(|r| &r.value), Some(&good), "the trusted record is acted on");
        assert!(v.anomalies.iter().any(|a| a.to_string().contains(words)), "{words}: {:?}", v.anomalies);
    }
    // A second master in epoch 3, even holding a (forged) mastership key.
    let second =
        GroupRecord { master_id: 2, sync_state_set: [2].into(), sync_state_set_epoch: 6, ..good.clone() };
    let v = audit.clone().check(&view_of(11, Some(second), key(2, 3, 9, true), &[1, 2, 3]));
    assert!(!v.trusted && !v.master_live, "{v:?}");
    assert!(
        v.anomalies
            .iter()
            .any(|a| matches!(a, RecordAnomaly::SecondMasterInEpoch { epoch: 3, first: 1, second: 2 }))
    );
    // A member that joined the group (published) may join the set.
    let grown = GroupRecord { sync_state_set: [1, 2, 3, 4].into(), sync_state_set_epoch: 6, ..good };
    let v = audit.clone().check(&view_of(11, Some(grown), key(1, 3, 7, true), &[1, 2, 3, 4]));
    assert!(v.trusted, "{v:?}");
}

#[test]
fn a_mastership_key_without_a_lease_or_of_a_stranger_counts_as_no_master() {
    let (audit, good) = trusting_audit();
    for (key, words) in [(key(1, 3, 0, true), "has no lease"), (key(1, 3, 7, false), "does not hold")] {
        assert!(!key.holds(&good), "{key:?}");
        let v = audit.clone().check(&view_of(10, Some(good.clone()), key, &[2, 3]));
        assert!(v.trusted && !v.master_live, "the record is fine, the key holds nothing: {v:?}");
        assert!(v.anomalies.iter().any(|a| a.to_string().contains(words)), "{:?}", v.anomalies);
    }
    assert_eq!(Mastership::parse(b"1 3"), Some((1, 3)));
    for bad in [&b"1"[..], b"1 0", b"01 3", b"1 3 ", b"-1 3", b"x 3", b"1  3"] {
        assert_eq!(Mastership::parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn with_nothing_trusted_an_untrusted_record_is_not_acted_on() {
    let mut audit = RecordAudit::new();
    let forged = record(4, 2, &[2], 1);
    let v = audit.check(&view_of(3, Some(forged), key(1, 3, 7, true), &[1, 2]));
    assert!(!v.trusted && !v.act && v.record.is_none(), "{v:?}");
}
