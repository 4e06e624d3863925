//! The broker registration body.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use super::{DataVersion, Extra, JsonBody, TopicConfig, TopicConfigSerializeWrapper, lenient};
use crate::error::BodyError;

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
        let mut ordered = TopicConfig::with_queues("Ordered", 8, 8, 6);
        ordered.attributes = [("+message.type".to_string(), "FIFO".to_string())].into();
        RegisterBrokerBody::new(
            DataVersion { timestamp: 1_700_000_000_000, counter: 5, state_version: 0 },
            [TopicConfig::with_queues("TopicA", 4, 4, 6), ordered],
        )
    }

    #[test]
    fn the_compressed_form_round_trips() {
        let b = body();
        let z = b.encode_compressed().unwrap();
        assert_eq!(RegisterBrokerBody::decode_compressed(&z, DEFAULT_MAX_INFLATED_LEN).unwrap(), b);
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
}
