//! RocketMQ ACL 1.0 on the `logship` binary's remoting port, from a client that signs as
//! Java's `AclClientRPCHook` does: signed sends pass, a wrong secret, a missing signature and a
//! denied topic get Java's `AclException` answers on a connection that stays up, only an admin
//! creates topics, a changed `plain_acl.yml` is reloaded, and a missing one refuses the start.

mod process;
mod remoting_support;
mod support;

use std::time::{Duration, Instant};

use serde_json::Value;

use logship_broker::acl::sign_request;
use logship_remoting::body::{JsonBody, TopicConfigSerializeWrapper};
use logship_remoting::{RemotingCommand, RequestCode};
use process::{Broker, eventually, free_port_pair, spawn_logship, test_settings};
use remoting_support::{Client, send_request};

const ACL: &str = "\
accounts:
  - accessKey: producerKey
    secretKey: producerSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - TopicA=PUB
  - accessKey: adminKey
    secretKey: adminSecret
    admin: true
";

fn signed(mut r: RemotingCommand, ak: &str, sk: &str) -> RemotingCommand {
    sign_request(&mut r, ak, sk);
    r
}

fn create_topic(topic: &str) -> RemotingCommand {
    let mut r = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC);
    for (k, v) in [
        ("topic", topic),
        ("defaultTopic", "TBW102"),
        ("readQueueNums", "2"),
        ("writeQueueNums", "2"),
        ("perm", "6"),
        ("topicFilterType", "SINGLE_TAG"),
        ("order", "false"),
    ] {
        r.ext_fields.insert(k.into(), v.into());
    }
    r
}

fn start(dir: &std::path::Path, acl_file: &std::path::Path) -> Broker {
    let file = format!("aclFile={}", acl_file.display());
    Broker::start("master", &dir.join("m"), free_port_pair(), &["--set", "aclEnable=true", "--set", &file])
}

#[test]
fn signed_requests_pass_and_bad_ones_get_java_s_acl_errors_on_a_live_connection() {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(&acl, ACL).unwrap();
    let broker = start(dir.path(), &acl);
    let mut c = Client::connect(broker.remoting_addr());

    let ok = c.call(signed(send_request("TopicA", 0, "", b"hello"), "producerKey", "producerSecret"));
    assert_eq!(ok.code, 0, "{:?}\n{}", ok.remark, broker.log());

    let cases = [
        (send_request("TopicA", 0, "", b"x"), "No accessKey is configured"),
        (
            signed(send_request("TopicA", 0, "", b"x"), "producerKey", "wrongSecret"),
            "Check signature failed for accessKey=producerKey",
        ),
        (
            signed(send_request("TopicA", 0, "", b"x"), "nobodyKey", "producerSecret"),
            "No acl config for nobodyKey",
        ),
        (
            signed(send_request("TopicB", 0, "", b"x"), "producerKey", "producerSecret"),
            "No default permission for topic:TopicB",
        ),
        (
            signed(create_topic("ByProducer"), "producerKey", "producerSecret"),
            "Need admin permission for request code=17, but accessKey=producerKey is not",
        ),
    ];
    for (request, message) in cases {
        let r = c.call(request);
        assert_eq!(r.code, 1, "SYSTEM_ERROR for {message}");
        assert_eq!(
            r.remark.as_deref(),
            Some(format!("org.apache.rocketmq.acl.common.AclException: {message}").as_str())
        );
    }
    // The connection is still up and still serves.
    let again = c.call(signed(send_request("TopicA", 0, "", b"again"), "producerKey", "producerSecret"));
    assert_eq!(again.code, 0, "{:?}", again.remark);

    let r = c.call(signed(create_topic("ByAdmin"), "adminKey", "adminSecret"));
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let all = c.call(signed(
        RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG),
        "adminKey",
        "adminSecret",
    ));
    let table = TopicConfigSerializeWrapper::decode(&all.body).unwrap().topic_config_table;
    assert_eq!(table["ByAdmin"].write_queue_nums, 2);
    assert!(!table.contains_key("ByProducer"));
    let saved = std::fs::read_to_string(dir.path().join("m/config/topics.json")).unwrap();
    assert!(saved.contains("\"ByAdmin\""));
}

#[test]
fn a_changed_acl_file_is_reloaded_and_a_broken_one_keeps_the_accounts() {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("plain_acl.yml");
    std::fs::write(&acl, ACL).unwrap();
    let broker = start(dir.path(), &acl);
    let mut c = Client::connect(broker.remoting_addr());
    let send_b = |c: &mut Client| {
        c.call(signed(send_request("TopicB", 0, "", b"x"), "producerKey", "producerSecret")).code
    };
    assert_eq!(send_b(&mut c), 1);
    std::fs::write(&acl, ACL.replace("TopicA=PUB", "TopicB=PUB")).unwrap();
    eventually("the new ACL file to be used", || send_b(&mut c) == 0);
    std::fs::write(&acl, "accounts:\n  - accessKey: short\n").unwrap();
    eventually("the broken file to be reported", || {
        broker.log().contains("the previous accounts stay in force")
    });
    assert_eq!(send_b(&mut c), 0, "the last good accounts stay");
}

#[test]
fn acl_enabled_without_a_usable_file_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in
        [("missing.yml", None), ("bad.yml", Some("accounts:\n  - accessKey: RocketMQ\n    secretKey: 123\n"))]
    {
        let file = dir.path().join(name);
        if let Some(text) = text {
            std::fs::write(&file, text).unwrap();
        }
        let mut args: Vec<String> =
            ["master", "--store", &dir.path().join("m").display().to_string(), "--listen-port", "0"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        args.extend(test_settings(&["aclEnable=true", &format!("aclFile={}", file.display())]));
        let (mut child, log) = spawn_logship(&args, None);
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(started.elapsed() < Duration::from_secs(60), "{name}: still running");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(!status.success(), "{name}");
        // The log lags the process by a little.
        let said = |t: &str| log.lock().unwrap().contains(t);
        eventually("the refusal to be logged", || said("aclEnable=true but the ACL file cannot be used"));
        let text = log.lock().unwrap().clone();
        assert!(text.contains(name), "{name}: the file is named: {text}");
    }
}

/// A logship master with ACL registered with a real Apache NameServer, `TopicA` and `TopicB`
/// created by the admin account: `(namesrv, broker, acl dir)`.
fn with_namesrv(apps: &support::apps::JavaApps, dir: &std::path::Path) -> (support::apps::Namesrv, Broker) {
    let ns = support::apps::Namesrv::start(apps, &[]);
    let acl = dir.join("plain_acl.yml");
    std::fs::write(&acl, ACL).unwrap();
    let file = format!("aclFile={}", acl.display());
    let namesrv = format!("namesrvAddr={}", ns.addr());
    let broker = Broker::start(
        "master",
        &dir.join("m"),
        free_port_pair(),
        &["--set", "aclEnable=true", "--set", &file, "--set", &namesrv, "--set", "brokerName=acl-b"],
    );
    let mut c = Client::connect(broker.remoting_addr());
    for t in ["TopicA", "TopicB"] {
        let r = c.call(signed(create_topic(t), "adminKey", "adminSecret"));
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }
    // Registered at once on the change; clients that look the route up first must find it.
    let addr = ns.addr();
    for t in ["TopicA", "TopicB"] {
        eventually("the NameServer to route the topic", || {
            apps.mqadmin(&["topicRoute", "-n", &addr, "-t", t])["ok"] == true
        });
    }
    (ns, broker)
}

/// Runs a producer of 3 messages to `topic` with credentials; returns (SEND_OK count, the
/// responseCodes of its send errors).
fn produce(app: support::apps::App) -> (u64, Vec<Value>) {
    let (_, lines) = app.finish_any(Duration::from_secs(120));
    let ok = support::apps::events(&lines, "send").len() as u64;
    let errors =
        support::apps::events(&lines, "send_error").iter().map(|e| e["responseCode"].clone()).collect();
    (ok, errors)
}

/// A producer program's arguments: three sends to `topic` as account `producerKey` signing
/// with `secret`, found through the NameServer at `namesrv`, no retries.
fn signed_producer_args<'a>(namesrv: &'a str, topic: &'a str, secret: &'a str) -> [&'a str; 12] {
    [
        "--namesrv",
        namesrv,
        "--topic",
        topic,
        "--count",
        "3",
        "--retries",
        "0",
        "--access-key",
        "producerKey",
        "--secret-key",
        secret,
    ]
}

fn java_producers_sign_as_logship_checks(line: support::apps::ClientLine, test: &str) {
    let Some(apps) = support::apps::java_apps(line, test) else { return };
    let apps = apps.with_jvm_options(&["-Xmx256m"]);
    let dir = tempfile::tempdir().unwrap();
    let (ns, broker) = with_namesrv(&apps, dir.path());
    let addr = ns.addr();
    let run = |topic: &str, sk: &str| produce(apps.produce(&signed_producer_args(&addr, topic, sk)));
    let (ok, errors) = run("TopicA", "producerSecret");
    assert_eq!((ok, errors.len()), (3, 0), "{errors:?}\n{}", broker.log());
    let (ok, errors) = run("TopicA", "wrongSecret");
    assert_eq!(ok, 0);
    assert!(!errors.is_empty() && errors.iter().all(|c| c == 1), "SYSTEM_ERROR: {errors:?}");
    let (ok, errors) = run("TopicB", "producerSecret");
    assert_eq!(ok, 0);
    assert!(!errors.is_empty() && errors.iter().all(|c| c == 1), "denied: {errors:?}");
    assert!(broker.log().contains("No default permission for topic:TopicB"));
}

#[test]
fn java_5_5_0_producers_with_acl_credentials_send_and_bad_ones_are_refused() {
    java_producers_sign_as_logship_checks(
        support::apps::CLIENT_5,
        "java_5_5_0_producers_with_acl_credentials_send_and_bad_ones_are_refused",
    );
}

#[test]
fn java_4_9_7_producers_with_acl_credentials_send_and_bad_ones_are_refused() {
    java_producers_sign_as_logship_checks(
        support::apps::CLIENT_4,
        "java_4_9_7_producers_with_acl_credentials_send_and_bad_ones_are_refused",
    );
}

#[test]
fn go_producers_with_acl_credentials_send_and_bad_ones_are_refused() {
    let test = "go_producers_with_acl_credentials_send_and_bad_ones_are_refused";
    let (Some(apps), Some(go)) =
        (support::apps::java_apps(support::apps::CLIENT_5, test), support::apps::go_client(test))
    else {
        return;
    };
    let apps = apps.with_jvm_options(&["-Xmx256m"]);
    let dir = tempfile::tempdir().unwrap();
    let (ns, broker) = with_namesrv(&apps, dir.path());
    let addr = ns.addr();
    let run = |topic: &str, sk: &str| produce(go.produce(&signed_producer_args(&addr, topic, sk)));
    let (ok, errors) = run("TopicA", "producerSecret");
    assert_eq!((ok, errors.len()), (3, 0), "{errors:?}\n{}", broker.log());
    let (ok, errors) = run("TopicA", "wrongSecret");
    assert_eq!(ok, 0, "{errors:?}");
    let (ok, _) = run("TopicB", "producerSecret");
    assert_eq!(ok, 0);
    assert!(broker.log().contains("No default permission for topic:TopicB"));
}
