//! Counters a simulation collects: what the workload did, which faults were exercised, what the
//! cores detected. They add up over seeds, so a batch of seeds reports its coverage.

use std::fmt;
use std::time::Duration;

macro_rules! stats {
    ($( $section:literal { $( $(#[doc = $doc:literal])+ $field:ident ),* $(,)? } )*) => {
        /// Counters of one simulation, or of many added with [`Stats::merge`].
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct Stats {
            /// Virtual time simulated.
            pub virtual_time: Duration,
            $($( $(#[doc = $doc])+ pub $field: u64, )*)*
        }

        impl Stats {
            /// Adds `other` into `self`.
            pub fn merge(&mut self, other: &Self) {
                self.virtual_time += other.virtual_time;
                $($( self.$field += other.$field; )*)*
            }

            /// Every counter as `(section, name, value)`, in declaration order.
            pub fn counters(&self) -> Vec<(&'static str, &'static str, u64)> {
                vec![$($( ($section, stringify!($field), self.$field), )*)*]
            }
        }
    };
}

stats! {
    "run" {
        /// Seeds run.
        seeds,
        /// Simulation steps (one event or timeout each).
        steps,
        /// Slaves simulated (summed over seeds).
        slaves,
        /// Seeds with `AckPolicy::AnySlave`.
        policy_any_slave,
        /// Seeds with `AckPolicy::Quorum`.
        policy_quorum,
        /// Seeds with `AckPolicy::AllInSync`.
        policy_all_in_sync,
        /// Slaves with `AckOn::Written`.
        ack_on_written,
        /// Slaves with `AckOn::Flushed`.
        ack_on_flushed,
        /// Seeds with `NewSlaveStart::LastFile`.
        new_slave_last_file,
    }
    "workload" {
        /// Messages appended to the master's log.
        messages,
        /// Bytes appended to the master's log.
        bytes_appended,
        /// Bytes stored by slaves.
        bytes_replicated,
        /// Replication waits started.
        waits,
        /// Waits that ended `Ok`.
        waits_ok,
        /// Waits that ended with `Timeout`.
        waits_timeout,
        /// Waits that ended with `SlaveNotAvailable`.
        waits_slave_not_available,
        /// Waits that ended with `InSyncReplicasNotEnough`.
        waits_in_sync_replicas_not_enough,
        /// Waits that ended with `Cancelled`.
        waits_cancelled,
        /// Waits that were pending when the master crashed (gone with it).
        waits_lost_in_master_crash,
        /// Appends held back while a restarted master waited for every slave to report.
        appends_fenced,
    }
    "faults" {
        /// Reads delivered in a chunk that split a frame or a report.
        split_reads,
        /// Link stalls (one direction of one connection, shorter than housekeeping).
        stalls,
        /// Connection resets.
        resets,
        /// One-way partitions between the master and a slave, long enough for housekeeping.
        partitions_one_way,
        /// Two-way partitions between the master and a slave, long enough for housekeeping.
        partitions_both_ways,
        /// Slave crashes (restarted later).
        slave_crashes,
        /// Process crashes (of the master or a slave): peers see a reset, the page cache
        /// survives, the durable end may lag the written end at restart. The other crashes are
        /// machine crashes: silent to peers, unflushed bytes lost but for a torn part.
        process_crashes,
        /// Slave crashes that lost part of an unflushed suffix (a torn tail).
        slave_torn_tails,
        /// Unflushed slave bytes lost in crashes.
        slave_bytes_lost,
        /// Slaves stopped for a long time (retention may pass them).
        slave_stops,
        /// Periods of slow slave disk.
        slow_disk_periods,
        /// `Appended`/`Flushed` completions delivered late by a slow disk.
        slow_disk_ops,
        /// Failed slave appends or flushes.
        disk_errors,
        /// Failed appends that left part of their bytes in the log (a torn append).
        torn_appends,
        /// Master crashes (restarted later).
        master_crashes,
        /// Master crashes that lost unflushed bytes.
        master_lost_tails,
        /// Unflushed master bytes lost in crashes.
        master_bytes_lost,
        /// Master restarts after which some slave held bytes the master had lost.
        master_restarts_with_slave_ahead,
        /// Graceful master stops (the driver's shutdown) before a process crash.
        master_shutdowns,
        /// Forged-ack intruders that connected to the master.
        intruders,
        /// Reports sent by intruders.
        intruder_reports,
        /// `handle_timeout` calls at instants no core asked for.
        spurious_timeouts,
        /// Master closes whose `Closed` the driver fed late, after reads and writes under way.
        lagged_closes,
        /// Retention moves past a stopped slave's end.
        retention_past_stopped_slave,
        /// Retention moves past a running, lagging slave's end.
        retention_past_lagging_slave,
    }
    "detected" {
        /// Real slaves the master refused as ahead of its log (they held bytes it lost).
        slaves_refused_ahead,
        /// Real slaves the master refused as behind its retention.
        slaves_refused_behind_retention,
        /// Intruder connections the master closed with a `PeerError`.
        intruders_refused,
        /// Intruders from outside the replica allow-list, refused at accept.
        intruders_outside_allow_list,
        /// `PeerError::SlaveAhead` raised by the master (slaves and intruders).
        slave_ahead,
        /// `PeerError::SlaveBehindRetention` raised by the master (slaves and intruders).
        slave_behind_retention,
        /// `PeerError::AckBeyondEnd` raised by the master (slaves and intruders).
        ack_beyond_end,
        /// `PeerError::AckBeyondSent` raised by the master (slaves and intruders).
        ack_beyond_sent,
        /// `PeerError::AckWentBackwards` raised by the master (slaves and intruders).
        ack_went_backwards,
        /// `PeerError::Frame` raised by the master or a slave.
        frame_errors,
        /// `PeerError::OffsetMismatch` raised by a slave.
        offset_mismatches,
        /// Connections closed by a housekeeping timeout (master or slave side).
        housekeeping_closes,
        /// Reports from a replica that had reported already, while the restart fence was up
        /// (it reconnected): the fence must not count it twice.
        fence_reports_again,
        /// Older connections from a slave's host torn down by the master's driver when the
        /// slave connected again (see `SimConfig::loopback_slaves`).
        stale_connections_closed,
        /// Slaves taken out after a typed error (they end with it).
        slaves_ended_with_error,
        /// Slaves that converged to the master's end after the faults stopped.
        slaves_converged,
    }
    "autoswitch" {
        /// Brokers simulated in AutoSwitch mode (summed over seeds).
        brokers,
        /// Elections the fake coordinator committed (the first one included).
        elections,
        /// Puts appended by a master.
        puts,
        /// Puts answered PUT_OK: the set acknowledged them and the master's lease guard was open.
        puts_acked,
        /// Puts whose wait ended `Ok` after the master's lease guard had closed: not acknowledged.
        puts_unacked_guard_closed,
        /// Puts refused because the master's lease guard was closed.
        puts_refused_guard_closed,
        /// Puts whose wait timed out or was cancelled.
        puts_not_replicated,
        /// Masters that dropped their role by the failover rule (no longer the live master, or
        /// their lease gone).
        step_downs,
        /// Follows of the record's master that the role-change check refused (tried again at
        /// the next read).
        follows_refused,
        /// Divergent tails cut by a slave (its log held bytes the new master does not).
        truncations,
        /// Bytes cut by those truncations.
        truncated_bytes,
        /// Sync-state-set shrinks committed through the record.
        set_shrinks,
        /// Sync-state-set expansions committed through the record.
        set_expands,
        /// Set proposals the record refused (stale, unchanged, not the master's).
        set_proposals_refused,
        /// Leases the coordinator let expire.
        lease_expiries,
        /// Broker process crashes (page cache survives).
        broker_process_crashes,
        /// Broker machine crashes (unflushed bytes lost but for a torn part).
        broker_machine_crashes,
        /// A broker cut from its peers and the coordinator.
        full_partitions,
        /// A broker cut from the coordinator only.
        coordinator_partitions,
        /// A broker cut from its peers only.
        peer_partitions,
        /// Connection resets between a master and a slave.
        connection_resets,
        /// Seeds whose group converged after the faults stopped.
        groups_converged,
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "virtual time: {:.1} s", self.virtual_time.as_secs_f64())?;
        let mut section = "";
        let mut line = String::new();
        for (s, name, value) in self.counters() {
            if s != section {
                if !line.is_empty() {
                    writeln!(f, "{line}")?;
                }
                line = format!("{s}:");
                section = s;
            }
            line.push_str(&format!(" {name}={value}"));
        }
        if !line.is_empty() {
            writeln!(f, "{line}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_every_counter() {
        let mut a = Stats { seeds: 1, stalls: 2, virtual_time: Duration::from_secs(1), ..Stats::default() };
        let b = Stats { seeds: 1, stalls: 5, slave_ahead: 1, ..Stats::default() };
        a.merge(&b);
        assert_eq!((a.seeds, a.stalls, a.slave_ahead), (2, 7, 1));
        let text = a.to_string();
        assert!(text.contains("stalls=7"), "{text}");
    }
}
