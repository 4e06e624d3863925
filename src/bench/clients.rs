//! The client scenarios: Apache RocketMQ's own Java producer and push consumer (client 5.5.0,
//! `tests/interop/rocketmq-apps/`), through the real Apache NameServer, against a logship
//! SYNC_MASTER with one `logship slave` and against a Java broker pair (rocketmq-broker 5.5.0,
//! SYNC_MASTER and SLAVE) with the same settings, in the same run.
//!
//! Each round starts everything new: a NameServer, the two brokers on new stores, then
//! - a warm-up producer (its sends create the topic's route and warm the brokers);
//! - a producer of synchronous 1 KiB sends from 1 thread, then one from 64 threads, each a new
//!   JVM: its `summary` gives the sends that ended `SEND_OK`, the elapsed time and the latency
//!   percentiles;
//! - a push consumer of a new group and a 1-thread producer side by side: the consumer's
//!   `summary` gives the end-to-end latency (from the producer's `System.nanoTime()`, stored
//!   in the message, to receipt; one monotonic clock on one host).
//!
//! Both brokers get RocketMQ's defaults for what the test programs otherwise shrink (1 GiB
//! commit-log segments, thread pools), `ASYNC_FLUSH`, and a 1 GiB heap for the Java broker.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use super::peer;

/// How long a program may take to print its `ready` line (a JVM, a broker's start).
const READY: Duration = Duration::from_secs(120);
/// The topic every round sends to (created by the brokers' `autoCreateTopicEnable`).
const TOPIC: &str = "BenchClientTopic";

/// The figures of one round on one broker pair.
#[derive(Clone, Debug, Default)]
pub struct ClientFigures {
    /// Sync sends from 1 thread: `SEND_OK` per second, p50 and p99 in microseconds.
    pub one: SendFigures,
    /// The same from 64 threads.
    pub many: SendFigures,
    /// End to end, send to push-consumer receipt: p50 and p99 in microseconds.
    pub e2e: (f64, f64),
}

/// What one producer run measured.
#[derive(Clone, Debug, Default)]
pub struct SendFigures {
    /// Sends that ended `SEND_OK`, per second of the run.
    pub rate: f64,
    /// Send latency p50, microseconds.
    pub p50: f64,
    /// Send latency p99, microseconds.
    pub p99: f64,
    /// Sends that did not end `SEND_OK` (out of the rate).
    pub failed: u64,
    /// CPU time per `SEND_OK`, microseconds, from the producer's `ready` line to its
    /// `summary` (user and system, every thread; `/proc/<pid>/stat`): the brokers' master, its
    /// slave, and the producer's JVM. NaN where it could not be read.
    pub cpu: CpuPerSend,
}

/// CPU time per `SEND_OK` of one producer run, in microseconds (see [`SendFigures::cpu`]).
#[derive(Clone, Copy, Debug)]
pub struct CpuPerSend {
    /// The master broker's process.
    pub master: f64,
    /// The slave broker's process (NaN without one).
    pub slave: f64,
    /// The producer's JVM.
    pub client: f64,
}

impl Default for CpuPerSend {
    fn default() -> Self {
        Self { master: f64::NAN, slave: f64::NAN, client: f64::NAN }
    }
}

/// The CPU time a process has used, user and system, in microseconds (`/proc/<pid>/stat`'s
/// `utime` and `stime`, every thread's, ended ones included); `None` when it cannot be read.
pub fn process_cpu_us(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces: the fields start after its `)`.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    // utime and stime are the stat's fields 14 and 15; `fields[0]` is field 3 (the state).
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // In USER_HZ ticks, which Linux fixes at 100 per second for what it reports to user space.
    Some(ticks * 1e6 / USER_HZ)
}

/// The tick of `/proc/<pid>/stat`'s times (Linux's `USER_HZ`).
const USER_HZ: f64 = 100.0;

/// The built Java programs (client line 5.5.0): their classpath.
pub struct Apps {
    classpath: String,
    home: PathBuf,
}

impl Apps {
    /// Finds `tests/interop/rocketmq-apps` built for 5.5.0, building it (`mvn package -P
    /// client-5`) when it is missing or older than its sources.
    pub fn build() -> anyhow::Result<Self> {
        let project = peer::interop_dir().join("rocketmq-apps");
        let out = project.join("target").join("5.5.0");
        let (jar, deps) = (out.join("apps.jar"), out.join("classpath.txt"));
        if !peer::built_classpath(&deps) || peer::stale(&jar, &[project.join("src"), project.join("pom.xml")])
        {
            eprintln!("  building the RocketMQ 5.5.0 client programs (mvn package -P client-5) ...");
            peer::run_quietly(
                Command::new("mvn").current_dir(&project).args(["-q", "-B", "package", "-P", "client-5"]),
                "mvn package",
            )?;
            peer::touch(&jar)?;
        }
        let deps = std::fs::read_to_string(&deps).with_context(|| format!("reading {}", deps.display()))?;
        let home = peer::java_home();
        std::fs::create_dir_all(&home)?;
        Ok(Self { classpath: format!("{}:{}", jar.display(), deps.trim()), home })
    }

    fn command(&self, class: &str, heap: &str, args: &[String]) -> Command {
        let mut c = peer::java_command(&self.home, &[heap, "-Drocketmq.client.logLevel=WARN"]);
        c.arg("-cp")
            .arg(&self.classpath)
            .arg(format!("logship.apps.{class}"))
            .args(["--home".to_string(), self.home.join("rocketmq").display().to_string()])
            .args(args);
        c
    }

    fn start(&self, class: &str, heap: &str, args: &[String]) -> anyhow::Result<App> {
        App::spawn(class, self.command(class, heap, args))
    }
}

/// A running Java program: its JSON stdout lines and the tail of its stderr.
struct App {
    what: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl App {
    fn spawn(what: &str, mut cmd: Command) -> anyhow::Result<Self> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {what} (is `java` on PATH?)"))?;
        let (tx, lines) = channel();
        let out = child.stdout.take().context("stdout is piped")?;
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        let stderr = peer::stderr_tail(child.stderr.take().context("stderr is piped")?, 30);
        let stdin = child.stdin.take();
        Ok(Self { what: what.to_string(), child, stdin, lines, stderr })
    }

    fn stderr_tail(&self) -> String {
        self.stderr.lock().unwrap_or_else(|e| e.into_inner()).join("\n")
    }

    /// The next line whose `event` is `event`; an error after `limit`, or on a `fatal` line.
    fn wait_event(&mut self, event: &str, limit: Duration) -> anyhow::Result<Value> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) if v["event"] == event => return Ok(v),
                Ok(v) if v["event"] == "fatal" => {
                    bail!("{} failed: {v}\n{}", self.what, self.stderr_tail())
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    bail!("{} printed no {event} line in {limit:?}:\n{}", self.what, self.stderr_tail())
                }
                Err(RecvTimeoutError::Disconnected) => {
                    bail!("{} exited before its {event} line:\n{}", self.what, self.stderr_tail())
                }
            }
        }
    }

    fn send_line(&mut self, line: &str) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        writeln!(stdin, "{line}")?;
        Ok(stdin.flush()?)
    }

    /// Closes stdin (the programs' stop signal) and waits for the exit.
    fn stop(mut self, limit: Duration) {
        drop(self.stdin.take());
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("  note: {} did not stop in {limit:?}; killed", self.what);
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A free listenPort whose neighbours a broker also takes: `port - 2` (RocketMQ's VIP channel,
/// logship's fast remoting port), `port + 1` (HA) and `port + 2` (logship's HTTP port). None of
/// the five is within reach of a port this process handed out before: brokers started one after
/// another bind theirs only once they run, so a check that they are free is not enough.
pub(crate) fn free_broker_port() -> anyhow::Result<u16> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..200 {
        let p = peer::free_port()?;
        let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
        let clear = given.iter().all(|&g| g.abs_diff(p) > 4);
        if clear && (1026..65534).contains(&p) && free(p - 2) && free(p + 1) && free(p + 2) {
            given.push(p);
            return Ok(p);
        }
    }
    bail!("no free ports for a broker")
}

/// A spawned logship broker (`logship master` or `logship slave`).
struct Logship {
    child: Child,
    http: u16,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Logship {
    fn start(role: &str, store: &Path, namesrv: &str, extra: &[&str]) -> anyhow::Result<Self> {
        let port = free_broker_port()?;
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.arg(role).arg("--store").arg(store).args(["--listen-port", &port.to_string()]);
        cmd.args(["--set", &format!("namesrvAddr={namesrv}"), "--set", "brokerName=benchGroup"]);
        // The host's disk is not under test (a shared host's may be over 90 % full).
        cmd.args(["--set", "diskSpaceWarningLevelRatio=0.99"]);
        cmd.args(extra);
        let (child, stderr) = peer::spawn_logship(&mut cmd, role, 30)?;
        Ok(Self { child, http: port + 2, stderr })
    }

    /// Polls `/status` until `check` holds.
    fn until(&mut self, what: &str, mut check: impl FnMut(&Value) -> bool) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY;
        loop {
            if let Ok(s) = super::user::http_status(self.http)
                && check(&s)
            {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                let tail = self.stderr.lock().unwrap_or_else(|e| e.into_inner()).join("\n");
                bail!("logship exited with {status} while waiting for {what}:\n{tail}");
            }
            anyhow::ensure!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Logship {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Which broker pair a round measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pair {
    /// A logship SYNC_MASTER and a `logship slave`.
    Logship,
    /// A Java SYNC_MASTER and a Java SLAVE (rocketmq-broker 5.5.0).
    Java,
    /// A logship ASYNC_MASTER without a slave: no replication wait, the least a broker can
    /// cost, so what the client reaches against it bounds what any pair can show.
    LogshipAlone,
}

/// The brokers of one round; stopped on drop.
enum Brokers {
    /// Held for their drop (SIGTERM, then a wait).
    Logship {
        _processes: Vec<Logship>,
    },
    Java(Vec<App>),
}

impl Brokers {
    /// The processes of the master and of the slave (none for a master alone).
    fn pids(&self) -> (Option<u32>, Option<u32>) {
        let ids: Vec<u32> = match self {
            Self::Logship { _processes: p } => p.iter().map(|l| l.child.id()).collect(),
            Self::Java(apps) => apps.iter().map(|a| a.child.id()).collect(),
        };
        (ids.first().copied(), ids.get(1).copied())
    }
}

impl Drop for Brokers {
    fn drop(&mut self) {
        if let Self::Java(apps) = self {
            // The slave first, then the master, each a clean stop.
            while let Some(app) = apps.pop() {
                app.stop(Duration::from_secs(60));
            }
        }
    }
}

/// RocketMQ's defaults for what the test broker program shrinks, so both pairs run alike.
const JAVA_DEFAULTS: &[&str] = &[
    "mappedFileSizeCommitLog=1073741824",
    "mappedFileSizeConsumeQueue=6000000",
    "serverWorkerThreads=8",
    "clientWorkerThreads=4",
    "pullMessageThreadPoolNums=20",
    "flushDiskType=ASYNC_FLUSH",
    // The host's disk is not under test, as for the logship pair (a percent, as RocketMQ 5
    // writes it; logship reads that form too).
    "diskSpaceWarningLevelRatio=99",
];

fn start_brokers(apps: &Apps, pair: Pair, dir: &Path, namesrv: &str) -> anyhow::Result<Brokers> {
    match pair {
        Pair::Logship => {
            let mut master =
                Logship::start("master", &dir.join("master"), namesrv, &["--role", "SYNC_MASTER"])?;
            master.until("the logship master", |_| true)?;
            let ha = format!("127.0.0.1:{}", master.http - 1);
            let mut slave = Logship::start(
                "slave",
                &dir.join("slave"),
                namesrv,
                &["--master", &ha, "--set", "brokerId=1"],
            )?;
            slave.until("the logship slave", |_| true)?;
            master.until("the slave to connect", |s| {
                s["slaves"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|c| c["ackOffset"].is_u64() && c["counted"] == true))
            })?;
            Ok(Brokers::Logship { _processes: vec![master, slave] })
        }
        Pair::LogshipAlone => {
            let mut master =
                Logship::start("master", &dir.join("master"), namesrv, &["--role", "ASYNC_MASTER"])?;
            master.until("the logship master", |_| true)?;
            Ok(Brokers::Logship { _processes: vec![master] })
        }
        Pair::Java => {
            // Other programs on the host may take a port between the check and the bind:
            // a broker that cannot bind is started again on other ports.
            let broker = |role: &str, id: u64, store: &Path| -> anyhow::Result<App> {
                let mut last = None;
                for _ in 0..3 {
                    match java_broker(apps, role, id, store, namesrv) {
                        Err(e) if format!("{e:#}").contains("BindException") => last = Some(e),
                        other => return other,
                    }
                }
                Err(last.context("no attempt")?)
            };

            let mut master = broker("SYNC_MASTER", 0, &dir.join("master"))?;
            let slave = broker("SLAVE", 1, &dir.join("slave"))?;
            let deadline = Instant::now() + READY;
            loop {
                master.send_line("status")?;
                let s = master.wait_event("status", Duration::from_secs(30))?;
                if s["haConnections"].as_u64().unwrap_or(0) > 0 {
                    break;
                }
                anyhow::ensure!(Instant::now() < deadline, "the Java slave did not connect: {s}");
                std::thread::sleep(Duration::from_millis(200));
            }
            Ok(Brokers::Java(vec![master, slave]))
        }
    }
}

/// Starts one Java broker of the pair on free ports and waits for its `ready` line.
fn java_broker(apps: &Apps, role: &str, id: u64, store: &Path, namesrv: &str) -> anyhow::Result<App> {
    let port = free_broker_port()?;
    let mut sets = vec![
        "brokerName=benchGroup".to_string(),
        format!("brokerRole={role}"),
        format!("brokerId={id}"),
        format!("listenPort={port}"),
        format!("storePathRootDir={}", store.display()),
        format!("namesrvAddr={namesrv}"),
    ];
    sets.extend(JAVA_DEFAULTS.iter().map(|s| s.to_string()));
    let args: Vec<String> = sets.into_iter().flat_map(|kv| ["--set".to_string(), kv]).collect();
    let mut app = apps.start("Broker", "-Xmx1g", &args)?;
    app.wait_event("ready", READY)?;
    Ok(app)
}

/// Runs a producer of `count` synchronous `size`-byte sends to `topic` from `threads` threads
/// to the end; `more` are further arguments. `brokers` are the master's and the slave's
/// processes, whose CPU time the figures count with the producer's.
fn produce(
    apps: &Apps,
    (namesrv, brokers): (&str, (Option<u32>, Option<u32>)),
    topic: &str,
    (threads, count, size): (usize, u64, usize),
    more: &[&str],
) -> anyhow::Result<SendFigures> {
    let (count, threads, size) = (count.to_string(), threads.to_string(), size.to_string());
    let mut args = vec!["--namesrv", namesrv, "--topic", topic, "--mode", "sync", "--count", &count];
    args.extend(["--threads", &threads, "--size", &size, "--quiet"]);
    args.extend(more);
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut app = apps.start("Produce", "-Xmx512m", &args)?;
    let pids = [brokers.0, brokers.1, Some(app.child.id())];
    let cpu = || pids.map(|p| p.and_then(process_cpu_us));
    app.wait_event("ready", READY)?;
    let before = cpu();
    let summary = app.wait_event("summary", Duration::from_secs(600))?;
    let after = cpu();
    app.stop(Duration::from_secs(30));
    let mut f = figures(&summary)?;
    let ok = summary["statuses"]["SEND_OK"].as_u64().unwrap_or(0) as f64;
    let per = |i: usize| match (before[i], after[i]) {
        (Some(b), Some(a)) if ok > 0.0 => (a - b) / ok,
        _ => f64::NAN,
    };
    f.cpu = CpuPerSend { master: per(0), slave: per(1), client: per(2) };
    Ok(f)
}

/// A producer's `summary` as figures.
fn figures(summary: &Value) -> anyhow::Result<SendFigures> {
    let num =
        |k: &str| summary[k].as_f64().with_context(|| format!("no {k} in the producer's summary {summary}"));
    let ok = summary["statuses"]["SEND_OK"].as_u64().unwrap_or(0);
    let sends = summary["sends"].as_u64().unwrap_or(0);
    let secs = num("elapsedMs")? / 1000.0;
    Ok(SendFigures {
        rate: if secs > 0.0 { ok as f64 / secs } else { f64::NAN },
        p50: num("p50Us")?,
        p99: num("p99Us")?,
        failed: sends.saturating_sub(ok),
        cpu: CpuPerSend::default(),
    })
}

/// End to end: a push consumer of a new group on a topic of its own, beside a 1-thread
/// producer whose messages carry their send time; the consumer's p50 and p99.
///
/// The topic is created (and its route known) by a few seed sends before the consumer
/// starts: a new group reads a queue from its start while the queue is in memory, as Java's
/// broker answers, so the seeds are the only backlog, and they carry no send time.
fn end_to_end(
    apps: &Apps,
    (namesrv, brokers): (&str, (Option<u32>, Option<u32>)),
    count: u64,
    size: usize,
) -> anyhow::Result<(f64, f64)> {
    const E2E_TOPIC: &str = "BenchClientE2eTopic";
    const SEEDS: u64 = 16;
    produce(apps, (namesrv, brokers), E2E_TOPIC, (1, SEEDS, size), &[])?;
    let total = (SEEDS + count).to_string();
    let args = ["--namesrv", namesrv, "--topic", E2E_TOPIC, "--group", "benchE2eGroup", "--count", &total];
    let more = ["--summary-ms", "200", "--quiet"];
    let args: Vec<String> = args.iter().chain(&more).map(|s| s.to_string()).collect();
    let mut consumer = apps.start("PushConsume", "-Xmx512m", &args)?;
    consumer.wait_event("ready", READY)?;
    // The measured sends begin once the consumer has taken its queues and read the seeds (a
    // group's first rebalance can wait for the next 20 s round): steady state, not start-up.
    let deadline = Instant::now() + READY;
    loop {
        let s = consumer.wait_event("summary", READY)?;
        if s["consumed"].as_u64().unwrap_or(0) >= SEEDS {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "the end-to-end consumer read no seed: {s}");
    }
    produce(apps, (namesrv, brokers), E2E_TOPIC, (1, count, size), &["--born-nanos"])?;
    let summary = loop {
        let s = consumer.wait_event("summary", Duration::from_secs(120))?;
        if s["final"] == true {
            break s;
        }
    };
    consumer.stop(Duration::from_secs(30));
    let p =
        |k: &str| summary[k].as_f64().with_context(|| format!("no {k} in the consumer's summary {summary}"));
    Ok((p("e2eP50Us")?, p("e2eP99Us")?))
}

/// One round on `pair`: new NameServer, new brokers, warm-up, then the measured runs.
pub fn round(
    apps: &Apps,
    pair: Pair,
    dir: &Path,
    counts: (u64, u64),
    size: usize,
) -> anyhow::Result<ClientFigures> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let mut namesrv = apps.start("Namesrv", "-Xmx256m", &["--port".into(), "0".into()])?;
    let ready = namesrv.wait_event("ready", READY)?;
    let namesrv_addr = format!("127.0.0.1:{}", ready["port"].as_u64().context("a port on the ready line")?);
    let brokers = start_brokers(apps, pair, dir, &namesrv_addr)?;
    let to = (namesrv_addr.as_str(), brokers.pids());
    let (one_count, many_count) = counts;
    let warm = produce(apps, to, TOPIC, (8, one_count.min(2_000), size), &[])?;
    if warm.failed > 0 {
        eprintln!("  note: {} of the warm-up sends failed (the route may have been new)", warm.failed);
    }
    let one = produce(apps, to, TOPIC, (1, one_count, size), &[])?;
    let many = produce(apps, to, TOPIC, (64, many_count, size), &[])?;
    let e2e = match pair {
        // The ceiling is of sends; a consumer there measures nothing the others do not.
        Pair::LogshipAlone => (f64::NAN, f64::NAN),
        _ => end_to_end(apps, to, one_count.min(2_000), size)?,
    };
    drop(brokers);
    namesrv.stop(Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(dir);
    Ok(ClientFigures { one, many, e2e })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_producer_summary_gives_the_send_ok_rate_and_the_failed_sends() {
        let summary = serde_json::json!({
            "event": "summary", "sends": 1000, "statuses": {"SEND_OK": 900, "FLUSH_SLAVE_TIMEOUT": 100},
            "elapsedMs": 2000, "p50Us": 700, "p99Us": 2100
        });
        let f = figures(&summary).unwrap();
        assert_eq!((f.rate, f.p50, f.p99, f.failed), (450.0, 700.0, 2100.0, 100));
    }

    #[test]
    fn a_process_cpu_time_is_read_for_a_live_process_and_none_for_a_missing_one() {
        let mine = process_cpu_us(std::process::id()).expect("this process's stat");
        assert!(mine >= 0.0 && mine.fract() == 0.0, "{mine}");
        assert_eq!(process_cpu_us(u32::MAX), None);
    }

    #[test]
    fn a_producer_summary_without_latencies_is_an_error_naming_the_field() {
        let summary = serde_json::json!({"event": "summary", "sends": 0, "statuses": {}, "elapsedMs": 5});
        let e = figures(&summary).unwrap_err().to_string();
        assert!(e.contains("p50Us"), "{e}");
    }
}
