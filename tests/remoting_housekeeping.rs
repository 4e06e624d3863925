//! The broker's client housekeeping on the binary (Java's `ClientHousekeepingService`): a
//! client whose heartbeats stop for `channelExpiredTimeout` is dropped from the group and its
//! connection closed at the next 10 s sweep; a client that keeps beating, and a connection that
//! never registered, stay.

mod process;
mod remoting_support;

use std::time::{Duration, Instant};

use logship_remoting::body::{
    ConsumerData, GetConsumerListByGroupResponseBody, HeartbeatData, JsonBody, ProducerData, SubscriptionData,
};
use logship_remoting::header::GetMaxOffsetRequestHeader;
use logship_remoting::{RemotingCommand, RequestCode};
use process::{Broker, free_port_pair};
use remoting_support::Client;

const GROUP: &str = "hk_group";

fn heartbeat(client_id: &str) -> RemotingCommand {
    let sub = SubscriptionData {
        topic: "HkTopic".into(),
        sub_string: "*".into(),
        expression_type: Some("TAG".into()),
        ..SubscriptionData::default()
    };
    let consumer = ConsumerData {
        group_name: GROUP.into(),
        consume_type: Some("CONSUME_PASSIVELY".into()),
        message_model: Some("CLUSTERING".into()),
        consume_from_where: Some("CONSUME_FROM_LAST_OFFSET".into()),
        subscription_data_set: vec![sub],
        ..ConsumerData::default()
    };
    let hb = HeartbeatData {
        client_id: client_id.into(),
        consumer_data_set: vec![consumer],
        producer_data_set: vec![ProducerData { group_name: "hk_producer".into() }],
        ..HeartbeatData::default()
    };
    RemotingCommand::request(RequestCode::HEART_BEAT).with_version(513).with_body(hb.encode())
}

fn members(c: &mut Client) -> Vec<String> {
    let r = c.call(
        RemotingCommand::request(RequestCode::GET_CONSUMER_LIST_BY_GROUP)
            .with_version(513)
            .with_ext_field("consumerGroup", GROUP),
    );
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let mut ids = GetConsumerListByGroupResponseBody::decode(&r.body).unwrap().consumer_id_list;
    ids.sort();
    ids
}

#[test]
fn a_client_whose_heartbeats_stop_is_dropped_and_disconnected_at_the_next_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let broker =
        Broker::start("master", dir.path(), free_port_pair(), &["--set", "channelExpiredTimeout=1000"]);
    let addr = broker.remoting_addr();
    let mut silent = Client::connect(addr);
    let mut chatty = Client::connect(addr);
    let mut stranger = Client::connect(addr);
    assert_eq!(silent.call(heartbeat("silent@1")).code, 0);
    assert_eq!(chatty.call(heartbeat("chatty@1")).code, 0);
    assert_eq!(members(&mut chatty), ["chatty@1", "silent@1"]);
    let max = RemotingCommand::request(RequestCode::GET_MAX_OFFSET)
        .with_version(513)
        .with_header(&GetMaxOffsetRequestHeader::new("HkTopic", 0));
    assert_ne!(stranger.call(max.clone()).code, -1);

    // The chatty client beats every 300 ms; the silent one never again. The sweep runs every
    // 10 s, so the silent one is closed within two sweeps.
    let started = Instant::now();
    loop {
        assert_eq!(chatty.call(heartbeat("chatty@1")).code, 0);
        if silent.closed_within(Duration::from_millis(300)) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the silent client was never disconnected:\n{}",
            broker.log()
        );
    }
    assert_eq!(members(&mut chatty), ["chatty@1"], "the silent client left the group");
    // A connection that never registered is not the sweep's: it still answers.
    let r = stranger.call(max);
    assert!(r.is_response(), "the unregistered connection stays open: {r:?}");
    assert!(broker.log().contains("no heartbeat"), "the broker says why:\n{}", broker.log());
}
