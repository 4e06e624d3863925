//! Unchanged RocketMQ consumers against logship: a logship SYNC_MASTER with two logship slaves,
//! registered with the real Apache NameServer, and the Java client (5.5.0 and 4.9.7 lines).
//! A push consumer group of three (concurrent, then orderly) consumes every message exactly once
//! per queue and commits its offsets; a consumer started again in the group resumes from the
//! committed offsets; RECONSUME_LATER goes through `%RETRY%group` to `%DLQ%group`; a lite pull
//! consumer seeks by timestamp.
//!
//! Issue 24's scenarios 4 and 5: a logship slave with only `namesrvAddr` follows its master to
//! a new address through the NameServer; with two logship groups serving one topic, a producer
//! (Java 5.5.0 with `sendLatencyFaultEnable`, or Go) goes on with the other group when one
//! master is killed with -9, and every `SEND_OK` is stored.
//!
//! Skips without Java unless `LOGSHIP_REQUIRE_JAVA=1` (the Go test without Go unless
//! `LOGSHIP_REQUIRE_GO=1`).

mod process;
mod remoting_support;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use logship_remoting::header::GetMaxOffsetRequestHeader;
use logship_remoting::{RemotingCommand, RequestCode};
use process::{Broker, free_port_pair};
use remoting_support::{Client, send_request};
use serde_json::Value;
use support::apps::*;

const BIG: Duration = Duration::from_secs(180);
const TAGS: &str = "TagA,TagB";

/// A logship SYNC_MASTER and two slaves, all registered with `namesrv`.
struct Group {
    master: Broker,
    slaves: Vec<Broker>,
}

fn group(dir: &Path, namesrv: &str, name: &str) -> Group {
    group_of(dir, namesrv, name, 2)
}

/// Creates `topic` on the master (a send auto-creates it with four queues, and the master
/// registers it at once), then waits until the NameServer routes it.
fn create_topic(apps: &JavaApps, g: &Group, ns: &str, topic: &str) {
    let mut c = Client::connect(g.master.remoting_addr());
    let r = c.call(send_request(topic, 0, "", b"seed"));
    assert_eq!(r.code, 0, "the seed send: {:?}", r.remark);
    apps.wait_routed(ns, topic);
}

/// `(producer, seq)` of every message consumed successfully, with how often.
fn consumed(lines: &[Value]) -> BTreeMap<(String, u64), u64> {
    let mut m = BTreeMap::new();
    for v in events(lines, "msg") {
        if v["answer"] != "SUCCESS" && !v["answer"].is_null() {
            continue;
        }
        let Some(producer) = v["props"]["producer"].as_str() else { continue };
        let seq: u64 = v["props"]["seq"].as_str().and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
        *m.entry((producer.to_string(), seq)).or_default() += 1;
    }
    m
}

fn expected(instance: &str, range: std::ops::Range<u64>) -> BTreeSet<(String, u64)> {
    range.map(|i| (instance.to_string(), i)).collect()
}

/// Waits until `consumers` together consumed all of `want`, then stops them cleanly (which
/// commits their offsets); returns their lines.
fn consume_all(consumers: Vec<App>, want: &BTreeSet<(String, u64)>) -> Vec<Vec<Value>> {
    consume_all_then(consumers, want, || {})
}

/// [`consume_all`], running `before_stop` once everything is consumed.
fn consume_all_then(
    mut consumers: Vec<App>,
    want: &BTreeSet<(String, u64)>,
    before_stop: impl FnOnce(),
) -> Vec<Vec<Value>> {
    let deadline = Instant::now() + BIG;
    loop {
        let mut union = BTreeSet::new();
        for c in &consumers {
            union.extend(consumed(&c.lines()).into_keys());
        }
        if want.is_subset(&union) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the group consumed {} of {}; missing e.g. {:?}\n{}",
            want.intersection(&union).count(),
            want.len(),
            want.difference(&union).take(5).collect::<Vec<_>>(),
            consumers.iter_mut().map(|c| c.stderr()).collect::<Vec<_>>().join("\n---\n")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    before_stop();
    consumers.into_iter().map(|c| c.stop(BIG)).collect()
}

/// Waits until `group` committed the end of each of `topic`'s four queues on the master.
fn wait_committed(g: &Group, group: &str, topic: &str) {
    let mut c = Client::connect(g.master.remoting_addr());
    let deadline = Instant::now() + BIG;
    for queue in 0..4 {
        loop {
            let max = c.call(
                RemotingCommand::request(RequestCode::GET_MAX_OFFSET)
                    .with_version(513)
                    .with_header(&GetMaxOffsetRequestHeader::new(topic, queue)),
            );
            let committed = c.call(
                RemotingCommand::request(RequestCode::QUERY_CONSUMER_OFFSET)
                    .with_version(513)
                    .with_ext_field("consumerGroup", group)
                    .with_ext_field("topic", topic)
                    .with_ext_field("queueId", queue.to_string()),
            );
            if committed.code == 0 && committed.ext_fields.get("offset") == max.ext_fields.get("offset") {
                break;
            }
            assert!(Instant::now() < deadline, "{group} never committed the end of {topic}-{queue}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Across the group each (queue, offset) was consumed at most once; with `orderly`, each
/// member's offsets of a queue go up one by one.
fn assert_once_per_queue(all: &[Vec<Value>], orderly: bool) {
    let mut seen: BTreeMap<(u64, i64), u64> = BTreeMap::new();
    let mut by: BTreeMap<(u64, i64), Vec<usize>> = BTreeMap::new();
    for (member, lines) in all.iter().enumerate() {
        let mut last: BTreeMap<u64, i64> = BTreeMap::new();
        for v in events(lines, "msg") {
            let queue = v["queue"].as_u64().unwrap();
            let offset = v["queueOffset"].as_i64().unwrap();
            *seen.entry((queue, offset)).or_default() += 1;
            by.entry((queue, offset)).or_default().push(member);
            if orderly {
                if let Some(prev) = last.insert(queue, offset) {
                    assert_eq!(offset, prev + 1, "queue {queue}: offset {offset} after {prev}");
                }
            }
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).map(|(k, _)| (k, &by[k])).collect();
    assert!(twice.is_empty(), "(queue, offset) consumed more than once, by members: {twice:?}");
}

fn produce(apps: &JavaApps, ns: &str, topic: &str, instance: &str, count: u64) -> Vec<Value> {
    let count = count.to_string();
    let lines = apps
        .produce(&[
            "--namesrv",
            ns,
            "--topic",
            topic,
            "--count",
            &count,
            "--size",
            "200",
            "--tags",
            TAGS,
            "--instance",
            instance,
            "--mode",
            "sync",
        ])
        .finish(BIG);
    assert_eq!(summary(&lines)["errors"], 0, "{:?}", events(&lines, "send_error"));
    for (status, n) in send_statuses(&lines) {
        assert_eq!(status, "SEND_OK", "{n} sends answered {status}");
    }
    lines
}

fn scenario(line: ClientLine, orderly: bool, test: &str) {
    let Some(apps) = java_apps(line, test) else { return };
    let dir = tempfile::Builder::new().prefix("logship-consume-").tempdir().unwrap();
    let namesrv = Namesrv::start(&apps, &[]);
    let ns = namesrv.addr();
    let g = group(dir.path(), &ns, "lb1");
    let topic = "ConsumeTopic";
    create_topic(&apps, &g, &ns, topic);

    // A push group of three; every member holds queues before anything is sent.
    let group_name = "logship_group";
    let member = |instance: &str| {
        let mut args =
            vec!["--namesrv", &ns, "--topic", topic, "--group", group_name, "--instance", instance];
        if orderly {
            args.push("--orderly");
        }
        apps.push_consume(&args)
    };
    let mut consumers = vec![member("c1"), member("c2"), member("c3")];
    for c in &mut consumers {
        wait_rebalanced(c, topic, 3, BIG);
    }
    produce(&apps, &ns, topic, "p-first", 60);
    // Stopped only once everything is committed: a stopping member's queues go to the others
    // at once, from the committed offsets.
    let all = consume_all_then(consumers, &expected("p-first", 0..60), || {
        wait_committed(&g, group_name, topic);
    });
    assert_once_per_queue(&all, orderly);
    let mut total = BTreeMap::new();
    for lines in &all {
        for (k, n) in consumed(lines) {
            *total.entry(k).or_insert(0) += n;
        }
    }
    assert!(total.values().all(|&n| n == 1), "every message once across the group: {total:?}");

    // Restarted, the group resumes from its committed offsets: only what came since.
    produce(&apps, &ns, topic, "p-second", 20);
    let again = consume_all(vec![member("c4")], &expected("p-second", 0..20));
    let keys: BTreeSet<String> = consumed(&again[0]).into_keys().map(|(p, _)| p).collect();
    assert_eq!(keys, BTreeSet::from(["p-second".to_string()]), "resumed from the committed offsets");

    // RECONSUME_LATER: retried through %RETRY%, then in %DLQ% after maxReconsumeTimes (1).
    if !orderly {
        let dlq_group = "logship_later";
        let later = apps.push_consume(&[
            "--namesrv",
            &ns,
            "--topic",
            topic,
            "--group",
            dlq_group,
            "--instance",
            "l1",
            "--later-keys",
            "key-3",
            "--max-reconsume",
            "1",
            "--from",
            "first",
        ]);
        let dlq = format!("%DLQ%{dlq_group}");
        // Both messages with key-3 (one of each run) end there, and nothing else.
        let mut c = Client::connect(g.master.remoting_addr());
        let deadline = Instant::now() + BIG;
        loop {
            let r = c.call(
                RemotingCommand::request(RequestCode::GET_MAX_OFFSET)
                    .with_version(513)
                    .with_header(&GetMaxOffsetRequestHeader::new(&dlq, 0)),
            );
            let dead: u64 = r.ext_fields.get("offset").and_then(|o| o.parse().ok()).unwrap_or(0);
            if dead >= 2 {
                assert_eq!(dead, 2, "only the key-3 messages are dead");
                break;
            }
            assert!(Instant::now() < deadline, "{dead} messages reached {dlq}\n{}", later.stderr());
            std::thread::sleep(Duration::from_millis(500));
        }
        let lines = later.stop(BIG);
        let tries = events(&lines, "msg").iter().filter(|v| v["keys"] == "key-3").count();
        assert!(tries >= 4, "each key-3 message was delivered again from %RETRY% before the DLQ: {tries}");
    }

    // The lite pull consumer seeks by timestamp: from between the runs, only the second run.
    let between =
        events(&all[0], "msg").iter().filter_map(|v| v["storeTimestamp"].as_u64()).max().unwrap_or(0) + 1;
    let ts = between.to_string();
    let pull = apps
        .lite_pull(&[
            "--namesrv",
            &ns,
            "--topic",
            topic,
            "--group",
            "logship_lite",
            "--timestamp",
            &ts,
            "--idle-ms",
            "3000",
            "--duration-ms",
            "60000",
        ])
        .finish(BIG);
    let pulled = consumed(&pull);
    assert!(
        expected("p-second", 0..20).iter().all(|k| pulled.contains_key(k)),
        "the lite pull consumer got the second run: {pulled:?}"
    );

    let Group { master, slaves } = g;
    drop(slaves);
    drop(master);
    drop(namesrv);
}

#[test]
fn java_5_5_0_concurrent_push_group_retry_dlq_and_lite_pull_against_logship() {
    scenario(CLIENT_5, false, "java_5_5_0_concurrent_push_group_retry_dlq_and_lite_pull_against_logship");
}

#[test]
fn java_5_5_0_orderly_push_group_against_logship() {
    scenario(CLIENT_5, true, "java_5_5_0_orderly_push_group_against_logship");
}

#[test]
fn java_4_9_7_concurrent_push_group_retry_dlq_and_lite_pull_against_logship() {
    scenario(CLIENT_4, false, "java_4_9_7_concurrent_push_group_retry_dlq_and_lite_pull_against_logship");
}

#[test]
fn java_4_9_7_orderly_push_group_against_logship() {
    scenario(CLIENT_4, true, "java_4_9_7_orderly_push_group_against_logship");
}

/// The Go client unregisters a stopping consumer before it commits its offsets
/// (`pushConsumer.Shutdown`), so the members that take its queues over would consume its last
/// messages again: the group is stopped only once it committed everything.
#[test]
fn go_push_group_of_three_consumes_every_message_once_and_resumes_against_logship() {
    let test = "go_push_group_of_three_consumes_every_message_once_and_resumes_against_logship";
    let Some(go) = go_client(test) else { return };
    let Some(apps) = java_apps(CLIENT_5, test) else { return };
    let dir = tempfile::Builder::new().prefix("logship-consume-go-").tempdir().unwrap();
    let namesrv = Namesrv::start(&apps, &[]);
    let ns = namesrv.addr();
    let g = group(dir.path(), &ns, "lbgo");
    let topic = "GoConsumeTopic";
    create_topic(&apps, &g, &ns, topic);
    let group_name = "logship_go_group";
    let member = |instance: &str| {
        go.consume(&["--namesrv", &ns, "--topic", topic, "--group", group_name, "--instance", instance])
    };
    let mut consumers = vec![member("g1"), member("g2"), member("g3")];
    for c in &mut consumers {
        wait_rebalanced(c, topic, 3, BIG);
    }
    let sent = |instance: &str, count: u64| {
        let count = count.to_string();
        let lines = go
            .produce(&[
                "--namesrv",
                &ns,
                "--topic",
                topic,
                "--instance",
                instance,
                "--mode",
                "sync",
                "--count",
                &count,
                "--size",
                "200",
                "--tags",
                TAGS,
            ])
            .finish(BIG);
        assert_eq!(summary(&lines)["errors"], 0, "{:?}", events(&lines, "send_error"));
    };
    sent("p-go-first", 60);
    let all = consume_all_then(consumers, &expected("p-go-first", 0..60), || {
        wait_committed(&g, group_name, topic);
    });
    assert_once_per_queue(&all, false);
    let mut total = BTreeMap::new();
    for lines in &all {
        for (k, n) in consumed(lines) {
            *total.entry(k).or_insert(0) += n;
        }
    }
    assert!(total.values().all(|&n| n == 1), "every message once across the group: {total:?}");

    sent("p-go-second", 20);
    let again = consume_all(vec![member("g4")], &expected("p-go-second", 0..20));
    let producers: BTreeSet<String> = consumed(&again[0]).into_keys().map(|(p, _)| p).collect();
    assert_eq!(producers, BTreeSet::from(["p-go-second".to_string()]), "resumed from the committed offsets");
    drop(g);
    drop(namesrv);
}

// ---- issue 24, scenarios 4 and 5: the NameServer follows a master, producers change groups ----

/// Milliseconds since the epoch, the clock of the Java programs' `atMs`.
fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// A logship SYNC_MASTER named `name` and `slaves` slaves of it (`--master`), all registered
/// with `namesrv`; waits until every slave is connected and the NameServer names the master to
/// each slave.
fn group_of(dir: &Path, namesrv: &str, name: &str, slaves: usize) -> Group {
    let ns = format!("namesrvAddr={namesrv}");
    let bn = format!("brokerName={name}");
    let master = Broker::start(
        "master",
        &dir.join(format!("{name}-m")),
        free_port_pair(),
        &["--role", "SYNC_MASTER", "--set", &ns, "--set", &bn, "--set", "slaveTimeout=3000"],
    );
    let ha = master.ha_addr();
    let slaves: Vec<Broker> = (1..=slaves)
        .map(|i| {
            let id = format!("brokerId={i}");
            Broker::start(
                "slave",
                &dir.join(format!("{name}-s{i}")),
                free_port_pair(),
                &["--master", &ha, "--set", &id, "--set", &ns, "--set", &bn],
            )
        })
        .collect();
    let master_addr = master.remoting_addr().to_string();
    let deadline = Instant::now() + BIG;
    while master.status()["slaves"].as_array().is_none_or(|s| s.len() != slaves.len())
        || slaves.iter().any(|s| s.named_master(namesrv).as_deref() != Some(master_addr.as_str()))
    {
        assert!(Instant::now() < deadline, "group {name}: slaves never connected and registered");
        std::thread::sleep(Duration::from_millis(100));
    }
    Group { master, slaves }
}

/// The NameServer's answer to `code` (with `topic`, if any), as text: the body, whose
/// `brokerAddrs` maps a broker id to its address (`0:"host:port"`, or `"0":"host:port"`).
fn name_server_text(namesrv: &str, code: RequestCode, topic: Option<&str>) -> Option<String> {
    let mut c = Client::connect(namesrv.parse().unwrap());
    let mut request = RemotingCommand::request(code).with_version(513);
    if let Some(t) = topic {
        request = request.with_ext_field("topic", t);
    }
    let r = c.call(request);
    (r.code == 0).then(|| String::from_utf8_lossy(&r.body).into_owned())
}

/// Whether `text` (a NameServer body) maps broker id `id` to `addr`.
fn maps(text: &str, id: u64, addr: &str) -> bool {
    text.contains(&format!("{id}:\"{addr}\"")) || text.contains(&format!("\"{id}\":\"{addr}\""))
}

/// Seeds `topic` on every master of `groups` (a send auto-creates it, and the master registers
/// it at once), then waits until the NameServer routes it to each group.
fn create_topic_on(groups: &[(&Group, &str)], ns: &str, topic: &str) {
    for (g, _) in groups {
        let mut c = Client::connect(g.master.remoting_addr());
        let r = c.call(send_request(topic, 0, "", b"seed"));
        assert_eq!(r.code, 0, "the seed send: {:?}", r.remark);
    }
    let deadline = Instant::now() + BIG;
    loop {
        let route =
            name_server_text(ns, RequestCode::GET_ROUTEINFO_BY_TOPIC, Some(topic)).unwrap_or_default();
        let routed = groups.iter().all(|(g, name)| {
            route.contains(&format!("\"{name}\"")) && maps(&route, 0, &g.master.remoting_addr().to_string())
        });
        if routed {
            return;
        }
        assert!(Instant::now() < deadline, "the NameServer never routed {topic} to every group: {route}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The message at `offset_msg_id`'s commit-log offset on `broker`, if it holds one there.
fn view_stored(client: &mut Client, offset_msg_id: &str) -> Option<logship_store::StoredMessage> {
    let offset = i64::from_str_radix(&offset_msg_id[offset_msg_id.len() - 16..], 16).unwrap();
    let r = client.call(
        RemotingCommand::request(RequestCode::VIEW_MESSAGE_BY_ID)
            .with_header(&logship_remoting::header::ViewMessageRequestHeader { offset, topic: None }),
    );
    if r.code != 0 {
        return None;
    }
    logship_store::StoredMessage::decode(&bytes::Bytes::from(r.body.to_vec())).ok()
}

/// The `send` lines of `lines` whose message is not on `broker` (read by offset, compared by
/// topic and client unique key `UNIQ_KEY`).
fn missing_on<'a>(broker: &Broker, topic: &str, sends: &[&'a Value]) -> Vec<&'a Value> {
    let mut c = Client::connect(broker.remoting_addr());
    sends
        .iter()
        .filter(|v| {
            let stored = view_stored(&mut c, v["offsetMsgId"].as_str().unwrap());
            !stored.is_some_and(|m| {
                m.topic == topic
                    && m.properties
                        .iter()
                        .any(|(k, id)| k == "UNIQ_KEY" && Some(id.as_str()) == v["msgId"].as_str())
            })
        })
        .copied()
        .collect()
}

/// The `UNIQ_KEY`s of the messages of `topic` that `broker` holds after the last of `sends`
/// (by commit-log offset), read one after another.
fn stored_after(broker: &Broker, topic: &str, sends: &[&Value]) -> Vec<String> {
    let Some(last) = sends
        .iter()
        .filter_map(|v| v["offsetMsgId"].as_str())
        .max_by_key(|id| id[id.len() - 16..].to_string())
    else {
        return Vec::new();
    };
    let mut c = Client::connect(broker.remoting_addr());
    let mut at = view_stored(&mut c, last).map(|m| m.physical_offset + i64::from(m.total_size));
    let mut ids = Vec::new();
    while let Some(offset) = at {
        let Some(m) = view_stored(&mut c, &format!("{offset:016X}")) else { break };
        if m.topic == topic {
            ids.extend(m.properties.iter().find(|(k, _)| k == "UNIQ_KEY").map(|(_, v)| v.clone()));
        }
        at = Some(m.physical_offset + i64::from(m.total_size));
    }
    ids
}

/// The Java client's default route refresh (`pollNameServerInterval`).
const ROUTE_REFRESH: Duration = Duration::from_secs(30);

/// Scenario 5 of issue 24: two logship groups (each a SYNC_MASTER and one slave) serve one
/// topic; a producer sends without pause; master A is killed with -9. The producer goes on with group B: once it settles
/// (after its last failed send) every send goes to B and is `SEND_OK`, and every `SEND_OK` of
/// the run, A's before the kill included, is stored (A's read back from A's slave, B's from
/// B's master), none lost. Prints the counts and windows. `start` starts the producer,
/// sending until stopped, with the NameServer and the topic given.
fn producer_moves_to_the_other_group(test: &str, start: &dyn Fn(&JavaApps, &str, &str) -> App) {
    let Some(apps) = java_apps(CLIENT_5, test) else { return };
    let started = Instant::now();
    let dir = tempfile::Builder::new().prefix("logship-groups-").tempdir().unwrap();
    let namesrv = Namesrv::start(&apps, &[]);
    let ns = namesrv.addr();
    let (name_a, name_b) = ("failover-a", "failover-b");
    let mut a = group_of(dir.path(), &ns, name_a, 1);
    let b = group_of(dir.path(), &ns, name_b, 1);
    let topic = "TwoGroupTopic";
    create_topic_on(&[(&a, name_a), (&b, name_b)], &ns, topic);

    let mut producer = start(&apps, &ns, topic);
    // Sending to both groups before the kill.
    let deadline = Instant::now() + BIG;
    loop {
        let lines = producer.lines();
        let on = |name: &str| events(&lines, "send").iter().filter(|v| v["broker"] == name).count();
        if on(name_a) >= 50 && on(name_b) >= 50 {
            break;
        }
        assert!(Instant::now() < deadline, "the producer never sent to both groups:\n{}", producer.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(producer.events("send_error").is_empty(), "{:?}", producer.events("send_error"));

    a.master.kill9();
    let killed_ms = now_ms();
    let killed = Instant::now();
    // Past a route refresh (which drops A's queues: its group has no master), with a long run
    // of sends since the last failure.
    let deadline = killed + BIG;
    loop {
        let lines = producer.lines();
        let since_failure = lines
            .iter()
            .filter(|v| v["event"] == "send" || v["event"] == "send_error")
            .rev()
            .take_while(|v| v["event"] == "send")
            .count();
        if killed.elapsed() > ROUTE_REFRESH + Duration::from_secs(5) && since_failure >= 300 {
            break;
        }
        assert!(producer.running(), "the producer stopped:\n{}", producer.stderr());
        assert!(
            Instant::now() < deadline,
            "the producer never settled ({since_failure} sends since the last failure):\n{}",
            tail(&producer.stderr(), 40)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let lines = producer.stop(BIG);

    let at = |v: &Value| v["atMs"].as_u64().unwrap();
    let sends = events(&lines, "send");
    let failures = events(&lines, "send_error");
    let after_kill: Vec<&Value> = sends.iter().copied().filter(|v| at(v) >= killed_ms).collect();
    let settled_ms = failures.iter().map(|v| at(v)).max().unwrap_or(killed_ms).max(killed_ms);
    // A's answers still on their way when it died may arrive just after the kill; none after
    // the first send the producer moved to B, and none after its last failure.
    let first_b = after_kill.iter().position(|v| v["broker"] == name_b).expect("a send to B after the kill");
    let late_a = after_kill[..first_b].len();
    for v in after_kill[first_b..].iter().chain(sends.iter().filter(|v| at(v) > settled_ms)) {
        assert_eq!(v["broker"], name_b, "a send after the move went elsewhere: {v}");
        assert_eq!(v["status"], "SEND_OK", "{v}");
    }
    for v in &sends {
        assert_eq!(v["status"], "SEND_OK", "every acknowledged send is SEND_OK: {v}");
    }
    for v in &failures {
        assert!(at(v) >= killed_ms, "a failed send before the kill: {v}");
    }

    // Every SEND_OK is stored: A's on its slave (a SYNC_MASTER answers once its slave holds
    // the message), B's on its master.
    let of = |name: &str| sends.iter().copied().filter(|v| v["broker"] == name).collect::<Vec<_>>();
    let (on_a, on_b) = (of(name_a), of(name_b));
    assert_eq!(on_a.len() + on_b.len(), sends.len(), "every send went to A or B");
    let mut lost = missing_on(&a.slaves[0], topic, &on_a);
    lost.extend(missing_on(&b.master, topic, &on_b));
    let attempted: BTreeSet<u64> = sends.iter().chain(&failures).map(|v| v["i"].as_u64().unwrap()).collect();
    // What A's slave holds past A's last acknowledged message: stored without an answer (a
    // send in flight at the kill), and a duplicate when the client's retry stored it on B too.
    // The walk itself: past B's last message but one, B holds exactly its last.
    let last_b = on_b.last().and_then(|v| v["msgId"].as_str()).map(String::from);
    assert_eq!(stored_after(&b.master, topic, &on_b[..on_b.len() - 1]), Vec::from_iter(last_b));
    let unanswered = stored_after(&a.slaves[0], topic, &on_a);
    let b_ids: BTreeSet<&str> = on_b.iter().filter_map(|v| v["msgId"].as_str()).collect();
    let duplicated = unanswered.iter().filter(|id| b_ids.contains(id.as_str())).count();
    let slowest_after = after_kill.iter().filter_map(|v| v["latencyUs"].as_u64()).max().unwrap_or(0);
    eprintln!(
        "{test}: sent {} ({} before the kill), SEND_OK {} (A {}, B {}; {} from A answered after the kill), \
         failed {}, lost {}, stored on A without an answer {} (also SEND_OK on B: {}); first SEND_OK on B {} ms after the kill, settled (last failure) {} ms after \
         the kill (failures at {:?}... ms, {:?}), slowest SEND_OK after the kill {} ms; wall {:.1} s",
        attempted.len(),
        sends.len() - after_kill.len(),
        sends.len(),
        on_a.len(),
        on_b.len(),
        late_a,
        failures.len(),
        lost.len(),
        unanswered.len(),
        duplicated,
        at(after_kill[first_b]) - killed_ms,
        settled_ms - killed_ms,
        failures.iter().map(|v| at(v) - killed_ms).take(12).collect::<Vec<_>>(),
        failures
            .iter()
            .map(|v| {
                let message = v["message"].as_str().unwrap_or("");
                // Without the FAQ link, and the cost in ms that makes each line differ.
                let message = message.split("See http").next().unwrap_or(message).trim_end();
                let message = match message.split_once(", cost [") {
                    Some((head, rest)) => head.to_string() + rest.split_once("]ms").map_or("", |(_, t)| t),
                    None => message.to_string(),
                };
                format!(
                    "{} (cause {}): {message}",
                    v["class"].as_str().unwrap_or("?"),
                    v["cause"].as_str().unwrap_or("none")
                )
            })
            .collect::<BTreeSet<_>>(),
        slowest_after / 1000,
        started.elapsed().as_secs_f64()
    );
    assert!(
        lost.is_empty(),
        "{} SEND_OK messages are not stored, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    drop((a, b, namesrv));
}

/// A 5.5.0 producer with `sendLatencyFaultEnable`, sending every 10 ms until stopped, and `more`.
fn java_failover_args<'a>(ns: &'a str, topic: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--namesrv",
        ns,
        "--topic",
        topic,
        "--instance",
        "p-groups",
        "--mode",
        "sync",
        "--until-stopped",
        "--latency-fault",
        "--interval-ms",
        "10",
        "--size",
        "200",
    ];
    args.extend_from_slice(more);
    args
}

/// With the client's default retries (2), a send to the dead master fails over to B inside
/// `send()`, so the application sees no failure.
#[test]
fn java_5_5_0_producer_with_latency_fault_moves_to_the_other_group_when_a_master_is_killed() {
    producer_moves_to_the_other_group(
        "java_5_5_0_producer_with_latency_fault_moves_to_the_other_group_when_a_master_is_killed",
        &|apps, ns, topic| apps.produce(&java_failover_args(ns, topic, &[])),
    );
}

/// Without retries, every send the producer still routes to the dead master fails: the
/// latency fault's isolation of A, then the route refresh that drops A's queues, end them.
#[test]
fn java_5_5_0_producer_without_retries_settles_on_the_other_group_when_a_master_is_killed() {
    producer_moves_to_the_other_group(
        "java_5_5_0_producer_without_retries_settles_on_the_other_group_when_a_master_is_killed",
        &|apps, ns, topic| apps.produce(&java_failover_args(ns, topic, &["--retries", "0"])),
    );
}

/// Sends `count` messages with a producer that finds the master through `ns`; every one
/// `SEND_OK`. Returns its `send` lines.
fn java_sends(apps: &JavaApps, ns: &str, topic: &str, instance: &str, count: u64) -> Vec<Value> {
    let count = count.to_string();
    let lines = apps
        .produce(&[
            "--namesrv",
            ns,
            "--topic",
            topic,
            "--instance",
            instance,
            "--count",
            &count,
            "--size",
            "200",
        ])
        .finish(BIG);
    assert_eq!(summary(&lines)["errors"], 0, "{:?}", events(&lines, "send_error"));
    for (status, n) in send_statuses(&lines) {
        assert_eq!(status, "SEND_OK", "{n} sends answered {status}");
    }
    lines
}

/// Scenario 4 of issue 24: a slave given only `namesrvAddr` (no `haMasterAddress`) takes its
/// master's `haServerAddr` from the Apache NameServer's REGISTER_BROKER replies. The master is
/// killed with -9 (the NameServer drops it when its connection closes) and started again from
/// its store on other ports: the slave follows the new address the next reply names, its
/// status names the new master, the NameServer no longer names the old address, and what a
/// Java producer sends to the moved master (SEND_OK only once the slave holds it) is on the
/// slave, and the slave's metadata sync fetches from the moved master. Prints the follow time.
fn slave_follows_its_master_to_a_new_address(line: ClientLine, test: &str) {
    let Some(apps) = java_apps(line, test) else { return };
    let started = Instant::now();
    let dir = tempfile::Builder::new().prefix("logship-moved-").tempdir().unwrap();
    let namesrv = Namesrv::start(&apps, &[]);
    let ns = namesrv.addr();
    let ns_set = format!("namesrvAddr={ns}");
    // Java's shortest period (it clamps to 10 s to 60 s), so that the next reply comes soon.
    let common = ["--set", &ns_set, "--set", "brokerName=moving", "--set", "registerNameServerPeriod=10000"];
    let mut master_args = vec!["--role", "SYNC_MASTER", "--set", "slaveTimeout=3000"];
    master_args.extend(common);
    let mut master = Broker::start("master", &dir.path().join("m"), free_port_pair(), &master_args);
    let mut slave_args = vec!["--set", "brokerId=1", "--set", "slaveSyncInterval=2000"];
    slave_args.extend(common);
    let slave = Broker::start("slave", &dir.path().join("s"), free_port_pair(), &slave_args);

    // The slave is told where its master is, and replicates from it.
    let follows = |slave: &Broker, master: &Broker| {
        let s = slave.status();
        s["master"]["address"] == master.ha_addr().as_str()
            && s["master"]["state"] == "STREAMING"
            && slave.named_master(&ns) == Some(master.remoting_addr().to_string())
            && master.status()["slaves"].as_array().is_some_and(|l| l.len() == 1)
    };
    let wait = |what: &str, check: &dyn Fn() -> bool| {
        let deadline = Instant::now() + BIG;
        while !check() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{}", tail(&slave.log(), 40));
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait("the slave to replicate from the master the NameServer names", &|| follows(&slave, &master));
    let topic = "MovedMasterTopic";
    let mut c = Client::connect(master.remoting_addr());
    assert_eq!(c.call(send_request(topic, 0, "", b"seed")).code, 0);
    drop(c);
    let old_addr = master.remoting_addr().to_string();
    wait("the NameServer to route the topic", &|| {
        name_server_text(&ns, RequestCode::GET_ROUTEINFO_BY_TOPIC, Some(topic))
            .is_some_and(|r| maps(&r, 0, &old_addr))
    });
    let before = java_sends(&apps, &ns, topic, "p-before", 20);
    let missing = missing_on(&slave, topic, &events(&before, "send"));
    assert!(missing.is_empty(), "not on the slave: {missing:?}");

    // kill -9: the NameServer drops the old address when the connection closes.
    let old_ha = master.ha_addr();
    master.kill9();
    let killed = Instant::now();
    wait("the NameServer to drop the killed master", &|| {
        name_server_text(&ns, RequestCode::GET_BROKER_CLUSTER_INFO, None)
            .is_some_and(|t| !t.contains(&old_addr))
    });
    let dropped = killed.elapsed();

    // Started again from its store, elsewhere.
    master = Broker::start("master", &dir.path().join("m"), free_port_pair(), &master_args);
    let moved = Instant::now();
    let new_addr = master.remoting_addr().to_string();
    assert_ne!(master.ha_addr(), old_ha);
    wait("the slave to follow the master to its new address", &|| follows(&slave, &master));
    let followed = moved.elapsed();
    let cluster = name_server_text(&ns, RequestCode::GET_BROKER_CLUSTER_INFO, None).unwrap();
    assert!(maps(&cluster, 0, &new_addr), "the NameServer names the new master: {cluster}");
    assert!(!cluster.contains(&old_addr), "the old address lingers: {cluster}");
    let route = name_server_text(&ns, RequestCode::GET_ROUTEINFO_BY_TOPIC, Some(topic)).unwrap();
    assert!(maps(&route, 0, &new_addr) && !route.contains(&old_addr), "the route: {route}");

    // Puts after the move reach the slave (a SYNC_MASTER answers SEND_OK once the slave holds them).
    let after = java_sends(&apps, &ns, topic, "p-after", 20);
    let sends = events(&after, "send");
    assert!(sends.iter().all(|v| v["offsetMsgId"].as_str().is_some()), "{sends:?}");
    let missing = missing_on(&slave, topic, &sends);
    assert!(missing.is_empty(), "not on the slave: {missing:?}");
    wait("the slave to hold all the master holds", &|| slave.max_offset() == master.max_offset());
    // The metadata sync follows the move too: a topic created on the moved master reaches the
    // slave's topic configs.
    let mut c = Client::connect(master.remoting_addr());
    assert_eq!(c.call(send_request("CreatedAfterTheMove", 0, "", b"seed")).code, 0);
    wait("the slave's metadata sync to fetch from the moved master", &|| {
        let sync = &slave.status()["remoting"]["slaveSync"];
        let mut c = Client::connect(slave.remoting_addr());
        let topics = c.call(RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG).with_version(513));
        sync["master"] == new_addr.as_str()
            && topics.code == 0
            && String::from_utf8_lossy(&topics.body).contains("\"CreatedAfterTheMove\"")
    });
    eprintln!(
        "{test}: the NameServer dropped the killed master {} ms after the kill; the slave followed the \
         new address {} ms after the master started there; 20 + 20 Java sends SEND_OK, all on the slave; \
         wall {:.1} s",
        dropped.as_millis(),
        followed.as_millis(),
        started.elapsed().as_secs_f64()
    );
    drop((slave, master, namesrv));
}

/// The Go client (it has no latency fault; a retry avoids the broker that failed last),
/// sending without pause.
#[test]
fn go_producer_moves_to_the_other_group_when_a_master_is_killed() {
    let test = "go_producer_moves_to_the_other_group_when_a_master_is_killed";
    let Some(go) = go_client(test) else { return };
    producer_moves_to_the_other_group(test, &|_, ns, topic| {
        go.produce(&[
            "--namesrv",
            ns,
            "--topic",
            topic,
            "--instance",
            "go-groups",
            "--mode",
            "sync",
            "--until-stopped",
            "--size",
            "200",
        ])
    });
}

#[test]
fn a_slave_without_ha_master_address_follows_its_master_to_a_new_address_through_the_name_server() {
    slave_follows_its_master_to_a_new_address(
        CLIENT_5,
        "a_slave_without_ha_master_address_follows_its_master_to_a_new_address_through_the_name_server",
    );
}

/// The same with the 4.9.7 NameServer and producer.
#[test]
fn a_slave_without_ha_master_address_follows_its_master_to_a_new_address_through_a_4_9_7_name_server() {
    slave_follows_its_master_to_a_new_address(
        CLIENT_4,
        "a_slave_without_ha_master_address_follows_its_master_to_a_new_address_through_a_4_9_7_name_server",
    );
}

/// A 4.9.7 producer with `sendLatencyFaultEnable` and no retries, against the 5.5.0 NameServer.
/// Its latency fault isolates a failed broker for 10 minutes (5.5.0: 10 s), so that the first
/// failure is usually the last. But when every broker is marked unavailable at once (A
/// isolated, and one send to B slower than 550 ms on a loaded machine), 4.9.7's
/// `MQFaultStrategy.selectOneMessageQueue` renames one queue of its publish list to A (the
/// route still lists A's queues: A's slave is registered), and about a quarter of the sends
/// fail ("The broker[failover-a] not exist") until the next route refresh replaces the list:
/// a client bug that 5.x no longer has. The test waits that out.
#[test]
fn java_4_9_7_producer_without_retries_settles_on_the_other_group_when_a_master_is_killed() {
    let test = "java_4_9_7_producer_without_retries_settles_on_the_other_group_when_a_master_is_killed";
    let Some(old) = java_apps(CLIENT_4, test) else { return };
    producer_moves_to_the_other_group(test, &|_, ns, topic| {
        old.produce(&java_failover_args(ns, topic, &["--retries", "0"]))
    });
}
