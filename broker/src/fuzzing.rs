//! Fuzz bodies of the broker metadata. Each `pub fn` here is the whole body of one `cargo fuzz`
//! target in `fuzz/`, and runs under `cargo test` on fixed inputs too. Not a stable API.

use crate::json;
use crate::{
    ConsumerOffsetSerializeWrapper, DelayOffsetSerializeWrapper, SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
};

/// Fuzz body `broker_metadata`: what a master's `GET_ALL_*` reply body or a config file may hold.
///
/// - The fastjson reader ([`json::parse`]) never panics on any text, and what it reads survives
///   a round trip through the writer ([`json::to_pretty`]).
/// - Each wrapper decoder (topic configs, consumer offsets, subscription groups, delay offsets)
///   never panics, and a wrapper it accepts decodes to itself again from its own encoding.
pub fn broker_metadata(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(v) = json::parse(&text) {
        let again = json::parse(&json::to_pretty(&v)).expect("the writer's output reads back");
        assert_eq!(again, v, "the writer's output reads back as the same value");
    }
    macro_rules! round_trip {
        ($t:ty) => {
            if let Ok(w) = <$t>::decode(&text) {
                let encoded = json::to_pretty(&w.to_json());
                let again = <$t>::decode(&encoded).expect("an accepted wrapper's encoding decodes");
                assert_eq!(again, w, "an accepted wrapper survives its own encoding");
            }
        };
    }
    round_trip!(TopicConfigSerializeWrapper);
    round_trip!(ConsumerOffsetSerializeWrapper);
    round_trip!(SubscriptionGroupWrapper);
    round_trip!(DelayOffsetSerializeWrapper);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broker_metadata_body_holds_on_fixed_inputs() {
        let fixed: [&str; 12] = [
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
