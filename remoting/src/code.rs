//! Request, response and language codes, checked against Java's `RequestCode`, `ResponseCode`
//! (with its parent `RemotingSysResponseCode`) and `LanguageCode` of rocketmq-client 4.9.7 and
//! 5.5.0 (`tests/java_vectors.rs` compares every constant with the real jars).
//!
//! Java's numbers never differ between the two lines for one name, but three response numbers
//! have different names: 209, 210 and 211 are the ACL-update failures of 4.9.x and
//! `POLLING_FULL`, `POLLING_TIMEOUT`, `BROKER_NOT_EXIST` in 5.x. Both names are here; [`name`]
//! gives the 5.x one. Request codes 50–54 (the 4.9.x ACL admin codes) are gone in 5.x, and 5.x
//! adds the rest of its 164 codes, some beyond the ROCKETMQ header's 16-bit code field (the POP
//! codes, 200050 and up, travel only in JSON headers).
//!
//! [`name`]: ResponseCode::name

use std::fmt;

/// A request code: what a request asks for (`RemotingCommand.code` of a request).
///
/// A plain number: codes this crate does not name are carried unchanged.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RequestCode(pub i32);

/// A response code: how a request went (`RemotingCommand.code` of a response).
///
/// A plain number: codes this crate does not name are carried unchanged.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ResponseCode(pub i32);

/// The language a peer says it is written in (`RemotingCommand.language`).
///
/// In the ROCKETMQ header it is one byte; in JSON, its Java name. A byte Java has no name for
/// is kept as it came (Java reads it as `null`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct LanguageCode(pub u8);

macro_rules! named_code {
    ($ty:ident, $inner:ty) => {
        impl $ty {
            /// Java's name of this code, if it has one (the 5.x name where the lines differ).
            pub fn name(self) -> Option<&'static str> {
                Self::KNOWN.iter().find(|(code, _)| *code == self).map(|(_, name)| *name)
            }

            /// The code Java calls `name` (in either line).
            pub fn from_name(name: &str) -> Option<Self> {
                Self::KNOWN.iter().find(|(_, n)| *n == name).map(|(code, _)| *code)
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(name) => write!(f, "{}({})", name, self.0),
                    None => write!(f, "{}({})", stringify!($ty), self.0),
                }
            }
        }

        /// Java's name, or the number when it has none.
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(name) => f.write_str(name),
                    None => write!(f, "{}", self.0),
                }
            }
        }

        impl From<$inner> for $ty {
            fn from(code: $inner) -> Self {
                Self(code)
            }
        }

        impl From<$ty> for $inner {
            fn from(code: $ty) -> Self {
                code.0
            }
        }
    };
}

named_code!(RequestCode, i32);
named_code!(ResponseCode, i32);
named_code!(LanguageCode, u8);

impl RequestCode {
    /// `SEND_MESSAGE` = 10 (both lines). A producer sends one message; header `SendMessageRequestHeader`, body the message bytes.
    pub const SEND_MESSAGE: Self = Self(10);
    /// `PULL_MESSAGE` = 11 (both lines). A consumer pulls from one queue, possibly suspended (long polling); header `PullMessageRequestHeader`.
    pub const PULL_MESSAGE: Self = Self(11);
    /// `QUERY_MESSAGE` = 12 (both lines). Messages by key from the index; header `QueryMessageRequestHeader`.
    pub const QUERY_MESSAGE: Self = Self(12);
    /// `QUERY_BROKER_OFFSET` = 13 (both lines).
    pub const QUERY_BROKER_OFFSET: Self = Self(13);
    /// `QUERY_CONSUMER_OFFSET` = 14 (both lines). A group's committed offset of one queue; header `QueryConsumerOffsetRequestHeader`.
    pub const QUERY_CONSUMER_OFFSET: Self = Self(14);
    /// `UPDATE_CONSUMER_OFFSET` = 15 (both lines). Commits a group's offset of one queue (usually one-way); header `UpdateConsumerOffsetRequestHeader`.
    pub const UPDATE_CONSUMER_OFFSET: Self = Self(15);
    /// `UPDATE_AND_CREATE_TOPIC` = 17 (both lines). Creates or updates a topic config (admin).
    pub const UPDATE_AND_CREATE_TOPIC: Self = Self(17);
    /// `UPDATE_AND_CREATE_TOPIC_LIST` = 18 (5.x only).
    pub const UPDATE_AND_CREATE_TOPIC_LIST: Self = Self(18);
    /// `GET_ALL_TOPIC_CONFIG` = 21 (both lines). Every topic config of a broker (`TopicConfigSerializeWrapper` body); what Java's `SlaveSynchronize` fetches.
    pub const GET_ALL_TOPIC_CONFIG: Self = Self(21);
    /// `GET_TOPIC_CONFIG_LIST` = 22 (both lines).
    pub const GET_TOPIC_CONFIG_LIST: Self = Self(22);
    /// `GET_TOPIC_NAME_LIST` = 23 (both lines).
    pub const GET_TOPIC_NAME_LIST: Self = Self(23);
    /// `UPDATE_BROKER_CONFIG` = 25 (both lines). Rewrites broker configuration over the network. **Never serve it** (CVE-2023-33246, CVE-2023-37582).
    pub const UPDATE_BROKER_CONFIG: Self = Self(25);
    /// `GET_BROKER_CONFIG` = 26 (both lines). The broker's configuration as properties text (admin).
    pub const GET_BROKER_CONFIG: Self = Self(26);
    /// `TRIGGER_DELETE_FILES` = 27 (both lines).
    pub const TRIGGER_DELETE_FILES: Self = Self(27);
    /// `GET_BROKER_RUNTIME_INFO` = 28 (both lines). The broker's runtime statistics (admin).
    pub const GET_BROKER_RUNTIME_INFO: Self = Self(28);
    /// `SEARCH_OFFSET_BY_TIMESTAMP` = 29 (both lines). The queue offset of a store time; header `SearchOffsetRequestHeader`.
    pub const SEARCH_OFFSET_BY_TIMESTAMP: Self = Self(29);
    /// `GET_MAX_OFFSET` = 30 (both lines). The max offset of a queue; header `GetMaxOffsetRequestHeader`.
    pub const GET_MAX_OFFSET: Self = Self(30);
    /// `GET_MIN_OFFSET` = 31 (both lines). The min offset of a queue; header `GetMinOffsetRequestHeader`.
    pub const GET_MIN_OFFSET: Self = Self(31);
    /// `GET_EARLIEST_MSG_STORETIME` = 32 (both lines). The store time of the oldest message of a queue; header `GetEarliestMsgStoretimeRequestHeader`.
    pub const GET_EARLIEST_MSG_STORETIME: Self = Self(32);
    /// `VIEW_MESSAGE_BY_ID` = 33 (both lines). One message by commit-log offset (the offset message id); header `ViewMessageRequestHeader`.
    pub const VIEW_MESSAGE_BY_ID: Self = Self(33);
    /// `HEART_BEAT` = 34 (both lines). A client's producers and consumers (`HeartbeatData` body).
    pub const HEART_BEAT: Self = Self(34);
    /// `UNREGISTER_CLIENT` = 35 (both lines). A client leaves a producer or consumer group; header `UnregisterClientRequestHeader`.
    pub const UNREGISTER_CLIENT: Self = Self(35);
    /// `CONSUMER_SEND_MSG_BACK` = 36 (both lines). A consumer returns a message for a retry (or the DLQ); header `ConsumerSendMsgBackRequestHeader`.
    pub const CONSUMER_SEND_MSG_BACK: Self = Self(36);
    /// `END_TRANSACTION` = 37 (both lines). A producer commits or rolls back a transactional message.
    pub const END_TRANSACTION: Self = Self(37);
    /// `GET_CONSUMER_LIST_BY_GROUP` = 38 (both lines). The client ids of a consumer group; header `GetConsumerListByGroupRequestHeader`.
    pub const GET_CONSUMER_LIST_BY_GROUP: Self = Self(38);
    /// `CHECK_TRANSACTION_STATE` = 39 (both lines). Broker to producer: asks the state of a half message.
    pub const CHECK_TRANSACTION_STATE: Self = Self(39);
    /// `NOTIFY_CONSUMER_IDS_CHANGED` = 40 (both lines). Broker to client: a consumer group changed, rebalance; header `NotifyConsumerIdsChangedRequestHeader`.
    pub const NOTIFY_CONSUMER_IDS_CHANGED: Self = Self(40);
    /// `LOCK_BATCH_MQ` = 41 (both lines). An orderly consumer locks queues (`LockBatchRequestBody`).
    pub const LOCK_BATCH_MQ: Self = Self(41);
    /// `UNLOCK_BATCH_MQ` = 42 (both lines). An orderly consumer unlocks queues (`UnlockBatchRequestBody`).
    pub const UNLOCK_BATCH_MQ: Self = Self(42);
    /// `GET_ALL_CONSUMER_OFFSET` = 43 (both lines). Every committed consumer offset; what Java's `SlaveSynchronize` fetches.
    pub const GET_ALL_CONSUMER_OFFSET: Self = Self(43);
    /// `GET_ALL_DELAY_OFFSET` = 45 (both lines). The schedule service's delay offsets; what Java's `SlaveSynchronize` fetches.
    pub const GET_ALL_DELAY_OFFSET: Self = Self(45);
    /// `CHECK_CLIENT_CONFIG` = 46 (both lines).
    pub const CHECK_CLIENT_CONFIG: Self = Self(46);
    /// `GET_CLIENT_CONFIG` = 47 (5.x only).
    pub const GET_CLIENT_CONFIG: Self = Self(47);
    /// `UPDATE_AND_CREATE_ACL_CONFIG` = 50 (4.9.x only).
    pub const UPDATE_AND_CREATE_ACL_CONFIG: Self = Self(50);
    /// `DELETE_ACL_CONFIG` = 51 (4.9.x only).
    pub const DELETE_ACL_CONFIG: Self = Self(51);
    /// `GET_BROKER_CLUSTER_ACL_INFO` = 52 (4.9.x only).
    pub const GET_BROKER_CLUSTER_ACL_INFO: Self = Self(52);
    /// `UPDATE_GLOBAL_WHITE_ADDRS_CONFIG` = 53 (4.9.x only).
    pub const UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: Self = Self(53);
    /// `GET_BROKER_CLUSTER_ACL_CONFIG` = 54 (4.9.x only).
    pub const GET_BROKER_CLUSTER_ACL_CONFIG: Self = Self(54);
    /// `GET_TIMER_CHECK_POINT` = 60 (5.x only).
    pub const GET_TIMER_CHECK_POINT: Self = Self(60);
    /// `GET_TIMER_METRICS` = 61 (5.x only).
    pub const GET_TIMER_METRICS: Self = Self(61);
    /// `PUT_KV_CONFIG` = 100 (both lines).
    pub const PUT_KV_CONFIG: Self = Self(100);
    /// `GET_KV_CONFIG` = 101 (both lines).
    pub const GET_KV_CONFIG: Self = Self(101);
    /// `DELETE_KV_CONFIG` = 102 (both lines).
    pub const DELETE_KV_CONFIG: Self = Self(102);
    /// `REGISTER_BROKER` = 103 (both lines). Broker to NameServer, every 30 s; header `RegisterBrokerRequestHeader`, body `RegisterBrokerBody`.
    pub const REGISTER_BROKER: Self = Self(103);
    /// `UNREGISTER_BROKER` = 104 (both lines). Broker to NameServer on a clean stop; header `UnRegisterBrokerRequestHeader`.
    pub const UNREGISTER_BROKER: Self = Self(104);
    /// `GET_ROUTEINFO_BY_TOPIC` = 105 (both lines). A topic's route from the NameServer (`TopicRouteData` body); header `GetRouteInfoRequestHeader`.
    pub const GET_ROUTEINFO_BY_TOPIC: Self = Self(105);
    /// `GET_BROKER_CLUSTER_INFO` = 106 (both lines). Every broker and cluster the NameServer knows.
    pub const GET_BROKER_CLUSTER_INFO: Self = Self(106);
    /// `UPDATE_AND_CREATE_SUBSCRIPTIONGROUP` = 200 (both lines).
    pub const UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: Self = Self(200);
    /// `GET_ALL_SUBSCRIPTIONGROUP_CONFIG` = 201 (both lines). Every subscription group config; what Java's `SlaveSynchronize` fetches.
    pub const GET_ALL_SUBSCRIPTIONGROUP_CONFIG: Self = Self(201);
    /// `GET_TOPIC_STATS_INFO` = 202 (both lines). A topic's per-queue offsets (admin).
    pub const GET_TOPIC_STATS_INFO: Self = Self(202);
    /// `GET_CONSUMER_CONNECTION_LIST` = 203 (both lines). A consumer group's connections (admin).
    pub const GET_CONSUMER_CONNECTION_LIST: Self = Self(203);
    /// `GET_PRODUCER_CONNECTION_LIST` = 204 (both lines). A producer group's connections (admin).
    pub const GET_PRODUCER_CONNECTION_LIST: Self = Self(204);
    /// `WIPE_WRITE_PERM_OF_BROKER` = 205 (both lines).
    pub const WIPE_WRITE_PERM_OF_BROKER: Self = Self(205);
    /// `GET_ALL_TOPIC_LIST_FROM_NAMESERVER` = 206 (both lines).
    pub const GET_ALL_TOPIC_LIST_FROM_NAMESERVER: Self = Self(206);
    /// `DELETE_SUBSCRIPTIONGROUP` = 207 (both lines).
    pub const DELETE_SUBSCRIPTIONGROUP: Self = Self(207);
    /// `GET_CONSUME_STATS` = 208 (both lines). A consumer group's progress per queue (admin).
    pub const GET_CONSUME_STATS: Self = Self(208);
    /// `SUSPEND_CONSUMER` = 209 (both lines).
    pub const SUSPEND_CONSUMER: Self = Self(209);
    /// `RESUME_CONSUMER` = 210 (both lines).
    pub const RESUME_CONSUMER: Self = Self(210);
    /// `RESET_CONSUMER_OFFSET_IN_CONSUMER` = 211 (both lines).
    pub const RESET_CONSUMER_OFFSET_IN_CONSUMER: Self = Self(211);
    /// `RESET_CONSUMER_OFFSET_IN_BROKER` = 212 (both lines).
    pub const RESET_CONSUMER_OFFSET_IN_BROKER: Self = Self(212);
    /// `ADJUST_CONSUMER_THREAD_POOL` = 213 (both lines).
    pub const ADJUST_CONSUMER_THREAD_POOL: Self = Self(213);
    /// `WHO_CONSUME_THE_MESSAGE` = 214 (both lines).
    pub const WHO_CONSUME_THE_MESSAGE: Self = Self(214);
    /// `DELETE_TOPIC_IN_BROKER` = 215 (both lines).
    pub const DELETE_TOPIC_IN_BROKER: Self = Self(215);
    /// `DELETE_TOPIC_IN_NAMESRV` = 216 (both lines).
    pub const DELETE_TOPIC_IN_NAMESRV: Self = Self(216);
    /// `REGISTER_TOPIC_IN_NAMESRV` = 217 (5.x only).
    pub const REGISTER_TOPIC_IN_NAMESRV: Self = Self(217);
    /// `GET_KVLIST_BY_NAMESPACE` = 219 (both lines).
    pub const GET_KVLIST_BY_NAMESPACE: Self = Self(219);
    /// `RESET_CONSUMER_CLIENT_OFFSET` = 220 (both lines).
    pub const RESET_CONSUMER_CLIENT_OFFSET: Self = Self(220);
    /// `GET_CONSUMER_STATUS_FROM_CLIENT` = 221 (both lines).
    pub const GET_CONSUMER_STATUS_FROM_CLIENT: Self = Self(221);
    /// `INVOKE_BROKER_TO_RESET_OFFSET` = 222 (both lines).
    pub const INVOKE_BROKER_TO_RESET_OFFSET: Self = Self(222);
    /// `INVOKE_BROKER_TO_GET_CONSUMER_STATUS` = 223 (both lines).
    pub const INVOKE_BROKER_TO_GET_CONSUMER_STATUS: Self = Self(223);
    /// `GET_TOPICS_BY_CLUSTER` = 224 (both lines).
    pub const GET_TOPICS_BY_CLUSTER: Self = Self(224);
    /// `UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST` = 225 (5.x only).
    pub const UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: Self = Self(225);
    /// `QUERY_TOPIC_CONSUME_BY_WHO` = 300 (both lines).
    pub const QUERY_TOPIC_CONSUME_BY_WHO: Self = Self(300);
    /// `REGISTER_FILTER_SERVER` = 301 (both lines).
    pub const REGISTER_FILTER_SERVER: Self = Self(301);
    /// `REGISTER_MESSAGE_FILTER_CLASS` = 302 (both lines).
    pub const REGISTER_MESSAGE_FILTER_CLASS: Self = Self(302);
    /// `QUERY_CONSUME_TIME_SPAN` = 303 (both lines).
    pub const QUERY_CONSUME_TIME_SPAN: Self = Self(303);
    /// `GET_SYSTEM_TOPIC_LIST_FROM_NS` = 304 (both lines).
    pub const GET_SYSTEM_TOPIC_LIST_FROM_NS: Self = Self(304);
    /// `GET_SYSTEM_TOPIC_LIST_FROM_BROKER` = 305 (both lines).
    pub const GET_SYSTEM_TOPIC_LIST_FROM_BROKER: Self = Self(305);
    /// `CLEAN_EXPIRED_CONSUMEQUEUE` = 306 (both lines).
    pub const CLEAN_EXPIRED_CONSUMEQUEUE: Self = Self(306);
    /// `GET_CONSUMER_RUNNING_INFO` = 307 (both lines).
    pub const GET_CONSUMER_RUNNING_INFO: Self = Self(307);
    /// `QUERY_CORRECTION_OFFSET` = 308 (both lines).
    pub const QUERY_CORRECTION_OFFSET: Self = Self(308);
    /// `CONSUME_MESSAGE_DIRECTLY` = 309 (both lines).
    pub const CONSUME_MESSAGE_DIRECTLY: Self = Self(309);
    /// `SEND_MESSAGE_V2` = 310 (both lines). A producer sends one message with the one-letter header `SendMessageRequestHeaderV2`.
    pub const SEND_MESSAGE_V2: Self = Self(310);
    /// `GET_UNIT_TOPIC_LIST` = 311 (both lines).
    pub const GET_UNIT_TOPIC_LIST: Self = Self(311);
    /// `GET_HAS_UNIT_SUB_TOPIC_LIST` = 312 (both lines).
    pub const GET_HAS_UNIT_SUB_TOPIC_LIST: Self = Self(312);
    /// `GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST` = 313 (both lines).
    pub const GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: Self = Self(313);
    /// `CLONE_GROUP_OFFSET` = 314 (both lines).
    pub const CLONE_GROUP_OFFSET: Self = Self(314);
    /// `VIEW_BROKER_STATS_DATA` = 315 (both lines).
    pub const VIEW_BROKER_STATS_DATA: Self = Self(315);
    /// `CLEAN_UNUSED_TOPIC` = 316 (both lines).
    pub const CLEAN_UNUSED_TOPIC: Self = Self(316);
    /// `GET_BROKER_CONSUME_STATS` = 317 (both lines).
    pub const GET_BROKER_CONSUME_STATS: Self = Self(317);
    /// `UPDATE_NAMESRV_CONFIG` = 318 (both lines). Rewrites NameServer configuration over the network. **Never serve it** (CVE-2023-37582).
    pub const UPDATE_NAMESRV_CONFIG: Self = Self(318);
    /// `GET_NAMESRV_CONFIG` = 319 (both lines).
    pub const GET_NAMESRV_CONFIG: Self = Self(319);
    /// `SEND_BATCH_MESSAGE` = 320 (both lines). A producer sends a batch of messages, with the `SendMessageRequestHeaderV2` header.
    pub const SEND_BATCH_MESSAGE: Self = Self(320);
    /// `QUERY_CONSUME_QUEUE` = 321 (both lines).
    pub const QUERY_CONSUME_QUEUE: Self = Self(321);
    /// `QUERY_DATA_VERSION` = 322 (both lines).
    pub const QUERY_DATA_VERSION: Self = Self(322);
    /// `RESUME_CHECK_HALF_MESSAGE` = 323 (both lines).
    pub const RESUME_CHECK_HALF_MESSAGE: Self = Self(323);
    /// `SEND_REPLY_MESSAGE` = 324 (both lines). A consumer replies to a request-reply message (header `SendMessageRequestHeader`).
    pub const SEND_REPLY_MESSAGE: Self = Self(324);
    /// `SEND_REPLY_MESSAGE_V2` = 325 (both lines). A consumer replies to a request-reply message (header `SendMessageRequestHeaderV2`).
    pub const SEND_REPLY_MESSAGE_V2: Self = Self(325);
    /// `PUSH_REPLY_MESSAGE_TO_CLIENT` = 326 (both lines).
    pub const PUSH_REPLY_MESSAGE_TO_CLIENT: Self = Self(326);
    /// `ADD_WRITE_PERM_OF_BROKER` = 327 (both lines).
    pub const ADD_WRITE_PERM_OF_BROKER: Self = Self(327);
    /// `GET_ALL_PRODUCER_INFO` = 328 (both lines).
    pub const GET_ALL_PRODUCER_INFO: Self = Self(328);
    /// `DELETE_EXPIRED_COMMITLOG` = 329 (both lines).
    pub const DELETE_EXPIRED_COMMITLOG: Self = Self(329);
    /// `QUERY_TOPICS_BY_CONSUMER` = 343 (5.x only).
    pub const QUERY_TOPICS_BY_CONSUMER: Self = Self(343);
    /// `QUERY_SUBSCRIPTION_BY_CONSUMER` = 345 (5.x only).
    pub const QUERY_SUBSCRIPTION_BY_CONSUMER: Self = Self(345);
    /// `GET_TOPIC_CONFIG` = 351 (5.x only).
    pub const GET_TOPIC_CONFIG: Self = Self(351);
    /// `GET_SUBSCRIPTIONGROUP_CONFIG` = 352 (5.x only).
    pub const GET_SUBSCRIPTIONGROUP_CONFIG: Self = Self(352);
    /// `UPDATE_AND_GET_GROUP_FORBIDDEN` = 353 (5.x only).
    pub const UPDATE_AND_GET_GROUP_FORBIDDEN: Self = Self(353);
    /// `CHECK_ROCKSDB_CQ_WRITE_PROGRESS` = 354 (5.x only).
    pub const CHECK_ROCKSDB_CQ_WRITE_PROGRESS: Self = Self(354);
    /// `EXPORT_ROCKSDB_CONFIG_TO_JSON` = 355 (5.x only).
    pub const EXPORT_ROCKSDB_CONFIG_TO_JSON: Self = Self(355);
    /// `LITE_PULL_MESSAGE` = 361 (5.x only).
    pub const LITE_PULL_MESSAGE: Self = Self(361);
    /// `RECALL_MESSAGE` = 370 (5.x only).
    pub const RECALL_MESSAGE: Self = Self(370);
    /// `QUERY_ASSIGNMENT` = 400 (5.x only).
    pub const QUERY_ASSIGNMENT: Self = Self(400);
    /// `SET_MESSAGE_REQUEST_MODE` = 401 (5.x only).
    pub const SET_MESSAGE_REQUEST_MODE: Self = Self(401);
    /// `GET_ALL_MESSAGE_REQUEST_MODE` = 402 (5.x only).
    pub const GET_ALL_MESSAGE_REQUEST_MODE: Self = Self(402);
    /// `UPDATE_AND_CREATE_STATIC_TOPIC` = 513 (5.x only).
    pub const UPDATE_AND_CREATE_STATIC_TOPIC: Self = Self(513);
    /// `GET_BROKER_MEMBER_GROUP` = 901 (5.x only).
    pub const GET_BROKER_MEMBER_GROUP: Self = Self(901);
    /// `ADD_BROKER` = 902 (5.x only).
    pub const ADD_BROKER: Self = Self(902);
    /// `REMOVE_BROKER` = 903 (5.x only).
    pub const REMOVE_BROKER: Self = Self(903);
    /// `BROKER_HEARTBEAT` = 904 (5.x only). Broker to controller heartbeat (controller mode).
    pub const BROKER_HEARTBEAT: Self = Self(904);
    /// `NOTIFY_MIN_BROKER_ID_CHANGE` = 905 (5.x only).
    pub const NOTIFY_MIN_BROKER_ID_CHANGE: Self = Self(905);
    /// `EXCHANGE_BROKER_HA_INFO` = 906 (5.x only).
    pub const EXCHANGE_BROKER_HA_INFO: Self = Self(906);
    /// `GET_BROKER_HA_STATUS` = 907 (5.x only).
    pub const GET_BROKER_HA_STATUS: Self = Self(907);
    /// `RESET_MASTER_FLUSH_OFFSET` = 908 (5.x only).
    pub const RESET_MASTER_FLUSH_OFFSET: Self = Self(908);
    /// `CONTROLLER_ALTER_SYNC_STATE_SET` = 1001 (5.x only). Master to controller: change the sync-state-set.
    pub const CONTROLLER_ALTER_SYNC_STATE_SET: Self = Self(1001);
    /// `CONTROLLER_ELECT_MASTER` = 1002 (5.x only). Elect a master (controller).
    pub const CONTROLLER_ELECT_MASTER: Self = Self(1002);
    /// `CONTROLLER_REGISTER_BROKER` = 1003 (5.x only). A broker registers with the controller.
    pub const CONTROLLER_REGISTER_BROKER: Self = Self(1003);
    /// `CONTROLLER_GET_REPLICA_INFO` = 1004 (5.x only). A broker group's replica info from the controller.
    pub const CONTROLLER_GET_REPLICA_INFO: Self = Self(1004);
    /// `CONTROLLER_GET_METADATA_INFO` = 1005 (5.x only). The controller cluster's metadata.
    pub const CONTROLLER_GET_METADATA_INFO: Self = Self(1005);
    /// `CONTROLLER_GET_SYNC_STATE_DATA` = 1006 (5.x only). Sync-state-sets from the controller.
    pub const CONTROLLER_GET_SYNC_STATE_DATA: Self = Self(1006);
    /// `GET_BROKER_EPOCH_CACHE` = 1007 (5.x only). A broker's epoch cache (controller mode).
    pub const GET_BROKER_EPOCH_CACHE: Self = Self(1007);
    /// `NOTIFY_BROKER_ROLE_CHANGED` = 1008 (5.x only). Controller to broker: its role changed.
    pub const NOTIFY_BROKER_ROLE_CHANGED: Self = Self(1008);
    /// `UPDATE_CONTROLLER_CONFIG` = 1009 (5.x only).
    pub const UPDATE_CONTROLLER_CONFIG: Self = Self(1009);
    /// `GET_CONTROLLER_CONFIG` = 1010 (5.x only).
    pub const GET_CONTROLLER_CONFIG: Self = Self(1010);
    /// `CLEAN_BROKER_DATA` = 1011 (5.x only).
    pub const CLEAN_BROKER_DATA: Self = Self(1011);
    /// `CONTROLLER_GET_NEXT_BROKER_ID` = 1012 (5.x only). The next broker id the controller would assign.
    pub const CONTROLLER_GET_NEXT_BROKER_ID: Self = Self(1012);
    /// `CONTROLLER_APPLY_BROKER_ID` = 1013 (5.x only). A broker applies for a broker id.
    pub const CONTROLLER_APPLY_BROKER_ID: Self = Self(1013);
    /// `UPDATE_COLD_DATA_FLOW_CTR_CONFIG` = 2001 (5.x only).
    pub const UPDATE_COLD_DATA_FLOW_CTR_CONFIG: Self = Self(2001);
    /// `REMOVE_COLD_DATA_FLOW_CTR_CONFIG` = 2002 (5.x only).
    pub const REMOVE_COLD_DATA_FLOW_CTR_CONFIG: Self = Self(2002);
    /// `GET_COLD_DATA_FLOW_CTR_INFO` = 2003 (5.x only).
    pub const GET_COLD_DATA_FLOW_CTR_INFO: Self = Self(2003);
    /// `SET_COMMITLOG_READ_MODE` = 2004 (5.x only).
    pub const SET_COMMITLOG_READ_MODE: Self = Self(2004);
    /// `AUTH_CREATE_USER` = 3001 (5.x only).
    pub const AUTH_CREATE_USER: Self = Self(3001);
    /// `AUTH_UPDATE_USER` = 3002 (5.x only).
    pub const AUTH_UPDATE_USER: Self = Self(3002);
    /// `AUTH_DELETE_USER` = 3003 (5.x only).
    pub const AUTH_DELETE_USER: Self = Self(3003);
    /// `AUTH_GET_USER` = 3004 (5.x only).
    pub const AUTH_GET_USER: Self = Self(3004);
    /// `AUTH_LIST_USER` = 3005 (5.x only).
    pub const AUTH_LIST_USER: Self = Self(3005);
    /// `AUTH_CREATE_ACL` = 3006 (5.x only).
    pub const AUTH_CREATE_ACL: Self = Self(3006);
    /// `AUTH_UPDATE_ACL` = 3007 (5.x only).
    pub const AUTH_UPDATE_ACL: Self = Self(3007);
    /// `AUTH_DELETE_ACL` = 3008 (5.x only).
    pub const AUTH_DELETE_ACL: Self = Self(3008);
    /// `AUTH_GET_ACL` = 3009 (5.x only).
    pub const AUTH_GET_ACL: Self = Self(3009);
    /// `AUTH_LIST_ACL` = 3010 (5.x only).
    pub const AUTH_LIST_ACL: Self = Self(3010);
    /// `SWITCH_TIMER_ENGINE` = 5001 (5.x only).
    pub const SWITCH_TIMER_ENGINE: Self = Self(5001);
    /// `POP_MESSAGE` = 200050 (5.x only).
    pub const POP_MESSAGE: Self = Self(200050);
    /// `ACK_MESSAGE` = 200051 (5.x only).
    pub const ACK_MESSAGE: Self = Self(200051);
    /// `PEEK_MESSAGE` = 200052 (5.x only).
    pub const PEEK_MESSAGE: Self = Self(200052);
    /// `CHANGE_MESSAGE_INVISIBLETIME` = 200053 (5.x only).
    pub const CHANGE_MESSAGE_INVISIBLETIME: Self = Self(200053);
    /// `NOTIFICATION` = 200054 (5.x only).
    pub const NOTIFICATION: Self = Self(200054);
    /// `POLLING_INFO` = 200055 (5.x only).
    pub const POLLING_INFO: Self = Self(200055);
    /// `POP_ROLLBACK` = 200056 (5.x only).
    pub const POP_ROLLBACK: Self = Self(200056);
    /// `POP_LITE_MESSAGE` = 200070 (5.x only).
    pub const POP_LITE_MESSAGE: Self = Self(200070);
    /// `LITE_SUBSCRIPTION_CTL` = 200071 (5.x only).
    pub const LITE_SUBSCRIPTION_CTL: Self = Self(200071);
    /// `ACK_LITE_MESSAGE` = 200072 (5.x only).
    pub const ACK_LITE_MESSAGE: Self = Self(200072);
    /// `NOTIFY_UNSUBSCRIBE_LITE` = 200073 (5.x only).
    pub const NOTIFY_UNSUBSCRIBE_LITE: Self = Self(200073);
    /// `GET_BROKER_LITE_INFO` = 200074 (5.x only).
    pub const GET_BROKER_LITE_INFO: Self = Self(200074);
    /// `GET_PARENT_TOPIC_INFO` = 200075 (5.x only).
    pub const GET_PARENT_TOPIC_INFO: Self = Self(200075);
    /// `GET_LITE_TOPIC_INFO` = 200076 (5.x only).
    pub const GET_LITE_TOPIC_INFO: Self = Self(200076);
    /// `GET_LITE_CLIENT_INFO` = 200077 (5.x only).
    pub const GET_LITE_CLIENT_INFO: Self = Self(200077);
    /// `GET_LITE_GROUP_INFO` = 200078 (5.x only).
    pub const GET_LITE_GROUP_INFO: Self = Self(200078);
    /// `TRIGGER_LITE_DISPATCH` = 200079 (5.x only).
    pub const TRIGGER_LITE_DISPATCH: Self = Self(200079);
    /// `BATCH_ACK_MESSAGE` = 200151 (5.x only).
    pub const BATCH_ACK_MESSAGE: Self = Self(200151);

    /// Every code Java's `RequestCode` defines in 4.9.x or 5.x, with its Java name, by number; where
    /// the two lines name one number differently, the 5.x name comes first.
    pub const KNOWN: &'static [(Self, &'static str)] = &[
        (Self::SEND_MESSAGE, "SEND_MESSAGE"),
        (Self::PULL_MESSAGE, "PULL_MESSAGE"),
        (Self::QUERY_MESSAGE, "QUERY_MESSAGE"),
        (Self::QUERY_BROKER_OFFSET, "QUERY_BROKER_OFFSET"),
        (Self::QUERY_CONSUMER_OFFSET, "QUERY_CONSUMER_OFFSET"),
        (Self::UPDATE_CONSUMER_OFFSET, "UPDATE_CONSUMER_OFFSET"),
        (Self::UPDATE_AND_CREATE_TOPIC, "UPDATE_AND_CREATE_TOPIC"),
        (Self::UPDATE_AND_CREATE_TOPIC_LIST, "UPDATE_AND_CREATE_TOPIC_LIST"),
        (Self::GET_ALL_TOPIC_CONFIG, "GET_ALL_TOPIC_CONFIG"),
        (Self::GET_TOPIC_CONFIG_LIST, "GET_TOPIC_CONFIG_LIST"),
        (Self::GET_TOPIC_NAME_LIST, "GET_TOPIC_NAME_LIST"),
        (Self::UPDATE_BROKER_CONFIG, "UPDATE_BROKER_CONFIG"),
        (Self::GET_BROKER_CONFIG, "GET_BROKER_CONFIG"),
        (Self::TRIGGER_DELETE_FILES, "TRIGGER_DELETE_FILES"),
        (Self::GET_BROKER_RUNTIME_INFO, "GET_BROKER_RUNTIME_INFO"),
        (Self::SEARCH_OFFSET_BY_TIMESTAMP, "SEARCH_OFFSET_BY_TIMESTAMP"),
        (Self::GET_MAX_OFFSET, "GET_MAX_OFFSET"),
        (Self::GET_MIN_OFFSET, "GET_MIN_OFFSET"),
        (Self::GET_EARLIEST_MSG_STORETIME, "GET_EARLIEST_MSG_STORETIME"),
        (Self::VIEW_MESSAGE_BY_ID, "VIEW_MESSAGE_BY_ID"),
        (Self::HEART_BEAT, "HEART_BEAT"),
        (Self::UNREGISTER_CLIENT, "UNREGISTER_CLIENT"),
        (Self::CONSUMER_SEND_MSG_BACK, "CONSUMER_SEND_MSG_BACK"),
        (Self::END_TRANSACTION, "END_TRANSACTION"),
        (Self::GET_CONSUMER_LIST_BY_GROUP, "GET_CONSUMER_LIST_BY_GROUP"),
        (Self::CHECK_TRANSACTION_STATE, "CHECK_TRANSACTION_STATE"),
        (Self::NOTIFY_CONSUMER_IDS_CHANGED, "NOTIFY_CONSUMER_IDS_CHANGED"),
        (Self::LOCK_BATCH_MQ, "LOCK_BATCH_MQ"),
        (Self::UNLOCK_BATCH_MQ, "UNLOCK_BATCH_MQ"),
        (Self::GET_ALL_CONSUMER_OFFSET, "GET_ALL_CONSUMER_OFFSET"),
        (Self::GET_ALL_DELAY_OFFSET, "GET_ALL_DELAY_OFFSET"),
        (Self::CHECK_CLIENT_CONFIG, "CHECK_CLIENT_CONFIG"),
        (Self::GET_CLIENT_CONFIG, "GET_CLIENT_CONFIG"),
        (Self::UPDATE_AND_CREATE_ACL_CONFIG, "UPDATE_AND_CREATE_ACL_CONFIG"),
        (Self::DELETE_ACL_CONFIG, "DELETE_ACL_CONFIG"),
        (Self::GET_BROKER_CLUSTER_ACL_INFO, "GET_BROKER_CLUSTER_ACL_INFO"),
        (Self::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG"),
        (Self::GET_BROKER_CLUSTER_ACL_CONFIG, "GET_BROKER_CLUSTER_ACL_CONFIG"),
        (Self::GET_TIMER_CHECK_POINT, "GET_TIMER_CHECK_POINT"),
        (Self::GET_TIMER_METRICS, "GET_TIMER_METRICS"),
        (Self::PUT_KV_CONFIG, "PUT_KV_CONFIG"),
        (Self::GET_KV_CONFIG, "GET_KV_CONFIG"),
        (Self::DELETE_KV_CONFIG, "DELETE_KV_CONFIG"),
        (Self::REGISTER_BROKER, "REGISTER_BROKER"),
        (Self::UNREGISTER_BROKER, "UNREGISTER_BROKER"),
        (Self::GET_ROUTEINFO_BY_TOPIC, "GET_ROUTEINFO_BY_TOPIC"),
        (Self::GET_BROKER_CLUSTER_INFO, "GET_BROKER_CLUSTER_INFO"),
        (Self::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP"),
        (Self::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG"),
        (Self::GET_TOPIC_STATS_INFO, "GET_TOPIC_STATS_INFO"),
        (Self::GET_CONSUMER_CONNECTION_LIST, "GET_CONSUMER_CONNECTION_LIST"),
        (Self::GET_PRODUCER_CONNECTION_LIST, "GET_PRODUCER_CONNECTION_LIST"),
        (Self::WIPE_WRITE_PERM_OF_BROKER, "WIPE_WRITE_PERM_OF_BROKER"),
        (Self::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER"),
        (Self::DELETE_SUBSCRIPTIONGROUP, "DELETE_SUBSCRIPTIONGROUP"),
        (Self::GET_CONSUME_STATS, "GET_CONSUME_STATS"),
        (Self::SUSPEND_CONSUMER, "SUSPEND_CONSUMER"),
        (Self::RESUME_CONSUMER, "RESUME_CONSUMER"),
        (Self::RESET_CONSUMER_OFFSET_IN_CONSUMER, "RESET_CONSUMER_OFFSET_IN_CONSUMER"),
        (Self::RESET_CONSUMER_OFFSET_IN_BROKER, "RESET_CONSUMER_OFFSET_IN_BROKER"),
        (Self::ADJUST_CONSUMER_THREAD_POOL, "ADJUST_CONSUMER_THREAD_POOL"),
        (Self::WHO_CONSUME_THE_MESSAGE, "WHO_CONSUME_THE_MESSAGE"),
        (Self::DELETE_TOPIC_IN_BROKER, "DELETE_TOPIC_IN_BROKER"),
        (Self::DELETE_TOPIC_IN_NAMESRV, "DELETE_TOPIC_IN_NAMESRV"),
        (Self::REGISTER_TOPIC_IN_NAMESRV, "REGISTER_TOPIC_IN_NAMESRV"),
        (Self::GET_KVLIST_BY_NAMESPACE, "GET_KVLIST_BY_NAMESPACE"),
        (Self::RESET_CONSUMER_CLIENT_OFFSET, "RESET_CONSUMER_CLIENT_OFFSET"),
        (Self::GET_CONSUMER_STATUS_FROM_CLIENT, "GET_CONSUMER_STATUS_FROM_CLIENT"),
        (Self::INVOKE_BROKER_TO_RESET_OFFSET, "INVOKE_BROKER_TO_RESET_OFFSET"),
        (Self::INVOKE_BROKER_TO_GET_CONSUMER_STATUS, "INVOKE_BROKER_TO_GET_CONSUMER_STATUS"),
        (Self::GET_TOPICS_BY_CLUSTER, "GET_TOPICS_BY_CLUSTER"),
        (Self::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST"),
        (Self::QUERY_TOPIC_CONSUME_BY_WHO, "QUERY_TOPIC_CONSUME_BY_WHO"),
        (Self::REGISTER_FILTER_SERVER, "REGISTER_FILTER_SERVER"),
        (Self::REGISTER_MESSAGE_FILTER_CLASS, "REGISTER_MESSAGE_FILTER_CLASS"),
        (Self::QUERY_CONSUME_TIME_SPAN, "QUERY_CONSUME_TIME_SPAN"),
        (Self::GET_SYSTEM_TOPIC_LIST_FROM_NS, "GET_SYSTEM_TOPIC_LIST_FROM_NS"),
        (Self::GET_SYSTEM_TOPIC_LIST_FROM_BROKER, "GET_SYSTEM_TOPIC_LIST_FROM_BROKER"),
        (Self::CLEAN_EXPIRED_CONSUMEQUEUE, "CLEAN_EXPIRED_CONSUMEQUEUE"),
        (Self::GET_CONSUMER_RUNNING_INFO, "GET_CONSUMER_RUNNING_INFO"),
        (Self::QUERY_CORRECTION_OFFSET, "QUERY_CORRECTION_OFFSET"),
        (Self::CONSUME_MESSAGE_DIRECTLY, "CONSUME_MESSAGE_DIRECTLY"),
        (Self::SEND_MESSAGE_V2, "SEND_MESSAGE_V2"),
        (Self::GET_UNIT_TOPIC_LIST, "GET_UNIT_TOPIC_LIST"),
        (Self::GET_HAS_UNIT_SUB_TOPIC_LIST, "GET_HAS_UNIT_SUB_TOPIC_LIST"),
        (Self::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST, "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST"),
        (Self::CLONE_GROUP_OFFSET, "CLONE_GROUP_OFFSET"),
        (Self::VIEW_BROKER_STATS_DATA, "VIEW_BROKER_STATS_DATA"),
        (Self::CLEAN_UNUSED_TOPIC, "CLEAN_UNUSED_TOPIC"),
        (Self::GET_BROKER_CONSUME_STATS, "GET_BROKER_CONSUME_STATS"),
        (Self::UPDATE_NAMESRV_CONFIG, "UPDATE_NAMESRV_CONFIG"),
        (Self::GET_NAMESRV_CONFIG, "GET_NAMESRV_CONFIG"),
        (Self::SEND_BATCH_MESSAGE, "SEND_BATCH_MESSAGE"),
        (Self::QUERY_CONSUME_QUEUE, "QUERY_CONSUME_QUEUE"),
        (Self::QUERY_DATA_VERSION, "QUERY_DATA_VERSION"),
        (Self::RESUME_CHECK_HALF_MESSAGE, "RESUME_CHECK_HALF_MESSAGE"),
        (Self::SEND_REPLY_MESSAGE, "SEND_REPLY_MESSAGE"),
        (Self::SEND_REPLY_MESSAGE_V2, "SEND_REPLY_MESSAGE_V2"),
        (Self::PUSH_REPLY_MESSAGE_TO_CLIENT, "PUSH_REPLY_MESSAGE_TO_CLIENT"),
        (Self::ADD_WRITE_PERM_OF_BROKER, "ADD_WRITE_PERM_OF_BROKER"),
        (Self::GET_ALL_PRODUCER_INFO, "GET_ALL_PRODUCER_INFO"),
        (Self::DELETE_EXPIRED_COMMITLOG, "DELETE_EXPIRED_COMMITLOG"),
        (Self::QUERY_TOPICS_BY_CONSUMER, "QUERY_TOPICS_BY_CONSUMER"),
        (Self::QUERY_SUBSCRIPTION_BY_CONSUMER, "QUERY_SUBSCRIPTION_BY_CONSUMER"),
        (Self::GET_TOPIC_CONFIG, "GET_TOPIC_CONFIG"),
        (Self::GET_SUBSCRIPTIONGROUP_CONFIG, "GET_SUBSCRIPTIONGROUP_CONFIG"),
        (Self::UPDATE_AND_GET_GROUP_FORBIDDEN, "UPDATE_AND_GET_GROUP_FORBIDDEN"),
        (Self::CHECK_ROCKSDB_CQ_WRITE_PROGRESS, "CHECK_ROCKSDB_CQ_WRITE_PROGRESS"),
        (Self::EXPORT_ROCKSDB_CONFIG_TO_JSON, "EXPORT_ROCKSDB_CONFIG_TO_JSON"),
        (Self::LITE_PULL_MESSAGE, "LITE_PULL_MESSAGE"),
        (Self::RECALL_MESSAGE, "RECALL_MESSAGE"),
        (Self::QUERY_ASSIGNMENT, "QUERY_ASSIGNMENT"),
        (Self::SET_MESSAGE_REQUEST_MODE, "SET_MESSAGE_REQUEST_MODE"),
        (Self::GET_ALL_MESSAGE_REQUEST_MODE, "GET_ALL_MESSAGE_REQUEST_MODE"),
        (Self::UPDATE_AND_CREATE_STATIC_TOPIC, "UPDATE_AND_CREATE_STATIC_TOPIC"),
        (Self::GET_BROKER_MEMBER_GROUP, "GET_BROKER_MEMBER_GROUP"),
        (Self::ADD_BROKER, "ADD_BROKER"),
        (Self::REMOVE_BROKER, "REMOVE_BROKER"),
        (Self::BROKER_HEARTBEAT, "BROKER_HEARTBEAT"),
        (Self::NOTIFY_MIN_BROKER_ID_CHANGE, "NOTIFY_MIN_BROKER_ID_CHANGE"),
        (Self::EXCHANGE_BROKER_HA_INFO, "EXCHANGE_BROKER_HA_INFO"),
        (Self::GET_BROKER_HA_STATUS, "GET_BROKER_HA_STATUS"),
        (Self::RESET_MASTER_FLUSH_OFFSET, "RESET_MASTER_FLUSH_OFFSET"),
        (Self::CONTROLLER_ALTER_SYNC_STATE_SET, "CONTROLLER_ALTER_SYNC_STATE_SET"),
        (Self::CONTROLLER_ELECT_MASTER, "CONTROLLER_ELECT_MASTER"),
        (Self::CONTROLLER_REGISTER_BROKER, "CONTROLLER_REGISTER_BROKER"),
        (Self::CONTROLLER_GET_REPLICA_INFO, "CONTROLLER_GET_REPLICA_INFO"),
        (Self::CONTROLLER_GET_METADATA_INFO, "CONTROLLER_GET_METADATA_INFO"),
        (Self::CONTROLLER_GET_SYNC_STATE_DATA, "CONTROLLER_GET_SYNC_STATE_DATA"),
        (Self::GET_BROKER_EPOCH_CACHE, "GET_BROKER_EPOCH_CACHE"),
        (Self::NOTIFY_BROKER_ROLE_CHANGED, "NOTIFY_BROKER_ROLE_CHANGED"),
        (Self::UPDATE_CONTROLLER_CONFIG, "UPDATE_CONTROLLER_CONFIG"),
        (Self::GET_CONTROLLER_CONFIG, "GET_CONTROLLER_CONFIG"),
        (Self::CLEAN_BROKER_DATA, "CLEAN_BROKER_DATA"),
        (Self::CONTROLLER_GET_NEXT_BROKER_ID, "CONTROLLER_GET_NEXT_BROKER_ID"),
        (Self::CONTROLLER_APPLY_BROKER_ID, "CONTROLLER_APPLY_BROKER_ID"),
        (Self::UPDATE_COLD_DATA_FLOW_CTR_CONFIG, "UPDATE_COLD_DATA_FLOW_CTR_CONFIG"),
        (Self::REMOVE_COLD_DATA_FLOW_CTR_CONFIG, "REMOVE_COLD_DATA_FLOW_CTR_CONFIG"),
        (Self::GET_COLD_DATA_FLOW_CTR_INFO, "GET_COLD_DATA_FLOW_CTR_INFO"),
        (Self::SET_COMMITLOG_READ_MODE, "SET_COMMITLOG_READ_MODE"),
        (Self::AUTH_CREATE_USER, "AUTH_CREATE_USER"),
        (Self::AUTH_UPDATE_USER, "AUTH_UPDATE_USER"),
        (Self::AUTH_DELETE_USER, "AUTH_DELETE_USER"),
        (Self::AUTH_GET_USER, "AUTH_GET_USER"),
        (Self::AUTH_LIST_USER, "AUTH_LIST_USER"),
        (Self::AUTH_CREATE_ACL, "AUTH_CREATE_ACL"),
        (Self::AUTH_UPDATE_ACL, "AUTH_UPDATE_ACL"),
        (Self::AUTH_DELETE_ACL, "AUTH_DELETE_ACL"),
        (Self::AUTH_GET_ACL, "AUTH_GET_ACL"),
        (Self::AUTH_LIST_ACL, "AUTH_LIST_ACL"),
        (Self::SWITCH_TIMER_ENGINE, "SWITCH_TIMER_ENGINE"),
        (Self::POP_MESSAGE, "POP_MESSAGE"),
        (Self::ACK_MESSAGE, "ACK_MESSAGE"),
        (Self::PEEK_MESSAGE, "PEEK_MESSAGE"),
        (Self::CHANGE_MESSAGE_INVISIBLETIME, "CHANGE_MESSAGE_INVISIBLETIME"),
        (Self::NOTIFICATION, "NOTIFICATION"),
        (Self::POLLING_INFO, "POLLING_INFO"),
        (Self::POP_ROLLBACK, "POP_ROLLBACK"),
        (Self::POP_LITE_MESSAGE, "POP_LITE_MESSAGE"),
        (Self::LITE_SUBSCRIPTION_CTL, "LITE_SUBSCRIPTION_CTL"),
        (Self::ACK_LITE_MESSAGE, "ACK_LITE_MESSAGE"),
        (Self::NOTIFY_UNSUBSCRIBE_LITE, "NOTIFY_UNSUBSCRIBE_LITE"),
        (Self::GET_BROKER_LITE_INFO, "GET_BROKER_LITE_INFO"),
        (Self::GET_PARENT_TOPIC_INFO, "GET_PARENT_TOPIC_INFO"),
        (Self::GET_LITE_TOPIC_INFO, "GET_LITE_TOPIC_INFO"),
        (Self::GET_LITE_CLIENT_INFO, "GET_LITE_CLIENT_INFO"),
        (Self::GET_LITE_GROUP_INFO, "GET_LITE_GROUP_INFO"),
        (Self::TRIGGER_LITE_DISPATCH, "TRIGGER_LITE_DISPATCH"),
        (Self::BATCH_ACK_MESSAGE, "BATCH_ACK_MESSAGE"),
    ];
}

impl ResponseCode {
    /// `RPC_TIME_OUT` = -1006 (5.x only).
    pub const RPC_TIME_OUT: Self = Self(-1006);
    /// `RPC_SEND_TO_CHANNEL_FAILED` = -1004 (5.x only).
    pub const RPC_SEND_TO_CHANNEL_FAILED: Self = Self(-1004);
    /// `RPC_ADDR_IS_NULL` = -1002 (5.x only).
    pub const RPC_ADDR_IS_NULL: Self = Self(-1002);
    /// `RPC_UNKNOWN` = -1000 (5.x only).
    pub const RPC_UNKNOWN: Self = Self(-1000);
    /// `SUCCESS` = 0 (both lines). The request succeeded.
    pub const SUCCESS: Self = Self(0);
    /// `SYSTEM_ERROR` = 1 (both lines). An unexpected failure; Java also answers it for a request header it cannot decode.
    pub const SYSTEM_ERROR: Self = Self(1);
    /// `SYSTEM_BUSY` = 2 (both lines). Flow control: the broker is overloaded; retry later.
    pub const SYSTEM_BUSY: Self = Self(2);
    /// `REQUEST_CODE_NOT_SUPPORTED` = 3 (both lines). No processor serves this request code.
    pub const REQUEST_CODE_NOT_SUPPORTED: Self = Self(3);
    /// `TRANSACTION_FAILED` = 4 (both lines). A transaction operation failed.
    pub const TRANSACTION_FAILED: Self = Self(4);
    /// `FLUSH_DISK_TIMEOUT` = 10 (both lines). Stored, but SYNC_FLUSH did not finish in time.
    pub const FLUSH_DISK_TIMEOUT: Self = Self(10);
    /// `SLAVE_NOT_AVAILABLE` = 11 (both lines). Stored on the SYNC_MASTER, but no slave is in sync.
    pub const SLAVE_NOT_AVAILABLE: Self = Self(11);
    /// `FLUSH_SLAVE_TIMEOUT` = 12 (both lines). Stored on the SYNC_MASTER, but no slave acknowledged in time.
    pub const FLUSH_SLAVE_TIMEOUT: Self = Self(12);
    /// `MESSAGE_ILLEGAL` = 13 (both lines). The message or its properties are invalid.
    pub const MESSAGE_ILLEGAL: Self = Self(13);
    /// `SERVICE_NOT_AVAILABLE` = 14 (both lines). The broker cannot serve this now (a slave refusing writes, a store shutting down, ...).
    pub const SERVICE_NOT_AVAILABLE: Self = Self(14);
    /// `VERSION_NOT_SUPPORTED` = 15 (both lines). The client version is not supported.
    pub const VERSION_NOT_SUPPORTED: Self = Self(15);
    /// `NO_PERMISSION` = 16 (both lines). The topic, group or broker forbids this operation.
    pub const NO_PERMISSION: Self = Self(16);
    /// `TOPIC_NOT_EXIST` = 17 (both lines). The topic does not exist (and is not auto-created).
    pub const TOPIC_NOT_EXIST: Self = Self(17);
    /// `TOPIC_EXIST_ALREADY` = 18 (both lines). The topic exists already.
    pub const TOPIC_EXIST_ALREADY: Self = Self(18);
    /// `PULL_NOT_FOUND` = 19 (both lines). No message at the requested offset yet.
    pub const PULL_NOT_FOUND: Self = Self(19);
    /// `PULL_RETRY_IMMEDIATELY` = 20 (both lines). Nothing matched (filtered out, or a slave lagging); pull again at once.
    pub const PULL_RETRY_IMMEDIATELY: Self = Self(20);
    /// `PULL_OFFSET_MOVED` = 21 (both lines). The requested offset is outside the queue; the header carries the next one.
    pub const PULL_OFFSET_MOVED: Self = Self(21);
    /// `QUERY_NOT_FOUND` = 22 (both lines). A query found nothing.
    pub const QUERY_NOT_FOUND: Self = Self(22);
    /// `SUBSCRIPTION_PARSE_FAILED` = 23 (both lines). The subscription expression does not parse.
    pub const SUBSCRIPTION_PARSE_FAILED: Self = Self(23);
    /// `SUBSCRIPTION_NOT_EXIST` = 24 (both lines). The broker has no subscription of this group and topic.
    pub const SUBSCRIPTION_NOT_EXIST: Self = Self(24);
    /// `SUBSCRIPTION_NOT_LATEST` = 25 (both lines). The broker's subscription is older than the client's.
    pub const SUBSCRIPTION_NOT_LATEST: Self = Self(25);
    /// `SUBSCRIPTION_GROUP_NOT_EXIST` = 26 (both lines). The subscription group does not exist (and is not auto-created).
    pub const SUBSCRIPTION_GROUP_NOT_EXIST: Self = Self(26);
    /// `FILTER_DATA_NOT_EXIST` = 27 (both lines). No filter data for this subscription.
    pub const FILTER_DATA_NOT_EXIST: Self = Self(27);
    /// `FILTER_DATA_NOT_LATEST` = 28 (both lines). The broker's filter data is older than the client's.
    pub const FILTER_DATA_NOT_LATEST: Self = Self(28);
    /// `INVALID_PARAMETER` = 29 (5.x only). A request parameter is invalid.
    pub const INVALID_PARAMETER: Self = Self(29);
    /// `TRANSACTION_SHOULD_COMMIT` = 200 (both lines).
    pub const TRANSACTION_SHOULD_COMMIT: Self = Self(200);
    /// `TRANSACTION_SHOULD_ROLLBACK` = 201 (both lines).
    pub const TRANSACTION_SHOULD_ROLLBACK: Self = Self(201);
    /// `TRANSACTION_STATE_UNKNOW` = 202 (both lines).
    pub const TRANSACTION_STATE_UNKNOW: Self = Self(202);
    /// `TRANSACTION_STATE_GROUP_WRONG` = 203 (both lines).
    pub const TRANSACTION_STATE_GROUP_WRONG: Self = Self(203);
    /// `NO_BUYER_ID` = 204 (both lines).
    pub const NO_BUYER_ID: Self = Self(204);
    /// `NOT_IN_CURRENT_UNIT` = 205 (both lines).
    pub const NOT_IN_CURRENT_UNIT: Self = Self(205);
    /// `CONSUMER_NOT_ONLINE` = 206 (both lines).
    pub const CONSUMER_NOT_ONLINE: Self = Self(206);
    /// `CONSUME_MSG_TIMEOUT` = 207 (both lines).
    pub const CONSUME_MSG_TIMEOUT: Self = Self(207);
    /// `NO_MESSAGE` = 208 (both lines).
    pub const NO_MESSAGE: Self = Self(208);
    /// `POLLING_FULL` = 209 (5.x only). The same number is `UPDATE_AND_CREATE_ACL_CONFIG_FAILED` in the 4.9.x line.
    pub const POLLING_FULL: Self = Self(209);
    /// `UPDATE_AND_CREATE_ACL_CONFIG_FAILED` = 209 (4.9.x only). The same number is `POLLING_FULL` in the 5.x line.
    pub const UPDATE_AND_CREATE_ACL_CONFIG_FAILED: Self = Self(209);
    /// `POLLING_TIMEOUT` = 210 (5.x only). The same number is `DELETE_ACL_CONFIG_FAILED` in the 4.9.x line.
    pub const POLLING_TIMEOUT: Self = Self(210);
    /// `DELETE_ACL_CONFIG_FAILED` = 210 (4.9.x only). The same number is `POLLING_TIMEOUT` in the 5.x line.
    pub const DELETE_ACL_CONFIG_FAILED: Self = Self(210);
    /// `BROKER_NOT_EXIST` = 211 (5.x only). The same number is `UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED` in the 4.9.x line.
    pub const BROKER_NOT_EXIST: Self = Self(211);
    /// `UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED` = 211 (4.9.x only). The same number is `BROKER_NOT_EXIST` in the 5.x line.
    pub const UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED: Self = Self(211);
    /// `BROKER_DISPATCH_NOT_COMPLETE` = 212 (5.x only).
    pub const BROKER_DISPATCH_NOT_COMPLETE: Self = Self(212);
    /// `BROADCAST_CONSUMPTION` = 213 (5.x only).
    pub const BROADCAST_CONSUMPTION: Self = Self(213);
    /// `FLOW_CONTROL` = 215 (both lines).
    pub const FLOW_CONTROL: Self = Self(215);
    /// `NOT_LEADER_FOR_QUEUE` = 501 (5.x only).
    pub const NOT_LEADER_FOR_QUEUE: Self = Self(501);
    /// `ILLEGAL_OPERATION` = 604 (5.x only).
    pub const ILLEGAL_OPERATION: Self = Self(604);
    /// `GO_AWAY` = 1500 (5.x only).
    pub const GO_AWAY: Self = Self(1500);
    /// `CONTROLLER_FENCED_MASTER_EPOCH` = 2000 (5.x only).
    pub const CONTROLLER_FENCED_MASTER_EPOCH: Self = Self(2000);
    /// `CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH` = 2001 (5.x only).
    pub const CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH: Self = Self(2001);
    /// `CONTROLLER_INVALID_MASTER` = 2002 (5.x only).
    pub const CONTROLLER_INVALID_MASTER: Self = Self(2002);
    /// `CONTROLLER_INVALID_REPLICAS` = 2003 (5.x only).
    pub const CONTROLLER_INVALID_REPLICAS: Self = Self(2003);
    /// `CONTROLLER_MASTER_NOT_AVAILABLE` = 2004 (5.x only).
    pub const CONTROLLER_MASTER_NOT_AVAILABLE: Self = Self(2004);
    /// `CONTROLLER_INVALID_REQUEST` = 2005 (5.x only).
    pub const CONTROLLER_INVALID_REQUEST: Self = Self(2005);
    /// `CONTROLLER_BROKER_NOT_ALIVE` = 2006 (5.x only).
    pub const CONTROLLER_BROKER_NOT_ALIVE: Self = Self(2006);
    /// `CONTROLLER_NOT_LEADER` = 2007 (5.x only).
    pub const CONTROLLER_NOT_LEADER: Self = Self(2007);
    /// `CONTROLLER_BROKER_METADATA_NOT_EXIST` = 2008 (5.x only).
    pub const CONTROLLER_BROKER_METADATA_NOT_EXIST: Self = Self(2008);
    /// `CONTROLLER_INVALID_CLEAN_BROKER_METADATA` = 2009 (5.x only).
    pub const CONTROLLER_INVALID_CLEAN_BROKER_METADATA: Self = Self(2009);
    /// `CONTROLLER_BROKER_NEED_TO_BE_REGISTERED` = 2010 (5.x only).
    pub const CONTROLLER_BROKER_NEED_TO_BE_REGISTERED: Self = Self(2010);
    /// `CONTROLLER_MASTER_STILL_EXIST` = 2011 (5.x only).
    pub const CONTROLLER_MASTER_STILL_EXIST: Self = Self(2011);
    /// `CONTROLLER_ELECT_MASTER_FAILED` = 2012 (5.x only).
    pub const CONTROLLER_ELECT_MASTER_FAILED: Self = Self(2012);
    /// `CONTROLLER_ALTER_SYNC_STATE_SET_FAILED` = 2013 (5.x only).
    pub const CONTROLLER_ALTER_SYNC_STATE_SET_FAILED: Self = Self(2013);
    /// `CONTROLLER_BROKER_ID_INVALID` = 2014 (5.x only).
    pub const CONTROLLER_BROKER_ID_INVALID: Self = Self(2014);
    /// `CONTROLLER_JRAFT_INTERNAL_ERROR` = 2015 (5.x only).
    pub const CONTROLLER_JRAFT_INTERNAL_ERROR: Self = Self(2015);
    /// `CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS` = 2016 (5.x only).
    pub const CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS: Self = Self(2016);
    /// `LMQ_QUOTA_EXCEEDED` = 2017 (5.x only).
    pub const LMQ_QUOTA_EXCEEDED: Self = Self(2017);
    /// `LITE_SUBSCRIPTION_QUOTA_EXCEEDED` = 2018 (5.x only).
    pub const LITE_SUBSCRIPTION_QUOTA_EXCEEDED: Self = Self(2018);
    /// `USER_NOT_EXIST` = 3001 (5.x only).
    pub const USER_NOT_EXIST: Self = Self(3001);
    /// `POLICY_NOT_EXIST` = 3002 (5.x only).
    pub const POLICY_NOT_EXIST: Self = Self(3002);

    /// Every code Java's `ResponseCode` defines in 4.9.x or 5.x, with its Java name, by number; where
    /// the two lines name one number differently, the 5.x name comes first.
    pub const KNOWN: &'static [(Self, &'static str)] = &[
        (Self::RPC_TIME_OUT, "RPC_TIME_OUT"),
        (Self::RPC_SEND_TO_CHANNEL_FAILED, "RPC_SEND_TO_CHANNEL_FAILED"),
        (Self::RPC_ADDR_IS_NULL, "RPC_ADDR_IS_NULL"),
        (Self::RPC_UNKNOWN, "RPC_UNKNOWN"),
        (Self::SUCCESS, "SUCCESS"),
        (Self::SYSTEM_ERROR, "SYSTEM_ERROR"),
        (Self::SYSTEM_BUSY, "SYSTEM_BUSY"),
        (Self::REQUEST_CODE_NOT_SUPPORTED, "REQUEST_CODE_NOT_SUPPORTED"),
        (Self::TRANSACTION_FAILED, "TRANSACTION_FAILED"),
        (Self::FLUSH_DISK_TIMEOUT, "FLUSH_DISK_TIMEOUT"),
        (Self::SLAVE_NOT_AVAILABLE, "SLAVE_NOT_AVAILABLE"),
        (Self::FLUSH_SLAVE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT"),
        (Self::MESSAGE_ILLEGAL, "MESSAGE_ILLEGAL"),
        (Self::SERVICE_NOT_AVAILABLE, "SERVICE_NOT_AVAILABLE"),
        (Self::VERSION_NOT_SUPPORTED, "VERSION_NOT_SUPPORTED"),
        (Self::NO_PERMISSION, "NO_PERMISSION"),
        (Self::TOPIC_NOT_EXIST, "TOPIC_NOT_EXIST"),
        (Self::TOPIC_EXIST_ALREADY, "TOPIC_EXIST_ALREADY"),
        (Self::PULL_NOT_FOUND, "PULL_NOT_FOUND"),
        (Self::PULL_RETRY_IMMEDIATELY, "PULL_RETRY_IMMEDIATELY"),
        (Self::PULL_OFFSET_MOVED, "PULL_OFFSET_MOVED"),
        (Self::QUERY_NOT_FOUND, "QUERY_NOT_FOUND"),
        (Self::SUBSCRIPTION_PARSE_FAILED, "SUBSCRIPTION_PARSE_FAILED"),
        (Self::SUBSCRIPTION_NOT_EXIST, "SUBSCRIPTION_NOT_EXIST"),
        (Self::SUBSCRIPTION_NOT_LATEST, "SUBSCRIPTION_NOT_LATEST"),
        (Self::SUBSCRIPTION_GROUP_NOT_EXIST, "SUBSCRIPTION_GROUP_NOT_EXIST"),
        (Self::FILTER_DATA_NOT_EXIST, "FILTER_DATA_NOT_EXIST"),
        (Self::FILTER_DATA_NOT_LATEST, "FILTER_DATA_NOT_LATEST"),
        (Self::INVALID_PARAMETER, "INVALID_PARAMETER"),
        (Self::TRANSACTION_SHOULD_COMMIT, "TRANSACTION_SHOULD_COMMIT"),
        (Self::TRANSACTION_SHOULD_ROLLBACK, "TRANSACTION_SHOULD_ROLLBACK"),
        (Self::TRANSACTION_STATE_UNKNOW, "TRANSACTION_STATE_UNKNOW"),
        (Self::TRANSACTION_STATE_GROUP_WRONG, "TRANSACTION_STATE_GROUP_WRONG"),
        (Self::NO_BUYER_ID, "NO_BUYER_ID"),
        (Self::NOT_IN_CURRENT_UNIT, "NOT_IN_CURRENT_UNIT"),
        (Self::CONSUMER_NOT_ONLINE, "CONSUMER_NOT_ONLINE"),
        (Self::CONSUME_MSG_TIMEOUT, "CONSUME_MSG_TIMEOUT"),
        (Self::NO_MESSAGE, "NO_MESSAGE"),
        (Self::POLLING_FULL, "POLLING_FULL"),
        (Self::UPDATE_AND_CREATE_ACL_CONFIG_FAILED, "UPDATE_AND_CREATE_ACL_CONFIG_FAILED"),
        (Self::POLLING_TIMEOUT, "POLLING_TIMEOUT"),
        (Self::DELETE_ACL_CONFIG_FAILED, "DELETE_ACL_CONFIG_FAILED"),
        (Self::BROKER_NOT_EXIST, "BROKER_NOT_EXIST"),
        (Self::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED"),
        (Self::BROKER_DISPATCH_NOT_COMPLETE, "BROKER_DISPATCH_NOT_COMPLETE"),
        (Self::BROADCAST_CONSUMPTION, "BROADCAST_CONSUMPTION"),
        (Self::FLOW_CONTROL, "FLOW_CONTROL"),
        (Self::NOT_LEADER_FOR_QUEUE, "NOT_LEADER_FOR_QUEUE"),
        (Self::ILLEGAL_OPERATION, "ILLEGAL_OPERATION"),
        (Self::GO_AWAY, "GO_AWAY"),
        (Self::CONTROLLER_FENCED_MASTER_EPOCH, "CONTROLLER_FENCED_MASTER_EPOCH"),
        (Self::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH, "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH"),
        (Self::CONTROLLER_INVALID_MASTER, "CONTROLLER_INVALID_MASTER"),
        (Self::CONTROLLER_INVALID_REPLICAS, "CONTROLLER_INVALID_REPLICAS"),
        (Self::CONTROLLER_MASTER_NOT_AVAILABLE, "CONTROLLER_MASTER_NOT_AVAILABLE"),
        (Self::CONTROLLER_INVALID_REQUEST, "CONTROLLER_INVALID_REQUEST"),
        (Self::CONTROLLER_BROKER_NOT_ALIVE, "CONTROLLER_BROKER_NOT_ALIVE"),
        (Self::CONTROLLER_NOT_LEADER, "CONTROLLER_NOT_LEADER"),
        (Self::CONTROLLER_BROKER_METADATA_NOT_EXIST, "CONTROLLER_BROKER_METADATA_NOT_EXIST"),
        (Self::CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "CONTROLLER_INVALID_CLEAN_BROKER_METADATA"),
        (Self::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "CONTROLLER_BROKER_NEED_TO_BE_REGISTERED"),
        (Self::CONTROLLER_MASTER_STILL_EXIST, "CONTROLLER_MASTER_STILL_EXIST"),
        (Self::CONTROLLER_ELECT_MASTER_FAILED, "CONTROLLER_ELECT_MASTER_FAILED"),
        (Self::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "CONTROLLER_ALTER_SYNC_STATE_SET_FAILED"),
        (Self::CONTROLLER_BROKER_ID_INVALID, "CONTROLLER_BROKER_ID_INVALID"),
        (Self::CONTROLLER_JRAFT_INTERNAL_ERROR, "CONTROLLER_JRAFT_INTERNAL_ERROR"),
        (Self::CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS, "CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS"),
        (Self::LMQ_QUOTA_EXCEEDED, "LMQ_QUOTA_EXCEEDED"),
        (Self::LITE_SUBSCRIPTION_QUOTA_EXCEEDED, "LITE_SUBSCRIPTION_QUOTA_EXCEEDED"),
        (Self::USER_NOT_EXIST, "USER_NOT_EXIST"),
        (Self::POLICY_NOT_EXIST, "POLICY_NOT_EXIST"),
    ];
}

impl LanguageCode {
    /// `JAVA` = 0 (both lines).
    pub const JAVA: Self = Self(0);
    /// `CPP` = 1 (both lines).
    pub const CPP: Self = Self(1);
    /// `DOTNET` = 2 (both lines).
    pub const DOTNET: Self = Self(2);
    /// `PYTHON` = 3 (both lines).
    pub const PYTHON: Self = Self(3);
    /// `DELPHI` = 4 (both lines).
    pub const DELPHI: Self = Self(4);
    /// `ERLANG` = 5 (both lines).
    pub const ERLANG: Self = Self(5);
    /// `RUBY` = 6 (both lines).
    pub const RUBY: Self = Self(6);
    /// `OTHER` = 7 (both lines).
    pub const OTHER: Self = Self(7);
    /// `HTTP` = 8 (both lines).
    pub const HTTP: Self = Self(8);
    /// `GO` = 9 (both lines).
    pub const GO: Self = Self(9);
    /// `PHP` = 10 (both lines).
    pub const PHP: Self = Self(10);
    /// `OMS` = 11 (both lines).
    pub const OMS: Self = Self(11);
    /// `RUST` = 12 (both lines).
    pub const RUST: Self = Self(12);
    /// `NODE_JS` = 13 (5.x only).
    pub const NODE_JS: Self = Self(13);

    /// Every language Java's `LanguageCode` names, with its name, by code.
    pub const KNOWN: &'static [(Self, &'static str)] = &[
        (Self::JAVA, "JAVA"),
        (Self::CPP, "CPP"),
        (Self::DOTNET, "DOTNET"),
        (Self::PYTHON, "PYTHON"),
        (Self::DELPHI, "DELPHI"),
        (Self::ERLANG, "ERLANG"),
        (Self::RUBY, "RUBY"),
        (Self::OTHER, "OTHER"),
        (Self::HTTP, "HTTP"),
        (Self::GO, "GO"),
        (Self::PHP, "PHP"),
        (Self::OMS, "OMS"),
        (Self::RUST, "RUST"),
        (Self::NODE_JS, "NODE_JS"),
    ];
}
