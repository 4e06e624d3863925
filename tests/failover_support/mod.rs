//! The fault suite's machinery (issue 13): a broker group of `logship broker` processes on a real
//! etcd, each broker in its own network namespace where the machine allows (we are root and
//! `ip netns add` works), the faults (kill -9, SIGSTOP/SIGCONT, etcd nodes away, a partition
//! made with blackhole routes between the namespaces), a workload of SYNC puts that follows the
//! master, and the checker that proves, over the stopped brokers' stores, that no acknowledged
//! put was lost, that every replica is a byte-identical prefix of the master and that no two
//! brokers acknowledged puts in one epoch.
#![allow(dead_code, unreachable_pub)]

pub mod checker;
pub mod group;
pub mod net;
pub mod rng;
pub mod scenario;
pub mod workload;
