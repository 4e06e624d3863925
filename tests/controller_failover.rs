//! Controller mode through the binary: `logship broker` processes told their roles over HTTP
//! (`POST /ha/changeToMaster`, `POST /ha/changeToSlave`), as RocketMQ's controller tells them,
//! through a failover with a divergent tail, a rejoin that truncates it, and an empty third
//! broker; and the admin calls' refusals. And the same over mutual TLS, one set of `haTls*`
//! keys serving a broker as master and as slave.

#[path = "support/pki.rs"]
mod pki;
mod process;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use process::{Log, agent, eventually, free_port_pair, json_reply, ready_addresses, sample, spawn_logship};
use serde_json::{Value, json};

const TOKEN: &str = "controller-test-token-0123";

/// One `logship broker` process, every request with the bearer token; killed on drop.
struct Node {
    child: Child,
    stderr: Log,
    args: Vec<String>,
    dir: PathBuf,
    port: u16,
}

impl Node {
    /// `logship broker` as broker `id` in `dir`, with `extra` settings.
    fn start(dir: &Path, id: u32, extra: &[&str]) -> Self {
        let port = free_port_pair();
        let mut args: Vec<String> =
            ["broker", "--store", &dir.display().to_string(), "--listen-port", &port.to_string()]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let id = format!("brokerId={id}");
        let token = format!("httpAuthToken={TOKEN}");
        let mut more = vec!["haHousekeepingInterval=2000", &id, &token];
        more.extend_from_slice(extra);
        args.extend(process::test_settings(&more));
        Self::spawn(args, dir, port)
    }

    fn spawn(args: Vec<String>, dir: &Path, port: u16) -> Self {
        let (child, stderr) = spawn_logship(&args, None);
        let mut node = Self { child, stderr, args, dir: dir.to_path_buf(), port };
        let start = Instant::now();
        loop {
            let log = node.log();
            if ready_addresses(&log).is_some() && node.get("/status").0 == 200 {
                return node;
            }
            if let Ok(Some(status)) = node.child.try_wait() {
                panic!("broker exited with {status}:\n{log}");
            }
            assert!(start.elapsed() < Duration::from_secs(20), "broker did not start:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Its HTTP API: httpListenPort = listenPort + 2.
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port + 2)
    }

    /// Its HA port: listenPort + 1.
    fn ha_addr(&self) -> String {
        format!("127.0.0.1:{}", self.port + 1)
    }

    fn get(&self, path: &str) -> (u16, Value) {
        let auth = format!("Bearer {TOKEN}");
        match agent().get(self.url(path)).header("Authorization", &auth).call() {
            Ok(r) => json_reply(r),
            Err(_) => (0, Value::Null),
        }
    }

    fn post(&self, path: &str, body: &str, token: Option<&str>) -> (u16, Value) {
        let mut request = agent().post(self.url(path));
        if let Some(t) = token {
            request = request.header("Authorization", &format!("Bearer {t}"));
        }
        match request.send(body) {
            Ok(r) => json_reply(r),
            Err(e) => panic!("POST {path} failed: {e}\n{}", self.log()),
        }
    }

    /// `GET /metrics` in the classic text format.
    fn metrics(&self) -> String {
        let auth = format!("Bearer {TOKEN}");
        let mut r = agent().get(self.url("/metrics")).header("Authorization", &auth).call().unwrap();
        assert_eq!(r.status(), 200);
        r.body_mut().read_to_string().unwrap()
    }

    fn status(&self) -> Value {
        let (code, status) = self.get("/status");
        assert_eq!(code, 200, "GET /status: {status}\n{}", self.log());
        status
    }

    fn max_offset(&self) -> u64 {
        self.status()["maxOffset"].as_u64().unwrap()
    }

    /// The bodies its consume queue 0 of the test topic serves.
    fn bodies(&self) -> Vec<String> {
        let (code, read) = self.get("/topics/FailoverTopic/queues/0/messages?offset=0&max=100");
        assert_eq!(code, 200, "{read}");
        read["messages"].as_array().unwrap().iter().map(|m| m["body"].as_str().unwrap().to_string()).collect()
    }

    fn put(&self, body: &str) -> (u16, Value) {
        self.post("/topics/FailoverTopic/messages", body, Some(TOKEN))
    }

    fn promote(&self, epoch: i32, set: &[i64]) -> (u16, Value) {
        let body = json!({ "epoch": epoch, "syncStateSet": set }).to_string();
        self.post("/ha/changeToMaster", &body, Some(TOKEN))
    }

    fn follow(&self, master: &Self, master_id: i64, epoch: i32) -> (u16, Value) {
        let body = json!({ "masterAddress": master.ha_addr(), "masterBrokerId": master_id, "epoch": epoch });
        self.post("/ha/changeToSlave", &body.to_string(), Some(TOKEN))
    }

    /// The epoch list its status shows.
    fn epochs(&self) -> Value {
        self.status()["controller"]["epochs"].clone()
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills it and starts it again over the same store, with no role.
    fn restart(&mut self) {
        self.kill9();
        *self = Self::spawn(self.args.clone(), &self.dir.clone(), self.port);
    }

    /// The commit log's bytes below `end` (every test message fits the first 1 MiB segment).
    fn commit_log(&self, end: u64) -> Vec<u8> {
        let bytes = std::fs::read(self.dir.join("commitlog").join(format!("{:020}", 0))).unwrap();
        bytes[..end as usize].to_vec()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Controller-mode settings of every broker here: a SYNC put waits for the whole sync-state-set.
const SYNC_ALL: &[&str] = &["allAckInSyncStateSet=true", "slaveReadEnable=true"];

#[test]
fn a_controller_mode_broker_waits_for_its_role_and_puts_are_refused_until_then() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Node::start(&dir.path().join("a"), 1, SYNC_ALL);
    let status = a.status();
    assert_eq!(status["role"], "NONE", "{status}");
    assert_eq!(status["controller"]["brokerId"], 1, "{status}");
    let (code, body) = a.put("too early");
    assert_eq!(code, 503, "{body}");
    assert_eq!(
        (body["status"].as_str(), body["stored"].as_bool()),
        (Some("SERVICE_NOT_AVAILABLE"), Some(false))
    );
    assert!(body["error"].as_str().unwrap().contains("no HA role"), "{body}");
    let metrics = a.metrics();
    assert_eq!(sample(&metrics, "logship_controller_has_role{"), Some(0.0), "{metrics}");
    promtool_passes(&metrics);
    // Told, it takes puts; SIGTERM stops it cleanly.
    assert_eq!(a.promote(1, &[]).0, 200);
    assert_eq!(a.put("now").0, 200);
    process::signal(a.child.id(), "-TERM");
    let start = Instant::now();
    let exit = loop {
        if let Some(status) = a.child.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < process::EXIT_PATIENCE, "no exit after SIGTERM:\n{}", a.log());
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit:?}\n{}", a.log());
    // The log is read by a background thread: it may lag the exit.
    eventually("the clean-stop line", || a.log().contains("logship stopped cleanly"));
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

/// A slave told to follow a master elected in epoch 1 refuses one that announces epoch 2 (a
/// stale order, or a rogue master) before it writes anything, and says why in `/status` and
/// `/metrics`; told the right epoch, it follows.
#[test]
fn a_slave_refuses_a_master_whose_epoch_it_was_not_told_and_shows_why() {
    let dir = tempfile::tempdir().unwrap();
    let a = Node::start(&dir.path().join("a"), 1, &[]);
    let b = Node::start(&dir.path().join("b"), 2, &[]);
    assert_eq!(a.promote(1, &[]).0, 200);
    assert_eq!(a.promote(2, &[]).0, 200, "epochs advance one at a time");
    assert_eq!(a.put("in epoch 2").0, 200);
    assert_eq!(b.follow(&a, 1, 1).0, 200, "{}", b.log());
    eventually("the refusal in /status", || {
        b.status()["controller"]["refusals"]["epochAboveElected"].as_u64().unwrap_or(0) >= 1
    });
    let refusals = b.status()["controller"]["refusals"].clone();
    let current = refusals["current"].as_str().unwrap_or_default().to_string();
    assert!(current.contains("above the epoch 1"), "{refusals}");
    assert_eq!(b.max_offset(), 0, "nothing written");
    assert_eq!(b.epochs(), json!([]), "no epoch recorded");
    let metrics = b.metrics();
    let refused = sample(&metrics, "logship_follow_refusals_total{").is_some()
        && metrics.lines().any(|l| {
            l.starts_with("logship_follow_refusals_total{")
                && l.contains("reason=\"epoch_above_elected\"")
                && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).is_some_and(|v| v >= 1.0)
        });
    assert!(refused, "{metrics}");
    assert_eq!(sample(&metrics, "logship_follow_refused{"), Some(1.0), "{metrics}");
    promtool_passes(&metrics);
    // Told the epoch the master was elected in, it follows.
    assert_eq!(b.follow(&a, 1, 2).0, 200, "{}", b.log());
    eventually("b to follow", || b.max_offset() == a.max_offset());
    eventually("the refusal to clear", || b.status()["controller"]["refusals"]["current"].is_null());
    assert_eq!(sample(&b.metrics(), "logship_follow_refused{"), Some(0.0));
}

/// A controller-mode broker whose store holds data but lost `epochFileCheckpoint` and its
/// `.bak` refuses to start, naming both files and the ways out; told to adopt the log at its
/// exact end, it starts.
#[test]
fn a_broker_whose_epoch_files_are_gone_refuses_to_start_naming_both_and_the_ways_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("a");
    let mut a = Node::start(&store, 1, &[]);
    assert_eq!(a.promote(1, &[]).0, 200);
    assert_eq!(a.put("kept").0, 200);
    let end = a.max_offset();
    assert!(process::terminate(&mut a.child).is_some_and(|s| s.success()), "{}", a.log());
    std::fs::remove_file(store.join("epochFileCheckpoint")).unwrap();
    std::fs::remove_file(store.join("epochFileCheckpoint.bak")).unwrap();
    let (mut child, stderr) = spawn_logship(&a.args, None);
    let status = process::wait_exit(&mut child).expect("it exits");
    let said = stderr.lock().unwrap().clone();
    assert!(!status.success(), "{said}");
    for needle in [
        "epochFileCheckpoint ".to_string(),
        "epochFileCheckpoint.bak".to_string(),
        "refetch everything from the master".to_string(),
        format!("adoptLogWithoutEpochs={end}"),
    ] {
        assert!(said.contains(&needle), "names {needle}: {said}");
    }
    let mut args = a.args.clone();
    args.extend(process::test_settings(&[&format!("adoptLogWithoutEpochs={end}")]));
    let adopted = Node::spawn(args, &store, a.port);
    assert_eq!(adopted.max_offset(), end);
    assert!(store.join("epochFileCheckpoint").exists(), "an empty epoch file is written at once");
}

#[test]
fn failover_through_the_binary_truncates_the_old_masters_tail_and_a_new_broker_gets_both_epochs() {
    divergent_failover(false);
}

#[test]
fn an_old_master_killed_while_it_rejoins_ends_byte_identical_after_it_follows_again() {
    divergent_failover(true);
}

/// A leads epoch 1 with B in its set; B dies, A writes a tail B never gets and dies; B leads
/// epoch 2; A rejoins (with `kill_while_rejoining`, is killed -9 right after it is told, wherever
/// its truncation is, and told again), cuts its tail and ends byte-identical; C joins empty.
fn divergent_failover(kill_while_rejoining: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Node::start(&dir.path().join("a"), 1, SYNC_ALL);
    let mut b = Node::start(&dir.path().join("b"), 2, SYNC_ALL);

    // Epoch 1: A is master with {1, 2}; B follows and acknowledges every SYNC put.
    let (code, body) = a.promote(1, &[1, 2]);
    assert_eq!(code, 200, "{body}\n{}", a.log());
    assert_eq!(body["role"], "MASTER");
    let (code, body) = b.follow(&a, 1, 1);
    assert_eq!(code, 200, "{body}\n{}", b.log());
    eventually("B to stream from A", || {
        let s = a.status();
        s["controller"]["slaves"]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x["brokerId"] == 2 && x["counted"] == true))
    });
    for i in 0..5 {
        let (code, body) = a.put(&format!("epoch-1 message {i}"));
        assert_eq!(code, 200, "a SYNC put B acknowledges: {body}\n{}", a.log());
    }
    let confirmed = a.max_offset();
    eventually("B to hold every acknowledged byte", || b.max_offset() == confirmed);
    let status = a.status();
    assert_eq!(status["role"], "SYNC_MASTER", "{status}");
    assert_eq!(status["controller"]["epoch"], 1, "{status}");
    assert_eq!(status["controller"]["confirmOffset"], confirmed, "{status}");
    assert_eq!(status["controller"]["syncStateSet"], json!([1, 2]), "{status}");
    assert_eq!(b.epochs(), json!([{ "epoch": 1, "startOffset": 0 }]));
    assert_eq!(b.status()["controller"]["masterEpoch"], 1);
    let metrics = a.metrics();
    for (series, value) in [
        ("logship_master_epoch{", 1.0),
        ("logship_confirm_offset{", confirmed as f64),
        ("logship_sync_state_set_size{", 2.0),
        ("logship_controller_has_role{", 1.0),
    ] {
        assert_eq!(sample(&metrics, series), Some(value), "{series}\n{metrics}");
    }
    assert!(
        metrics.contains("logship_sync_state_set_member{") && metrics.contains("broker_id=\"2\""),
        "{metrics}"
    );
    promtool_passes(&metrics);
    let metrics = b.metrics();
    assert_eq!(sample(&metrics, "logship_master_epoch{"), Some(1.0), "{metrics}");
    promtool_passes(&metrics);

    // B dies; A takes two more puts B never gets (stored, though the set cannot acknowledge
    // them in time), then A dies too.
    b.kill9();
    for i in 0..2 {
        let (_, body) = a.put(&format!("epoch-1 tail {i} only A has"));
        assert_eq!(body["stored"], true, "{body}");
    }
    let a_end = a.max_offset();
    assert!(a_end > confirmed);
    a.kill9();

    // Epoch 2: B comes back with no role, is promoted, and takes puts alone.
    b.restart();
    assert_eq!(b.status()["role"], "NONE");
    assert_eq!(b.max_offset(), confirmed, "B recovered what it had acknowledged");
    let (code, body) = b.promote(2, &[2]);
    assert_eq!(code, 200, "{body}\n{}", b.log());
    for i in 0..3 {
        let (code, body) = b.put(&format!("epoch-2 message {i}"));
        assert_eq!(code, 200, "{body}\n{}", b.log());
    }
    let b_end = b.max_offset();
    let both_epochs = json!([{ "epoch": 1, "startOffset": 0 }, { "epoch": 2, "startOffset": confirmed }]);
    assert_eq!(b.epochs(), both_epochs);

    // A comes back, is told to follow B at epoch 2, cuts the tail B never had, and ends
    // byte-identical with B.
    a.restart();
    assert_eq!(a.max_offset(), a_end, "A still holds its tail before it follows");
    let (code, body) = a.follow(&b, 2, 2);
    assert_eq!(code, 200, "{body}\n{}", a.log());
    if kill_while_rejoining {
        a.restart();
        let (code, body) = a.follow(&b, 2, 2);
        assert_eq!(code, 200, "{body}\n{}", a.log());
    }
    eventually("A to catch up with B", || a.max_offset() == b_end);
    let status = a.status();
    if !kill_while_rejoining {
        assert_eq!(status["controller"]["truncations"], 1, "{status}");
        assert_eq!(status["controller"]["truncatedBytes"], a_end - confirmed, "{status}");
    }
    assert_eq!(a.epochs(), both_epochs);
    assert!(a.commit_log(b_end) == b.commit_log(b_end), "A and B differ below {b_end}");
    // Its consume queue lost the cut messages with the bytes and serves B's.
    eventually("A's consume queue to serve what B's does", || a.bodies() == b.bodies());
    let served = a.bodies();
    assert_eq!(served.len(), 8, "{served:?}");
    assert!(!served.iter().any(|m| m.contains("only A has")), "{served:?}");
    let metrics = a.metrics();
    if !kill_while_rejoining {
        assert_eq!(sample(&metrics, "logship_truncations_total{"), Some(1.0), "{metrics}");
    }
    assert_eq!(sample(&metrics, "logship_master_epoch{"), Some(2.0), "{metrics}");
    promtool_passes(&metrics);

    // C joins empty and gets the whole log with both epochs.
    let c = Node::start(&dir.path().join("c"), 3, SYNC_ALL);
    let (code, body) = c.follow(&b, 2, 2);
    assert_eq!(code, 200, "{body}\n{}", c.log());
    eventually("C to catch up with B", || c.max_offset() == b_end);
    assert_eq!(c.epochs(), both_epochs);
    assert!(c.commit_log(b_end) == b.commit_log(b_end), "C and B differ below {b_end}");
    // Both followers caught up: the master's own authority takes them into the set.
    eventually("A and C to join B's sync-state-set", || {
        b.status()["controller"]["syncStateSet"] == json!([1, 2, 3])
    });
    let (code, body) = b.put("acknowledged by all three");
    assert_eq!(code, 200, "{body}");
    let end = b.max_offset();
    eventually("A and C to hold it", || a.max_offset() == end && c.max_offset() == end);
}

#[test]
fn admin_calls_refuse_bad_epochs_strangers_and_nonsense_with_typed_messages() {
    let dir = tempfile::tempdir().unwrap();
    let a = Node::start(&dir.path().join("a"), 1, SYNC_ALL);
    let b = Node::start(&dir.path().join("b"), 2, SYNC_ALL);
    // Without the token, or with a wrong one: 401, and nothing changes.
    for token in [None, Some("not-the-token-0123456789")] {
        let (code, body) = a.post("/ha/changeToMaster", r#"{"epoch":1}"#, token);
        assert_eq!(code, 401, "{token:?}: {body}");
    }
    assert_eq!(a.status()["role"], "NONE");
    // Nonsense bodies: 400 naming what is wrong.
    for bad in
        ["", "{", r#"{"epoch":"one"}"#, r#"{"epoch":1,"sneaky":true}"#, r#"{"epoch":1,"syncStateSet":[-3]}"#]
    {
        let (code, body) = a.post("/ha/changeToMaster", bad, Some(TOKEN));
        assert_eq!(code, 400, "{bad:?}: {body}");
        assert!(body["error"].is_string(), "{body}");
    }
    let (code, body) = a.post(
        "/ha/changeToSlave",
        &json!({ "masterAddress": "127.0.0.1:1", "masterBrokerId": 1, "epoch": 1 }).to_string(),
        Some(TOKEN),
    );
    assert_eq!(code, 400, "following itself: {body}");
    assert!(body["error"].as_str().unwrap().contains("itself"), "{body}");
    let (code, body) = b.post(
        "/ha/changeToSlave",
        &json!({ "masterAddress": "nohost", "masterBrokerId": 1, "epoch": 1 }).to_string(),
        Some(TOKEN),
    );
    assert_eq!(code, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("masterAddress"), "{body}");

    // Epochs: a promotion at or below what the broker holds is refused (409). Epoch 3 skips
    // epochs 1 and 2: forced.
    let (code, body) = a.post("/ha/changeToMaster", r#"{"epoch":3,"force":true}"#, Some(TOKEN));
    assert_eq!(code, 200, "{body}");
    assert_eq!(a.put("epoch 3").0, 200);
    for epoch in [3, 2] {
        let (code, body) = a.promote(epoch, &[]);
        assert_eq!(code, 409, "epoch {epoch}: {body}");
        assert!(body["error"].as_str().unwrap().contains("must be above"), "{body}");
    }
    let (code, body) = a.follow(&b, 2, 3);
    assert_eq!(code, 409, "the master of epoch 3 cannot follow another in epoch 3: {body}");
    let (code, body) = b.follow(&a, 1, 3);
    assert_eq!(code, 200, "{body}");
    eventually("B to get epoch 3", || b.epochs().as_array().is_some_and(|e| !e.is_empty()));
    let (code, body) = b.follow(&a, 1, 2);
    assert_eq!(code, 409, "a stale follow: {body}");
    assert!(body["error"].as_str().unwrap().contains("holds epoch 3"), "{body}");
    let (code, body) = b.promote(3, &[]);
    assert_eq!(code, 409, "B follows in epoch 3: {body}");
    assert_eq!(b.status()["role"], "SLAVE", "refusals change nothing");
    // A classic broker has no such calls.
    let classic = process::Broker::start("master", &dir.path().join("classic"), free_port_pair(), &[]);
    let (code, body) = classic.post("/ha/changeToMaster", br#"{"epoch":1}"#);
    assert_eq!(code, 403, "no token configured: {body}");
    assert!(body["error"].as_str().unwrap().contains("httpAuthToken"), "{body}");
}

/// Issue 22: what a controller would refuse, the admin calls refuse too, each with a typed 4xx:
/// an epoch that ends failover for good, an epoch skipping ahead unless forced, a second
/// master in an epoch this broker knows another holds, a sync-state-set naming brokers that
/// never connected, and following its own HA port.
#[test]
fn admin_calls_refuse_what_a_controller_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let a = Node::start(&dir.path().join("a"), 1, SYNC_ALL);
    let b = Node::start(&dir.path().join("b"), 2, SYNC_ALL);
    let admin = |node: &Node, path: &str, body: Value| node.post(path, &body.to_string(), Some(TOKEN));

    // No epoch can follow i32::MAX: refused, forced or not.
    for body in [json!({ "epoch": i32::MAX }), json!({ "epoch": i32::MAX, "force": true })] {
        let (code, reply) = admin(&a, "/ha/changeToMaster", body.clone());
        assert_eq!(code, 409, "{body}: {reply}");
        assert!(reply["error"].as_str().unwrap().contains("2147483647"), "{reply}");
    }
    // Epochs advance one at a time unless forced: a broker holding no epoch starts at 1.
    let (code, reply) = admin(&a, "/ha/changeToMaster", json!({ "epoch": 3 }));
    assert_eq!(code, 409, "{reply}");
    let error = reply["error"].as_str().unwrap();
    assert!(error.contains("one at a time") && error.contains("force"), "{reply}");
    assert_eq!(a.status()["role"], "NONE", "refusals change nothing");
    let (code, reply) = admin(&a, "/ha/changeToMaster", json!({ "epoch": 1, "syncStateSet": [1, 2] }));
    assert_eq!(code, 200, "{reply}");

    // A broker cannot be told to follow its own HA port, whatever id it is told to expect there.
    let own = json!({ "masterAddress": b.ha_addr(), "masterBrokerId": 1, "epoch": 1 });
    let (code, reply) = admin(&b, "/ha/changeToSlave", own);
    assert_eq!(code, 400, "{reply}");
    assert!(reply["error"].as_str().unwrap().contains("own HA port"), "{reply}");
    let (code, reply) = b.follow(&a, 1, 1);
    assert_eq!(code, 200, "{reply}");
    eventually("B to stream from A", || {
        a.status()["controller"]["slaves"]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x["brokerId"] == 2 && x["counted"] == true))
    });
    assert_eq!(a.put("epoch 1").0, 200);

    // A sync-state-set may only add brokers connected to this master.
    let set = |body: Value| admin(&a, "/ha/setSyncStateSet", body);
    let (code, reply) = set(json!({ "syncStateSet": [1, 99, 100], "syncStateSetEpoch": 2 }));
    assert_eq!(code, 400, "{reply}");
    let error = reply["error"].as_str().unwrap();
    assert!(error.contains("99") && error.contains("not connected"), "{reply}");
    assert_eq!(a.status()["controller"]["syncStateSet"], json!([1, 2]), "nothing changed");
    // Its epoch advances one at a time too, and never to i32::MAX.
    let (code, reply) = set(json!({ "syncStateSet": [1], "syncStateSetEpoch": 7 }));
    assert_eq!(code, 409, "{reply}");
    assert!(reply["error"].as_str().unwrap().contains("one at a time"), "{reply}");
    let (code, reply) = set(json!({ "syncStateSet": [1], "syncStateSetEpoch": i32::MAX, "force": true }));
    assert_eq!(code, 409, "{reply}");
    let (code, reply) = set(json!({ "syncStateSet": [1, 2], "syncStateSetEpoch": 2 }));
    assert_eq!(code, 200, "a connected member may be named: {reply}");

    // A becomes master of epoch 2, and B is told to follow it there (a slave refuses a master
    // announcing an epoch above the one it was told, so an unconfirmed claim is never evidence).
    // B hears of epoch 2 from A's handshake: told to become master of epoch 2 too, it refuses
    // (one master per epoch).
    let (code, reply) = admin(&a, "/ha/changeToMaster", json!({ "epoch": 2, "syncStateSet": [1, 2] }));
    assert_eq!(code, 200, "{reply}");
    let (code, reply) = b.follow(&a, 1, 2);
    assert_eq!(code, 200, "{reply}");
    eventually("B to hear of epoch 2 from A", || b.status()["controller"]["masterLastEpoch"] == 2);
    let (code, reply) = admin(&b, "/ha/changeToMaster", json!({ "epoch": 2 }));
    assert_eq!(code, 409, "a second master in epoch 2: {reply}");
    assert!(reply["error"].as_str().unwrap().contains("broker 1"), "{reply}");
    assert_eq!(b.status()["role"], "SLAVE", "{}", b.status());
    // Epoch 4 skips epoch 3: refused, unless forced (a controller that knows of epoch 3).
    let (code, reply) = admin(&b, "/ha/changeToMaster", json!({ "epoch": 4 }));
    assert_eq!(code, 409, "{reply}");
    assert!(reply["error"].as_str().unwrap().contains("the next is 3"), "{reply}");
    let (code, reply) = admin(&b, "/ha/changeToMaster", json!({ "epoch": 4, "force": true }));
    assert_eq!(code, 200, "{reply}");
}

#[test]
fn set_sync_state_set_applies_a_set_refuses_bad_ones_and_an_away_member_freezes_confirm_offset() {
    let dir = tempfile::tempdir().unwrap();
    // A member that never connects stays in the set for the whole test: only the call removes it.
    let settings = [SYNC_ALL, &["slaveTimeout=500", "haMaxTimeSlaveNotCatchup=600000"]].concat();
    let a = Node::start(&dir.path().join("a"), 1, &settings);
    let set = |body: Value| a.post("/ha/setSyncStateSet", &body.to_string(), Some(TOKEN));
    let (code, body) = set(json!({ "syncStateSet": [1], "syncStateSetEpoch": 2 }));
    assert_eq!(code, 409, "no role yet, so no sync-state-set: {body}");
    assert!(body["error"].as_str().unwrap().contains("not a master"), "{body}");

    assert_eq!(a.promote(1, &[]).0, 200);
    assert_eq!(a.put("alone").0, 200);
    let confirmed = a.max_offset();
    let (code, body) = a.post("/ha/setSyncStateSet", r#"{"syncStateSet":[1],"syncStateSetEpoch":2}"#, None);
    assert_eq!(code, 401, "{body}");
    for (bad, names) in [
        ("{", "JSON"),
        (r#"{"syncStateSet":[1]}"#, "syncStateSetEpoch"),
        (r#"{"syncStateSet":[1],"syncStateSetEpoch":2,"sneaky":1}"#, "sneaky"),
        (r#"{"syncStateSet":[2,3],"syncStateSetEpoch":2}"#, "must hold the master"),
        (r#"{"syncStateSet":[1,-2],"syncStateSetEpoch":2}"#, "negative"),
        (r#"{"syncStateSet":[1],"syncStateSetEpoch":-1}"#, "negative"),
    ] {
        let (code, body) = a.post("/ha/setSyncStateSet", bad, Some(TOKEN));
        assert_eq!(code, 400, "{bad}: {body}");
        assert!(body["error"].as_str().unwrap().contains(names), "{bad}: {body}");
    }

    // Member 2 never connected: it cannot join the set by this call.
    let (code, body) = set(json!({ "syncStateSet": [1, 2], "syncStateSetEpoch": 2 }));
    assert_eq!(code, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("not connected"), "{body}");
    // A controller's election may name it (it will follow): epoch 2 starts with {1, 2} at set
    // epoch 1, member 2 away.
    assert_eq!(a.promote(2, &[1, 2]).0, 200);
    let (code, body) = set(json!({ "syncStateSet": [1], "syncStateSetEpoch": 0 }));
    assert_eq!(code, 409, "a stale epoch: {body}");
    assert!(body["error"].as_str().unwrap().contains("stale"), "{body}");
    let (code, body) = set(json!({ "syncStateSet": [1], "syncStateSetEpoch": 1 }));
    assert_eq!(code, 409, "epoch 1 names another set: {body}");
    assert!(body["error"].as_str().unwrap().contains("already in force"), "{body}");
    let (code, body) = set(json!({ "syncStateSet": [1, 2], "syncStateSetEpoch": 1 }));
    assert_eq!(code, 200, "the same set again: {body}");
    assert_eq!((&body["syncStateSet"], &body["syncStateSetEpoch"]), (&json!([1, 2]), &json!(1)), "{body}");

    // Member 2 is away: a SYNC put is stored but times out, and confirmOffset stays frozen.
    let (code, body) = a.put("member 2 is away");
    assert_eq!((code, body["status"].as_str()), (504, Some("FLUSH_SLAVE_TIMEOUT")), "{body}");
    let controller = a.status()["controller"].clone();
    assert_eq!(controller["syncStateSet"], json!([1, 2]), "{controller}");
    assert_eq!(controller["confirmOffset"], json!(confirmed), "frozen while member 2 is away: {controller}");

    // The shrink, applied from outside, lets confirmOffset move on, and puts complete again.
    let end = a.max_offset();
    let (code, body) = set(json!({ "syncStateSet": [1], "syncStateSetEpoch": 2 }));
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["confirmOffset"], json!(end), "{body}");
    assert_eq!(a.put("alone again").0, 200);
}

#[test]
fn a_role_change_answers_the_put_in_flight_before_the_new_epoch_starts() {
    let dir = tempfile::tempdir().unwrap();
    // Broker 2 is in the set but never connects: a SYNC put waits for it (slaveTimeout).
    let a = std::sync::Arc::new(Node::start(
        &dir.path().join("a"),
        1,
        &["allAckInSyncStateSet=true", "slaveTimeout=5000"],
    ));
    assert_eq!(a.promote(1, &[1, 2]).0, 200);
    let putter = {
        let a = a.clone();
        std::thread::spawn(move || a.put("in flight across a role change"))
    };
    eventually("the put to wait for broker 2", || a.status()["pendingWaits"] == 1);
    let (code, body) = a.promote(2, &[1]);
    assert_eq!(code, 200, "{body}\n{}", a.log());
    let (_, answer) = putter.join().unwrap();
    assert_eq!(answer["stored"], true, "the put in flight was answered: {answer}");
    let end = answer["offset"].as_u64().unwrap();
    let epochs = a.epochs();
    let second = epochs[1]["startOffset"].as_u64().unwrap();
    assert!(second > end, "epoch 2 starts after the message the epoch-1 service took: {epochs}");
    assert_eq!(a.put("after").0, 200, "the new master takes puts");
}

#[test]
fn controller_mode_runs_as_logship_broker_only_and_bad_keys_stop_it_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().display().to_string();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(process::bin()).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (code, err) =
        run(&["master", "--store", &store, "--set", "enableControllerMode=true", "--set", "brokerId=1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("logship broker"), "{err}");
    let (code, err) = run(&["broker", "--store", &store, "--set", "enableControllerMode=false"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("enableControllerMode=false"), "{err}");
    let (code, err) = run(&["broker", "--store", &store]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("brokerId=(unset)"), "{err}");
    let (code, err) =
        run(&["broker", "--store", &store, "--set", "brokerId=1", "--master", "127.0.0.1:10912"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("haMasterAddress"), "{err}");
}

/// The TLS name every broker's certificate carries beside its own, and that a broker with
/// `haTlsServerName` set to it expects of every master it follows.
const GROUP_NAME: &str = "ha.group-a.logship.test";

/// Every broker's replica name, as `haTlsReplicaNames` lists them.
const REPLICA_NAMES: &str = "broker-1.logship.test,broker-2.logship.test,broker-3.logship.test";

/// Controller-mode TLS settings of broker `id`: its certificate (its replica name, the group's
/// name and 127.0.0.1, the host it is followed at) from `ca`, written into `dir`.
fn tls_settings(dir: &Path, ca: &pki::Ca, id: u32) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    let name = format!("broker-{id}.logship.test");
    let identity = ca.issue(&[&name, GROUP_NAME, "127.0.0.1"]);
    let mut settings: Vec<String> = ["haTlsMode=required", "haTlsEnable=true"].map(String::from).to_vec();
    settings.push(format!("haTlsReplicaNames={REPLICA_NAMES}"));
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

/// Connects to `ha` in plain, sends a classic slave's first report (offset 0) and counts the
/// bytes that come back before the master closes the connection.
fn plain_bytes_read_from(ha: &str) -> usize {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(ha).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = stream.write_all(&0u64.to_be_bytes());
    let (mut total, mut buf) = (0, [0u8; 4096]);
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return total,
            Ok(n) => total += n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                panic!("the master kept a plain connection open")
            }
            Err(_) => return total,
        }
    }
}

/// Every `/status` slave link of `master` came in over TLS with a listed replica name.
fn slave_replicas(master: &Node) -> Vec<String> {
    let status = master.status();
    let links = status["slaves"].as_array().cloned().unwrap_or_default();
    assert!(links.iter().all(|l| l["trusted"] == true), "{status}");
    let mut names: Vec<String> =
        links.iter().filter_map(|l| l["replica"].as_str().map(String::from)).collect();
    names.sort();
    names
}

/// Three controller-mode brokers with `haTlsMode=required` and `haTlsEnable=true`: A leads
/// epoch 1, B and C follow over mutual TLS (B expecting the group's name, C the host it is
/// told to follow, its default) and end byte-identical; a plain connection to A's HA port
/// reads nothing. B leads epoch 2, the old master A and C follow it over TLS with the same
/// settings, and all three end byte-identical again.
#[test]
fn controller_mode_replicates_and_fails_over_over_mutual_tls() {
    let dir = tempfile::tempdir().unwrap();
    let ca = pki::Ca::new("logship group CA");
    let certs = dir.path().join("certs");
    let start = |id: u32, name: &str, server_name: Option<&str>| {
        let mut settings = tls_settings(&certs, &ca, id);
        settings.extend(SYNC_ALL.iter().map(|s| s.to_string()));
        settings.extend(server_name.map(|n| format!("haTlsServerName={n}")));
        let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
        Node::start(&dir.path().join(name), id, &settings)
    };
    let a = start(1, "a", Some(GROUP_NAME));
    let b = start(2, "b", Some(GROUP_NAME));
    let c = start(3, "c", None);
    let all_hold = |end: u64| a.max_offset() == end && b.max_offset() == end && c.max_offset() == end;

    // Epoch 1: A is master; B and C follow over TLS and join its sync-state-set.
    let (code, body) = a.promote(1, &[1]);
    assert_eq!(code, 200, "{body}\n{}", a.log());
    for (node, name) in [(&b, "B"), (&c, "C")] {
        let (code, body) = node.follow(&a, 1, 1);
        assert_eq!(code, 200, "{name}: {body}\n{}", node.log());
    }
    eventually("B and C to join A's sync-state-set over TLS", || {
        a.status()["controller"]["syncStateSet"] == json!([1, 2, 3])
    });
    for i in 0..5 {
        let (code, body) = a.put(&format!("epoch-1 secret {i}"));
        assert_eq!(code, 200, "a SYNC put the whole set acknowledges: {body}\n{}", a.log());
    }
    let epoch_1_end = a.max_offset();
    eventually("B and C to hold every byte", || all_hold(epoch_1_end));
    let a_log = a.commit_log(epoch_1_end);
    assert!(b.commit_log(epoch_1_end) == a_log && c.commit_log(epoch_1_end) == a_log, "A, B and C differ");
    assert_eq!(slave_replicas(&a), ["broker-2.logship.test", "broker-3.logship.test"]);

    // A plain connection to the master's HA port is closed unread and counted.
    assert_eq!(plain_bytes_read_from(&a.ha_addr()), 0, "a plain peer read the log");
    eventually("A to count the plain connection", || {
        a.status()["haRefusals"]["plainRefused"].as_u64().is_some_and(|n| n >= 1)
    });
    assert_eq!(a.status()["slaves"].as_array().map(Vec::len), Some(2));

    // Epoch 2: B is master; the old master A and C follow it with the same TLS settings.
    let (code, body) = b.promote(2, &[2]);
    assert_eq!(code, 200, "{body}\n{}", b.log());
    for (node, name) in [(&a, "A"), (&c, "C")] {
        let (code, body) = node.follow(&b, 2, 2);
        assert_eq!(code, 200, "{name}: {body}\n{}", node.log());
    }
    eventually("A and C to join B's sync-state-set over TLS", || {
        b.status()["controller"]["syncStateSet"] == json!([1, 2, 3])
    });
    for i in 0..5 {
        let (code, body) = b.put(&format!("epoch-2 secret {i}"));
        assert_eq!(code, 200, "{body}\n{}", b.log());
    }
    let end = b.max_offset();
    eventually("A and C to hold every byte of epoch 2", || all_hold(end));
    let b_log = b.commit_log(end);
    assert!(a.commit_log(end) == b_log && c.commit_log(end) == b_log, "A, B and C differ");
    let both_epochs = json!([{ "epoch": 1, "startOffset": 0 }, { "epoch": 2, "startOffset": epoch_1_end }]);
    for node in [&a, &b, &c] {
        assert_eq!(node.epochs(), both_epochs);
    }
    assert_eq!(slave_replicas(&b), ["broker-1.logship.test", "broker-3.logship.test"]);
    assert_eq!(plain_bytes_read_from(&b.ha_addr()), 0, "a plain peer read the new master's log");
    eventually("B to count the plain connection", || {
        b.status()["haRefusals"]["plainRefused"].as_u64().is_some_and(|n| n >= 1)
    });
    eventually("A and C to serve what B does", || a.bodies() == b.bodies() && c.bodies() == b.bodies());
    assert_eq!(b.bodies().len(), 10);

    // A broker expecting a name B's certificate lacks refuses the handshake itself, and does
    // not fall back to plain: it reads nothing. It carries a listed replica name (broker 3's),
    // so only its own check of B's certificate keeps it out.
    let d = start(3, "d", Some("another-group.logship.test"));
    let (code, body) = d.follow(&b, 2, 2);
    assert_eq!(code, 200, "{body}\n{}", d.log());
    eventually("B to count the failed handshake", || {
        b.status()["haRefusals"]["tlsRefused"].as_u64().is_some_and(|n| n >= 1)
    });
    let status = d.status();
    assert_eq!(
        (status["maxOffset"].as_u64(), status["master"]["state"].as_str() == Some("STREAMING")),
        (Some(0), false),
        "{status}"
    );
    assert_eq!(b.status()["haRefusals"]["plainRefused"], 1, "D never connected in plain");
}
