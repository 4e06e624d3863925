//! The oracle for logship's remoting tests: unchanged RocketMQ applications against real Java
//! brokers. A Java NameServer, a Java SYNC_MASTER and its SLAVE (one broker group), then the Java
//! client (5.5.0 and 4.9.7 lines, each against brokers of its own line) and the Go client
//! produce with every send mode, push-consumer groups consume everything, a lite pull consumer
//! seeks by timestamp, and mqadmin reports on it all. The logship tests of issues 23 and 24 run
//! the same scenarios against logship brokers (see `support/apps.rs`).
//!
//! Skips without Java (or Go, for the Go client) unless `LOGSHIP_REQUIRE_JAVA=1` /
//! `LOGSHIP_REQUIRE_GO=1`. Also checks the committed remoting captures
//! (`tests/data/remoting/captures/`); `record_captures` (ignored) records them again.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use support::apps::*;

/// Messages per send mode: sync, async, one-way and batch, four modes.
const PER_MODE: u64 = 50;
const TAGS: &str = "TagA,TagB";
const BIG: Duration = Duration::from_secs(180);

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// One broker group on a NameServer: SYNC_MASTER `name` and its SLAVE, both on `apps`' line.
struct Group {
    namesrv: Namesrv,
    master: JavaBroker,
    slave: JavaBroker,
    _dir: tempfile::TempDir,
}

fn group(apps: &JavaApps, name: &str) -> Group {
    let dir = tempfile::Builder::new().prefix("logship-apps-").tempdir().unwrap();
    let namesrv = Namesrv::start(apps, &[]);
    let master = JavaBroker::start(
        apps,
        BrokerSpec::new(name, "SYNC_MASTER", 0, &dir.path().join("master")).namesrv(&namesrv.addr()),
    );
    // After the master registered: the slave's first registration answers it the master's
    // address (HA and metadata sync), so it connects at once.
    let mut slave = JavaBroker::start(
        apps,
        BrokerSpec::new(name, "SLAVE", 1, &dir.path().join("slave")).namesrv(&namesrv.addr()),
    );
    let master_addr = master.addr();
    slave.until("the slave to learn its master", BIG, |s| s["masterAddr"] == master_addr.as_str());
    let mut g = Group { namesrv, master, slave, _dir: dir };
    g.master.until("the slave's HA connection", BIG, |s| s["haConnections"].as_u64() >= Some(1));
    g
}

/// `(producer instance, seq)` of each message a consumer's `msg` lines consumed successfully,
/// with how often.
fn consumed(lines: &[Value]) -> BTreeMap<(String, u64), u64> {
    let mut m = BTreeMap::new();
    for v in events(lines, "msg") {
        if v["answer"] != "SUCCESS" && !v["answer"].is_null() {
            continue;
        }
        let producer = v["props"]["producer"].as_str().unwrap_or("?").to_string();
        let seq: u64 = v["props"]["seq"].as_str().and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
        *m.entry((producer, seq)).or_default() += 1;
    }
    m
}

/// Waits until the consumers of `group` together consumed every one of `expected`, then stops
/// them cleanly (which commits their offsets); returns their lines.
fn consume_all(mut consumers: Vec<App>, expected: &BTreeSet<(String, u64)>) -> Vec<Vec<Value>> {
    let deadline = Instant::now() + BIG;
    loop {
        let mut union = BTreeSet::new();
        for c in &consumers {
            union.extend(consumed(&c.lines()).into_keys());
        }
        if expected.is_subset(&union) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the group consumed {} of {} messages; missing e.g. {:?}\n{}",
            expected.intersection(&union).count(),
            expected.len(),
            expected.difference(&union).take(5).collect::<Vec<_>>(),
            consumers.iter_mut().map(|c| c.stderr()).collect::<Vec<_>>().join("\n---\n")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    consumers.into_iter().map(|c| c.stop(BIG)).collect()
}

/// An orderly consumer: the offsets of each queue it received go up, one by one.
fn assert_in_order_per_queue(lines: &[Value]) {
    let mut last: BTreeMap<(String, u64), i64> = BTreeMap::new();
    for v in events(lines, "msg") {
        let key = (v["broker"].as_str().unwrap_or("").to_string(), v["queue"].as_u64().unwrap());
        let offset = v["queueOffset"].as_i64().unwrap();
        if let Some(prev) = last.insert(key.clone(), offset) {
            assert_eq!(offset, prev + 1, "queue {key:?}: offset {offset} after {prev}");
        }
    }
}

/// Across a group: each queue's offsets were consumed exactly once each, from 0 with no gap.
fn assert_each_queue_offset_once(all: &[Vec<Value>]) {
    let mut seen: BTreeMap<(String, u64), Vec<i64>> = BTreeMap::new();
    for lines in all {
        for v in events(lines, "msg") {
            let key = (v["broker"].as_str().unwrap_or("").to_string(), v["queue"].as_u64().unwrap());
            seen.entry(key).or_default().push(v["queueOffset"].as_i64().unwrap());
        }
    }
    for (queue, mut offsets) in seen {
        offsets.sort_unstable();
        let want: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(offsets, want, "queue {queue:?}: every offset once");
    }
}

/// Waits until a push consumer's latest allocation of `topic` is among `members` consumers.
fn wait_rebalanced(c: &mut App, topic: &str, members: u64) {
    let deadline = Instant::now() + BIG;
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

fn expected(instance: &str, range: std::ops::Range<u64>) -> BTreeSet<(String, u64)> {
    range.map(|i| (instance.to_string(), i)).collect()
}

/// Every `send` line of a producer: SEND_OK, and every message its tag, keys and properties.
fn assert_sent_ok(lines: &[Value], messages: u64) {
    let s = summary(lines);
    assert_eq!(s["errors"], 0, "send errors: {:?}", events(lines, "send_error"));
    assert_eq!(s["messages"], messages, "summary {s}");
    let statuses = send_statuses(lines);
    for (status, n) in &statuses {
        assert_eq!(status, "SEND_OK", "{n} messages answered {status}");
    }
    for v in events(lines, "send") {
        // The broker's id: store host (8 bytes for IPv4) and commit-log offset, in hex; a batch
        // answers one per message, comma-separated.
        let ids: Vec<&str> = v["offsetMsgId"].as_str().unwrap().split(',').collect();
        assert_eq!(ids.len() as u64, v["n"].as_u64().unwrap(), "offsetMsgIds in {v}");
        assert!(ids.iter().all(|s| s.len() == 32), "offsetMsgId in {v}");
        assert!(v["queueOffset"].as_i64().is_some_and(|o| o >= 0), "queueOffset in {v}");
    }
}

/// The received messages carry what the producer put: tags, keys, user properties, bodies.
fn assert_message_shape(lines: &[Value], size: u64) {
    for v in events(lines, "msg") {
        let seq: u64 = v["props"]["seq"].as_str().unwrap().parse().unwrap();
        let producer = v["props"]["producer"].as_str().unwrap();
        assert_eq!(v["keys"], format!("key-{seq}"), "keys of {v}");
        let tags: Vec<&str> = TAGS.split(',').collect();
        assert_eq!(v["tags"], tags[(seq % 2) as usize], "tags of {v}");
        assert_eq!(v["props"]["color"], "blue", "user property of {v}");
        assert_eq!(v["bodyLen"], size, "body of {v}");
        assert!(v["bodyCrc"].as_str().is_some(), "body crc of {v}");
        assert!(producer.starts_with("p-"), "producer of {v}");
    }
}

/// The Java client on `line`, against brokers of the same line: every send mode, a push group
/// of two (concurrent, or orderly), a lite pull consumer seeking by timestamp, and mqadmin.
fn java_scenario(line: ClientLine, orderly: bool, test: &str) {
    let Some(apps) = java_apps(line, test) else { return };
    let started = Instant::now();
    let mut g = group(&apps, "broker-a");
    let ns = g.namesrv.addr();
    let topic = "AppsTopic";
    let size = 300u64;
    let count = PER_MODE.to_string();
    let size_arg = size.to_string();
    let common = [
        "--namesrv",
        &ns,
        "--topic",
        topic,
        "--count",
        &count,
        "--size",
        &size_arg,
        "--tags",
        TAGS,
        "--props",
        "color=blue",
    ];
    let set_up = started.elapsed();

    // The topic, as an operator creates it: four queues on the group's master.
    let master_addr = g.master.addr();
    let created =
        apps.mqadmin(&["updateTopic", "-n", &ns, "-b", &master_addr, "-t", topic, "-r", "4", "-w", "4"]);
    assert_eq!(created["ok"], true, "{created}");

    // A push consumer group of two.
    let group_name = "apps_group";
    let member = |instance: &str| {
        let mut args =
            vec!["--namesrv", &ns, "--topic", topic, "--group", group_name, "--instance", instance];
        if orderly {
            args.push("--orderly");
        }
        apps.push_consume(&args)
    };
    let mut consumers = vec![member("c1"), member("c2")];
    // Both members hold queues before anything is sent: otherwise the first would consume
    // everything before the group rebalanced.
    for c in &mut consumers {
        wait_rebalanced(c, topic, 2);
    }
    // Sync, async and one-way (messages 0..150 of p-java); then, a second later, batches
    // (messages 0..50 of p-java-batch).
    let mut args = common.to_vec();
    args.extend(["--instance", "p-java", "--mode", "sync,async,oneway"]);
    let first = apps.produce(&args).finish(BIG);
    std::thread::sleep(Duration::from_millis(1200));
    let between = now_ms();
    std::thread::sleep(Duration::from_millis(1200));
    let mut args = common.to_vec();
    args.extend(["--instance", "p-java-batch", "--mode", "batch", "--batch-size", "10"]);
    let batches = apps.produce(&args).finish(BIG);
    assert_eq!(send_statuses(&first)["SEND_OK"], 2 * PER_MODE, "sync and async all SEND_OK");
    assert_eq!(summary(&first)["statuses"]["ONEWAY"], PER_MODE);
    assert_eq!(summary(&first)["errors"], 0, "{:?}", events(&first, "send_error"));
    assert_sent_ok(&batches, PER_MODE);
    assert_eq!(events(&batches, "send").len() as u64, PER_MODE / 10, "one send line per batch of 10");
    for v in events(&batches, "send") {
        assert_eq!(v["msgIds"].as_array().map(Vec::len), Some(10), "a batch's ids: {v}");
    }
    let produced = started.elapsed();

    let want: BTreeSet<(String, u64)> = expected("p-java", 0..3 * PER_MODE)
        .into_iter()
        .chain(expected("p-java-batch", 0..PER_MODE))
        .collect();
    let all = consume_all(consumers, &want);
    let mut total = 0u64;
    let mut each = Vec::new();
    assert_each_queue_offset_once(&all);
    for lines in &all {
        if orderly {
            assert_in_order_per_queue(lines);
        }
        assert_message_shape(lines, size);
        let s = summary(lines);
        total += s["received"].as_u64().unwrap();
        each.push(s["received"].as_u64().unwrap());
    }
    assert_eq!(total, 4 * PER_MODE, "every message once across the group ({each:?})");
    assert!(each.iter().all(|&n| n > 0), "both members of the group got queues: {each:?}");
    let consumed_at = started.elapsed();

    // The lite pull consumer, from the timestamp between the two runs: exactly the batches.
    // Java's answer to SEARCH_OFFSET_BY_TIMESTAMP differs by line: 5.x seeks to the first
    // message stored at or after the time; 4.9.7 to the last one stored before it (its binary
    // search settles on the left neighbour when no message has the exact time).
    let ts = between.to_string();
    let pull = apps
        .lite_pull(&[
            "--namesrv",
            &ns,
            "--topic",
            topic,
            "--group",
            "apps_lite",
            "--timestamp",
            &ts,
            "--idle-ms",
            "3000",
            "--duration-ms",
            "60000",
        ])
        .finish(BIG);
    let seeks = events(&pull, "seek");
    assert_eq!(seeks.len(), 4, "four queues: {seeks:?}");
    let pulled = events(&pull, "msg");
    let mut first_per_queue: BTreeMap<u64, &Value> = BTreeMap::new();
    for v in &pulled {
        first_per_queue.entry(v["queue"].as_u64().unwrap()).or_insert(v);
    }
    let before: Vec<&&Value> =
        pulled.iter().filter(|v| v["storeTimestamp"].as_u64().unwrap() < between).collect();
    let after = pulled.len() - before.len();
    assert_eq!(after as u64, PER_MODE, "the lite pull consumer got every batch message");
    if line == CLIENT_4 {
        assert_eq!(before.len(), 4, "4.9.7: one message before the time per queue: {before:?}");
        for v in &before {
            assert_eq!(first_per_queue[&v["queue"].as_u64().unwrap()], **v, "4.9.7 starts one early");
        }
    } else {
        assert!(before.is_empty(), "5.x: nothing stored before the time: {before:?}");
    }

    // mqadmin.
    let cluster = apps.mqadmin(&["clusterList", "-n", &ns]);
    assert_eq!(cluster["ok"], true, "{cluster}");
    let text = cluster["text"].as_str().unwrap();
    assert!(text.contains("broker-a") && text.contains(&master_addr), "clusterList:\n{text}");
    assert!(text.contains(&g.slave.addr()), "clusterList names the slave:\n{text}");

    let route = apps.mqadmin(&["topicRoute", "-n", &ns, "-t", topic]);
    assert_eq!(route["ok"], true, "{route}");
    // fastjson's output, not JSON: brokerAddrs has integer keys ({0:"127.0.0.1:..."}).
    let rtext = route["text"].as_str().unwrap();
    assert!(rtext.contains("\"brokerName\":\"broker-a\""), "topicRoute:\n{rtext}");
    assert!(rtext.contains("\"writeQueueNums\":4"), "topicRoute:\n{rtext}");
    assert!(rtext.contains(&format!("0:\"{master_addr}\"")), "the route names the master as id 0:\n{rtext}");

    let status = apps.mqadmin(&["topicStatus", "-n", &ns, "-t", topic]);
    assert_eq!(status["ok"], true, "{status}");
    let max_sum: u64 = status["text"]
        .as_str()
        .unwrap()
        .lines()
        .filter(|l| l.contains("broker-a"))
        .filter_map(|l| l.split_whitespace().nth(3).and_then(|x| x.parse::<u64>().ok()))
        .sum();
    assert_eq!(max_sum, 4 * PER_MODE, "topicStatus max offsets add up to every message:\n{}", status["text"]);

    let broker = apps.mqadmin(&["brokerStatus", "-n", &ns, "-b", &master_addr]);
    assert_eq!(broker["ok"], true, "{broker}");
    assert!(
        broker["text"].as_str().unwrap().contains("msgPutTotalTodayNow"),
        "brokerStatus:\n{}",
        broker["text"]
    );

    let progress = apps.mqadmin(&["consumerProgress", "-n", &ns, "-g", group_name]);
    assert_eq!(progress["ok"], true, "{progress}");
    let ptext = progress["text"].as_str().unwrap();
    assert!(ptext.contains(topic), "consumerProgress:\n{ptext}");
    // "Diff Total: 0" on 4.9.7, "Consume Diff Total: 0" on 5.x.
    let diff = ptext
        .lines()
        .find(|l| l.starts_with("Diff Total") || l.starts_with("Consume Diff Total"))
        .unwrap_or_else(|| panic!("no Diff Total line in consumerProgress:\n{ptext}"));
    assert!(diff.trim_end().ends_with(": 0"), "the group committed every offset: {diff}\n{ptext}");

    let one = events(&first, "send")[0];
    let id = one["offsetMsgId"].as_str().unwrap();
    // 5.x wants the topic too (-t); 4.9.7 has no such option.
    let mut query_args = vec!["queryMsgById", "-n", &ns, "-i", id];
    if line == CLIENT_5 {
        query_args.extend(["-t", topic]);
    }
    let query = apps.mqadmin(&query_args);
    assert_eq!(query["ok"], true, "{query}");
    let qtext = query["text"].as_str().unwrap();
    let key = format!("key-{}", one["i"]);
    assert!(qtext.contains(&key) && qtext.contains(topic), "queryMsgById:\n{qtext}");
    let admin_done = started.elapsed();

    // The slave has every message too (SYNC_MASTER answered SEND_OK only once it had them).
    let master_max = g.master.status()["maxPhyOffset"].as_u64().unwrap();
    g.slave.until("the slave to hold everything", BIG, |s| s["maxPhyOffset"].as_u64() >= Some(master_max));

    let Group { namesrv, master, slave, _dir } = g;
    slave.stop();
    master.stop();
    drop(namesrv);
    eprintln!(
        "{test} ({}): set up {:.1} s, produced {:.1} s, consumed {:.1} s, mqadmin {:.1} s, total {:.1} s",
        line.version,
        set_up.as_secs_f64(),
        (produced - set_up).as_secs_f64(),
        (consumed_at - produced).as_secs_f64(),
        (admin_done - consumed_at).as_secs_f64(),
        started.elapsed().as_secs_f64(),
    );
}

#[test]
fn java_5_5_0_clients_produce_every_send_mode_and_a_concurrent_push_group_consumes_everything() {
    java_scenario(
        CLIENT_5,
        false,
        "java_5_5_0_clients_produce_every_send_mode_and_a_concurrent_push_group_consumes_everything",
    );
}

#[test]
fn java_4_9_7_clients_produce_every_send_mode_and_an_orderly_push_group_consumes_everything() {
    java_scenario(
        CLIENT_4,
        true,
        "java_4_9_7_clients_produce_every_send_mode_and_an_orderly_push_group_consumes_everything",
    );
}

/// The Go client against the same Java group (5.5.0): every send mode, and a Go push group of
/// two consumes everything; mqadmin sees the group's offsets committed.
#[test]
fn go_client_produces_every_send_mode_and_a_go_push_group_consumes_everything() {
    let test = "go_client_produces_every_send_mode_and_a_go_push_group_consumes_everything";
    let Some(go) = go_client(test) else { return };
    let Some(apps) = java_apps(CLIENT_5, test) else { return };
    let started = Instant::now();
    let g = group(&apps, "broker-go");
    let ns = g.namesrv.addr();
    let topic = "GoTopic";
    let master_addr = g.master.addr();
    let created =
        apps.mqadmin(&["updateTopic", "-n", &ns, "-b", &master_addr, "-t", topic, "-r", "4", "-w", "4"]);
    assert_eq!(created["ok"], true, "{created}");

    let group_name = "go_group";
    let mut consumers: Vec<App> = ["g1", "g2"]
        .iter()
        .map(|i| go.consume(&["--namesrv", &ns, "--topic", topic, "--group", group_name, "--instance", i]))
        .collect();
    for c in &mut consumers {
        wait_rebalanced(c, topic, 2);
    }

    let count = PER_MODE.to_string();
    let mut want = BTreeSet::new();
    for mode in ["sync", "async", "oneway", "batch"] {
        let instance = format!("p-go-{mode}");
        let lines = go
            .produce(&[
                "--namesrv",
                &ns,
                "--topic",
                topic,
                "--instance",
                &instance,
                "--mode",
                mode,
                "--count",
                &count,
                "--size",
                "300",
                "--tags",
                TAGS,
                "--props",
                "color=blue",
                "--batch-size",
                "10",
            ])
            .finish(BIG);
        let s = summary(&lines);
        assert_eq!(s["errors"], 0, "{mode}: {:?}", events(&lines, "send_error"));
        assert_eq!(s["messages"], PER_MODE, "{mode}: {s}");
        if mode == "oneway" {
            assert_eq!(s["statuses"]["ONEWAY"], PER_MODE, "{s}");
        } else {
            assert_sent_ok(&lines, PER_MODE);
        }
        if mode == "batch" {
            assert_eq!(events(&lines, "send").len() as u64, PER_MODE / 10, "one send line per batch");
        }
        want.extend(expected(&instance, 0..PER_MODE));
    }
    let all = consume_all(consumers, &want);
    assert_each_queue_offset_once(&all);
    let mut each = Vec::new();
    for lines in &all {
        assert_message_shape(lines, 300);
        each.push(summary(lines)["received"].as_u64().unwrap());
    }
    assert_eq!(each.iter().sum::<u64>(), 4 * PER_MODE, "every message once across the group ({each:?})");
    assert!(each.iter().all(|&n| n > 0), "both members of the group got queues: {each:?}");

    let progress = apps.mqadmin(&["consumerProgress", "-n", &ns, "-g", group_name]);
    let ptext = progress["text"].as_str().unwrap();
    let diff = ptext
        .lines()
        .find(|l| l.starts_with("Consume Diff Total"))
        .unwrap_or_else(|| panic!("no Diff Total line in consumerProgress:\n{ptext}"));
    assert!(diff.trim_end().ends_with(": 0"), "the Go group committed every offset: {diff}\n{ptext}");

    let Group { namesrv, master, slave, _dir } = g;
    slave.stop();
    master.stop();
    drop(namesrv);
    eprintln!("{test}: total {:.1} s", started.elapsed().as_secs_f64());
}
