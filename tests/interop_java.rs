//! Interop with Apache RocketMQ's own Java store (`DefaultMessageStore`), both directions, each
//! scenario against RocketMQ 4.9.x (`HAService`) and 5.x (`DefaultHAService`). The Java store is
//! the reference for the wire and disk format. The harness is `tests/interop/rocketmq-java/`;
//! see `support/interop.rs` for when these tests skip.

#[path = "support/interop.rs"]
mod interop;
mod process;

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use interop::*;
use serde_json::Value;

const TOPIC: &str = "JavaTopic";
const QUEUES: u64 = 4;
/// Body size: about 250 messages per 1 MiB segment.
const SIZE: usize = 4000;
/// Messages that fill a little over three 1 MiB segments.
const BACKLOG: usize = 850;

macro_rules! against_each_rocketmq {
    ($($(#[$attr:meta])* $scenario:ident),* $(,)?) => {
        $(
            mod $scenario {
                use super::*;
                #[test] $(#[$attr])* fn rocketmq_4_9_8() { run(ROCKETMQ_4, stringify!($scenario), super::$scenario) }
                #[test] $(#[$attr])* fn rocketmq_5_5_1() { run(ROCKETMQ_5, stringify!($scenario), super::$scenario) }
            }
        )*
    };
}

against_each_rocketmq!(
    java_master_feeds_an_empty_logship_slave_byte_for_byte,
    java_sync_master_is_released_by_logship_acks,
    logship_sync_master_feeds_an_empty_java_slave_that_parses_every_message,
    empty_slaves_start_where_their_master_says,
    java_opens_a_logship_store_after_a_clean_stop_and_after_kill_9,
    logship_opens_a_java_store_after_a_clean_stop_and_after_kill_9,
    a_java_master_with_larger_segments_is_refused_without_corrupting_the_slave,
    roles_switch_a_logship_slave_of_java_becomes_the_master_of_that_java_store,
    a_java_slave_ahead_of_a_promoted_logship_master_fences_it,
    a_java_master_with_smaller_segments_is_refused_without_corrupting_the_slave,
);

/// Runs `scenario` against `rmq`'s harness, or skips (see `support/interop.rs`) without one.
fn run(rmq: Rocketmq, name: &str, scenario: fn(&Harness)) {
    if let Some(h) = harness(rmq, name) {
        scenario(&h);
    }
}

fn temp() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("logship-interop-").tempdir().unwrap()
}

fn addr(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

fn b64(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap()).unwrap()
}

/// The body of a message read through logship's HTTP API.
fn http_body(m: &Value) -> Vec<u8> {
    match m["bodyEncoding"].as_str() {
        Some("utf8") => m["body"].as_str().unwrap().as_bytes().to_vec(),
        _ => b64(&m["body"]),
    }
}

/// Asserts that every rolled segment among `puts` (Java `put` lines, in order) was closed with a
/// BLANK record ending at the segment end; returns the number of rolls.
fn assert_rolls_are_blank(root: &Path, segment: u64, puts: &[Value]) -> usize {
    let mut rolls = 0;
    for w in puts.windows(2) {
        let (prev, next) = (&w[0], &w[1]);
        let end = prev["offset"].as_u64().unwrap() + prev["size"].as_u64().unwrap();
        let at = next["offset"].as_u64().unwrap();
        if at != end {
            assert_eq!(at % segment, 0, "a gap that is not a roll: {end} to {at}");
            assert_blank_to_segment_end(root, segment, end);
            rolls += 1;
        }
    }
    rolls
}

/// Asserts that a message Java decoded and one logship served are the same message.
fn assert_same_message(java: &Value, logship: &Value) {
    assert_eq!(java["found"], true, "Java found no message: {java}");
    assert_eq!(java["commitLogOffset"], logship["physicalOffset"]);
    assert_eq!(java["queueOffset"], logship["queueOffset"]);
    assert_eq!(java["msgId"], logship["msgId"]);
    assert_eq!(java["tags"], logship["tags"]);
    assert_eq!(java["properties"], logship["properties"], "properties at {}", java["commitLogOffset"]);
    assert_eq!(b64(&java["body"]), http_body(logship), "body at {}", java["commitLogOffset"]);
    assert_eq!(java["bornTimestamp"], logship["bornTimestamp"]);
    assert_eq!(java["storeTimestamp"], logship["storeTimestamp"]);
}

/// How many of Java's `put` lines are messages the consume queues index (not prepared ones).
fn dispatched(puts: &[Value]) -> usize {
    assert!(puts.iter().any(|p| p["prepared"] == true) || puts.len() < 17);
    puts.iter().filter(|p| p["prepared"] == false).count()
}

/// Asserts that Java's and logship's consume queues hold the same messages.
fn assert_same_queues(theirs: &BTreeMap<u64, Value>, ours: &BTreeMap<u64, Value>) {
    assert!(theirs.keys().eq(ours.keys()), "Java and logship index different messages");
    for (offset, j) in theirs {
        assert_same_message(j, &ours[offset]);
    }
}

/// Every message of the test topic in Java's consume queues, by commit-log offset.
fn java_queues(java: &mut JavaStore) -> BTreeMap<u64, Value> {
    java_queues_of(java, TOPIC)
}

fn java_queues_of(java: &mut JavaStore, topic: &str) -> BTreeMap<u64, Value> {
    java.wait_dispatch();
    let mut all = BTreeMap::new();
    for q in 0..QUEUES as i32 {
        for m in java.queue_of(topic, q) {
            assert_eq!(m["found"], true, "queue {q} points at no message: {m}");
            assert_eq!(m["queueId"], q);
            all.insert(m["commitLogOffset"].as_u64().unwrap(), m);
        }
    }
    all
}

/// Every message of the test topic in a logship broker's consume queues, by commit-log offset,
/// once there are `expected` of them.
fn logship_queues(broker: &Logship, expected: usize) -> BTreeMap<u64, Value> {
    logship_queues_of(broker, TOPIC, expected)
}

fn logship_queues_of(broker: &Logship, topic: &str, expected: usize) -> BTreeMap<u64, Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let mut all = BTreeMap::new();
        for q in 0..QUEUES as i32 {
            for m in broker.queue(topic, q) {
                all.insert(m["physicalOffset"].as_u64().unwrap(), m);
            }
        }
        if all.len() >= expected || std::time::Instant::now() > deadline {
            assert_eq!(all.len(), expected, "messages in logship's consume queues");
            return all;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

// ---- 1. Java master -> empty logship slave ----------------------------------------------

fn java_master_feeds_an_empty_logship_slave_byte_for_byte(h: &Harness) {
    let (jdir, ldir) = (temp(), temp());
    let ha = free_port().to_string();
    let mut java =
        JavaStore::start(h, "ASYNC_MASTER", jdir.path(), SEG, &["--ha-port", &ha, "--heartbeat", "1000"]);
    let slave = Logship::start("slave", ldir.path(), &["--master", &addr(java.ha_port())]);
    java.until("the logship slave to connect", |s| s["haConnections"] == 1);
    slave.until("the slave to stream", |s| s["master"]["state"] == "STREAMING");

    // A backlog across more than three segments while the slave is stopped, then live puts.
    slave.sigstop();
    let mut puts = java.put(BACKLOG, SIZE);
    slave.sigcont();
    for _ in 0..10 {
        puts.extend(java.put(2, SIZE));
        let end = java.max_offset();
        slave.until("the slave to catch up a live put", |s| s["maxOffset"] == end);
    }
    assert!(puts.iter().all(|p| p["status"] == "PUT_OK"));
    let end = java.max_offset();
    assert!(assert_rolls_are_blank(jdir.path(), SEG, &puts) >= 3, "the backlog spans at least three rolls");
    assert_eq!(slave.status()["minOffset"], 0);
    assert_same_segments(jdir.path(), ldir.path(), SEG, 0, end);

    // logship's consume queues serve Java's messages as Java reads them (prepared transactional
    // messages in neither).
    let theirs = java_queues(&mut java);
    assert_eq!(theirs.len(), dispatched(&puts));
    let ours = logship_queues(&slave, theirs.len());
    assert_same_queues(&theirs, &ours);

    // 5.x allows retry and DLQ topics up to 255 characters (`%RETRY%` + a group of up to 120 +
    // `_` + a topic) and writes them in its V2 format, with a 2-byte topic length.
    if h.rocketmq.version.starts_with('5') {
        let long_topic = format!("%RETRY%{}_{}", "G".repeat(120), "T".repeat(100));
        let puts = java.put_to(&long_topic, 8, SIZE);
        assert!(puts.iter().all(|p| p["status"] == "PUT_OK"), "{puts:?}");
        let end = java.max_offset();
        slave.until("the slave to catch up the V2 messages", |s| s["maxOffset"] == end);
        assert_same_segments(jdir.path(), ldir.path(), SEG, 0, end);
        let theirs = java_queues_of(&mut java, &long_topic);
        assert_eq!(theirs.len(), dispatched(&puts));
        let ours = logship_queues_of(&slave, &long_topic, theirs.len());
        assert_same_queues(&theirs, &ours);

        // A plain topic that long is illegal in RocketMQ (its broker refuses it), but the Java
        // store indexes whatever it is given. logship replicates it byte for byte and does not
        // index it: the topic names a directory.
        let illegal = "T".repeat(150);
        let puts = java.put_to(&illegal, 3, SIZE);
        let end = java.max_offset();
        slave.until("the slave to catch up the illegal topic", |s| s["maxOffset"] == end);
        assert_same_segments(jdir.path(), ldir.path(), SEG, 0, end);
        assert_eq!(java_queues_of(&mut java, &illegal).len(), dispatched(&puts), "Java indexes it");
        // logship says why it does not index it.
        let log = slave.stderr_until("illegal topic or queue; not indexed");
        assert!(!log.contains("dispatch stopped"), "logship keeps indexing:\n{log}");
        // Later messages are indexed again.
        let puts = java.put(3, SIZE);
        let indexed = puts.iter().rfind(|p| p["prepared"] == false).unwrap();
        let last = indexed["offset"].as_u64().unwrap();
        let queue = indexed["queueId"].as_i64().unwrap() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !slave.queue(TOPIC, queue).iter().any(|m| m["physicalOffset"] == last) {
            let log = slave.stderr();
            let warned: Vec<&str> =
                log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).collect();
            assert!(
                std::time::Instant::now() < deadline,
                "logship stopped indexing after the illegal topic:\n{warned:#?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    drop(slave);
    java.shutdown();
}

// ---- 2. Java SYNC_MASTER, logship slave -------------------------------------------------

fn java_sync_master_is_released_by_logship_acks(h: &Harness) {
    for ack_on in ["WRITTEN", "FLUSHED"] {
        let (jdir, ldir) = (temp(), temp());
        let ha = free_port().to_string();
        let mut java = JavaStore::start(
            h,
            "SYNC_MASTER",
            jdir.path(),
            SEG,
            &["--ha-port", &ha, "--heartbeat", "1000", "--slave-timeout", "1500"],
        );
        let slave = Logship::start(
            "slave",
            ldir.path(),
            &[
                "--master",
                &addr(java.ha_port()),
                "--set",
                &format!("slaveAckOn={ack_on}"),
                "--set",
                "haSendHeartbeatInterval=1000",
                // Longer than the SIGSTOP below, so the slave keeps its connection.
                "--set",
                "haHousekeepingInterval=30000",
            ],
        );
        java.until("the logship slave to connect", |s| s["haConnections"] == 1);
        slave.until("the slave to stream", |s| s["master"]["state"] == "STREAMING");

        for p in java.put(5, SIZE) {
            assert_eq!(p["status"], "PUT_OK", "slaveAckOn={ack_on}: {p}");
        }
        slave.sigstop();
        for p in java.put(2, SIZE) {
            assert_eq!(p["status"], "FLUSH_SLAVE_TIMEOUT", "slaveAckOn={ack_on}, slave stopped: {p}");
        }
        slave.sigcont();
        let end = java.max_offset();
        slave.until("the slave to catch up", |s| s["maxOffset"] == end);
        for p in java.put(5, SIZE) {
            assert_eq!(p["status"], "PUT_OK", "slaveAckOn={ack_on}, slave resumed: {p}");
        }
        let end = java.max_offset();
        slave.until("the slave to hold every put", |s| s["maxOffset"] == end);
        assert_same_segments(jdir.path(), ldir.path(), SEG, 0, end);
        drop(slave);
        java.shutdown();
    }
}

// ---- 3. logship SYNC_MASTER -> empty Java slave -----------------------------------------

fn logship_sync_master_feeds_an_empty_java_slave_that_parses_every_message(h: &Harness) {
    let (ldir, jdir) = (temp(), temp());
    let master = Logship::start(
        "master",
        ldir.path(),
        &[
            "--set",
            "brokerRole=SYNC_MASTER",
            "--set",
            "slaveTimeout=3000",
            "--set",
            "haSendHeartbeatInterval=1000",
            "--set",
            "haHousekeepingInterval=5000",
        ],
    );
    let own_ha = free_port().to_string();
    let slave_args = ["--master", &addr(master.ha_port()), "--ha-port", &own_ha, "--heartbeat", "1000"];
    let mut java = JavaStore::start(h, "SLAVE", jdir.path(), SEG, &slave_args);
    master.until("the Java slave to report", |s| {
        s["slaves"].as_array().is_some_and(|a| a.len() == 1 && !a[0]["ackOffset"].is_null())
    });

    let mut replies = Vec::new();
    for i in 0..300 {
        let (code, r) = master.put(TOPIC, i, SIZE, QUEUES);
        assert_eq!(
            (code, &r["status"]),
            (200, &Value::from("PUT_OK")),
            "put {i}, released by the Java slave"
        );
        replies.push(r);
    }
    // kill -9 the Java slave while SYNC puts stream to it; logship keeps storing every put.
    let done = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        let producer = scope.spawn(|| {
            let mut got = Vec::new();
            for i in 300..600 {
                let (_, r) = master.put(TOPIC, i, SIZE, QUEUES);
                assert_eq!(r["stored"], true, "put {i} around the Java slave's death: {r}");
                got.push(r);
                done.store(i, std::sync::atomic::Ordering::Release);
            }
            got
        });
        while done.load(std::sync::atomic::Ordering::Acquire) < 400 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        java.kill9();
        replies.extend(producer.join().unwrap());
    });
    let statuses: Vec<&str> = replies[300..].iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert!(statuses[..100].iter().all(|s| *s == "PUT_OK"), "SYNC puts before the kill: {statuses:?}");
    assert_ne!(statuses.last(), Some(&"PUT_OK"), "no slave acked the last puts");
    java.restart();
    master.until("the restarted Java slave to report", |s| {
        s["slaves"].as_array().is_some_and(|a| a.len() == 1 && !a[0]["ackOffset"].is_null())
    });
    for i in 600..650 {
        let (code, r) = master.put(TOPIC, i, SIZE, QUEUES);
        assert_eq!(
            (code, &r["status"]),
            (200, &Value::from("PUT_OK")),
            "put {i} after the Java slave restarted"
        );
        replies.push(r);
    }
    let end = master.max_offset();
    java.until("the Java slave to catch up", |s| s["maxPhyOffset"] == end);
    assert_eq!(java.status()["minPhyOffset"], 0);
    assert_same_segments(ldir.path(), jdir.path(), SEG, 0, end);

    // Java's reput service dispatched every message, and Java parses each as logship wrote it.
    let theirs = java_queues(&mut java);
    assert_eq!(theirs.len(), replies.len(), "messages Java dispatched");
    let ours = logship_queues(&master, replies.len());
    for (i, r) in replies.iter().enumerate() {
        let offset = r["offset"].as_u64().unwrap();
        let j = java.look(offset);
        assert_eq!(j["topic"], TOPIC);
        assert_eq!(j["queueId"], r["queueId"]);
        assert_eq!(j["queueOffset"], r["queueOffset"]);
        assert_eq!(j["msgId"], r["msgId"]);
        assert_eq!(j["keys"], format!("key-{i} alt-{i}"));
        assert_eq!(b64(&j["body"]), body(b"logship", i as u64, SIZE));
        assert_eq!(j["properties"]["note"], format!("h\u{e9}llo {i}"));
        assert_same_message(&j, &ours[&offset]);
        assert_eq!(theirs[&offset]["msgId"], r["msgId"]);
    }
    java.shutdown();
}

// ---- 4. start policies -------------------------------------------------------------------

fn empty_slaves_start_where_their_master_says(h: &Harness) {
    // logship master (newSlaveStart=EARLIEST) -> empty Java slave: the whole log, in frames as
    // large as a segment allows (the largest batch a RocketMQ slave can read is 4 MiB - 12).
    {
        let (ldir, jdir) = (temp(), temp());
        let master = Logship::start(
            "master",
            ldir.path(),
            &["--set", "newSlaveStart=EARLIEST", "--set", "haTransferBatchSize=4194292"],
        );
        for i in 0..BACKLOG as u64 {
            assert_eq!(master.put(TOPIC, i, SIZE, QUEUES).0, 200);
        }
        let end = master.max_offset();
        assert!(end > 3 * SEG);
        let own_ha = free_port().to_string();
        let mut java = JavaStore::start(
            h,
            "SLAVE",
            jdir.path(),
            SEG,
            &["--master", &addr(master.ha_port()), "--ha-port", &own_ha, "--heartbeat", "1000"],
        );
        java.until("the Java slave to catch up", |s| s["maxPhyOffset"] == end);
        assert_eq!(java.status()["minPhyOffset"], 0, "EARLIEST sends the whole log");
        assert_same_segments(ldir.path(), jdir.path(), SEG, 0, end);
        assert_eq!(java_queues(&mut java).len(), BACKLOG);
        java.shutdown();
    }
    // Java master with a backlog -> empty logship slave: where Java says (its last file).
    {
        let (jdir, ldir) = (temp(), temp());
        let ha = free_port().to_string();
        let mut java =
            JavaStore::start(h, "ASYNC_MASTER", jdir.path(), SEG, &["--ha-port", &ha, "--heartbeat", "1000"]);
        java.put(BACKLOG, SIZE);
        let end = java.max_offset();
        let last_file = end - end % SEG;
        assert!(last_file >= 3 * SEG);
        let slave = Logship::start("slave", ldir.path(), &["--master", &addr(java.ha_port())]);
        let s = slave.until("the slave to catch up", |s| s["maxOffset"] == end);
        assert_eq!(s["minOffset"], last_file, "Java starts an empty slave at its last file");
        assert_same_segments(jdir.path(), ldir.path(), SEG, last_file, end);
        drop(slave);
        java.shutdown();
    }
}

// ---- 5. each opens the other's store directory -------------------------------------------

fn java_opens_a_logship_store_after_a_clean_stop_and_after_kill_9(h: &Harness) {
    for crash in [false, true] {
        let ldir = temp();
        let mut master = Logship::start("master", ldir.path(), &[]);
        let mut replies = Vec::new();
        for i in 0..BACKLOG as u64 {
            let (code, r) = master.put(TOPIC, i, SIZE, QUEUES);
            assert_eq!(code, 200);
            replies.push(r);
        }
        let end = master.max_offset();
        let ours = logship_queues(&master, BACKLOG);
        if crash {
            master.kill9();
        } else {
            master.terminate();
        }
        let ha = free_port().to_string();
        let mut java = JavaStore::start(h, "ASYNC_MASTER", ldir.path(), SEG, &["--ha-port", &ha]);
        assert_eq!(java.started["abortFileAtLoad"], crash, "logship's abort file says how it stopped");
        assert_eq!(java.started["maxPhyOffset"], end, "crash={crash}: Java recovered every message");
        let theirs = java_queues(&mut java);
        assert_eq!(theirs.len(), BACKLOG, "crash={crash}: Java's consume queues serve every message");
        assert_same_queues(&theirs, &ours);
        // Java appends after logship's messages, and logship then opens the store Java wrote.
        let puts = java.put(40, SIZE);
        assert_eq!(puts[0]["offset"], end);
        let theirs = java_queues(&mut java);
        assert_eq!(theirs.len(), BACKLOG + dispatched(&puts));
        java.shutdown();
        let master = Logship::start("master", ldir.path(), &[]);
        assert_same_queues(&theirs, &logship_queues(&master, theirs.len()));
    }
}

fn logship_opens_a_java_store_after_a_clean_stop_and_after_kill_9(h: &Harness) {
    for crash in [false, true] {
        let jdir = temp();
        let ha = free_port().to_string();
        let mut java = JavaStore::start(h, "ASYNC_MASTER", jdir.path(), SEG, &["--ha-port", &ha]);
        let puts = java.put(BACKLOG, SIZE);
        let end = java.max_offset();
        let theirs = java_queues(&mut java);
        assert_eq!(theirs.len(), dispatched(&puts));
        if crash {
            java.kill9();
        } else {
            java.shutdown();
        }
        assert_eq!(jdir.path().join("abort").exists(), crash, "Java's abort file says how it stopped");
        let mut master = Logship::start("master", jdir.path(), &[]);
        let kind = if crash { "kind=\"foreign_crash\"" } else { "kind=\"foreign_clean\"" };
        master.stderr_until(kind);
        assert_eq!(master.max_offset(), end, "crash={crash}: logship recovered every message");
        let ours = logship_queues(&master, theirs.len());
        assert_same_queues(&theirs, &ours);
        // logship appends after Java's last message, and Java then opens the store logship wrote.
        let mut appended = Vec::new();
        for i in 0..40 {
            let (code, r) = master.put(TOPIC, i, SIZE, QUEUES);
            assert_eq!(code, 200);
            appended.push(r);
        }
        assert!(appended[0]["offset"].as_u64().unwrap() >= end);
        let ours = logship_queues(&master, theirs.len() + appended.len());
        master.terminate();
        let ha = free_port().to_string();
        let mut java = JavaStore::start(h, "ASYNC_MASTER", jdir.path(), SEG, &["--ha-port", &ha]);
        assert_same_queues(&java_queues(&mut java), &ours);
        java.shutdown();
    }
}

// ---- 6. mismatched segment sizes ---------------------------------------------------------

fn a_java_master_with_larger_segments_is_refused_without_corrupting_the_slave(h: &Harness) {
    let (jdir, ldir) = (temp(), temp());
    let ha = free_port().to_string();
    let mut java =
        JavaStore::start(h, "ASYNC_MASTER", jdir.path(), 2 * SEG, &["--ha-port", &ha, "--heartbeat", "1000"]);
    let mut slave = Logship::start("slave", ldir.path(), &["--master", &addr(java.ha_port())]);
    java.until("the logship slave to connect", |s| s["haConnections"] == 1);
    java.put(400, SIZE);
    assert!(java.max_offset() > SEG + SIZE as u64);
    // Java's messages run on across logship's 1 MiB segment end: the append is refused.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let named = |log: &str| log.lines().any(|l| l.contains("append failed") && l.contains("1048576"));
    while !named(&slave.stderr()) {
        assert!(std::time::Instant::now() < deadline, "no error naming the segment end:\n{}", slave.stderr());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let held = slave.max_offset();
    assert!(held <= SEG, "the slave appended past its segment end: {held}");
    slave.terminate();
    // The slave's store holds a clean prefix of Java's log and opens without repair.
    let store = logship::store::CommitLog::open(ldir.path(), {
        let mut c = logship::store::StoreConfig::default();
        c.mapped_file_size_commit_log = SEG;
        c.max_message_size = 256 * 1024;
        c
    })
    .unwrap_or_else(|e| panic!("the slave's store does not open: {e:?}\n{}", slave.stderr()));
    assert_eq!(store.max_offset(), held);
    if held > 0 {
        assert_same_segments(jdir.path(), ldir.path(), SEG, 0, held);
    }
    drop(store);
    java.shutdown();
}

fn a_java_master_with_smaller_segments_is_refused_without_corrupting_the_slave(h: &Harness) {
    let (jdir, ldir) = (temp(), temp());
    let ha = free_port().to_string();
    let mut java =
        JavaStore::start(h, "ASYNC_MASTER", jdir.path(), SEG, &["--ha-port", &ha, "--heartbeat", "1000"]);
    let mut slave =
        Logship::start_with_segment("slave", ldir.path(), 2 * SEG, &["--master", &addr(java.ha_port())]);
    java.until("the logship slave to connect", |s| s["haConnections"] == 1);
    let puts = java.put(400, SIZE);
    // Java's BLANK record ends its 1 MiB segment in the middle of logship's 2 MiB one.
    let roll = puts.iter().map(|p| p["offset"].as_u64().unwrap()).find(|&o| o == SEG).expect("Java rolled");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let named = |log: &str| log.lines().any(|l| l.contains("1048576") && l.contains("2097152"));
    while !named(&slave.stderr()) {
        assert!(
            std::time::Instant::now() < deadline,
            "no error naming both segment sizes:\n{}",
            slave.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let held = slave.max_offset();
    assert!(held < roll, "the slave stored Java's BLANK record as if its segment went on: {held}");
    slave.terminate();
    let store = logship::store::CommitLog::open(ldir.path(), {
        let mut c = logship::store::StoreConfig::default();
        c.mapped_file_size_commit_log = 2 * SEG;
        c.max_message_size = 256 * 1024;
        c
    })
    .unwrap();
    assert_eq!(store.max_offset(), held);
    drop(store);
    java.shutdown();
}

// ---- failover: the roles switch -----------------------------------------------------------

fn roles_switch_a_logship_slave_of_java_becomes_the_master_of_that_java_store(h: &Harness) {
    let (jdir, ldir) = (temp(), temp());
    let ha = free_port().to_string();
    let mut java =
        JavaStore::start(h, "ASYNC_MASTER", jdir.path(), SEG, &["--ha-port", &ha, "--heartbeat", "1000"]);
    let mut slave = Logship::start("slave", ldir.path(), &["--master", &addr(java.ha_port())]);
    java.until("the logship slave to connect", |s| s["haConnections"] == 1);
    java.put(300, SIZE);
    let end = java.max_offset();
    slave.until("the slave to catch up", |s| s["maxOffset"] == end);
    slave.terminate();
    java.shutdown();

    // The logship slave becomes a SYNC_MASTER; the old Java master follows it.
    let master = Logship::start(
        "master",
        ldir.path(),
        &[
            "--set",
            "brokerRole=SYNC_MASTER",
            "--set",
            "haSendHeartbeatInterval=1000",
            "--set",
            "haHousekeepingInterval=5000",
        ],
    );
    let own_ha = free_port().to_string();
    let mut java = JavaStore::start(
        h,
        "SLAVE",
        jdir.path(),
        SEG,
        &["--master", &addr(master.ha_port()), "--ha-port", &own_ha, "--heartbeat", "1000"],
    );
    master.until("the Java slave to report its log end", |s| {
        s["slaves"].as_array().is_some_and(|a| a.len() == 1 && a[0]["ackOffset"] == end)
    });
    for i in 0..300 {
        let (code, r) = master.put(TOPIC, i, SIZE, QUEUES);
        assert_eq!(
            (code, &r["status"]),
            (200, &Value::from("PUT_OK")),
            "put {i}, released by the old Java master"
        );
    }
    let end = master.max_offset();
    java.until("the Java slave to catch up", |s| s["maxPhyOffset"] == end);
    assert_same_segments(jdir.path(), ldir.path(), SEG, 0, end);
    let theirs = java_queues(&mut java);
    assert_same_queues(&theirs, &logship_queues(&master, theirs.len()));
    java.shutdown();
}

fn a_java_slave_ahead_of_a_promoted_logship_master_fences_it(h: &Harness) {
    let (jdir, ldir) = (temp(), temp());
    let ha = free_port().to_string();
    let mut java =
        JavaStore::start(h, "ASYNC_MASTER", jdir.path(), SEG, &["--ha-port", &ha, "--heartbeat", "1000"]);
    let mut slave = Logship::start("slave", ldir.path(), &["--master", &addr(java.ha_port())]);
    java.until("the logship slave to connect", |s| s["haConnections"] == 1);
    java.put(200, SIZE);
    let held = java.max_offset();
    slave.until("the slave to catch up", |s| s["maxOffset"] == held);
    // The slave stops; the Java master takes more messages, then is replaced by the lagging slave.
    slave.terminate();
    java.put(100, SIZE);
    let java_end = java.max_offset();
    java.shutdown();

    // Only a trusted (allow-listed) replica's report can fence a master; strangers are refused.
    let master = Logship::start("master", ldir.path(), &["--set", "haReplicaAllowList=127.0.0.1"]);
    let own_ha = free_port().to_string();
    let mut java = JavaStore::start(
        h,
        "SLAVE",
        jdir.path(),
        SEG,
        &["--master", &addr(master.ha_port()), "--ha-port", &own_ha, "--heartbeat", "1000"],
    );
    let s = master.until("the master to fence itself", |s| !s["fence"].is_null());
    assert!(
        s["fence"].as_str().unwrap().contains(&java_end.to_string()),
        "the fence names the slave's end: {s}"
    );
    let (code, r) = master.put(TOPIC, 0, SIZE, QUEUES);
    assert_eq!(
        (code, &r["status"], &r["stored"]),
        (503, &Value::from("SERVICE_NOT_AVAILABLE"), &Value::from(false))
    );
    assert_eq!(master.max_offset(), held);
    // The Java slave keeps the messages the logship master lacks.
    assert_eq!(java.max_offset(), java_end);
    java.shutdown();
}
