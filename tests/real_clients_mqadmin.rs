//! The real `mqadmin` (rocketmq-tools 5.5.0 and 4.9.7) against one logship broker group: a
//! SYNC_MASTER and a slave registered with the real Apache NameServer, a Java producer and a
//! Java push consumer. `clusterList`, `topicRoute`, `topicStatus`, `brokerStatus`,
//! `consumerProgress`, `statsAll`, `consumerConnection`, `producerConnection` and
//! `queryMsgById` are each checked field by field
//! against what the group holds, with both tool lines.
//!
//! Skips without Java unless `LOGSHIP_REQUIRE_JAVA=1`.

mod process;
mod remoting_support;
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use logship_remoting::header::GetMaxOffsetRequestHeader;
use logship_remoting::{RemotingCommand, RequestCode};
use process::{Broker, eventually, free_port_pair};
use remoting_support::{Client, send_request};
use serde_json::Value;
use support::apps::*;

const BIG: Duration = Duration::from_secs(180);
const TOPIC: &str = "AdminTopic";
const GROUP: &str = "admin_group";
const BROKER: &str = "la1";
/// Messages the Java producer sends (the seed send adds one).
const SENT: u64 = 40;

/// `(maxOffset, committed offset)` of each of `TOPIC`'s four queues on `addr`.
fn offsets(c: &mut Client) -> Vec<(i64, i64)> {
    (0..4)
        .map(|queue| {
            let max = c.call(
                RemotingCommand::request(RequestCode::GET_MAX_OFFSET)
                    .with_version(513)
                    .with_header(&GetMaxOffsetRequestHeader::new(TOPIC, queue)),
            );
            let committed = c.call(
                RemotingCommand::request(RequestCode::QUERY_CONSUMER_OFFSET)
                    .with_version(513)
                    .with_ext_field("consumerGroup", GROUP)
                    .with_ext_field("topic", TOPIC)
                    .with_ext_field("queueId", queue.to_string()),
            );
            let num = |r: &RemotingCommand| r.ext_fields.get("offset").and_then(|o| o.parse().ok());
            (num(&max).unwrap_or(-1), if committed.code == 0 { num(&committed).unwrap_or(-1) } else { -1 })
        })
        .collect()
}

/// `topicPutTps` of `TOPIC` in the master's `GET_TOPIC_STATS_INFO` answer.
fn topic_put_tps(c: &mut Client) -> f64 {
    let r = c.call(
        RemotingCommand::request(RequestCode::GET_TOPIC_STATS_INFO)
            .with_version(513)
            .with_ext_field("topic", TOPIC),
    );
    assert_eq!(r.code, 0, "GET_TOPIC_STATS_INFO: {:?}", r.remark);
    let body = String::from_utf8_lossy(&r.body).to_string();
    let at = body.find("\"topicPutTps\":").unwrap_or_else(|| panic!("no topicPutTps in {body}"));
    let rest = &body[at + "\"topicPutTps\":".len()..];
    let end = rest.find(['}', ',']).unwrap_or(rest.len());
    rest[..end].parse().unwrap_or_else(|_| panic!("topicPutTps in {body}"))
}

/// `consumeTps` of `GROUP` on `TOPIC` in the master's `GET_CONSUME_STATS` answer.
fn consume_tps(c: &mut Client) -> f64 {
    let r = c.call(
        RemotingCommand::request(RequestCode::GET_CONSUME_STATS)
            .with_version(513)
            .with_ext_field("consumerGroup", GROUP)
            .with_ext_field("topic", TOPIC),
    );
    assert_eq!(r.code, 0, "GET_CONSUME_STATS: {:?}", r.remark);
    let body = String::from_utf8_lossy(&r.body).to_string();
    let at = body.find("\"consumeTps\":").unwrap_or_else(|| panic!("no consumeTps in {body}"));
    let rest = &body[at + "\"consumeTps\":".len()..];
    let end = rest.find(['}', ',']).unwrap_or(rest.len());
    rest[..end].parse().unwrap_or_else(|_| panic!("consumeTps in {body}"))
}

/// mqadmin's `key : value` lines (`brokerStatus`).
fn key_values(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The whitespace-separated cells of the lines of `text` whose first cell is `first`.
fn rows<'a>(text: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cells| cells.first() == Some(&first))
        .collect()
}

fn ok(done: &Value, what: &str) -> String {
    assert_eq!(done["ok"], true, "mqadmin {what} failed: {done}");
    done["text"].as_str().unwrap().to_string()
}

struct Group {
    master: Broker,
    slave: Broker,
}

fn start_group(dir: &Path, ns: &str) -> Group {
    let ns_set = format!("namesrvAddr={ns}");
    let bn = format!("brokerName={BROKER}");
    let master = Broker::start(
        "master",
        &dir.join("m"),
        free_port_pair(),
        &["--role", "SYNC_MASTER", "--set", &ns_set, "--set", &bn, "--set", "slaveTimeout=3000"],
    );
    let slave = Broker::start(
        "slave",
        &dir.join("s1"),
        free_port_pair(),
        &["--master", &master.ha_addr(), "--set", "brokerId=1", "--set", &ns_set, "--set", &bn],
    );
    eventually("the slave to connect", || master.status()["slaves"].as_array().is_some_and(|s| s.len() == 1));
    Group { master, slave }
}

#[test]
fn mqadmin_5_5_0_and_4_9_7_report_a_logship_group_as_it_is() {
    let test = "mqadmin_5_5_0_and_4_9_7_report_a_logship_group_as_it_is";
    let Some(apps5) = java_apps(CLIENT_5, test) else { return };
    let Some(apps4) = java_apps(CLIENT_4, test) else { return };
    let started = Instant::now();
    let dir = tempfile::Builder::new().prefix("logship-mqadmin-").tempdir().unwrap();
    let namesrv = Namesrv::start(&apps5, &[]);
    let ns = namesrv.addr();
    let g = start_group(dir.path(), &ns);
    let master_addr = g.master.remoting_addr().to_string();
    let slave_addr = g.slave.remoting_addr().to_string();

    // The topic: a seed send creates it with four queues and the master registers it at once;
    // topicRoute (both lines) names the master as id 0 and the slave as id 1.
    let mut c = Client::connect(g.master.remoting_addr());
    let r = c.call(send_request(TOPIC, 0, "", b"seed"));
    assert_eq!(r.code, 0, "the seed send: {:?}", r.remark);
    for apps in [&apps5, &apps4] {
        let deadline = Instant::now() + BIG;
        loop {
            let route = apps.mqadmin(&["topicRoute", "-n", &ns, "-t", TOPIC]);
            let text = route["text"].as_str().unwrap_or("");
            if route["ok"] == true && text.contains(&format!("1:\"{slave_addr}\"")) {
                assert!(text.contains(&format!("\"brokerName\":\"{BROKER}\"")), "topicRoute:\n{text}");
                assert!(text.contains(&format!("0:\"{master_addr}\"")), "the master is id 0:\n{text}");
                assert!(
                    text.contains("\"writeQueueNums\":4") && text.contains("\"readQueueNums\":4"),
                    "{text}"
                );
                break;
            }
            assert!(Instant::now() < deadline, "the NameServer never routed {TOPIC} to both: {route}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let set_up = started.elapsed();

    // A consumer of the group, then the messages; it consumes and commits everything.
    let mut consumer = apps5.push_consume(&[
        "--namesrv",
        &ns,
        "--topic",
        TOPIC,
        "--group",
        GROUP,
        "--instance",
        "c1",
        "--from",
        "first",
    ]);
    wait_rebalanced(&mut consumer, TOPIC, 1, BIG);
    let count = SENT.to_string();
    let sent = apps5
        .produce(&[
            "--namesrv",
            &ns,
            "--topic",
            TOPIC,
            "--count",
            &count,
            "--size",
            "100",
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
    assert_eq!(send_statuses(&sent).get("SEND_OK"), Some(&SENT), "{:?}", events(&sent, "send_error"));
    let deadline = Instant::now() + BIG;
    let per_queue = loop {
        let o = offsets(&mut c);
        if o.iter().map(|(max, _)| max).sum::<i64>() == SENT as i64 + 1
            && o.iter().all(|(max, done)| max == done)
        {
            break o;
        }
        assert!(
            Instant::now() < deadline,
            "the group never committed everything: {o:?}\n{}",
            consumer.stderr()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let master_max = g.master.max_offset();
    eventually("the slave to hold everything", || g.slave.max_offset() >= master_max);
    let consumed = started.elapsed();

    // The rates of the last minute, as Java's BrokerStatsManager samples them every 10 s: the
    // topic's puts (GET_TOPIC_STATS_INFO's topicPutTps) and the group's pulled messages
    // (GET_CONSUME_STATS's consumeTps, which consumerProgress prints), both above 0 within a
    // sample of the messages, with both tool lines.
    let deadline = Instant::now() + Duration::from_secs(50);
    loop {
        let tps = (topic_put_tps(&mut c), consume_tps(&mut c));
        if tps.0 > 0.0 && tps.1 > 0.0 {
            break;
        }
        assert!(Instant::now() < deadline, "(topicPutTps, consumeTps) stayed {tps:?} after {SENT} sends");
        std::thread::sleep(Duration::from_millis(500));
    }
    // statsAll: the topic's row, from the master's VIEW_BROKER_STATS_DATA answers
    // (TOPIC_PUT_NUMS of the topic, GROUP_GET_NUMS of `topic@group`): the in and out rates of
    // the last minute above 0, and the messages in and out (the broker has run less than ten
    // minutes, so these are the minute's sums, as a Java broker's are): every message sent
    // (the seed may be older than the minute) and at least as many consumed, nothing behind.
    for (apps, line) in [(&apps5, CLIENT_5), (&apps4, CLIENT_4)] {
        let who = format!("mqadmin {}", line.version);
        let text = ok(&apps.mqadmin(&["statsAll", "-n", &ns, "-t", TOPIC]), "statsAll");
        let header: Vec<&str> = text.lines().next().unwrap_or("").split_whitespace().collect();
        assert_eq!(
            header,
            [
                "#Topic",
                "#Consumer",
                "Group",
                "#Accumulation",
                "#InTPS",
                "#OutTPS",
                "#InMsg24Hour",
                "#OutMsg24Hour"
            ],
            "{who} statsAll:\n{text}"
        );
        let row = rows(&text, TOPIC);
        assert_eq!(row.len(), 1, "{who} statsAll: one row, the topic and its group:\n{text}");
        let cells = &row[0];
        assert_eq!(cells.len(), 7, "{who} statsAll: {cells:?}");
        assert_eq!((cells[1], cells[2]), (GROUP, "0"), "{who}: the group, nothing behind: {cells:?}");
        let rate = |i: usize| cells[i].parse::<f64>().unwrap_or_else(|_| panic!("{who}: {cells:?}"));
        let count = |i: usize| cells[i].parse::<u64>().unwrap_or_else(|_| panic!("{who}: {cells:?}"));
        assert!(rate(3) > 0.0 && rate(4) > 0.0, "{who}: the minute's in and out rates:\n{text}");
        assert!((SENT..=SENT + 1).contains(&count(5)), "{who}: the messages in:\n{text}");
        assert!(count(6) >= SENT, "{who}: the messages out:\n{text}");
    }

    for (apps, line) in [(&apps5, CLIENT_5), (&apps4, CLIENT_4)] {
        let text = ok(&apps.mqadmin(&["consumerProgress", "-n", &ns, "-g", GROUP]), "consumerProgress");
        let tps: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("Consume TPS: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("mqadmin {}: no Consume TPS:\n{text}", line.version));
        assert!(
            tps > 0.0,
            "mqadmin {}: the group consumed {SENT} messages in the last minute:\n{text}",
            line.version
        );
    }

    for (apps, line) in [(&apps5, CLIENT_5), (&apps4, CLIENT_4)] {
        let v5 = line == CLIENT_5;
        let who = format!("mqadmin {}", line.version);

        // clusterList: both brokers, the emulated version, the earliest message minutes old,
        // and (5.x) the master active and the slave not.
        let done = apps.mqadmin(&["clusterList", "-n", &ns]);
        let text = if v5 {
            ok(&done, "clusterList")
        } else {
            // 4.9.7's clusterList reads `getTransferedTps`, which a 5.x broker (Java's too) names
            // `getTransferredTps`: it prints that NullPointerException per broker and the rows.
            let stderr = done["stderr"].as_str().unwrap();
            let traces = stderr.lines().filter(|l| l.contains("Exception")).count();
            let npes = stderr.matches("because \"getTransferedTps\" is null").count();
            assert_eq!(traces, npes, "{who} clusterList: only the known NPE: {done}");
            done["text"].as_str().unwrap().to_string()
        };
        let brokers = rows(&text, "DefaultCluster");
        assert_eq!(brokers.len(), 2, "{who} clusterList:\n{text}");
        for cells in &brokers {
            assert_eq!(cells[1], BROKER, "{text}");
            let (id, addr) = (cells[2], cells[3]);
            let want = if id == "0" { &master_addr } else { &slave_addr };
            assert_eq!(addr, want, "{who}: broker id {id}:\n{text}");
            assert_eq!(cells[4], "V5_5_0", "{who}: the version column:\n{text}");
            let hour_at = if v5 { cells.len() - 3 } else { cells.len() - 2 };
            let hour: f64 = cells[hour_at].parse().unwrap_or_else(|_| panic!("{who}: no #Hour in {cells:?}"));
            assert!((0.0..1.0).contains(&hour), "{who}: the oldest message is minutes old: {cells:?}");
            if v5 {
                let active = if id == "0" { "true" } else { "false" };
                assert_eq!(cells.last().copied(), Some(active), "{who}: #ACTIVATED of {id}:\n{text}");
            }
        }

        // brokerStatus: real counters and offsets, on the master and on the slave.
        let text = ok(&apps.mqadmin(&["brokerStatus", "-n", &ns, "-b", &master_addr]), "brokerStatus");
        let kv = key_values(&text);
        assert_eq!(
            kv.get("msgPutTotalTodayNow").map(String::as_str),
            Some("41"),
            "{who} brokerStatus:\n{text}"
        );
        let got: u64 = kv["msgGetTotalTodayNow"].parse().unwrap();
        assert!(got > SENT, "{who}: the consumer pulled every message: {got}");
        assert_eq!(kv["commitLogMaxOffset"], master_max.to_string(), "{text}");
        assert_eq!(kv["commitLogMinOffset"], "0");
        assert_eq!(kv["brokerVersionDesc"], "V5_5_0");
        assert_eq!(kv["putMessageTimesTotal"], "41", "the seed and 40 sync sends:\n{text}");
        assert!(kv["putMessageSizeTotal"].parse::<u64>().unwrap() > 41 * 100, "{text}");
        // The group answers as 5.5.0 does (rocketmqLine 5), whichever tool asks.
        assert!(kv.contains_key("putTps") && kv.contains_key("getTransferredTps"), "{text}");
        let text = ok(&apps.mqadmin(&["brokerStatus", "-n", &ns, "-b", &slave_addr]), "brokerStatus (slave)");
        let kv = key_values(&text);
        assert_eq!(kv["commitLogMaxOffset"], master_max.to_string(), "{who}: the slave's log:\n{text}");
        assert_eq!(kv.get("brokerActive").map(String::as_str), Some("false"), "{text}");

        // topicStatus: every queue's max offset.
        let text = ok(&apps.mqadmin(&["topicStatus", "-n", &ns, "-t", TOPIC]), "topicStatus");
        let queues = rows(&text, BROKER);
        assert_eq!(queues.len(), 4, "{who} topicStatus:\n{text}");
        for cells in &queues {
            let q: usize = cells[1].parse().unwrap();
            assert_eq!(cells[2], "0", "min offset of {q}");
            assert_eq!(cells[3], per_queue[q].0.to_string(), "{who}: max offset of queue {q}:\n{text}");
        }

        // consumerProgress: each queue's broker and consumer offset, no diff.
        let text = ok(&apps.mqadmin(&["consumerProgress", "-n", &ns, "-g", GROUP]), "consumerProgress");
        let queues = rows(&text, TOPIC);
        assert_eq!(queues.len(), 4, "{who} consumerProgress:\n{text}");
        for cells in &queues {
            assert_eq!(cells[1], BROKER);
            let q: usize = cells[2].parse().unwrap();
            let max = per_queue[q].0.to_string();
            assert_eq!(
                (cells[3], cells[4], cells[5]),
                (max.as_str(), max.as_str(), "0"),
                "{who}: queue {q}:\n{text}"
            );
        }
        let total = text
            .lines()
            .find(|l| l.starts_with("Diff Total") || l.starts_with("Consume Diff Total"))
            .unwrap_or_else(|| panic!("{who}: no Diff Total:\n{text}"));
        assert!(total.trim_end().ends_with(": 0"), "{who}: {total}");

        // consumerConnection: the consumer's client, its subscription and consume type.
        let text = ok(&apps.mqadmin(&["consumerConnection", "-n", &ns, "-g", GROUP]), "consumerConnection");
        assert!(
            text.contains(TOPIC) && text.contains("CONSUME_PASSIVELY"),
            "{who} consumerConnection:\n{text}"
        );
        assert!(text.contains("CLUSTERING") && text.contains("JAVA"), "{who} consumerConnection:\n{text}");

        // queryMsgById: the message behind an offset message id, with its key and topic.
        let one = events(&sent, "send")[7];
        let id = one["offsetMsgId"].as_str().unwrap();
        let mut args = vec!["queryMsgById", "-n", &ns, "-i", id];
        if v5 {
            args.extend(["-t", TOPIC]);
        }
        let text = ok(&apps.mqadmin(&args), "queryMsgById");
        let key = format!("key-{}", one["i"]);
        assert!(text.contains(&key) && text.contains(TOPIC), "{who} queryMsgById:\n{text}");
        assert!(text.contains(id), "{who}: the id it was asked:\n{text}");
    }

    // producerConnection: a producer sending now (so its heartbeat reached the broker) is
    // listed with its client id, address, language and version, by both tool lines.
    let mut producer = apps5.produce(&[
        "--namesrv",
        &ns,
        "--topic",
        TOPIC,
        "--group",
        "admin_producer",
        "--instance",
        "p2",
        "--size",
        "50",
        "--mode",
        "sync",
        "--until-stopped",
        "--interval-ms",
        "200",
    ]);
    producer.wait_event("send", BIG);
    for (apps, line) in [(&apps5, CLIENT_5), (&apps4, CLIENT_4)] {
        let args = ["producerConnection", "-n", &ns, "-g", "admin_producer", "-t", TOPIC];
        let text = ok(&apps.mqadmin(&args), "producerConnection");
        let row = rows(&text, "0001");
        assert_eq!(row.len(), 1, "mqadmin {} producerConnection:\n{text}", line.version);
        let cells = &row[0];
        assert!(cells[1].ends_with("@p2"), "the client id: {cells:?}");
        assert!(cells[2].starts_with("127.0.0.1:"), "the address: {cells:?}");
        assert_eq!((cells[3], cells[4]), ("JAVA", "V5_5_0"), "language and version: {cells:?}");
    }
    producer.stop(BIG);
    let admin = started.elapsed();

    consumer.stop(BIG);
    let Group { master, slave } = g;
    drop(slave);
    drop(master);
    drop(namesrv);
    eprintln!(
        "{test}: set up {:.1} s, produced and consumed {:.1} s, mqadmin (both lines) {:.1} s",
        set_up.as_secs_f64(),
        (consumed - set_up).as_secs_f64(),
        (admin - consumed).as_secs_f64()
    );
}
