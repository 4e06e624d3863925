//! Real RocketMQ applications as child processes: the Apache NameServer, a Java broker, Java
//! producers and consumers, `mqadmin` (all from `tests/interop/rocketmq-apps/`, client lines 5.5.0
//! and 4.9.7) and the Go client (`tests/interop/go-client/`). Each program prints one JSON object
//! per line on stdout; an [`App`] collects them, and kills its process when dropped.
//!
//! Skipping: without `LOGSHIP_REQUIRE_JAVA`, a machine lacking `java`, `mvn` or the RocketMQ
//! artifacts skips each Java test with one line on stderr ([`java_apps`] returns `None`); with it
//! set, the test fails instead. `LOGSHIP_REQUIRE_GO` does the same for `go` and the Go client.
//!
//! Every port is picked free on loopback; a Java broker whose ports were taken meanwhile is
//! started again on others. Java programs run with small heaps and their logs under a temporary
//! `user.home`.
//!
//! Also here: [`RecordingProxy`], a TCP proxy that splits each direction into remoting frames by
//! the `i32` length prefix alone and records them, for the captures under
//! `tests/data/remoting/captures/`.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

// ---- finding and building the programs ---------------------------------------------------

/// One RocketMQ client line the Java programs are built against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLine {
    /// The rocketmq-client / -namesrv / -broker / -tools version.
    pub version: &'static str,
    /// The Maven profile that selects it.
    pub profile: &'static str,
    slot: usize,
}

/// RocketMQ 5.x: rocketmq-client, -namesrv, -broker and -tools 5.5.0.
pub const CLIENT_5: ClientLine = ClientLine { version: "5.5.0", profile: "client-5", slot: 0 };
/// RocketMQ 4.9.x: the same at 4.9.7 (plus rocketmq-acl 4.9.7).
pub const CLIENT_4: ClientLine = ClientLine { version: "4.9.7", profile: "client-4", slot: 1 };

static JAVA_BUILDS: [OnceLock<Result<JavaApps, String>>; 2] = [OnceLock::new(), OnceLock::new()];
static GO_BUILD: OnceLock<Result<GoClient, String>> = OnceLock::new();

fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
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

fn interop_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop").join(name)
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The built Java programs of one client line: their classpath.
#[derive(Clone, Debug)]
pub struct JavaApps {
    pub line: ClientLine,
    classpath: String,
    /// More JVM options (`-Dkey=value`) for every program started from this value.
    jvm_options: Vec<String>,
}

fn build_java(line: ClientLine) -> Result<JavaApps, String> {
    if !runs("java", "-version") {
        return Err("no `java` on PATH".into());
    }
    let dir = interop_dir("rocketmq-apps");
    let out = dir.join("target").join(line.version);
    let jar = out.join("apps.jar");
    let deps = out.join("classpath.txt");
    // Fresh: built after the last source change, and every dependency still in ~/.m2.
    let fresh = std::fs::metadata(&jar).and_then(|m| m.modified()).is_ok_and(|built| {
        built >= newest_source(&dir)
            && std::fs::read_to_string(&deps)
                .is_ok_and(|cp| cp.trim().split(':').all(|entry| Path::new(entry).is_file()))
    });
    if !fresh {
        if !runs("mvn", "-v") {
            return Err("no `mvn` on PATH to build tests/interop/rocketmq-apps".into());
        }
        // Offline first (CI has filled ~/.m2), then online for a first run.
        let mut last = String::new();
        for offline in [true, false] {
            let mut cmd = Command::new("mvn");
            cmd.current_dir(&dir).args(["-q", "-B", "package", "-P", line.profile]);
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
            return Err(format!(
                "tests/interop/rocketmq-apps did not build for RocketMQ {} (do its artifacts resolve?):\n{}",
                line.version,
                tail(&last, 15)
            ));
        }
    }
    let deps = std::fs::read_to_string(&deps).map_err(|e| format!("cannot read {}: {e}", deps.display()))?;
    Ok(JavaApps { line, classpath: format!("{}:{}", jar.display(), deps.trim()), jvm_options: Vec::new() })
}

/// The Java programs for `line`, built once per test run; `None` (after one line on stderr
/// saying why) when Java is unavailable and `LOGSHIP_REQUIRE_JAVA` is not set.
pub fn java_apps(line: ClientLine, test: &str) -> Option<JavaApps> {
    match JAVA_BUILDS[line.slot].get_or_init(|| build_java(line)) {
        Ok(apps) => Some(apps.clone()),
        Err(why) if env_set("LOGSHIP_REQUIRE_JAVA") => panic!("LOGSHIP_REQUIRE_JAVA is set, but {why}"),
        Err(why) => {
            let first = why.lines().next().unwrap_or_default();
            // Straight to the process's stderr, past the test harness's capture.
            let _ = writeln!(
                std::io::stderr(),
                "{test}: skipped with the RocketMQ {} Java programs: {first}",
                line.version
            );
            None
        }
    }
}

/// The built Go client program.
#[derive(Clone, Debug)]
pub struct GoClient {
    pub bin: PathBuf,
}

fn build_go() -> Result<GoClient, String> {
    if !runs("go", "version") {
        return Err("no `go` on PATH".into());
    }
    let dir = interop_dir("go-client");
    let bin = dir.join("target").join("goclient");
    let fresh =
        std::fs::metadata(&bin).and_then(|m| m.modified()).is_ok_and(|built| built >= newest_source(&dir));
    if !fresh {
        let o = Command::new("go")
            .current_dir(&dir)
            .args(["build", "-o"])
            .arg(&bin)
            .arg(".")
            .output()
            .map_err(|e| format!("cannot run go: {e}"))?;
        if !o.status.success() {
            let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
            return Err(format!(
                "tests/interop/go-client did not build (do its modules download?):\n{}",
                tail(&text, 15)
            ));
        }
    }
    Ok(GoClient { bin })
}

/// The Go client, built once per test run; `None` (after one line on stderr) when Go is
/// unavailable and `LOGSHIP_REQUIRE_GO` is not set.
pub fn go_client(test: &str) -> Option<GoClient> {
    match GO_BUILD.get_or_init(build_go) {
        Ok(go) => Some(go.clone()),
        Err(why) if env_set("LOGSHIP_REQUIRE_GO") => panic!("LOGSHIP_REQUIRE_GO is set, but {why}"),
        Err(why) => {
            let first = why.lines().next().unwrap_or_default();
            let _ = writeln!(std::io::stderr(), "{test}: skipped with the Go client: {first}");
            None
        }
    }
}

// ---- one running program ----------------------------------------------------------------

/// How long a program may take to print its `ready` line (a Java broker on a loaded CI machine
/// takes 5 to 20 s).
pub const READY_PATIENCE: Duration = Duration::from_secs(120);

/// A running program: its JSON lines as they come, every line so far, and its stderr.
pub struct App {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    seen: Arc<Mutex<Vec<Value>>>,
    stderr: Arc<Mutex<String>>,
    exited: Option<ExitStatus>,
}

impl App {
    /// Starts `command` with stdin, stdout and stderr piped. The program runs until its stdin
    /// closes (every program here stops on stdin EOF), so keeping it open keeps it running.
    pub fn spawn(name: &str, mut command: Command) -> Self {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                // Keep the last 256 KiB: enough for a failure's context.
                if s.len() > 512 * 1024 {
                    let cut = s.len() - 256 * 1024;
                    let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(s.len());
                    s.drain(..cut);
                }
                s.push_str(&line);
                s.push('\n');
            }
        });
        let (tx, lines) = channel();
        let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
        let out = child.stdout.take().unwrap();
        let all = seen.clone();
        let who = name.to_string();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) => {
                        all.lock().unwrap().push(v.clone());
                        let _ = tx.send(v);
                    }
                    Err(_) => eprintln!("{who}: not a JSON line on stdout: {line}"),
                }
            }
        });
        let stdin = child.stdin.take();
        Self { name: name.to_string(), child, stdin, lines, seen, stderr, exited: None }
    }

    /// The program's stderr so far (its last 256 KiB or more).
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Every JSON line so far.
    pub fn lines(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }

    /// The lines so far whose `event` is `event`.
    pub fn events(&self, event: &str) -> Vec<Value> {
        self.lines().into_iter().filter(|v| v["event"] == event).collect()
    }

    /// The next line whose `event` is `event` (earlier lines of other events are skipped, but
    /// stay in [`App::lines`]). Panics, with the program's stderr, on a `fatal` line, on exit, or
    /// after `limit`.
    pub fn wait_event(&mut self, event: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(v) if v["event"] == event => return v,
                Ok(v) if v["event"] == "fatal" => {
                    panic!("{} failed: {v}\n{}", self.name, tail(&self.stderr(), 60))
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "{} printed no `{event}` line in {limit:?}:\n{}",
                        self.name,
                        tail(&self.stderr(), 60)
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().ok();
                    panic!(
                        "{} exited ({status:?}) before a `{event}` line:\n{}",
                        self.name,
                        tail(&self.stderr(), 60)
                    )
                }
            }
        }
    }

    /// Writes one line to the program's stdin.
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap_or_else(|| panic!("{}: stdin is closed", self.name));
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for the program to exit by itself (a producer that sent its `--count`, a consumer
    /// that consumed its `--count`), at most `limit`; returns every line it printed. Panics, with
    /// its stderr, if it exits unsuccessfully or runs past `limit` (then it is killed).
    pub fn finish(mut self, limit: Duration) -> Vec<Value> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.exited = Some(status);
                // The reader thread ends at EOF; drain what it has not handed over yet.
                while self.lines.recv_timeout(Duration::from_secs(5)).is_ok() {}
                assert!(
                    status.success(),
                    "{} exited with {status}:\n{}",
                    self.name,
                    tail(&self.stderr(), 60)
                );
                return self.lines();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("{} still running after {limit:?}:\n{}", self.name, tail(&self.stderr(), 60));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the program to exit by itself, at most `limit` (then it is killed and this
    /// panics); returns how it exited and every line it printed.
    pub fn finish_any(mut self, limit: Duration) -> (ExitStatus, Vec<Value>) {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.exited = Some(status);
                while self.lines.recv_timeout(Duration::from_secs(5)).is_ok() {}
                return (status, self.lines());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("{} still running after {limit:?}:\n{}", self.name, tail(&self.stderr(), 60));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Closes the program's stdin (its signal to stop cleanly) and waits for it like
    /// [`App::finish`].
    pub fn stop(mut self, limit: Duration) -> Vec<Value> {
        drop(self.stdin.take());
        self.finish(limit)
    }

    /// SIGTERM and wait (a clean stop through the JVM's shutdown hooks); true if it exited 0 or
    /// by the signal.
    pub fn terminate(&mut self, limit: Duration) -> bool {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.exited = Some(status);
                // 143: a JVM ended by SIGTERM after its shutdown hooks ran.
                return status.success() || status.code() == Some(143);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// kill -9, and wait.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        self.exited = self.child.wait().ok();
        self.stdin = None;
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.exited.is_none() && self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The lines of `lines` whose `event` is `event`.
pub fn events<'a>(lines: &'a [Value], event: &str) -> Vec<&'a Value> {
    lines.iter().filter(|v| v["event"] == event).collect()
}

/// The final `summary` line of a finished program.
pub fn summary(lines: &[Value]) -> &Value {
    lines.iter().rev().find(|v| v["event"] == "summary").expect("no summary line")
}

// ---- ports ------------------------------------------------------------------------------

/// A free TCP port on loopback (free when probed; another process may take it later).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A port `p` with `p - 2`, `p` and `p + 1` all free: a Java broker's listenPort, its "VIP"
/// fast remoting port (listenPort - 2) and its haListenPort (listenPort + 1).
pub fn free_broker_port() -> u16 {
    for _ in 0..500 {
        let p = free_port();
        if p > 1026
            && p < 65535
            && TcpListener::bind(("127.0.0.1", p - 2)).is_ok()
            && TcpListener::bind(("127.0.0.1", p + 1)).is_ok()
        {
            return p;
        }
    }
    panic!("no three free ports for a broker");
}

// ---- the Java programs ------------------------------------------------------------------

/// A fresh directory for RocketMQ's logs (`user.home`) and home (`rocketmq.home.dir`), shared
/// by the Java programs of one test run.
fn java_home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("logship-apps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

impl JavaApps {
    /// The same programs, started with `options` too (for example
    /// `-Drocketmq.serialize.type=ROCKETMQ`, which makes a client send binary headers).
    pub fn with_jvm_options(&self, options: &[&str]) -> Self {
        let mut more = self.clone();
        more.jvm_options.extend(options.iter().map(|s| s.to_string()));
        more
    }

    /// `java ... logship.apps.<class> args`, not started.
    pub fn command(&self, class: &str, args: &[String]) -> Command {
        let home = java_home();
        let heap = if class == "Broker" { "-Xmx512m" } else { "-Xmx256m" };
        let mut c = Command::new("java");
        c.args([
            "--add-opens=java.base/java.nio=ALL-UNNAMED",
            "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
            "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
            "--add-opens=java.base/java.lang=ALL-UNNAMED",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Xss512k",
            heap,
            // The broker's off-heap buffers: bounded too.
            "-XX:MaxDirectMemorySize=256m",
            // RocketMQ refuses puts above 90% disk use; the host's disk is not under test.
            "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.99",
            // 4.9.x clients: no periodic "client statistics" noise.
            "-Drocketmq.client.logLevel=WARN",
        ])
        .arg(format!("-Duser.home={}", home.display()))
        .args(&self.jvm_options)
        .arg("-cp")
        .arg(&self.classpath)
        .arg(format!("logship.apps.{class}"))
        // Before the program's own arguments: Admin passes everything after `--` to mqadmin.
        .args(["--home".to_string(), home.join("rocketmq").display().to_string()])
        .args(args);
        c
    }

    /// Starts `logship.apps.<class>` with `args` (see each program's doc comment).
    pub fn run(&self, class: &str, args: &[&str]) -> App {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        App::spawn(&format!("{class} ({})", self.line.version), self.command(class, &args))
    }

    /// Starts a producer (`Produce`) with `args`, and waits for its `ready` line.
    pub fn produce(&self, args: &[&str]) -> App {
        let mut app = self.run("Produce", args);
        app.wait_event("ready", READY_PATIENCE);
        app
    }

    /// Starts a push consumer (`PushConsume`) with `args`, and waits for its `ready` line.
    pub fn push_consume(&self, args: &[&str]) -> App {
        let mut app = self.run("PushConsume", args);
        app.wait_event("ready", READY_PATIENCE);
        app
    }

    /// Starts a lite pull consumer (`LitePull`) with `args`, and waits for its `ready` line.
    pub fn lite_pull(&self, args: &[&str]) -> App {
        let mut app = self.run("LitePull", args);
        app.wait_event("ready", READY_PATIENCE);
        app
    }

    /// Waits (180 s at most) until the NameServer at `ns` routes `topic`, as `mqadmin
    /// topicRoute` shows it.
    pub fn wait_routed(&self, ns: &str, topic: &str) {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let route = self.mqadmin(&["topicRoute", "-n", ns, "-t", topic]);
            if route["ok"] == true && route["text"].as_str().is_some_and(|t| t.contains("writeQueueNums")) {
                return;
            }
            assert!(Instant::now() < deadline, "the NameServer never routed {topic}: {route}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Runs one mqadmin sub-command (`Admin -- args...`) to completion; returns its `done`
    /// line, with the stdout lines joined under `"text"`.
    pub fn mqadmin(&self, args: &[&str]) -> Value {
        let mut all = vec!["--"];
        all.extend_from_slice(args);
        let mut app = self.run("Admin", &all);
        // mqadmin does not read stdin; it ends by itself.
        let stderr = app.stderr.clone();
        drop(app.stdin.take());
        let (status, lines) = app.finish_any(Duration::from_secs(120));
        let stderr = stderr.lock().unwrap().clone();
        let text: Vec<&str> = events(&lines, "out").iter().filter_map(|v| v["text"].as_str()).collect();
        let err: Vec<&str> = events(&lines, "err").iter().filter_map(|v| v["text"].as_str()).collect();
        let mut done = events(&lines, "done").last().map(|v| (*v).clone()).unwrap_or_else(|| {
            panic!("mqadmin {args:?} printed no done line ({status}):\n{}", tail(&stderr, 60))
        });
        done["text"] = Value::from(text.join("\n"));
        done["stderr"] = Value::from(err.join("\n"));
        done["exit"] = Value::from(status.code());
        done
    }
}

/// A real Apache NameServer (NamesrvController) in its own JVM.
pub struct Namesrv {
    pub app: App,
    pub port: u16,
}

impl Namesrv {
    /// Starts one on a port it picks itself, with `sets` (`key=value` for NamesrvConfig and
    /// NettyServerConfig), and waits until it serves.
    pub fn start(apps: &JavaApps, sets: &[&str]) -> Self {
        let mut args = vec!["--port", "0"];
        for s in sets {
            args.extend(["--set", s]);
        }
        let mut app = apps.run("Namesrv", &args);
        let ready = app.wait_event("ready", READY_PATIENCE);
        let port = ready["port"].as_u64().expect("a port on the ready line") as u16;
        Self { app, port }
    }

    /// `127.0.0.1:port`, the `namesrvAddr` to give brokers and clients.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// What a Java broker is: its name, role and id, where it stores, its NameServer, and any other
/// broker.conf property.
#[derive(Clone, Debug)]
pub struct BrokerSpec {
    pub name: String,
    /// ASYNC_MASTER, SYNC_MASTER or SLAVE.
    pub role: String,
    pub id: u64,
    pub store: PathBuf,
    pub namesrv: Option<String>,
    /// The address the broker advertises (brokerIP1); 127.0.0.1 unless set.
    pub advertise: Option<String>,
    /// A fixed listenPort (a free one otherwise).
    pub port: Option<u16>,
    /// More `key=value` properties (later ones win).
    pub sets: Vec<String>,
}

impl BrokerSpec {
    pub fn new(name: &str, role: &str, id: u64, store: &Path) -> Self {
        Self {
            name: name.into(),
            role: role.into(),
            id,
            store: store.to_path_buf(),
            namesrv: None,
            advertise: None,
            port: None,
            sets: Vec::new(),
        }
    }

    pub fn namesrv(mut self, addr: &str) -> Self {
        self.namesrv = Some(addr.into());
        self
    }

    pub fn set(mut self, kv: &str) -> Self {
        self.sets.push(kv.into());
        self
    }

    /// Advertise `ip` (brokerIP1) to the NameServer and so to clients.
    pub fn advertise(mut self, ip: &str) -> Self {
        self.advertise = Some(ip.into());
        self
    }

    /// Listen on `port` (and `port + 1` for HA, `port - 2` for the VIP channel).
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }
}

/// A real Apache RocketMQ broker (BrokerController) in its own JVM.
pub struct JavaBroker {
    pub app: App,
    /// listenPort: where clients connect.
    pub port: u16,
    /// The `ready` line: `addr`, `haAddr`, `brokerName`, `brokerId`, `role`, ...
    pub ready: Value,
    pub spec: BrokerSpec,
}

impl JavaBroker {
    /// Starts a broker for `spec` on free ports and waits for its `ready` line (it has
    /// registered with its NameServer by then). Tries other ports if its own were taken.
    pub fn start(apps: &JavaApps, spec: BrokerSpec) -> Self {
        let mut last = String::new();
        for _ in 0..3 {
            let port = spec.port.unwrap_or_else(free_broker_port);
            let mut args: Vec<String> = vec![
                format!("brokerName={}", spec.name),
                format!("brokerRole={}", spec.role),
                format!("brokerId={}", spec.id),
                format!("listenPort={port}"),
                format!("storePathRootDir={}", spec.store.display()),
            ];
            if let Some(ns) = &spec.namesrv {
                args.push(format!("namesrvAddr={ns}"));
            }
            if let Some(ip) = &spec.advertise {
                args.push(format!("brokerIP1={ip}"));
            }
            args.extend(spec.sets.iter().cloned());
            let args: Vec<String> = args.into_iter().flat_map(|kv| ["--set".to_string(), kv]).collect();
            let app = App::spawn(
                &format!("Broker {} {} ({})", spec.name, spec.role, apps.line.version),
                apps.command("Broker", &args),
            );
            let deadline = Instant::now() + READY_PATIENCE;
            loop {
                match app.lines.recv_timeout(Duration::from_millis(200)) {
                    Ok(v) if v["event"] == "ready" => {
                        return Self { app, port, ready: v, spec };
                    }
                    Ok(v) if v["event"] == "fatal" => {
                        last = format!("{v}\n{}", tail(&app.stderr(), 40));
                        break;
                    }
                    Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => {
                        last = tail(&app.stderr(), 40);
                        break;
                    }
                }
                assert!(
                    Instant::now() < deadline,
                    "broker {} did not start in {READY_PATIENCE:?}:\n{}",
                    spec.name,
                    tail(&app.stderr(), 60)
                );
            }
            if spec.port.is_some()
                || !last.contains("Address already in use") && !last.contains("BindException")
            {
                break;
            }
        }
        panic!("broker {} did not start:\n{last}", spec.name);
    }

    /// `ip:port` as the broker advertises it.
    pub fn addr(&self) -> String {
        self.ready["addr"].as_str().unwrap().to_string()
    }

    /// `status`: `maxPhyOffset`, `minPhyOffset`, `haConnections` (a master), `masterAddr` (a slave).
    pub fn status(&mut self) -> Value {
        self.app.send_line("status");
        self.app.wait_event("status", Duration::from_secs(30))
    }

    /// Polls [`JavaBroker::status`] until `check` holds; panics after `limit`.
    pub fn until(&mut self, what: &str, limit: Duration, mut check: impl FnMut(&Value) -> bool) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let s = self.status();
            if check(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; broker status {s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A clean stop (stdin EOF: BrokerController.shutdown, which unregisters from the NameServer).
    pub fn stop(self) {
        let lines = self.app.stop(Duration::from_secs(120));
        assert!(events(&lines, "stopped").len() == 1, "the broker did not report a clean stop");
    }
}

// ---- the Go client ----------------------------------------------------------------------

impl GoClient {
    fn run(&self, mode: &str, args: &[&str]) -> App {
        let mut c = Command::new(&self.bin);
        c.arg(mode).args(args).env("ROCKETMQ_GO_LOG_LEVEL", "warn");
        App::spawn(&format!("goclient {mode}"), c)
    }

    /// Starts `goclient produce args...` and waits for its `ready` line.
    pub fn produce(&self, args: &[&str]) -> App {
        let mut app = self.run("produce", args);
        app.wait_event("ready", READY_PATIENCE);
        app
    }

    /// Starts `goclient consume args...` (a push consumer) and waits for its `ready` line.
    pub fn consume(&self, args: &[&str]) -> App {
        let mut app = self.run("consume", args);
        app.wait_event("ready", READY_PATIENCE);
        app
    }
}

// ---- checks on the lines ----------------------------------------------------------------

/// Counts of `send` lines by `status`, messages counted (a batch counts `n`).
pub fn send_statuses(lines: &[Value]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for v in events(lines, "send") {
        *m.entry(v["status"].as_str().unwrap_or("?").to_string()).or_default() +=
            v["n"].as_u64().unwrap_or(1);
    }
    m
}

/// The msgIds (client unique keys) of every message a producer's `send` lines acknowledged.
pub fn sent_ids(lines: &[Value]) -> Vec<String> {
    let mut ids = Vec::new();
    for v in events(lines, "send") {
        if let Some(many) = v["msgIds"].as_array() {
            ids.extend(many.iter().filter_map(|x| x.as_str().map(String::from)));
        } else if let Some(id) = v["msgId"].as_str() {
            ids.push(id.to_string());
        }
    }
    ids
}

// ---- the recording proxy ----------------------------------------------------------------

/// Which way a recorded frame went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// From the side that connected (a client, or a broker calling the NameServer).
    ToServer,
    /// Back from the server.
    ToClient,
}

/// One remoting frame, as the proxy cut it: the 4-byte length prefix and the `length` bytes
/// after it. The proxy does not look inside.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Which connection through this proxy (numbered from 1 in accept order).
    pub conn: u64,
    pub way: Way,
    /// Microseconds since [`epoch`], when the frame's last byte arrived.
    pub at_us: u64,
    pub bytes: Vec<u8>,
}

impl Frame {
    /// The serialize type byte (0 JSON, 1 ROCKETMQ), when the frame is long enough.
    pub fn serialize_type(&self) -> Option<u8> {
        self.bytes.get(4).copied()
    }
}

/// The instant every proxy's timestamps count from, so that frames of several proxies interleave.
pub fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// A TCP proxy on `listen` in front of `upstream` that records every remoting frame each way.
/// Bytes are forwarded as they arrive (the framing only decides where recorded frames end), so
/// it never delays or changes a conversation. Bytes left over when a connection closes (a frame
/// cut short) are recorded as one last short frame.
pub struct RecordingProxy {
    pub addr: SocketAddr,
    conns: Arc<AtomicU64>,
    frames: Arc<Mutex<Vec<Frame>>>,
    stop: Arc<AtomicBool>,
    sockets: Arc<Mutex<Vec<TcpStream>>>,
}

impl RecordingProxy {
    /// Listens on a free port of 127.0.0.1.
    pub fn start(upstream: SocketAddr) -> Self {
        Self::start_on("127.0.0.1:0".parse().unwrap(), upstream)
    }

    /// Listens on `listen` (for example `127.0.0.2:<broker port>`, so that a broker
    /// advertising 127.0.0.2 sends its clients through the proxy).
    pub fn start_on(listen: SocketAddr, upstream: SocketAddr) -> Self {
        let listener =
            TcpListener::bind(listen).unwrap_or_else(|e| panic!("proxy cannot bind {listen}: {e}"));
        let addr = listener.local_addr().unwrap();
        let frames: Arc<Mutex<Vec<Frame>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let sockets: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (recorded, halt, socks) = (frames.clone(), stop.clone(), sockets.clone());
        let started = epoch();
        let conns = Arc::new(AtomicU64::new(0));
        let counted = conns.clone();
        std::thread::spawn(move || {
            for downstream in listener.incoming() {
                if halt.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(downstream) = downstream else { continue };
                let Ok(up) = TcpStream::connect(upstream) else { continue };
                let _ = (downstream.set_nodelay(true), up.set_nodelay(true));
                let conn = conns.fetch_add(1, Ordering::SeqCst) + 1;
                {
                    let mut s = socks.lock().unwrap();
                    s.push(downstream.try_clone().unwrap());
                    s.push(up.try_clone().unwrap());
                }
                for (from, to, way) in [
                    (downstream.try_clone().unwrap(), up.try_clone().unwrap(), Way::ToServer),
                    (up, downstream, Way::ToClient),
                ] {
                    let recorded = recorded.clone();
                    std::thread::spawn(move || relay(from, to, conn, way, started, &recorded));
                }
            }
        });
        Self { addr, conns: counted, frames, stop, sockets }
    }

    /// How many connections it has accepted so far (the newest one's number).
    pub fn connections(&self) -> u64 {
        self.conns.load(Ordering::SeqCst)
    }

    /// `ip:port`, the address to give the side that connects.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// Every frame so far, in the order the proxy completed them.
    pub fn frames(&self) -> Vec<Frame> {
        self.frames.lock().unwrap().clone()
    }

    /// Polls the frames until `check` holds; panics after `limit` naming `what`.
    pub fn until(&self, what: &str, limit: Duration, mut check: impl FnMut(&[Frame]) -> bool) -> Vec<Frame> {
        let deadline = Instant::now() + limit;
        loop {
            let f = self.frames();
            if check(&f) {
                return f;
            }
            assert!(Instant::now() < deadline, "the proxy never saw {what} ({} frames)", f.len());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn relay(
    mut from: TcpStream,
    mut to: TcpStream,
    conn: u64,
    way: Way,
    started: Instant,
    out: &Mutex<Vec<Frame>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                // Cut complete frames: i32 length, then that many bytes.
                loop {
                    if pending.len() < 4 {
                        break;
                    }
                    let len = i32::from_be_bytes(pending[..4].try_into().unwrap());
                    // A negative or absurd length: not remoting; record the rest as it comes.
                    let total =
                        if (0..=64 * 1024 * 1024).contains(&len) { 4 + len as usize } else { pending.len() };
                    if pending.len() < total {
                        break;
                    }
                    let bytes: Vec<u8> = pending.drain(..total).collect();
                    let at_us = started.elapsed().as_micros() as u64;
                    out.lock().unwrap().push(Frame { conn, way, at_us, bytes });
                }
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    if !pending.is_empty() {
        let at_us = started.elapsed().as_micros() as u64;
        out.lock().unwrap().push(Frame { conn, way, at_us, bytes: pending });
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop, and close every relayed connection.
        let _ = TcpStream::connect(self.addr);
        for s in self.sockets.lock().unwrap().iter() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

// ---- decoding frames (enough to select and describe them; the codec crate does the rest) ----

/// The fields of a frame's header that selecting and describing captures needs: code, flag,
/// opaque, serialize type, and for JSON headers the whole header.
#[derive(Clone, Debug)]
pub struct Peek {
    pub serialize_type: u8,
    pub code: i32,
    pub flag: i32,
    pub opaque: i32,
    pub version: i32,
    /// The JSON header (serialize type 0), parsed; `Null` for ROCKETMQ headers.
    pub json: Value,
    /// ROCKETMQ headers: the extFields.
    pub ext: BTreeMap<String, String>,
    pub remark: Option<String>,
    pub body_len: usize,
}

impl Peek {
    pub fn is_response(&self) -> bool {
        self.flag & 1 == 1
    }
}

/// Reads a frame's header, JSON or ROCKETMQ (RemotingCommand's layout); `None` if malformed.
pub fn peek(frame: &[u8]) -> Option<Peek> {
    if frame.len() < 8 {
        return None;
    }
    let total = u32::from_be_bytes(frame[..4].try_into().ok()?) as usize;
    if total + 4 != frame.len() {
        return None;
    }
    let st = frame[4];
    let hlen = u32::from_be_bytes([0, frame[5], frame[6], frame[7]]) as usize;
    let header = frame.get(8..8 + hlen)?;
    let body_len = frame.len() - 8 - hlen;
    match st {
        0 => {
            let json: Value = serde_json::from_slice(header).ok()?;
            let num = |k: &str| json[k].as_i64().unwrap_or(0) as i32;
            let ext = json["extFields"]
                .as_object()
                .map(|o| o.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect())
                .unwrap_or_default();
            Some(Peek {
                serialize_type: 0,
                code: num("code"),
                flag: num("flag"),
                opaque: num("opaque"),
                version: num("version"),
                remark: json["remark"].as_str().map(String::from),
                json,
                ext,
                body_len,
            })
        }
        1 => {
            let mut at = 0usize;
            let take = |at: &mut usize, n: usize| -> Option<&[u8]> {
                let s = header.get(*at..*at + n)?;
                *at += n;
                Some(s)
            };
            let code = i16::from_be_bytes(take(&mut at, 2)?.try_into().ok()?) as i32;
            let _lang = take(&mut at, 1)?;
            let version = i16::from_be_bytes(take(&mut at, 2)?.try_into().ok()?) as i32;
            let opaque = i32::from_be_bytes(take(&mut at, 4)?.try_into().ok()?);
            let flag = i32::from_be_bytes(take(&mut at, 4)?.try_into().ok()?);
            let rlen = i32::from_be_bytes(take(&mut at, 4)?.try_into().ok()?);
            let remark = if rlen > 0 {
                Some(String::from_utf8_lossy(take(&mut at, rlen as usize)?).into_owned())
            } else {
                None
            };
            let elen = i32::from_be_bytes(take(&mut at, 4)?.try_into().ok()?);
            let ext_bytes = take(&mut at, elen.max(0) as usize)?;
            let mut ext = BTreeMap::new();
            let mut e = 0usize;
            while e < ext_bytes.len() {
                let kl = u16::from_be_bytes(ext_bytes.get(e..e + 2)?.try_into().ok()?) as usize;
                e += 2;
                let k = String::from_utf8_lossy(ext_bytes.get(e..e + kl)?).into_owned();
                e += kl;
                let vl = u32::from_be_bytes(ext_bytes.get(e..e + 4)?.try_into().ok()?) as usize;
                e += 4;
                let v = String::from_utf8_lossy(ext_bytes.get(e..e + vl)?).into_owned();
                e += vl;
                ext.insert(k, v);
            }
            Some(Peek {
                serialize_type: 1,
                code,
                flag,
                opaque,
                version,
                json: Value::Null,
                ext,
                remark,
                body_len,
            })
        }
        _ => None,
    }
}

// ---- the capture files ------------------------------------------------------------------

/// A frame in a capture file: the frame, which server it was a conversation with (`peer`, for
/// example `namesrv` or `broker`), and the scenario step it belongs to.
#[derive(Clone, Debug)]
pub struct Captured {
    pub step: String,
    pub peer: String,
    pub frame: Frame,
}

/// Writes a capture file: a first line describing it (`meta`, an object), then one JSON line per
/// frame: `step`, `peer`, `conn`, `dir` (`"c2s"` / `"s2c"`), `tUs`, `len` and `frame` (the whole
/// frame, length prefix included, in standard base64).
pub fn write_capture(path: &Path, meta: &Value, frames: &[Captured]) {
    use base64::Engine;
    let mut out = serde_json::to_string(meta).unwrap();
    out.push('\n');
    for c in frames {
        let f = &c.frame;
        let line = serde_json::json!({
            "step": c.step,
            "peer": c.peer,
            "conn": f.conn,
            "dir": if f.way == Way::ToServer { "c2s" } else { "s2c" },
            "tUs": f.at_us,
            "len": f.bytes.len(),
            "frame": base64::engine::general_purpose::STANDARD.encode(&f.bytes),
        });
        out.push_str(&serde_json::to_string(&line).unwrap());
        out.push('\n');
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, out).unwrap();
}

/// Reads a capture file: its first line, and its frames.
pub fn read_capture(path: &Path) -> (Value, Vec<Captured>) {
    use base64::Engine;
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let meta: Value = serde_json::from_str(lines.next().expect("an empty capture")).unwrap();
    let frames = lines
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Captured {
                step: v["step"].as_str().unwrap_or_default().to_string(),
                peer: v["peer"].as_str().unwrap_or_default().to_string(),
                frame: Frame {
                    conn: v["conn"].as_u64().unwrap(),
                    way: if v["dir"] == "c2s" { Way::ToServer } else { Way::ToClient },
                    at_us: v["tUs"].as_u64().unwrap(),
                    bytes: base64::engine::general_purpose::STANDARD
                        .decode(v["frame"].as_str().unwrap())
                        .unwrap(),
                },
            }
        })
        .collect();
    (meta, frames)
}

/// Waits until a push consumer's latest allocation of `topic` is among `members` consumers and
/// gives it at least one queue; panics with its log after `within`.
pub fn wait_rebalanced(c: &mut App, topic: &str, members: u64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let settled = c
            .events("rebalance")
            .iter()
            .rev()
            .find(|v| v["topic"] == topic)
            .is_some_and(|v| v["consumers"] == members && !v["queues"].as_array().unwrap().is_empty());
        if settled {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never rebalanced {topic} among {members}:\n{}",
            c.name,
            c.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
