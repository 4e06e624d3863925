//! JSON bodies that are protocol types, as fastjson writes and reads them.
//!
//! Field names are Java's bean properties; fields only 5.x has are `Option`s (or default when
//! absent) and documented so. Reading goes through [`fastjson::parse`], so fastjson's bare
//! map keys (`{0:"addr"}`) read like quoted ones; it accepts numbers written as strings
//! (fastjson's `BrowserCompatible` output, which the NameServer uses for new clients), takes a
//! `null` field as absent (as fastjson does) and a missing collection as empty, and ignores
//! unknown fields, except where a type keeps them in `extra` so that what a Java broker sent
//! survives a read and a write. Writing gives standard JSON with quoted keys, which fastjson
//! reads.
//!
//! Java adds fields to these classes, and so will these types: build them with
//! `..Default::default()` or their `new`.
//!
//! `tests/java_vectors.rs` reads bodies Java wrote and checks that Java reads back what this
//! crate writes, for both client lines.

mod connection;
pub mod fastjson;
mod heartbeat;
mod metadata;
mod register;
mod route;
mod stats;

use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use connection::{CheckClientRequestBody, Connection, ConsumerConnection, ProducerConnection};
pub use heartbeat::{
    ConsumerData, GetConsumerListByGroupResponseBody, HeartbeatData, LockBatchRequestBody,
    LockBatchResponseBody, MessageQueue, ProducerData, SubscriptionData, UnlockBatchRequestBody,
};
pub use metadata::{
    ConsumerOffsetSerializeWrapper, DEFAULT_QUEUE_NUMS, DataVersion, OffsetTable, SubscriptionGroupConfig,
    SubscriptionGroupWrapper, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType, perm,
};
pub use register::{DEFAULT_MAX_INFLATED_LEN, RegisterBrokerBody};
pub use route::{BrokerData, QueueData, TopicRouteData};
pub use stats::{BrokerStatsData, BrokerStatsItem};

use crate::error::BodyError;

/// A body that is one JSON document of a Java class.
pub trait JsonBody: Serialize + DeserializeOwned {
    /// The Java class's simple name, for errors.
    const JAVA_CLASS: &'static str;

    /// Reads the body as fastjson would (see the [module docs](self)).
    fn decode(body: &[u8]) -> Result<Self, BodyError> {
        let v = fastjson::parse(body)
            .map_err(|e| BodyError::Json { body: Self::JAVA_CLASS, reason: e.to_string() })?;
        Self::decode_value(v)
    }

    /// Reads the body from JSON already parsed (a config file's content, say); `null` fields
    /// count as absent.
    fn decode_value(v: serde_json::Value) -> Result<Self, BodyError> {
        from_value(Self::JAVA_CLASS, v)
    }

    /// Writes the body as standard JSON.
    fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("protocol types always serialize")
    }
}

/// Unknown fields a type keeps, by name.
pub type Extra = BTreeMap<String, serde_json::Value>;

/// `v`, its `null` fields dropped (fastjson reads them as absent), as a `T`.
pub(crate) fn from_value<T: DeserializeOwned>(
    java_class: &'static str,
    mut v: serde_json::Value,
) -> Result<T, BodyError> {
    fastjson::strip_nulls(&mut v);
    serde_json::from_value(v).map_err(|e| BodyError::Json { body: java_class, reason: e.to_string() })
}

/// serde helpers for Java's way with numbers and nulls.
pub(crate) mod lenient {
    use std::fmt;
    use std::marker::PhantomData;
    use std::str::FromStr;

    use serde::de::{self, Deserialize, Deserializer, Visitor};

    /// A Java number field: a JSON number, or a string of one (fastjson's `BrowserCompatible`
    /// writes large longs so, and fastjson reads either).
    pub(crate) fn number<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: TryFrom<i64> + TryFrom<u64> + FromStr,
    {
        struct V<T>(PhantomData<T>);
        impl<T: TryFrom<i64> + TryFrom<u64> + FromStr> Visitor<'_> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer, or a string of one")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
                T::try_from(v).map_err(|_| E::custom(format_args!("{v} is out of range")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
                T::try_from(v).map_err(|_| E::custom(format_args!("{v} is out of range")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
                v.parse().map_err(|_| E::custom(format_args!("{v:?} is not an integer")))
            }
        }
        d.deserialize_any(V(PhantomData))
    }

    /// An optional Java number field.
    pub(crate) fn option_number<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: TryFrom<i64> + TryFrom<u64> + FromStr,
    {
        #[derive(serde::Deserialize)]
        struct Wrap<T: TryFrom<i64> + TryFrom<u64> + FromStr>(#[serde(deserialize_with = "number")] T);
        Ok(Option::<Wrap<T>>::deserialize(d)?.map(|w| w.0))
    }

    /// A collection or value where `null` means the default (fastjson leaves out nulls; Go
    /// writes `null` for a nil slice).
    pub(crate) fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de> + Default,
    {
        Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
    }

    /// A `Set<Integer>` whose members may be numbers or strings of them (the Go client writes
    /// a subscription's tag hash codes as strings).
    pub(crate) fn int_set<'de, D>(d: D) -> Result<Vec<i32>, D::Error>
    where
        D: Deserializer<'de>,
    {
        #[derive(serde::Deserialize)]
        struct Code(#[serde(deserialize_with = "number")] i32);
        Ok(Option::<Vec<Code>>::deserialize(d)?.unwrap_or_default().into_iter().map(|c| c.0).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_that_is_not_json_is_an_error_naming_the_class() {
        match GetConsumerListByGroupResponseBody::decode(b"{\"consumerIdList\":") {
            Err(BodyError::Json { body, .. }) => assert_eq!(body, "GetConsumerListByGroupResponseBody"),
            other => panic!("{other:?}"),
        }
        assert!(GetConsumerListByGroupResponseBody::decode(b"").is_err());
    }
}
