//! `logship demo`: a SYNC_MASTER and its slaves in one process, on loopback, in a temporary
//! directory. Producers put messages concurrently; the demo shows progress and each slave's lag,
//! then prints throughput and latency, checks every slave's commit log against the master's byte
//! for byte, checks every message that got `PUT_OK` on every slave, and exits non-zero if
//! anything failed or differed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use logship_core::BrokerRole;
use logship_core::service::{MasterServiceConfig, SlaveServiceConfig};
use logship_core::{AckPolicy, LogSpan, MasterConfig, PutStatus};
use logship_store::{CommitLog, Message, StoreConfig};
use tokio::sync::Mutex;

/// Options of `logship demo`.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Messages to produce.
    #[arg(long, default_value_t = 100_000)]
    pub messages: u64,
    /// Body size of each message, in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Concurrent producers.
    #[arg(long, default_value_t = 8)]
    pub producers: usize,
    /// Slaves.
    #[arg(long, default_value_t = 2)]
    pub slaves: usize,
    /// Copies each put needs, counting the master (RocketMQ inSyncReplicas); 2 = one slave ack.
    #[arg(long, default_value_t = 2)]
    pub in_sync_replicas: u32,
    /// Stop slave 1 once this many messages are produced, and restart it shortly after.
    #[arg(long)]
    pub kill_slave_at: Option<u64>,
    /// Commit-log segment size in bytes (mappedFileSizeCommitLog).
    #[arg(long, default_value_t = 64 << 20)]
    pub segment_size: u64,
    /// Keep the stores in this directory instead of a temporary one.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

struct Outcome {
    status: PutStatus,
    latency: Duration,
    index: u64,
    offset: u64,
}

fn body_of(index: u64, size: usize) -> Bytes {
    let mut body = format!("logship-demo-{index:010}-").into_bytes();
    body.resize(size, b'a' + (index % 26) as u8);
    body.truncate(size);
    Bytes::from(body)
}

fn store_config(segment: u64, port: u16) -> StoreConfig {
    let mut c = StoreConfig::default();
    c.mapped_file_size_commit_log = segment;
    c.store_host = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    c
}

fn open(dir: &Path, segment: u64) -> anyhow::Result<Arc<CommitLog>> {
    let store = CommitLog::open(dir, store_config(segment, 10911))
        .with_context(|| format!("opening {}", dir.display()))?;
    Ok(Arc::new(store))
}

struct SlaveNode {
    name: String,
    dir: PathBuf,
    store: Arc<CommitLog>,
    handle: logship_tokio::SlaveHandle,
}

async fn start_slave(name: String, dir: PathBuf, segment: u64, master: &str) -> anyhow::Result<SlaveNode> {
    let store = open(&dir, segment)?;
    let handle = logship_tokio::spawn_slave(SlaveServiceConfig::new(master), store.clone()).await?;
    Ok(SlaveNode { name, dir, store, handle })
}

/// The progress bar: a 10-column bar, then `progress_line`, cut to the terminal's width.
const BAR_TEMPLATE: &str = "{bar:10} {wide_msg}";

/// What follows the bar: elapsed time, messages done of total, puts per second, and each
/// slave's lag behind the master's end (`None`: stopped), all in whole numbers but the lags.
fn progress_line(elapsed: Duration, done: u64, total: u64, lags: &[(String, Option<u64>)]) -> String {
    let secs = elapsed.as_secs();
    let rate = if elapsed.as_secs_f64() > 0.0 { (done as f64 / elapsed.as_secs_f64()) as u64 } else { 0 };
    let mut line =
        format!("{:02}:{:02}:{:02} {done}/{total} {rate}/s", secs / 3600, secs / 60 % 60, secs % 60);
    for (name, lag) in lags {
        match lag {
            Some(bytes) => line.push_str(&format!(" {name} {}", human_bytes(*bytes))),
            None => line.push_str(&format!(" {name} stopped")),
        }
    }
    line
}

/// Prints a line above the progress bar, or plainly when the bar is hidden (not a terminal).
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        println!("{line}");
    } else {
        bar.println(line);
    }
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[unit]) }
}

fn millis(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// Compares the slave's log with the master's over the range both hold. Returns bytes compared.
fn compare_logs(master: &CommitLog, slave: &CommitLog, segment: u64) -> anyhow::Result<u64> {
    let m = master.bounds();
    let s = slave.bounds();
    if s.max != m.max {
        bail!("slave ends at {} but the master at {}", s.max, m.max);
    }
    let mut at = m.min.max(s.min);
    let mut compared = 0;
    while at < m.max {
        let segment_end = (at / segment + 1) * segment;
        let len = (m.max.min(segment_end) - at).min(1 << 20) as u32;
        let span = LogSpan { offset: at, len };
        let a = master.read(span).with_context(|| format!("reading {span:?} on the master"))?;
        let b = slave.read(span).with_context(|| format!("reading {span:?} on the slave"))?;
        if a != b {
            let first = a.iter().zip(b.iter()).position(|(x, y)| x != y).unwrap_or(0) as u64;
            bail!("logs differ at offset {}", at + first);
        }
        at += u64::from(len);
        compared += u64::from(len);
    }
    Ok(compared)
}

/// Runs the demo; `Ok(false)` means it ran but something failed or differed.
pub async fn run(args: DemoArgs) -> anyhow::Result<bool> {
    if args.messages == 0 || args.producers == 0 || args.size == 0 {
        bail!("--messages, --producers and --size must be at least 1");
    }
    if args.slaves == 0 {
        bail!("--slaves must be at least 1: the demo shows replication");
    }
    let temp = tempfile::Builder::new().prefix("logship-demo-").tempdir()?;
    let root = args.dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    let segment = args.segment_size;
    let policy = AckPolicy::Quorum { in_sync_replicas: args.in_sync_replicas };
    let config = MasterServiceConfig {
        core: MasterConfig {
            mapped_file_size_commit_log: segment,
            ack_policy: policy,
            ..MasterConfig::default()
        },
        role: BrokerRole::SyncMaster,
        ..MasterServiceConfig::default()
    };
    config.validate().context("demo configuration")?;
    let master_store = open(&root.join("master"), segment)?;
    let master = logship_tokio::spawn_master(config, master_store.clone(), "127.0.0.1:0".parse()?).await?;
    let address = master.local_addr().to_string();
    let mut slaves = Vec::new();
    for i in 1..=args.slaves {
        let name = format!("slave-{i}");
        slaves.push(start_slave(name.clone(), root.join(name), segment, &address).await?);
    }
    let slaves = Arc::new(Mutex::new(slaves));
    println!(
        "logship demo: SYNC_MASTER on {address} with {} slave(s)\n  quorum of {} copies: master + {} slave ack(s) per put",
        args.slaves,
        args.in_sync_replicas,
        args.in_sync_replicas - 1
    );
    println!(
        "  {} messages of {} B from {} producers\n  stores under {}",
        args.messages,
        args.size,
        args.producers,
        root.display()
    );

    // Wait for every slave's first report.
    let ready = Instant::now();
    loop {
        let status = master.status().await.context("master stopped")?;
        if status.slaves.iter().filter(|s| s.ack.is_some()).count() >= args.slaves {
            break;
        }
        if ready.elapsed() > Duration::from_secs(30) {
            bail!("slaves did not connect within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let bar = ProgressBar::new(args.messages);
    bar.set_style(ProgressStyle::with_template(BAR_TEMPLATE).expect("valid template"));
    let produced = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut producers = Vec::new();
    for _ in 0..args.producers {
        let master = master.clone();
        let (next, produced, bar) = (next.clone(), produced.clone(), bar.clone());
        let (total, size) = (args.messages, args.size);
        producers.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= total {
                    return outcomes;
                }
                let message =
                    Message::new("DemoTopic", (index % 4) as i32, body_of(index, size)).with_tags("demo");
                let t = Instant::now();
                let r = master.put(message).await;
                outcomes.push(Outcome { status: r.status, latency: t.elapsed(), index, offset: r.offset });
                produced.fetch_add(1, Ordering::Relaxed);
                bar.inc(1);
            }
        }));
    }

    // Live lag, and the kill-and-restart of slave 1.
    let monitor = {
        let (slaves, produced, bar) = (slaves.clone(), produced.clone(), bar.clone());
        let (kill_at, address, master_log) = (args.kill_slave_at, address.clone(), master_store.clone());
        let (total, count) = (args.messages, args.slaves);
        tokio::spawn(async move {
            let mut killed: Option<(Instant, PathBuf)> = None;
            let mut restarted = false;
            let mut finished: Option<Duration> = None;
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let done = produced.load(Ordering::Relaxed);
                {
                    let end = master_log.max_offset();
                    let nodes = slaves.lock().await;
                    let lags: Vec<(String, Option<u64>)> = (1..=count)
                        .map(|i| {
                            let name = format!("slave-{i}");
                            let lag = nodes
                                .iter()
                                .find(|n| n.name == name)
                                .map(|n| end.saturating_sub(n.store.max_offset()));
                            (name, lag)
                        })
                        .collect();
                    // The rate stops at the last put, not when the restart finishes.
                    let elapsed = *finished.get_or_insert_with(|| started.elapsed());
                    if done < total {
                        finished = None;
                    }
                    bar.set_message(progress_line(elapsed, done, total, &lags));
                }
                if let (Some(at), None) = (kill_at, &killed) {
                    if done >= at {
                        let mut guard = slaves.lock().await;
                        let victim = guard.remove(0);
                        victim.handle.shutdown().await;
                        let dir = victim.dir.clone();
                        drop(victim);
                        say(&bar, format!("  stopped slave-1 after {done} messages"));
                        killed = Some((Instant::now(), dir));
                    }
                }
                if let (Some((when, dir)), false) = (&killed, restarted) {
                    if when.elapsed() >= Duration::from_secs(1) {
                        match start_slave("slave-1".into(), dir.clone(), segment, &address).await {
                            Ok(node) => {
                                slaves.lock().await.insert(0, node);
                                say(
                                    &bar,
                                    format!(
                                        "  restarted slave-1 after {} messages",
                                        produced.load(Ordering::Relaxed)
                                    ),
                                );
                            }
                            Err(e) => say(&bar, format!("  could not restart slave-1: {e:#}")),
                        }
                        restarted = true;
                    }
                }
                if done >= bar.length().unwrap_or(0) && (killed.is_none() || restarted) {
                    return;
                }
            }
        })
    };

    let mut outcomes = Vec::with_capacity(args.messages as usize);
    for p in producers {
        outcomes.extend(p.await?);
    }
    let elapsed = started.elapsed();
    monitor.await?;
    bar.finish_and_clear();

    // Let every slave catch up with the master's end.
    let end = master_store.max_offset();
    let caught_up = Instant::now();
    loop {
        let lagging = slaves.lock().await.iter().filter(|s| s.store.max_offset() < end).count();
        if lagging == 0 {
            break;
        }
        if caught_up.elapsed() > Duration::from_secs(60) {
            println!("  {lagging} slave(s) did not reach the master's end {end} within 60 s");
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let ok = report(&args, &outcomes, elapsed, &master, &master_store, &slaves.lock().await, segment).await?;
    for s in slaves.lock().await.iter() {
        s.handle.shutdown().await;
    }
    master.shutdown().await;
    if args.dir.is_none() {
        drop(slaves);
        drop(master_store);
    }
    Ok(ok)
}

async fn report(
    args: &DemoArgs,
    outcomes: &[Outcome],
    elapsed: Duration,
    master: &logship_tokio::MasterHandle<CommitLog>,
    master_store: &CommitLog,
    slaves: &[SlaveNode],
    segment: u64,
) -> anyhow::Result<bool> {
    let mut ok = true;
    let mut latencies: Vec<Duration> = outcomes.iter().map(|o| o.latency).collect();
    latencies.sort_unstable();
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];
    let secs = elapsed.as_secs_f64();
    let bytes = outcomes.len() as f64 * args.size as f64;
    println!();
    println!("  {:>12}  {:>10}  {:>11}  {:>11}  {:>11}", "puts/s", "MB/s", "p50", "p99", "max");
    println!(
        "  {:>12.0}  {:>10.1}  {:>11}  {:>11}  {:>11}",
        outcomes.len() as f64 / secs,
        bytes / secs / 1e6,
        millis(pct(0.50)),
        millis(pct(0.99)),
        millis(*latencies.last().expect("at least one message"))
    );
    let mut by_status = std::collections::BTreeMap::new();
    for o in outcomes {
        *by_status.entry(o.status.rocketmq_name()).or_insert(0u64) += 1;
    }
    let statuses: Vec<String> = by_status.iter().map(|(s, n)| format!("{s} {n}")).collect();
    println!("\n  put status: {}", statuses.join(", "));
    if by_status.keys().any(|s| *s != "PUT_OK") {
        ok = false;
    }

    let status = master.status().await.context("master stopped")?;
    let replicated = status.replicated_offset.map_or("-".to_string(), |o| o.to_string());
    println!("\n  {:<10} {:>15} {:>15}  commit log vs master", "node", "max offset", "ack offset");
    println!(
        "  {:<10} {:>15} {:>15}  (replicated per the quorum)",
        "master",
        master_store.max_offset(),
        replicated
    );
    for slave in slaves {
        let s = slave.handle.status().await;
        let ack = s.as_ref().and_then(|s| s.ack_offset).map_or("-".to_string(), |a| a.to_string());
        let check = match compare_logs(master_store, &slave.store, segment) {
            Ok(n) => format!("identical ({} compared)", human_bytes(n)),
            Err(e) => {
                ok = false;
                format!("DIFFERENT: {e:#}")
            }
        };
        println!("  {:<10} {:>15} {:>15}  {check}", slave.name, slave.store.max_offset(), ack);
    }

    // Every PUT_OK message is on every slave, with its body.
    let mut missing = 0u64;
    for o in outcomes.iter().filter(|o| o.status == PutStatus::PutOk) {
        for slave in slaves {
            match slave.store.read_message(o.offset) {
                Ok(m) if m.body == body_of(o.index, args.size) => {}
                _ => missing += 1,
            }
        }
    }
    let acked = outcomes.iter().filter(|o| o.status == PutStatus::PutOk).count();
    if missing == 0 {
        println!("\n  all {acked} PUT_OK messages are on every slave");
    } else {
        ok = false;
        println!("\n  {missing} (message, slave) pairs missing among {acked} PUT_OK messages");
    }
    println!("\n  {}", if ok { "demo passed" } else { "demo FAILED" });
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Columns the template uses before the message.
    const BAR_PREFIX_COLUMNS: usize = 11;

    #[test]
    fn progress_line_shows_whole_numbers_names_slaves_and_fits_80_columns() {
        let worst = [("slave-1".to_string(), Some(1023 << 20)), ("slave-2".to_string(), Some((1 << 30) - 1))];
        let line = progress_line(Duration::from_millis(99 * 3_600_000 + 1234), 100_000, 100_000, &worst);
        assert!(
            BAR_PREFIX_COLUMNS + line.chars().count() <= 80,
            "{} columns: {line}",
            BAR_PREFIX_COLUMNS + line.len()
        );
        let line = progress_line(
            Duration::from_millis(2500),
            5000,
            100_000,
            &[("slave-1".into(), None), ("slave-2".into(), Some(0))],
        );
        assert_eq!(line, "00:00:02 5000/100000 2000/s slave-1 stopped slave-2 0 B");
        assert_eq!(BAR_TEMPLATE, "{bar:10} {wide_msg}", "BAR_PREFIX_COLUMNS counts the bar and one space");
    }
}
