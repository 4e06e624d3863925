//! The `logship` binary as a process, for every test that runs it: the binary, free ports,
//! spawning with stderr captured, readiness, HTTP over loopback, signals.
//!
//! Every broker a test starts through [`Broker::start`] gets [`TEST_SETTINGS`] first: small
//! segments, fast heartbeats, and `diskSpaceWarningLevelRatio=100`, so that a nearly full host
//! disk does not make the brokers refuse puts. A test that is about disk usage sets the ratio
//! again in its own arguments (a later `--set` wins).
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_logship");

/// The binary to run: [`BIN`], or `LOGSHIP_TEST_BIN` to run the tests against another build.
pub fn bin() -> String {
    std::env::var("LOGSHIP_TEST_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// The `--set` keys every test broker starts with (see the module docs).
pub const TEST_SETTINGS: [&str; 4] = [
    "mappedFileSizeCommitLog=1048576",
    "maxMessageSize=262144",
    "haSendHeartbeatInterval=200",
    "diskSpaceWarningLevelRatio=100",
];

/// [`TEST_SETTINGS`] as command-line arguments, followed by `--set` for each of `more`.
pub fn test_settings(more: &[&str]) -> Vec<String> {
    TEST_SETTINGS.iter().chain(more).flat_map(|kv| ["--set".to_string(), kv.to_string()]).collect()
}

/// How long a clean exit may take before a test calls it a hang. A clean shutdown fsyncs the
/// store, and on ext4 (data=ordered) one fsync commits the journal with every other process's
/// dirty data: with builds running beside the tests, a SIGTERM test here once passed 30 s inside
/// the store's shutdown (its fsyncs, we believe; not yet proven).
pub const EXIT_PATIENCE: Duration = Duration::from_secs(120);

/// A free TCP port on loopback (free when probed; another process may take it later).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Three consecutive free ports: listenPort (remoting), haListenPort = listenPort + 1 and
/// httpListenPort = listenPort + 2 (the defaults).
pub fn free_port_pair() -> u16 {
    for _ in 0..200 {
        let port = free_port();
        if port < 65534
            && TcpListener::bind(("127.0.0.1", port + 1)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 2)).is_ok()
        {
            return port;
        }
    }
    panic!("no three consecutive free ports");
}

/// An HTTP client that returns error statuses as responses, with a 10 s timeout.
pub fn agent() -> ureq::Agent {
    agent_with(Duration::from_secs(10), None)
}

/// An HTTP client that returns error statuses as responses, with `timeout` and optional TLS.
pub fn agent_with(timeout: Duration, tls: Option<&ureq::tls::TlsConfig>) -> ureq::Agent {
    let mut config = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(timeout));
    if let Some(tls) = tls {
        config = config.tls_config(tls.clone());
    }
    config.build().into()
}

/// A child's stderr, collected line by line by a background thread (so it lags the process).
pub type Log = Arc<Mutex<String>>;

/// Collects the piped stderr of `child` into a [`Log`].
pub fn capture_stderr(child: &mut Child) -> Log {
    let log = Log::default();
    let pipe = child.stderr.take().expect("stderr is piped");
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let mut s = sink.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    log
}

/// Starts the binary with `args` and `RUST_LOG=info`, stdout discarded and stderr captured;
/// with `nofile`, under that RLIMIT_NOFILE (soft, hard).
pub fn spawn_logship(args: &[String], nofile: Option<(u64, u64)>) -> (Child, Log) {
    let mut command = Command::new(bin());
    command.args(args).env("RUST_LOG", "info").stdout(Stdio::null()).stderr(Stdio::piped());
    if let Some((soft, hard)) = nofile {
        use std::os::unix::process::CommandExt;
        #[allow(unsafe_code)]
        // SAFETY: the closure runs in the forked child before exec and only calls setrlimit,
        // which is async-signal-safe; it allocates nothing and touches no lock.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = command.spawn().expect("start logship");
    let log = capture_stderr(&mut child);
    (child, log)
}

/// `s` without ANSI escape sequences (log lines may be coloured).
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The addresses of the first `logship ready` line in `log`: HTTP, and HA on a master.
pub fn ready_addresses(log: &str) -> Option<(SocketAddr, Option<SocketAddr>)> {
    let line = strip_ansi(log.lines().find(|l| l.contains("logship ready"))?);
    let field = |name: &str| line.split_whitespace().find_map(|w| w.strip_prefix(name)?.parse().ok());
    Some((field("http=")?, field("ha=")))
}

/// Sends `sig` (`-STOP`, `-CONT`, `-TERM`, ...) to `pid`. `-STOP` returns only once every
/// thread of the process is stopped: `kill` returns when the signal is queued, and on a loaded
/// machine a thread may still run (and, say, ack a replica) for a moment after.
pub fn signal(pid: u32, sig: &str) {
    assert!(
        Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success(),
        "kill {sig} {pid}"
    );
    if sig == "-STOP" {
        let all_stopped = || {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return true };
            tasks.flatten().all(|t| {
                // `pid (comm) S ...`: the state follows the last ')'.
                std::fs::read_to_string(t.path().join("stat")).map_or(true, |stat| {
                    stat.rsplit_once(')')
                        .is_some_and(|(_, rest)| matches!(rest.trim_start().chars().next(), Some('T' | 't')))
                })
            })
        };
        let start = Instant::now();
        while !all_stopped() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Waits up to 30 s for `check`.
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Status code and JSON body of a response (`Null` when the body is not JSON).
pub fn json_reply(mut r: ureq::http::Response<ureq::Body>) -> (u16, Value) {
    let code = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap_or_default();
    (code, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A running broker process; killed on drop.
pub struct Broker {
    pub child: Child,
    /// The HTTP port it bound.
    pub port: u16,
    /// The HA port it bound (a master's), if it logged one.
    pub ha_port: Option<u16>,
    pub dir: PathBuf,
    /// The arguments it was started with (a restart reuses them).
    pub args: Vec<String>,
    pub stderr: Log,
    /// The `httpAuthToken` its arguments set, sent as a bearer token by every call here.
    pub token: Option<String>,
}

impl Broker {
    /// Starts `logship ROLE` on `port` (0: any) with [`TEST_SETTINGS`], a 2 s housekeeping
    /// interval, then `extra`; waits until it serves `/status`.
    pub fn start(role: &str, dir: &Path, port: u16, extra: &[&str]) -> Self {
        let mut args: Vec<String> =
            [role, "--store", &dir.display().to_string(), "--listen-port", &port.to_string()]
                .iter()
                .map(|s| s.to_string())
                .collect();
        args.extend(test_settings(&["haHousekeepingInterval=2000"]));
        args.extend(extra.iter().map(|s| s.to_string()));
        Self::spawn(args, dir)
    }

    /// Starts the binary with exactly `args` (its store in `dir`) and waits until it is ready.
    pub fn spawn(args: Vec<String>, dir: &Path) -> Self {
        let (child, stderr) = spawn_logship(&args, None);
        let token = args.iter().rev().find_map(|a| a.strip_prefix("httpAuthToken=")).map(str::to_string);
        let mut broker = Self { child, port: 0, ha_port: None, dir: dir.to_path_buf(), args, stderr, token };
        broker.wait_ready();
        broker
    }

    /// A master and a slave of it, in `dir`.
    pub fn pair(dir: &Path, master_extra: &[&str]) -> (Self, Self) {
        let master = Self::start("master", &dir.join("master"), free_port_pair(), master_extra);
        let slave =
            Self::start("slave", &dir.join("slave"), free_port_pair(), &["--master", &master.ha_addr()]);
        (master, slave)
    }

    /// Waits (20 s at most) until the broker has logged its addresses and serves `/status`.
    fn wait_ready(&mut self) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if let Some((http, ha)) = ready_addresses(&self.log()) {
                (self.port, self.ha_port) = (http.port(), ha.map(|a| a.port()));
                if self.get("/status").0 == 200 {
                    return;
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("broker exited with {status}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("broker did not start:\n{}", self.log());
    }

    /// Kills it (if alive) and starts it again with the same arguments.
    pub fn restart(&mut self) {
        self.kill9();
        *self = Self::spawn(self.args.clone(), &self.dir);
    }

    /// Everything it has logged so far.
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until its log holds `text` and returns the log; panics with the log after 20 s.
    /// The log lags the process (a thread reads the pipe), so a line logged just before an
    /// exit or an answer is read with this, never with [`Broker::log`].
    pub fn log_until(&self, text: &str) -> String {
        log_until(&self.stderr, text)
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `host:port` of the HTTP API.
    pub fn http_addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The remoting address it bound (`listenPort`), once it logged it.
    pub fn remoting_addr(&self) -> SocketAddr {
        let log = self.log_until("remoting ready");
        let line = strip_ansi(log.lines().find(|l| l.contains("remoting ready")).expect("logged"));
        line.split_whitespace()
            .find_map(|w| w.strip_prefix("remoting=")?.split(',').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no remoting address in {line:?}"))
    }

    /// `host:port` of the HA listener (a master's).
    pub fn ha_addr(&self) -> String {
        let port = self.ha_port.unwrap_or_else(|| panic!("no HA port logged:\n{}", self.log()));
        format!("127.0.0.1:{port}")
    }

    /// `GET path`: status code and JSON body (`Null` when not JSON, 0 when unreachable).
    pub fn get(&self, path: &str) -> (u16, Value) {
        match self.authorized(agent().get(self.url(path))).call() {
            Ok(r) => json_reply(r),
            Err(_) => (0, Value::Null),
        }
    }

    /// `POST path` with `body`: status code and JSON body.
    pub fn post(&self, path: &str, body: &[u8]) -> (u16, Value) {
        match self.authorized(agent().post(self.url(path))).send(body) {
            Ok(r) => json_reply(r),
            Err(e) => panic!("POST {path} failed: {e}\n{}", self.log()),
        }
    }

    /// `request` with the broker's bearer token, if it has one.
    pub fn authorized<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(t) => request.header("Authorization", &format!("Bearer {t}")),
            None => request,
        }
    }

    /// `GET /status`.
    pub fn status(&self) -> Value {
        let (code, status) = self.get("/status");
        assert_eq!(code, 200, "GET /status: {status}\n{}", self.log());
        status
    }

    /// The `maxOffset` of its status.
    pub fn max_offset(&self) -> u64 {
        self.status()["maxOffset"].as_u64().unwrap()
    }

    /// `GET path` with an `Accept` header: status, content type, body.
    pub fn get_text(&self, path: &str, accept: Option<&str>) -> (u16, String, String) {
        let mut req = self.authorized(agent().get(self.url(path)));
        if let Some(a) = accept {
            req = req.header("Accept", a);
        }
        let mut r = req.call().unwrap();
        let ct = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        (r.status().as_u16(), ct, r.body_mut().read_to_string().unwrap())
    }

    /// Puts one message to `OpsTopic`; the HTTP status.
    pub fn put(&self, body: &str) -> u16 {
        self.post("/topics/OpsTopic/messages", body.as_bytes()).0
    }

    /// Whether it still runs; the exit and its log if not.
    pub fn alive(&mut self) -> Result<(), String> {
        match self.child.try_wait().unwrap() {
            None => Ok(()),
            Some(status) => Err(format!("broker exited ({status:?}):\n{}", self.log())),
        }
    }

    /// `kill -9`, and reaps it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits for the exit ([`terminate`]).
    pub fn terminate(&mut self) -> Option<ExitStatus> {
        terminate(&mut self.child)
    }
}

/// Waits until `log` holds `text` and returns it; panics with the log after 20 s.
pub fn log_until(log: &Log, text: &str) -> String {
    let start = Instant::now();
    loop {
        let now = log.lock().unwrap().clone();
        if now.contains(text) {
            return now;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "logship never logged {text:?}:\n{now}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` to exit by itself: at most [`EXIT_PATIENCE`], a hang detector, not a
/// measurement. `None` if it is still running then.
pub fn wait_exit(child: &mut Child) -> Option<ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < EXIT_PATIENCE {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Sends SIGTERM to `child` and waits for the exit: at most [`EXIT_PATIENCE`], a hang detector,
/// not a measurement. `None` if it is still running then.
pub fn terminate(child: &mut Child) -> Option<ExitStatus> {
    signal(child.id(), "-TERM");
    wait_exit(child)
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Whether `program` can be run; prints a skip line for `test` when it cannot.
pub fn have(program: &str, test: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        println!("SKIPPED {test}: {program} is not installed");
    }
    found
}

/// The value of the first sample line starting with `series` (name plus labels).
pub fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find(|l| l.starts_with(series))?.rsplit(' ').next()?.parse().ok()
}

impl Broker {
    /// `GET /status`, typed as the server writes it.
    pub fn status_doc(&self) -> logship::status::Status {
        let status = self.status();
        serde_json::from_value(status.clone())
            .unwrap_or_else(|e| panic!("/status is no status document: {e}: {status}"))
    }

    /// The remoting part of its status; panics if the remoting port has not started.
    pub fn remoting_status(&self) -> logship::status::Remoting {
        self.status_doc().remoting.unwrap_or_else(|| panic!("/status has no remoting part\n{}", self.log()))
    }

    /// The master the NameServer at `namesrv` named in its last answer to this broker's
    /// registration (`None`: not registered there yet, or no master named).
    pub fn named_master(&self, namesrv: &str) -> Option<String> {
        self.remoting_status().name_servers?.remove(namesrv)?.master_addr
    }
}
