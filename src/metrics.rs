//! Prometheus metrics (`GET /metrics`), with the `prometheus-client` crate. Replication gauges
//! are refreshed from the live status at each scrape; put latencies are recorded as puts finish.

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use logship_core::PutStatus;
use logship_core::driver::{MasterStatus, SlaveStatus};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SlaveLabels {
    slave: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

fn latency_histogram() -> Histogram {
    // 50 µs to ~26 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

/// The broker's metrics.
pub struct Metrics {
    registry: Registry,
    slave_lag_bytes: Family<SlaveLabels, Gauge>,
    slave_lag_seconds: Family<SlaveLabels, Gauge<f64, AtomicU64>>,
    slave_in_sync: Family<SlaveLabels, Gauge>,
    replicated_bytes: Counter,
    replicated_seen: Mutex<u64>,
    put_latency: Family<StatusLabels, Histogram, fn() -> Histogram>,
    connections: Gauge,
    disk_used_ratio: Gauge<f64, AtomicU64>,
    max_offset: Gauge,
    min_offset: Gauge,
    flushed_offset: Gauge,
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("logship");
        let slave_lag_bytes = Family::<SlaveLabels, Gauge>::default();
        let slave_lag_seconds = Family::<SlaveLabels, Gauge<f64, AtomicU64>>::default();
        let slave_in_sync = Family::<SlaveLabels, Gauge>::default();
        let replicated_bytes = Counter::default();
        let put_latency =
            Family::<StatusLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        let connections = Gauge::default();
        let disk_used_ratio = Gauge::<f64, AtomicU64>::default();
        let (max_offset, min_offset, flushed_offset) = (Gauge::default(), Gauge::default(), Gauge::default());
        registry.register(
            "slave_lag_bytes",
            "Bytes a slave lacks behind the master",
            slave_lag_bytes.clone(),
        );
        registry.register("slave_lag_seconds", "How long a slave has been behind", slave_lag_seconds.clone());
        registry.register(
            "slave_in_sync",
            "1 if the slave is within haMaxGapNotInSync",
            slave_in_sync.clone(),
        );
        registry.register(
            "replicated_bytes",
            "Log bytes sent to slaves (master) or stored from the master (slave)",
            replicated_bytes.clone(),
        );
        registry.register("put_latency_seconds", "Put latency by RocketMQ status", put_latency.clone());
        registry.register(
            "connections",
            "Live HA connections (slaves on a master; 1 when a slave streams)",
            connections.clone(),
        );
        registry.register(
            "disk_used_ratio",
            "Disk usage of the store's file system",
            disk_used_ratio.clone(),
        );
        registry.register("commitlog_max_offset", "End of the commit log", max_offset.clone());
        registry.register("commitlog_min_offset", "Oldest offset of the commit log", min_offset.clone());
        registry.register(
            "commitlog_flushed_offset",
            "Durable end of the commit log",
            flushed_offset.clone(),
        );
        Self {
            registry,
            slave_lag_bytes,
            slave_lag_seconds,
            slave_in_sync,
            replicated_bytes,
            replicated_seen: Mutex::new(0),
            put_latency,
            connections,
            disk_used_ratio,
            max_offset,
            min_offset,
            flushed_offset,
        }
    }

    /// Records one put.
    pub fn record_put(&self, status: PutStatus, seconds: f64) {
        self.put_latency
            .get_or_create(&StatusLabels { status: status.rocketmq_name().to_string() })
            .observe(seconds);
    }

    fn set_replicated(&self, total: u64) {
        let mut seen = self.replicated_seen.lock().unwrap_or_else(|e| e.into_inner());
        if total > *seen {
            self.replicated_bytes.inc_by(total - *seen);
            *seen = total;
        }
    }

    /// Refreshes the replication gauges from a master's status.
    pub fn observe_master(&self, status: &MasterStatus, disk_used_ratio: Option<f64>) {
        self.slave_lag_bytes.clear();
        self.slave_lag_seconds.clear();
        self.slave_in_sync.clear();
        for s in &status.slaves {
            let labels = SlaveLabels { slave: s.address.to_string() };
            self.slave_lag_bytes.get_or_create(&labels).set(s.lag_bytes as i64);
            self.slave_lag_seconds.get_or_create(&labels).set(s.lag.as_secs_f64());
            self.slave_in_sync.get_or_create(&labels).set(i64::from(s.in_sync));
        }
        self.set_replicated(status.bytes_replicated);
        self.connections.set(status.slaves.len() as i64);
        self.set_log(status.min_offset, status.max_offset, status.flushed_offset, disk_used_ratio);
    }

    /// Refreshes the replication gauges from a slave's status (its own link to the master).
    pub fn observe_slave(
        &self,
        status: &SlaveStatus,
        min_offset: u64,
        start_offset: u64,
        in_sync: bool,
        disk: Option<f64>,
    ) {
        self.slave_lag_bytes.clear();
        self.slave_lag_seconds.clear();
        self.slave_in_sync.clear();
        let labels = SlaveLabels { slave: "self".to_string() };
        self.slave_lag_bytes.get_or_create(&labels).set(status.lag_bytes as i64);
        self.slave_lag_seconds.get_or_create(&labels).set(status.lag.as_secs_f64());
        self.slave_in_sync.get_or_create(&labels).set(i64::from(in_sync));
        self.set_replicated(status.max_offset.saturating_sub(start_offset));
        let streaming = status.state == logship_core::driver::SlaveLinkState::Streaming;
        self.connections.set(i64::from(streaming));
        self.set_log(min_offset, status.max_offset, status.flushed_offset, disk);
    }

    fn set_log(&self, min: u64, max: u64, flushed: u64, disk: Option<f64>) {
        self.min_offset.set(min as i64);
        self.max_offset.set(max as i64);
        self.flushed_offset.set(flushed as i64);
        if let Some(r) = disk {
            self.disk_used_ratio.set(r);
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}
