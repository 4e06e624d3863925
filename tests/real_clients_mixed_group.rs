//! A mixed broker group: a logship SYNC_MASTER and a real Java broker (rocketmq-broker 5.5.0)
//! as its SLAVE over classic HA (it learns the master's HA address from the NameServer, as
//! a Java slave of a Java master does), both registered with the real Apache NameServer. A Java
//! producer sends to the logship master (SEND_OK only once the Java slave has the message); a
//! Java push consumer reads every message from the master; with the logship master stopped
//! (it unregisters), a consumer of another group reads every message from the Java slave.
//!
//! Skips without Java unless `LOGSHIP_REQUIRE_JAVA=1`.

mod process;
mod remoting_support;
mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use logship_remoting::body::{JsonBody, TopicConfigSerializeWrapper};
use logship_remoting::{RemotingCommand, RequestCode};
use process::Broker;
use remoting_support::{Client, send_request};
use serde_json::Value;
use support::apps::*;

const BIG: Duration = Duration::from_secs(180);
const CONNECT: Duration = Duration::from_secs(30);
const TOPIC: &str = "MixedTopic";
const NAME: &str = "mx1";
const SENT: u64 = 50;

/// The `seq` of every message from producer `p1` that a consumer's lines show consumed.
fn seqs(lines: &[Value]) -> BTreeSet<u64> {
    events(lines, "msg")
        .iter()
        .filter(|v| v["props"]["producer"] == "p1")
        .filter_map(|v| v["props"]["seq"].as_str().and_then(|s| s.parse().ok()))
        .collect()
}

/// Runs a push consumer of `group` until it consumed every message of `p1`; returns its lines.
fn consume_everything(apps: &JavaApps, ns: &str, group: &str, instance: &str) -> Vec<Value> {
    let mut c = apps.push_consume(&[
        "--namesrv",
        ns,
        "--topic",
        TOPIC,
        "--group",
        group,
        "--instance",
        instance,
        "--from",
        "first",
    ]);
    wait_rebalanced(&mut c, TOPIC, 1, BIG);
    let want: BTreeSet<u64> = (0..SENT).collect();
    let deadline = Instant::now() + BIG;
    while !want.is_subset(&seqs(&c.lines())) {
        assert!(
            Instant::now() < deadline,
            "{group} consumed {} of {SENT}\n{}",
            seqs(&c.lines()).len(),
            c.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    c.stop(BIG)
}

#[test]
fn java_5_5_0_slave_replicates_a_logship_master_and_serves_consumers_once_it_is_gone() {
    let test = "java_5_5_0_slave_replicates_a_logship_master_and_serves_consumers_once_it_is_gone";
    let Some(apps) = java_apps(CLIENT_5, test) else { return };
    let started = Instant::now();
    let dir = tempfile::Builder::new().prefix("logship-mixed-").tempdir().unwrap();
    let namesrv = Namesrv::start(&apps, &[]);
    let ns = namesrv.addr();
    let ns_set = format!("namesrvAddr={ns}");
    // A Java slave calls its master's VIP channel (listenPort - 2, `MixAll.brokerVIPChannel`)
    // for its metadata sync (topics, offsets): the master serves it on fastListenPort.
    let port = free_broker_port();
    let fast = format!("fastListenPort={}", port - 2);
    let mut master = Broker::start(
        "master",
        &dir.path().join("m"),
        port,
        &[
            "--role",
            "SYNC_MASTER",
            "--set",
            &ns_set,
            "--set",
            &format!("brokerName={NAME}"),
            "--set",
            "slaveTimeout=5000",
            "--set",
            &fast,
        ],
    );
    let mut slave = JavaBroker::start(
        &apps,
        BrokerSpec::new(NAME, "SLAVE", 1, &dir.path().join("js"))
            .namesrv(&ns)
            .set("brokerClusterName=DefaultCluster")
            .set("haSendHeartbeatInterval=1000")
            // A 5.x Java slave refuses every pull ("[REJECTREQUEST]system busy") without it.
            .set("slaveReadEnable=true"),
    );
    let deadline = Instant::now() + CONNECT;
    // Connected and reporting: a SYNC_MASTER counts a slave only once it said where it is.
    while !master.status()["slaves"].as_array().is_some_and(|s| s.len() == 1 && !s[0]["ackOffset"].is_null())
    {
        assert!(
            Instant::now() < deadline,
            "the Java slave never connected: slave {}, master {}\n{}\n{}",
            slave.status(),
            master.status(),
            tail(&slave.app.stderr(), 40),
            master.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The topic (a seed send creates it), routed to both brokers of the group.
    let mut c = Client::connect(master.remoting_addr());
    let r = c.call(send_request(TOPIC, 0, "", b"seed"));
    assert_eq!(r.code, 0, "the seed send: {:?}", r.remark);
    let slave_addr = slave.addr();
    let deadline = Instant::now() + BIG;
    loop {
        let route = apps.mqadmin(&["topicRoute", "-n", &ns, "-t", TOPIC]);
        let text = route["text"].as_str().unwrap_or("");
        if route["ok"] == true && text.contains(&format!("1:\"{slave_addr}\"")) && text.contains("0:\"") {
            break;
        }
        assert!(Instant::now() < deadline, "the NameServer never routed {TOPIC} to both brokers: {route}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let set_up = started.elapsed();

    // SYNC_MASTER: every send is SEND_OK, so the Java slave had each message first.
    let count = SENT.to_string();
    let sent = apps
        .produce(&[
            "--namesrv",
            &ns,
            "--topic",
            TOPIC,
            "--count",
            &count,
            "--size",
            "300",
            "--tags",
            "TagA,TagB",
            "--keys",
            "key",
            "--instance",
            "p1",
            "--mode",
            "sync",
        ])
        .finish(BIG);
    assert_eq!(
        send_statuses(&sent).get("SEND_OK"),
        Some(&SENT),
        "{:?} {:?}",
        send_statuses(&sent),
        events(&sent, "send_error")
    );
    let master_max = master.max_offset();
    let s = slave
        .until("the Java slave to hold the log", BIG, |s| s["maxPhyOffset"].as_u64() >= Some(master_max));
    assert_eq!(s["maxPhyOffset"].as_u64(), Some(master_max), "the slave holds what the master holds");

    // From the master.
    let from_master = consume_everything(&apps, &ns, "mixed_on_master", "c1");
    assert!(
        events(&from_master, "msg").iter().all(|v| v["broker"] == NAME),
        "every message came from the group {NAME}"
    );
    let produced = started.elapsed();

    // A Java slave learns topics only from its metadata sync (SlaveSynchronize, every 60 s
    // from its start on 5.x): wait until it knows the topic, as an operator would.
    let mut js = Client::connect(slave_addr.parse().unwrap());
    let deadline = Instant::now() + BIG;
    loop {
        let r = js.call(RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG).with_version(513));
        let topics = TopicConfigSerializeWrapper::decode(&r.body).ok();
        if topics.is_some_and(|t| t.topic_config_table.contains_key(TOPIC)) {
            break;
        }
        assert!(Instant::now() < deadline, "the Java slave never synced {TOPIC} from the logship master");
        std::thread::sleep(Duration::from_millis(500));
    }
    let synced = started.elapsed();

    // The logship master stops cleanly (and unregisters): the Java slave serves alone.
    assert!(master.terminate().is_some_and(|s| s.success()), "the master stops cleanly:\n{}", master.log());
    let deadline = Instant::now() + BIG;
    loop {
        let route = apps.mqadmin(&["topicRoute", "-n", &ns, "-t", TOPIC]);
        let text = route["text"].as_str().unwrap_or("");
        if route["ok"] == true && text.contains(&format!("1:\"{slave_addr}\"")) && !text.contains("0:\"") {
            break;
        }
        assert!(Instant::now() < deadline, "the route still names the stopped master: {route}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let from_slave = consume_everything(&apps, &ns, "mixed_on_slave", "c2");
    let bodies = |lines: &[Value]| -> BTreeSet<(u64, u64)> {
        events(lines, "msg")
            .iter()
            .filter(|v| v["props"]["producer"] == "p1")
            .filter_map(|v| Some((v["props"]["seq"].as_str()?.parse().ok()?, v["bodyCrc"].as_u64()?)))
            .collect()
    };
    assert_eq!(
        bodies(&from_slave),
        bodies(&from_master),
        "the slave serves the same messages, byte for byte"
    );
    let done = started.elapsed();

    slave.stop();
    drop(namesrv);
    eprintln!(
        "{test}: set up {:.1} s, produced and consumed from the master {:.1} s, slave's topic sync {:.1} s, from the slave {:.1} s",
        set_up.as_secs_f64(),
        (produced - set_up).as_secs_f64(),
        (synced - produced).as_secs_f64(),
        (done - synced).as_secs_f64()
    );
}
