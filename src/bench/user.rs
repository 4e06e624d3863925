//! Scenarios as users meet them: every store is new, in a new directory, with default config
//! and RocketMQ's default 1 GiB segments; no clock waits for background work (preallocation,
//! warming, writeback) first; measured slaves are new processes. Each implementation is a
//! master ([`Master`]) or a slave ([`Slave`]) behind one interface, so logship, Java RocketMQ and
//! rocketmq-rust run the same scenario on the same bytes.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use logship_core::PutStatus;
use logship_core::{BrokerRole, FlushDiskType};
use logship_store::CommitLog;

use super::peer::{Impl, LogshipSlave, PeerProcess, PeerSpec};
use super::{message, percentile};
use crate::config::BrokerSettings;

/// RocketMQ's default commit-log segment size.
pub const DEFAULT_SEGMENT: u64 = 1 << 30;

/// Options for every logship broker the bench starts.
#[derive(Clone, Debug, Default)]
pub struct LogshipOptions {
    /// broker.conf settings (`KEY=VALUE`) for every logship master and slave.
    pub sets: Vec<String>,
    /// A command that `logship slave` runs under (e.g. `perf stat -o FILE --`, `strace -c -f -o
    /// FILE`, `valgrind --tool=callgrind`).
    pub slave_wrap: Vec<String>,
    /// Print each slave thread's CPU time and page faults before it stops.
    pub slave_threads: bool,
}

static OPTIONS: std::sync::OnceLock<LogshipOptions> = std::sync::OnceLock::new();

/// Sets the options for the rest of the run (first call wins).
pub fn set_options(o: LogshipOptions) {
    let _ = OPTIONS.set(o);
}

fn options() -> &'static LogshipOptions {
    OPTIONS.get_or_init(LogshipOptions::default)
}

/// How long a catch-up or a put run may take before the bench gives up.
const PATIENCE: Duration = Duration::from_secs(600);

/// Put figures of one run: puts/s and sorted per-put latencies summarized.
#[derive(Clone, Copy, Debug)]
pub struct PutFigures {
    /// Puts per second.
    pub rate: f64,
    /// Latency p50, microseconds.
    pub p50: f64,
    /// Latency p99, microseconds.
    pub p99: f64,
}

/// A logship master in this process, configured as `logship master` with default settings.
pub struct LogshipMaster {
    store: Arc<CommitLog>,
    handle: logship_tokio::MasterHandle<CommitLog>,
    next: Arc<AtomicU64>,
}

impl LogshipMaster {
    /// Opens a new store at `dir` and starts the HA service on a free loopback port.
    pub async fn start(
        dir: &Path,
        role: BrokerRole,
        flush: FlushDiskType,
        segment: u64,
    ) -> anyhow::Result<Self> {
        let overrides: Vec<(String, String)> = options()
            .sets
            .iter()
            .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
            .collect();
        let loaded = crate::config::load(&[], None, &overrides)?;
        for w in &loaded.warnings {
            tracing::warn!("bench master: {w}");
        }
        let settings = BrokerSettings {
            broker_role: role,
            flush_disk_type: flush,
            store_path_root_dir: dir.to_path_buf(),
            mapped_file_size_commit_log: segment,
            ha_listen_port: 0,
            ..loaded.settings
        };
        let store = crate::server::open_store(&settings).await?;
        let handle =
            logship_tokio::spawn_master(settings.master_service_config(), store.clone(), settings.ha_addr())
                .await
                .context("starting the HA service")?;
        Ok(Self { store, handle, next: Arc::default() })
    }

    /// The HA address slaves connect to.
    pub fn ha_addr(&self) -> String {
        self.handle.local_addr().to_string()
    }

    /// Puts `size`-byte messages (`MasterHandle::put`, one at a time) until the log holds `bytes`.
    pub async fn fill(&self, bytes: u64, size: usize) -> anyhow::Result<u64> {
        while self.store.max_offset() < bytes {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let r = self.handle.put(message(size, i)).await;
            ensure!(r.status == PutStatus::PutOk, "fill put {i} ended {}", r.status);
        }
        Ok(self.store.max_offset())
    }

    /// `count` puts from `producers` tasks; the put latencies, sorted, and the elapsed time.
    pub async fn produce(
        &self,
        producers: usize,
        count: u64,
        size: usize,
    ) -> anyhow::Result<(f64, Vec<Duration>)> {
        let end = self.next.load(Ordering::Relaxed) + count;
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..producers {
            let (master, next) = (self.handle.clone(), self.next.clone());
            tasks.push(tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= end {
                        return Ok::<_, anyhow::Error>(latencies);
                    }
                    let t = Instant::now();
                    let r = master.put(message(size, i)).await;
                    ensure!(r.status == PutStatus::PutOk, "put {i} ended {}", r.status);
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

    /// Waits until no slave connection is left (a stopped slave's may linger a moment).
    async fn wait_no_slaves(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.handle.status().await.context("master stopped")?.slaves.is_empty() {
            ensure!(Instant::now() < deadline, "a slave stayed connected for a minute after it stopped");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok(())
    }

    /// From the first slave connection (the master's record of when it connected) until that
    /// slave acked `end`.
    async fn catch_up_seconds(&self, end: u64) -> anyhow::Result<f64> {
        let deadline = Instant::now() + PATIENCE;
        let mut connected = None;
        loop {
            let status = self.handle.status().await.context("master stopped")?;
            let now = Instant::now();
            if let Some(link) = status.slaves.iter().max_by_key(|l| l.connected_for) {
                let at = *connected.get_or_insert(now.checked_sub(link.connected_for).unwrap_or(now));
                if link.ack.is_some_and(|a| a >= end) {
                    return Ok(now.duration_since(at).as_secs_f64());
                }
            }
            ensure!(now < deadline, "no slave acked {end} in {PATIENCE:?}");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }

    /// The master's store.
    pub fn store(&self) -> &Arc<CommitLog> {
        &self.store
    }

    /// Stops replication, then closes the store (before anyone removes its directory).
    pub async fn close(self) -> anyhow::Result<()> {
        self.handle.shutdown().await;
        let store = self.store;
        tokio::task::spawn_blocking(move || store.shutdown()).await?.context("closing the master's store")?;
        Ok(())
    }
}

/// A master of any implementation.
pub enum Master {
    /// logship, in this process.
    Logship(LogshipMaster),
    /// A peer process.
    Peer(PeerProcess),
}

fn role_name(role: BrokerRole) -> &'static str {
    role.rocketmq_name()
}

fn flush_name(flush: FlushDiskType) -> &'static str {
    match flush {
        FlushDiskType::SyncFlush => "SYNC_FLUSH",
        _ => "ASYNC_FLUSH",
    }
}

fn num(v: &serde_json::Value, key: &str) -> anyhow::Result<f64> {
    v[key].as_f64().with_context(|| format!("no {key} in {v}"))
}

impl Master {
    /// Starts a master of `kind` with a new store at `dir`.
    pub async fn start(
        kind: Impl,
        dir: &Path,
        role: BrokerRole,
        flush: FlushDiskType,
        segment: u64,
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(match kind {
            Impl::Logship => Self::Logship(LogshipMaster::start(dir, role, flush, segment).await?),
            _ => {
                let spec = PeerSpec {
                    role: role_name(role),
                    dir: dir.to_path_buf(),
                    segment,
                    flush: flush_name(flush),
                    master: None,
                };
                Self::Peer(blocking(move || PeerProcess::start(kind, &spec)).await?)
            }
        })
    }

    /// The HA address.
    pub fn ha_addr(&self) -> String {
        match self {
            Self::Logship(m) => m.ha_addr(),
            Self::Peer(p) => format!("127.0.0.1:{}", p.ha_port),
        }
    }

    /// Fills the log to at least `bytes` with `size`-byte bodies; returns the log end.
    pub async fn fill(&mut self, bytes: u64, size: usize) -> anyhow::Result<u64> {
        match self {
            Self::Logship(m) => m.fill(bytes, size).await,
            Self::Peer(p) => {
                let v = p.command(&format!("fill {bytes} {size}"), PATIENCE)?;
                Ok(num(&v, "maxPhyOffset")? as u64)
            }
        }
    }

    /// `count` puts of `size` bytes from `producers` concurrent producers in the master's process.
    pub async fn bench(&mut self, producers: usize, count: u64, size: usize) -> anyhow::Result<PutFigures> {
        match self {
            Self::Logship(m) => {
                let (secs, lat) = m.produce(producers, count, size).await?;
                Ok(PutFigures {
                    rate: count as f64 / secs,
                    p50: super::micros(percentile(&lat, 0.5)),
                    p99: super::micros(percentile(&lat, 0.99)),
                })
            }
            Self::Peer(p) => {
                let v = p.command(&format!("bench {producers} {count} {size}"), PATIENCE)?;
                if num(&v, "failed")? > 0.0 {
                    bail!(
                        "{} of {count} {} puts failed, the first with {}",
                        v["failed"],
                        p.kind.name(),
                        v["firstFailure"]
                    );
                }
                Ok(PutFigures {
                    rate: count as f64 / num(&v, "secs")?,
                    p50: num(&v, "p50us")?,
                    p99: num(&v, "p99us")?,
                })
            }
        }
    }

    /// Waits until a slave is connected and has reported.
    pub async fn wait_connected(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let connected = match self {
                Self::Logship(m) => {
                    m.handle.status().await.context("master stopped")?.slaves.iter().any(|l| l.ack.is_some())
                }
                Self::Peer(p) => num(&p.command("status", Duration::from_secs(30))?, "connections")? > 0.0,
            };
            if connected {
                // A Java master counts the connection before the slave's first report.
                tokio::time::sleep(Duration::from_millis(200)).await;
                return Ok(());
            }
            ensure!(Instant::now() < deadline, "no slave connected in a minute");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops the master and closes its store.
    pub async fn close(self) -> anyhow::Result<()> {
        match self {
            Self::Logship(m) => m.close().await,
            Self::Peer(p) => blocking(move || p.shutdown()).await,
        }
    }
}

/// A slave of any implementation, each a new process.
pub enum Slave {
    /// `logship slave`.
    Logship(LogshipSlave),
    /// A peer process.
    Peer(PeerProcess),
}

impl Slave {
    /// Starts a slave of `kind` with a new store at `dir`, replicating from `master`.
    pub async fn start(
        kind: Impl,
        dir: &Path,
        master: String,
        flush: FlushDiskType,
        segment: u64,
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let dir = dir.to_path_buf();
        Ok(match kind {
            Impl::Logship => Self::Logship(LogshipSlave::start(
                &dir,
                &master,
                &logship_sets(flush, segment),
                &options().slave_wrap,
            )?),
            _ => {
                let spec =
                    PeerSpec { role: "SLAVE", dir, segment, flush: flush_name(flush), master: Some(master) };
                Self::Peer(blocking(move || PeerProcess::start(kind, &spec)).await?)
            }
        })
    }

    fn start_sync(
        kind: Impl,
        dir: &Path,
        master: String,
        flush: FlushDiskType,
        segment: u64,
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(match kind {
            Impl::Logship => Self::Logship(LogshipSlave::start(
                dir,
                &master,
                &logship_sets(flush, segment),
                &options().slave_wrap,
            )?),
            _ => {
                let spec = PeerSpec {
                    role: "SLAVE",
                    dir: dir.to_path_buf(),
                    segment,
                    flush: flush_name(flush),
                    master: Some(master),
                };
                Self::Peer(PeerProcess::start(kind, &spec)?)
            }
        })
    }

    /// The instant this process saw the slave hold `end`: a `logship slave`'s /status, a
    /// peer's `wait-offset` answer.
    fn held_sync(&mut self, end: u64) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + PATIENCE;
        match self {
            Self::Logship(s) => loop {
                if let Ok(v) = http_status(s.port) {
                    if v["maxOffset"].as_u64().is_some_and(|m| m >= end) {
                        return Ok(Instant::now());
                    }
                }
                ensure!(
                    Instant::now() < deadline,
                    "`logship slave` did not reach {end}:\n{}",
                    s.stderr_tail()
                );
                std::thread::sleep(Duration::from_micros(500));
            },
            Self::Peer(p) => {
                let v = p.command(
                    &format!("wait-offset {end} {}", PATIENCE.as_millis()),
                    PATIENCE + Duration::from_secs(10),
                )?;
                let at = Instant::now();
                ensure!(v["reached"] == true, "the {} slave did not reach {end}: {v}", p.kind.name());
                Ok(at)
            }
        }
    }

    fn stop_sync(self) -> anyhow::Result<()> {
        match self {
            Self::Logship(s) => {
                if options().slave_threads {
                    eprintln!("{}", s.thread_report());
                }
                s.stop()
            }
            Self::Peer(p) => p.shutdown(),
        }
    }

    /// Stops the slave cleanly.
    pub async fn stop(self) -> anyhow::Result<()> {
        match self {
            Self::Logship(s) => blocking(move || s.stop()).await,
            Self::Peer(p) => blocking(move || p.shutdown()).await,
        }
    }
}

/// `--set` overrides of a `logship slave`: only what the scenario fixes.
fn logship_sets(flush: FlushDiskType, segment: u64) -> Vec<String> {
    let mut sets = options().sets.clone();
    sets.push(format!("flushDiskType={}", flush_name(flush)));
    if segment != DEFAULT_SEGMENT {
        sets.push(format!("mappedFileSizeCommitLog={segment}"));
    }
    sets
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(f).await?
}

/// One catch-up: a new `slave` process with a new store joins `master` (already holding `end`
/// bytes, and with no slave connected); seconds from the connection, as the master saw it,
/// until the slave held `end`: by its ack on a logship master, by the slave's own log end
/// otherwise. Every instant is taken in this process, as it sees each event.
pub async fn join(
    master: &mut Master,
    slave: Impl,
    dir: &Path,
    end: u64,
    segment: u64,
) -> anyhow::Result<f64> {
    let addr = master.ha_addr();
    let secs = match master {
        Master::Logship(m) => {
            m.wait_no_slaves().await?;
            let s = Slave::start(slave, dir, addr, FlushDiskType::AsyncFlush, segment).await?;
            let secs = m.catch_up_seconds(end).await;
            blocking(move || s.stop_sync()).await?;
            secs
        }
        Master::Peer(p) => tokio::task::block_in_place(|| {
            p.command("wait-idle 5000", Duration::from_secs(15))?;
            p.send_line(&format!("watch-connect {}", PATIENCE.as_millis()))?;
            std::thread::scope(|scope| {
                let connected = scope.spawn(|| -> anyhow::Result<Instant> {
                    let v = p.answer(PATIENCE + Duration::from_secs(10))?;
                    ensure!(v["connections"].as_u64().is_some_and(|c| c > 0), "no slave connected: {v}");
                    Ok(Instant::now())
                });
                let held = (|| {
                    let mut s = Slave::start_sync(slave, dir, addr, FlushDiskType::AsyncFlush, segment)?;
                    let held = s.held_sync(end);
                    s.stop_sync()?;
                    held
                })();
                let connected = connected.join().map_err(|_| anyhow::anyhow!("watcher panicked"))??;
                Ok(held?.saturating_duration_since(connected).as_secs_f64())
            })
        }),
    };
    let _ = std::fs::remove_dir_all(dir);
    secs
}

/// `GET /status` of a local broker, by hand (one request, `Connection: close`).
fn http_status(port: u16) -> anyhow::Result<serde_json::Value> {
    use std::io::{Read, Write};
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port))?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    sock.write_all(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut text = String::new();
    sock.read_to_string(&mut text)?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).context("no HTTP body")?;
    ensure!(text.starts_with("HTTP/1.1 200"), "/status answered {}", text.lines().next().unwrap_or_default());
    Ok(serde_json::from_str(body)?)
}

/// SYNC_MASTER put figures with one slave: (1 producer, 64 producers).
pub async fn sync_puts(
    master_kind: Impl,
    slave_kind: Impl,
    dir: &Path,
    flush: FlushDiskType,
    segment: u64,
    counts: (u64, u64),
    size: usize,
) -> anyhow::Result<(PutFigures, PutFigures)> {
    let mut master =
        Master::start(master_kind, &dir.join("master"), BrokerRole::SyncMaster, flush, segment).await?;
    let slave = Slave::start(slave_kind, &dir.join("slave"), master.ha_addr(), flush, segment).await;
    let measured = async {
        let slave = slave?;
        let measured = async {
            master.wait_connected().await?;
            // Warm-up puts (the JVM compiles its hot paths), not measured.
            master.bench(1, counts.0.min(2_000), size).await?;
            let one = master.bench(1, counts.0, size).await?;
            let many = master.bench(64, counts.1, size).await?;
            anyhow::Ok((one, many))
        }
        .await;
        slave.stop().await?;
        measured
    }
    .await;
    // Close the master's store, whatever happened, before its directory goes.
    master.close().await?;
    let _ = std::fs::remove_dir_all(dir);
    measured
}

/// Put latencies of the roll scenario, microseconds.
#[derive(Clone, Copy, Debug)]
pub struct RollFigures {
    /// p99 within the window around the roll.
    pub p99: f64,
    /// The slowest put within the window around the roll.
    pub max: f64,
    /// Where the slowest put around the roll started, bytes from the roll (negative: before it).
    pub max_at: i64,
    /// When the slowest put around the roll started (for matching with traces).
    pub max_when: std::time::SystemTime,
    /// p99 within the window around the middle of the first segment.
    pub mid_p99: f64,
    /// The slowest put within the window around the middle of the first segment.
    pub mid_max: f64,
}

/// A master rolls into its second segment under steady puts from one producer: put latency
/// within `window` bytes either side of the roll, and within `window` bytes either side of the
/// middle of the first segment.
pub async fn roll(dir: &Path, segment: u64, window: u64, size: usize) -> anyhow::Result<RollFigures> {
    let master =
        LogshipMaster::start(dir, BrokerRole::AsyncMaster, FlushDiskType::AsyncFlush, segment).await?;
    let measured = roll_puts(&master, segment, window, size).await;
    master.close().await?;
    let _ = std::fs::remove_dir_all(dir);
    measured
}

async fn roll_puts(
    master: &LogshipMaster,
    segment: u64,
    window: u64,
    size: usize,
) -> anyhow::Result<RollFigures> {
    let mut around_roll = Vec::new();
    let mut mid = Vec::new();
    let (roll_at, middle) = (segment, segment / 2);
    let (mut max, mut max_at, mut max_when) = (Duration::ZERO, 0i64, std::time::SystemTime::UNIX_EPOCH);
    let mut i = 0u64;
    loop {
        let at = master.store.max_offset();
        if at >= roll_at + window {
            break;
        }
        let (t, when) = (Instant::now(), std::time::SystemTime::now());
        let r = master.handle.put(message(size, i)).await;
        let took = t.elapsed();
        ensure!(r.status == PutStatus::PutOk, "put {i} ended {}", r.status);
        if at + window >= roll_at {
            around_roll.push(took);
            if took > max {
                (max, max_at, max_when) = (took, at as i64 - roll_at as i64, when);
            }
        } else if at + window >= middle && at < middle + window {
            mid.push(took);
        }
        i += 1;
    }
    around_roll.sort_unstable();
    mid.sort_unstable();
    Ok(RollFigures {
        p99: super::micros(percentile(&around_roll, 0.99)),
        max: super::micros(max),
        max_at,
        max_when,
        mid_p99: super::micros(percentile(&mid, 0.99)),
        mid_max: super::micros(mid.last().copied().unwrap_or_default()),
    })
}
