//! The SYNC_MASTER wait table: waits ordered by offset (completion pops a prefix, so there is no
//! head-of-line blocking) and by deadline (expiry pops a prefix, exactly at the deadline).

use crate::time::Instant;
use std::collections::{BTreeMap, BTreeSet};

use crate::WaitId;
use crate::log::Offset;

#[derive(Debug, Default)]
pub(crate) struct Waiters {
    by_id: BTreeMap<WaitId, (Offset, Instant)>,
    by_offset: BTreeSet<(Offset, WaitId)>,
    by_deadline: BTreeSet<(Instant, WaitId)>,
}

impl Waiters {
    pub(crate) fn contains(&self, id: WaitId) -> bool {
        self.by_id.contains_key(&id)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }

    pub(crate) fn insert(&mut self, id: WaitId, offset: Offset, deadline: Instant) {
        let previous = self.by_id.insert(id, (offset, deadline));
        assert!(previous.is_none(), "caller checks for duplicate wait ids");
        self.by_offset.insert((offset, id));
        self.by_deadline.insert((deadline, id));
    }

    /// Removes one wait; returns its offset if it existed.
    pub(crate) fn remove(&mut self, id: WaitId) -> Option<Offset> {
        let (offset, deadline) = self.by_id.remove(&id)?;
        self.by_offset.remove(&(offset, id));
        self.by_deadline.remove(&(deadline, id));
        Some(offset)
    }

    /// Removes and returns, in offset order, every wait at or below `frontier`.
    pub(crate) fn pop_satisfied(&mut self, frontier: Offset) -> Vec<(WaitId, Offset)> {
        let mut done = Vec::new();
        while self.by_offset.first().is_some_and(|&(offset, _)| offset <= frontier) {
            let Some((offset, id)) = self.by_offset.pop_first() else { break };
            if let Some((_, deadline)) = self.by_id.remove(&id) {
                self.by_deadline.remove(&(deadline, id));
            }
            done.push((id, offset));
        }
        done
    }

    /// Removes and returns, in deadline order, every wait whose deadline is at or before `now`.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Vec<WaitId> {
        let mut done = Vec::new();
        while self.by_deadline.first().is_some_and(|&(deadline, _)| deadline <= now) {
            let Some((_, id)) = self.by_deadline.pop_first() else { break };
            if let Some((offset, _)) = self.by_id.remove(&id) {
                self.by_offset.remove(&(offset, id));
            }
            done.push(id);
        }
        done
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.by_deadline.first().map(|&(d, _)| d)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Insert { id: u8, offset: u16, ttl: u8 },
        Cancel { id: u8 },
        Ack { frontier: u16 },
        Tick { by: u8 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<u8>(), any::<u16>(), any::<u8>()).prop_map(|(id, offset, ttl)| Op::Insert {
                id,
                offset,
                ttl
            }),
            any::<u8>().prop_map(|id| Op::Cancel { id }),
            any::<u16>().prop_map(|frontier| Op::Ack { frontier }),
            any::<u8>().prop_map(|by| Op::Tick { by }),
        ]
    }

    proptest! {
        /// The table against a naive list: the same waits complete, in the same order, each once.
        #[test]
        fn waiter_table_matches_a_naive_model(ops in proptest::collection::vec(op(), 0..200)) {
            let epoch = Instant::ZERO;
            let mut now = epoch;
            let mut table = Waiters::default();
            let mut model: Vec<(WaitId, Offset, Instant)> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert { id, offset, ttl } => {
                        let id = WaitId(u64::from(id));
                        if table.contains(id) {
                            prop_assert!(model.iter().any(|w| w.0 == id));
                            continue;
                        }
                        let deadline = now + Duration::from_millis(u64::from(ttl));
                        table.insert(id, u64::from(offset), deadline);
                        model.push((id, u64::from(offset), deadline));
                    }
                    Op::Cancel { id } => {
                        let id = WaitId(u64::from(id));
                        let expected = model.iter().position(|w| w.0 == id).map(|i| model.remove(i).1);
                        prop_assert_eq!(table.remove(id), expected);
                    }
                    Op::Ack { frontier } => {
                        let frontier = u64::from(frontier);
                        let mut expected: Vec<_> =
                            model.iter().filter(|w| w.1 <= frontier).map(|w| (w.0, w.1)).collect();
                        expected.sort_by_key(|&(id, off)| (off, id));
                        model.retain(|w| w.1 > frontier);
                        prop_assert_eq!(table.pop_satisfied(frontier), expected);
                    }
                    Op::Tick { by } => {
                        now += Duration::from_millis(u64::from(by));
                        let mut expected: Vec<_> = model.iter().filter(|w| w.2 <= now).map(|w| (w.2, w.0)).collect();
                        expected.sort();
                        model.retain(|w| w.2 > now);
                        let got = table.pop_expired(now);
                        prop_assert_eq!(got, expected.into_iter().map(|(_, id)| id).collect::<Vec<_>>());
                    }
                }
                prop_assert_eq!(table.len(), model.len());
                prop_assert_eq!(table.next_deadline(), model.iter().map(|w| w.2).min());
            }
        }
    }
}
