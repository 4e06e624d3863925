//! HA as RocketMQ clients see it (issue 24): slaves carry their master's metadata, both ways
//! with real Java brokers (rocketmq-broker 5.5.0) on the real Apache NameServer.
//!
//! - A logship slave without `haMasterAddress` of a Java SYNC_MASTER learns the master from
//!   the NameServer (HA and remoting address) and carries the Java master's committed
//!   consumer offsets in its `consumerOffset.json`, and follows later commits.
//! - A Java slave of a logship master carries logship's committed offsets (Java's own
//!   `SlaveSynchronize` against logship's `GET_ALL_*` answers).
//!
//! Skips without Java unless `LOGSHIP_REQUIRE_JAVA=1`.

mod process;
mod remoting_support;
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use logship_remoting::{RemotingCommand, RequestCode};
use process::{Broker, free_port_pair};
use remoting_support::Client;
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
    let sync = &slave.status()["remoting"]["slaveSync"];
    assert_eq!(sync["master"], java_master.addr().as_str(), "{sync}");
    assert!(sync["lastError"].is_null(), "{sync}");
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
