use std::net::IpAddr;
use std::path::Path;

use logship_remoting::{RemotingCommand, RequestCode};

use super::*;

const FILE: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress: 192.168.0.*
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: "12345678"
    admin: true
dataVersion:
  - counter: 1
    timestamp: 1700000000000
"#;

fn config() -> AclConfig {
    AclConfig::parse(FILE, Path::new("plain_acl.yml")).unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn signed(code: RequestCode, fields: &[(&str, &str)], body: &[u8], ak: &str, sk: &str) -> RemotingCommand {
    let mut r = RemotingCommand::request(code).with_body(body.to_vec());
    for (k, v) in fields {
        r.ext_fields.insert((*k).into(), (*v).into());
    }
    sign_request(&mut r, ak, sk);
    r
}

fn remark(r: Result<(), Refusal>) -> String {
    let refusal = r.unwrap_err();
    assert_eq!(refusal.code, logship_remoting::ResponseCode::SYSTEM_ERROR);
    refusal.remark
}

#[test]
fn signatures_match_the_vectors_of_java_s_acl_client_rpc_hook() {
    // Computed by the 4.9.7 AclClientRPCHook (spec-cluster §6.3).
    let mut ext = BTreeMap::new();
    for (k, v) in
        [("consumerGroup", "GroupA"), ("topic", "TopicA"), ("queueId", "0"), ("AccessKey", "userNoPerm")]
    {
        ext.insert(k.to_owned(), v.to_owned());
    }
    let content = signed_content(&ext, b"hi", &[]);
    assert_eq!(content, b"userNoPermGroupA0TopicAhi");
    assert_eq!(signature("secret12345", &content), "v5rTR5BxNGAIGw4GZ4fH5NptTzc=");

    let mut ext = BTreeMap::new();
    for (k, v) in [("consumerGroup", "GroupA"), ("AccessKey", "userNoPerm"), ("SecurityToken", "tok")] {
        ext.insert(k.to_owned(), v.to_owned());
    }
    ext.insert(SIGNATURE.into(), "ignored".into());
    let content = signed_content(&ext, b"", &[]);
    assert_eq!(content, b"userNoPermtokGroupA");
    assert_eq!(signature("secret12345", &content), "S7s7QgeVU7Y7U+Bqn0KciM6ScUY=");
}

#[test]
fn the_file_parses_into_accounts_with_their_permissions() {
    let c = config();
    assert_eq!(
        c.global_white_remote_addresses,
        vec![AddressPattern::Range { head: vec![10, 10, 103], low: 0, high: 255 }]
    );
    let a = &c.accounts["RocketMQ"];
    assert_eq!(a.secret_key, "12345678");
    assert!(!a.admin);
    assert_eq!((a.default_topic_perm, a.default_group_perm), (Perm::DENY, Perm::SUB));
    assert_eq!(a.resource_perms["topicB"], Perm::PUB_SUB);
    assert_eq!(a.resource_perms["%RETRY%groupA"], Perm::DENY);
    let b = &c.accounts["rocketmq2"];
    assert!(b.admin);
    assert_eq!(b.white_remote_address, AddressPattern::Nothing);
    assert_eq!(b.default_topic_perm, Perm::DENY);
}

#[test]
fn a_bad_file_is_an_error_naming_the_field_and_the_fix() {
    let bad = |text: &str| AclConfig::parse(text, Path::new("/etc/plain_acl.yml")).unwrap_err().to_string();
    let e = bad("accounts:\n  - accessKey: short\n    secretKey: 12345678\n");
    assert!(e.contains("accounts[0].accessKey") && e.contains("longer key"), "{e}");
    let e = bad("accounts:\n  - accessKey: RocketMQ\n");
    assert!(e.contains("accounts[0].secretKey: is missing"), "{e}");
    let e = bad(
        "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    whiteRemoteAddress: 192.168.1.1,2,3\n",
    );
    assert!(e.contains("accounts[0].whiteRemoteAddress") && e.contains("`2`"), "{e}");
    let e = bad(
        "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [ \"t=PUB,SUB\" ]\n",
    );
    assert!(e.contains("accounts[0].topicPerms[0]") && e.contains("PUB|SUB"), "{e}");
    let e = bad("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [ \"t\" ]\n");
    assert!(e.contains("name=PERM"), "{e}");
    let e = bad("accounts:\n  - accessKey: RocketMQ\n   secretKey: [\n");
    assert!(e.contains("/etc/plain_acl.yml is not valid YAML at line"), "{e}");
    let e = bad(
        "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n  - accessKey: RocketMQ\n    secretKey: 87654321\n",
    );
    assert!(e.contains("accounts[1].accessKey") && e.contains("twice"), "{e}");
    let e = bad("");
    assert!(e.contains("empty"), "{e}");
    let e = bad("globalWhiteRemoteAddresses: [ \"10.1.*.x\" ]\n");
    assert!(e.contains("globalWhiteRemoteAddresses[0]"), "{e}");
}

#[test]
fn address_patterns_match_as_java_s_strategies_do() {
    let m = |p: &str, a: &str| AddressPattern::parse(p).unwrap().matches(ip(a));
    assert!(!m("", "1.2.3.4"));
    assert!(m("*", "1.2.3.4") && m("*.*.*.*", "1.2.3.4") && m("*:*:*:*:*:*:*:*", "::1"));
    assert!(m("192.168.1.{1,2,3}", "192.168.1.2") && !m("192.168.1.{1,2,3}", "192.168.1.4"));
    assert!(m("192.168.1.1,192.168.1.2", "192.168.1.2") && !m("192.168.1.1,192.168.1.2", "192.168.1.3"));
    assert!(AddressPattern::parse("192.168.1.1,2,3").is_err());
    assert!(m("192.168.1.*", "192.168.1.77") && !m("192.168.1.*", "192.168.2.77"));
    assert!(m("192.168.*.*", "192.168.9.9") && m("192.*.*.*", "192.1.1.1") && !m("192.*.*.*", "193.1.1.1"));
    assert!(m("192.168.1.1-10", "192.168.1.10") && !m("192.168.1.1-10", "192.168.1.11"));
    // Java's quirk: octets after the range are not checked.
    assert!(m("192.168.1-10.5", "192.168.3.77") && !m("192.168.1-10.5", "192.168.11.5"));
    assert!(AddressPattern::parse("192.168.10-1.*").is_err());
    assert!(AddressPattern::parse("192.168.1.300-400").is_err());
    assert!(m("10.0.0.1", "10.0.0.1") && !m("10.0.0.1", "10.0.0.2"));
    assert!(m("10.0.0.1", "::ffff:10.0.0.1"), "an IPv4-mapped peer is its IPv4 address");
    assert!(m("fe80::1", "FE80:0:0:0:0:0:0:1".to_lowercase().as_str()));
    assert!(AddressPattern::parse("not-an-address").is_err());
}

#[test]
fn checks_run_in_java_s_order_with_java_s_messages() {
    let c = config();
    let peer = ip("172.16.0.1");
    let send = |topic: &str, ak: &str, sk: &str| {
        signed(RequestCode::SEND_MESSAGE_V2, &[("a", "P"), ("b", topic)], b"x", ak, sk)
    };

    // A global white address needs nothing.
    assert!(
        c.check(ip("10.10.103.4"), &RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC)).is_ok()
    );
    let r = c.check(peer, &RemotingCommand::request(RequestCode::SEND_MESSAGE_V2));
    assert_eq!(remark(r), "org.apache.rocketmq.acl.common.AclException: No accessKey is configured");
    let r = c.check(peer, &send("topicB", "stranger1", "12345678"));
    assert!(remark(r).ends_with("No acl config for stranger1"));
    let r = c.check(peer, &send("topicB", "RocketMQ", "wrong-secret"));
    assert!(remark(r).ends_with("Check signature failed for accessKey=RocketMQ"));
    let mut tampered = send("topicB", "RocketMQ", "12345678");
    tampered.body = b"y".to_vec().into();
    assert!(remark(c.check(peer, &tampered)).contains("Check signature failed"));
    // The account's white address skips the signature.
    assert!(c.check(ip("192.168.0.3"), &send("topicA", "RocketMQ", "wrong-secret")).is_ok());

    assert!(c.check(peer, &send("topicB", "RocketMQ", "12345678")).is_ok());
    let r = c.check(peer, &send("topicA", "RocketMQ", "12345678"));
    assert!(remark(r).ends_with("No default permission for topic:topicA"));
    let r = c.check(peer, &send("topicC", "RocketMQ", "12345678"));
    assert!(remark(r).ends_with("No default permission for topic:topicC"), "SUB does not grant PUB");
    let r = c.check(peer, &send("unlisted", "RocketMQ", "12345678"));
    assert!(remark(r).ends_with("No default permission for topic:unlisted"), "defaultTopicPerm DENY");
    assert!(c.check(peer, &send("RMQ_SYS_TRACE_TOPIC", "RocketMQ", "12345678")).is_ok());
    let batch =
        signed(RequestCode::SEND_BATCH_MESSAGE, &[("a", "P"), ("b", "topicA")], b"x", "RocketMQ", "12345678");
    assert!(remark(c.check(peer, &batch)).ends_with("topic:topicA"), "batches are checked like single sends");

    let pull = |group: &str| {
        signed(
            RequestCode::PULL_MESSAGE,
            &[("consumerGroup", group), ("topic", "topicC"), ("queueId", "0")],
            b"",
            "RocketMQ",
            "12345678",
        )
    };
    assert!(c.check(peer, &pull("groupB")).is_ok());
    assert!(c.check(peer, &pull("unlisted")).is_ok(), "defaultGroupPerm SUB");
    assert!(remark(c.check(peer, &pull("groupA"))).ends_with("No default permission for group:groupA"));

    let admin = signed(RequestCode::UPDATE_AND_CREATE_TOPIC, &[("topic", "T")], b"", "RocketMQ", "12345678");
    assert!(
        remark(c.check(peer, &admin))
            .ends_with("Need admin permission for request code=17, but accessKey=RocketMQ is not")
    );
    let admin = signed(RequestCode::UPDATE_AND_CREATE_TOPIC, &[("topic", "T")], b"", "rocketmq2", "12345678");
    assert!(c.check(peer, &admin).is_ok());
}

#[test]
fn heartbeats_need_every_group_and_subscribed_topic() {
    let c = config();
    let peer = ip("172.16.0.1");
    let body = |group: &str, topic: &str| {
        format!(
            r#"{{"clientID":"c","consumerDataSet":[{{"groupName":"{group}","subscriptionDataSet":[{{"topic":"{topic}","subString":"*"}}]}}],"producerDataSet":[]}}"#
        )
    };
    let hb = |group: &str, topic: &str| {
        signed(RequestCode::HEART_BEAT, &[], body(group, topic).as_bytes(), "RocketMQ", "12345678")
    };
    assert!(c.check(peer, &hb("groupB", "topicC")).is_ok());
    assert!(remark(c.check(peer, &hb("groupB", "topicA"))).ends_with("topic:topicA"));
    assert!(remark(c.check(peer, &hb("groupA", "topicC"))).ends_with("group:groupA"));
    let garbage = signed(RequestCode::HEART_BEAT, &[], b"{not json", "RocketMQ", "12345678");
    assert!(remark(c.check(peer, &garbage)).contains("heartbeat body"));
}

#[test]
fn unique_key_queries_and_go_tokens_verify_in_either_form() {
    let c = config();
    let peer = ip("172.16.0.1");
    // A 4.9 broker leaves _UNIQUE_KEY_QUERY out: a request signed without it passes.
    let mut r =
        signed(RequestCode::QUERY_MESSAGE, &[("topic", "topicC"), ("key", "k")], b"", "RocketMQ", "12345678");
    r.ext_fields.insert("_UNIQUE_KEY_QUERY".into(), "true".into());
    assert!(c.check(peer, &r).is_ok());
    // The Java client signs it: that passes too.
    let r = signed(
        RequestCode::QUERY_MESSAGE,
        &[("topic", "topicC"), ("_UNIQUE_KEY_QUERY", "true")],
        b"",
        "RocketMQ",
        "12345678",
    );
    assert!(c.check(peer, &r).is_ok());
    // The Go client sends a token it does not sign.
    let mut r = signed(RequestCode::GET_MAX_OFFSET, &[("topic", "topicC")], b"", "RocketMQ", "12345678");
    r.ext_fields.insert(SECURITY_TOKEN.into(), "tok".into());
    assert!(c.check(peer, &r).is_ok());
    // But a field that is neither cannot be added after signing.
    let mut r = signed(RequestCode::GET_MAX_OFFSET, &[("topic", "topicC")], b"", "RocketMQ", "12345678");
    r.ext_fields.insert("queueId".into(), "3".into());
    assert!(remark(c.check(peer, &r)).contains("Check signature failed"));
    let mut r = signed(RequestCode::GET_MAX_OFFSET, &[], b"", "RocketMQ", "12345678");
    r.ext_fields.insert(SIGNATURE.into(), "!!not base64".into());
    assert!(remark(c.check(peer, &r)).contains("Check signature failed"));
}

#[test]
fn a_changed_file_is_reloaded_and_a_broken_one_keeps_the_old_accounts() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("plain_acl.yml");
    std::fs::write(&path, FILE).unwrap();
    let acl = PlainAcl::load(&path).unwrap();
    assert!(!acl.reload_if_changed().unwrap());
    std::fs::write(&path, "accounts:\n  - accessKey: another1\n    secretKey: 12345678\n    admin: true\n")
        .unwrap();
    assert!(acl.reload_if_changed().unwrap());
    assert_eq!(acl.config().accounts.keys().collect::<Vec<_>>(), ["another1"]);
    std::fs::write(&path, "accounts:\n  - accessKey: x\n").unwrap();
    assert!(acl.reload_if_changed().is_err());
    assert_eq!(acl.config().accounts.keys().collect::<Vec<_>>(), ["another1"], "still the last good file");
    std::fs::remove_file(&path).unwrap();
    assert!(acl.reload_if_changed().is_err());
    assert!(acl.config().accounts.contains_key("another1"));
}

#[test]
fn a_missing_file_refuses_to_load() {
    let e = PlainAcl::load(Path::new("/nonexistent/plain_acl.yml")).unwrap_err();
    assert!(matches!(e, AclError::Read { .. }));
    assert!(e.to_string().contains("aclEnable=false"));
}
