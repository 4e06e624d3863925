//! The remoting port of the `logship` binary, from a client's side of the socket: sends to a
//! SYNC_MASTER with two slaves (answered only once a slave holds the message, and with
//! FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE while the slaves cannot take it), a slave's
//! refusal, bad input answered with typed errors while the broker stays up, the connection
//! limits, registration with a NameServer (a fake one here: the real Apache NameServer is in
//! the Java interop tests), and the metadata surviving a restart.

mod process;
mod remoting_support;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use logship_remoting::body::{JsonBody, RegisterBrokerBody, TopicConfigSerializeWrapper};
use logship_remoting::header::{
    CommandHeader, GetMaxOffsetRequestHeader, RegisterBrokerRequestHeader, ViewMessageRequestHeader,
};
use logship_remoting::{RemotingCommand, RequestCode};
use process::{Broker, eventually, free_port_pair, signal};
use remoting_support::{Client, FakeNameServer, NameServerMode, send_request, sent};

fn offset_of(msg_id: &str) -> i64 {
    i64::from_str_radix(&msg_id[msg_id.len() - 16..], 16).unwrap()
}

fn view(client: &mut Client, offset: i64) -> RemotingCommand {
    client.call(
        RemotingCommand::request(RequestCode::VIEW_MESSAGE_BY_ID)
            .with_header(&ViewMessageRequestHeader { offset, topic: None }),
    )
}

/// A SYNC_MASTER (one slave's ack suffices) and two slaves, `slaveTimeout` 1 s.
fn group(dir: &std::path::Path) -> (Broker, Vec<Broker>) {
    let master = Broker::start(
        "master",
        &dir.join("m"),
        free_port_pair(),
        &["--role", "SYNC_MASTER", "--set", "slaveTimeout=1000", "--set", "brokerName=b1"],
    );
    let ha = master.ha_addr();
    let slaves: Vec<Broker> = (1..=2)
        .map(|i| {
            let id = format!("brokerId={i}");
            Broker::start(
                "slave",
                &dir.join(format!("s{i}")),
                free_port_pair(),
                &["--master", &ha, "--set", &id, "--set", "brokerName=b1"],
            )
        })
        .collect();
    eventually("both slaves to connect", || {
        master.status()["slaves"].as_array().is_some_and(|s| s.len() == 2)
    });
    (master, slaves)
}

#[test]
fn a_sync_master_answers_send_ok_only_once_a_slave_holds_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let (master, slaves) = group(dir.path());
    let mut producer = Client::connect(master.remoting_addr());
    let mut readers: Vec<Client> = slaves.iter().map(|s| Client::connect(s.remoting_addr())).collect();
    for i in 0..20 {
        let r = producer.call(send_request(
            "TopicS",
            i % 4,
            "TAGS\u{1}TagA\u{2}KEYS\u{1}k",
            format!("m{i}").as_bytes(),
        ));
        assert_eq!(r.code, 0, "{:?}\n{}", r.remark, master.log());
        let offset = offset_of(&sent(&r).msg_id);
        // No waiting: the answer came after a slave stored it.
        let held = readers.iter_mut().map(|c| view(c, offset).code).filter(|&code| code == 0).count();
        assert!(held >= 1, "message {i} at {offset} is on no slave");
    }
}

#[test]
fn with_its_slaves_stopped_a_sync_master_answers_flush_slave_timeout_then_slave_not_available() {
    let dir = tempfile::tempdir().unwrap();
    let (master, mut slaves) = group(dir.path());
    let mut producer = Client::connect(master.remoting_addr());
    assert_eq!(producer.call(send_request("TopicS", 0, "", b"first")).code, 0);
    for s in &slaves {
        signal(s.child.id(), "-STOP");
    }
    let started = Instant::now();
    let r = producer.call(send_request("TopicS", 0, "", b"while stopped"));
    assert_eq!(r.code, 12, "FLUSH_SLAVE_TIMEOUT: {:?}", r.remark);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "waited slaveTimeout (1 s), not {waited:?}\n{}",
        master.log()
    );
    let h = sent(&r);
    assert_eq!((h.queue_id, h.queue_offset), (0, 1), "stored on the master: clients read the header");
    for s in &mut slaves {
        signal(s.child.id(), "-CONT");
        s.kill9();
    }
    eventually("the master to see the slaves gone", || {
        master.status()["slaves"].as_array().is_some_and(|s| s.is_empty())
    });
    let r = producer.call(send_request("TopicS", 0, "", b"alone"));
    assert_eq!(r.code, 11, "SLAVE_NOT_AVAILABLE: {:?}", r.remark);
    assert_eq!(sent(&r).queue_offset, 2);
}

/// A Go producer sends its last one-way messages and closes the connection at once: every
/// request the broker read is still carried out, as a Java broker does (found by the Go client,
/// which lost 12 of 20 one-way sends to a SYNC_MASTER this way).
#[test]
fn one_way_sends_read_before_the_client_hangs_up_are_all_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (master, _slaves) = group(dir.path());
    let mut wire = Vec::new();
    for i in 0..50 {
        let request =
            send_request("TopicO", i % 4, "", format!("one-way {i}").as_bytes()).with_opaque(i).oneway();
        wire.extend_from_slice(&request.to_bytes().unwrap());
    }
    let mut c = TcpStream::connect(master.remoting_addr()).unwrap();
    c.write_all(&wire).unwrap();
    drop(c);
    let mut reader = Client::connect(master.remoting_addr());
    let stored = |reader: &mut Client| -> i64 {
        (0..4)
            .map(|q| {
                let r = reader.call(
                    RemotingCommand::request(RequestCode::GET_MAX_OFFSET)
                        .with_header(&GetMaxOffsetRequestHeader::new("TopicO", q)),
                );
                r.ext_fields.get("offset").map_or(0, |o| o.parse::<i64>().unwrap())
            })
            .sum()
    };
    eventually("all 50 one-way sends stored", || stored(&mut reader) == 50);
}

#[test]
fn a_slave_refuses_sends_and_serves_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let (master, slaves) = group(dir.path());
    let mut producer = Client::connect(master.remoting_addr());
    let id = sent(&producer.call(send_request("TopicS", 0, "", b"x"))).msg_id;
    let mut slave = Client::connect(slaves[0].remoting_addr());
    let r = slave.call(send_request("TopicS", 0, "", b"y"));
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (2, Some("[REJECTREQUEST]system busy, start flow control for a while"))
    );
    eventually("the slave to hold the message", || view(&mut slave, offset_of(&id)).code == 0);
    // The consume queue is built from the commit log after the bytes land (as Java's reput
    // does), so the queue's max offset may trail the message by a moment.
    eventually("the slave's consume queue to count the message", || {
        let r = slave.call(
            RemotingCommand::request(RequestCode::GET_MAX_OFFSET)
                .with_header(&GetMaxOffsetRequestHeader::new("TopicS", 0)),
        );
        assert_eq!(r.code, 0, "GET_MAX_OFFSET on a slave: {:?}", r.remark);
        r.ext_fields["offset"] == "1"
    });
}

#[test]
fn bad_input_gets_typed_errors_and_the_broker_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut master = Broker::start(
        "master",
        dir.path(),
        free_port_pair(),
        &["--set", "remotingFrameMaxLength=65536", "--set", "remotingFrameTimeout=500"],
    );
    let addr = master.remoting_addr();
    // Garbage: a negative length.
    let mut c = Client::connect(addr);
    c.write(b"\xff\xff\xff\xffGET / HTTP/1.1\r\n\r\n");
    let e = c.read_frame(Duration::from_secs(5)).expect("an error frame");
    assert_eq!((e.code, e.opaque), (1, -1));
    assert_eq!(e.remark.as_deref(), Some("frame length -1 is negative"));
    assert!(c.closed_within(Duration::from_secs(5)));
    // Oversized.
    let mut c = Client::connect(addr);
    c.write(&(1i32 << 20).to_be_bytes());
    let e = c.read_frame(Duration::from_secs(5)).unwrap();
    assert!(e.remark.as_deref().unwrap().contains("over the limit of 65536 bytes"), "{:?}", e.remark);
    assert!(c.closed_within(Duration::from_secs(5)));
    // A header that is not JSON.
    let mut c = Client::connect(addr);
    c.write(&[&12i32.to_be_bytes()[..], &8u32.to_be_bytes(), b"{not json"].concat()[..16]);
    let e = c.read_frame(Duration::from_secs(5)).unwrap();
    assert!(e.remark.as_deref().unwrap().starts_with("JSON header"), "{:?}", e.remark);
    // Truncated: half a frame, then nothing.
    let mut c = Client::connect(addr);
    let whole = RemotingCommand::request(RequestCode::HEART_BEAT).to_bytes().unwrap();
    c.write(&whole[..whole.len() / 2]);
    let e = c.read_frame(Duration::from_secs(5)).expect("the frame timeout's error");
    assert!(e.remark.as_deref().unwrap().contains("still incomplete"), "{:?}", e.remark);
    assert!(c.closed_within(Duration::from_secs(5)));
    // Truncated by the client closing: the broker just notes it.
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(&whole[..5]).unwrap();
    drop(c);
    // On one healthy connection: unknown codes, refused configuration, missing fields; it stays open.
    let mut c = Client::connect(addr);
    let r = c.call(RemotingCommand::request(RequestCode(4321)));
    assert_eq!((r.code, r.remark.as_deref()), (3, Some(" request type 4321 not supported")));
    let r = c.call(
        RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG).with_body(&b"brokerPermission=2"[..]),
    );
    assert_eq!(r.code, 3);
    let mut no_topic = send_request("TopicX", 0, "", b"x");
    no_topic.ext_fields.remove("b");
    let r = c.call(no_topic);
    assert_eq!(r.code, 1);
    assert!(r.remark.unwrap().contains("<b>"));
    let r = c.call(send_request("TopicX", 0, "", b"still serving"));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    master.alive().unwrap();
    let remoting = master.remoting_status();
    assert!(remoting.addresses.contains(&master.remoting_addr().to_string()), "{remoting:?}");
    assert!(remoting.port.bad_frames >= 4 && remoting.port.timed_out >= 1, "{:?}", remoting.port);
    assert!(remoting.requests >= 2 && remoting.connections >= 1, "{remoting:?}");
    assert_eq!(master.put("http too"), 200);
}

#[test]
fn connections_and_requests_in_flight_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start(
        "master",
        dir.path(),
        free_port_pair(),
        &["--set", "remotingMaxConnectionsPerIp=2", "--set", "remotingMaxInFlightPerConnection=1"],
    );
    let addr = master.remoting_addr();
    let mut a = Client::connect(addr);
    let _b = Client::connect(addr);
    let mut third = Client::connect(addr);
    assert!(third.closed_within(Duration::from_secs(5)), "a third connection from one address is closed");
    // 200 requests in one write: one is taken, the rest beyond the cap answered SYSTEM_BUSY.
    let mut wire = Vec::new();
    for opaque in 0..200 {
        let req = RemotingCommand::request(RequestCode::GET_MAX_OFFSET)
            .with_opaque(opaque)
            .with_header(&GetMaxOffsetRequestHeader::new("T", 0));
        wire.extend_from_slice(&req.to_bytes().unwrap());
    }
    a.write(&wire);
    let mut codes = Vec::new();
    while codes.len() < 200 {
        codes.push(a.read_frame(Duration::from_secs(10)).expect("every request is answered").code);
    }
    assert!(codes.iter().all(|&c| c == 0 || c == 2), "{codes:?}");
    assert!(codes.iter().filter(|&&c| c == 2).count() >= 100, "{codes:?}");
    assert!(master.remoting_status().port.refused >= 1);
}

#[test]
fn an_idle_connection_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start(
        "master",
        dir.path(),
        free_port_pair(),
        &["--set", "serverChannelMaxIdleTimeSeconds=1"],
    );
    let mut c = Client::connect(master.remoting_addr());
    assert_eq!(c.call(RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG)).code, 0);
    assert!(c.closed_within(Duration::from_secs(5)));
}

#[test]
fn brokers_register_with_each_name_server_and_unregister_at_a_clean_stop() {
    let (ns1, ns2) =
        (FakeNameServer::start(NameServerMode::Answer), FakeNameServer::start(NameServerMode::Answer));
    let namesrv = format!("namesrvAddr={};{}", ns1.addr, ns2.addr);
    let dir = tempfile::tempdir().unwrap();
    let mut master = Broker::start(
        "master",
        &dir.path().join("m"),
        free_port_pair(),
        &["--set", &namesrv, "--set", "brokerName=b1", "--set", "brokerClusterName=c1"],
    );
    let mut slave = Broker::start(
        "slave",
        &dir.path().join("s"),
        free_port_pair(),
        &[
            "--master",
            &master.ha_addr(),
            "--set",
            &namesrv,
            "--set",
            "brokerName=b1",
            "--set",
            "brokerClusterName=c1",
            "--set",
            "brokerId=1",
        ],
    );
    eventually("both brokers on both NameServers", || {
        [&ns1, &ns2].iter().all(|ns| {
            let ids: Vec<String> = ns
                .received(RequestCode::REGISTER_BROKER)
                .iter()
                .map(|c| c.ext_fields["brokerId"].clone())
                .collect();
            ids.contains(&"0".to_string()) && ids.contains(&"1".to_string())
        })
    });
    let registrations = ns1.received(RequestCode::REGISTER_BROKER);
    let m = registrations.iter().find(|c| c.ext_fields["brokerId"] == "0").unwrap();
    let h = RegisterBrokerRequestHeader::from_ext_fields(&m.ext_fields).unwrap();
    assert_eq!((h.broker_name.as_str(), h.cluster_name.as_str(), m.version), ("b1", "c1", 513));
    assert_eq!(h.broker_addr, master.remoting_addr().to_string());
    assert_eq!(h.ha_server_addr, master.ha_addr());
    let body = RegisterBrokerBody::decode(&m.body).unwrap();
    let topics = &body.topic_config_serialize_wrapper.topic_config_table;
    assert_eq!(topics["TBW102"].perm, 7, "producers auto-create through TBW102's route");
    // The slave is told its master (once the master registered on that NameServer).
    eventually("the slave's status to show its master", || {
        slave.status()["remoting"]["nameServers"]
            .as_object()
            .is_some_and(|n| n.values().any(|v| v["masterAddr"] == master.remoting_addr().to_string()))
    });
    // A new topic re-registers at once, not at the next period.
    let before = ns1.received(RequestCode::REGISTER_BROKER).len();
    let mut producer = Client::connect(master.remoting_addr());
    assert_eq!(producer.call(send_request("NewTopic", 0, "", b"x")).code, 0);
    eventually("a registration carrying NewTopic", || {
        ns1.received(RequestCode::REGISTER_BROKER)[before..].iter().any(|c| {
            c.ext_fields["brokerId"] == "0"
                && RegisterBrokerBody::decode(&c.body)
                    .unwrap()
                    .topic_config_serialize_wrapper
                    .topic_config_table
                    .contains_key("NewTopic")
        })
    });
    assert!(master.terminate().is_some_and(|s| s.success()));
    assert!(slave.terminate().is_some_and(|s| s.success()));
    for ns in [&ns1, &ns2] {
        let mut ids: Vec<String> = ns
            .received(RequestCode::UNREGISTER_BROKER)
            .iter()
            .map(|c| c.ext_fields["brokerId"].clone())
            .collect();
        ids.sort();
        assert_eq!(ids, ["0", "1"], "each broker unregistered with its own id");
    }
}

#[test]
fn a_name_server_that_is_down_silent_or_answers_garbage_blocks_nothing() {
    let silent = FakeNameServer::start(NameServerMode::Silent);
    let garbage = FakeNameServer::start(NameServerMode::Garbage);
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let namesrv = format!("namesrvAddr={};{};{down}", silent.addr, garbage.addr);
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start(
        "master",
        dir.path(),
        free_port_pair(),
        &["--set", &namesrv, "--set", "registerBrokerTimeoutMills=2000"],
    );
    let mut producer = Client::connect(master.remoting_addr());
    for i in 0..10 {
        let started = Instant::now();
        assert_eq!(producer.call(send_request("TopicN", 0, "", format!("{i}").as_bytes())).code, 0);
        assert!(started.elapsed() < Duration::from_secs(1), "a put waited on a NameServer");
    }
    eventually("every NameServer's failure shown", || {
        let n = master.status()["remoting"]["nameServers"].clone();
        [silent.addr.to_string(), garbage.addr.to_string(), down.to_string()]
            .iter()
            .all(|a| n[a]["failures"].as_u64().is_some_and(|f| f >= 1) && n[a]["lastError"].is_string())
    });
    let n = master.status()["remoting"]["nameServers"].clone();
    assert!(
        n[silent.addr.to_string()]["lastError"].as_str().unwrap().contains("no answer within 2000 ms"),
        "{n}"
    );
    assert!(
        n[garbage.addr.to_string()]["lastError"].as_str().unwrap().contains("not a remoting frame"),
        "{n}"
    );
    assert!(n[down.to_string()]["lastError"].as_str().unwrap().contains("cannot connect"), "{n}");
}

#[test]
fn topics_created_by_sends_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut master = Broker::start("master", dir.path(), free_port_pair(), &[]);
    let mut producer = Client::connect(master.remoting_addr());
    assert_eq!(producer.call(send_request("Durable", 0, "", b"x")).code, 0);
    assert!(master.terminate().is_some_and(|s| s.success()));
    let topics = std::fs::read_to_string(dir.path().join("config/topics.json")).unwrap();
    assert!(topics.contains("\"Durable\""), "{topics}");
    master.restart();
    let mut c = Client::connect(master.remoting_addr());
    let r = c.call(RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG));
    let w = TopicConfigSerializeWrapper::decode(&r.body).unwrap();
    assert_eq!(w.topic_config_table["Durable"].write_queue_nums, 4);
}
