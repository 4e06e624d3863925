//! Automatic failover through the binary: `logship broker` processes with `etcdEndpoints` on a
//! real etcd (started by the test) elect a master, take SYNC puts, fail over after kill -9, fence
//! a master stopped past its lease, and take an old master back as a slave that cuts its tail;
//! and a group that does all of it over mutual TLS.
//!
//! The NameServer follows the master role (issue 24): a broker registers again at once when its
//! role changes, the master as broker id 0 claiming its epoch as `stateVersion`; the real Apache
//! NameServer keeps a stale claim from taking the route; and Java producers and consumers on the
//! NameServer follow a kill -9 of the master, no `SEND_OK` lost.
//!
//! Skips without `etcd` on PATH unless `LOGSHIP_REQUIRE_ETCD=1`; the tests with Java programs
//! skip without Java unless `LOGSHIP_REQUIRE_JAVA=1`.

mod etcd_support;
mod process;
mod remoting_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use etcd_support::{EtcdCluster, etcd_available};
use process::{Log, agent, json_reply, ready_addresses, spawn_logship};
use serde_json::Value;
use support::pki;

const TOKEN: &str = "etcd-broker-test-token-0123";
const TOPIC: &str = "FailoverTopic";

/// One `logship broker` in a group on etcd; killed on drop.
struct Node {
    id: i64,
    child: Child,
    stderr: Log,
    args: Vec<String>,
    dir: PathBuf,
    port: u16,
}

impl Node {
    fn start(dir: &Path, id: i64, endpoints: &[String], extra: &[&str]) -> Self {
        let port = quiet_port_pair();
        let mut args: Vec<String> =
            ["broker", "--store", &dir.display().to_string(), "--listen-port", &port.to_string()]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let id_key = format!("brokerId={id}");
        let token = format!("httpAuthToken={TOKEN}");
        let etcd = format!("etcdEndpoints={}", endpoints.join(","));
        let mut more = vec![
            "haHousekeepingInterval=2000",
            "brokerName=broker-a",
            "allAckInSyncStateSet=true",
            "slaveReadEnable=true",
            &id_key,
            &token,
            &etcd,
        ];
        more.extend_from_slice(extra);
        args.extend(process::test_settings(&more));
        Self::spawn(id, args, dir, port)
    }

    fn spawn(id: i64, args: Vec<String>, dir: &Path, port: u16) -> Self {
        let (child, stderr) = spawn_logship(&args, None);
        let mut node = Self { id, child, stderr, args, dir: dir.to_path_buf(), port };
        let start = Instant::now();
        loop {
            let log = node.log();
            if ready_addresses(&log).is_some() && node.get("/status").0 == 200 {
                return node;
            }
            if let Ok(Some(status)) = node.child.try_wait() {
                panic!("broker exited with {status}:\n{log}");
            }
            assert!(start.elapsed() < Duration::from_secs(30), "broker did not start:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Its HTTP API: httpListenPort = listenPort + 2.
    fn http_addr(&self) -> String {
        format!("127.0.0.1:{}", self.port + 2)
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http_addr())
    }

    fn get(&self, path: &str) -> (u16, Value) {
        match agent().get(self.url(path)).header("Authorization", &format!("Bearer {TOKEN}")).call() {
            Ok(r) => json_reply(r),
            Err(_) => (0, Value::Null),
        }
    }

    fn status(&self) -> Value {
        self.get("/status").1
    }

    fn put(&self, body: &str) -> (u16, Value) {
        let request = agent()
            .post(self.url(&format!("/topics/{TOPIC}/messages")))
            .header("Authorization", &format!("Bearer {TOKEN}"));
        match request.send(body) {
            Ok(r) => json_reply(r),
            Err(e) => (0, Value::String(e.to_string())),
        }
    }

    /// `GET /metrics` in the classic text format.
    fn metrics(&self) -> String {
        let auth = format!("Bearer {TOKEN}");
        let mut r = agent().get(self.url("/metrics")).header("Authorization", &auth).call().unwrap();
        assert_eq!(r.status(), 200);
        r.body_mut().read_to_string().unwrap()
    }

    fn is_master(&self) -> bool {
        let s = self.status();
        s["role"] == "SYNC_MASTER" && s["group"]["masterId"] == self.id && s["group"]["leaseOpen"] == true
    }

    fn max_offset(&self) -> u64 {
        self.status()["maxOffset"].as_u64().unwrap_or(0)
    }

    fn commit_log(&self, end: u64) -> Vec<u8> {
        let bytes = std::fs::read(self.dir.join("commitlog").join(format!("{:020}", 0))).unwrap();
        bytes[..end as usize].to_vec()
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn restart(&mut self) {
        self.kill9();
        *self = Self::spawn(self.id, self.args.clone(), &self.dir.clone(), self.port);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Three consecutive free ports (remoting, HA, HTTP) below Linux's ephemeral range (32768 up): a broker binds its HA
/// port again at each promotion, and a port from the ephemeral range may by then be some
/// outgoing connection's local port.
fn quiet_port_pair() -> u16 {
    use std::net::TcpListener;
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let calls = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let seed = u64::from(std::process::id()) ^ (nanos as u64) ^ (calls << 40);
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    for _ in 0..1000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let port = 20_000 + ((x >> 33) % 12_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 1)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 2)).is_ok()
        {
            return port;
        }
    }
    panic!("no three consecutive free ports below 32000");
}

/// Waits (bounded, generously: this is not a timing test) for `check`.
fn eventually(what: &str, logs: &[&Node], mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        if start.elapsed() > Duration::from_secs(60) {
            let logs: Vec<String> =
                logs.iter().map(|n| format!("--- broker {}:\n{}", n.id, n.log())).collect();
            panic!("timed out waiting for {what}\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `promtool check metrics` accepts `text` (skipped without promtool).
fn promtool_passes(text: &str) {
    use std::io::Write;
    if !process::have("promtool", "promtool_passes") {
        return;
    }
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool check metrics failed:\n{said}\n--- metrics:\n{text}");
}

/// The index of the one node that is master (and that the others see as master).
/// Kills node `m` (of three) with SIGKILL and waits until one of the other two is master;
/// returns its index.
fn kill9_and_elect(nodes: &mut [Node], m: usize) -> usize {
    nodes[m].kill9();
    let others: Vec<usize> = (0..3).filter(|&i| i != m).collect();
    let mut new = None;
    eventually("a new master", &[&nodes[others[0]], &nodes[others[1]]], || {
        new = others.iter().copied().find(|&i| nodes[i].is_master());
        new.is_some()
    });
    new.expect("a new master")
}

fn master_of(nodes: &[&Node]) -> Option<usize> {
    let masters: Vec<usize> = (0..nodes.len()).filter(|&i| nodes[i].is_master()).collect();
    (masters.len() == 1).then(|| masters[0])
}

/// Three brokers on one etcd, a master elected and every broker in its sync-state-set.
fn group(dir: &Path, etcd: &EtcdCluster, extra: &[&str]) -> Vec<Node> {
    let endpoints = etcd.endpoints();
    let nodes: Vec<Node> =
        (1..=3).map(|id| Node::start(&dir.join(format!("b{id}")), id, &endpoints, extra)).collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    eventually("a master with all three in its sync-state-set", &refs, || {
        master_of(&refs).is_some_and(|m| {
            let set = nodes[m].status()["group"]["syncStateSet"].clone();
            set == serde_json::json!([1, 2, 3])
        })
    });
    nodes
}

fn put_ok(node: &Node, body: &str) -> Value {
    let (code, reply) = node.put(body);
    assert_eq!(code, 200, "put {body} to broker {}: {reply}\n{}", node.id, node.log());
    assert_eq!(reply["status"], "PUT_OK", "{reply}");
    reply
}

#[test]
fn three_brokers_elect_a_master_and_fail_over_after_kill_9_with_the_old_master_rejoining_as_a_slave() {
    if !etcd_available("three_brokers_elect_a_master_and_fail_over_after_kill_9") {
        return;
    }
    let etcd = EtcdCluster::start(1);
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = group(dir.path(), &etcd, &[]);
    let m = master_of(&nodes.iter().collect::<Vec<_>>()).unwrap();
    let epoch = nodes[m].status()["group"]["masterEpoch"].as_i64().unwrap();
    for i in 0..5 {
        let reply = put_ok(&nodes[m], &format!("first-{i}"));
        assert_eq!((reply["epoch"].as_i64(), reply["brokerId"].as_i64()), (Some(epoch), Some(nodes[m].id)));
    }
    // The group's metrics, as Prometheus reads them.
    let metrics = nodes[m].metrics();
    assert_eq!(process::sample(&metrics, "logship_group_master_epoch{"), Some(epoch as f64), "{metrics}");
    assert_eq!(process::sample(&metrics, "logship_group_lease_open{"), Some(1.0), "{metrics}");
    assert_eq!(process::sample(&metrics, "logship_group_live_members{"), Some(3.0), "{metrics}");
    promtool_passes(&metrics);
    // A put to a slave names the master.
    let slave = (m + 1) % 3;
    let (code, reply) = nodes[slave].put("to a slave");
    assert_eq!(code, 503, "{reply}");
    assert_eq!(reply["status"], "NOT_MASTER", "{reply}");
    assert_eq!(reply["master"]["brokerId"].as_i64(), Some(nodes[m].id), "{reply}");
    assert_eq!(reply["master"]["httpAddress"].as_str(), Some(nodes[m].http_addr().as_str()), "{reply}");
    assert_eq!(reply["master"]["epoch"].as_i64(), Some(epoch), "{reply}");

    nodes[m].kill9();
    let others: Vec<usize> = (0..3).filter(|&i| i != m).collect();
    let mut new = None;
    eventually("a new master taking puts", &[&nodes[others[0]], &nodes[others[1]]], || {
        new = others.iter().copied().find(|&i| nodes[i].is_master());
        new.is_some_and(|n| nodes[n].put("second-0").0 == 200)
    });
    let n = new.unwrap();
    let reply = put_ok(&nodes[n], "second-1");
    let new_epoch = reply["epoch"].as_i64().unwrap();
    assert!(new_epoch > epoch, "epoch {new_epoch} after {epoch}: {reply}");

    // The old master comes back as a slave of the new one and ends byte-identical.
    nodes[m].restart();
    eventually("the old master to follow the new one", &[&nodes[m], &nodes[n]], || {
        let s = nodes[m].status();
        s["role"] == "SLAVE" && s["controller"]["masterBrokerId"].as_i64() == Some(nodes[n].id)
    });
    let reply = put_ok(&nodes[n], "third-0");
    assert_eq!(reply["epoch"].as_i64(), Some(new_epoch));
    assert_identical_with_master(&nodes, m, n);
}

#[test]
fn an_old_master_with_a_tail_nobody_acknowledged_rejoins_and_truncates_it() {
    if !etcd_available("an_old_master_with_a_tail_nobody_acknowledged_rejoins_and_truncates_it") {
        return;
    }
    let etcd = EtcdCluster::start(1);
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = group(dir.path(), &etcd, &["slaveTimeout=500"]);
    let m = master_of(&nodes.iter().collect::<Vec<_>>()).unwrap();
    put_ok(&nodes[m], "acked-0");
    let acked_end = nodes[m].max_offset();
    // Both slaves stop; the master stores a tail that no slave acknowledges, and acknowledges
    // none of it. It dies before it could drop them from its set, and they die before they read
    // the tail from their sockets.
    let others: Vec<usize> = (0..3).filter(|&i| i != m).collect();
    for &i in &others {
        process::signal(nodes[i].child.id(), "-STOP");
    }
    for i in 0..2 {
        let (code, reply) = nodes[m].put(&format!("tail-{i}"));
        assert_ne!(
            reply["status"],
            "PUT_OK",
            "a put no slave has was acknowledged: {reply}\n{}",
            nodes[m].log()
        );
        assert_ne!(code, 200, "{reply}");
        assert_eq!(reply["stored"], true, "{reply}");
    }
    let tail_end = nodes[m].max_offset();
    assert!(tail_end > acked_end);
    nodes[m].kill9();
    for &i in &others {
        nodes[i].restart();
    }
    let mut new = None;
    eventually("a new master among the restarted slaves", &[&nodes[others[0]], &nodes[others[1]]], || {
        new = others.iter().copied().find(|&i| nodes[i].is_master());
        new.is_some_and(|n| nodes[n].put("new-0").0 == 200)
    });
    let n = new.unwrap();
    nodes[m].restart();
    eventually("the old master to follow and cut its tail", &[&nodes[m], &nodes[n]], || {
        let s = nodes[m].status();
        s["role"] == "SLAVE" && s["controller"]["truncations"].as_u64().unwrap_or(0) >= 1
    });
    put_ok(&nodes[n], "new-1");
    assert_identical_with_master(&nodes, m, n);
}

#[test]
fn a_master_stopped_past_its_lease_never_acknowledges_after_the_new_election_and_rejoins() {
    if !etcd_available("a_master_stopped_past_its_lease_never_acknowledges_after_the_new_election") {
        return;
    }
    let etcd = EtcdCluster::start(1);
    let dir = tempfile::tempdir().unwrap();
    let nodes = group(dir.path(), &etcd, &[]);
    let m = master_of(&nodes.iter().collect::<Vec<_>>()).unwrap();
    let epoch = put_ok(&nodes[m], "before")["epoch"].as_i64().unwrap();
    process::signal(nodes[m].child.id(), "-STOP");
    // Puts sent to the stopped master wait in its socket until it runs again.
    let url = nodes[m].url(&format!("/topics/{TOPIC}/messages"));
    let stalled: Vec<_> = (0..3)
        .map(|i| {
            let url = url.clone();
            std::thread::spawn(move || {
                let r = process::agent_with(Duration::from_secs(120), None)
                    .post(&url)
                    .header("Authorization", &format!("Bearer {TOKEN}"))
                    .send(format!("stalled-{i}"));
                r.map(json_reply).unwrap_or((0, Value::Null))
            })
        })
        .collect();
    let others: Vec<usize> = (0..3).filter(|&i| i != m).collect();
    let mut new = None;
    eventually("a new master while the old one is stopped", &[&nodes[others[0]], &nodes[others[1]]], || {
        new = others.iter().copied().find(|&i| nodes[i].is_master());
        new.is_some_and(|n| nodes[n].put("new-0").0 == 200)
    });
    let n = new.unwrap();
    let new_epoch = put_ok(&nodes[n], "new-1")["epoch"].as_i64().unwrap();
    assert!(new_epoch > epoch);
    process::signal(nodes[m].child.id(), "-CONT");
    for t in stalled {
        let (code, reply) = t.join().unwrap();
        assert_ne!(reply["status"], "PUT_OK", "the old master acknowledged after the new election: {reply}");
        assert_ne!(code, 200, "{reply}");
    }
    eventually("the old master to rejoin as a slave of the new one", &[&nodes[m], &nodes[n]], || {
        let s = nodes[m].status();
        s["role"] == "SLAVE" && s["controller"]["masterBrokerId"].as_i64() == Some(nodes[n].id)
    });
    let (code, reply) = nodes[m].put("to the old master");
    assert_eq!((code, reply["status"].as_str()), (503, Some("NOT_MASTER")), "{reply}");
    assert_eq!(reply["master"]["brokerId"].as_i64(), Some(nodes[n].id), "{reply}");
}

#[test]
fn a_master_stopped_with_sigterm_resigns_and_the_group_elects_another() {
    if !etcd_available("a_master_stopped_with_sigterm_resigns_and_the_group_elects_another") {
        return;
    }
    let etcd = EtcdCluster::start(1);
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = group(dir.path(), &etcd, &[]);
    let m = master_of(&nodes.iter().collect::<Vec<_>>()).unwrap();
    put_ok(&nodes[m], "before");
    process::signal(nodes[m].child.id(), "-TERM");
    let exit = nodes[m].child.wait().unwrap();
    assert!(exit.success(), "{exit:?}\n{}", nodes[m].log());
    process::eventually("the clean-stop line", || nodes[m].log().contains("logship stopped cleanly"));
    let log = nodes[m].log();
    assert!(log.contains("etcd lease revoked"), "{log}");
    let others: Vec<usize> = (0..3).filter(|&i| i != m).collect();
    let mut new = None;
    eventually("a new master after the old one resigned", &[&nodes[others[0]], &nodes[others[1]]], || {
        new = others.iter().copied().find(|&i| nodes[i].is_master());
        new.is_some_and(|n| nodes[n].put("after").0 == 200)
    });
    let n = new.unwrap();
    let members = nodes[n].status()["group"]["members"].as_array().unwrap().len();
    assert_eq!(members, 2, "{}", nodes[n].status());
}

/// Benchmark, not a test (`cargo test --features etcd --test etcd_broker -- --ignored --nocapture`):
/// rounds of kill -9 of the master, timing fault to the first `PUT_OK` on the new master, with
/// the default 3 s lease. The killed broker rejoins before the next round.
#[test]
#[ignore = "benchmark: prints failover times"]
fn bench_failover_after_kill_9() {
    if !etcd_available("bench_failover_after_kill_9") {
        return;
    }
    let rounds: usize =
        std::env::var("LOGSHIP_FAILOVER_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let etcd = EtcdCluster::start(1);
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = group(dir.path(), &etcd, &[]);
    let mut times = Vec::new();
    for round in 0..rounds {
        let refs: Vec<&Node> = nodes.iter().collect();
        let mut m = None;
        eventually("a master with all three in its set", &refs, || {
            m = master_of(&refs);
            m.is_some_and(|m| nodes[m].status()["group"]["syncStateSet"] == serde_json::json!([1, 2, 3]))
        });
        let m = m.unwrap();
        put_ok(&nodes[m], &format!("round-{round}"));
        nodes[m].kill9();
        let killed = Instant::now();
        let others: Vec<usize> = (0..3).filter(|&i| i != m).collect();
        let elapsed = loop {
            if others.iter().any(|&i| nodes[i].put("probe").0 == 200) {
                break killed.elapsed();
            }
            assert!(killed.elapsed() < Duration::from_secs(60), "no new master");
            std::thread::sleep(Duration::from_millis(10));
        };
        println!("round {round}: kill -9 of broker {} -> first PUT_OK after {elapsed:?}", nodes[m].id);
        times.push(elapsed);
        nodes[m].restart();
    }
    times.sort();
    println!(
        "failover over {} rounds: min {:?} p50 {:?} max {:?}",
        times.len(),
        times[0],
        times[times.len() / 2],
        times[times.len() - 1]
    );
}

/// Waits until every broker is at master `n`'s end (`m`'s log is shown if it never gets there)
/// and checks that each holds the master's bytes.
fn assert_identical_with_master(nodes: &[Node], m: usize, n: usize) {
    let end = nodes[n].max_offset();
    eventually("every broker at the master's end", &[&nodes[m], &nodes[n]], || {
        nodes.iter().all(|node| node.max_offset() == end)
    });
    let master_log = nodes[n].commit_log(end);
    for node in nodes {
        assert!(node.commit_log(end) == master_log, "broker {} differs from the master", node.id);
    }
}

/// Broker `id`'s TLS settings: `haTlsMode=required`, `haTlsEnable=true`, every broker's name
/// trusted, and a certificate from `ca` naming `broker-<id>` and 127.0.0.1, the host the group
/// record publishes its HA address at: `haTlsServerName` is unset, so a slave expects the host
/// of the master's published address.
fn tls_settings(dir: &Path, ca: &pki::Ca, id: i64) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    let name = format!("broker-{id}.logship.test");
    let identity = ca.issue(&[&name, "127.0.0.1"]);
    let mut settings: Vec<String> = ["haTlsMode=required", "haTlsEnable=true"].map(String::from).to_vec();
    settings
        .push("haTlsReplicaNames=broker-1.logship.test,broker-2.logship.test,broker-3.logship.test".into());
    for (key, file, pem) in [
        ("haTlsCertPath", format!("{name}.pem"), identity.cert.clone()),
        ("haTlsKeyPath", format!("{name}.key"), identity.key.clone()),
        ("haTlsCaPath", "ca.pem".to_string(), ca.pem()),
    ] {
        let path = dir.join(file);
        std::fs::write(&path, pem).unwrap();
        settings.push(format!("{key}={}", path.display()));
    }
    settings
}

/// The replica names of `master`'s slave links, each trusted by its certificate.
fn tls_replicas(master: &Node) -> Vec<String> {
    let status = master.status();
    let links = status["slaves"].as_array().cloned().unwrap_or_default();
    assert!(links.iter().all(|l| l["trusted"] == true), "{status}");
    let mut names: Vec<String> =
        links.iter().filter_map(|l| l["replica"].as_str().map(String::from)).collect();
    names.sort();
    names
}

#[test]
fn a_group_on_etcd_replicates_and_fails_over_over_mutual_tls() {
    if !etcd_available("a_group_on_etcd_replicates_and_fails_over_over_mutual_tls") {
        return;
    }
    let etcd = EtcdCluster::start(1);
    let dir = tempfile::tempdir().unwrap();
    let ca = pki::Ca::new("logship group CA");
    let endpoints = etcd.endpoints();
    let mut nodes: Vec<Node> = (1..=3)
        .map(|id| {
            let settings = tls_settings(&dir.path().join("certs"), &ca, id);
            let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
            Node::start(&dir.path().join(format!("b{id}")), id, &endpoints, &settings)
        })
        .collect();
    let names = |ids: [i64; 2]| ids.map(|id| format!("broker-{id}.logship.test")).to_vec();
    let refs: Vec<&Node> = nodes.iter().collect();
    eventually("a master with all three in its sync-state-set over TLS", &refs, || {
        master_of(&refs)
            .is_some_and(|m| nodes[m].status()["group"]["syncStateSet"] == serde_json::json!([1, 2, 3]))
    });
    let m = master_of(&refs).unwrap();
    for i in 0..5 {
        put_ok(&nodes[m], &format!("first-{i}"));
    }
    let others: Vec<usize> = (0..3).filter(|&i| i != m).collect();
    assert_eq!(tls_replicas(&nodes[m]), names([nodes[others[0]].id, nodes[others[1]].id]));

    nodes[m].kill9();
    let mut new = None;
    eventually("a new master taking puts", &[&nodes[others[0]], &nodes[others[1]]], || {
        new = others.iter().copied().find(|&i| nodes[i].is_master());
        new.is_some_and(|n| nodes[n].put("second-0").0 == 200)
    });
    let n = new.unwrap();
    put_ok(&nodes[n], "second-1");
    // The old master comes back, follows the new one over TLS and ends byte-identical.
    nodes[m].restart();
    eventually("the old master to follow the new one over TLS", &[&nodes[m], &nodes[n]], || {
        let s = nodes[m].status();
        s["role"] == "SLAVE"
            && s["master"]["state"] == "STREAMING"
            && nodes[n].status()["group"]["syncStateSet"] == serde_json::json!([1, 2, 3])
    });
    put_ok(&nodes[n], "third-0");
    assert_identical_with_master(&nodes, m, n);
    let others: Vec<i64> = (0..3).filter(|&i| i != n).map(|i| nodes[i].id).collect();
    assert_eq!(tls_replicas(&nodes[n]), names([others[0], others[1]]));
    assert_eq!(nodes[n].status()["haRefusals"]["plainRefused"], 0, "nobody connected in plain");
}

/// Two brokers on an etcd that requires client certificates (from the test's CA) and has its
/// authentication on, with a `logship` user whose role may write `/logship/` only: the brokers
/// reach it with `etcdTls*`, `etcdUser` and `etcdPasswordFile`, elect a master, take puts, and
/// fail over after kill -9.
#[test]
fn a_group_on_an_etcd_with_client_certificates_and_authentication_elects_and_fails_over() {
    if !etcd_available("a_group_on_an_etcd_with_client_certificates_and_authentication_elects_and_fails_over")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = pki::Ca::new("etcd test CA");
    let server = ca.issue(&["127.0.0.1", "localhost"]);
    let client = ca.issue(&["logship-brokers"]);
    let tls = etcd_support::ServerTls {
        ca_pem: ca.pem(),
        cert_pem: server.cert,
        key_pem: server.key,
        client: (client.cert.clone(), client.key.clone()),
        client_cert_auth: true,
    };
    let etcd = EtcdCluster::start_tls(1, tls);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(enable_auth(&etcd.endpoints(), &ca, &client));
    let files = dir.path().join("etcd-client");
    std::fs::create_dir_all(&files).unwrap();
    for (name, pem) in
        [("ca.pem", ca.pem()), ("client.pem", client.cert.clone()), ("client.key", client.key.clone())]
    {
        std::fs::write(files.join(name), pem).unwrap();
    }
    std::fs::write(files.join("password"), "logship-password-0123\n").unwrap();
    let settings: Vec<String> = vec![
        format!("etcdTlsCaPath={}", files.join("ca.pem").display()),
        format!("etcdTlsCertPath={}", files.join("client.pem").display()),
        format!("etcdTlsKeyPath={}", files.join("client.key").display()),
        "etcdUser=logship".into(),
        format!("etcdPasswordFile={}", files.join("password").display()),
    ];
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let endpoints = etcd.endpoints();
    let mut nodes: Vec<Node> = (1..=2)
        .map(|id| Node::start(&dir.path().join(format!("b{id}")), id, &endpoints, &settings))
        .collect();
    let refs: Vec<&Node> = nodes.iter().collect();
    eventually("a master over TLS with etcd's authentication, both in its set", &refs, || {
        master_of(&refs)
            .is_some_and(|m| nodes[m].status()["group"]["syncStateSet"] == serde_json::json!([1, 2]))
    });
    let m = master_of(&refs).unwrap();
    put_ok(&nodes[m], "over an authenticated etcd");
    assert!(!nodes[m].log().contains("without credentials"), "{}", nodes[m].log());
    nodes[m].kill9();
    let other = 1 - m;
    eventually("the other broker to take over", &[&nodes[other]], || {
        nodes[other].is_master() && nodes[other].put("after the failover").0 == 200
    });
}

/// etcd's authentication on, through a client with `client`'s certificate: `root` (which
/// `auth enable` needs) and `logship`, whose role may read and write `/logship/` only.
async fn enable_auth(endpoints: &[String], ca: &pki::Ca, client: &pki::Identity) {
    let tls = etcd_client::TlsOptions::new()
        .ca_certificate(etcd_client::Certificate::from_pem(ca.pem()))
        .identity(etcd_client::Identity::from_pem(&client.cert, &client.key));
    let options = etcd_client::ConnectOptions::new().with_tls(tls);
    let raw = etcd_client::Client::connect(endpoints, Some(options)).await.unwrap();
    let mut auth = raw.auth_client();
    auth.role_add("root").await.unwrap();
    auth.user_add("root", "root-password-0123", None).await.unwrap();
    auth.user_grant_role("root", "root").await.unwrap();
    auth.role_add("logship").await.unwrap();
    auth.role_grant_permission("logship", etcd_client::Permission::read_write("/logship/").with_prefix())
        .await
        .unwrap();
    auth.user_add("logship", "logship-password-0123", None).await.unwrap();
    auth.user_grant_role("logship", "logship").await.unwrap();
    auth.auth_enable().await.unwrap();
}

/// Writes `value` at `key` in etcd, as an attacker or a careless operator with etcdctl would.
fn etcd_put(endpoints: &[String], key: &str, value: &[u8]) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut raw = etcd_client::Client::connect(endpoints, None).await.unwrap();
        raw.put(key, value, None).await.unwrap();
    });
}

/// The group record's key of these tests' group.
const RECORD_KEY: &str = "/logship/DefaultCluster/broker-a/record";

#[test]
fn forged_group_records_are_refused_logged_and_shown_and_the_master_keeps_its_place() {
    if !etcd_available("forged_group_records_are_refused_logged_and_shown_and_the_master_keeps_its_place") {
        return;
    }
    let etcd = EtcdCluster::start(1);
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = group(dir.path(), &etcd, &[]);
    // A failover first, so that there is an epoch to go back to.
    let first = master_of(&nodes.iter().collect::<Vec<_>>()).unwrap();
    nodes[first].kill9();
    let others: Vec<usize> = (0..3).filter(|&i| i != first).collect();
    eventually("a master of epoch 2", &[&nodes[others[0]], &nodes[others[1]]], || {
        others.iter().any(|&i| nodes[i].is_master() && nodes[i].put("epoch 2").0 == 200)
    });
    nodes[first].restart();
    let refs: Vec<&Node> = nodes.iter().collect();
    eventually("all three in the set again", &refs, || {
        master_of(&refs)
            .is_some_and(|m| nodes[m].status()["group"]["syncStateSet"] == serde_json::json!([1, 2, 3]))
    });
    let m = master_of(&refs).unwrap();
    let epoch = put_ok(&nodes[m], "before the forgeries")["epoch"].as_i64().unwrap();
    assert!(epoch >= 2, "{epoch}");
    let (master_id, slave) = (nodes[m].id, (m + 1) % 3);
    let slave_id = nodes[slave].id;
    let http = |n: &Node| n.http_addr();
    let record = |epoch: i64, master: i64, ha: String, http: String, set: &str, set_epoch: i64| {
        format!(
            "logship-group-record 1\nmasterEpoch={epoch}\nmasterId={master}\nmasterHaAddress={ha}\n\
             masterHttpAddress={http}\nsyncStateSet={set}\nsyncStateSetEpoch={set_epoch}\n"
        )
    };
    let set_epoch = nodes[m].status()["group"]["syncStateSetEpoch"].as_i64().unwrap();
    let master_ha = format!("127.0.0.1:{}", nodes[m].port + 1);
    let forgeries = [
        // Another master in a later epoch, with no election (no mastership key of its own).
        record(
            epoch + 1,
            slave_id,
            format!("127.0.0.1:{}", nodes[slave].port + 1),
            http(&nodes[slave]),
            &slave_id.to_string(),
            set_epoch + 1,
        ),
        // The epoch going back.
        record(epoch - 1, master_id, master_ha.clone(), http(&nodes[m]), "1,2,3", set_epoch + 1),
        // Ids that never joined.
        record(
            epoch,
            master_id,
            master_ha.clone(),
            http(&nodes[m]),
            &format!("{master_id},99,100"),
            set_epoch + 1,
        ),
        // A set without the master: it does not even decode.
        record(epoch, master_id, master_ha, http(&nodes[m]), &slave_id.to_string(), set_epoch + 1),
    ];
    for (i, forged) in forgeries.iter().enumerate() {
        let seen = nodes[m].status()["group"]["recordAnomaliesTotal"].as_u64().unwrap_or(0);
        etcd_put(&etcd.endpoints(), RECORD_KEY, forged.as_bytes());
        eventually("the forgery to be seen and refused", &[&nodes[m]], || {
            nodes[m].status()["group"]["recordAnomaliesTotal"].as_u64().unwrap_or(0) > seen
        });
        let status = nodes[m].status();
        assert!(nodes[m].is_master(), "forgery {i}: the master stepped down: {status}\n{}", nodes[m].log());
        let reply = put_ok(&nodes[m], &format!("after forgery {i}"));
        assert_eq!(reply["epoch"].as_i64(), Some(epoch), "{reply}");
        // The master, which holds the mastership, restores the record it wrote last; every
        // broker trusts the record again and still follows it.
        eventually("the record to be restored and trusted everywhere", &[&nodes[m]], || {
            etcd_get(&etcd.endpoints(), RECORD_KEY).is_some_and(|r| {
                r.contains(&format!("masterId={master_id}\n"))
                    && r.contains(&format!("masterEpoch={epoch}\n"))
            }) && nodes.iter().all(|n| n.status()["group"]["recordTrusted"] == true)
        });
        for n in nodes.iter().filter(|n| n.id != master_id) {
            let s = n.status();
            assert_eq!(s["controller"]["masterBrokerId"].as_i64(), Some(master_id), "forgery {i}: {s}");
        }
    }
    let log = nodes[m].log();
    let errors =
        log.lines().filter(|l| l.contains(" ERROR ") && l.contains("group record is refused")).count();
    assert!(errors >= forgeries.len(), "every forgery is logged at ERROR:\n{log}");
    assert!(log.contains("restored the group record"), "{log}");
    let metrics = nodes[m].metrics();
    let anomalies = process::sample(&metrics, "logship_group_record_anomalies_total{");
    assert!(anomalies.is_some_and(|n| n >= forgeries.len() as f64), "{metrics}");
    assert_eq!(process::sample(&metrics, "logship_group_record_trusted{"), Some(1.0), "{metrics}");
    promtool_passes(&metrics);

    // The master dies, and the record is forged before its lease expires (nobody restores it
    // now): the others elect from the set they trust.
    nodes[m].kill9();
    etcd_put(&etcd.endpoints(), RECORD_KEY, forgeries[3].as_bytes());
    let others: Vec<usize> = (0..3).filter(|&i| i != m).collect();
    let mut new = None;
    eventually("a new master despite the forged record", &[&nodes[others[0]], &nodes[others[1]]], || {
        new = others.iter().copied().find(|&i| nodes[i].is_master());
        new.is_some_and(|n| nodes[n].put("after the failover").0 == 200)
    });
    let n = new.unwrap();
    let group = nodes[n].status()["group"].clone();
    assert_eq!(group["recordTrusted"], true, "the election wrote a record that is trusted again: {group}");
    assert!(group["masterEpoch"].as_i64().unwrap() > epoch, "{group}");
}

/// The value at `key` in etcd, as text.
fn etcd_get(endpoints: &[String], key: &str) -> Option<String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut raw = etcd_client::Client::connect(endpoints, None).await.ok()?;
        let resp = raw.get(key, None).await.ok()?;
        resp.kvs().first().map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
    })
}

/// A mastership key rewritten without a lease (etcdctl put, no --lease) does not block the
/// failover after the master is killed -9.
#[test]
fn a_mastership_key_without_a_lease_does_not_block_failover_after_kill_9() {
    if !etcd_available("a_mastership_key_without_a_lease_does_not_block_failover_after_kill_9") {
        return;
    }
    let etcd = EtcdCluster::start(1);
    let dir = tempfile::tempdir().unwrap();
    let mut nodes = group(dir.path(), &etcd, &[]);
    let m = master_of(&nodes.iter().collect::<Vec<_>>()).unwrap();
    let epoch = put_ok(&nodes[m], "before")["epoch"].as_i64().unwrap();
    let value = format!("{} {epoch}", nodes[m].id);
    etcd_put(&etcd.endpoints(), "/logship/DefaultCluster/broker-a/master", value.as_bytes());
    nodes[m].kill9();
    let others: Vec<usize> = (0..3).filter(|&i| i != m).collect();
    let mut new = None;
    eventually(
        "a new master after kill -9 despite a leaseless mastership key",
        &[&nodes[others[0]], &nodes[others[1]]],
        || {
            new = others.iter().copied().find(|&i| nodes[i].is_master());
            new.is_some_and(|n| nodes[n].put("after").0 == 200)
        },
    );
}

/// With etcd lost for good, the role calls are refused (the coordinator owns the roles) until
/// one says `overrideCoordinator`: that broker then leaves automatic failover and takes its
/// role from the calls, and puts are no longer checked against a lease.
#[test]
fn role_calls_are_refused_under_etcd_unless_they_override_the_coordinator() {
    if !etcd_available("role_calls_are_refused_under_etcd_unless_they_override_the_coordinator") {
        return;
    }
    let mut etcd = EtcdCluster::start(1);
    let dir = tempfile::tempdir().unwrap();
    let nodes = group(dir.path(), &etcd, &[]);
    let m = master_of(&nodes.iter().collect::<Vec<_>>()).unwrap();
    let epoch = put_ok(&nodes[m], "before etcd is lost")["epoch"].as_i64().unwrap();
    let admin = |n: &Node, path: &str, body: serde_json::Value| {
        let r = agent()
            .post(n.url(path))
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .send(body.to_string());
        r.map(json_reply).unwrap_or((0, Value::Null))
    };
    let promote = serde_json::json!({ "epoch": epoch + 1, "syncStateSet": [nodes[m].id] });
    let (code, reply) = admin(&nodes[m], "/ha/changeToMaster", promote.clone());
    assert_eq!(code, 409, "{reply}");
    assert!(reply["error"].as_str().unwrap().contains("overrideCoordinator"), "{reply}");

    // etcd is lost for good: the master's lease guard closes and it acknowledges nothing.
    etcd.kill(0);
    eventually("the master to stop acknowledging", &[&nodes[m]], || nodes[m].put("no etcd").0 == 503);
    let mut promote = promote;
    promote["overrideCoordinator"] = serde_json::json!(true);
    let (code, reply) = admin(&nodes[m], "/ha/changeToMaster", promote);
    assert_eq!(code, 200, "{reply}\n{}", nodes[m].log());
    let status = nodes[m].status();
    assert_eq!(status["group"]["left"], true, "{status}");
    assert!(nodes[m].log().contains("overrideCoordinator"), "logged: {}", nodes[m].log());
    let reply = put_ok(&nodes[m], "acknowledged by hand, without etcd");
    assert_eq!(reply["epoch"].as_i64(), Some(epoch + 1), "{reply}");
    // Another broker is told to follow it, also overriding its coordinator.
    let s = (m + 1) % 3;
    let follow = serde_json::json!({
        "masterAddress": format!("127.0.0.1:{}", nodes[m].port + 1),
        "masterBrokerId": nodes[m].id,
        "epoch": epoch + 1,
        "overrideCoordinator": true,
    });
    let (code, reply) = admin(&nodes[s], "/ha/changeToSlave", follow);
    assert_eq!(code, 200, "{reply}\n{}", nodes[s].log());
    eventually("the other broker to stream from the master set by hand", &[&nodes[s]], || {
        nodes[s].status()["master"]["state"] == "STREAMING"
    });
}

// ---- the NameServer follows the master role (issue 24) ------------------------------------

/// A registration a NameServer received: who claimed which broker id, with which
/// `stateVersion`, when.
#[derive(Debug)]
struct Claim {
    at: Instant,
    broker_addr: String,
    broker_id: i64,
    state_version: i64,
}

/// Every `REGISTER_BROKER` `ns` received so far.
fn claims(ns: &remoting_support::FakeNameServer) -> Vec<Claim> {
    let code = logship_remoting::RequestCode::REGISTER_BROKER.0;
    let received = ns.received.lock().unwrap();
    received
        .iter()
        .filter(|(_, c)| c.code == code)
        .map(|(at, c)| {
            let body: Value = serde_json::from_slice(&c.body).expect("a JSON RegisterBrokerBody");
            Claim {
                at: *at,
                broker_addr: c.ext_fields["brokerAddr"].clone(),
                broker_id: c.ext_fields["brokerId"].parse().unwrap(),
                state_version: body["topicConfigSerializeWrapper"]["dataVersion"]["stateVersion"]
                    .as_i64()
                    .unwrap_or(-1),
            }
        })
        .collect()
}

impl Node {
    /// The remoting address it registers (`brokerIP1:listenPort`).
    fn remoting_addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// The longest registration period Java allows: registrations before one period passed since a
/// broker started were sent by a change, not by the period.
const PERIOD: Duration = Duration::from_secs(60);

/// On etcd, a broker without a role does not register; when it gets one it registers at once
/// (not one `registerNameServerPeriod` later): the master as broker id 0, the slaves as their
/// own ids, all claiming the master epoch as `stateVersion`. After kill -9 the new master
/// registers at once as 0 with the new epoch, and the old master, restarted, as a slave.
#[test]
fn a_broker_registers_at_once_when_its_role_changes_the_master_as_0_with_its_epoch() {
    if !etcd_available("a_broker_registers_at_once_when_its_role_changes_the_master_as_0_with_its_epoch") {
        return;
    }
    let etcd = EtcdCluster::start(1);
    let ns = remoting_support::FakeNameServer::start(remoting_support::NameServerMode::Answer);
    let dir = tempfile::tempdir().unwrap();
    let namesrv = format!("namesrvAddr={}", ns.addr);
    let started = Instant::now();
    let mut nodes = group(dir.path(), &etcd, &[&namesrv, "registerNameServerPeriod=60000"]);
    let m = master_of(&nodes.iter().collect::<Vec<_>>()).unwrap();
    let epoch = nodes[m].status()["group"]["masterEpoch"].as_i64().unwrap();
    let as_role = |n: &Node, master: bool| if master { 0 } else { n.id };
    let refs: Vec<&Node> = nodes.iter().collect();
    eventually("each broker registered as its role with the epoch", &refs, || {
        let seen = claims(&ns);
        nodes.iter().enumerate().all(|(i, n)| {
            seen.iter().any(|c| {
                c.broker_addr == n.remoting_addr()
                    && c.broker_id == as_role(n, i == m)
                    && c.state_version == epoch
            })
        })
    });
    for (i, n) in nodes.iter().enumerate() {
        let seen = claims(&ns);
        let first = seen.iter().find(|c| c.broker_addr == n.remoting_addr()).unwrap();
        assert_eq!(
            (first.broker_id, first.state_version),
            (as_role(n, i == m), epoch),
            "broker {}'s first registration is as its role: {seen:?}",
            n.id
        );
        assert!(
            first.at < started + PERIOD,
            "broker {} registered when it got its role, not a period after it started: {seen:?}",
            n.id
        );
    }

    let n = kill9_and_elect(&mut nodes, m);
    let new_epoch = nodes[n].status()["group"]["masterEpoch"].as_i64().unwrap();
    assert!(new_epoch > epoch);
    let new_addr = nodes[n].remoting_addr();
    eventually("the new master registered as 0 with the new epoch", &[&nodes[n]], || {
        claims(&ns)
            .iter()
            .any(|c| c.broker_addr == new_addr && c.broker_id == 0 && c.state_version == new_epoch)
    });
    let seen = claims(&ns);
    let promoted = seen.iter().position(|c| c.broker_addr == new_addr && c.broker_id == 0).unwrap();
    let before = seen[..promoted].iter().rev().find(|c| c.broker_addr == new_addr).unwrap();
    assert_eq!((before.broker_id, before.state_version), (nodes[n].id, epoch), "{seen:?}");
    assert!(
        seen[promoted].at < before.at + PERIOD,
        "the promotion registered at once, not at the next period: {seen:?}"
    );

    // The old master comes back as a slave: it registers as its own id with the new epoch.
    let restarted = Instant::now();
    nodes[m].restart();
    let old_addr = nodes[m].remoting_addr();
    let old_id = nodes[m].id;
    eventually("the old master registered as a slave", &[&nodes[m]], || {
        claims(&ns).iter().any(|c| c.broker_addr == old_addr && c.at > restarted)
    });
    let seen = claims(&ns);
    let back = seen.iter().find(|c| c.broker_addr == old_addr && c.at > restarted).unwrap();
    assert_eq!((back.broker_id, back.state_version), (old_id, new_epoch), "{seen:?}");
    assert!(back.at < restarted + PERIOD, "it registered when it got its role: {seen:?}");
}

/// The route the NameServer at `ns` gives for `topic`: broker id to address of its group.
fn route_addrs(ns: std::net::SocketAddr, topic: &str) -> std::collections::BTreeMap<i64, String> {
    use logship_remoting::body::{JsonBody, TopicRouteData};
    let mut c = remoting_support::Client::connect(ns);
    let r = c.call(
        logship_remoting::RemotingCommand::request(logship_remoting::RequestCode::GET_ROUTEINFO_BY_TOPIC)
            .with_version(513)
            .with_ext_field("topic", topic)
            .with_ext_field("acceptStandardJsonOnly", "true"),
    );
    assert_eq!(r.code, 0, "the route of {topic}: {:?}", r.remark);
    let route = TopicRouteData::decode(&r.body).unwrap();
    route.broker_datas.into_iter().next().map(|b| b.broker_addrs).unwrap_or_default()
}

/// The real Apache NameServer (5.5.0) keeps broker id 0 with the broker that claimed it with the
/// higher `stateVersion`: logship's registration of a stale master (a lower epoch) does not take
/// the route from the current one, and a newer epoch does. The claims are logship's own
/// `REGISTER_BROKER` requests, each on its own connection kept open (the NameServer forgets a
/// broker whose connection closes).
#[test]
fn a_stale_claim_with_a_lower_state_version_does_not_take_the_route_from_the_master() {
    use logship_broker::register::{parse_register_response, register_broker_request};
    use logship_remoting::body::{DataVersion, TopicConfig, TopicConfigSerializeWrapper};
    let test = "a_stale_claim_with_a_lower_state_version_does_not_take_the_route_from_the_master";
    let Some(apps) = support::apps::java_apps(support::apps::CLIENT_5, test) else { return };
    let namesrv = support::apps::Namesrv::start(&apps, &[]);
    let ns: std::net::SocketAddr = namesrv.addr().parse().unwrap();
    let topic = "StaleClaimTopic";
    let mut table = std::collections::BTreeMap::new();
    table.insert("TBW102".to_string(), TopicConfig::with_queues("TBW102", 8, 8, 7));
    table.insert(topic.to_string(), TopicConfig::with_queues(topic, 4, 4, 6));
    let topics =
        TopicConfigSerializeWrapper::new(table, DataVersion { counter: 1, state_version: 0, timestamp: 1 });
    // Addresses nobody listens on: the NameServer never connects to a broker.
    let (a, b) = (support::apps::free_port(), support::apps::free_port());
    let mut connections = std::collections::BTreeMap::new();
    let mut claim = |port: u16, epoch: i64| {
        let mut settings = logship_broker::settings::BrokerSettings::default();
        settings.broker_name = "broker-a".into();
        settings.broker_cluster_name = "DefaultCluster".into();
        settings.listen_port = port;
        let request =
            register_broker_request(&settings, 0, &format!("127.0.0.1:{}", port + 1), &topics, Some(epoch));
        let c = connections.entry(port).or_insert_with(|| remoting_support::Client::connect(ns));
        parse_register_response(&c.call(request)).unwrap();
    };
    let addr = |port: u16| format!("127.0.0.1:{port}");
    claim(a, 5);
    assert_eq!(route_addrs(ns, topic).get(&0), Some(&addr(a)));
    claim(b, 4);
    assert_eq!(
        route_addrs(ns, topic).get(&0),
        Some(&addr(a)),
        "a claim of epoch 4 does not take it from epoch 5"
    );
    claim(b, 6);
    assert_eq!(route_addrs(ns, topic).get(&0), Some(&addr(b)), "epoch 6 takes it");
    claim(a, 5);
    let route = route_addrs(ns, topic);
    assert_eq!(
        route.get(&0),
        Some(&addr(b)),
        "the old master's next registration does not take it back: {route:?}"
    );
    assert!(
        !route.values().any(|v| *v == addr(a)),
        "the refused claimant is not in the route at all: {route:?}"
    );
    drop(connections);
    drop(namesrv);
}

/// The broker address (`ip:port`) an offset message id names (its first 16 hex digits: IPv4
/// and port).
fn offset_msg_id_host(id: &str) -> Option<String> {
    if id.len() != 32 {
        return None;
    }
    let ip = u32::from_str_radix(&id[..8], 16).ok()?;
    let port = u32::from_str_radix(&id[8..16], 16).ok()?;
    Some(format!("{}:{port}", std::net::Ipv4Addr::from(ip)))
}

/// The `SEND_OK` lines of a producer: (msgId, broker address, atMs).
fn send_oks(lines: &[Value]) -> Vec<(String, String, u64)> {
    support::apps::events(lines, "send")
        .into_iter()
        .filter(|v| v["status"] == "SEND_OK")
        .map(|v| {
            let id = v["msgId"].as_str().unwrap().to_string();
            let host = v["offsetMsgId"].as_str().and_then(offset_msg_id_host).unwrap_or_default();
            (id, host, v["atMs"].as_u64().unwrap())
        })
        .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Every topic a broker at `addr` holds (`GET_ALL_TOPIC_CONFIG`).
fn topics_of(addr: &str) -> Vec<String> {
    use logship_remoting::body::{JsonBody, TopicConfigSerializeWrapper};
    let mut c = remoting_support::Client::connect(addr.parse().unwrap());
    let r = c.call(logship_remoting::RemotingCommand::request(
        logship_remoting::RequestCode::GET_ALL_TOPIC_CONFIG,
    ));
    TopicConfigSerializeWrapper::decode(&r.body)
        .map(|w| w.topic_config_table.into_keys().collect())
        .unwrap_or_default()
}

/// How often the short-refresh clients read their routes (`pollNameServerInterval`).
const SHORT_REFRESH_MS: &str = "2000";

/// Issue 24, scenario 3: three logship brokers on etcd registered with the real Apache
/// NameServer, two Java 5.5.0 producers (one with the default route refresh of 30 s, one with
/// 2 s) and a push consumer (2 s) running. kill -9 of the master: both producers resume on the
/// new master once their routes refresh, and every `SEND_OK` is consumed (exactly once, or
/// counted as a duplicate); none is lost. Prints the counts and, for each producer, the window
/// from the kill to its first `SEND_OK` on the new master.
#[test]
fn java_clients_follow_a_kill_9_of_the_master_on_etcd_through_the_name_server_losing_no_send_ok() {
    let test = "java_clients_follow_a_kill_9_of_the_master_on_etcd_through_the_name_server_losing_no_send_ok";
    if !etcd_available(test) {
        return;
    }
    let Some(apps) = support::apps::java_apps(support::apps::CLIENT_5, test) else { return };
    let began = Instant::now();
    let apps = apps.with_jvm_options(&["-Xmx192m"]);
    let topic = "EtcdFailoverTopic";
    let etcd = EtcdCluster::start(1);
    let namesrv = support::apps::Namesrv::start(&apps, &[]);
    let ns = namesrv.addr();
    let dir = tempfile::tempdir().unwrap();
    let ns_set = format!("namesrvAddr={ns}");
    let mut nodes = group(dir.path(), &etcd, &[&ns_set, "slaveSyncInterval=1000"]);
    let m = master_of(&nodes.iter().collect::<Vec<_>>()).unwrap();
    let producer = |instance: &str, refresh: Option<&str>| {
        let mut args = vec!["--namesrv", &ns, "--topic", topic, "--instance", instance];
        args.extend(["--until-stopped", "--interval-ms", "20", "--timeout-ms", "3000"]);
        if let Some(ms) = refresh {
            args.extend(["--poll-namesrv-ms", ms]);
        }
        apps.run("Produce", &args)
    };
    // The JVMs start side by side.
    let mut consumer = apps.run(
        "PushConsume",
        &[
            "--namesrv",
            &ns,
            "--topic",
            topic,
            "--group",
            "etcd_failover_group",
            "--poll-namesrv-ms",
            SHORT_REFRESH_MS,
        ],
    );
    let mut default_refresh = producer("default-refresh", None);
    let mut short_refresh = producer("short-refresh", Some(SHORT_REFRESH_MS));
    for app in [&mut consumer, &mut default_refresh, &mut short_refresh] {
        app.wait_event("ready", support::apps::READY_PATIENCE);
    }
    for p in [&mut default_refresh, &mut short_refresh] {
        p.wait_event("send", support::apps::READY_PATIENCE);
    }
    // The slaves carry the topic (their metadata sync), so that the next master serves it.
    let refs: Vec<&Node> = nodes.iter().collect();
    eventually("the slaves to carry the topic", &refs, || {
        nodes.iter().all(|n| topics_of(&n.remoting_addr()).iter().any(|t| t == topic))
    });
    eventually("the consumer to consume", &refs, || !consumer.events("msg").is_empty());
    std::thread::sleep(Duration::from_secs(2));

    let old_addr = nodes[m].remoting_addr();
    let killed_ms = now_ms();
    let n = kill9_and_elect(&mut nodes, m);
    let new_addr = nodes[n].remoting_addr();
    let first_on_new = |p: &support::apps::App| {
        send_oks(&p.lines())
            .into_iter()
            .find(|(_, host, at)| *host == new_addr && *at >= killed_ms)
            .map(|(_, _, at)| at)
    };
    // The default refresh is 30 s: wait up to three of them.
    let start = Instant::now();
    while first_on_new(&default_refresh).is_none() || first_on_new(&short_refresh).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "the producers did not resume on the new master {new_addr}:\n{}\n{}",
            support::apps::tail(&default_refresh.stderr(), 30),
            support::apps::tail(&short_refresh.stderr(), 30)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The NameServer names the new master as broker id 0 and the other survivor as its own id;
    // the killed master is gone from the route.
    let route = route_addrs(ns.parse().unwrap(), topic);
    let survivor = (0..3).find(|&i| i != m && i != n).unwrap();
    assert_eq!(route.get(&0), Some(&new_addr), "{route:?}");
    assert_eq!(route.get(&nodes[survivor].id), Some(&nodes[survivor].remoting_addr()), "{route:?}");
    assert!(!route.values().any(|a| *a == old_addr), "{route:?}");
    std::thread::sleep(Duration::from_secs(2));
    let windows: Vec<u64> =
        [&default_refresh, &short_refresh].iter().map(|p| first_on_new(p).unwrap() - killed_ms).collect();
    let mut sent = 0;
    let mut errors = 0;
    let mut acked = Vec::new();
    let mut other_statuses = std::collections::BTreeMap::<String, u64>::new();
    for p in [default_refresh, short_refresh] {
        let lines = p.stop(Duration::from_secs(60));
        let summary = support::apps::summary(&lines).clone();
        sent += summary["messages"].as_u64().unwrap() + summary["errors"].as_u64().unwrap();
        errors += summary["errors"].as_u64().unwrap();
        for (status, count) in support::apps::send_statuses(&lines) {
            if status != "SEND_OK" {
                *other_statuses.entry(status).or_default() += count;
            }
        }
        for (id, host, at) in send_oks(&lines) {
            assert!(
                host == old_addr && at <= killed_ms + 1000 || host == new_addr,
                "a SEND_OK from {host} at {at} (kill at {killed_ms}; old master {old_addr}, new {new_addr})"
            );
            acked.push(id);
        }
    }
    let acked_set: std::collections::BTreeSet<&String> = acked.iter().collect();
    assert_eq!(acked_set.len(), acked.len(), "every SEND_OK has its own msgId");
    // Everything acknowledged is consumed.
    let consumed_ids = |c: &support::apps::App| -> Vec<String> {
        c.events("msg")
            .iter()
            .filter(|v| v["answer"] == "SUCCESS")
            .map(|v| v["msgId"].as_str().unwrap().to_string())
            .collect()
    };
    let start = Instant::now();
    loop {
        let seen: std::collections::BTreeSet<String> = consumed_ids(&consumer).into_iter().collect();
        let missing = acked_set.iter().filter(|id| !seen.contains(**id)).count();
        if missing == 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{missing} of {} SEND_OK never consumed:\n{}",
            acked.len(),
            support::apps::tail(&consumer.stderr(), 30)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let lines = consumer.stop(Duration::from_secs(60));
    let ids: Vec<String> = support::apps::events(&lines, "msg")
        .iter()
        .filter(|v| v["answer"] == "SUCCESS")
        .map(|v| v["msgId"].as_str().unwrap().to_string())
        .collect();
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    let duplicated = ids.len() - distinct.len();
    let lost = acked_set.iter().filter(|id| !distinct.contains(**id)).count();
    let unacked_consumed = distinct.iter().filter(|id| !acked_set.contains(**id)).count();
    eprintln!(
        "{test}: sent {sent}, SEND_OK {}, other statuses {other_statuses:?}, send errors {errors}; consumed {} \
         distinct ({} deliveries: {duplicated} duplicated, {unacked_consumed} not acknowledged to the producer), \
         lost {lost}; kill -9 to the first SEND_OK on the new master: {} ms with the default route refresh \
         (30 s), {} ms with {SHORT_REFRESH_MS} ms; test {:?}",
        acked.len(),
        distinct.len(),
        ids.len(),
        windows[0],
        windows[1],
        began.elapsed()
    );
    assert_eq!(lost, 0, "every SEND_OK is consumed");
    drop(nodes);
    drop(namesrv);
}
