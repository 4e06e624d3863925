//! Interop test support: Apache RocketMQ's own Java store, driven through the harness in
//! `tests/interop/rocketmq-java/`, and `logship master` / `logship slave` processes.
//!
//! Without `LOGSHIP_REQUIRE_JAVA`, a machine lacking `java` or `mvn` (or the RocketMQ artifacts)
//! skips each test with one line on stderr. With it set, any of those missing fails the test.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

pub use crate::process::{agent_with, capture_stderr, free_port, free_port_pair, signal, spawn_logship};

/// Commit-log segment size in every interop test.
pub const SEG: u64 = 1024 * 1024;

/// One RocketMQ release the harness is built against.
#[derive(Clone, Copy, Debug)]
pub struct Rocketmq {
    /// The `rocketmq-store` version.
    pub version: &'static str,
    /// The Maven profile that selects it.
    profile: &'static str,
    slot: usize,
}

/// RocketMQ 4.9.x: the classic `HAService`.
pub const ROCKETMQ_4: Rocketmq = Rocketmq { version: "4.9.8", profile: "rocketmq-4", slot: 0 };
/// RocketMQ 5.x: `DefaultHAService`.
pub const ROCKETMQ_5: Rocketmq = Rocketmq { version: "5.5.1", profile: "rocketmq-5", slot: 1 };

static BUILDS: [OnceLock<Result<Harness, String>>; 2] = [OnceLock::new(), OnceLock::new()];

/// A built harness: its classpath.
#[derive(Clone, Debug)]
pub struct Harness {
    pub rocketmq: Rocketmq,
    classpath: String,
}

fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/rocketmq-java")
}

fn required() -> bool {
    std::env::var("LOGSHIP_REQUIRE_JAVA").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == "target") {
            continue;
        }
        let t = if path.is_dir() {
            newest_source(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH)
        };
        newest = newest.max(t);
    }
    newest
}

fn build(rocketmq: Rocketmq) -> Result<Harness, String> {
    if !runs("java", "-version") {
        return Err("no `java` on PATH".into());
    }
    let dir = project();
    let out = dir.join("target").join(rocketmq.version);
    let jar = out.join("harness.jar");
    let deps = out.join("classpath.txt");
    // Fresh: built after the last source change, and every dependency still in ~/.m2.
    let fresh = std::fs::metadata(&jar).and_then(|m| m.modified()).is_ok_and(|built| {
        built >= newest_source(&dir)
            && std::fs::read_to_string(&deps)
                .is_ok_and(|cp| cp.trim().split(':').all(|entry| Path::new(entry).is_file()))
    });
    if !fresh {
        if !runs("mvn", "-v") {
            return Err("no `mvn` on PATH to build the RocketMQ harness".into());
        }
        // Offline first (CI has filled ~/.m2), then online for a first run.
        let mut last = String::new();
        for offline in [true, false] {
            let mut cmd = Command::new("mvn");
            cmd.current_dir(&dir).args(["-q", "-B", "package", "-P", rocketmq.profile]);
            if offline {
                cmd.arg("-o");
            }
            let o = cmd.output().map_err(|e| format!("cannot run mvn: {e}"))?;
            if o.status.success() {
                last.clear();
                break;
            }
            last = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        }
        if !last.is_empty() {
            let tail: Vec<&str> = last.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(format!(
                "the harness for rocketmq-store {} did not build (do its artifacts resolve?):\n{}",
                rocketmq.version,
                tail.join("\n")
            ));
        }
    }
    let deps = std::fs::read_to_string(&deps).map_err(|e| format!("cannot read {}: {e}", deps.display()))?;
    let classpath = format!("{}:{}", jar.display(), deps.trim());
    Ok(Harness { rocketmq, classpath })
}

/// The harness for `rocketmq`, built once per test run; `None` (after one line saying why)
/// when Java is unavailable and `LOGSHIP_REQUIRE_JAVA` is not set.
pub fn harness(rocketmq: Rocketmq, test: &str) -> Option<Harness> {
    match BUILDS[rocketmq.slot].get_or_init(|| build(rocketmq)) {
        Ok(h) => Some(h.clone()),
        Err(why) if required() => panic!("LOGSHIP_REQUIRE_JAVA is set, but {why}"),
        Err(why) => {
            let first = why.lines().next().unwrap_or_default();
            // Straight to the process's stderr, past the test harness's capture.
            let _ =
                writeln!(std::io::stderr(), "{test}: skipped against RocketMQ {}: {first}", rocketmq.version);
            None
        }
    }
}

// ---- the Java store ---------------------------------------------------------------------

/// A running Java `DefaultMessageStore`.
pub struct JavaStore {
    pub harness: Harness,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    stderr: Arc<Mutex<String>>,
    /// The `started` line: `haPort`, `maxPhyOffset`, ...
    pub started: Value,
    args: Vec<String>,
}

impl JavaStore {
    /// Starts the harness with `--role role --store dir --segment segment` and `extra` arguments.
    pub fn start(harness: &Harness, role: &str, dir: &Path, segment: u64, extra: &[&str]) -> Self {
        let mut args = vec![
            "--role".to_string(),
            role.into(),
            "--store".into(),
            dir.display().to_string(),
            "--segment".into(),
            segment.to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        Self::spawn(harness, args)
    }

    fn spawn(harness: &Harness, args: Vec<String>) -> Self {
        let home = std::env::temp_dir().join("logship-interop-home");
        let mut child = Command::new("java")
            .args([
                "--add-opens=java.base/java.nio=ALL-UNNAMED",
                "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
                "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
                "--add-opens=java.base/java.lang=ALL-UNNAMED",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Xmx256m",
                // RocketMQ refuses puts above 90% disk use; the host's disk is not under test.
                "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.99",
            ])
            // RocketMQ writes its logs under ~/logs: keep them out of the user's home.
            .arg(format!("-Duser.home={}", home.display()))
            .arg("-cp")
            .arg(&harness.classpath)
            .arg("logship.interop.Harness")
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start java");
        let stderr = capture_stderr(&mut child);
        let (tx, lines) = channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
            }
        });
        let stdin = child.stdin.take();
        let mut s =
            Self { harness: harness.clone(), child, stdin, lines, stderr, started: Value::Null, args };
        let started = s.answer("start");
        assert_eq!(started.last().unwrap()["load"], true, "the Java store did not load: {}", s.stderr());
        s.started = started.last().unwrap().clone();
        s
    }

    /// The Java process's stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The HA port it serves (a master).
    pub fn ha_port(&self) -> u16 {
        self.started["haPort"].as_u64().unwrap() as u16
    }

    fn answer(&mut self, what: &str) -> Vec<Value> {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(v) => {
                    let end = v["end"] == true;
                    if v["event"] == "error" {
                        panic!("the Java harness failed `{what}`: {v}\n{}", self.stderr());
                    }
                    got.push(v);
                    if end {
                        return got;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no answer to `{what}` from Java:\n{}", self.stderr())
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the Java harness exited during `{what}`:\n{}", self.stderr())
                }
            }
        }
    }

    /// Sends one command and returns its answer lines (the last has `"end": true`).
    pub fn command(&mut self, line: &str) -> Vec<Value> {
        let stdin = self.stdin.as_mut().expect("the Java store is stopped");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        self.answer(line)
    }

    /// Puts `count` messages of `size` body bytes; returns one `put` line each.
    pub fn put(&mut self, count: usize, size: usize) -> Vec<Value> {
        let mut lines = self.command(&format!("put {count} {size}"));
        lines.pop();
        assert_eq!(lines.len(), count);
        lines
    }

    /// `maxPhyOffset`, `minPhyOffset`, `confirmOffset`, `dispatchBehind`, `haConnections`.
    pub fn status(&mut self) -> Value {
        self.command("status").pop().unwrap()
    }

    pub fn max_offset(&mut self) -> u64 {
        self.status()["maxPhyOffset"].as_u64().unwrap()
    }

    /// Waits until the reput service has dispatched everything.
    pub fn wait_dispatch(&mut self) -> Value {
        self.command("wait-dispatch").pop().unwrap()
    }

    /// `lookMessageByOffset`.
    pub fn look(&mut self, offset: u64) -> Value {
        self.command(&format!("look {offset}")).pop().unwrap()
    }

    /// Every message in one of its topic's consume queues, read back through the queue.
    pub fn queue(&mut self, queue_id: i32) -> Vec<Value> {
        let mut lines = self.command(&format!("queue {queue_id}"));
        lines.pop();
        lines
    }

    /// Puts `count` messages of `size` body bytes to `topic`.
    pub fn put_to(&mut self, topic: &str, count: usize, size: usize) -> Vec<Value> {
        let mut lines = self.command(&format!("put {count} {size} {topic}"));
        lines.pop();
        assert_eq!(lines.len(), count);
        lines
    }

    /// Every message in one consume queue of `topic`.
    pub fn queue_of(&mut self, topic: &str, queue_id: i32) -> Vec<Value> {
        let mut lines = self.command(&format!("queue {queue_id} {topic}"));
        lines.pop();
        lines
    }

    /// Shuts the store down cleanly and waits for the process.
    pub fn shutdown(mut self) {
        self.command("shutdown");
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "java exited with {status}:\n{}", self.stderr());
    }

    /// kill -9.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.stdin = None;
    }

    /// Starts the same store again (same arguments).
    pub fn restart(&mut self) {
        let again = Self::spawn(&self.harness.clone(), self.args.clone());
        *self = again;
    }

    /// Polls `check` on the store's status until it holds.
    pub fn until(&mut self, what: &str, mut check: impl FnMut(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.status();
            if check(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; Java status {s}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for JavaStore {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- the logship binary -----------------------------------------------------------------

fn agent() -> ureq::Agent {
    agent_with(Duration::from_secs(30), None)
}

/// A `logship master` or `logship slave` process with 1 MiB segments.
pub struct Logship {
    child: Child,
    pub port: u16,
    args: Vec<String>,
    stderr: Arc<Mutex<String>>,
}

impl Logship {
    /// Starts `logship role --store dir` on a fresh port pair with `extra` arguments.
    pub fn start(role: &str, dir: &Path, extra: &[&str]) -> Self {
        Self::start_with_segment(role, dir, SEG, extra)
    }

    pub fn start_with_segment(role: &str, dir: &Path, segment: u64, extra: &[&str]) -> Self {
        let port = free_port_pair();
        let mut args = vec![
            role.to_string(),
            "--store".into(),
            dir.display().to_string(),
            "--listen-port".into(),
            port.to_string(),
            "--set".into(),
            format!("mappedFileSizeCommitLog={segment}"),
            "--set".into(),
            "maxMessageSize=262144".into(),
            "--set".into(),
            "slaveReadEnable=true".into(),
            // The host's disk is not under test.
            "--set".into(),
            "diskSpaceWarningLevelRatio=100".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        Self::spawn(args, port)
    }

    fn spawn(args: Vec<String>, port: u16) -> Self {
        let (child, stderr) = spawn_logship(&args, None);
        let broker = Self { child, port, args, stderr };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if let Ok(mut r) = agent().get(broker.url("/status")).call() {
                if r.status() == 200 && r.body_mut().read_to_string().is_ok() {
                    return broker;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("logship on port {port} did not start:\n{}", broker.stderr());
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until its stderr (read by a background thread, so behind the process) holds
    /// `text`, and returns it; panics with the whole log after 20 s.
    pub fn stderr_until(&self, text: &str) -> String {
        let start = Instant::now();
        loop {
            let log = self.stderr();
            if log.contains(text) {
                return log;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "logship never logged {text:?}:\n{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn ha_port(&self) -> u16 {
        self.port + 1
    }

    /// Its HTTP API: httpListenPort = listenPort + 2.
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port + 2)
    }

    pub fn status(&self) -> Value {
        let mut r = agent().get(self.url("/status")).call().unwrap();
        serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap()
    }

    pub fn max_offset(&self) -> u64 {
        self.status()["maxOffset"].as_u64().unwrap()
    }

    /// Polls `/status` until `check` holds.
    pub fn until(&self, what: &str, mut check: impl FnMut(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.status();
            if check(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; logship status {s}\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Puts message `i` (the same shape the Java harness puts): returns the HTTP status and reply.
    pub fn put(&self, topic: &str, i: u64, size: usize, queues: u64) -> (u16, Value) {
        let body = body(b"logship", i, size);
        let query = format!(
            "?queueId={}&tags=Tag{}&keys=key-{i}%20alt-{i}&seq={i}&note=h%C3%A9llo%20{i}",
            i % queues,
            i % 3
        );
        let url = self.url(&format!("/topics/{topic}/messages{query}"));
        let mut r = agent().post(url).send(&body[..]).unwrap();
        let code = r.status().as_u16();
        (code, serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap())
    }

    /// Every message of one consume queue, through the HTTP API.
    pub fn queue(&self, topic: &str, queue_id: i32) -> Vec<Value> {
        let mut all = Vec::new();
        let mut offset = 0;
        loop {
            let path = topic.replace('%', "%25").replace('|', "%7C");
            let url =
                self.url(&format!("/topics/{path}/queues/{queue_id}/messages?offset={offset}&max=1000"));
            let mut r = agent().get(url).call().unwrap();
            assert_eq!(r.status().as_u16(), 200);
            let v: Value = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
            let got = v["messages"].as_array().unwrap().clone();
            if got.is_empty() {
                return all;
            }
            offset = v["nextOffset"].as_u64().unwrap();
            all.extend(got);
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGSTOP, returning once the process is stopped.
    pub fn sigstop(&self) {
        signal(self.pid(), "-STOP");
        let stat = format!("/proc/{}/stat", self.pid());
        let deadline = Instant::now() + Duration::from_secs(10);
        // The state follows the command name in parentheses: `pid (comm) T ...`.
        while !std::fs::read_to_string(&stat)
            .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('T')))
        {
            assert!(Instant::now() < deadline, "logship did not stop");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn sigcont(&self) {
        signal(self.pid(), "-CONT");
    }

    /// SIGTERM and wait: a clean stop.
    pub fn terminate(&mut self) {
        signal(self.pid(), "-TERM");
        let status = self.child.wait().unwrap();
        assert!(status.success(), "logship exited with {status}:\n{}", self.stderr());
    }

    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Logship {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A body like the Java harness's: `"{who}-{i:08}-"` padded with one letter to `size` bytes.
pub fn body(who: &[u8], i: u64, size: usize) -> Vec<u8> {
    let mut b = who.to_vec();
    b.extend_from_slice(format!("-{i:08}-").as_bytes());
    let len = size.max(b.len());
    b.resize(len, b'a' + (i % 26) as u8);
    b
}

// ---- on-disk checks ---------------------------------------------------------------------

/// Compares the commit-log segment files of two store roots byte for byte over `[from, to)`.
pub fn assert_same_segments(a: &Path, b: &Path, segment: u64, from: u64, to: u64) {
    assert!(from < to, "empty range {from}..{to}");
    let mut at = from;
    while at < to {
        let base = at - at % segment;
        let name = format!("{base:020}");
        let x =
            std::fs::read(a.join("commitlog").join(&name)).unwrap_or_else(|e| panic!("{name} in {a:?}: {e}"));
        let y =
            std::fs::read(b.join("commitlog").join(&name)).unwrap_or_else(|e| panic!("{name} in {b:?}: {e}"));
        let (lo, hi) = ((at - base) as usize, (to.min(base + segment) - base) as usize);
        assert!(x.len() >= hi && y.len() >= hi, "segment {name} is short: {} and {} bytes", x.len(), y.len());
        if x[lo..hi] != y[lo..hi] {
            let first = (lo..hi).find(|&i| x[i] != y[i]).unwrap();
            panic!("segment {name} differs at offset {} (byte {first} of the file)", base + first as u64);
        }
        at = base + hi as u64;
    }
}

/// RocketMQ's BLANK magic code.
pub const BLANK_MAGIC: i32 = 0xcbd4_3194_u32 as i32;

/// Asserts that `[end, next_segment)` of the store at `root` holds one BLANK record.
pub fn assert_blank_to_segment_end(root: &Path, segment: u64, end: u64) {
    let base = end - end % segment;
    let file = std::fs::read(root.join("commitlog").join(format!("{base:020}"))).unwrap();
    let at = (end - base) as usize;
    let size = i32::from_be_bytes(file[at..at + 4].try_into().unwrap());
    let magic = i32::from_be_bytes(file[at + 4..at + 8].try_into().unwrap());
    assert_eq!(magic, BLANK_MAGIC, "no BLANK record at {end}");
    assert_eq!(size as u64, segment - (end - base), "the BLANK record at {end} does not end the segment");
}

// ---- AutoSwitch (controller mode, RocketMQ 5.x) ------------------------------------------
//
// The harness's `--mode autoswitch`: the store runs AutoSwitchHAService and the test plays the
// controller (changeToMaster, changeToSlave, setSyncStateSet). And a TCP relay that records what
// two Java stores put on the wire.

impl JavaStore {
    /// Starts a controller-mode store (5.x only) as broker `broker_id`, serving HA on `ha_port`.
    /// It starts as a slave that follows nobody; `extra` adds harness arguments.
    pub fn start_autoswitch(
        harness: &Harness,
        dir: &Path,
        broker_id: u64,
        ha_port: u16,
        extra: &[&str],
    ) -> Self {
        let (id, port) = (broker_id.to_string(), ha_port.to_string());
        let mut args = vec!["--mode", "autoswitch", "--broker-id", &id, "--ha-port", &port];
        args.extend_from_slice(extra);
        let s = Self::start(harness, "ASYNC_MASTER", dir, SEG, &args);
        assert_eq!(s.started["mode"], "autoswitch", "not a controller-mode store: {}", s.started);
        s
    }

    /// `changeToMaster EPOCH`: the answer (a status line with `ok`).
    pub fn change_to_master(&mut self, epoch: i32) -> Value {
        self.command(&format!("changeToMaster {epoch}")).pop().unwrap()
    }

    /// `changeToSlave HOST:PORT EPOCH MASTER_ID`: the answer (a status line with `ok`).
    pub fn change_to_slave(&mut self, master_ha: &str, epoch: i32, master_id: u64) -> Value {
        self.command(&format!("changeToSlave {master_ha} {epoch} {master_id}")).pop().unwrap()
    }

    /// `setSyncStateSet ID...`.
    pub fn set_sync_state_set(&mut self, ids: &[u64]) -> Value {
        let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
        self.command(&format!("setSyncStateSet {}", ids.join(" "))).pop().unwrap()
    }
}

/// The `(epoch, startOffset)` list of a controller-mode status line.
pub fn epochs(status: &Value) -> Vec<(i64, u64)> {
    status["epochs"]
        .as_array()
        .unwrap_or_else(|| panic!("no epochs in {status}"))
        .iter()
        .map(|e| (e["epoch"].as_i64().unwrap(), e["startOffset"].as_u64().unwrap()))
        .collect()
}

/// Which way a recorded chunk went through a [`Relay`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the connecting side (the slave) to the upstream (the master).
    ToMaster,
    /// From the upstream (the master) back to the slave.
    ToSlave,
}

/// One chunk the relay forwarded, with when it saw it.
#[derive(Clone, Debug)]
pub struct Chunk {
    pub at: Instant,
    pub direction: Direction,
    pub bytes: Vec<u8>,
}

/// Everything one relayed connection carried, in the order the relay saw it.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    pub chunks: Vec<Chunk>,
}

impl Recording {
    /// All bytes that went one way, concatenated.
    pub fn stream(&self, direction: Direction) -> Vec<u8> {
        self.chunks
            .iter()
            .filter(|c| c.direction == direction)
            .flat_map(|c| c.bytes.iter().copied())
            .collect()
    }
}

/// A TCP relay on loopback in front of `upstream`, recording both directions of every connection.
pub struct Relay {
    pub port: u16,
    connections: Arc<Mutex<Vec<Arc<Mutex<Recording>>>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    sockets: Arc<Mutex<Vec<std::net::TcpStream>>>,
}

impl Relay {
    /// Listens on a free loopback port and forwards each connection to `upstream`.
    pub fn start(upstream: std::net::SocketAddr) -> Self {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections: Arc<Mutex<Vec<Arc<Mutex<Recording>>>>> = Arc::default();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sockets: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let (conns, halt, socks) = (connections.clone(), stop.clone(), sockets.clone());
        std::thread::spawn(move || {
            for downstream in listener.incoming() {
                if halt.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(downstream) = downstream else { continue };
                let Ok(up) = std::net::TcpStream::connect(upstream) else { continue };
                let _ = (downstream.set_nodelay(true), up.set_nodelay(true));
                let rec = Arc::new(Mutex::new(Recording::default()));
                conns.lock().unwrap().push(rec.clone());
                {
                    let mut s = socks.lock().unwrap();
                    s.push(downstream.try_clone().unwrap());
                    s.push(up.try_clone().unwrap());
                }
                for (from, to, direction) in [
                    (downstream.try_clone().unwrap(), up.try_clone().unwrap(), Direction::ToMaster),
                    (up.try_clone().unwrap(), downstream.try_clone().unwrap(), Direction::ToSlave),
                ] {
                    let rec = rec.clone();
                    std::thread::spawn(move || pump(from, to, direction, &rec));
                }
            }
        });
        Self { port, connections, stop, sockets }
    }

    /// `127.0.0.1:port`, the address to give the slave.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A copy of every connection's recording so far, oldest first.
    pub fn recordings(&self) -> Vec<Recording> {
        self.connections.lock().unwrap().iter().map(|r| r.lock().unwrap().clone()).collect()
    }

    /// Polls the recordings until `check` holds; panics after 60 s.
    pub fn until(&self, what: &str, mut check: impl FnMut(&[Recording]) -> bool) -> Vec<Recording> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = self.recordings();
            if check(&r) {
                return r;
            }
            if Instant::now() >= deadline {
                let seen: Vec<String> = r
                    .iter()
                    .map(|c| {
                        let (up, down) =
                            (c.stream(Direction::ToMaster).len(), c.stream(Direction::ToSlave).len());
                        format!("{} chunks, {up} bytes to the master, {down} to the slave", c.chunks.len())
                    })
                    .collect();
                panic!("the relay never saw {what} in 60 s; its connections: {seen:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn pump(
    mut from: std::net::TcpStream,
    mut to: std::net::TcpStream,
    direction: Direction,
    rec: &Mutex<Recording>,
) {
    use std::io::Read;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                // Recorded before it is forwarded, so the record never lags what the peer saw.
                rec.lock().unwrap().chunks.push(Chunk {
                    at: Instant::now(),
                    direction,
                    bytes: buf[..n].to_vec(),
                });
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wake the accept loop, and close every relayed connection.
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        for s in self.sockets.lock().unwrap().iter() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}
