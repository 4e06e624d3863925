//! The scale series (`--series`): how a figure grows with the work. Each series measures its
//! points on new processes and stores, as the scenarios do, and gives a [`Series`] (a table, an
//! SVG, the JSON):
//!
//! - `producers`: SYNC puts/s, p50 and p99 with 1 to 256 producers (SYNC_MASTER, one slave);
//! - `size`: MB/s and puts/s of 64 B to 4 MiB messages, SYNC and ASYNC (16 producers);
//! - `slaves`: 1 to 8 slaves on one master: its CPU per replicated MB, SYNC p50 and p99, and a
//!   fresh slave's catch-up while the others stream;
//! - `log`: a fresh slave's catch-up of logs of each `--log-sizes` size;
//! - `recovery`: restart time after `kill -9` under load and after a clean stop;
//! - `memory`: the master's RSS per HA connection and during a catch-up.
//!
//! A point that fails costs its own value (`null`) and a note, not the series.

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use logship_core::{BrokerRole, FlushDiskType, PutStatus};

use super::peer::{Impl, PeerProcess, PeerSpec};
use super::series::{Curve, Series};
use super::user::{self, LogshipMaster, Master, PutFigures, Slave};
use super::{median, message};

/// One scale series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// SYNC puts with more and more producers.
    Producers,
    /// Puts of larger and larger messages.
    Size,
    /// More and more slaves on one master.
    Slaves,
    /// Catch-up of larger and larger logs.
    Log,
    /// Restart of a store after a crash and after a clean stop.
    Recovery,
    /// The master's memory per connection and during a catch-up.
    Memory,
}

impl Which {
    /// Every series, in the order they run.
    pub const ALL: [Self; 6] =
        [Self::Producers, Self::Size, Self::Slaves, Self::Log, Self::Recovery, Self::Memory];

    /// Its name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::Producers => "producers",
            Self::Size => "size",
            Self::Slaves => "slaves",
            Self::Log => "log",
            Self::Recovery => "recovery",
            Self::Memory => "memory",
        }
    }

    /// The series `--series` names (`all` for every one), in the order they run, each once.
    pub fn parse(names: &[String]) -> anyhow::Result<Vec<Self>> {
        let mut picked = Vec::new();
        for n in names.iter().flat_map(|n| n.split(',')).map(str::trim).filter(|n| !n.is_empty()) {
            if n == "all" {
                picked.extend(Self::ALL);
                continue;
            }
            match Self::ALL.iter().find(|w| w.name() == n) {
                Some(&w) => picked.push(w),
                None => {
                    bail!("unknown --series {n:?}: producers, size, slaves, log, recovery, memory or all")
                }
            }
        }
        Ok(Self::ALL.into_iter().filter(|w| picked.contains(w)).collect())
    }
}

/// A size as written on the command line: a number of bytes with an optional unit, `B`, `KB`,
/// `MB`, `GB` (powers of 1000) or `KiB`, `MiB`, `GiB` (powers of 1024), e.g. `129MB`, `8GiB`.
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().with_context(|| format!("size {text:?}: a number first"))?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => bail!("size {text:?}: unknown unit {other:?} (B, KB, MB, GB, KiB, MiB, GiB)"),
    };
    let bytes = (number * scale as f64).round();
    ensure!(bytes >= 1.0 && bytes < u64::MAX as f64, "size {text:?}: out of range");
    Ok(bytes as u64)
}

/// What the series are measured with.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Tiny versions, for a smoke run.
    pub quick: bool,
    /// Rounds per point (the medians are reported).
    pub repeat: usize,
    /// At most this many puts per put point.
    pub messages: u64,
    /// Latency samples per latency point.
    pub samples: usize,
    /// The peers to measure beside logship where they can run the series.
    pub peers: Vec<Impl>,
    /// The log sizes of the `log` series (and of the `memory` series' catch-ups).
    pub log_sizes: Vec<u64>,
    /// The store sizes of the `recovery` series.
    pub recovery_sizes: Vec<u64>,
}

impl Plan {
    /// Commit-log segment size: RocketMQ's default, smaller in a quick run.
    fn segment(&self) -> u64 {
        if self.quick { 64 << 20 } else { user::DEFAULT_SEGMENT }
    }

    /// The implementations measured: logship, then the peers.
    fn kinds(&self) -> Vec<Impl> {
        std::iter::once(Impl::Logship).chain(self.peers.iter().copied()).collect()
    }
}

/// What the series noted: a line each, with the implementation it is about.
pub type Notes = Vec<(Impl, String)>;

fn say(s: &str) {
    eprintln!("  running {s} ...");
}

/// Runs the series `which` under `dir`; the notes go into `notes`.
pub async fn run(plan: &Plan, which: &[Which], dir: &Path, notes: &mut Notes) -> Vec<Series> {
    let mut out = Vec::new();
    // Catch-ups of a logship master by a fresh logship slave, kept for the memory series.
    let mut catch_ups: Option<Vec<CatchUps>> = None;
    for &w in which {
        let d = dir.join(w.name());
        match w {
            Which::Producers => out.push(producers(plan, &d, notes).await),
            Which::Size => out.push(size(plan, &d, notes).await),
            Which::Slaves => out.push(slaves(plan, &d, notes).await),
            Which::Log => {
                let (series, logship) = log(plan, &d, notes).await;
                out.push(series);
                catch_ups = Some(logship);
            }
            Which::Recovery => out.push(recovery(plan, &d, notes).await),
            Which::Memory => {
                out.push(memory(plan, &d, notes).await);
                let logship = match catch_ups.take() {
                    Some(c) => c,
                    None => logship_catch_ups(plan, &d, notes).await,
                };
                out.push(catch_up_memory(plan, &logship));
            }
        }
        let _ = std::fs::remove_dir_all(&d);
    }
    out
}

/// The median of the values measured, `None` when none was.
fn med(values: &[f64]) -> Option<f64> {
    let v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    (!v.is_empty()).then(|| median(v))
}

fn curve(name: String, unit: &str, values: Vec<Option<f64>>) -> Curve {
    Curve { name, unit: unit.to_string(), values }
}

/// Records a failed point: a note about `kind`, on stderr too.
fn failed(notes: &mut Notes, kind: Impl, what: &str, e: &anyhow::Error) {
    let note = format!("{what}: no figure: {e:#}");
    eprintln!("  note: {note}");
    notes.push((kind, note));
}

/// One put point on a new pair: a `master` with one `slave`, a warm-up of `warm_up` puts from
/// one producer, then `count` puts of `size` bytes from `producers`.
#[allow(clippy::too_many_arguments)]
async fn put_point(
    (master_kind, slave_kind): (Impl, Impl),
    role: BrokerRole,
    dir: &Path,
    segment: u64,
    extra: &[String],
    warm_up: u64,
    (producers, count, size): (usize, u64, usize),
    notes: &mut Notes,
) -> anyhow::Result<PutFigures> {
    let _ = std::fs::remove_dir_all(dir);
    let flush = FlushDiskType::AsyncFlush;
    let mut master =
        Master::start_with(master_kind, &dir.join("master"), role, flush, segment, extra).await?;
    let slave =
        Slave::start_with(slave_kind, &dir.join("slave"), master.ha_addr(), flush, segment, extra).await;
    let measured = async {
        let slave = slave?;
        let measured = async {
            master.wait_connected().await?;
            master.bench(1, warm_up, size).await?;
            master.bench(producers, count, size).await
        }
        .await;
        match slave.stop().await {
            Ok(Some(n)) => notes.push((slave_kind, format!("the {} slave {n}", slave_kind.name()))),
            Ok(None) => {}
            Err(e) => notes.push((slave_kind, format!("stopping the {} slave: {e:#}", slave_kind.name()))),
        }
        measured
    }
    .await;
    match master.close().await {
        Ok(Some(n)) => notes.push((master_kind, format!("the {} master {n}", master_kind.name()))),
        Ok(None) => {}
        Err(e) => notes.push((master_kind, format!("closing the {} master: {e:#}", master_kind.name()))),
    }
    let _ = std::fs::remove_dir_all(dir);
    let f = measured?;
    if f.failed > 0 {
        bail!(
            "{} of {} puts failed, the first with {}",
            f.failed,
            count,
            f.first_failure.unwrap_or_default()
        );
    }
    Ok(f)
}

/// The producer counts of the `producers` series.
pub const PRODUCERS: [usize; 5] = [1, 4, 16, 64, 256];

/// SYNC puts/s, p50 and p99 of 1 KiB puts from each of [`PRODUCERS`]: a SYNC_MASTER and one
/// slave of the same implementation, new for every point and round.
async fn producers(plan: &Plan, dir: &Path, notes: &mut Notes) -> Series {
    let size = 1024;
    let mut curves = Vec::new();
    for kind in plan.kinds() {
        let (mut rate, mut p50, mut p99) = (Vec::new(), Vec::new(), Vec::new());
        for &p in &PRODUCERS {
            let count = if plan.quick { (2 * p as u64).max(64) } else { plan.messages.min(50_000) };
            let warm_up = if plan.quick { 32 } else { 2_000 };
            let mut rounds: [Vec<f64>; 3] = Default::default();
            for round in 1..=plan.repeat {
                let what = format!("producers series: {} SYNC puts, {p} producer(s)", kind.name());
                say(&format!("{what} ({round}/{})", plan.repeat));
                let point = (p, count, size);
                match put_point(
                    (kind, kind),
                    BrokerRole::SyncMaster,
                    dir,
                    plan.segment(),
                    &[],
                    warm_up,
                    point,
                    notes,
                )
                .await
                {
                    Ok(f) => {
                        rounds[0].push(f.rate);
                        rounds[1].push(f.p50);
                        rounds[2].push(f.p99);
                    }
                    Err(e) => failed(notes, kind, &format!("{what}, round {round}"), &e),
                }
            }
            rate.push(med(&rounds[0]));
            p50.push(med(&rounds[1]));
            p99.push(med(&rounds[2]));
        }
        let n = kind.name();
        curves.push(curve(format!("{n} SYNC puts/s"), "puts/s", rate));
        curves.push(curve(format!("{n} SYNC p50"), "us", p50));
        curves.push(curve(format!("{n} SYNC p99"), "us", p99));
    }
    Series {
        name: "producers".into(),
        title: "SYNC puts of 1 KiB by producers: SYNC_MASTER and one slave, new for every point".into(),
        x_label: "producers".into(),
        x: PRODUCERS.iter().map(|&p| p as f64).collect(),
        curves,
    }
}

/// The message sizes of the `size` series.
pub const SIZES: [usize; 5] = [64, 1 << 10, 16 << 10, 256 << 10, 4 << 20];

/// RocketMQ's default `maxMessageSize`: the largest stored record, header included.
const DEFAULT_MAX_MESSAGE: usize = 4 << 20;

/// What a stored record adds to its body at most here (RocketMQ's record header, this bench's
/// topic and no properties come to about 100 bytes).
const RECORD_OVERHEAD: usize = 4 << 10;

/// The settings a point of `size`-byte bodies needs: a `maxMessageSize` above the default once
/// the record no longer fits it (a 4 MiB body does not: its header takes it over 4 MiB).
pub fn size_settings(size: usize) -> Vec<String> {
    if size + RECORD_OVERHEAD > DEFAULT_MAX_MESSAGE {
        vec![format!("maxMessageSize={}", size + RECORD_OVERHEAD)]
    } else {
        Vec::new()
    }
}

/// Puts per point of the `size` series: about `bytes` of bodies, within `[low, high]` puts.
pub fn size_count(size: usize, bytes: u64, low: u64, high: u64) -> u64 {
    (bytes / size as u64).clamp(low, high.max(low))
}

/// MB/s and puts/s of each of [`SIZES`], SYNC and ASYNC, from 16 producers: a master and one
/// slave of the same implementation, new for every point and round.
async fn size(plan: &Plan, dir: &Path, notes: &mut Notes) -> Series {
    let producers = 16;
    let mut curves = Vec::new();
    for kind in plan.kinds() {
        for (role, role_name) in [(BrokerRole::SyncMaster, "SYNC"), (BrokerRole::AsyncMaster, "ASYNC")] {
            let (mut mbs, mut rates) = (Vec::new(), Vec::new());
            for &size in &SIZES {
                let (count, warm_up) = if plan.quick {
                    (size_count(size, 4 << 20, 2, 200), size_count(size, 1 << 20, 1, 32))
                } else {
                    (
                        size_count(size, 512 << 20, 64, plan.messages.min(50_000)),
                        size_count(size, 16 << 20, 4, 2_000),
                    )
                };
                let extra = size_settings(size);
                let mut rounds = Vec::new();
                for round in 1..=plan.repeat {
                    let what = format!("size series: {} {role_name} puts of {size} B", kind.name());
                    say(&format!("{what} ({round}/{})", plan.repeat));
                    if kind != Impl::Logship && !extra.is_empty() {
                        let e = anyhow::anyhow!(
                            "the record is over RocketMQ's default maxMessageSize (4 MiB), which the peer \
                             program does not change"
                        );
                        failed(notes, kind, &what, &e);
                        break;
                    }
                    let point = (producers, count, size);
                    match put_point((kind, kind), role, dir, plan.segment(), &extra, warm_up, point, notes)
                        .await
                    {
                        Ok(f) => rounds.push(f.rate),
                        Err(e) => failed(notes, kind, &format!("{what}, round {round}"), &e),
                    }
                }
                let rate = med(&rounds);
                rates.push(rate);
                mbs.push(rate.map(|r| r * size as f64 / 1e6));
            }
            let n = kind.name();
            curves.push(curve(format!("{n} {role_name} MB/s"), "MB/s", mbs));
            curves.push(curve(format!("{n} {role_name} puts/s"), "puts/s", rates));
        }
    }
    Series {
        name: "size".into(),
        title: "Puts by message size, 16 producers, master and one slave, new for every point \
                (MB/s of bodies)"
            .into(),
        x_label: "body size, bytes".into(),
        x: SIZES.iter().map(|&s| s as f64).collect(),
        curves,
    }
}

/// The CPU time this process has used, microseconds.
fn own_cpu_us() -> f64 {
    super::clients::process_cpu_us(std::process::id()).unwrap_or(f64::NAN)
}

/// `VmRSS` and `RssAnon` of a process, KiB (`/proc/<pid>/status`).
pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("RssAnon:")?))
}

fn own_rss() -> (f64, f64) {
    rss_kib(std::process::id()).map_or((f64::NAN, f64::NAN), |(v, a)| (v as f64, a as f64))
}

/// Waits until `n` counted slaves have acked at least `end`; an error as soon as one of
/// `slaves` has exited.
async fn wait_acked(master: &LogshipMaster, slaves: &mut [Slave], n: usize, end: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        for s in slaves.iter_mut() {
            s.check_running()?;
        }
        let status = master.handle().status().await.context("master stopped")?;
        if status.slaves.iter().filter(|l| l.ack.is_some_and(|a| a >= end)).count() >= n {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "{n} slave(s) did not ack {end} in 10 minutes");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Puts 1 KiB messages from `producers` tasks until `stop` is set; returns the puts made.
fn stream(
    master: &LogshipMaster,
    producers: usize,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<anyhow::Result<u64>>> {
    let next = Arc::new(std::sync::atomic::AtomicU64::new(1 << 40));
    (0..producers)
        .map(|_| {
            let (handle, stop, next) = (master.handle().clone(), stop.clone(), next.clone());
            tokio::spawn(async move {
                let mut puts = 0;
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let r = handle.put(message(1024, i)).await;
                    ensure!(r.status == PutStatus::PutOk, "a streaming put ended {}", r.status);
                    puts += 1;
                }
                Ok(puts)
            })
        })
        .collect()
}

/// Seconds from a new slave's connection (as the master saw it; the connection is the one not
/// in `before`) until it acked `end`. Polls the master's status every `every`, calling
/// `on_poll` at each.
async fn new_link_caught_up(
    master: &LogshipMaster,
    slave: &mut Slave,
    before: &[logship_core::ConnId],
    end: u64,
    every: Duration,
    mut on_poll: impl FnMut(),
) -> anyhow::Result<f64> {
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut connected = None;
    loop {
        slave.check_running()?;
        let status = master.handle().status().await.context("master stopped")?;
        let now = Instant::now();
        on_poll();
        if let Some(link) = status.slaves.iter().find(|l| !before.contains(&l.conn)) {
            let at = *connected.get_or_insert(now.checked_sub(link.connected_for).unwrap_or(now));
            if link.ack.is_some_and(|a| a >= end) {
                return Ok(now.duration_since(at).as_secs_f64());
            }
        }
        ensure!(now < deadline, "the new slave did not ack {end} in 10 minutes");
        tokio::time::sleep(every).await;
    }
}

/// The slave counts of the `slaves` series.
pub const SLAVES: [usize; 4] = [1, 2, 4, 8];

/// Figures of one point of the `slaves` series.
#[derive(Default)]
struct SlavesPoint {
    cpu_per_mb: f64,
    p50: f64,
    p99: f64,
    fresh_secs: f64,
    fresh_mbs: f64,
}

/// One point of the `slaves` series: a logship SYNC_MASTER in this process holding `prefill`
/// bytes; `k` new `logship slave` processes join at once (this process's CPU while they catch
/// up, and nothing else runs in it, is the master's); then 1-producer SYNC puts; then a fresh
/// slave joins while 4 producers keep putting.
async fn slaves_point(plan: &Plan, dir: &Path, k: usize, prefill: u64) -> anyhow::Result<SlavesPoint> {
    let _ = std::fs::remove_dir_all(dir);
    let (flush, segment) = (FlushDiskType::AsyncFlush, plan.segment());
    let mdir = dir.join("master");
    // A SYNC_MASTER takes no put without a slave: the store is filled by an ASYNC_MASTER first.
    let filler = LogshipMaster::start(&mdir, BrokerRole::AsyncMaster, flush, segment).await?;
    let end = filler.fill(prefill, 1024).await;
    filler.close().await?;
    let end = end?;
    let master = LogshipMaster::start(&mdir, BrokerRole::SyncMaster, flush, segment).await?;
    let mut slaves = Vec::new();
    let measured = async {
        let cpu = own_cpu_us();
        for i in 0..k {
            let dir = dir.join(format!("slave-{i}"));
            slaves.push(Slave::start(Impl::Logship, &dir, master.ha_addr(), flush, segment).await?);
        }
        wait_acked(&master, &mut slaves, k, end).await?;
        let cpu_per_mb = (own_cpu_us() - cpu) / (k as f64 * end as f64 / 1e6);
        let samples = if plan.quick { 100 } else { plan.samples as u64 };
        let puts = master.produce(1, samples, 1024).await?;
        ensure!(
            puts.failed == 0,
            "{} SYNC put(s) failed, the first with {:?}",
            puts.failed,
            puts.first_failure
        );
        let f = puts.figures();
        // A fresh slave while the others stream.
        let stop = Arc::new(AtomicBool::new(false));
        let streams = stream(&master, 4, stop.clone());
        let fresh = async {
            let before: Vec<_> = master
                .handle()
                .status()
                .await
                .context("master stopped")?
                .slaves
                .iter()
                .map(|l| l.conn)
                .collect();
            let end = master.store().max_offset();
            let dir = dir.join("slave-fresh");
            let mut fresh = Slave::start(Impl::Logship, &dir, master.ha_addr(), flush, segment).await?;
            let secs =
                new_link_caught_up(&master, &mut fresh, &before, end, Duration::from_micros(500), || {})
                    .await;
            slaves.push(fresh);
            let secs = secs?;
            anyhow::Ok((secs, end as f64 / secs / 1e6))
        }
        .await;
        stop.store(true, Ordering::Relaxed);
        for s in streams {
            s.await??;
        }
        let (fresh_secs, fresh_mbs) = fresh?;
        anyhow::Ok(SlavesPoint { cpu_per_mb, p50: f.p50, p99: f.p99, fresh_secs, fresh_mbs })
    }
    .await;
    let mut stopped = Ok(());
    for s in slaves {
        if let Err(e) = s.stop().await {
            stopped = Err(e);
        }
    }
    master.close().await?;
    let _ = std::fs::remove_dir_all(dir);
    let point = measured?;
    stopped.context("stopping a slave")?;
    Ok(point)
}

/// Master CPU per replicated MB, SYNC p50 and p99, and a fresh slave's catch-up, for each of
/// [`SLAVES`] (logship only: the peer programs run one slave per master).
async fn slaves(plan: &Plan, dir: &Path, notes: &mut Notes) -> Series {
    let prefill = if plan.quick { 2 << 20 } else { 129_000_000 };
    let mut values: [Vec<Option<f64>>; 5] = Default::default();
    for &k in &SLAVES {
        let mut rounds: [Vec<f64>; 5] = Default::default();
        for round in 1..=plan.repeat {
            let what = format!("slaves series: {k} slave(s) on one master");
            say(&format!("{what} ({round}/{})", plan.repeat));
            match slaves_point(plan, dir, k, prefill).await {
                Ok(p) => {
                    for (r, v) in
                        rounds.iter_mut().zip([p.cpu_per_mb, p.p50, p.p99, p.fresh_secs, p.fresh_mbs])
                    {
                        r.push(v);
                    }
                }
                Err(e) => failed(notes, Impl::Logship, &format!("{what}, round {round}"), &e),
            }
        }
        for (v, r) in values.iter_mut().zip(&rounds) {
            v.push(med(r));
        }
    }
    let [cpu, p50, p99, secs, mbs] = values;
    Series {
        name: "slaves".into(),
        title: format!(
            "k slaves on one logship SYNC_MASTER ({} MB prefilled, 1 KiB messages): master CPU per \
             replicated MB while they catch up; SYNC p50, p99 of 1 producer (any one slave acks); a \
             fresh slave's catch-up while 4 producers stream",
            prefill / 1_000_000
        ),
        x_label: "slaves".into(),
        x: SLAVES.iter().map(|&k| k as f64).collect(),
        curves: vec![
            curve("master CPU, k slaves catching up".into(), "us/MB", cpu),
            curve("SYNC p50".into(), "us", p50),
            curve("SYNC p99".into(), "us", p99),
            curve("fresh slave, k streaming".into(), "s", secs),
            curve("fresh slave, k streaming".into(), "MB/s", mbs),
        ],
    }
}

/// A logship master's catch-ups by fresh `logship slave`s at one log size: seconds of each
/// round, and this process's memory (KiB) before the first and at its peak during any.
#[derive(Clone, Debug, Default)]
struct CatchUps {
    secs: Vec<f64>,
    before: (f64, f64),
    peak: (f64, f64),
}

/// A fresh `logship slave` catches up `master` (holding `end`, no slave connected); seconds
/// from its connection until it acked `end`, and the peak `VmRSS` and `RssAnon` of this process
/// (the master's) while it did, sampled every 2 ms.
async fn logship_catch_up(
    master: &LogshipMaster,
    dir: &Path,
    end: u64,
    segment: u64,
) -> anyhow::Result<(f64, (f64, f64))> {
    master.wait_no_slaves().await?;
    let mut slave =
        Slave::start(Impl::Logship, dir, master.ha_addr(), FlushDiskType::AsyncFlush, segment).await?;
    let mut peak = own_rss();
    let sample = || {
        let rss = own_rss();
        peak = (peak.0.max(rss.0), peak.1.max(rss.1));
    };
    let measured = new_link_caught_up(master, &mut slave, &[], end, Duration::from_millis(2), sample).await;
    slave.stop().await?;
    let _ = std::fs::remove_dir_all(dir);
    Ok((measured?, peak))
}

/// The largest log that stays inside the first segment, where every implementation starts an
/// empty slave (RocketMQ's masters send a new slave only their last segment).
fn fits_first_segment(bytes: u64, segment: u64) -> bool {
    bytes + (4 << 20) <= segment
}

/// Catch-ups of a logship master of each log size by fresh logship slaves (`plan.repeat` each).
async fn logship_catch_ups(plan: &Plan, dir: &Path, notes: &mut Notes) -> Vec<CatchUps> {
    let mut out = Vec::new();
    let segment = user::DEFAULT_SEGMENT;
    for &bytes in &plan.log_sizes {
        let what = format!("log series: a fresh logship slave catches up {bytes} bytes");
        let mdir = dir.join("master");
        let _ = std::fs::remove_dir_all(dir);
        let result = async {
            say(&format!("filling a logship master with {bytes} bytes"));
            let master =
                LogshipMaster::start(&mdir, BrokerRole::AsyncMaster, FlushDiskType::AsyncFlush, segment)
                    .await?;
            let measured = async {
                let end = master.fill(bytes, 1024).await?;
                let mut c = CatchUps { before: own_rss(), ..CatchUps::default() };
                c.peak = c.before;
                for round in 1..=plan.repeat {
                    say(&format!("{what} ({round}/{})", plan.repeat));
                    let (secs, peak) = logship_catch_up(&master, &dir.join("slave"), end, segment).await?;
                    c.secs.push(end as f64 / secs / 1e6);
                    c.peak = (c.peak.0.max(peak.0), c.peak.1.max(peak.1));
                }
                anyhow::Ok(c)
            }
            .await;
            master.close().await?;
            measured
        }
        .await;
        let _ = std::fs::remove_dir_all(dir);
        out.push(result.unwrap_or_else(|e| {
            failed(notes, Impl::Logship, &what, &e);
            CatchUps { before: (f64::NAN, f64::NAN), peak: (f64::NAN, f64::NAN), secs: Vec::new() }
        }));
    }
    out
}

/// A fresh slave's catch-up, MB/s, for each log size: logship's, and each peer's own pair where
/// the log fits the first segment. Also returns logship's catch-ups for the memory series.
async fn log(plan: &Plan, dir: &Path, notes: &mut Notes) -> (Series, Vec<CatchUps>) {
    let logship = logship_catch_ups(plan, dir, notes).await;
    let segment = user::DEFAULT_SEGMENT;
    let rate: Vec<Option<f64>> = logship.iter().map(|c| med(&c.secs)).collect();
    let secs: Vec<Option<f64>> =
        plan.log_sizes.iter().zip(&rate).map(|(&b, r)| r.map(|r| b as f64 / 1e6 / r)).collect();
    let mut curves =
        vec![curve("logship -> logship".into(), "MB/s", rate), curve("logship -> logship".into(), "s", secs)];
    for &kind in &plan.peers {
        let mut values = Vec::new();
        for &bytes in &plan.log_sizes {
            let what = format!("log series: {0} -> {0}, {bytes} bytes", kind.name());
            if !fits_first_segment(bytes, segment) {
                let e = anyhow::anyhow!(
                    "the log is over one segment; the peer's master sends a new slave only its last"
                );
                failed(notes, kind, &what, &e);
                values.push(None);
                continue;
            }
            let mdir = dir.join("peer-master");
            let result = async {
                say(&format!("filling a {} master with {bytes} bytes", kind.name()));
                let mut master =
                    Master::start(kind, &mdir, BrokerRole::AsyncMaster, FlushDiskType::AsyncFlush, segment)
                        .await?;
                let measured = async {
                    let end = master.fill(bytes, 1024).await?;
                    let mut rates = Vec::new();
                    for round in 1..=plan.repeat {
                        say(&format!("{what} ({round}/{})", plan.repeat));
                        let secs =
                            user::join(&mut master, kind, &dir.join("peer-slave"), end, segment).await?;
                        rates.push(end as f64 / secs / 1e6);
                    }
                    anyhow::Ok(rates)
                }
                .await;
                if let Some(n) = master.close().await? {
                    notes.push((kind, format!("{what}: the master {n}")));
                }
                measured
            }
            .await;
            let _ = std::fs::remove_dir_all(&mdir);
            values.push(match result {
                Ok(r) => med(&r),
                Err(e) => {
                    failed(notes, kind, &what, &e);
                    None
                }
            });
        }
        curves.push(curve(format!("{0} -> {0}", kind.name()), "MB/s", values));
    }
    let series = Series {
        name: "log".into(),
        title: "A fresh slave catches up a master's log, by log size (1 KiB messages, 1 GiB segments)".into(),
        x_label: "log, bytes".into(),
        x: plan.log_sizes.iter().map(|&b| b as f64).collect(),
        curves,
    };
    (series, logship)
}

/// This process's memory before and at its peak during the catch-ups of each log size.
fn catch_up_memory(plan: &Plan, c: &[CatchUps]) -> Series {
    let mib = |v: f64| (v.is_finite()).then_some(v / 1024.0);
    Series {
        name: "memory-catchup".into(),
        title: "The master's memory (this process) during a fresh slave's catch-up, by log size".into(),
        x_label: "log, bytes".into(),
        x: plan.log_sizes.iter().map(|&b| b as f64).collect(),
        curves: vec![
            curve("RssAnon before".into(), "MiB", c.iter().map(|c| mib(c.before.1)).collect()),
            curve("RssAnon peak".into(), "MiB", c.iter().map(|c| mib(c.peak.1)).collect()),
            curve("VmRSS before".into(), "MiB", c.iter().map(|c| mib(c.before.0)).collect()),
            curve("VmRSS peak".into(), "MiB", c.iter().map(|c| mib(c.peak.0)).collect()),
        ],
    }
}

/// `VmRSS` and `RssAnon`, KiB, with no connection and with each of [`CONNECTIONS`].
type MemoryRound = ((f64, f64), Vec<(f64, f64)>);

/// The connection counts of the `memory` series.
pub const CONNECTIONS: [usize; 4] = [1, 2, 4, 8];

/// One round of the `memory` series: a logship ASYNC_MASTER in this process, then slaves added
/// one at a time; this process's `VmRSS` and `RssAnon` (KiB) with none and, once they have all
/// caught up and sat idle for 200 ms, with each of [`CONNECTIONS`].
async fn memory_round(plan: &Plan, dir: &Path) -> anyhow::Result<MemoryRound> {
    let _ = std::fs::remove_dir_all(dir);
    let (flush, segment) = (FlushDiskType::AsyncFlush, plan.segment());
    let master = LogshipMaster::start(&dir.join("master"), BrokerRole::AsyncMaster, flush, segment).await?;
    let mut slaves = Vec::new();
    let measured = async {
        let end = master.fill(if plan.quick { 1 << 20 } else { 16 << 20 }, 1024).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let none = own_rss();
        let mut at = Vec::new();
        for &k in &CONNECTIONS {
            while slaves.len() < k {
                let dir = dir.join(format!("slave-{}", slaves.len()));
                slaves.push(Slave::start(Impl::Logship, &dir, master.ha_addr(), flush, segment).await?);
            }
            wait_acked(&master, &mut slaves, k, end).await?;
            tokio::time::sleep(Duration::from_millis(200)).await;
            at.push(own_rss());
        }
        anyhow::Ok((none, at))
    }
    .await;
    for s in slaves {
        s.stop().await?;
    }
    master.close().await?;
    let _ = std::fs::remove_dir_all(dir);
    measured
}

/// The master's memory by HA connection (logship only).
async fn memory(plan: &Plan, dir: &Path, notes: &mut Notes) -> Series {
    let mut rounds: Vec<MemoryRound> = Vec::new();
    for round in 1..=plan.repeat {
        say(&format!("memory series: RSS by HA connection ({round}/{})", plan.repeat));
        match memory_round(plan, dir).await {
            Ok(r) => rounds.push(r),
            Err(e) => failed(notes, Impl::Logship, &format!("memory series, round {round}"), &e),
        }
    }
    let at = |i: usize, pick: &dyn Fn(&MemoryRound) -> f64| {
        med(&rounds.iter().filter(|r| r.1.len() > i).map(pick).collect::<Vec<_>>())
    };
    let mut curves: [Vec<Option<f64>>; 3] = Default::default();
    for (i, &k) in CONNECTIONS.iter().enumerate() {
        curves[0].push(at(i, &|r| r.1[i].0 / 1024.0));
        curves[1].push(at(i, &|r| r.1[i].1 / 1024.0));
        curves[2].push(at(i, &|r| (r.1[i].1 - r.0.1) / k as f64));
    }
    let [vm, anon, per] = curves;
    Series {
        name: "memory".into(),
        title: "The master's memory (this process) by idle HA connection, logship ASYNC_MASTER".into(),
        x_label: "links, idle HA connections".into(),
        x: CONNECTIONS.iter().map(|&k| k as f64).collect(),
        curves: vec![
            curve("VmRSS".into(), "MiB", vm),
            curve("RssAnon".into(), "MiB", anon),
            curve("RssAnon per connection".into(), "KiB", per),
        ],
    }
}

/// The hidden `bench --load-store DIR --load-bytes N` mode: a logship master on `dir` (the
/// broker's store, default settings) fills its log to `bytes`, prints `filled`, then keeps
/// putting from 4 producers until it is killed.
pub async fn load_until_killed(dir: &Path, bytes: u64, segment: u64) -> anyhow::Result<()> {
    let master =
        LogshipMaster::start(dir, BrokerRole::AsyncMaster, FlushDiskType::AsyncFlush, segment).await?;
    master.fill(bytes, 1024).await?;
    println!("filled {}", master.store().max_offset());
    let stop = Arc::new(AtomicBool::new(false));
    for s in stream(&master, 4, stop) {
        s.await??;
    }
    bail!("the load stopped before it was killed")
}

/// Seconds from spawning `logship master` on `dir` until its `/status` answers (the store is
/// open, recovered, and the broker serves), and the running process.
fn start_logship(dir: &Path, sets: &[String]) -> anyhow::Result<(f64, std::process::Child)> {
    let port = super::clients::free_broker_port()?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("master").arg("--store").arg(dir).args(["--listen-port", &port.to_string()]);
    for s in sets {
        cmd.args(["--set", s]);
    }
    let start = Instant::now();
    let (mut child, stderr) = super::peer::spawn_logship(&mut cmd, "master", 20)?;
    loop {
        if user::http_status(port + 2).is_ok() {
            return Ok((start.elapsed().as_secs_f64(), child));
        }
        if let Some(status) = child.try_wait()? {
            let tail = stderr.lock().unwrap_or_else(|e| e.into_inner()).join("\n");
            bail!("`logship master` exited with {status} while starting:\n{tail}");
        }
        ensure!(start.elapsed() < Duration::from_secs(600), "`logship master` did not serve in 10 minutes");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// SIGTERM, then waits for a clean exit.
fn stop_logship(mut child: std::process::Child) -> anyhow::Result<()> {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait()? {
            ensure!(status.success(), "`logship master` exited with {status} after SIGTERM");
            return Ok(());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("`logship master` did not stop in 2 minutes after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// logship's restart times on a store of `bytes`: after `kill -9` of a process putting into it
/// (`pause` after it filled the store),
/// after a clean stop, and on an empty store (the process's own start).
fn logship_restarts(dir: &Path, bytes: u64, pause: Duration, segment: u64) -> anyhow::Result<[f64; 3]> {
    let _ = std::fs::remove_dir_all(dir);
    let store = dir.join("store");
    let sets: Vec<String> = (segment != user::DEFAULT_SEGMENT)
        .then(|| format!("mappedFileSizeCommitLog={segment}"))
        .into_iter()
        .collect();
    let mut load = Command::new(std::env::current_exe()?)
        .arg("bench")
        .arg("--load-store")
        .arg(&store)
        .args(["--load-bytes", &bytes.to_string()])
        .args(sets.iter().flat_map(|s| ["--set", s]))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the load process")?;
    let out = load.stdout.take().context("piped")?;
    let filled = std::io::BufReader::new(out).lines().map_while(Result::ok).any(|l| l.starts_with("filled"));
    if !filled {
        let _ = load.kill();
        let _ = load.wait();
        bail!("the load process ended before it filled the store");
    }
    // Under load for a moment, then killed.
    std::thread::sleep(pause);
    load.kill()?;
    load.wait()?;
    let (killed, child) = start_logship(&store, &sets)?;
    stop_logship(child)?;
    let (clean, child) = start_logship(&store, &sets)?;
    stop_logship(child)?;
    let empty_dir = dir.join("empty");
    let (empty, child) = start_logship(&empty_dir, &sets)?;
    stop_logship(child)?;
    let _ = std::fs::remove_dir_all(dir);
    Ok([killed, clean, empty])
}

/// Seconds from spawning a `kind` peer on `dir` until its `started` line (after its store's
/// `load()` and `start()`).
fn start_peer_timed(kind: Impl, dir: &Path) -> anyhow::Result<(f64, PeerProcess)> {
    let spec = PeerSpec {
        role: "ASYNC_MASTER",
        dir: dir.to_path_buf(),
        segment: user::DEFAULT_SEGMENT,
        flush: "ASYNC_FLUSH",
        master: None,
    };
    let cmd = super::peer::peer_command(kind)?;
    let start = Instant::now();
    let p = PeerProcess::start_with(kind, cmd, &spec)?;
    Ok((start.elapsed().as_secs_f64(), p))
}

/// A peer's restart times on its own store of `bytes`, as [`logship_restarts`].
fn peer_restarts(kind: Impl, dir: &Path, bytes: u64, pause: Duration) -> anyhow::Result<[f64; 3]> {
    let _ = std::fs::remove_dir_all(dir);
    let store = dir.join("store");
    std::fs::create_dir_all(&store)?;
    let (_, mut p) = start_peer_timed(kind, &store)?;
    p.command(&format!("fill {bytes} 1024"), Duration::from_secs(600))?;
    p.send_line("bench 4 1000000000 1024")?;
    std::thread::sleep(pause);
    p.kill()?;
    let (killed, p) = start_peer_timed(kind, &store)?;
    p.shutdown()?;
    let (clean, p) = start_peer_timed(kind, &store)?;
    p.shutdown()?;
    let empty_dir = dir.join("empty");
    std::fs::create_dir_all(&empty_dir)?;
    let (empty, p) = start_peer_timed(kind, &empty_dir)?;
    p.shutdown()?;
    let _ = std::fs::remove_dir_all(dir);
    Ok([killed, clean, empty])
}

/// Restart times for each store size: logship's `logship master`, and each Java peer's
/// `DefaultMessageStore` on its own store (rocketmq-rust's peer is left out: its store's
/// recovery is not what its program measures).
async fn recovery(plan: &Plan, dir: &Path, notes: &mut Notes) -> Series {
    let kinds: Vec<Impl> =
        plan.kinds().into_iter().filter(|k| matches!(k, Impl::Logship | Impl::Java5 | Impl::Java4)).collect();
    let mut curves = Vec::new();
    for kind in kinds {
        let mut values: [Vec<Option<f64>>; 3] = Default::default();
        for &bytes in &plan.recovery_sizes {
            let mut rounds: [Vec<f64>; 3] = Default::default();
            for round in 1..=plan.repeat {
                let what = format!("recovery series: {} store of {bytes} bytes", kind.name());
                say(&format!("{what} ({round}/{})", plan.repeat));
                let d = dir.to_path_buf();
                let pause = Duration::from_millis(if plan.quick { 20 } else { 300 });
                // A quick run's smaller segments: a crash recovery's cost grows with them.
                let segment = if plan.quick { 16 << 20 } else { user::DEFAULT_SEGMENT };
                let r = tokio::task::spawn_blocking(move || match kind {
                    Impl::Logship => logship_restarts(&d, bytes, pause, segment),
                    _ => peer_restarts(kind, &d, bytes, pause),
                })
                .await
                .map_err(anyhow::Error::from)
                .and_then(|r| r);
                match r {
                    Ok(v) => {
                        for (r, v) in rounds.iter_mut().zip(v) {
                            r.push(v);
                        }
                    }
                    Err(e) => failed(notes, kind, &format!("{what}, round {round}"), &e),
                }
            }
            for (v, r) in values.iter_mut().zip(&rounds) {
                v.push(med(r));
            }
        }
        let n = kind.name();
        let [killed, clean, empty] = values;
        curves.push(curve(format!("{n} after kill -9"), "s", killed));
        curves.push(curve(format!("{n} after clean stop"), "s", clean));
        curves.push(curve(format!("{n} empty store"), "s", empty));
    }
    Series {
        name: "recovery".into(),
        title: "Restart time by store size, after kill -9 under load (4 producers), after a clean stop, \
                and on an empty store: from spawning the process until it serves (logship: /status; a \
                peer: its store loaded and started)"
            .into(),
        x_label: "store, bytes".into(),
        x: plan.recovery_sizes.iter().map(|&b| b as f64).collect(),
        curves,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_decimal_and_binary_units() {
        assert_eq!(parse_size("129MB").unwrap(), 129_000_000);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size(" 8GiB ").unwrap(), 8 << 30);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("MB").is_err());
        assert!(parse_size("0").is_err());
    }

    #[test]
    fn series_names_parse_into_run_order_once_each() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            Which::parse(&names(&["memory,producers", "producers"])).unwrap(),
            [Which::Producers, Which::Memory]
        );
        assert_eq!(Which::parse(&names(&["all"])).unwrap(), Which::ALL);
        assert!(Which::parse(&names(&["producer"])).is_err());
        assert!(Which::parse(&[]).unwrap().is_empty());
    }

    /// A 4 MiB body is over RocketMQ's default maxMessageSize once its header is added; the
    /// smaller sizes need no setting.
    #[test]
    fn only_a_record_over_the_default_max_message_size_gets_a_setting() {
        assert!(size_settings(256 << 10).is_empty());
        let s = size_settings(4 << 20);
        assert_eq!(s, [format!("maxMessageSize={}", (4 << 20) + RECORD_OVERHEAD)]);
        // The setting lets the largest record of the series into a store; the default does not.
        let dir = tempfile::tempdir().unwrap();
        for (max, ok) in [((4 << 20) + RECORD_OVERHEAD, true), (DEFAULT_MAX_MESSAGE, false)] {
            let mut c = logship_store::StoreConfig::default();
            c.mapped_file_size_commit_log = 16 << 20;
            c.max_message_size = max as u32;
            let root = dir.path().join(max.to_string());
            let store = logship_store::CommitLog::open(&root, c).unwrap();
            let r = store.put(message(4 << 20, 0));
            assert_eq!(r.status == PutStatus::PutOk, ok, "maxMessageSize={max}: {}", r.status);
            store.shutdown().unwrap();
        }
    }

    #[test]
    fn size_points_take_about_the_bytes_within_their_bounds() {
        assert_eq!(size_count(1024, 1 << 20, 2, 200), 200);
        assert_eq!(size_count(4 << 20, 512 << 20, 64, 50_000), 128);
        assert_eq!(size_count(4 << 20, 4 << 20, 2, 200), 2);
        assert_eq!(size_count(64, 512 << 20, 64, 50_000), 50_000);
    }

    #[test]
    fn this_process_has_a_resident_set() {
        let (vm, anon) = rss_kib(std::process::id()).expect("/proc/self/status");
        assert!(vm > 0 && anon > 0 && anon <= vm, "{vm} {anon}");
        assert_eq!(rss_kib(u32::MAX), None);
    }

    #[test]
    fn a_log_fits_the_first_segment_with_room_to_spare() {
        assert!(fits_first_segment(129_000_000, 1 << 30));
        assert!(fits_first_segment((1 << 30) - (4 << 20), 1 << 30));
        assert!(!fits_first_segment(1 << 30, 1 << 30));
    }
}
