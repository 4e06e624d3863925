//! Admin and client-check bodies: a group's connections, and `CHECK_CLIENT_CONFIG`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{JsonBody, SubscriptionData, lenient};

/// `Connection`: one client connection of a group, as `mqadmin consumerConnection` and
/// `producerConnection` show it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    /// `clientAddr`: the client's `ip:port`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub client_addr: String,
    /// `clientId`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub client_id: String,
    /// `language`: the client's `LanguageCode` name (`JAVA`, `GO`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// `version`: the client's protocol version.
    #[serde(default, deserialize_with = "lenient::number")]
    pub version: i32,
}

/// `ConsumerConnection`: the answer to `GET_CONSUMER_CONNECTION_LIST` (203).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerConnection {
    /// `connectionSet`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub connection_set: Vec<Connection>,
    /// `consumeFromWhere`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consume_from_where: Option<String>,
    /// `consumeType`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consume_type: Option<String>,
    /// `messageModel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_model: Option<String>,
    /// `subscriptionTable`: the group's subscriptions by topic.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub subscription_table: BTreeMap<String, SubscriptionData>,
}

impl JsonBody for ConsumerConnection {
    const JAVA_CLASS: &'static str = "ConsumerConnection";
}

/// `ProducerConnection`: the answer to `GET_PRODUCER_CONNECTION_LIST` (204).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerConnection {
    /// `connectionSet`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub connection_set: Vec<Connection>,
}

impl JsonBody for ProducerConnection {
    const JAVA_CLASS: &'static str = "ProducerConnection";
}

/// `CheckClientRequestBody`: the body of `CHECK_CLIENT_CONFIG` (46), a consumer's subscription
/// to check before it starts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckClientRequestBody {
    /// `clientId`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub client_id: String,
    /// `group`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub group: String,
    /// `subscriptionData`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_data: Option<SubscriptionData>,
    /// `namespace` (5.x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl JsonBody for CheckClientRequestBody {
    const JAVA_CLASS: &'static str = "CheckClientRequestBody";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_consumer_connection_reads_as_java_writes_it() {
        let json = br#"{"connectionSet":[{"clientAddr":"127.0.0.1:5000","clientId":"c1","language":"JAVA","version":513}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionTable":{"T":{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"T"}}}"#;
        let c = ConsumerConnection::decode(json).unwrap();
        assert_eq!(c.connection_set[0].version, 513);
        assert_eq!(c.subscription_table["T"].sub_string, "*");
        assert_eq!(ConsumerConnection::decode(&c.encode()).unwrap(), c);
    }

    #[test]
    fn a_check_client_body_reads_a_java_one() {
        let json = br#"{"clientId":"c","group":"g","subscriptionData":{"classFilterMode":false,"codeSet":[],"expressionType":"SQL92","subString":"a > 1","subVersion":5,"tagsSet":[],"topic":"T"}}"#;
        let b = CheckClientRequestBody::decode(json).unwrap();
        assert_eq!(b.subscription_data.unwrap().expression_type.as_deref(), Some("SQL92"));
    }
}
