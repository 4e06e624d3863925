//! `UPDATE_AND_CREATE_TOPIC` (17): creates or updates a topic (Java's
//! `AdminBrokerProcessor.updateAndCreateTopic`). Served only behind the ACL, which lets an
//! admin account alone call it ([`crate::acl::ADMIN_CODES`]); without ACL it is refused, so a
//! stranger never changes topics.

use logship_remoting::body::{TopicConfig, TopicFilterType};
use logship_remoting::{RemotingCommand, ResponseCode};

use crate::names;
use crate::serve::{Processed, Refusal, RequestContext};

/// The most queues a topic created over the network may have.
pub(crate) const MAX_QUEUE_NUMS: i32 = 1024;

/// `UPDATE_AND_CREATE_TOPIC` (17): puts the topic, writes `topics.json` and registers with the
/// NameServers at once.
pub(crate) fn update_and_create_topic(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    if ctx.broker.authorizer.is_none() {
        return Err(Refusal::new(
            ResponseCode::NO_PERMISSION,
            "UPDATE_AND_CREATE_TOPIC needs an authenticated admin account: set aclEnable=true and \
             send it signed with an account that has admin: true in plain_acl.yml",
        ));
    }
    let config = topic_config(request).map_err(Refusal::system_error)?;
    if names::is_system_topic(&config.topic_name) {
        return Err(Refusal::system_error(format!(
            "The topic[{}] is conflict with system topic.",
            config.topic_name
        )));
    }
    let b = &ctx.broker;
    let topic = config.topic_name.clone();
    b.metadata
        .topics
        .update_topic_config(config, ctx.now_ms())
        .map_err(|e| Refusal::system_error(e.to_string()))?;
    b.metadata
        .topics
        .persist()
        .map_err(|e| Refusal::system_error(format!("the topic is set but not yet persisted: {e}")))?;
    tracing::info!(topic, peer = %ctx.connection.peer, "topic created or updated by an admin");
    b.host.topics_changed();
    Ok(ctx.response(request, ResponseCode::SUCCESS))
}

/// The topic config of a `CreateTopicRequestHeader`; the error names the field.
fn topic_config(request: &RemotingCommand) -> Result<TopicConfig, String> {
    let ext = &request.ext_fields;
    let required = |k: &str| ext.get(k).ok_or_else(|| format!("the custom field <{k}> is null"));
    let int = |k: &str, low: i32, high: i32| -> Result<i32, String> {
        let v = required(k)?;
        v.trim()
            .parse::<i32>()
            .ok()
            .filter(|n| (low..=high).contains(n))
            .ok_or_else(|| format!("the field <{k}> is `{v}`, not a number from {low} to {high}"))
    };
    let topic = required("topic")?.clone();
    names::validate_topic(&topic).map_err(|e| e.to_string())?;
    let mut config = TopicConfig::new(topic);
    config.read_queue_nums = int("readQueueNums", 1, MAX_QUEUE_NUMS)?;
    config.write_queue_nums = int("writeQueueNums", 1, MAX_QUEUE_NUMS)?;
    config.perm = int("perm", 0, 7)?;
    config.topic_sys_flag = match ext.get("topicSysFlag") {
        None => 0,
        Some(_) => int("topicSysFlag", 0, i32::MAX)?,
    };
    config.topic_filter_type = match ext.get("topicFilterType").map(String::as_str) {
        None | Some("SINGLE_TAG") => TopicFilterType::SingleTag,
        Some("MULTI_TAG") => TopicFilterType::MultiTag,
        Some(v) => return Err(format!("the field <topicFilterType> is `{v}`, not SINGLE_TAG or MULTI_TAG")),
    };
    config.order = ext.get("order").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if let Some(a) = ext.get("attributes").filter(|a| !a.trim().is_empty()) {
        for pair in a.split(',') {
            let (k, v) =
                pair.split_once('=').ok_or_else(|| format!("the attribute `{pair}` is not +key=value"))?;
            config.attributes.insert(k.trim().to_owned(), v.trim().to_owned());
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use logship_remoting::{RemotingCommand, RequestCode, ResponseCode};

    use crate::BrokerSettings;
    use crate::acl::{PlainAcl, sign_request};
    use crate::serve::testing::{TestHost, broker, call};

    fn create(topic: &str) -> RemotingCommand {
        let mut r = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC);
        for (k, v) in [
            ("topic", topic),
            ("defaultTopic", "TBW102"),
            ("readQueueNums", "3"),
            ("writeQueueNums", "3"),
            ("perm", "6"),
            ("topicFilterType", "SINGLE_TAG"),
            ("topicSysFlag", "0"),
            ("order", "false"),
        ] {
            r.ext_fields.insert(k.into(), v.into());
        }
        r
    }

    fn with_acl(dir: &std::path::Path) -> (crate::RequestContext, Arc<TestHost>) {
        let file = dir.join("plain_acl.yml");
        std::fs::write(
            &file,
            "accounts:\n  - accessKey: adminUser\n    secretKey: adminSecret\n    admin: true\n  \
             - accessKey: plainUser\n    secretKey: plainSecret\n    defaultTopicPerm: PUB|SUB\n",
        )
        .unwrap();
        let (ctx, host) = broker(dir, BrokerSettings::default());
        let mut b = Arc::try_unwrap(ctx.broker).unwrap();
        b.authorizer = Some(Arc::new(PlainAcl::load(&file).unwrap()));
        (crate::RequestContext::new(Arc::new(b), ctx.connection), host)
    }

    #[test]
    fn without_acl_a_topic_is_never_created_over_the_network() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, host) = broker(d.path(), BrokerSettings::default());
        let r = call(&ctx, create("Stranger"));
        assert_eq!(r.code, ResponseCode::NO_PERMISSION.0);
        assert!(r.remark.unwrap().contains("aclEnable=true"));
        assert!(!ctx.broker.metadata.topics.contains("Stranger"));
        assert_eq!(host.topics_changed.load(Ordering::Acquire), 0);
    }

    #[test]
    fn only_a_signed_admin_creates_a_topic_which_is_persisted_and_registered() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, host) = with_acl(d.path());
        let r = call(&ctx, create("Unsigned"));
        assert_eq!(r.code, ResponseCode::SYSTEM_ERROR.0);
        let mut plain = create("ByPlain");
        sign_request(&mut plain, "plainUser", "plainSecret");
        let r = call(&ctx, plain);
        assert_eq!(r.code, ResponseCode::SYSTEM_ERROR.0);
        assert!(
            r.remark
                .unwrap()
                .ends_with("Need admin permission for request code=17, but accessKey=plainUser is not")
        );
        let mut forged = create("Forged");
        sign_request(&mut forged, "adminUser", "guessed-secret");
        assert_eq!(call(&ctx, forged).code, ResponseCode::SYSTEM_ERROR.0);
        assert!(
            !ctx.broker.metadata.topics.contains("ByPlain") && !ctx.broker.metadata.topics.contains("Forged")
        );

        let mut admin = create("ByAdmin");
        sign_request(&mut admin, "adminUser", "adminSecret");
        let r = call(&ctx, admin);
        assert_eq!(r.code, ResponseCode::SUCCESS.0, "{:?}", r.remark);
        let c = ctx.broker.metadata.topics.select("ByAdmin").unwrap();
        assert_eq!((c.read_queue_nums, c.write_queue_nums, c.perm), (3, 3, 6));
        assert_eq!(host.topics_changed.load(Ordering::Acquire), 1);
        let saved = std::fs::read_to_string(d.path().join("config/topics.json")).unwrap();
        assert!(saved.contains("\"ByAdmin\""), "topics.json is written at once");
    }

    #[test]
    fn bad_topic_fields_are_refused_with_the_field_named() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = with_acl(d.path());
        for (field, value, expect) in [
            ("writeQueueNums", "100000", "writeQueueNums"),
            ("perm", "x", "perm"),
            ("topic", "../../etc", "topic"),
            ("topic", "TBW102", "system topic"),
            ("topicFilterType", "REGEX", "topicFilterType"),
        ] {
            let mut r = create("Good");
            r.ext_fields.insert(field.into(), value.into());
            sign_request(&mut r, "adminUser", "adminSecret");
            let r = call(&ctx, r);
            assert_eq!(r.code, ResponseCode::SYSTEM_ERROR.0, "{field}={value}");
            let remark = r.remark.unwrap();
            assert!(remark.contains(expect), "{field}={value}: {remark}");
        }
        assert!(!ctx.broker.metadata.topics.contains("Good"));
    }
}
