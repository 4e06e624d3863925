//! Routes: `TopicRouteData` from the NameServer.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{JsonBody, lenient};

/// `TopicRouteData`: the answer to `GET_ROUTEINFO_BY_TOPIC`, which brokers serve a topic.
///
/// A NameServer writes `brokerAddrs` with bare integer keys (`{0:"ip:port"}`) for a client
/// older than 4.9.4 that did not set `acceptStandardJsonOnly`; both forms read the same.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicRouteData {
    /// `brokerDatas`: each broker group and its addresses.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub broker_datas: Vec<BrokerData>,
    /// `filterServerTable`: filter servers by broker address.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// `orderTopicConf`: the KV-configured order of an ordered topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    /// `queueDatas`: each broker group's queues and permissions.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub queue_datas: Vec<QueueData>,
    /// `topicQueueMappingByBroker` (5.x static topics), kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_queue_mapping_by_broker: Option<serde_json::Value>,
}

impl JsonBody for TopicRouteData {
    const JAVA_CLASS: &'static str = "TopicRouteData";
}

/// `BrokerData`: one broker group in a route.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerData {
    /// `brokerAddrs`: address by broker id (0 the master).
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub broker_addrs: BTreeMap<i64, String>,
    /// `brokerName`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub broker_name: String,
    /// `cluster`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub cluster: String,
    /// `enableActingMaster` (5.x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_acting_master: Option<bool>,
    /// `zoneName` (5.x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_name: Option<String>,
}

impl BrokerData {
    /// The master's address (broker id 0), if the route has one.
    pub fn master_addr(&self) -> Option<&str> {
        self.broker_addrs.get(&0).map(String::as_str)
    }
}

/// `QueueData`: one broker group's queues of a topic.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueData {
    /// `brokerName`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub broker_name: String,
    /// `perm`: `PermName` bits (read 4, write 2, inherit 1).
    #[serde(deserialize_with = "lenient::number")]
    pub perm: i32,
    /// `readQueueNums`.
    #[serde(deserialize_with = "lenient::number")]
    pub read_queue_nums: i32,
    /// `topicSysFlag` (also read from its old name `topicSynFlag`, which the Go client uses).
    #[serde(default, alias = "topicSynFlag", deserialize_with = "lenient::number")]
    pub topic_sys_flag: i32,
    /// `writeQueueNums`.
    #[serde(deserialize_with = "lenient::number")]
    pub write_queue_nums: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_routes_with_bare_and_quoted_broker_ids() {
        for json in [
            &br#"{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"b","cluster":"c"}],"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#[..],
            &br#"{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"b","cluster":"c","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#[..],
        ] {
            let route = TopicRouteData::decode(json).unwrap();
            let b = &route.broker_datas[0];
            assert_eq!(b.master_addr(), Some("10.0.0.1:10911"));
            assert_eq!(b.broker_addrs[&1], "10.0.0.2:10911");
            assert_eq!(route.queue_datas[0].perm, 6);
        }
    }

    #[test]
    fn writes_quoted_broker_ids() {
        let route = TopicRouteData {
            broker_datas: vec![BrokerData {
                broker_addrs: [(0, "a:1".to_string())].into(),
                broker_name: "b".into(),
                cluster: "c".into(),
                ..BrokerData::default()
            }],
            ..TopicRouteData::default()
        };
        assert_eq!(
            String::from_utf8(route.encode()).unwrap(),
            r#"{"brokerDatas":[{"brokerAddrs":{"0":"a:1"},"brokerName":"b","cluster":"c"}],"filterServerTable":{},"queueDatas":[]}"#
        );
    }
}
