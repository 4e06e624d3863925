//! Fuzz bodies of the broker metadata. Each `pub fn` here is the whole body of one `cargo fuzz`
//! target in `fuzz/`, and runs under `cargo test` on fixed inputs too. Not a stable API.

use logship_remoting::body::JsonBody;
use logship_remoting::body::fastjson as json;

use crate::{
    ConsumerOffsetSerializeWrapper, DelayOffsetSerializeWrapper, SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
};

/// Fuzz body `broker_metadata`: what a master's `GET_ALL_*` reply body or a config file may hold.
///
/// - The fastjson reader ([`json::parse`]) never panics on any bytes, and what it reads survives
///   a round trip through the writer ([`json::to_pretty`]).
/// - Each wrapper decoder (topic configs, consumer offsets, subscription groups, delay offsets)
///   never panics, and a wrapper it accepts decodes to itself again from its own encoding, the
///   compact one ([`JsonBody::encode`]) and the pretty one of the files.
pub fn broker_metadata(data: &[u8]) {
    if let Ok(v) = json::parse(data) {
        let again = json::parse(json::to_pretty(&v).as_bytes()).expect("the writer's output reads back");
        assert_eq!(again, v, "the writer's output reads back as the same value");
    }
    fn round_trip<T: JsonBody + PartialEq + std::fmt::Debug>(data: &[u8]) {
        if let Ok(w) = T::decode(data) {
            let again = T::decode(&w.encode()).expect("an accepted wrapper's encoding decodes");
            assert_eq!(again, w, "an accepted wrapper survives its own encoding");
            let pretty = json::to_pretty(&serde_json::to_value(&w).expect("a body serializes"));
            let again = T::decode(pretty.as_bytes()).expect("an accepted wrapper's file decodes");
            assert_eq!(again, w, "an accepted wrapper survives its file");
        }
    }
    round_trip::<TopicConfigSerializeWrapper>(data);
    round_trip::<ConsumerOffsetSerializeWrapper>(data);
    round_trip::<SubscriptionGroupWrapper>(data);
    round_trip::<DelayOffsetSerializeWrapper>(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broker_metadata_body_holds_on_fixed_inputs() {
        let fixed: [&str; 13] = [
            "",
            "{",
            "{}",
            "null",
            "[1,2,{\"a\":[]}]",
            "{\n\t\"offsetTable\":{\n\t\t\"t@g\":{0:12,1:4\n\t\t}\n\t}\n}",
            "{\"offsetTable\":{\"t@g\":{\"01\":1,\"1\":2}}}",
            "{\"offsetTable\":{1:10,3:8,18:0},\"dataVersion\":{\"counter\":1,\"timestamp\":2}}",
            "{\"topicConfigTable\":{\"T\":{\"perm\":6,\"x\":{\"y\":null}}},\"dataVersion\":null}",
            "{\"subscriptionGroupTable\":{\"G\":{\"groupRetryPolicy\":{\"type\":\"EXPONENTIAL\"},\"subscriptionDataSet\":null}},\"forbiddenTable\":{\"G\":{\"T\":2}}}",
            "{'topicConfigTable':{'T':{'readQueueNums':99999999999}}}",
            "{\"offsetTable\":{\"t@g\":{0:1.5}}}",
            "{\"offsetTable\":{{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}:5}}",
        ];
        for f in fixed {
            broker_metadata(f.as_bytes());
        }
    }

    #[test]
    fn the_broker_metadata_body_holds_on_pseudo_random_inputs() {
        let alphabet = b"{}[]:,\"'0123456789-.eE \t\nabtrufnl@%\\u";
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for len in 0..400usize {
            let input: Vec<u8> = (0..len % 80)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize]
                })
                .collect();
            broker_metadata(&input);
        }
    }
}
