//! The `logship` binary as a process, for the operator tests: free ports, temporary
//! directories, HTTP over loopback.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_logship");

/// Two consecutive free ports: listenPort and haListenPort = listenPort + 1.
pub fn free_port_pair() -> u16 {
    for _ in 0..200 {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        if port < 65535 && TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
    panic!("no two consecutive free ports");
}

/// An HTTP client that returns error statuses as responses.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

/// A running broker process; killed on drop.
pub struct Broker {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
    pub stderr: Arc<Mutex<String>>,
}

impl Broker {
    /// Starts `logship ROLE` on `port` with small segments and fast heartbeats, plus `extra`.
    pub fn start(role: &str, dir: &Path, port: u16, extra: &[&str]) -> Self {
        let mut args: Vec<String> = [
            role,
            "--store",
            &dir.display().to_string(),
            "--listen-port",
            &port.to_string(),
            "--set",
            "mappedFileSizeCommitLog=1048576",
            "--set",
            "maxMessageSize=262144",
            "--set",
            "haSendHeartbeatInterval=200",
            "--set",
            "haHousekeepingInterval=2000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut child = Command::new(BIN)
            .args(&args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start logship");
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        let broker = Self { child, port, dir: dir.to_path_buf(), stderr };
        broker.wait_ready();
        broker
    }

    /// A master and a slave of it, in `dir`.
    pub fn pair(dir: &Path, master_extra: &[&str]) -> (Self, Self) {
        let mport = free_port_pair();
        let master = Self::start("master", &dir.join("master"), mport, master_extra);
        let ha = format!("127.0.0.1:{}", mport + 1);
        let slave = Self::start("slave", &dir.join("slave"), free_port_pair(), &["--master", &ha]);
        (master, slave)
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `host:port` of the HTTP API.
    pub fn http_addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn wait_ready(&self) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if let Ok(mut r) = agent().get(self.url("/status")).call() {
                if r.status() == 200 && r.body_mut().read_to_string().is_ok() {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("broker on port {} did not start:\n{}", self.port, self.stderr.lock().unwrap());
    }

    /// `GET /status`.
    pub fn status(&self) -> Value {
        let mut r = agent().get(self.url("/status")).call().unwrap();
        serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap()
    }

    /// `GET path` with an `Accept` header: status, content type, body.
    pub fn get_text(&self, path: &str, accept: Option<&str>) -> (u16, String, String) {
        let mut req = agent().get(self.url(path));
        if let Some(a) = accept {
            req = req.header("Accept", a);
        }
        let mut r = req.call().unwrap();
        let ct = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        (r.status().as_u16(), ct, r.body_mut().read_to_string().unwrap())
    }

    /// Puts one message; the HTTP status.
    pub fn put(&self, body: &str) -> u16 {
        agent().post(self.url("/topics/OpsTopic/messages")).send(body).unwrap().status().as_u16()
    }

    /// `kill -9`.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill9();
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
