//! Topic configs and the broker registration body.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use super::{DataVersion, Extra, JsonBody, lenient};
use crate::error::BodyError;

/// `TopicConfig`: one topic's queues and permissions, as `topics.json`, `GET_ALL_TOPIC_CONFIG`
/// and registration carry it.
///
/// Fields this crate does not model (5.x's derived `topicMessageType`, 5.5's
/// `liteTopicExpiration`, ...) are kept in [`extra`](Self::extra) and written back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfig {
    /// `attributes` (5.x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<BTreeMap<String, String>>,
    /// `order`: an ordered topic.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub order: bool,
    /// `perm`: `PermName` bits (read 4, write 2, inherit 1); Java's default 6.
    #[serde(default = "default_perm", deserialize_with = "lenient::number")]
    pub perm: i32,
    /// `readQueueNums`; Java's default 16.
    #[serde(default = "default_queue_nums", deserialize_with = "lenient::number")]
    pub read_queue_nums: i32,
    /// `topicFilterType`: `SINGLE_TAG` (the default) or `MULTI_TAG`.
    #[serde(default = "default_filter_type")]
    pub topic_filter_type: String,
    /// `topicName`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub topic_name: String,
    /// `topicSysFlag`.
    #[serde(default, deserialize_with = "lenient::number")]
    pub topic_sys_flag: i32,
    /// `writeQueueNums`; Java's default 16.
    #[serde(default = "default_queue_nums", deserialize_with = "lenient::number")]
    pub write_queue_nums: i32,
    /// Fields not modelled here, as they came.
    #[serde(flatten)]
    pub extra: Extra,
}

fn default_perm() -> i32 {
    6
}

fn default_queue_nums() -> i32 {
    16
}

fn default_filter_type() -> String {
    "SINGLE_TAG".to_owned()
}

impl Default for TopicConfig {
    /// Java's `new TopicConfig()`: 16 read and write queues, read and write permission.
    fn default() -> Self {
        Self {
            attributes: None,
            order: false,
            perm: default_perm(),
            read_queue_nums: default_queue_nums(),
            topic_filter_type: default_filter_type(),
            topic_name: String::new(),
            topic_sys_flag: 0,
            write_queue_nums: default_queue_nums(),
            extra: Extra::new(),
        }
    }
}

impl TopicConfig {
    /// A readable and writable topic with `queues` read and write queues.
    pub fn new(topic_name: impl Into<String>, queues: i32) -> Self {
        Self {
            topic_name: topic_name.into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            ..Self::default()
        }
    }

    /// Java's `TopicConfig.encode()`: the space-separated text of the compressed registration,
    /// `name read write perm filterType`, then the attributes' JSON when there are any. The text
    /// cannot carry `order` or `topicSysFlag` (neither can Java's). A 4.9.x NameServer reads
    /// exactly five words and fails the whole registration on a sixth, so a topic with
    /// attributes needs a 5.x NameServer or the uncompressed body.
    pub fn encode_text(&self) -> Result<String, BodyError> {
        for (what, text) in [("topic name", &self.topic_name), ("topicFilterType", &self.topic_filter_type)] {
            if text.is_empty() || text.contains(' ') {
                return Err(BodyError::Unencodable {
                    body: "TopicConfig",
                    reason: format!(
                        "{what} {text:?} is empty or has a space, which the compressed text cannot carry"
                    ),
                });
            }
        }
        let mut out = format!(
            "{} {} {} {} {}",
            self.topic_name, self.read_queue_nums, self.write_queue_nums, self.perm, self.topic_filter_type
        );
        if let Some(attributes) = self.attributes.as_ref().filter(|a| !a.is_empty()) {
            out.push(' ');
            out.push_str(&serde_json::to_string(attributes).expect("a string map serializes"));
        }
        Ok(out)
    }

    /// Java 5.x's `TopicConfig.decode(String)`: at least five space-separated words; the rest
    /// after the fifth space is the attributes' JSON, ignored when it does not parse (as Java
    /// ignores it). Empty attributes (`{}`, what 5.x writes for none) read as none.
    pub fn decode_text(text: &str) -> Result<Self, BodyError> {
        let bad = |reason: String| BodyError::Compressed { body: "TopicConfig", reason };
        // Java's split(" ") drops trailing empty words.
        let trimmed = text.trim_end_matches(' ');
        let mut words = trimmed.splitn(6, ' ');
        let mut next = |what: &str| {
            words.next().filter(|w| !w.is_empty()).ok_or_else(|| bad(format!("{text:?} has no {what}")))
        };
        let topic_name = next("topic name")?.to_owned();
        let mut int = |what: &str| -> Result<i32, BodyError> {
            let w = next(what)?;
            w.parse().map_err(|_| bad(format!("{what} {w:?} of {topic_name:?} is not an int")))
        };
        let read_queue_nums = int("readQueueNums")?;
        let write_queue_nums = int("writeQueueNums")?;
        let perm = int("perm")?;
        let topic_filter_type = next("topicFilterType")?.to_owned();
        if topic_filter_type != "SINGLE_TAG" && topic_filter_type != "MULTI_TAG" {
            return Err(bad(format!(
                "topicFilterType {topic_filter_type:?} is neither SINGLE_TAG nor MULTI_TAG"
            )));
        }
        // Java 5.x writes `{}` for a topic without attributes: none, as the writer sees it.
        let attributes = words
            .next()
            .and_then(|json| serde_json::from_str::<BTreeMap<String, String>>(json).ok())
            .filter(|a| !a.is_empty());
        Ok(Self {
            attributes,
            perm,
            read_queue_nums,
            topic_filter_type,
            topic_name,
            write_queue_nums,
            ..Self::default()
        })
    }
}

/// `TopicConfigSerializeWrapper`: every topic config of a broker with their version; the
/// answer to `GET_ALL_TOPIC_CONFIG` and the heart of a registration.
///
/// 5.x's `TopicConfigAndMappingSerializeWrapper` adds `mappingDataVersion`,
/// `topicQueueMappingInfoMap` and `topicQueueMappingDetailMap` (static topics), which are kept
/// in [`extra`](Self::extra).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfigSerializeWrapper {
    /// `dataVersion`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub data_version: DataVersion,
    /// `topicConfigTable`: by topic name.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
    /// Fields not modelled here, as they came.
    #[serde(flatten)]
    pub extra: Extra,
}

impl JsonBody for TopicConfigSerializeWrapper {
    const JAVA_CLASS: &'static str = "TopicConfigSerializeWrapper";
}

/// `RegisterBrokerBody`: the body of `REGISTER_BROKER`.
///
/// Java sends the JSON form ([`JsonBody`]) unless `compressedRegister` is on; then the
/// compressed form ([`encode_compressed`](Self::encode_compressed)) with the header's
/// `compressed` set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterBrokerBody {
    /// `filterServerList`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub filter_server_list: Vec<String>,
    /// `topicConfigSerializeWrapper`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
}

impl JsonBody for RegisterBrokerBody {
    const JAVA_CLASS: &'static str = "RegisterBrokerBody";
}

/// The default bound on an inflated compressed registration.
pub const DEFAULT_MAX_INFLATED_LEN: usize = 64 << 20;

/// The key of 5.x's static-topic mappings in [`TopicConfigSerializeWrapper::extra`].
const MAPPING_INFO_KEY: &str = "topicQueueMappingInfoMap";

impl RegisterBrokerBody {
    /// A body registering `topics` at `data_version`.
    pub fn new(data_version: DataVersion, topics: impl IntoIterator<Item = TopicConfig>) -> Self {
        Self {
            filter_server_list: Vec::new(),
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                data_version,
                topic_config_table: topics.into_iter().map(|t| (t.topic_name.clone(), t)).collect(),
                extra: Extra::new(),
            },
        }
    }

    /// Java's `RegisterBrokerBody.encode(true)`: a zlib stream of `i32`-length-prefixed parts:
    /// the data version's JSON, the topic count and each topic's
    /// [`encode_text`](TopicConfig::encode_text), the filter servers' JSON, and (5.x) the
    /// count and JSON of the static-topic mappings (0 here unless `extra` holds some; a 4.9.x
    /// NameServer stops reading before them).
    pub fn encode_compressed(&self) -> Result<Vec<u8>, BodyError> {
        let wrapper = &self.topic_config_serialize_wrapper;
        let mut plain = Vec::new();
        put_part(&mut plain, &wrapper.data_version.encode())?;
        plain.extend_from_slice(&count_i32(wrapper.topic_config_table.len())?.to_be_bytes());
        for topic in wrapper.topic_config_table.values() {
            put_part(&mut plain, topic.encode_text()?.as_bytes())?;
        }
        put_part(&mut plain, &serde_json::to_vec(&self.filter_server_list).expect("strings serialize"))?;
        let mappings: Vec<&serde_json::Value> = match wrapper.extra.get(MAPPING_INFO_KEY) {
            Some(serde_json::Value::Object(map)) => map.values().collect(),
            _ => Vec::new(),
        };
        plain.extend_from_slice(&count_i32(mappings.len())?.to_be_bytes());
        for info in mappings {
            put_part(&mut plain, &serde_json::to_vec(info).expect("a JSON value serializes"))?;
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&plain).expect("writing to a Vec cannot fail");
        Ok(z.finish().expect("writing to a Vec cannot fail"))
    }

    /// Java's `RegisterBrokerBody.decode(data, true, version)`, refusing a stream that inflates
    /// beyond `max_inflated` bytes ([`DEFAULT_MAX_INFLATED_LEN`] is a sane bound). The 5.x
    /// mapping section is read when present. `order` and `topicSysFlag` are not in this form and
    /// come back as their defaults.
    pub fn decode_compressed(body: &[u8], max_inflated: usize) -> Result<Self, BodyError> {
        let bad = |reason: String| BodyError::Compressed { body: "RegisterBrokerBody", reason };
        let mut plain = Vec::new();
        flate2::read::ZlibDecoder::new(body)
            .take(max_inflated as u64 + 1)
            .read_to_end(&mut plain)
            .map_err(|e| bad(format!("does not inflate: {e}")))?;
        if plain.len() > max_inflated {
            return Err(bad(format!("inflates beyond {max_inflated} bytes")));
        }
        let mut r = Parts { rest: &plain };
        let data_version = DataVersion::decode(r.part("the data version")?)?;
        let topics = r.count("the topic count")?;
        let mut table = BTreeMap::new();
        for _ in 0..topics {
            let text = r.part("a topic config")?;
            let text = std::str::from_utf8(text).map_err(|_| bad("a topic config is not UTF-8".into()))?;
            let topic = TopicConfig::decode_text(text)?;
            table.insert(topic.topic_name.clone(), topic);
        }
        let filter_server_list: Vec<String> = serde_json::from_slice(r.part("the filter server list")?)
            .map_err(|e| bad(format!("the filter server list: {e}")))?;
        let mut extra = Extra::new();
        if !r.rest.is_empty() {
            let mappings = r.count("the mapping count")?;
            let mut map = serde_json::Map::new();
            for _ in 0..mappings {
                let info: serde_json::Value = serde_json::from_slice(r.part("a topic queue mapping")?)
                    .map_err(|e| bad(format!("a topic queue mapping: {e}")))?;
                let topic = info.get("topic").and_then(|t| t.as_str()).unwrap_or_default().to_owned();
                map.insert(topic, info);
            }
            if !r.rest.is_empty() {
                return Err(bad(format!("{} bytes after the last part", r.rest.len())));
            }
            if !map.is_empty() {
                extra.insert(MAPPING_INFO_KEY.to_owned(), serde_json::Value::Object(map));
            }
        }
        Ok(Self {
            filter_server_list,
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                data_version,
                topic_config_table: table,
                extra,
            },
        })
    }
}

fn put_part(plain: &mut Vec<u8>, bytes: &[u8]) -> Result<(), BodyError> {
    plain.extend_from_slice(&count_i32(bytes.len())?.to_be_bytes());
    plain.extend_from_slice(bytes);
    Ok(())
}

fn count_i32(n: usize) -> Result<i32, BodyError> {
    i32::try_from(n).map_err(|_| BodyError::Unencodable {
        body: "RegisterBrokerBody",
        reason: format!("{n} is over Java's int"),
    })
}

/// The inflated parts of a compressed registration.
struct Parts<'a> {
    rest: &'a [u8],
}

impl<'a> Parts<'a> {
    fn count(&mut self, what: &str) -> Result<usize, BodyError> {
        let Some((head, rest)) = self.rest.split_first_chunk::<4>() else {
            return Err(BodyError::Compressed {
                body: "RegisterBrokerBody",
                reason: format!("ends before {what}"),
            });
        };
        self.rest = rest;
        let n = i32::from_be_bytes(*head);
        usize::try_from(n).map_err(|_| BodyError::Compressed {
            body: "RegisterBrokerBody",
            reason: format!("{what} {n} is negative"),
        })
    }

    fn part(&mut self, what: &str) -> Result<&'a [u8], BodyError> {
        let len = self.count(what)?;
        if self.rest.len() < len {
            return Err(BodyError::Compressed {
                body: "RegisterBrokerBody",
                reason: format!("{what} of {len} bytes runs past the end ({} left)", self.rest.len()),
            });
        }
        let (head, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> RegisterBrokerBody {
        let mut ordered = TopicConfig::new("Ordered", 8);
        ordered.attributes = Some([("+message.type".to_string(), "FIFO".to_string())].into());
        RegisterBrokerBody::new(
            DataVersion::new(1_700_000_000_000, 5),
            [TopicConfig::new("TopicA", 4), ordered],
        )
    }

    #[test]
    fn the_compressed_form_round_trips() {
        let b = body();
        let z = b.encode_compressed().unwrap();
        assert_eq!(RegisterBrokerBody::decode_compressed(&z, DEFAULT_MAX_INFLATED_LEN).unwrap(), b);
    }

    #[test]
    fn topic_config_text_is_java_s() {
        assert_eq!(TopicConfig::new("TopicA", 4).encode_text().unwrap(), "TopicA 4 4 6 SINGLE_TAG");
        let t = TopicConfig::decode_text("TopicA 4 4 6 SINGLE_TAG ").unwrap();
        assert_eq!(t, TopicConfig::new("TopicA", 4));
        let t = TopicConfig::decode_text(r#"T 1 2 4 MULTI_TAG {"a":"b c"}"#).unwrap();
        assert_eq!((t.read_queue_nums, t.write_queue_nums, t.perm), (1, 2, 4));
        assert_eq!(t.attributes.unwrap()["a"], "b c");
        let t = TopicConfig::decode_text("TopicA 4 4 6 SINGLE_TAG {}").unwrap();
        assert_eq!(t, TopicConfig::new("TopicA", 4), "Java 5's empty attributes are none");
        let t = TopicConfig::decode_text("T 1 2 4 SINGLE_TAG not-json").unwrap();
        assert_eq!(t.attributes, None, "Java ignores attributes it cannot parse");
        for bad in ["", "T 1 2 4", "T x 2 4 SINGLE_TAG", "T 1 2 4 OTHER", "T  1 2 4 SINGLE_TAG"] {
            assert!(TopicConfig::decode_text(bad).is_err(), "{bad:?}");
        }
        let mut spaced = TopicConfig::new("a b", 1);
        assert!(spaced.encode_text().is_err());
        spaced.topic_name = String::new();
        assert!(spaced.encode_text().is_err());
    }

    #[test]
    fn a_zip_bomb_is_refused_at_the_limit() {
        let b = body();
        let z = b.encode_compressed().unwrap();
        let plain_len = {
            let mut v = Vec::new();
            flate2::read::ZlibDecoder::new(&z[..]).read_to_end(&mut v).unwrap();
            v.len()
        };
        assert!(RegisterBrokerBody::decode_compressed(&z, plain_len).is_ok());
        assert!(matches!(
            RegisterBrokerBody::decode_compressed(&z, plain_len - 1),
            Err(BodyError::Compressed { .. })
        ));
        let mut zeros = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        zeros.write_all(&vec![0u8; 1 << 24]).unwrap();
        let bomb = zeros.finish().unwrap();
        assert!(RegisterBrokerBody::decode_compressed(&bomb, 1 << 20).is_err());
    }

    #[test]
    fn truncated_or_garbage_compressed_bodies_are_errors() {
        let z = body().encode_compressed().unwrap();
        for cut in [0, 1, z.len() / 2, z.len() - 1] {
            assert!(
                RegisterBrokerBody::decode_compressed(&z[..cut], DEFAULT_MAX_INFLATED_LEN).is_err(),
                "cut {cut}"
            );
        }
        assert!(RegisterBrokerBody::decode_compressed(b"not zlib", DEFAULT_MAX_INFLATED_LEN).is_err());
        let mut negative = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        negative.write_all(&(-1i32).to_be_bytes()).unwrap();
        let negative = negative.finish().unwrap();
        assert!(RegisterBrokerBody::decode_compressed(&negative, DEFAULT_MAX_INFLATED_LEN).is_err());
    }

    #[test]
    fn unknown_topic_config_fields_survive_a_read_and_a_write() {
        let json = br#"{"attributes":{},"liteTopicExpiration":-1,"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicMessageType":"NORMAL","topicName":"T","topicSysFlag":0,"writeQueueNums":4}"#;
        let t: TopicConfig = serde_json::from_slice(json).unwrap();
        assert_eq!(t.extra["liteTopicExpiration"], -1);
        let back: serde_json::Value = serde_json::from_slice(&serde_json::to_vec(&t).unwrap()).unwrap();
        assert_eq!(back, serde_json::from_slice::<serde_json::Value>(json).unwrap());
    }

    #[test]
    fn missing_topic_config_fields_take_java_s_defaults() {
        let t: TopicConfig = serde_json::from_slice(br#"{"topicName":"T"}"#).unwrap();
        assert_eq!(t, TopicConfig::new("T", 16));
    }
}
