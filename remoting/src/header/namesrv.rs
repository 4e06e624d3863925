//! The NameServer: registering and unregistering a broker, and a topic's route.

use super::{RpcFields, command_header};

command_header! {
    /// `RegisterBrokerRequestHeader`: the header of `REGISTER_BROKER` (103); the body is a
    /// [`RegisterBrokerBody`](crate::body::RegisterBrokerBody).
    pub struct RegisterBrokerRequestHeader {
        /// `brokerName`: the broker group.
        pub broker_name: String => required "brokerName",
        /// `brokerAddr`: `ip:listenPort` clients connect to.
        pub broker_addr: String => required "brokerAddr",
        /// `clusterName`.
        pub cluster_name: String => required "clusterName",
        /// `haServerAddr`: `brokerIP2:haListenPort`, which slaves replicate from.
        pub ha_server_addr: String => required "haServerAddr",
        /// `brokerId`: 0 the master, ≥ 1 a slave.
        pub broker_id: i64 => required "brokerId",
        /// `heartbeatTimeoutMillis`: how long the NameServer keeps the broker without a new
        /// registration (5.x; the NameServer's default 120 s otherwise).
        pub heartbeat_timeout_millis: Option<i64> => optional "heartbeatTimeoutMillis",
        /// `enableActingMaster` (5.x).
        pub enable_acting_master: Option<bool> => optional "enableActingMaster",
        /// `compressed`: the body is the compressed form (a `boolean`, always sent).
        pub compressed: bool => defaulted "compressed",
        /// `bodyCrc32`: [`body_crc32`] of the body; 0 (Java's default) skips the NameServer's
        /// check. Always sent.
        pub body_crc32: i32 => defaulted "bodyCrc32",
    }
}

command_header! {
    /// `RegisterBrokerResponseHeader`: for a slave, its master's addresses.
    pub struct RegisterBrokerResponseHeader {
        /// `haServerAddr`: the master's HA address.
        pub ha_server_addr: Option<String> => optional "haServerAddr",
        /// `masterAddr`: the master's address.
        pub master_addr: Option<String> => optional "masterAddr",
    }
}

command_header! {
    /// `UnRegisterBrokerRequestHeader`: the header of `UNREGISTER_BROKER` (104).
    pub struct UnRegisterBrokerRequestHeader {
        /// `brokerName`.
        pub broker_name: String => required "brokerName",
        /// `brokerAddr`.
        pub broker_addr: String => required "brokerAddr",
        /// `clusterName`.
        pub cluster_name: String => required "clusterName",
        /// `brokerId`.
        pub broker_id: i64 => required "brokerId",
    }
}

command_header! {
    /// `GetRouteInfoRequestHeader`: the header of `GET_ROUTEINFO_BY_TOPIC` (105); the answer
    /// is a [`TopicRouteData`](crate::body::TopicRouteData).
    pub struct GetRouteInfoRequestHeader {
        /// `topic`.
        pub topic: String => required "topic",
        /// `acceptStandardJsonOnly`: ask the NameServer for standard JSON (quoted map keys),
        /// which it also sends to any client of version 4.9.4 or later.
        pub accept_standard_json_only: Option<bool> => optional "acceptStandardJsonOnly",
        /// `lo`: a logical (static-topic) queue id (5.x).
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields (5.x).
        pub rpc: RpcFields => flatten,
    }
}

impl GetRouteInfoRequestHeader {
    /// The request for `topic`'s route.
    pub fn new(topic: impl Into<String>) -> Self {
        Self { topic: topic.into(), ..Self::default() }
    }
}

/// Java's `UtilAll.crc32`: the CRC-32 of `body`, masked to a non-negative `int`, for
/// [`RegisterBrokerRequestHeader::body_crc32`].
pub fn body_crc32(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_crc32_is_java_s_masked_crc32() {
        // java.util.zip.CRC32 of "123456789" is 0xCBF43926; masked, 0x4BF43926.
        assert_eq!(body_crc32(b"123456789"), 0x4BF4_3926);
        assert_eq!(body_crc32(b""), 0);
    }
}
