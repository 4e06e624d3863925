//! Read-only admin requests (`AdminBrokerProcessor`): what `mqadmin` and slaves ask a broker.

use logship_remoting::body::{DataVersion, JsonBody};
use logship_remoting::{RemotingCommand, ResponseCode};
use serde_json::{Value, json};

use crate::serve::{Processed, RequestContext};
use crate::settings::RocketmqLine;

/// `GET_ALL_TOPIC_CONFIG` (21): every topic config with the table's version. A 5.x broker sends
/// a `TopicConfigAndMappingSerializeWrapper`: the same, plus the static-topic mappings (none
/// here) and their version, which a Java 5.x slave syncing from this broker reads.
pub(crate) fn get_all_topic_config(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let mut wrapper = ctx.broker.metadata.topics.serialize_wrapper();
    if ctx.broker.settings.line == RocketmqLine::V5 {
        let none = || Value::Object(serde_json::Map::new());
        wrapper.extra.insert("mappingDataVersion".into(), json!(DataVersion::default()));
        wrapper.extra.insert("topicQueueMappingInfoMap".into(), none());
        wrapper.extra.insert("topicQueueMappingDetailMap".into(), none());
    }
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_body(wrapper.encode()))
}
