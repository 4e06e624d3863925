//! Scenarios as users meet them: every store is new, in a new directory, with default config
//! and RocketMQ's default 1 GiB segments; no clock waits for background work (preallocation,
//! warming, writeback) first; measured slaves are new processes. Each implementation is a
//! master ([`Master`]) or a slave ([`Slave`]) behind one interface, so logship, Java RocketMQ and
//! rocketmq-rust run the same scenario on the same bytes.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use logship_core::PutStatus;
use logship_core::{BrokerRole, FlushDiskType};
use logship_store::CommitLog;

use super::peer::{Impl, LogshipSlave, PeerProcess, PeerSpec};
use super::{message, percentile};
use crate::config::BrokerSettings;

/// RocketMQ's default commit-log segment size.
pub const DEFAULT_SEGMENT: u64 = 1 << 30;

/// Options for every logship broker the bench starts.
#[derive(Clone, Debug)]
pub struct LogshipOptions {
    /// broker.conf settings (`KEY=VALUE`) for every logship master and slave.
    pub sets: Vec<String>,
    /// A command that `logship slave` runs under (e.g. `perf stat -o FILE --`, `strace -c -f -o
    /// FILE`, `valgrind --tool=callgrind`).
    pub slave_wrap: Vec<String>,
    /// Print each slave thread's CPU time and page faults before it stops.
    pub slave_threads: bool,
    /// How long a peer process may take to exit after its shutdown before it is killed.
    pub peer_grace: Duration,
}

static OPTIONS: std::sync::OnceLock<LogshipOptions> = std::sync::OnceLock::new();

/// Sets the options for the rest of the run (first call wins).
pub fn set_options(o: LogshipOptions) {
    let _ = OPTIONS.set(o);
}

impl Default for LogshipOptions {
    fn default() -> Self {
        Self {
            sets: Vec::new(),
            slave_wrap: Vec::new(),
            slave_threads: false,
            peer_grace: super::peer::SHUTDOWN_GRACE,
        }
    }
}

fn options() -> &'static LogshipOptions {
    OPTIONS.get_or_init(LogshipOptions::default)
}

/// Starts a peer process with the run's shutdown grace.
fn start_peer(kind: Impl, spec: &PeerSpec) -> anyhow::Result<PeerProcess> {
    let mut p = PeerProcess::start(kind, spec)?;
    p.set_shutdown_grace(options().peer_grace);
    Ok(p)
}

/// How long a catch-up or a put run may take before the bench gives up.
const PATIENCE: Duration = Duration::from_secs(600);

/// How long a peer may take to answer one `bench` command (at most 50,000 puts; a failed put
/// waits at most its store's SYNC timeout) before the pairing is given up as hung.
const BENCH_PATIENCE: Duration = Duration::from_secs(90);

/// Put figures of one run: puts/s and sorted per-put latencies summarized. A put that did not
/// end `PUT_OK` is counted in `failed` and is in neither the rate nor the percentiles.
#[derive(Clone, Debug, Default)]
pub struct PutFigures {
    /// Successful puts per second.
    pub rate: f64,
    /// Latency p50 of the successful puts, microseconds.
    pub p50: f64,
    /// Latency p99 of the successful puts, microseconds.
    pub p99: f64,
    /// Puts that ended `PUT_OK`.
    pub ok: u64,
    /// Puts that ended otherwise.
    pub failed: u64,
    /// The status the first failed put ended with.
    pub first_failure: Option<String>,
}

/// What `count` puts of one run gave: the successful ones' latencies, sorted, and the failures.
#[derive(Debug, Default)]
pub struct Produced {
    /// Seconds from the first put to the last answer.
    pub secs: f64,
    /// Latencies of the puts that ended `PUT_OK`, sorted.
    pub latencies: Vec<Duration>,
    /// Puts that ended otherwise.
    pub failed: u64,
    /// The status the first failed put ended with.
    pub first_failure: Option<String>,
}

impl Produced {
    /// The figures of this run.
    pub fn figures(&self) -> PutFigures {
        let ok = self.latencies.len() as u64;
        PutFigures {
            rate: if self.secs > 0.0 { ok as f64 / self.secs } else { 0.0 },
            p50: super::micros(percentile(&self.latencies, 0.5)),
            p99: super::micros(percentile(&self.latencies, 0.99)),
            ok,
            failed: self.failed,
            first_failure: self.first_failure.clone(),
        }
    }
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
        Self::start_with(dir, role, flush, segment, &[]).await
    }

    /// [`Self::start`] with broker.conf settings (`KEY=VALUE`) beyond the run's `--set` ones.
    pub async fn start_with(
        dir: &Path,
        role: BrokerRole,
        flush: FlushDiskType,
        segment: u64,
        extra: &[String],
    ) -> anyhow::Result<Self> {
        let overrides: Vec<(String, String)> = options()
            .sets
            .iter()
            .chain(extra)
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

    /// `count` puts from `producers` tasks: every put is made, a failed one is counted.
    pub async fn produce(&self, producers: usize, count: u64, size: usize) -> anyhow::Result<Produced> {
        let end = self.next.load(Ordering::Relaxed) + count;
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..producers {
            let (master, next) = (self.handle.clone(), self.next.clone());
            tasks.push(tokio::spawn(async move {
                let mut run = Produced::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= end {
                        return run;
                    }
                    let t = Instant::now();
                    let r = master.put(message(size, i)).await;
                    if r.status == PutStatus::PutOk {
                        run.latencies.push(t.elapsed());
                    } else {
                        run.failed += 1;
                        run.first_failure.get_or_insert_with(|| r.status.to_string());
                    }
                }
            }));
        }
        let mut all = Produced { latencies: Vec::with_capacity(count as usize), ..Produced::default() };
        for t in tasks {
            let run = t.await?;
            all.latencies.extend(run.latencies);
            all.failed += run.failed;
            all.first_failure = all.first_failure.or(run.first_failure);
        }
        all.secs = start.elapsed().as_secs_f64();
        all.latencies.sort_unstable();
        Ok(all)
    }

    /// The HA service's handle (puts, status).
    pub fn handle(&self) -> &logship_tokio::MasterHandle<CommitLog> {
        &self.handle
    }

    /// Waits until no slave connection is left (a stopped slave's may linger a moment).
    pub async fn wait_no_slaves(&self) -> anyhow::Result<()> {
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

/// A peer's answer to `bench PRODUCERS COUNT SIZE`: `puts` successful ones (the only ones in
/// `p50us`/`p99us`), `failed` others, the first of them with `firstFailure`.
fn peer_bench_figures(v: &serde_json::Value, count: u64) -> anyhow::Result<PutFigures> {
    let (ok, failed) = (num(v, "puts")? as u64, num(v, "failed")? as u64);
    ensure!(ok + failed == count, "the peer answered {ok} good and {failed} failed puts of {count}: {v}");
    let secs = num(v, "secs")?;
    Ok(PutFigures {
        rate: if secs > 0.0 { ok as f64 / secs } else { 0.0 },
        p50: num(v, "p50us")?,
        p99: num(v, "p99us")?,
        ok,
        failed,
        first_failure: v["firstFailure"].as_str().filter(|f| !f.is_empty()).map(String::from),
    })
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
        Self::start_with(kind, dir, role, flush, segment, &[]).await
    }

    /// [`Self::start`] with broker.conf settings for a logship master beyond the run's `--set`
    /// ones (a peer takes none).
    pub async fn start_with(
        kind: Impl,
        dir: &Path,
        role: BrokerRole,
        flush: FlushDiskType,
        segment: u64,
        extra: &[String],
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(match kind {
            Impl::Logship => {
                Self::Logship(LogshipMaster::start_with(dir, role, flush, segment, extra).await?)
            }
            _ => {
                let spec = PeerSpec {
                    role: role_name(role),
                    dir: dir.to_path_buf(),
                    segment,
                    flush: flush_name(flush),
                    master: None,
                };
                Self::Peer(blocking(move || start_peer(kind, &spec)).await?)
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
            Self::Logship(m) => Ok(m.produce(producers, count, size).await?.figures()),
            Self::Peer(p) => {
                let v = p.command(&format!("bench {producers} {count} {size}"), BENCH_PATIENCE)?;
                peer_bench_figures(&v, count)
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

    /// Stops the master and closes its store; a note if the process had to be killed.
    pub async fn close(self) -> anyhow::Result<Option<String>> {
        match self {
            Self::Logship(m) => m.close().await.map(|()| None),
            Self::Peer(p) => blocking(move || p.shutdown()).await.map(|e| e.note()),
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
        Self::start_with(kind, dir, master, flush, segment, &[]).await
    }

    /// [`Self::start`] with broker.conf settings for a `logship slave` beyond the run's `--set`
    /// ones (a peer takes none).
    pub async fn start_with(
        kind: Impl,
        dir: &Path,
        master: String,
        flush: FlushDiskType,
        segment: u64,
        extra: &[String],
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let dir = dir.to_path_buf();
        Ok(match kind {
            Impl::Logship => {
                let mut sets = logship_sets(flush, segment);
                sets.extend_from_slice(extra);
                Self::Logship(LogshipSlave::start(&dir, &master, &sets, &options().slave_wrap)?)
            }
            _ => {
                let spec =
                    PeerSpec { role: "SLAVE", dir, segment, flush: flush_name(flush), master: Some(master) };
                Self::Peer(blocking(move || start_peer(kind, &spec)).await?)
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
                Self::Peer(start_peer(kind, &spec)?)
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

    /// An error if a `logship slave` process has exited (a peer is not checked).
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        match self {
            Self::Logship(s) => s.check_running(),
            Self::Peer(_) => Ok(()),
        }
    }

    /// Stops the slave cleanly; a note if the process had to be killed.
    fn stop_sync(self) -> anyhow::Result<Option<String>> {
        match self {
            Self::Logship(s) => {
                if options().slave_threads {
                    eprintln!("{}", s.thread_report());
                }
                s.stop().map(|()| None)
            }
            Self::Peer(p) => p.shutdown().map(|e| e.note()),
        }
    }

    /// Stops the slave cleanly; a note if the process had to be killed.
    pub async fn stop(self) -> anyhow::Result<Option<String>> {
        blocking(move || self.stop_sync()).await
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
            warn_note(slave, blocking(move || s.stop_sync()).await?);
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
                    warn_note(slave, s.stop_sync()?);
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

/// Says on stderr what stopping a `kind` slave had to do (a kill after its grace period).
fn warn_note(kind: Impl, note: Option<String>) {
    if let Some(note) = note {
        eprintln!("  note: the {} slave {note}", kind.name());
    }
}

/// `GET /status` of a local broker, by hand (one request, `Connection: close`).
pub(crate) fn http_status(port: u16) -> anyhow::Result<serde_json::Value> {
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

/// One SYNC put run of a (master, slave) pairing: the warm-up, 1 producer and 64 producers,
/// and anything the bench had to note about the processes (a peer killed after its shutdown
/// grace, a slave that did not stop cleanly). A note never discards the figures.
#[derive(Clone, Debug, Default)]
pub struct SyncRun {
    /// The warm-up puts (only their failures are reported).
    pub warm_up: PutFigures,
    /// 1 producer.
    pub one: PutFigures,
    /// 64 producers.
    pub many: PutFigures,
    /// What went wrong around the measurement, one line each, with the implementation it is
    /// about.
    pub notes: Vec<(Impl, String)>,
}

/// SYNC_MASTER put figures with one slave: warm-up, 1 producer, 64 producers.
pub async fn sync_puts(
    master_kind: Impl,
    slave_kind: Impl,
    dir: &Path,
    flush: FlushDiskType,
    segment: u64,
    counts: (u64, u64),
    size: usize,
) -> anyhow::Result<SyncRun> {
    let mut master =
        Master::start(master_kind, &dir.join("master"), BrokerRole::SyncMaster, flush, segment).await?;
    let slave = Slave::start(slave_kind, &dir.join("slave"), master.ha_addr(), flush, segment).await;
    let mut notes = Vec::new();
    let measured = async {
        let slave = slave?;
        let measured = async {
            master.wait_connected().await?;
            // Warm-up puts (the JVM compiles its hot paths), not measured.
            let warm_up = master.bench(1, counts.0.min(2_000), size).await?;
            let one = master.bench(1, counts.0, size).await?;
            let many = master.bench(64, counts.1, size).await?;
            anyhow::Ok(SyncRun { warm_up, one, many, notes: Vec::new() })
        }
        .await;
        match slave.stop().await {
            Ok(Some(note)) => notes.push((slave_kind, format!("the {} slave {note}", slave_kind.name()))),
            Ok(None) => {}
            Err(e) => notes.push((slave_kind, format!("stopping the {} slave: {e:#}", slave_kind.name()))),
        }
        measured
    }
    .await;
    // Close the master's store, whatever happened, before its directory goes.
    match master.close().await {
        Ok(Some(note)) => notes.push((master_kind, format!("the {} master {note}", master_kind.name()))),
        Ok(None) => {}
        Err(e) => notes.push((master_kind, format!("closing the {} master: {e:#}", master_kind.name()))),
    }
    let _ = std::fs::remove_dir_all(dir);
    match measured {
        Ok(mut run) => {
            run.notes = notes;
            Ok(run)
        }
        // What stopping the processes took is part of what went wrong.
        Err(e) if !notes.is_empty() => {
            let said: Vec<String> = notes.into_iter().map(|(_, n)| n).collect();
            Err(anyhow::anyhow!("{e:#}; then {}", said.join("; ")))
        }
        Err(e) => Err(e),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::peer::tests::{fake_peer, spec};

    /// A peer's failed put (RocketMQ 4.9.8's FLUSH_SLAVE_TIMEOUT) is counted and kept out of
    /// the rate and the percentiles; the run goes on instead of giving up the scenario.
    #[tokio::test]
    async fn a_failed_peer_put_is_counted_and_kept_out_of_the_figures() {
        let p = PeerProcess::start_with(Impl::Java4, fake_peer(true), &spec("SYNC_MASTER")).unwrap();
        let mut master = Master::Peer(p);
        let f = master.bench(1, 100, 1024).await.unwrap();
        assert_eq!((f.ok, f.failed), (99, 1));
        assert_eq!(f.first_failure.as_deref(), Some("FLUSH_SLAVE_TIMEOUT"));
        assert_eq!(f.rate, 99.0 / 0.5, "the rate counts only the puts that succeeded");
        assert_eq!((f.p50, f.p99), (100.0, 200.0));
        assert_eq!(master.close().await.unwrap(), None);
    }

    /// The figures of logship's own puts leave failed puts out the same way.
    #[test]
    fn failed_logship_puts_are_out_of_the_rate_and_the_percentiles() {
        let run = Produced {
            secs: 2.0,
            latencies: vec![Duration::from_micros(100); 10],
            failed: 3,
            first_failure: Some("FLUSH_SLAVE_TIMEOUT".into()),
        };
        let f = run.figures();
        assert_eq!((f.ok, f.failed, f.rate, f.p99), (10, 3, 5.0, 100.0));
    }
}
