//! Registration with the NameServers, sans IO: the `REGISTER_BROKER` (103) and
//! `UNREGISTER_BROKER` (104) a Java broker sends, what their replies say, and when to send the
//! next one ([`RegistrationSchedule`]: every `registerNameServerPeriod`, at once after a topic
//! change or a reconnect, with backoff after a failure).
//!
//! The glue keeps one long-lived connection per NameServer (a NameServer drops a broker from
//! the route when the connection it registered on closes) and never lets a NameServer that is
//! down, slow or answering garbage hold up anything else.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use logship_remoting::body::{DataVersion, JsonBody, RegisterBrokerBody, TopicConfig, perm};
use logship_remoting::header::{
    RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnRegisterBrokerRequestHeader, body_crc32,
};
use logship_remoting::{RemotingCommand, RequestCode, ResponseCode};

use crate::settings::{BrokerSettings, RocketmqLine};
use crate::topic::TopicConfigSerializeWrapper;

/// The `REGISTER_BROKER` request a Java broker of `settings`' line sends for `topics`: the
/// full table (system topics included: a 5.x NameServer refuses a first registration of one
/// topic), the topics' permissions cut to `brokerPermission` as Java cuts them, JSON body with
/// its CRC, `haServerAddr` the address slaves replicate from.
///
/// `state_version`, when given, is the `stateVersion` of the table's `DataVersion`: in
/// controller mode the master epoch, which a Java broker stamps on its topic table at every
/// change of role (and its store's state machine version follows). A 5.x NameServer keeps the
/// route's holder of a broker id when another address claims that id with a lower
/// `stateVersion`, so a stale master cannot take the route back from the newer one. `None`
/// keeps the table's own.
pub fn register_broker_request(
    settings: &BrokerSettings,
    broker_id: i64,
    ha_server_addr: &str,
    topics: &TopicConfigSerializeWrapper,
    state_version: Option<i64>,
) -> RemotingCommand {
    let mut wrapper = topics.clone();
    if let Some(v) = state_version {
        wrapper.data_version.state_version = v;
    }
    let broker_perm = settings.broker_permission;
    if !perm::is_readable(broker_perm) || !perm::is_writeable(broker_perm) {
        for t in wrapper.topic_config_table.values_mut() {
            match settings.line {
                RocketmqLine::V5 => t.perm &= broker_perm,
                RocketmqLine::V4_9 => {
                    *t = TopicConfig { perm: broker_perm, topic_sys_flag: 0, order: false, ..t.clone() }
                }
            }
        }
    }
    if settings.line == RocketmqLine::V5 {
        let none = || serde_json::Value::Object(serde_json::Map::new());
        wrapper.extra.insert("mappingDataVersion".into(), serde_json::json!(DataVersion::default()));
        wrapper.extra.insert("topicQueueMappingInfoMap".into(), none());
        wrapper.extra.insert("topicQueueMappingDetailMap".into(), none());
    }
    let body = RegisterBrokerBody { filter_server_list: Vec::new(), topic_config_serialize_wrapper: wrapper };
    let body = body.encode();
    let header = RegisterBrokerRequestHeader {
        broker_name: settings.broker_name.clone(),
        broker_addr: settings.store_host().to_string(),
        cluster_name: settings.broker_cluster_name.clone(),
        ha_server_addr: ha_server_addr.to_string(),
        broker_id,
        heartbeat_timeout_millis: None,
        enable_acting_master: (settings.line == RocketmqLine::V5).then_some(false),
        compressed: false,
        body_crc32: body_crc32(&body),
    };
    RemotingCommand::request(RequestCode::REGISTER_BROKER)
        .with_version(settings.version())
        .with_header(&header)
        .with_body(body)
}

/// The `UNREGISTER_BROKER` a broker sends at a clean stop. A 4.9 NameServer removes by id
/// whatever address holds it, so only the id this broker registered under is named.
pub fn unregister_broker_request(settings: &BrokerSettings, broker_id: i64) -> RemotingCommand {
    let header = UnRegisterBrokerRequestHeader {
        broker_name: settings.broker_name.clone(),
        broker_addr: settings.store_host().to_string(),
        cluster_name: settings.broker_cluster_name.clone(),
        broker_id,
    };
    RemotingCommand::request(RequestCode::UNREGISTER_BROKER)
        .with_version(settings.version())
        .with_header(&header)
}

/// What a NameServer's answer to a registration said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegisterBrokerResult {
    /// The group's master address (a slave's registration, when the NameServer knows one).
    pub master_addr: Option<String>,
    /// The master's HA address, as the master registered it (which a slave would replicate
    /// from; issue 24 applies it).
    pub ha_server_addr: Option<String>,
}

/// Why a registration failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistrationError {
    /// No connection.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// No answer in time.
    #[error("no answer within {0} ms")]
    Timeout(u128),
    /// The connection broke, or the NameServer sent bytes that are not a remoting answer.
    #[error("the connection failed: {0}")]
    Connection(String),
    /// The NameServer refused it.
    #[error("refused with {code}: {remark}")]
    Refused {
        /// Its response code.
        code: ResponseCode,
        /// Its remark.
        remark: String,
    },
}

/// Reads a NameServer's answer to `REGISTER_BROKER`.
pub fn parse_register_response(
    response: &RemotingCommand,
) -> Result<RegisterBrokerResult, RegistrationError> {
    if response.response_code() != ResponseCode::SUCCESS {
        return Err(RegistrationError::Refused {
            code: response.response_code(),
            remark: response.remark.clone().unwrap_or_default(),
        });
    }
    let header: RegisterBrokerResponseHeader = response.decode_header().unwrap_or_default();
    let some = |s: Option<String>| s.filter(|s| !s.is_empty());
    Ok(RegisterBrokerResult {
        master_addr: some(header.master_addr),
        ha_server_addr: some(header.ha_server_addr),
    })
}

/// Reads a NameServer's answer to `UNREGISTER_BROKER`.
pub fn parse_unregister_response(response: &RemotingCommand) -> Result<(), RegistrationError> {
    if response.response_code() == ResponseCode::SUCCESS {
        return Ok(());
    }
    Err(RegistrationError::Refused {
        code: response.response_code(),
        remark: response.remark.clone().unwrap_or_default(),
    })
}

/// The first retry after a failed registration; each further failure doubles it, up to the
/// period.
pub const FIRST_RETRY: Duration = Duration::from_secs(1);

/// When to register with one NameServer, and how the last attempts went (for `/status`).
#[derive(Clone, Debug)]
pub struct RegistrationSchedule {
    period: Duration,
    next: Instant,
    failures: u32,
    /// The last successful registration, and what it answered.
    pub last_ok: Option<(Instant, RegisterBrokerResult)>,
    /// The last failure.
    pub last_error: Option<(Instant, RegistrationError)>,
}

impl RegistrationSchedule {
    /// A schedule registering every `period`, first at `now`.
    pub fn new(now: Instant, period: Duration) -> Self {
        Self { period, next: now, failures: 0, last_ok: None, last_error: None }
    }

    /// When the next registration is due.
    pub fn next(&self) -> Instant {
        self.next
    }

    /// Failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Registration succeeded at `now`: the next in one period.
    pub fn succeeded(&mut self, now: Instant, result: RegisterBrokerResult) {
        self.failures = 0;
        self.last_ok = Some((now, result));
        self.next = now + self.period;
    }

    /// Registration failed at `now`: the next after a backoff (1 s, 2 s, 4 s, ... up to the
    /// period).
    pub fn failed(&mut self, now: Instant, error: RegistrationError) {
        let backoff = FIRST_RETRY.saturating_mul(1 << self.failures.min(16)).min(self.period);
        self.failures = self.failures.saturating_add(1);
        self.last_error = Some((now, error));
        self.next = now + backoff;
    }

    /// Nothing to register at `now` (a controller-mode broker without a role): look again in one
    /// period.
    pub fn postpone(&mut self, now: Instant) {
        self.next = now + self.period;
    }

    /// Something changed (a topic, the connection): register at `now`, unless a failure
    /// backoff is still running.
    pub fn due_now(&mut self, now: Instant) {
        if self.failures == 0 {
            self.next = self.next.min(now);
        }
    }

    /// How this schedule stands at `now`, for `/status`: its times as milliseconds ago or
    /// from now.
    pub fn status(&self, now: Instant) -> RegistrationStatus {
        let ago = |t: Instant| now.saturating_duration_since(t).as_millis() as u64;
        RegistrationStatus {
            failures: self.failures,
            next_in_ms: self.next.saturating_duration_since(now).as_millis() as u64,
            last_ok_ms_ago: self.last_ok.as_ref().map(|(t, _)| ago(*t)),
            master_addr: self.last_ok.as_ref().and_then(|(_, r)| r.master_addr.clone()),
            master_ha_server_addr: self.last_ok.as_ref().and_then(|(_, r)| r.ha_server_addr.clone()),
            last_error_ms_ago: self.last_error.as_ref().map(|(t, _)| ago(*t)),
            last_error: self.last_error.as_ref().map(|(_, e)| e.to_string()),
        }
    }
}

/// One NameServer's registration as `/status` shows it (`remoting.nameServers.<address>`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegistrationStatus {
    /// Failed attempts since the last success.
    pub failures: u32,
    /// Milliseconds until the next attempt.
    pub next_in_ms: u64,
    /// Milliseconds since the last success (`None`: never registered).
    pub last_ok_ms_ago: Option<u64>,
    /// The master the NameServer named in its last answer (a slave's; `None` for a master,
    /// or when it named none).
    pub master_addr: Option<String>,
    /// The master's HA address from the same answer.
    pub master_ha_server_addr: Option<String>,
    /// Milliseconds since the last failure (`None`: never failed).
    pub last_error_ms_ago: Option<u64>,
    /// The last failure.
    pub last_error: Option<String>,
}

/// Every NameServer's schedule, by address.
pub type Registrations = BTreeMap<String, RegistrationSchedule>;

#[cfg(test)]
mod tests {
    use logship_remoting::body::JsonBody;
    use logship_remoting::header::CommandHeader;

    use super::*;

    fn topics() -> TopicConfigSerializeWrapper {
        let mut t = BTreeMap::new();
        t.insert("TBW102".into(), TopicConfig::with_queues("TBW102", 8, 8, 7));
        t.insert("TopicA".into(), TopicConfig::with_queues("TopicA", 4, 4, 6));
        TopicConfigSerializeWrapper::new(t, DataVersion { counter: 3, state_version: 0, timestamp: 9 })
    }

    #[test]
    fn the_registration_carries_what_a_java_5_broker_sends() {
        let settings = BrokerSettings {
            broker_name: "b1".into(),
            broker_cluster_name: "c1".into(),
            listen_port: 20911,
            ..BrokerSettings::default()
        };
        let r = register_broker_request(&settings, 1, "127.0.0.1:20912", &topics(), None);
        assert_eq!((r.code, r.version), (103, 513));
        let h = RegisterBrokerRequestHeader::from_ext_fields(&r.ext_fields).unwrap();
        assert_eq!(
            (
                h.broker_name.as_str(),
                h.broker_addr.as_str(),
                h.cluster_name.as_str(),
                h.ha_server_addr.as_str()
            ),
            ("b1", "127.0.0.1:20911", "c1", "127.0.0.1:20912")
        );
        assert_eq!((h.broker_id, h.compressed, h.enable_acting_master), (1, false, Some(false)));
        assert_eq!(h.body_crc32, body_crc32(&r.body));
        let body = RegisterBrokerBody::decode(&r.body).unwrap();
        let w = &body.topic_config_serialize_wrapper;
        assert_eq!(w.topic_config_table["TBW102"].perm, 7);
        assert_eq!(w.data_version.counter, 3);
        assert_eq!(w.data_version.state_version, 0, "the table's own");
        assert!(w.extra.contains_key("mappingDataVersion"));
    }

    #[test]
    fn a_controller_mode_registration_claims_its_master_epoch_as_the_state_version() {
        let settings = BrokerSettings::default();
        let r = register_broker_request(&settings, 0, "127.0.0.1:10912", &topics(), Some(7));
        let body = RegisterBrokerBody::decode(&r.body).unwrap();
        let v = body.topic_config_serialize_wrapper.data_version;
        assert_eq!((v.state_version, v.counter, v.timestamp), (7, 3, 9), "only stateVersion changes");
        assert_eq!(
            RegisterBrokerRequestHeader::from_ext_fields(&r.ext_fields).unwrap().body_crc32,
            body_crc32(&r.body)
        );
        let json: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(json["topicConfigSerializeWrapper"]["dataVersion"]["stateVersion"], 7, "{json}");
    }

    #[test]
    fn a_4_9_broker_registers_without_5_x_fields() {
        let settings = BrokerSettings { line: RocketmqLine::V4_9, ..BrokerSettings::default() };
        let r = register_broker_request(&settings, 0, "127.0.0.1:10912", &topics(), None);
        assert_eq!(r.version, 407);
        assert!(!r.ext_fields.contains_key("enableActingMaster"));
        let body = RegisterBrokerBody::decode(&r.body).unwrap();
        assert!(!body.topic_config_serialize_wrapper.extra.contains_key("mappingDataVersion"));
    }

    #[test]
    fn a_read_only_broker_registers_its_topics_read_only_as_java_does() {
        let v5 = BrokerSettings { broker_permission: perm::READ, ..BrokerSettings::default() };
        let body = RegisterBrokerBody::decode(&register_broker_request(&v5, 0, "a:1", &topics(), None).body)
            .unwrap();
        let t = &body.topic_config_serialize_wrapper.topic_config_table;
        assert_eq!((t["TBW102"].perm, t["TopicA"].perm), (4, 4), "5.x: perm & brokerPermission");
        let v4 = BrokerSettings { line: RocketmqLine::V4_9, broker_permission: perm::READ, ..v5 };
        let body = RegisterBrokerBody::decode(&register_broker_request(&v4, 0, "a:1", &topics(), None).body)
            .unwrap();
        assert_eq!(body.topic_config_serialize_wrapper.topic_config_table["TBW102"].perm, 4);
    }

    #[test]
    fn a_slave_s_reply_names_its_master_and_a_refusal_is_an_error() {
        let reply = RemotingCommand::response(ResponseCode::SUCCESS)
            .with_ext_field("masterAddr", "10.0.0.1:10911")
            .with_ext_field("haServerAddr", "10.0.0.1:10912");
        let r = parse_register_response(&reply).unwrap();
        assert_eq!(r.master_addr.as_deref(), Some("10.0.0.1:10911"));
        assert_eq!(r.ha_server_addr.as_deref(), Some("10.0.0.1:10912"));
        let master = parse_register_response(&RemotingCommand::response(ResponseCode::SUCCESS)).unwrap();
        assert_eq!(master, RegisterBrokerResult::default());
        let refused = RemotingCommand::response(ResponseCode::SYSTEM_ERROR).with_remark("crc32 not match");
        assert!(matches!(parse_register_response(&refused), Err(RegistrationError::Refused { .. })));
    }

    #[test]
    fn failures_back_off_to_the_period_and_a_success_resets() {
        let t0 = Instant::now();
        let mut s = RegistrationSchedule::new(t0, Duration::from_secs(30));
        assert_eq!(s.next(), t0);
        let mut waits = Vec::new();
        let mut now = t0;
        for _ in 0..7 {
            s.failed(now, RegistrationError::Timeout(6000));
            waits.push((s.next() - now).as_secs());
            now = s.next();
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        s.failed(now, RegistrationError::Timeout(6000));
        s.due_now(now);
        assert!(s.next() > now, "a change does not cut a failure's backoff short");
        s.succeeded(now, RegisterBrokerResult::default());
        assert_eq!((s.failures(), s.next() - now), (0, Duration::from_secs(30)));
        s.due_now(now);
        assert_eq!(s.next(), now);
        assert!(s.status(now).last_error.unwrap().contains("6000"));
    }
}
