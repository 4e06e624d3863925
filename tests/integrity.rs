//! Data integrity at the edges, with the real binary: a full disk.
//!
//! The disk tests mount a small tmpfs (`mount -t tmpfs -o size=...`), which needs root. Without
//! it they print one line and pass, unless `LOGSHIP_REQUIRE_MOUNT=1` demands them.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test (`LOGSHIP_TEST_BIN` runs these tests against another build).
fn bin() -> String {
    std::env::var("LOGSHIP_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_logship").to_string())
}

/// A tmpfs of `size` mounted on a temporary directory; unmounted on drop.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// `None` (after printing why) when mounting is not permitted here.
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Self { dir }),
            other => {
                let why = match other {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                    Err(e) => e.to_string(),
                };
                assert!(
                    std::env::var_os("LOGSHIP_REQUIRE_MOUNT").is_none(),
                    "LOGSHIP_REQUIRE_MOUNT is set but a tmpfs cannot be mounted: {why}"
                );
                println!("skipped: cannot mount a tmpfs here ({why}); run as root to test a full disk");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn resize(&self, size: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "remount to {size}");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

fn free_port_pair() -> u16 {
    for _ in 0..200 {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        if port < 65535 && TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
    panic!("no two consecutive free ports");
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

struct Broker {
    child: Child,
    port: u16,
    stderr: Arc<Mutex<String>>,
}

impl Broker {
    fn start(dir: &Path, extra: &[&str]) -> Self {
        let port = free_port_pair();
        let mut args: Vec<String> = ["master", "--store"].iter().map(|s| s.to_string()).collect();
        args.push(dir.display().to_string());
        args.extend(["--listen-port".to_string(), port.to_string()]);
        for kv in ["mappedFileSizeCommitLog=1048576", "maxMessageSize=262144"].iter().chain(extra) {
            args.extend(["--set".to_string(), kv.to_string()]);
        }
        let mut child = Command::new(bin())
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
        let b = Self { child, port, stderr };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if let Ok(mut r) = agent().get(b.url("/status")).call() {
                if r.status() == 200 && r.body_mut().read_to_string().is_ok() {
                    return b;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("broker did not start:\n{}", b.stderr.lock().unwrap());
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn alive(&mut self) -> Result<(), String> {
        match self.child.try_wait().unwrap() {
            None => Ok(()),
            Some(status) => Err(format!("broker exited ({status:?}):\n{}", self.stderr.lock().unwrap())),
        }
    }

    fn put(&mut self, body: &[u8]) -> (u16, Value) {
        let r = agent().post(self.url("/topics/DiskTopic/messages")).send(body);
        match r {
            Ok(mut r) => {
                let code = r.status().as_u16();
                (code, serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap())
            }
            Err(e) => {
                std::thread::sleep(Duration::from_millis(200));
                let alive = self.alive();
                panic!("put failed: {e}; {}", alive.err().unwrap_or_default());
            }
        }
    }

    fn get(&self, path: &str) -> (u16, Value) {
        let mut r = agent().get(self.url(path)).call().unwrap();
        let code = r.status().as_u16();
        (code, serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap())
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Puts 64 KiB messages until one is refused; returns the refusal and the number stored.
fn fill(broker: &mut Broker) -> ((u16, Value), usize) {
    let body = vec![b'x'; 64 * 1024];
    for i in 0..10_000 {
        let (code, v) = broker.put(&body);
        if code != 200 {
            return ((code, v), i);
        }
    }
    panic!("the disk never filled");
}

#[test]
fn a_full_disk_refuses_puts_with_503_keeps_serving_reads_and_recovers_when_space_returns() {
    let Some(disk) = SmallDisk::mount("8m") else { return };
    let store = disk.path().join("store");
    let mut broker = Broker::start(&store, &[]);
    let ((code, refusal), stored) = fill(&mut broker);
    broker.alive().expect("the broker survives a full disk");
    assert!(stored > 10, "some puts fit: {stored}");
    assert_eq!(code, 503, "{refusal}");
    assert_eq!(refusal["status"], "SERVICE_NOT_AVAILABLE");
    assert_eq!(refusal["stored"], false);
    let error = refusal["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("disk"), "the refusal says why: {refusal}");
    // Reads go on.
    let (code, read) = broker.get("/topics/DiskTopic/queues/0/messages?offset=0&max=3");
    assert_eq!(code, 200, "{read}");
    assert_eq!(read["messages"].as_array().unwrap().len(), 3);
    let (code, status) = broker.get("/status");
    assert_eq!(code, 200);
    assert!(status["writeRefused"].is_string(), "{status}");
    // Space returns: puts are accepted again.
    disk.resize("64m");
    let start = Instant::now();
    loop {
        let (code, v) = broker.put(b"after");
        if code == 200 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "puts stay refused: {v}");
        std::thread::sleep(Duration::from_millis(200));
    }
    broker.alive().unwrap();
}

#[test]
fn a_segment_larger_than_the_disk_is_refused_at_once_not_a_crash() {
    let Some(disk) = SmallDisk::mount("4m") else { return };
    let store = disk.path().join("store");
    let mut broker = Broker::start(&store, &["mappedFileSizeCommitLog=16777216"]);
    let ((code, refusal), stored) = fill(&mut broker);
    broker.alive().expect("the broker survives");
    assert_eq!((code, stored), (503, 0), "{refusal}");
    let error = refusal["error"].as_str().unwrap_or_default();
    assert!(error.contains("disk full") && error.contains("16777216"), "names the space needed: {refusal}");
    assert!(error.contains("00000000000000000000"), "names the file: {refusal}");
}

#[test]
fn a_corrupt_consume_queue_names_the_key_that_rebuilds_it_and_that_key_works() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut broker = Broker::start(&store, &[]);
    for i in 0..5 {
        assert_eq!(broker.put(format!("m{i}").as_bytes()).0, 200);
    }
    let pid = broker.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    assert!(broker.child.wait().unwrap().success());
    // Entry 1 points before entry 0: no dispatch writes that.
    let cq: PathBuf = store.join("consumequeue/DiskTopic/0").join(format!("{:020}", 0));
    let mut bytes = std::fs::read(&cq).unwrap();
    bytes[20..28].copy_from_slice(&0i64.to_be_bytes());
    std::fs::write(&cq, &bytes).unwrap();

    let out = Command::new(bin())
        .args(["master", "--store"])
        .arg(&store)
        .args(["--listen-port", &free_port_pair().to_string(), "--set", "mappedFileSizeCommitLog=1048576"])
        .args(["--set", "maxMessageSize=262144"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("rebuildConsumeQueues=true"), "the hint names a key the user can set: {stderr}");
    assert!(!stderr.contains("rebuild_consume_queues"), "{stderr}");

    let broker = Broker::start(&store, &["rebuildConsumeQueues=true"]);
    let (code, read) = broker.get("/topics/DiskTopic/queues/0/messages?offset=0&max=10");
    assert_eq!(code, 200, "{read}");
    assert_eq!(read["messages"].as_array().unwrap().len(), 5);
}
