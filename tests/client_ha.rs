//! HA as RocketMQ clients see it (issue 24): slaves carry their master's metadata, both ways
//! with real Java brokers (rocketmq-broker 5.5.0) on the real Apache NameServer.
//!
//! - A logship slave without `haMasterAddress` of a Java SYNC_MASTER learns the master from
//!   the NameServer (HA and remoting address) and carries the Java master's committed
//!   consumer offsets in its `consumerOffset.json`, and follows later commits.
//! - A Java slave of a logship master carries logship's committed offsets (Java's own
//!   `SlaveSynchronize` against logship's `GET_ALL_*` answers).
//! - Consumer failover to a slave (scenario 1): a Java 5.5.0 push group of two reads about half
//!   of 20,000 messages from a logship SYNC_MASTER, the master is killed -9, the group reads the
//!   rest from a logship slave (nothing lost, duplicates at most what it consumed since the
//!   slaves' last offset sync), and returns to the master restarted on its store and ports.
//! - A mixed group (scenario 2): a Java 5.5.0 SYNC_MASTER is killed -9 and a new Java consumer
//!   resumes on its logship slave at exactly the Java master's committed offsets.
//!
//! What Java does with offsets across a failover, and these tests check for logship: a client
//! commits (`RemoteBrokerOffsetStore`, every 5 s) to the master while the route names one and to
//! a slave otherwise (4.9.7 asks for the master only, then any broker after a route update; 5.5.0
//! any broker at once, the master first); a slave stores what it is sent
//! (`ConsumerManageProcessor` has no role check) until its next `SlaveSynchronize`, which takes
//! the master's table over its own (`putAll`). So a restarted master, and after one sync its
//! slaves, hold the offsets of before the kill until the clients commit again from memory
//! (within a route refresh and a commit period: 23 to 30 s here). It follows, in Java as in
//! logship, that a group that stops while the master is down loses the offsets it committed on
//! the slave once the master is back (not tested here).
//!
//! Skips without Java unless `LOGSHIP_REQUIRE_JAVA=1`.

mod process;
mod remoting_support;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use logship_remoting::body::{ConsumerOffsetSerializeWrapper, JsonBody};
use logship_remoting::header::GetMaxOffsetRequestHeader;
use logship_remoting::{RemotingCommand, RequestCode, ResponseCode};
use process::{Broker, free_port_pair};
use remoting_support::{Client, send_request};
use serde_json::Value;
use support::apps::*;

/// A Java 5.5.0 slave took 58 s here to carry a logship master's offset (its registration and
/// sync periods), so the limit is generous.
const BIG: Duration = Duration::from_secs(180);
/// A topic and a group both lines create by default, so a commit needs no send first.
const TOPIC: &str = "SELF_TEST_TOPIC";
const GROUP: &str = "TOOLS_CONSUMER";

/// `UPDATE_CONSUMER_OFFSET` of `GROUP` on `TOPIC`'s queue 0, as a consumer commits it.
fn commit(addr: std::net::SocketAddr, offset: i64) {
    let mut c = Client::connect(addr);
    let r = c.call(
        RemotingCommand::request(RequestCode::UPDATE_CONSUMER_OFFSET)
            .with_ext_field("consumerGroup", GROUP)
            .with_ext_field("topic", TOPIC)
            .with_ext_field("queueId", "0")
            .with_ext_field("commitOffset", offset.to_string()),
    );
    assert_eq!(r.code, 0, "the commit on {addr}: {:?}", r.remark);
}

/// The committed offset of `GROUP` on `TOPIC`'s queue 0 in `consumerOffset.json` under `store`.
fn offset_in_file(store: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(store.join("config").join("consumerOffset.json")).ok()?;
    let v: Value = json5_lenient(&text)?;
    v["offsetTable"][format!("{TOPIC}@{GROUP}")]["0"].as_i64()
}

/// fastjson writes the queue ids as bare numbers (`{0:7}`); quote them to read it as JSON.
fn json5_lenient(text: &str) -> Option<Value> {
    let mut out = String::with_capacity(text.len());
    let mut prev = ' ';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() && (prev == '{' || prev == ',') {
            let mut n = c.to_string();
            while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                n.push(*d);
                chars.next();
            }
            if chars.peek() == Some(&':') {
                out.push_str(&format!("\"{n}\""));
            } else {
                out.push_str(&n);
            }
            prev = '0';
            continue;
        }
        if !c.is_whitespace() {
            prev = c;
        }
        out.push(c);
    }
    serde_json::from_str(&out).ok()
}

fn until(what: &str, mut check: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < BIG, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
    start.elapsed()
}

#[test]
fn slaves_carry_their_master_s_consumer_offsets_between_java_and_logship() {
    let test = "slaves_carry_their_master_s_consumer_offsets_between_java_and_logship";
    let Some(apps) = java_apps(CLIENT_5, test) else { return };
    let apps = apps.with_jvm_options(&["-Xmx256m"]);
    let dir = tempfile::Builder::new().prefix("logship-client-ha-").tempdir().unwrap();
    let namesrv = Namesrv::start(&apps, &[]);
    let ns = format!("namesrvAddr={}", namesrv.addr());
    // The Java brokers' cluster: a 5.x NameServer names a group's master only to a slave of
    // the same cluster (its live table is keyed by cluster and address).
    let cluster = "brokerClusterName=LogshipCluster";

    // A logship slave of a Java master, learning both from the NameServer.
    let java_master = JavaBroker::start(
        &apps,
        BrokerSpec::new("javaGroup", "SYNC_MASTER", 0, &dir.path().join("jm")).namesrv(&namesrv.addr()),
    );
    let java_master_addr: std::net::SocketAddr = java_master.addr().parse().unwrap();
    commit(java_master_addr, 7);
    let slave = Broker::start(
        "slave",
        &dir.path().join("ls"),
        free_port_pair(),
        &[
            "--set",
            &ns,
            "--set",
            cluster,
            "--set",
            "brokerName=javaGroup",
            "--set",
            "brokerId=1",
            "--set",
            "slaveSyncInterval=1000",
        ],
    );
    let took = until("the logship slave to carry the Java master's offset", || {
        offset_in_file(&dir.path().join("ls")) == Some(7)
    });
    eprintln!("{test}: logship slave of a Java master carried its offset after {took:?}");
    // The round writes the files first and its status after: wait for the status too.
    let mut sync = None;
    until("the slave's sync status to name the Java master", || {
        sync = slave.remoting_status().slave_sync;
        sync.as_ref().is_some_and(|s| s.master.is_some())
    });
    let sync = sync.expect("a slave syncs its metadata");
    assert_eq!(sync.master.as_deref(), Some(java_master.addr().as_str()), "{sync:?}");
    assert_eq!(sync.last_error, None, "{sync:?}");
    commit(java_master_addr, 11);
    until("the logship slave to follow a new commit", || offset_in_file(&dir.path().join("ls")) == Some(11));

    // A Java slave of a logship master.
    let master = Broker::start(
        "master",
        &dir.path().join("lm"),
        free_port_pair(),
        &["--role", "SYNC_MASTER", "--set", &ns, "--set", cluster, "--set", "brokerName=logshipGroup"],
    );
    commit(master.remoting_addr(), 23);
    let java_slave = JavaBroker::start(
        &apps,
        BrokerSpec::new("logshipGroup", "SLAVE", 1, &dir.path().join("js")).namesrv(&namesrv.addr()),
    );
    let took = until("the Java slave to carry logship's offset", || {
        offset_in_file(&dir.path().join("js")) == Some(23)
    });
    eprintln!("{test}: Java slave of a logship master carried its offset after {took:?}");
    java_slave.stop();
    drop(master);
    drop(slave);
    java_master.stop();
    drop(namesrv);
}

// ---- consumer failover to a slave (issue 24, scenarios 1 and 2) -------------------------

/// `(producer, seq)` of a producer's message `seq`: how the consumers' lines name it.
type Key = (String, u64);

/// One delivery of a message to a consumer, from its `msg` line.
#[derive(Clone, Copy, Debug)]
struct Delivery {
    queue: u64,
    offset: i64,
    at_ms: u64,
}

/// Every successful delivery in `lines`, by message (the seed message, which no producer
/// numbered, is left out).
fn deliveries(lines: &[Value]) -> BTreeMap<Key, Vec<Delivery>> {
    let mut m: BTreeMap<Key, Vec<Delivery>> = BTreeMap::new();
    for v in events(lines, "msg") {
        if v["answer"] != "SUCCESS" {
            continue;
        }
        let (Some(producer), Some(seq)) =
            (v["props"]["producer"].as_str(), v["props"]["seq"].as_str().and_then(|s| s.parse().ok()))
        else {
            continue;
        };
        let d = Delivery {
            queue: v["queue"].as_u64().unwrap(),
            offset: v["queueOffset"].as_i64().unwrap(),
            at_ms: v["atMs"].as_u64().unwrap(),
        };
        m.entry((producer.to_string(), seq)).or_default().push(d);
    }
    m
}

/// The deliveries of every consumer in `group`, merged.
fn group_deliveries(group: &[App]) -> BTreeMap<Key, Vec<Delivery>> {
    let mut all: BTreeMap<Key, Vec<Delivery>> = BTreeMap::new();
    for c in group {
        for (k, mut d) in deliveries(&c.lines()) {
            all.entry(k).or_default().append(&mut d);
        }
    }
    all
}

fn keys(instance: &str, range: std::ops::Range<u64>) -> BTreeSet<Key> {
    range.map(|i| (instance.to_string(), i)).collect()
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// `QUERY_CONSUMER_OFFSET`: the committed offset of `group` on `topic`'s `queue` at `addr`, or
/// `None` when it answers anything but `SUCCESS` (no offset, or unreachable is a panic).
fn committed(addr: SocketAddr, group: &str, topic: &str, queue: u64) -> Option<i64> {
    let mut c = Client::connect(addr);
    let r = c.call(
        RemotingCommand::request(RequestCode::QUERY_CONSUMER_OFFSET)
            .with_version(513)
            .with_ext_field("consumerGroup", group)
            .with_ext_field("topic", topic)
            .with_ext_field("queueId", queue.to_string()),
    );
    if r.code != 0 {
        return None;
    }
    r.ext_fields.get("offset").and_then(|o| o.parse().ok())
}

/// `GET_CONSUMER_LIST_BY_GROUP`: how many members of `group` the broker at `addr` knows.
fn consumer_ids(addr: SocketAddr, group: &str) -> usize {
    let mut c = Client::connect(addr);
    let r = c.call(
        RemotingCommand::request(RequestCode::GET_CONSUMER_LIST_BY_GROUP)
            .with_ext_field("consumerGroup", group),
    );
    if r.code != 0 {
        return 0;
    }
    let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    v["consumerIdList"].as_array().map_or(0, Vec::len)
}

/// `GET_MAX_OFFSET` of `topic`'s `queue` at `addr`.
fn max_offset(addr: SocketAddr, topic: &str, queue: u64) -> i64 {
    let mut c = Client::connect(addr);
    let r = c.call(
        RemotingCommand::request(RequestCode::GET_MAX_OFFSET)
            .with_version(513)
            .with_header(&GetMaxOffsetRequestHeader::new(topic, queue as i32)),
    );
    assert_eq!(r.code, 0, "GET_MAX_OFFSET {topic}-{queue} at {addr}: {:?}", r.remark);
    r.ext_fields["offset"].parse().unwrap()
}

/// `group`'s committed offsets of `topic`'s four queues at `addr` (-1 for none).
fn committed_all(addr: SocketAddr, group: &str, topic: &str) -> [i64; 4] {
    std::array::from_fn(|q| committed(addr, group, topic, q as u64).unwrap_or(-1))
}

/// The max offsets of `topic`'s four queues at `addr`.
fn max_all(addr: SocketAddr, topic: &str) -> [i64; 4] {
    std::array::from_fn(|q| max_offset(addr, topic, q as u64))
}

/// Creates `topic` (four queues) on the master at `master` with one seed message, then waits
/// until the NameServer routes it.
fn seed_topic(apps: &JavaApps, master: SocketAddr, ns: &str, topic: &str) {
    let mut c = Client::connect(master);
    let r = c.call(send_request(topic, 0, "", b"seed"));
    assert_eq!(r.code, 0, "the seed send: {:?}", r.remark);
    apps.wait_routed(ns, topic);
}

/// Sends `count` messages of 64 bytes in batches of 100 as `instance`; asserts every one
/// `SEND_OK`.
fn produce_batches(apps: &JavaApps, ns: &str, topic: &str, instance: &str, count: u64) {
    let count = count.to_string();
    let args = [
        "--namesrv",
        ns,
        "--topic",
        topic,
        "--count",
        &count,
        "--size",
        "64",
        "--instance",
        instance,
        "--mode",
        "batch",
        "--batch-size",
        "100",
        "--quiet",
    ];
    let lines = apps.produce(&args).finish(BIG);
    assert_eq!(summary(&lines)["errors"], 0, "{:?}", events(&lines, "send_error"));
    for (status, n) in send_statuses(&lines) {
        assert_eq!(status, "SEND_OK", "{n} sends answered {status}");
    }
}

/// Starts push consumers `instances` of `group` on `topic` (from the first offset), waits until
/// each holds queues among all of them.
fn push_group(apps: &JavaApps, ns: &str, topic: &str, group: &str, instances: &[&str]) -> Vec<App> {
    let mut members: Vec<App> = instances
        .iter()
        .map(|i| {
            apps.run(
                "PushConsume",
                &["--namesrv", ns, "--topic", topic, "--group", group, "--instance", i, "--from", "first"],
            )
        })
        .collect();
    for m in &mut members {
        m.wait_event("ready", READY_PATIENCE);
    }
    for m in &mut members {
        wait_rebalanced(m, topic, instances.len() as u64, BIG);
    }
    members
}

/// Sends `sig` (`STOP`, `CONT`) to `app`'s process.
fn signal_app(app: &App, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([format!("-{sig}"), app.pid().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{sig} {}", app.pid());
}

/// Waits until the lines of the (stopped) `group` stop coming, `printed` of them already read;
/// returns how many it printed.
fn all_read(group: &[App], mut printed: usize) -> usize {
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now: usize = group.iter().map(|c| c.lines().len()).sum();
        if now == printed {
            return now;
        }
        printed = now;
    }
}

/// Polls `group` until its deliveries hold all of `want`; panics with their logs after `BIG`.
fn wait_delivered(group: &[App], want: &BTreeSet<Key>, what: &str) -> BTreeMap<Key, Vec<Delivery>> {
    let deadline = Instant::now() + BIG;
    loop {
        let got = group_deliveries(group);
        let missing = want.iter().filter(|k| !got.contains_key(*k)).count();
        if missing == 0 {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {missing} of {} never consumed, e.g. {:?}\n{}",
            want.len(),
            want.iter().find(|k| !got.contains_key(*k)),
            group.iter().map(|c| tail(&c.stderr(), 30)).collect::<Vec<_>>().join("\n---\n")
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The failover window as the consumers saw it: after the kill at `kill_ms` they first drain
/// what they had pulled from the master, then stall until they pull from a slave. The first
/// delivery after the longest stall following the kill is the first from a slave; returns
/// `(window from the kill to it, deliveries before it)`.
fn failover_window(all: &BTreeMap<Key, Vec<Delivery>>, kill_ms: u64) -> (Duration, usize) {
    let mut after: Vec<u64> = all.values().flatten().map(|d| d.at_ms).filter(|&t| t >= kill_ms).collect();
    after.sort_unstable();
    let mut prev = kill_ms;
    let (mut gap, mut first, mut drained) = (0, kill_ms, 0);
    for (i, &t) in after.iter().enumerate() {
        if t - prev > gap {
            (gap, first, drained) = (t - prev, t, i);
        }
        prev = t;
    }
    (Duration::from_millis(first - kill_ms), drained)
}

/// Scenario 1: a push group of two reads about half of 20,000 messages from a logship
/// SYNC_MASTER, the master is killed -9, the group reads the rest from a slave (every message,
/// duplicates at most what it consumed since the slave's last offset sync), and when the
/// master comes back on its old store and ports the group returns to it: the offsets it
/// committed on the slave meanwhile reach the master (from the clients' memory, as Java's
/// `RemoteBrokerOffsetStore` commits to the master again once the route has it).
#[test]
fn a_push_group_fails_over_to_a_logship_slave_and_returns_to_the_restarted_master() {
    let test = "a_push_group_fails_over_to_a_logship_slave_and_returns_to_the_restarted_master";
    let Some(apps) = java_apps(CLIENT_5, test) else { return };
    let started = Instant::now();
    let dir = tempfile::Builder::new().prefix("logship-client-failover-").tempdir().unwrap();
    let namesrv = Namesrv::start(&apps, &[]);
    let ns = namesrv.addr();
    let ns_set = format!("namesrvAddr={ns}");
    let bn = "brokerName=failoverGroup";
    // Java's default is 10 s; shorter, so the bound on duplicates is tight.
    let sync = "slaveSyncInterval=2000";
    let mut master = Broker::start(
        "master",
        &dir.path().join("m"),
        free_port_pair(),
        &["--role", "SYNC_MASTER", "--set", &ns_set, "--set", bn, "--set", "slaveTimeout=3000"],
    );
    let master_addr = master.remoting_addr();
    let ha = master.ha_addr();
    let mut slaves: Vec<Broker> = (1..=2)
        .map(|i| {
            let id = format!("brokerId={i}");
            Broker::start(
                "slave",
                &dir.path().join(format!("s{i}")),
                free_port_pair(),
                &["--master", &ha, "--set", &id, "--set", &ns_set, "--set", bn, "--set", sync],
            )
        })
        .collect();
    let slave_addrs: Vec<SocketAddr> = slaves.iter().map(Broker::remoting_addr).collect();
    until("both slaves to connect", || master.status()["slaves"].as_array().is_some_and(|s| s.len() == 2));
    let topic = "FailoverTopic";
    let group = "failover_group";
    seed_topic(&apps, master_addr, &ns, topic);

    // Two members hold two queues each; stopped while the messages are sent, so that the
    // kill comes about halfway through consuming them.
    let consumers = push_group(&apps, &ns, topic, group, &["f1", "f2"]);
    // Every broker knows both members (their heartbeats), so that a rebalance asking a slave
    // after the kill keeps the queues where they are.
    let known = until("every broker to know both members", || {
        slave_addrs.iter().chain([&master_addr]).all(|a| consumer_ids(*a, group) == 2)
    });
    eprintln!("{test}: every broker knew both members {known:?} after they rebalanced");
    for c in &consumers {
        signal_app(c, "STOP");
    }
    const TOTAL: u64 = 20_000;
    produce_batches(&apps, &ns, topic, "p-failover", TOTAL);
    let end = max_all(master_addr, topic);
    // They consume in short steps, stopped between them, so that what they consumed and what
    // the slaves synced are known exactly at the kill (their lines reach this process late).
    let mut printed = 0;
    loop {
        for c in &consumers {
            signal_app(c, "CONT");
        }
        std::thread::sleep(Duration::from_millis(150));
        for c in &consumers {
            signal_app(c, "STOP");
        }
        printed = all_read(&consumers, printed);
        if group_deliveries(&consumers).len() as u64 >= TOTAL / 2 {
            break;
        }
    }
    master.kill9();
    let kill_ms = now_ms();
    let killed = Instant::now();
    let synced: Vec<[i64; 4]> = slave_addrs.iter().map(|a| committed_all(*a, group, topic)).collect();
    let members: Vec<usize> = slave_addrs.iter().map(|a| consumer_ids(*a, group)).collect();
    let at_kill = group_deliveries(&consumers);
    for c in &consumers {
        signal_app(c, "CONT");
    }
    // Consumed since the slaves' last sync: deliveries at or past the offset the less
    // advanced slave carries, per queue.
    let floor: [i64; 4] = std::array::from_fn(|q| synced.iter().map(|s| s[q]).min().unwrap());
    let since_sync = at_kill.values().filter(|d| d[0].offset >= floor[d[0].queue as usize]).count();
    eprintln!(
        "{test}: killed the master after {} consumed; slaves carried {synced:?}, queue ends \
         {end:?}; {since_sync} consumed since the last offset sync",
        at_kill.len()
    );

    let rebalances_at_kill: Vec<usize> = consumers.iter().map(|c| c.events("rebalance").len()).collect();
    let all = wait_delivered(&consumers, &keys("p-failover", 0..TOTAL), "after the failover");
    let rebalances: Vec<usize> = consumers.iter().map(|c| c.events("rebalance").len()).collect();
    // Which member consumed each message again (queues moving between members, or one
    // member reading a queue again).
    let by_member: Vec<BTreeMap<Key, Vec<Delivery>>> =
        consumers.iter().map(|c| deliveries(&c.lines())).collect();
    let (mut same, mut other) = (0, 0);
    for (k, d) in &all {
        if d.len() > 1 {
            let holders = by_member.iter().filter(|m| m.contains_key(k)).count();
            if holders > 1 { other += d.len() - 1 } else { same += d.len() - 1 }
        }
    }
    let mut again: BTreeMap<u64, (i64, i64)> = BTreeMap::new();
    for d in all.values().filter(|d| d.len() > 1) {
        let e = again.entry(d[0].queue).or_insert((i64::MAX, i64::MIN));
        *e = (e.0.min(d[0].offset), e.1.max(d[0].offset));
    }
    eprintln!(
        "{test}: rebalance lines at the kill {rebalances_at_kill:?}, at the end {rebalances:?}; \
         consumed again by the same member {same}, by the other {other}; offsets consumed again \
         by queue {again:?}; the slaves knew {members:?} members at the kill; rebalances since: \
         {:?}",
        consumers
            .iter()
            .zip(&rebalances_at_kill)
            .map(|(c, &n)| c
                .events("rebalance")
                .iter()
                .skip(n)
                .map(|v| v["consumers"].clone())
                .collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
    let failed_over = killed.elapsed();
    let (window, drained) = failover_window(&all, kill_ms);
    let duplicates: usize = all.values().map(|d| d.len() - 1).sum();
    let lost = TOTAL as usize - all.len();
    eprintln!(
        "{test}: produced {TOTAL}, consumed {} distinct, {duplicates} duplicated, {lost} lost; \
         {drained} drained after the kill, first from a slave {window:?} after it; all consumed \
         {failed_over:?} after it",
        all.len()
    );
    assert_eq!(lost, 0);
    assert!(
        duplicates <= since_sync,
        "{duplicates} duplicates, more than the {since_sync} consumed since the slaves' last sync"
    );
    // Every queue's end was committed on a slave (the one the clients chose: the lowest id).
    let on_slave = until("the group to commit the queues' ends on a slave", || {
        slave_addrs.iter().any(|a| committed_all(*a, group, topic) == end)
    });
    eprintln!("{test}: the queues' ends committed on a slave {on_slave:?} after all was consumed");

    // The master comes back on its store and ports, with the offsets of before the kill.
    let (stale, file) = offsets_in_file(&dir.path().join("m"), group, topic);
    eprintln!("{test}: the master's consumerOffset.json at the kill: {stale:?}");
    assert!(stale.iter().zip(&end).any(|(s, e)| s < e), "the master's file holds {stale:?}:\n{file}");
    let restarted = Instant::now();
    let master = Broker::spawn(master.args.clone(), &master.dir);
    assert_eq!(master.remoting_addr(), master_addr);
    // Until the clients commit to it again, the slaves take the master's stale offsets over
    // theirs (SlaveSynchronize's putAll, as Java does): watched, not asserted.
    let mut slave_low = end;
    let back = until("the group to commit the queues' ends on the restarted master", || {
        for a in &slave_addrs {
            let o = committed_all(*a, group, topic);
            if o.iter().sum::<i64>() < slave_low.iter().sum::<i64>() {
                slave_low = o;
            }
        }
        committed_all(master_addr, group, topic) == end
    });
    eprintln!(
        "{test}: the restarted master holds the group's offsets {back:?} after its restart; \
         the slaves' lowest offsets meanwhile {slave_low:?}"
    );
    // Sent after the return, consumed once each, and committed on the master.
    produce_batches(&apps, &ns, topic, "p-after", 200);
    let end_after = max_all(master_addr, topic);
    let all = wait_delivered(&consumers, &keys("p-after", 0..200), "after the master's return");
    let again: usize = all.iter().filter(|(k, _)| k.0 == "p-after").map(|(_, d)| d.len() - 1).sum();
    assert_eq!(again, 0, "the messages sent after the return, once each");
    until("the group to commit the new ends on the master", || {
        committed_all(master_addr, group, topic) == end_after
    });
    until("the slaves to carry the master's offsets again", || {
        slave_addrs.iter().all(|a| committed_all(*a, group, topic) == end_after)
    });
    // The group pulls from the master: with both slaves gone, what only the master holds is
    // consumed too (the master stores it, answering SLAVE_NOT_AVAILABLE once it has dropped
    // its slaves).
    for s in &mut slaves {
        s.kill9();
    }
    until("the master to drop its slaves", || {
        master.status()["slaves"].as_array().is_some_and(Vec::is_empty)
    });
    let mut c = Client::connect(master_addr);
    for i in 0..20u64 {
        let props = format!("producer\u{1}p-master-only\u{2}seq\u{1}{i}\u{2}");
        let r = c.call(send_request(topic, (i % 4) as i32, &props, b"only on the master"));
        assert!(
            [ResponseCode::SUCCESS.0, ResponseCode::SLAVE_NOT_AVAILABLE.0].contains(&r.code),
            "the send to the master alone: {} {:?}",
            r.code,
            r.remark
        );
    }
    let all = wait_delivered(&consumers, &keys("p-master-only", 0..20), "from the master alone");
    assert!(all.iter().filter(|(k, _)| k.0 == "p-master-only").all(|(_, d)| d.len() == 1));
    eprintln!(
        "{test}: returned to the master {:?} after its restart; test took {:?}",
        restarted.elapsed(),
        started.elapsed()
    );
    for c in consumers {
        c.stop(BIG);
    }
    drop(master);
    drop(slaves);
    drop(namesrv);
}

/// `group`'s offsets of `topic`'s four queues in `consumerOffset.json` under `store` (-1 for
/// none), and the file.
fn offsets_in_file(store: &Path, group: &str, topic: &str) -> ([i64; 4], String) {
    let text = std::fs::read_to_string(store.join("config").join("consumerOffset.json")).unwrap_or_default();
    let table = ConsumerOffsetSerializeWrapper::decode(text.as_bytes())
        .ok()
        .and_then(|w| w.offset_table.get(&format!("{topic}@{group}")).cloned())
        .unwrap_or_default();
    (std::array::from_fn(|q| table.get(&(q as i32)).copied().unwrap_or(-1)), text)
}

/// Scenario 2, a mixed group: a Java 5.5.0 SYNC_MASTER with a logship slave that learned it
/// from the NameServer. A Java consumer reads part of the messages and commits on the Java
/// master; the logship slave carries those offsets; the Java master is killed -9; a new Java
/// consumer of the group reads the rest from the logship slave, starting at exactly the Java
/// master's committed offsets, and nothing is lost.
#[test]
fn java_consumers_resume_on_a_logship_slave_from_a_killed_java_master_s_offsets() {
    let test = "java_consumers_resume_on_a_logship_slave_from_a_killed_java_master_s_offsets";
    let Some(apps) = java_apps(CLIENT_5, test) else { return };
    let started = Instant::now();
    let dir = tempfile::Builder::new().prefix("logship-client-mixed-").tempdir().unwrap();
    let namesrv = Namesrv::start(&apps, &[]);
    let ns = namesrv.addr();
    let ns_set = format!("namesrvAddr={ns}");
    let mut java_master = JavaBroker::start(
        &apps,
        BrokerSpec::new("mixedGroup", "SYNC_MASTER", 0, &dir.path().join("jm")).namesrv(&ns),
    );
    let java_addr: SocketAddr = java_master.addr().parse().unwrap();
    let slave = Broker::start(
        "slave",
        &dir.path().join("ls"),
        free_port_pair(),
        &[
            "--set",
            &ns_set,
            "--set",
            "brokerClusterName=LogshipCluster",
            "--set",
            "brokerName=mixedGroup",
            "--set",
            "brokerId=1",
            "--set",
            "slaveSyncInterval=1000",
            // Java's default: an idle Java master sends a heartbeat every 5 s only (the test
            // brokers' 2 s would drop it, and a reconnecting empty slave is sent only the
            // master's last commit-log file, as Java's HAConnection starts one).
            "--set",
            "haHousekeepingInterval=20000",
        ],
    );
    let slave_addr = slave.remoting_addr();
    java_master.until("the logship slave to connect", BIG, |s| s["haConnections"].as_u64() >= Some(1));
    let topic = "MixedFailoverTopic";
    let group = "mixed_group";
    let created =
        apps.mqadmin(&["updateTopic", "-b", &java_master.addr(), "-t", topic, "-r", "4", "-w", "4"]);
    assert_eq!(created["ok"], true, "{created}");
    apps.wait_routed(&ns, topic);
    until("the logship slave to carry the topic", || {
        std::fs::read_to_string(dir.path().join("ls/config/topics.json")).is_ok_and(|t| t.contains(topic))
    });

    const TOTAL: u64 = 4_000;
    produce_batches(&apps, &ns, topic, "p-mixed", TOTAL);
    let end = max_all(java_addr, topic);
    let replicated = until("the logship slave to hold every message", || max_all(slave_addr, topic) == end);
    eprintln!("{test}: the logship slave held every message {replicated:?} after the send");
    // Part: the first member stops after 1,000 (and what it had pulled), committing its offsets
    // on the Java master as it shuts down.
    let first = apps
        .push_consume(&[
            "--namesrv",
            &ns,
            "--topic",
            topic,
            "--group",
            group,
            "--instance",
            "m1",
            "--from",
            "first",
            "--count",
            "1000",
            "--threads",
            "1",
        ])
        .finish(BIG);
    let before = deliveries(&first);
    let on_java = committed_all(java_addr, group, topic);
    assert!(
        on_java.iter().zip(&end).any(|(c, e)| c < e) && on_java.iter().any(|&c| c > 0),
        "part committed on the Java master: {on_java:?} of {end:?}"
    );
    let carried = until("the logship slave to carry the Java master's offsets", || {
        committed_all(slave_addr, group, topic) == on_java
    });
    eprintln!(
        "{test}: {} consumed from the Java master, which committed {on_java:?} of {end:?}; the \
         logship slave carried them {carried:?} later",
        before.len()
    );

    java_master.app.kill9();
    let kill_ms = now_ms();
    let killed = Instant::now();
    let rest = push_group(&apps, &ns, topic, group, &["m2"]);
    let want: BTreeSet<Key> =
        keys("p-mixed", 0..TOTAL).into_iter().filter(|k| !before.contains_key(k)).collect();
    let after = wait_delivered(&rest, &want, "from the logship slave");
    let all_consumed = killed.elapsed();
    let first_ms = after.values().flatten().map(|d| d.at_ms).min().unwrap();
    // Each queue resumed at the committed offset.
    for q in 0..4u64 {
        let resumed = after.values().flatten().filter(|d| d.queue == q).map(|d| d.offset).min();
        let want = on_java[q as usize];
        if want < end[q as usize] {
            assert_eq!(resumed, Some(want), "queue {q} resumed at the Java master's committed offset");
        }
    }
    let mut union = before.clone();
    for (k, mut d) in after {
        union.entry(k).or_default().append(&mut d);
    }
    let duplicates: usize = union.values().map(|d| d.len() - 1).sum();
    // The first member's shutdown may commit just before its last messages' offsets: those
    // are consumed again, and nothing else.
    let past_commit = before.values().flatten().filter(|d| d.offset >= on_java[d.queue as usize]).count();
    let lost = keys("p-mixed", 0..TOTAL).iter().filter(|k| !union.contains_key(*k)).count();
    eprintln!(
        "{test}: produced {TOTAL}, consumed {} distinct, {duplicates} duplicated, {lost} lost \
         ({past_commit} consumed past the commit); first from the logship slave {:?} after the \
         kill (a new consumer's start included), all {all_consumed:?} after it; test took {:?}",
        union.len(),
        Duration::from_millis(first_ms.saturating_sub(kill_ms)),
        started.elapsed()
    );
    assert_eq!(lost, 0);
    assert_eq!(
        duplicates, past_commit,
        "duplicates are exactly what the first member consumed past its committed offsets"
    );
    for c in rest {
        c.stop(BIG);
    }
    drop(slave);
    drop(namesrv);
}
