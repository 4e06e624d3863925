//! The dispatcher: one `match` from request code to processor (Java's `registerProcessor`
//! calls), the authorizer before it, and the answers for every code not served.
//!
//! To serve a code, write its processor in its family's module and add one line to
//! [`dispatch`]'s `match`. A code without a line is answered `REQUEST_CODE_NOT_SUPPORTED`
//! with Java's remark, never a closed connection.
//!
//! **Never served**, whatever else is added: `UPDATE_BROKER_CONFIG` (25),
//! `UPDATE_NAMESRV_CONFIG` (318), `UPDATE_CONTROLLER_CONFIG` (1009) and the other codes that
//! change a broker's configuration over the network (CVE-2023-33246, CVE-2023-37582: with them,
//! anyone who reaches the port runs commands on the host). [`CONFIG_CHANGING_CODES`] lists
//! them; a test checks that each is refused and changes nothing.

use logship_remoting::{RemotingCommand, RequestCode, ResponseCode};

use crate::serve::{Processed, RequestContext};
use crate::{admin, consume, lookup, retry, send, slave_sync, topic_admin};

/// Request codes that change a broker's (or a NameServer's, or a controller's) configuration
/// over the network: never served (see the [module docs](self)).
pub const CONFIG_CHANGING_CODES: [RequestCode; 6] = [
    RequestCode::UPDATE_BROKER_CONFIG,
    RequestCode::UPDATE_NAMESRV_CONFIG,
    RequestCode::UPDATE_CONTROLLER_CONFIG,
    RequestCode::UPDATE_COLD_DATA_FLOW_CTR_CONFIG,
    RequestCode::REMOVE_COLD_DATA_FLOW_CTR_CONFIG,
    RequestCode::SET_COMMITLOG_READ_MODE,
];

/// Answers `request`: the authorizer first, then its code's processor. `None` means no answer
/// goes out (the connection drops any answer to a one-way request by itself).
pub async fn dispatch(ctx: RequestContext, request: RemotingCommand) -> Option<RemotingCommand> {
    ctx.broker.count_request();
    if let Some(authorizer) = &ctx.broker.authorizer {
        if let Err(refusal) = authorizer.authorize(&ctx.connection, &request) {
            return Some(ctx.refusal_response(&request, refusal));
        }
    }
    let processed: Processed = match request.request_code() {
        RequestCode::SEND_MESSAGE | RequestCode::SEND_MESSAGE_V2 | RequestCode::SEND_BATCH_MESSAGE => {
            send::send_message(&ctx, &request).await
        }
        RequestCode::GET_MAX_OFFSET => lookup::get_max_offset(&ctx, &request),
        RequestCode::GET_MIN_OFFSET => lookup::get_min_offset(&ctx, &request),
        RequestCode::GET_EARLIEST_MSG_STORETIME => lookup::get_earliest_msg_storetime(&ctx, &request),
        RequestCode::SEARCH_OFFSET_BY_TIMESTAMP => lookup::search_offset_by_timestamp(&ctx, &request),
        RequestCode::VIEW_MESSAGE_BY_ID => lookup::view_message_by_id(&ctx, &request),
        RequestCode::QUERY_MESSAGE => lookup::query_message(&ctx, &request),
        RequestCode::GET_ALL_TOPIC_CONFIG => admin::get_all_topic_config(&ctx, &request),
        RequestCode::GET_ALL_CONSUMER_OFFSET => slave_sync::get_all_consumer_offset(&ctx, &request),
        RequestCode::GET_ALL_DELAY_OFFSET => slave_sync::get_all_delay_offset(&ctx, &request),
        RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => {
            slave_sync::get_all_subscription_group(&ctx, &request)
        }
        RequestCode::GET_TOPIC_STATS_INFO => admin::get_topic_stats_info(&ctx, &request),
        RequestCode::GET_BROKER_RUNTIME_INFO => admin::get_broker_runtime_info(&ctx, &request),
        RequestCode::GET_BROKER_CONFIG => admin::get_broker_config(&ctx, &request),
        RequestCode::VIEW_BROKER_STATS_DATA => admin::view_broker_stats_data(&ctx, &request),
        RequestCode::GET_CONSUME_STATS => admin::get_consume_stats(&ctx, &request),
        RequestCode::QUERY_TOPIC_CONSUME_BY_WHO => admin::query_topic_consume_by_who(&ctx, &request),
        RequestCode::GET_TOPIC_CONFIG if ctx.broker.settings.line == crate::settings::RocketmqLine::V5 => {
            admin::get_topic_config(&ctx, &request)
        }
        RequestCode::UPDATE_AND_CREATE_TOPIC => topic_admin::update_and_create_topic(&ctx, &request),
        RequestCode::PULL_MESSAGE | RequestCode::LITE_PULL_MESSAGE => {
            consume::serve_pull(&ctx, &request).await
        }
        RequestCode::QUERY_CONSUMER_OFFSET => consume::serve_query_consumer_offset(&ctx, &request),
        RequestCode::UPDATE_CONSUMER_OFFSET => consume::serve_update_consumer_offset(&ctx, &request),
        RequestCode::HEART_BEAT => consume::serve_heart_beat(&ctx, &request),
        RequestCode::UNREGISTER_CLIENT => consume::serve_unregister_client(&ctx, &request),
        RequestCode::GET_CONSUMER_LIST_BY_GROUP => consume::serve_consumer_list_by_group(&ctx, &request),
        RequestCode::LOCK_BATCH_MQ => consume::serve_lock_batch_mq(&ctx, &request),
        RequestCode::UNLOCK_BATCH_MQ => consume::serve_unlock_batch_mq(&ctx, &request),
        RequestCode::CONSUMER_SEND_MSG_BACK => retry::consumer_send_msg_back(&ctx, &request).await,
        RequestCode::CHECK_CLIENT_CONFIG => consume::serve_check_client_config(&ctx, &request),
        RequestCode::GET_CONSUMER_CONNECTION_LIST => consume::serve_consumer_connection_list(&ctx, &request),
        RequestCode::GET_PRODUCER_CONNECTION_LIST => consume::serve_producer_connection_list(&ctx, &request),
        code => Ok(not_supported(&ctx, &request, code)),
    };
    Some(processed.unwrap_or_else(|refusal| ctx.refusal_response(&request, refusal)))
}

/// Java's answer to a code without a processor: `REQUEST_CODE_NOT_SUPPORTED`, remark
/// ` request type <code> not supported` (its leading space included). For the codes that
/// change configuration, the remark also says why they never will be.
fn not_supported(ctx: &RequestContext, request: &RemotingCommand, code: RequestCode) -> RemotingCommand {
    let mut remark = format!(" request type {} not supported", code.0);
    if CONFIG_CHANGING_CODES.contains(&code) {
        remark.push_str(
            ": logship never changes its configuration over the network (CVE-2023-33246); \
             edit broker.conf and restart",
        );
    }
    tracing::debug!(code = code.0, peer = %ctx.connection.peer, "request code not supported");
    ctx.response(request, ResponseCode::REQUEST_CODE_NOT_SUPPORTED).with_remark(remark)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use logship_remoting::body::{JsonBody, TopicConfigSerializeWrapper};
    use logship_remoting::{RemotingCommand, RequestCode, ResponseCode, SerializeType};

    use super::*;
    use crate::BrokerSettings;
    use crate::serve::testing::{broker, call};
    use crate::serve::{Authorizer, Connection, Refusal};

    #[test]
    fn a_code_without_a_processor_is_answered_not_supported_with_java_s_remark() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), BrokerSettings::default());
        let request = RemotingCommand::request(RequestCode(9999))
            .with_opaque(5)
            .with_serialize_type(SerializeType::RocketMq);
        let r = call(&ctx, request);
        assert_eq!(r.code, ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0);
        assert_eq!(r.remark.as_deref(), Some(" request type 9999 not supported"));
        assert_eq!((r.opaque, r.serialize_type, r.version), (5, SerializeType::RocketMq, 513));
    }

    #[test]
    fn codes_that_change_configuration_are_refused_and_change_nothing() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), BrokerSettings::default());
        let before = ctx.broker.metadata.topics.serialize_wrapper();
        for code in CONFIG_CHANGING_CODES {
            let request = RemotingCommand::request(code)
                .with_body(&b"brokerPermission=6\nrocketmqHome=/tmp/x;touch /tmp/pwned\n"[..]);
            let r = call(&ctx, request);
            assert_eq!(r.code, ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0, "{code:?}");
            assert!(r.remark.unwrap().contains("CVE-2023-33246"));
        }
        assert_eq!(ctx.broker.metadata.topics.serialize_wrapper(), before);
        assert_eq!(ctx.broker.settings, BrokerSettings::default());
    }

    #[test]
    fn every_topic_config_is_returned_with_the_table_s_version() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), BrokerSettings::default());
        let r = call(&ctx, RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG));
        assert_eq!(r.code, 0);
        let w = TopicConfigSerializeWrapper::decode(&r.body).unwrap();
        assert_eq!(w.data_version, ctx.broker.metadata.topics.data_version());
        assert_eq!(w.topic_config_table["TBW102"].perm, 7);
        assert!(w.extra.contains_key("mappingDataVersion"), "what a Java 5 slave reads");
    }

    #[test]
    fn the_authorizer_answers_before_any_processor() {
        struct No;
        impl Authorizer for No {
            fn authorize(&self, c: &Connection, _: &RemotingCommand) -> Result<(), Refusal> {
                Err(Refusal::new(ResponseCode::NO_PERMISSION, format!("{} may not", c.peer)))
            }
        }
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), BrokerSettings::default());
        let mut b = Arc::try_unwrap(ctx.broker).unwrap();
        b.authorizer = Some(Arc::new(No));
        let ctx = crate::RequestContext::new(Arc::new(b), ctx.connection);
        let r = call(&ctx, RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG));
        assert_eq!(r.code, ResponseCode::NO_PERMISSION.0);
        assert_eq!(r.remark.as_deref(), Some("10.0.0.9:40000 may not"));
    }
}
