//! `logship bench`: replication scenarios, each beside a raw baseline measured in the same run,
//! reported as ratios. These are measurements, not tests: nothing here passes or fails.
//!
//! | scenario | baseline |
//! |---|---|
//! | catch-up of a backlog to an empty slave (32 KiB and tuned batches) | the same bytes streamed from an mmap over loopback into another mmap, same frame size, an 8-byte ack per frame |
//! | SYNC put latency, 1 producer | a raw 8-byte TCP ping-pong |
//! | idle replication latency (one put on an idle master until a slave acks) | one TCP round trip |
//! | SYNC and ASYNC put throughput and latency, 1 and 64 producers | ASYNC put throughput in the same run |

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use logship_core::service::{MasterServiceConfig, SlaveServiceConfig};
use logship_core::{AckPolicy, LogSpan, MasterConfig, PutStatus};
use logship_core::{BrokerRole, FlushDiskType};
use logship_store::{CommitLog, Message, StoreConfig};
use serde::Serialize;

/// Options of `logship bench`.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Backlog size for the catch-up scenario, in bytes.
    #[arg(long, default_value_t = 1 << 30)]
    pub catch_up_bytes: u64,
    /// Batch size of the tuned catch-up run (haTransferBatchSize).
    #[arg(long, default_value_t = 1 << 20)]
    pub tuned_batch: u32,
    /// Messages per throughput scenario.
    #[arg(long, default_value_t = 200_000)]
    pub messages: u64,
    /// Samples per latency scenario.
    #[arg(long, default_value_t = 5_000)]
    pub samples: usize,
    /// Message body size, in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Small sizes everywhere: a smoke run, not a measurement.
    #[arg(long)]
    pub quick: bool,
    /// Only run scenarios whose name contains this (catch-up, sync-latency, idle, throughput).
    #[arg(long)]
    pub only: Option<String>,
    /// Create segments without touching their pages first (`warm_mapped_file_enable=false`).
    #[arg(long)]
    pub no_warm: bool,
    /// Run every scenario this many times and report the medians.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
}

/// One measured figure beside its baseline.
#[derive(Serialize, Debug, Clone)]
pub struct Row {
    /// What was measured.
    pub scenario: String,
    /// logship's figure.
    pub value: f64,
    /// The unit of both figures.
    pub unit: &'static str,
    /// What the baseline is.
    pub baseline_name: String,
    /// The baseline's figure, measured in the same run.
    pub baseline: f64,
    /// `value / baseline`.
    pub ratio: f64,
    /// The goal for the ratio, as text.
    pub target: &'static str,
}

impl Row {
    fn new(
        scenario: String,
        value: f64,
        unit: &'static str,
        baseline_name: &str,
        baseline: f64,
        target: &'static str,
    ) -> Self {
        let ratio = if baseline > 0.0 { value / baseline } else { f64::NAN };
        Self { scenario, value, unit, baseline_name: baseline_name.to_string(), baseline, ratio, target }
    }
}

/// Segment size of the catch-up scenario: RocketMQ's default.
const CATCH_UP_SEGMENT: u64 = 1 << 30;
/// Segment size of the put scenarios; the warm-up fills one segment so that the measured puts
/// land in segments the store preallocated and warmed, as on a broker that has been running.
const STEADY_SEGMENT: u64 = 128 << 20;
const TOPIC: &str = "BenchTopic";

/// Writes every dirty page back (the `sync` command), so that each measured phase starts with
/// the same amount of pending writeback; otherwise whichever phase runs second pays for the
/// first one's dirty pages.
fn settle_writeback() {
    let _ = std::process::Command::new("sync").status();
}

fn open(dir: &Path, segment: u64, warm: bool) -> anyhow::Result<Arc<CommitLog>> {
    let mut c = StoreConfig::default();
    c.mapped_file_size_commit_log = segment;
    c.warm_mapped_file_enable = warm;
    Ok(Arc::new(CommitLog::open(dir, c).with_context(|| format!("opening {}", dir.display()))?))
}

fn message(size: usize, i: u64) -> Message {
    let mut body = vec![b'x'; size];
    let tag = i.to_be_bytes();
    let n = tag.len().min(size);
    body[..n].copy_from_slice(&tag[..n]);
    Message::new(TOPIC, (i % 8) as i32, Bytes::from(body))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A master and its slaves on loopback, each with a fresh store.
struct Cluster {
    segment: u64,
    warm: bool,
    master_store: Arc<CommitLog>,
    master: logship_tokio::MasterHandle<CommitLog>,
    slave_stores: Vec<Arc<CommitLog>>,
    slaves: Vec<logship_tokio::SlaveHandle>,
    // Last: fields drop in order, and the stores must close before their directory goes.
    dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts a master (whose store is first filled to `prefill` bytes of `size`-byte
    /// messages) and `slaves` slaves.
    async fn start(
        role: BrokerRole,
        slaves: usize,
        batch: u32,
        segment: u64,
        prefill: (u64, usize),
        warm: bool,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("logship-bench-").tempdir()?;
        let master_store = open(&dir.path().join("master"), segment, warm)?;
        let (bytes, size) = prefill;
        let store = master_store.clone();
        tokio::task::spawn_blocking(move || {
            let mut i = 0;
            while store.max_offset() < bytes {
                let r = store.put(message(size, i));
                anyhow::ensure!(r.status == PutStatus::PutOk, "prefill put failed: {}", r.status);
                i += 1;
            }
            Ok(())
        })
        .await??;
        let config = MasterServiceConfig {
            core: MasterConfig {
                mapped_file_size_commit_log: segment,
                transfer_batch_size: batch,
                ack_policy: AckPolicy::AnySlave,
                ..MasterConfig::default()
            },
            role,
            flush_disk_type: FlushDiskType::AsyncFlush,
            ..MasterServiceConfig::default()
        };
        let master =
            logship_tokio::spawn_master(config, master_store.clone(), "127.0.0.1:0".parse()?).await?;
        let mut cluster =
            Self { segment, warm, master_store, master, slave_stores: Vec::new(), slaves: Vec::new(), dir };
        for _ in 0..slaves {
            cluster.add_slave().await?;
        }
        Ok(cluster)
    }

    async fn add_slave(&mut self) -> anyhow::Result<()> {
        let store =
            open(&self.dir.path().join(format!("slave-{}", self.slaves.len())), self.segment, self.warm)?;
        let handle = logship_tokio::spawn_slave(
            SlaveServiceConfig::new(self.master.local_addr().to_string()),
            store.clone(),
        )
        .await?;
        self.slave_stores.push(store);
        self.slaves.push(handle);
        Ok(())
    }

    async fn wait_for_slaves(&self) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            let status = self.master.status().await.context("master stopped")?;
            if status.slaves.iter().filter(|s| s.ack.is_some()).count() >= self.slaves.len() {
                return Ok(());
            }
            anyhow::ensure!(start.elapsed() < Duration::from_secs(30), "slaves did not connect");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Puts `count` messages, numbered from `from`, from `producers` concurrent tasks; returns
    /// the elapsed time and every put's latency, sorted.
    async fn produce(
        &self,
        producers: usize,
        from: u64,
        count: u64,
        size: usize,
    ) -> anyhow::Result<(f64, Vec<Duration>)> {
        let next = Arc::new(std::sync::atomic::AtomicU64::new(from));
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..producers {
            let (master, next) = (self.master.clone(), next.clone());
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= from + count {
                        return Ok::<_, anyhow::Error>(latencies);
                    }
                    let t = Instant::now();
                    let r = master.put(message(size, i)).await;
                    anyhow::ensure!(r.status == PutStatus::PutOk, "put {i} ended {}", r.status);
                    latencies.push(t.elapsed());
                }
            }));
        }
        let mut latencies = Vec::with_capacity(count as usize);
        for t in tasks {
            latencies.extend(t.await??);
        }
        let secs = start.elapsed().as_secs_f64();
        latencies.sort_unstable();
        Ok((secs, latencies))
    }

    /// Brings the cluster to its steady state: puts a segment's worth of messages, then waits
    /// until every slave holds the master's log and every store has finished preallocating (and
    /// page-warming) its next segment. Returns the number of the next message.
    async fn settle(&self, producers: usize, size: usize) -> anyhow::Result<u64> {
        let warm_up = self.segment / (size as u64 + 128) + 1_000;
        self.produce(producers, 0, warm_up, size).await?;
        let end = self.master_store.max_offset();
        let start = Instant::now();
        for store in &self.slave_stores {
            while store.max_offset() < end {
                anyhow::ensure!(start.elapsed() < Duration::from_secs(120), "slaves did not catch up");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        self.wait_preallocated().await?;
        Ok(warm_up)
    }

    async fn wait_preallocated(&self) -> anyhow::Result<()> {
        let start = Instant::now();
        for store in std::iter::once(&self.master_store).chain(&self.slave_stores) {
            while store.status().preallocating {
                anyhow::ensure!(start.elapsed() < Duration::from_secs(120), "preallocation did not finish");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        Ok(())
    }

    async fn stop(&self) {
        for s in &self.slaves {
            s.shutdown().await;
        }
        self.master.shutdown().await;
    }
}

/// Replicates a backlog to an empty slave, then streams the same bytes with the plain baseline
/// ([`raw_stream`]); returns both rates in MB/s.
async fn catch_up(bytes: u64, batch: u32, args: &BenchArgs) -> anyhow::Result<(f64, f64)> {
    let warm = !args.no_warm;
    let mut cluster =
        Cluster::start(BrokerRole::AsyncMaster, 0, batch, CATCH_UP_SEGMENT, (bytes, args.size), warm).await?;
    cluster.wait_preallocated().await?;
    let end = cluster.master_store.max_offset();
    settle_writeback();
    let start = Instant::now();
    cluster.add_slave().await?;
    let slave = cluster.slave_stores[0].clone();
    while slave.max_offset() < end {
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    let ours = end as f64 / start.elapsed().as_secs_f64() / 1e6;
    cluster.stop().await;
    let (store, path) = (cluster.master_store.clone(), cluster.dir.path().to_path_buf());
    settle_writeback();
    let raw = tokio::task::spawn_blocking(move || raw_stream(&store, batch, &path)).await??;
    Ok((ours, raw))
}

/// The catch-up baseline: stream `[0, end)` of `source` in frames of `batch` bytes (12-byte
/// header, never across a segment) over loopback into a newly mapped file, as a plain program
/// would; the receiver reads each frame into a buffer, copies it into the mapping (as a slave
/// does) and acks it with 8 bytes; the sender drains the acks on another thread. Returns MB/s.
fn raw_stream(source: &CommitLog, batch: u32, dir: &Path) -> anyhow::Result<f64> {
    let end = source.max_offset();
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let sink_path = dir.join("raw-sink");
    let receiver = std::thread::spawn(move || -> anyhow::Result<()> {
        let (mut sock, _) = listener.accept()?;
        sock.set_nodelay(true)?;
        let mut sink = logship_store::bench::MmapTarget::fresh(&sink_path, CATCH_UP_SEGMENT)?;
        let mut header = [0u8; 12];
        let mut frame = vec![0u8; batch as usize];
        let mut received = 0u64;
        while received < end {
            sock.read_exact(&mut header)?;
            let len = u32::from_be_bytes(header[8..].try_into()?) as usize;
            sock.read_exact(&mut frame[..len])?;
            sink.copy(&frame[..len])?;
            received += len as u64;
            sock.write_all(&received.to_be_bytes())?;
        }
        Ok(())
    });
    let mut sock = TcpStream::connect(addr)?;
    sock.set_nodelay(true)?;
    let mut acks = sock.try_clone()?;
    let ack_reader = std::thread::spawn(move || -> std::io::Result<()> {
        let mut ack = [0u8; 8];
        loop {
            acks.read_exact(&mut ack)?;
            if u64::from_be_bytes(ack) >= end {
                return Ok(());
            }
        }
    });
    let start = Instant::now();
    let mut at = 0u64;
    while at < end {
        let segment_end = (at / CATCH_UP_SEGMENT + 1) * CATCH_UP_SEGMENT;
        let len = (end.min(segment_end) - at).min(u64::from(batch)) as u32;
        let body = source.read(LogSpan { offset: at, len })?;
        let mut header = [0u8; 12];
        header[..8].copy_from_slice(&at.to_be_bytes());
        header[8..].copy_from_slice(&len.to_be_bytes());
        sock.write_all(&header)?;
        sock.write_all(&body)?;
        at += u64::from(len);
    }
    ack_reader.join().map_err(|_| anyhow::anyhow!("ack reader panicked"))??;
    let secs = start.elapsed().as_secs_f64();
    receiver.join().map_err(|_| anyhow::anyhow!("receiver panicked"))??;
    Ok(end as f64 / secs / 1e6)
}

/// A raw 8-byte TCP ping-pong over loopback: `samples` round trips, `pause` apart (zero: back to
/// back), sorted. With a pause, the CPUs idle between pings as they do between idle puts, so it
/// is the baseline for idle latency.
fn ping_pong(samples: usize, pause: Duration) -> anyhow::Result<Vec<Duration>> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr: SocketAddr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut sock, _) = listener.accept()?;
        sock.set_nodelay(true)?;
        let mut buf = [0u8; 8];
        while sock.read_exact(&mut buf).is_ok() {
            sock.write_all(&buf)?;
        }
        Ok(())
    });
    let mut sock = TcpStream::connect(addr)?;
    sock.set_nodelay(true)?;
    let mut rtts = Vec::with_capacity(samples);
    let mut buf = [0u8; 8];
    for i in 0..samples + samples / 10 {
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
        let t = Instant::now();
        sock.write_all(&(i as u64).to_be_bytes())?;
        sock.read_exact(&mut buf)?;
        if i >= samples / 10 {
            rtts.push(t.elapsed());
        }
    }
    drop(sock);
    let _ = echo.join();
    rtts.sort_unstable();
    Ok(rtts)
}

/// Puts `messages` from `producers` concurrent tasks on a settled cluster; returns puts/s,
/// the rate at which the slave came to hold them all (the same under SYNC), and the sorted
/// latencies.
async fn throughput(
    role: BrokerRole,
    producers: usize,
    messages: u64,
    args: &BenchArgs,
) -> anyhow::Result<(f64, f64, Vec<Duration>)> {
    let size = args.size;
    let cluster = Cluster::start(role, 1, 32 * 1024, args.steady_segment(), (0, size), !args.no_warm).await?;
    cluster.wait_for_slaves().await?;
    let from = cluster.settle(64, size).await?;
    settle_writeback();
    let start = Instant::now();
    let (secs, latencies) = cluster.produce(producers, from, messages, size).await?;
    let end = cluster.master_store.max_offset();
    while cluster.slave_stores[0].max_offset() < end {
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    let replicated = start.elapsed().as_secs_f64();
    cluster.stop().await;
    Ok((messages as f64 / secs, messages as f64 / replicated, latencies))
}

/// One SYNC put at a time on an otherwise idle, settled master, `pause` apart; sorted latencies.
async fn idle_puts(samples: usize, args: &BenchArgs, pause: Duration) -> anyhow::Result<Vec<Duration>> {
    let size = args.size;
    let cluster =
        Cluster::start(BrokerRole::SyncMaster, 1, 32 * 1024, args.steady_segment(), (0, size), !args.no_warm)
            .await?;
    cluster.wait_for_slaves().await?;
    let from = cluster.settle(64, size).await?;
    // Put from a runtime task, as a producer (an HTTP handler) does, not from `block_on`'s thread.
    let master = cluster.master.clone();
    let mut latencies = tokio::spawn(async move {
        let mut latencies = Vec::with_capacity(samples);
        for i in from..from + samples as u64 {
            tokio::time::sleep(pause).await;
            let t = Instant::now();
            let r = master.put(message(size, i)).await;
            anyhow::ensure!(r.status == PutStatus::PutOk, "put {i} ended {}", r.status);
            latencies.push(t.elapsed());
        }
        Ok(latencies)
    })
    .await??;
    cluster.stop().await;
    latencies.sort_unstable();
    Ok(latencies)
}

impl BenchArgs {
    fn steady_segment(&self) -> u64 {
        if self.quick { 16 << 20 } else { STEADY_SEGMENT }
    }
}

fn wanted(args: &BenchArgs, name: &str) -> bool {
    args.only.as_deref().is_none_or(|o| name.contains(o))
}

/// Runs every scenario and prints the table (or JSON). Always `Ok(true)` once measured.
pub async fn run(mut args: BenchArgs) -> anyhow::Result<bool> {
    if args.quick {
        args.catch_up_bytes = args.catch_up_bytes.min(64 << 20);
        args.messages = args.messages.min(5_000);
        args.samples = args.samples.min(300);
        args.repeat = 1;
    }
    let mut rows = Vec::new();
    let say = |s: &str| {
        if !args.json {
            eprintln!("  running {s} ...");
        }
    };

    let repeat = args.repeat.max(1);
    if wanted(&args, "catch-up") {
        for (label, batch) in [("32 KiB batches", 32 * 1024), ("tuned batches", args.tuned_batch)] {
            let (mut ours, mut raws) = (Vec::new(), Vec::new());
            for round in 1..=repeat {
                say(&format!("catch-up, {label} ({round}/{repeat})"));
                let (mbps, raw) = catch_up(args.catch_up_bytes, batch, &args).await?;
                ours.push(mbps);
                raws.push(raw);
            }
            rows.push(Row::new(
                format!("catch-up of {} MiB, {label} ({batch} B)", args.catch_up_bytes >> 20),
                median(ours),
                "MB/s",
                "plain mmap -> socket -> new mmap, same frames, 8-byte ack per frame",
                median(raws),
                ">= 0.9",
            ));
        }
    }

    let mut rtt50 = Vec::new();
    let mut rtt99 = Vec::new();
    for _ in 0..repeat {
        let rtts = ping_pong(args.samples, Duration::ZERO)?;
        rtt50.push(micros(percentile(&rtts, 0.5)));
        rtt99.push(micros(percentile(&rtts, 0.99)));
    }
    let (rtt50, rtt99) = (median(rtt50), median(rtt99));
    if wanted(&args, "sync-latency") {
        let (mut p50, mut p99) = (Vec::new(), Vec::new());
        for round in 1..=repeat {
            say(&format!("SYNC put latency, 1 producer ({round}/{repeat})"));
            let (_, _, lat) = throughput(BrokerRole::SyncMaster, 1, args.samples as u64, &args).await?;
            p50.push(micros(percentile(&lat, 0.5)));
            p99.push(micros(percentile(&lat, 0.99)));
        }
        rows.push(Row::new(
            "SYNC put latency p50, 1 producer".into(),
            median(p50),
            "us",
            "raw 8-byte TCP ping-pong p50",
            rtt50,
            "<= 3",
        ));
        rows.push(Row::new(
            "SYNC put latency p99, 1 producer".into(),
            median(p99),
            "us",
            "raw 8-byte TCP ping-pong p99",
            rtt99,
            "-",
        ));
    }
    if wanted(&args, "idle") {
        let (mut p50, mut idle_rtt) = (Vec::new(), Vec::new());
        let (samples, pause) = (args.samples.min(2_000), Duration::from_millis(2));
        for round in 1..=repeat {
            say(&format!("idle replication latency ({round}/{repeat})"));
            let lat = idle_puts(samples, &args, pause).await?;
            p50.push(micros(percentile(&lat, 0.5)));
            let rtts = tokio::task::spawn_blocking(move || ping_pong(samples, pause)).await??;
            idle_rtt.push(micros(percentile(&rtts, 0.5)));
        }
        let p50 = median(p50);
        rows.push(Row::new(
            "idle replication latency p50 (put until a slave acks)".into(),
            p50,
            "us",
            "one TCP round trip p50, 2 ms apart like the puts",
            median(idle_rtt),
            "<= 2",
        ));
        rows.push(Row::new(
            "idle replication latency p50 (put until a slave acks)".into(),
            p50,
            "us",
            "one TCP round trip p50, back to back",
            rtt50,
            "-",
        ));
    }
    if wanted(&args, "throughput") {
        for producers in [1usize, 64] {
            let (mut asyncs, mut async_replicated, mut syncs) = (Vec::new(), Vec::new(), Vec::new());
            let mut latencies: [(Vec<f64>, Vec<f64>); 2] = Default::default();
            for round in 1..=repeat {
                say(&format!("ASYNC and SYNC throughput, {producers} producer(s) ({round}/{repeat})"));
                for (i, role) in [BrokerRole::AsyncMaster, BrokerRole::SyncMaster].into_iter().enumerate() {
                    let (rate, replicated, lat) = throughput(role, producers, args.messages, &args).await?;
                    if i == 0 {
                        asyncs.push(rate);
                        async_replicated.push(replicated);
                    } else {
                        syncs.push(rate);
                    }
                    latencies[i].0.push(micros(percentile(&lat, 0.5)));
                    latencies[i].1.push(micros(percentile(&lat, 0.99)));
                }
            }
            let target = if producers == 64 { ">= 0.8" } else { "-" };
            let sync_rate = median(syncs);
            rows.push(Row::new(
                format!("SYNC puts/s, {producers} producer(s)"),
                sync_rate,
                "puts/s",
                "ASYNC puts/s, same producers",
                median(asyncs),
                target,
            ));
            rows.push(Row::new(
                format!("SYNC puts/s, {producers} producer(s)"),
                sync_rate,
                "puts/s",
                "ASYNC, until the slave holds every message",
                median(async_replicated),
                "-",
            ));
            for (name, (p50, p99)) in ["ASYNC", "SYNC"].into_iter().zip(latencies) {
                rows.push(Row::new(
                    format!("{name} put latency p99, {producers} producer(s)"),
                    median(p99),
                    "us",
                    "p50 of the same run",
                    median(p50),
                    "-",
                ));
            }
        }
    }

    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!();
        println!(
            "{:<58} {:>14}  {:<62} {:>14} {:>8}  target",
            "scenario", "logship", "baseline (same run)", "", "ratio"
        );
        for r in &rows {
            println!(
                "{:<58} {:>9.1} {:<4}  {:<62} {:>9.1} {:<4} {:>7.2}x  {}",
                r.scenario, r.value, r.unit, r.baseline_name, r.baseline, r.unit, r.ratio, r.target
            );
        }
        println!(
            "\nRatios compare figures measured in this run on this machine; absolute figures vary between machines."
        );
    }
    Ok(true)
}
