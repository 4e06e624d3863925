//! The checker, run at the end of every fault run over the stopped brokers' stores:
//! - every `PUT_OK` message is on the final master (at the offset its answer named) and on every
//!   member of the final sync-state-set;
//! - every replica's commit log is a byte-identical prefix of the master's;
//! - no two brokers acknowledged puts in one epoch, and every acknowledged offset lies in its
//!   epoch's range of the master's epoch file;
//! - no message is stored twice (each was sent once).
//!
//! The fencing checks ([`acks_sent_after`]) and the unavailability window
//! ([`first_ack_after`]) work on the workload's record alone.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use logship_store::LogSpan;
use logship_store::codec::BLANK_MAGIC_CODE;
use logship_store::{CommitLog, StoreConfig, StoredMessage};

use super::workload::Ack;

/// The commit-log segment size of every test broker (`mappedFileSizeCommitLog`, TEST_SETTINGS).
pub const SEGMENT: u64 = 1 << 20;

/// One broker's store as the checker sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replica {
    /// Its `brokerId`.
    pub broker: i64,
    /// The commit log's bytes from offset 0 to its max offset.
    pub log: Vec<u8>,
    /// `(offset, body)` of every message in the log, in order.
    pub messages: Vec<(u64, String)>,
    /// Its epoch file: `(epoch, start offset)`, ascending.
    pub epochs: Vec<(i32, u64)>,
}

/// Reads broker `broker`'s stopped store in `dir` with logship_store.
pub fn read_replica(broker: i64, dir: &Path) -> Result<Replica, String> {
    let mut config = StoreConfig::default();
    config.mapped_file_size_commit_log = SEGMENT;
    config.max_message_size = 262_144;
    let store =
        CommitLog::open(dir, config).map_err(|e| format!("broker {broker}: open {}: {e}", dir.display()))?;
    let (min, max) = (store.min_offset(), store.max_offset());
    if min != 0 {
        return Err(format!(
            "broker {broker}: the log starts at {min}, not 0 (nothing here deletes segments)"
        ));
    }
    let mut log = Vec::with_capacity(max as usize);
    let mut at = 0;
    while at < max {
        let end = ((at / SEGMENT + 1) * SEGMENT).min(max);
        let bytes = store
            .read(LogSpan { offset: at, len: (end - at) as u32 })
            .map_err(|e| format!("broker {broker}: read [{at}, {end}): {e}"))?;
        log.extend_from_slice(&bytes);
        at = end;
    }
    let epochs = store.epochs().iter().map(|e| (e.epoch, e.start_offset)).collect();
    drop(store);
    let messages = parse_messages(&log).map_err(|e| format!("broker {broker}: {e}"))?;
    Ok(Replica { broker, log, messages, epochs })
}

/// `(offset, body)` of every message of a commit log's bytes (BLANK records pad segments).
pub fn parse_messages(log: &[u8]) -> Result<Vec<(u64, String)>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < log.len() {
        let segment_end = ((at as u64 / SEGMENT + 1) * SEGMENT) as usize;
        if at + 8 > log.len() {
            return Err(format!("a torn record at {at}"));
        }
        let total = i32::from_be_bytes(log[at..at + 4].try_into().unwrap());
        let magic = i32::from_be_bytes(log[at + 4..at + 8].try_into().unwrap());
        if magic == BLANK_MAGIC_CODE {
            at = segment_end;
            continue;
        }
        if total <= 0 || at + total as usize > log.len().min(segment_end) {
            return Err(format!("a record at {at} of impossible size {total}"));
        }
        let record = Bytes::copy_from_slice(&log[at..at + total as usize]);
        let message = StoredMessage::decode(&record).map_err(|e| format!("the record at {at}: {e}"))?;
        out.push((at as u64, String::from_utf8_lossy(&message.body).into_owned()));
        at += total as usize;
    }
    Ok(out)
}

/// Every problem the checker finds, empty when the run kept every promise. `master` is the final
/// master and `set` the final sync-state-set.
pub fn check(acks: &[Ack], replicas: &[Replica], master: i64, set: &[i64]) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(m) = replicas.iter().find(|r| r.broker == master) else {
        return vec![format!("no store of the final master {master}")];
    };
    // Every PUT_OK message is on the master at its offset, and on every set member.
    let at_offset: HashMap<u64, &str> = m.messages.iter().map(|(o, b)| (*o, b.as_str())).collect();
    let mut lost = 0;
    for ack in acks {
        if at_offset.get(&ack.offset) != Some(&ack.body.as_str()) {
            lost += 1;
            if lost <= 10 {
                let found = m.messages.iter().find(|(_, b)| *b == ack.body).map(|(o, _)| *o);
                problems.push(format!(
                    "LOST: {ack:?} is not at offset {} of the master {master} (found at {found:?})",
                    ack.offset
                ));
            }
        }
    }
    for member in set.iter().filter(|&&b| b != master) {
        let Some(r) = replicas.iter().find(|r| r.broker == *member) else {
            problems.push(format!("no store of set member {member}"));
            continue;
        };
        let bodies: HashSet<&str> = r.messages.iter().map(|(_, b)| b.as_str()).collect();
        let missing: Vec<&Ack> = acks.iter().filter(|a| !bodies.contains(a.body.as_str())).collect();
        lost += missing.len();
        if let Some(first) = missing.first() {
            problems.push(format!(
                "LOST: {} acknowledged puts are not on set member {member}, first {first:?}",
                missing.len()
            ));
        }
    }
    if lost > 10 {
        problems.push(format!("LOST: {lost} in all"));
    }
    // Every replica is a byte-identical prefix of the master.
    for r in replicas.iter().filter(|r| r.broker != master) {
        if r.log.len() > m.log.len() {
            problems.push(format!(
                "DIVERGED: broker {} holds {} bytes, more than the master {master}'s {}",
                r.broker,
                r.log.len(),
                m.log.len()
            ));
        }
        let n = r.log.len().min(m.log.len());
        if let Some(at) = (0..n).find(|&i| r.log[i] != m.log[i]) {
            problems.push(format!(
                "DIVERGED: broker {}'s log differs from the master {master}'s at byte {at}",
                r.broker
            ));
        }
    }
    // One broker per epoch, and every ack inside its epoch on the master.
    let mut by_epoch: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
    for ack in acks {
        by_epoch.entry(ack.epoch).or_default().insert(ack.broker);
        if ack.epoch < 0 {
            problems.push(format!("NO EPOCH: the answer to {ack:?} named no epoch"));
            break;
        }
    }
    for (epoch, brokers) in &by_epoch {
        if brokers.len() > 1 {
            problems.push(format!("SPLIT BRAIN: brokers {brokers:?} all acknowledged puts in epoch {epoch}"));
        }
    }
    if m.epochs.is_empty() && !acks.is_empty() {
        problems
            .push(format!("NO EPOCHS: the master {master} acknowledged puts but its epoch file is empty"));
    } else {
        for ack in acks {
            let epoch =
                m.epochs.iter().rev().find(|(_, start)| *start <= ack.offset).map(|(e, _)| i64::from(*e));
            if epoch != Some(ack.epoch) {
                problems.push(format!(
                    "EPOCH MISMATCH: {ack:?} lies in epoch {epoch:?} of the master's epoch file {:?}",
                    m.epochs
                ));
                break;
            }
        }
    }
    // Each message was sent once: none is stored twice.
    let mut seen = HashSet::new();
    if let Some((o, b)) = m.messages.iter().find(|(_, b)| !seen.insert(b.as_str())) {
        problems.push(format!("DUPLICATE: {b:?} is stored twice on the master (again at {o})"));
    }
    problems
}

/// Acks of `broker` at an epoch at most `epoch` for puts sent after `after` (fencing: such puts
/// reached the broker after it had lost its place, so it must not have acknowledged them).
pub fn acks_sent_after(acks: &[Ack], broker: i64, epoch: i64, after: Duration) -> Vec<Ack> {
    acks.iter().filter(|a| a.broker == broker && a.epoch <= epoch && a.sent > after).cloned().collect()
}

/// The first ack answered after `since` that `pred` accepts: the end of an unavailability window.
pub fn first_ack_after(acks: &[Ack], since: Duration, pred: impl Fn(&Ack) -> bool) -> Option<Ack> {
    acks.iter().filter(|a| a.answered >= since && pred(a)).min_by_key(|a| a.answered).cloned()
}

/// How many acknowledged puts are missing from the final master (at their offset) or from a
/// member of the final set.
pub fn lost(acks: &[Ack], replicas: &[Replica], master: i64, set: &[i64]) -> usize {
    let holders: Vec<(bool, HashMap<&str, u64>)> = replicas
        .iter()
        .filter(|r| r.broker == master || set.contains(&r.broker))
        .map(|r| (r.broker == master, r.messages.iter().map(|(o, b)| (b.as_str(), *o)).collect()))
        .collect();
    if !replicas.iter().any(|r| r.broker == master) {
        return acks.len();
    }
    acks.iter()
        .filter(|a| {
            holders.iter().any(|(is_master, bodies)| match bodies.get(a.body.as_str()) {
                None => true,
                Some(o) => *is_master && *o != a.offset,
            })
        })
        .count()
}
