//! Unchanged RocketMQ producers against logship: a logship SYNC_MASTER with two logship slaves,
//! all three registered with the real Apache NameServer (5.5.0, or 4.9.7), and the Java
//! producers of both lines and the Go producer, which find the master only through
//! `GET_ROUTEINFO_BY_TOPIC`. They send sync, async, one-way and batch, with tags, keys and user
//! properties; every acknowledged send is `SEND_OK` (the master answers only once a slave holds
//! the message), and what logship stores, read back message by message from the master and
//! from a slave, is what was sent. With the slaves stopped the producers see
//! `FLUSH_SLAVE_TIMEOUT`, and with them gone `SLAVE_NOT_AVAILABLE`.
//!
//! Skips without Java (or Go, for the Go client) unless `LOGSHIP_REQUIRE_JAVA=1` /
//! `LOGSHIP_REQUIRE_GO=1` (see `support/apps.rs`).

mod process;
mod remoting_support;
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use logship_remoting::header::{GetMaxOffsetRequestHeader, ViewMessageRequestHeader};
use logship_remoting::{RemotingCommand, RequestCode};
use logship_store::StoredMessage;
use process::{Broker, eventually, free_port_pair, signal};
use remoting_support::Client;
use serde_json::Value;
use support::apps::*;

/// Messages per send mode.
const PER_MODE: u64 = 20;
const TAGS: &str = "TagA,TagB";
const SIZE: u64 = 300;
const BIG: Duration = Duration::from_secs(180);
const BROKER_NAME: &str = "logship-a";
const CLUSTER: &str = "LogshipCluster";

/// A logship SYNC_MASTER and two slaves of it (`--master`), all registered with `namesrv`.
struct Group {
    master: Broker,
    slaves: Vec<Broker>,
    _dir: tempfile::TempDir,
}

fn group(namesrv: &str) -> Group {
    let dir = tempfile::Builder::new().prefix("logship-produce-").tempdir().unwrap();
    let ns = format!("namesrvAddr={namesrv}");
    let name = format!("brokerName={BROKER_NAME}");
    let cluster = format!("brokerClusterName={CLUSTER}");
    let master = Broker::start(
        "master",
        &dir.path().join("m"),
        free_port_pair(),
        &[
            "--role",
            "SYNC_MASTER",
            "--set",
            "slaveTimeout=1000",
            // Java's default: a stopped slave stays connected (and so in sync) that long, the
            // time a producer JVM needs to start and send while the slaves are stopped.
            "--set",
            "haHousekeepingInterval=20000",
            "--set",
            &ns,
            "--set",
            &name,
            "--set",
            &cluster,
        ],
    );
    let ha = master.ha_addr();
    let slaves: Vec<Broker> = (1..=2)
        .map(|i| {
            let id = format!("brokerId={i}");
            Broker::start(
                "slave",
                &dir.path().join(format!("s{i}")),
                free_port_pair(),
                &["--master", &ha, "--set", &id, "--set", &ns, "--set", &name, "--set", &cluster],
            )
        })
        .collect();
    eventually("both slaves to connect", || {
        master.status()["slaves"].as_array().is_some_and(|s| s.len() == 2)
    });
    let master_addr = master.remoting_addr().to_string();
    for b in std::iter::once(&master).chain(&slaves) {
        eventually("every broker registered with the NameServer", || {
            b.status()["remoting"]["nameServers"][namesrv]["lastOkMsAgo"].is_u64()
        });
    }
    for s in &slaves {
        eventually("the NameServer to name the master to each slave", || {
            s.status()["remoting"]["nameServers"][namesrv]["masterAddr"] == master_addr.as_str()
        });
    }
    Group { master, slaves, _dir: dir }
}

fn view(client: &mut Client, offset: i64) -> RemotingCommand {
    client.call(
        RemotingCommand::request(RequestCode::VIEW_MESSAGE_BY_ID)
            .with_header(&ViewMessageRequestHeader { offset, topic: None }),
    )
}

/// The commit-log offset in an offset message id (the last 16 hex digits).
fn offset_of(offset_msg_id: &str) -> i64 {
    i64::from_str_radix(&offset_msg_id[offset_msg_id.len() - 16..], 16).unwrap()
}

/// Reads the message at `offset_msg_id` through VIEW_MESSAGE_BY_ID.
fn stored(client: &mut Client, offset_msg_id: &str) -> Option<StoredMessage> {
    let r = view(client, offset_of(offset_msg_id));
    (r.code == 0).then(|| StoredMessage::decode(&Bytes::from(r.body.to_vec())).unwrap())
}

fn prop<'a>(m: &'a StoredMessage, name: &str) -> Option<&'a str> {
    m.properties.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// `(offsetMsgId, msgId)` of every message a producer's `send` lines acknowledged. The Go
/// client reports no msgIds for a batch (it reads `UNIQ_KEY` off the batch's wrapper message,
/// which has none, whatever the broker): `None` then.
fn acknowledged(lines: &[Value]) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for v in events(lines, "send") {
        let offsets: Vec<String> = v["offsetMsgId"].as_str().unwrap().split(',').map(String::from).collect();
        let ids: Vec<String> = match v["msgIds"].as_array() {
            Some(many) => many.iter().map(|x| x.as_str().unwrap().to_string()).collect(),
            None => v["msgId"].as_str().unwrap().split(',').map(String::from).collect(),
        };
        if ids.iter().all(String::is_empty) {
            out.extend(offsets.into_iter().map(|o| (o, None)));
            continue;
        }
        assert_eq!(offsets.len(), ids.len(), "one offset id per message in {v}");
        out.extend(offsets.into_iter().zip(ids.into_iter().map(Some)));
    }
    out
}

/// Every acknowledged message is on the master and on a slave, with the topic, tag, keys, user
/// properties, unique key and body the producer `instance` gave it.
fn assert_stored_as_sent(g: &Group, topic: &str, instance: &str, acked: &[(String, Option<String>)]) {
    let mut master = Client::connect(g.master.remoting_addr());
    let mut slave = Client::connect(g.slaves[0].remoting_addr());
    let tags: Vec<&str> = TAGS.split(',').collect();
    let mut seqs = Vec::new();
    for (offset_id, msg_id) in acked {
        let m = stored(&mut master, offset_id)
            .unwrap_or_else(|| panic!("{instance}: {offset_id} is not on the master"));
        assert_eq!(m.topic, topic);
        let seq: u64 = prop(&m, "seq").unwrap().parse().unwrap();
        assert_eq!(prop(&m, "producer"), Some(instance), "{m:?}");
        assert_eq!(prop(&m, "TAGS"), Some(tags[(seq % 2) as usize]), "{m:?}");
        assert_eq!(prop(&m, "KEYS"), Some(format!("key-{seq}").as_str()), "{m:?}");
        assert_eq!(prop(&m, "color"), Some("blue"), "{m:?}");
        if let Some(id) = msg_id {
            assert_eq!(prop(&m, "UNIQ_KEY"), Some(id.as_str()), "{m:?}");
        }
        assert_eq!(m.body.len() as u64, SIZE, "{m:?}");
        assert!(m.body.starts_with(format!("{instance}-").as_bytes()), "{m:?}");
        seqs.push(seq);
        // A SYNC_MASTER said SEND_OK: the slave holds it (eventually readable there).
        eventually("the slave to serve the message", || {
            stored(&mut slave, offset_id).is_some_and(|s| s.body == m.body && s.properties == m.properties)
        });
    }
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), acked.len(), "{instance}: each acknowledged message once");
}

/// The sum of the master's max offsets over `topic`'s queues.
fn stored_count(g: &Group, topic: &str, queues: i32) -> i64 {
    let mut c = Client::connect(g.master.remoting_addr());
    (0..queues)
        .map(|q| {
            let r = c.call(
                RemotingCommand::request(RequestCode::GET_MAX_OFFSET)
                    .with_header(&GetMaxOffsetRequestHeader::new(topic, q)),
            );
            assert_eq!(r.code, 0, "{:?}", r.remark);
            r.ext_fields["offset"].parse::<i64>().unwrap()
        })
        .sum()
}

fn java_args<'a>(
    ns: &'a str,
    topic: &'a str,
    instance: &'a str,
    mode: &'a str,
    count: &'a str,
) -> Vec<&'a str> {
    vec![
        "--namesrv",
        ns,
        "--topic",
        topic,
        "--instance",
        instance,
        "--mode",
        mode,
        "--count",
        count,
        "--size",
        "300",
        "--tags",
        TAGS,
        "--props",
        "color=blue",
        "--batch-size",
        "10",
    ]
}

/// What a producer saw with the slaves stopped (SIGSTOP: connected, never acking), then gone:
/// the statuses of one sync send each time.
fn slaves_stopped_then_gone(g: &mut Group, mut send_one: impl FnMut(&str) -> Vec<Value>) {
    for s in &g.slaves {
        signal(s.child.id(), "-STOP");
    }
    let started = Instant::now();
    let lines = send_one("p-stopped");
    assert_eq!(
        send_statuses(&lines),
        BTreeMap::from([("FLUSH_SLAVE_TIMEOUT".to_string(), 1)]),
        "{lines:?}\n{}",
        g.master.log()
    );
    assert!(started.elapsed() >= Duration::from_millis(900), "the master waited slaveTimeout");
    for s in &mut g.slaves {
        signal(s.child.id(), "-CONT");
        s.kill9();
    }
    eventually("the master to see the slaves gone", || {
        g.master.status()["slaves"].as_array().is_some_and(|s| s.is_empty())
    });
    let lines = send_one("p-alone");
    assert_eq!(send_statuses(&lines), BTreeMap::from([("SLAVE_NOT_AVAILABLE".to_string(), 1)]), "{lines:?}");
}

/// `mqadmin` against the logship group: the route names the master as id 0 and both slaves;
/// `topicStatus` (GET_TOPIC_STATS_INFO, and on 5.x GET_TOPIC_CONFIG) adds up every message.
fn assert_mqadmin_sees_the_group(apps: &JavaApps, ns: &str, g: &Group, topic: &str) {
    let master_addr = g.master.remoting_addr().to_string();
    let route = apps.mqadmin(&["topicRoute", "-n", ns, "-t", topic]);
    assert_eq!(route["ok"], true, "{route}");
    let rtext = route["text"].as_str().unwrap();
    assert!(rtext.contains(&format!("\"brokerName\":\"{BROKER_NAME}\"")), "topicRoute:\n{rtext}");
    assert!(rtext.contains(&format!("0:\"{master_addr}\"")), "the master is id 0:\n{rtext}");
    for s in &g.slaves {
        assert!(rtext.contains(&s.remoting_addr().to_string()), "the route names each slave:\n{rtext}");
    }
    let status = apps.mqadmin(&["topicStatus", "-n", ns, "-t", topic]);
    assert_eq!(status["ok"], true, "{status}");
    let text = status["text"].as_str().unwrap();
    let max_sum: u64 = text
        .lines()
        .filter(|l| l.contains(BROKER_NAME))
        .filter_map(|l| l.split_whitespace().nth(3).and_then(|x| x.parse::<u64>().ok()))
        .sum();
    assert_eq!(max_sum, 4 * PER_MODE, "topicStatus max offsets add up to every message:\n{text}");
}

fn java_producers(line: ClientLine, test: &str) {
    let Some(apps) = java_apps(line, test) else { return };
    let namesrv = Namesrv::start(&apps, &[]);
    let ns = namesrv.addr();
    let mut g = group(&ns);
    // Auto-created through TBW102's route: four queues.
    let topic = "ProduceTopic";
    let count = PER_MODE.to_string();
    let mut acked_total = 0;
    for mode in ["sync", "async", "oneway", "batch"] {
        let instance = format!("p-java-{mode}");
        let lines = apps.produce(&java_args(&ns, topic, &instance, mode, &count)).finish(BIG);
        let s = summary(&lines);
        assert_eq!(s["errors"], 0, "{mode}: {:?}\n{}", events(&lines, "send_error"), g.master.log());
        assert_eq!(s["messages"], PER_MODE, "{mode}: {s}");
        if mode == "oneway" {
            assert_eq!(s["statuses"]["ONEWAY"], PER_MODE, "{s}");
            continue;
        }
        assert_eq!(send_statuses(&lines), BTreeMap::from([("SEND_OK".to_string(), PER_MODE)]), "{mode}");
        let acked = acknowledged(&lines);
        assert_eq!(acked.len() as u64, PER_MODE, "{mode}");
        assert_stored_as_sent(&g, topic, &instance, &acked);
        acked_total += acked.len();
    }
    assert_eq!(acked_total as u64, 3 * PER_MODE);
    eventually("every message, one-way ones included, stored", || {
        stored_count(&g, topic, 4) == 4 * PER_MODE as i64
    });
    assert_mqadmin_sees_the_group(&apps, &ns, &g, topic);
    slaves_stopped_then_gone(&mut g, |instance| {
        apps.produce(&java_args(&ns, topic, instance, "sync", "1")).finish(BIG)
    });
}

#[test]
fn java_5_5_0_producers_find_a_logship_sync_master_and_store_exactly_what_they_sent() {
    java_producers(
        CLIENT_5,
        "java_5_5_0_producers_find_a_logship_sync_master_and_store_exactly_what_they_sent",
    );
}

#[test]
fn java_4_9_7_producers_find_a_logship_sync_master_and_store_exactly_what_they_sent() {
    java_producers(
        CLIENT_4,
        "java_4_9_7_producers_find_a_logship_sync_master_and_store_exactly_what_they_sent",
    );
}

#[test]
fn go_producers_find_a_logship_sync_master_and_store_exactly_what_they_sent() {
    let test = "go_producers_find_a_logship_sync_master_and_store_exactly_what_they_sent";
    let Some(go) = go_client(test) else { return };
    let Some(apps) = java_apps(CLIENT_5, test) else { return };
    let namesrv = Namesrv::start(&apps, &[]);
    let ns = namesrv.addr();
    let mut g = group(&ns);
    let topic = "GoProduceTopic";
    let count = PER_MODE.to_string();
    for mode in ["sync", "async", "oneway", "batch"] {
        let instance = format!("p-go-{mode}");
        let lines = go.produce(&java_args(&ns, topic, &instance, mode, &count)).finish(BIG);
        let s = summary(&lines);
        assert_eq!(s["errors"], 0, "{mode}: {:?}\n{}", events(&lines, "send_error"), g.master.log());
        assert_eq!(s["messages"], PER_MODE, "{mode}: {s}");
        if mode == "oneway" {
            assert_eq!(s["statuses"]["ONEWAY"], PER_MODE, "{s}");
            continue;
        }
        assert_eq!(send_statuses(&lines), BTreeMap::from([("SEND_OK".to_string(), PER_MODE)]), "{mode}");
        let acked = acknowledged(&lines);
        assert_eq!(acked.len() as u64, PER_MODE, "{mode}");
        assert_stored_as_sent(&g, topic, &instance, &acked);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while stored_count(&g, topic, 4) != 4 * PER_MODE as i64 {
        let log = g.master.log();
        let closes: Vec<&str> = log.lines().filter(|l| l.contains("remoting connection closed")).collect();
        assert!(
            Instant::now() < deadline,
            "{} of {} messages stored; the master's closes:\n{}",
            stored_count(&g, topic, 4),
            4 * PER_MODE,
            closes.join("\n")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    slaves_stopped_then_gone(&mut g, |instance| {
        go.produce(&java_args(&ns, topic, instance, "sync", "1")).finish(BIG)
    });
}

/// A slave given `namesrvAddr` and no `haMasterAddress` registers as its `brokerId`, takes the
/// master's `haServerAddr` from the NameServer's REGISTER_BROKER reply and replicates from it;
/// when the master comes back on another address, the next reply names that one, and the
/// slave follows it.
#[test]
fn a_slave_with_only_namesrv_addr_follows_the_master_the_name_server_names() {
    let test = "a_slave_with_only_namesrv_addr_follows_the_master_the_name_server_names";
    let Some(apps) = java_apps(CLIENT_5, test) else { return };
    let namesrv = Namesrv::start(&apps, &[]);
    let ns = format!("namesrvAddr={}", namesrv.addr());
    let dir = tempfile::tempdir().unwrap();
    let common = ["--set", &ns, "--set", "brokerName=learner", "--set", "registerNameServerPeriod=1000"];
    let mut master_args = vec!["--role", "SYNC_MASTER", "--set", "slaveTimeout=3000"];
    master_args.extend(common);
    let mut master = Broker::start("master", &dir.path().join("m"), free_port_pair(), &master_args);
    let mut slave_args = vec!["--set", "brokerId=1"];
    slave_args.extend(common);
    let slave = Broker::start("slave", &dir.path().join("s"), free_port_pair(), &slave_args);
    let send = |master: &Broker, body: &str| {
        let mut c = Client::connect(master.remoting_addr());
        let r = c.call(remoting_support::send_request("Learned", 0, "", body.as_bytes()));
        assert_eq!(r.code, 0, "SEND_OK once the slave acked: {:?}\n{}", r.remark, master.log());
        remoting_support::sent(&r).msg_id
    };
    let on_slave = |id: &str| {
        let mut c = Client::connect(slave.remoting_addr());
        eventually("the slave to hold the message", || stored(&mut c, id).is_some());
    };
    eventually("the slave to connect to the master it was told", || {
        master.status()["slaves"].as_array().is_some_and(|s| s.len() == 1)
    });
    on_slave(&send(&master, "first"));

    // The master comes back elsewhere (same store, new ports).
    assert!(master.terminate().is_some_and(|s| s.success()));
    let old_ha = master.ha_addr();
    master = Broker::start("master", &dir.path().join("m"), free_port_pair(), &master_args);
    assert_ne!(master.ha_addr(), old_ha);
    eventually("the slave to follow the master to its new address", || {
        master.status()["slaves"].as_array().is_some_and(|s| s.len() == 1)
    });
    on_slave(&send(&master, "second"));
}
