//! RocketMQ ACL 1.0 on the remoting port, as a 4.9 broker with `aclEnable=true` does it
//! (`PlainAccessValidator`, `PlainPermissionManager`).
//!
//! [`AclConfig`] is `plain_acl.yml` parsed into types: accounts (access key, secret key, white
//! remote address, admin flag, default and per-resource permissions) and the global white
//! remote addresses. A file that does not parse is an [`AclError`] naming the field and the
//! fix; the broker then refuses to start, never serves open.
//!
//! [`PlainAcl`] is the [`Authorizer`]: it checks, in Java's order, a global white address, the
//! `AccessKey` and its account, the account's white address, the `Signature` (HMAC-SHA1 over
//! the sorted extFields values and the body, see [`signature`]) compared in constant time, and
//! the permissions the request code needs ([`needed_resources`]). Every failure is answered
//! `SYSTEM_ERROR` with Java's `AclException` message; the connection stays up.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use logship_remoting::body::HeartbeatData;
use logship_remoting::{RemotingCommand, RequestCode};
use ring::hmac;
use yaml_rust2::{Yaml, YamlLoader};

use crate::serve::{Authorizer, Connection, Refusal};

/// The extFields key of the access key.
pub const ACCESS_KEY: &str = "AccessKey";
/// The extFields key of the signature.
pub const SIGNATURE: &str = "Signature";
/// The extFields key of the (unchecked) security token.
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// A field the Java client signs and a 4.9 broker leaves out of the check.
const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";
/// Retry topics name groups.
const RETRY_PREFIX: &str = "%RETRY%";
/// The trace topic every account may publish to.
const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

/// Codes only an admin account may call (Java's `Permission.ADMIN_CODE`).
pub const ADMIN_CODES: [RequestCode; 5] = [
    RequestCode::UPDATE_AND_CREATE_TOPIC,
    RequestCode::UPDATE_BROKER_CONFIG,
    RequestCode::DELETE_TOPIC_IN_BROKER,
    RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode::DELETE_SUBSCRIPTIONGROUP,
];

/// A bad `plain_acl.yml`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AclError {
    /// The file could not be read.
    #[error(
        "cannot read ACL file {path}: {source}; create it (RocketMQ's plain_acl.yml format) or set aclEnable=false"
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not YAML.
    #[error("ACL file {path} is not valid YAML at line {line} column {column}: {message}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// A field has a value Java would not load (or would load as something else than written).
    #[error("ACL file {path}: {field}: {problem}; {fix}")]
    Field {
        /// The file.
        path: PathBuf,
        /// Where: `accounts[2].whiteRemoteAddress`.
        field: String,
        /// What is wrong.
        problem: String,
        /// How to fix it.
        fix: String,
    },
}

/// A permission set (Java's `Permission` bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Perm(u8);

impl Perm {
    /// `DENY`.
    pub const DENY: Self = Self(1);
    /// `ANY` (needed: PUB or SUB).
    pub const ANY: Self = Self(2);
    /// `PUB`.
    pub const PUB: Self = Self(4);
    /// `SUB`.
    pub const SUB: Self = Self(8);
    /// `PUB|SUB`.
    pub const PUB_SUB: Self = Self(12);

    /// Parses `PUB`, `SUB`, `PUB|SUB`, `SUB|PUB` or `DENY` (case-insensitive, trimmed).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_uppercase().as_str() {
            "PUB" => Some(Self::PUB),
            "SUB" => Some(Self::SUB),
            "PUB|SUB" | "SUB|PUB" => Some(Self::PUB_SUB),
            "DENY" => Some(Self::DENY),
            _ => None,
        }
    }

    /// Whether `owned` grants `self` (Java's `Permission.checkPermission`).
    pub fn granted_by(self, owned: Self) -> bool {
        if owned.0 & Self::DENY.0 != 0 {
            return false;
        }
        if self == Self::ANY {
            return owned.0 & (Self::PUB.0 | Self::SUB.0) != 0;
        }
        self.0 & owned.0 != 0
    }
}

/// One octet (or hex group) condition of a range pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Exact(u16),
    Range(u16, u16),
}

/// A remote address pattern (Java's `RemoteAddressStrategyFactory`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddressPattern {
    /// Blank: matches nothing.
    Nothing,
    /// `*`, `*.*.*.*`, `*:*:*:*:*:*:*:*`: matches every address.
    Everything,
    /// Exact addresses (`1.2.3.4`, `1.2.3.4,1.2.3.5`, `1.2.3.{4,5}`).
    List(Vec<IpAddr>),
    /// IPv4 `a.b.c.d` where the first `*` or `x-y` octet among the last three is a range:
    /// the octets before it must match, the ones after it are not checked (as in Java).
    Range {
        /// The literal leading octets.
        head: Vec<u8>,
        /// The range of the next octet.
        low: u8,
        /// Inclusive.
        high: u8,
    },
}

impl AddressPattern {
    /// Parses a pattern; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Self::Nothing);
        }
        if matches!(text, "*" | "*.*.*.*" | "*:*:*:*:*:*:*:*") {
            return Ok(Self::Everything);
        }
        if let Some(open) = text.strip_suffix('}') {
            let (prefix, list) =
                open.split_once('{').ok_or_else(|| format!("`{text}` ends with `}}` but has no `{{`"))?;
            let mut out = Vec::new();
            for last in list.split(',') {
                let a = format!("{prefix}{}", last.trim());
                out.push(
                    a.parse::<IpAddr>().map_err(|_| format!("`{a}` (from `{text}`) is not an IP address"))?,
                );
            }
            return Ok(Self::List(out));
        }
        if text.contains(',') {
            let mut out = Vec::new();
            for a in text.split(',') {
                let a = a.trim();
                out.push(a.parse::<IpAddr>().map_err(|_| {
                    format!("`{a}` in `{text}` is not a full IP address (a list names whole addresses)")
                })?);
            }
            return Ok(Self::List(out));
        }
        if text.contains('*') || text.contains('-') {
            return Self::parse_range(text);
        }
        text.parse::<IpAddr>()
            .map(|a| Self::List(vec![a]))
            .map_err(|_| format!("`{text}` is neither an IP address nor a pattern"))
    }

    fn parse_range(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!("`{text}` is not an IPv4 range pattern ({why}); write e.g. 192.168.1.* or 192.168.1.1-10")
        };
        let octets: Vec<&str> = text.split('.').collect();
        if octets.len() != 4 {
            return Err(bad("it needs four octets; IPv6 ranges are not supported by logship"));
        }
        let parse_part = |s: &str| -> Option<Part> {
            if s == "*" {
                return Some(Part::Range(0, 255));
            }
            if let Some((a, b)) = s.split_once('-') {
                let (a, b) = (a.parse::<u16>().ok()?, b.parse::<u16>().ok()?);
                return (a <= b && b <= 255 && b > 0).then_some(Part::Range(a, b));
            }
            s.parse::<u16>().ok().filter(|v| *v <= 255).map(Part::Exact)
        };
        let parts: Vec<Part> = octets
            .iter()
            .map(|s| parse_part(s))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("an octet is not a number 0-255, `*` or `a-b` with a <= b"))?;
        let Part::Exact(first) = parts[0] else {
            return Err(bad("the first octet must be a number"));
        };
        let mut head = vec![first as u8];
        for p in &parts[1..] {
            match *p {
                Part::Exact(v) => head.push(v as u8),
                Part::Range(low, high) => return Ok(Self::Range { head, low: low as u8, high: high as u8 }),
            }
        }
        Err(bad("no octet is a range"))
    }

    /// Whether `addr` (a peer's address; IPv4-mapped IPv6 counts as IPv4) matches.
    pub fn matches(&self, addr: IpAddr) -> bool {
        let addr = addr.to_canonical();
        match self {
            Self::Nothing => false,
            Self::Everything => true,
            Self::List(list) => list.iter().any(|a| a.to_canonical() == addr),
            Self::Range { head, low, high } => {
                let IpAddr::V4(v4) = addr else { return false };
                let o = Ipv4Addr::octets(&v4);
                o[..head.len()] == head[..] && (*low..=*high).contains(&o[head.len()])
            }
        }
    }
}

/// One account of `plain_acl.yml`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// `accessKey`.
    pub access_key: String,
    /// `secretKey`.
    pub secret_key: String,
    /// `whiteRemoteAddress`: a match skips the signature and permission checks.
    pub white_remote_address: AddressPattern,
    /// `admin`: may call [`ADMIN_CODES`].
    pub admin: bool,
    /// `defaultTopicPerm` (absent: DENY).
    pub default_topic_perm: Perm,
    /// `defaultGroupPerm` (absent: DENY).
    pub default_group_perm: Perm,
    /// `topicPerms` and `groupPerms` (groups as `%RETRY%<group>`).
    pub resource_perms: BTreeMap<String, Perm>,
}

/// `plain_acl.yml`, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AclConfig {
    /// `globalWhiteRemoteAddresses`: a match skips every check.
    pub global_white_remote_addresses: Vec<AddressPattern>,
    /// `accounts`, by access key.
    pub accounts: BTreeMap<String, Account>,
}

impl AclConfig {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<Self, AclError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| AclError::Read { path: path.into(), source })?;
        Self::parse(&text, path)
    }

    /// Parses the text of `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, AclError> {
        let docs = YamlLoader::load_from_str(text).map_err(|e| AclError::Yaml {
            path: path.into(),
            line: e.marker().line(),
            column: e.marker().col() + 1,
            message: e.info().to_owned(),
        })?;
        let field = |field: String, problem: String, fix: &str| AclError::Field {
            path: path.into(),
            field,
            problem,
            fix: fix.into(),
        };
        let root = match docs.as_slice() {
            [] => return Err(field("(file)".into(), "is empty".into(), "add an `accounts:` list")),
            [root] => root,
            _ => return Err(field("(file)".into(), "has several YAML documents".into(), "keep one")),
        };
        let Yaml::Hash(map) = root else {
            return Err(field(
                "(file)".into(),
                "is not a mapping".into(),
                "write `accounts:` at the top level",
            ));
        };
        let get = |key: &str| map.get(&Yaml::String(key.into()));
        let strings = |name: String, y: Option<&Yaml>| -> Result<Vec<String>, AclError> {
            match y {
                None | Some(Yaml::Null) => Ok(Vec::new()),
                Some(Yaml::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        scalar(v).ok_or_else(|| {
                            field(format!("{name}[{i}]"), "is not a string".into(), "quote it")
                        })
                    })
                    .collect(),
                Some(_) => Err(field(name, "is not a list".into(), "write one `- item` per line")),
            }
        };
        let mut config = Self::default();
        for (i, p) in strings("globalWhiteRemoteAddresses".into(), get("globalWhiteRemoteAddresses"))?
            .iter()
            .enumerate()
        {
            let pattern = AddressPattern::parse(p).map_err(|e| {
                field(format!("globalWhiteRemoteAddresses[{i}]"), e, "fix or remove the pattern")
            })?;
            config.global_white_remote_addresses.push(pattern);
        }
        let accounts = match get("accounts") {
            None | Some(Yaml::Null) => &Vec::new(),
            Some(Yaml::Array(a)) => a,
            Some(_) => {
                return Err(field(
                    "accounts".into(),
                    "is not a list".into(),
                    "write one `- accessKey: ...` entry per account",
                ));
            }
        };
        for (i, a) in accounts.iter().enumerate() {
            let at = |f: &str| format!("accounts[{i}].{f}");
            let Yaml::Hash(a) = a else {
                return Err(field(
                    format!("accounts[{i}]"),
                    "is not a mapping".into(),
                    "give accessKey, secretKey, ...",
                ));
            };
            let get = |key: &str| a.get(&Yaml::String(key.into()));
            let key = |name: &str| -> Result<String, AclError> {
                let v = get(name)
                    .and_then(scalar)
                    .ok_or_else(|| field(at(name), "is missing".into(), "set it (more than 6 characters)"))?;
                if v.chars().count() <= 6 {
                    return Err(field(
                        at(name),
                        "is 6 characters or fewer".into(),
                        "use a longer key, as RocketMQ requires",
                    ));
                }
                Ok(v)
            };
            let access_key = key("accessKey")?;
            let secret_key = key("secretKey")?;
            let white_remote_address = match get("whiteRemoteAddress").and_then(scalar) {
                None => AddressPattern::Nothing,
                Some(p) => AddressPattern::parse(&p)
                    .map_err(|e| field(at("whiteRemoteAddress"), e, "fix or remove the pattern"))?,
            };
            let admin = match get("admin") {
                None | Some(Yaml::Null) => false,
                Some(Yaml::Boolean(b)) => *b,
                Some(Yaml::String(s)) if s.eq_ignore_ascii_case("true") => true,
                Some(Yaml::String(s)) if s.eq_ignore_ascii_case("false") => false,
                Some(_) => {
                    return Err(field(
                        at("admin"),
                        "is not true or false".into(),
                        "write admin: true or admin: false",
                    ));
                }
            };
            let perm = |name: &str, text: &str| {
                Perm::parse(text).ok_or_else(|| {
                    field(
                        name.into(),
                        format!("`{text}` is not a permission (Java would read it as DENY)"),
                        "write PUB, SUB, PUB|SUB or DENY",
                    )
                })
            };
            let default = |name: &str| match get(name).and_then(scalar) {
                None => Ok(Perm::DENY),
                Some(t) => perm(&at(name), &t),
            };
            let default_topic_perm = default("defaultTopicPerm")?;
            let default_group_perm = default("defaultGroupPerm")?;
            let mut resource_perms = BTreeMap::new();
            for (list, prefix) in [("topicPerms", ""), ("groupPerms", RETRY_PREFIX)] {
                for (j, entry) in strings(at(list), get(list))?.iter().enumerate() {
                    let name = format!("{}[{j}]", at(list));
                    let Some((resource, p)) =
                        entry.split_once('=').filter(|(r, p)| !r.trim().is_empty() && !p.contains('='))
                    else {
                        return Err(field(
                            name,
                            format!("`{entry}` is not `name=PERM`"),
                            "write e.g. TopicA=PUB|SUB",
                        ));
                    };
                    resource_perms.insert(format!("{prefix}{}", resource.trim()), perm(&name, p)?);
                }
            }
            if config.accounts.contains_key(&access_key) {
                return Err(field(
                    at("accessKey"),
                    format!("`{access_key}` is defined twice"),
                    "keep one account per access key",
                ));
            }
            config.accounts.insert(
                access_key.clone(),
                Account {
                    access_key,
                    secret_key,
                    white_remote_address,
                    admin,
                    default_topic_perm,
                    default_group_perm,
                    resource_perms,
                },
            );
        }
        Ok(config)
    }
}

fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// What the client signs: the extFields values sorted by key (Java's `String.compareTo`, UTF-16
/// order), `Signature` and the keys in `skip` left out, concatenated, then the body.
pub fn signed_content(ext_fields: &BTreeMap<String, String>, body: &[u8], skip: &[&str]) -> Vec<u8> {
    let mut entries: Vec<(&String, &String)> =
        ext_fields.iter().filter(|(k, _)| k.as_str() != SIGNATURE && !skip.contains(&k.as_str())).collect();
    entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    let mut out = Vec::new();
    for (_, v) in entries {
        out.extend_from_slice(v.as_bytes());
    }
    out.extend_from_slice(body);
    out
}

/// Java's `AclUtils.calSignature`: Base64(HMAC-SHA1(secret key, content)).
pub fn signature(secret_key: &str, content: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret_key.as_bytes());
    STANDARD.encode(hmac::sign(&key, content).as_ref())
}

/// Signs `request` as Java's `AclClientRPCHook` does (adds `AccessKey` and `Signature`).
pub fn sign_request(request: &mut RemotingCommand, access_key: &str, secret_key: &str) {
    request.ext_fields.insert(ACCESS_KEY.into(), access_key.into());
    let content = signed_content(&request.ext_fields, &request.body, &[]);
    request.ext_fields.insert(SIGNATURE.into(), signature(secret_key, &content));
}

fn signature_matches(secret_key: &str, given: &str, request: &RemotingCommand) -> bool {
    let Ok(given) = STANDARD.decode(given) else { return false };
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret_key.as_bytes());
    let check = |skip: &[&str]| {
        hmac::verify(&key, &signed_content(&request.ext_fields, &request.body, skip), &given).is_ok()
    };
    // All fields (Java 5 clients and the Go client without a token); without
    // `_UNIQUE_KEY_QUERY` (what a 4.9 broker checks); without the token's value (the Go client).
    let ext = &request.ext_fields;
    check(&[])
        || (ext.contains_key(UNIQUE_KEY_QUERY) && check(&[UNIQUE_KEY_QUERY]))
        || (ext.contains_key(SECURITY_TOKEN) && check(&[SECURITY_TOKEN]))
}

/// The resources a request needs and the permission on each (4.9 `PlainAccessValidator.parse`,
/// plus the codes 4.9.7 leaves unchecked: `SEND_BATCH_MESSAGE` and `QUERY_CONSUMER_OFFSET`).
/// Groups appear as `%RETRY%<group>`. `Err` is an undecodable heartbeat body.
pub fn needed_resources(request: &RemotingCommand) -> Result<Vec<(String, Perm)>, String> {
    let ext = &request.ext_fields;
    let field = |k: &str| ext.get(k).map(String::as_str);
    let retry = |g: &str| format!("{RETRY_PREFIX}{g}");
    let mut out = Vec::new();
    let send = |topic: Option<&str>, group: Option<&str>, out: &mut Vec<(String, Perm)>| {
        if let Some(t) = topic {
            out.push((t.to_owned(), Perm::PUB));
            if t.starts_with(RETRY_PREFIX) {
                if let Some(g) = group {
                    out.push((retry(g), Perm::SUB));
                }
            }
        }
    };
    match request.request_code() {
        RequestCode::SEND_MESSAGE => send(field("topic"), field("producerGroup"), &mut out),
        RequestCode::SEND_MESSAGE_V2 | RequestCode::SEND_BATCH_MESSAGE => {
            send(field("b"), field("a"), &mut out)
        }
        RequestCode::CONSUMER_SEND_MSG_BACK => out.extend(field("group").map(|g| (retry(g), Perm::SUB))),
        RequestCode::QUERY_MESSAGE => out.extend(field("topic").map(|t| (t.to_owned(), Perm::SUB))),
        RequestCode::PULL_MESSAGE
        | RequestCode::UPDATE_CONSUMER_OFFSET
        | RequestCode::QUERY_CONSUMER_OFFSET => {
            out.extend(field("topic").map(|t| (t.to_owned(), Perm::SUB)));
            out.extend(field("consumerGroup").map(|g| (retry(g), Perm::SUB)));
        }
        RequestCode::UNREGISTER_CLIENT | RequestCode::GET_CONSUMER_LIST_BY_GROUP => {
            out.extend(field("consumerGroup").map(|g| (retry(g), Perm::SUB)));
        }
        RequestCode::HEART_BEAT => {
            let data: HeartbeatData = serde_json::from_slice(&request.body)
                .map_err(|e| format!("the heartbeat body is not JSON: {e}"))?;
            for c in &data.consumer_data_set {
                out.push((retry(&c.group_name), Perm::SUB));
                for s in &c.subscription_data_set {
                    out.push((s.topic.clone(), Perm::SUB));
                }
            }
        }
        _ => {}
    }
    Ok(out)
}

fn acl_refusal(message: impl std::fmt::Display) -> Refusal {
    Refusal::system_error(format!("org.apache.rocketmq.acl.common.AclException: {message}"))
}

fn resource_text(resource: &str) -> String {
    match resource.strip_prefix(RETRY_PREFIX) {
        Some(g) => format!("group:{g}"),
        None => format!("topic:{resource}"),
    }
}

impl AclConfig {
    /// Java's `validate` for a request from `peer`.
    pub fn check(&self, peer: IpAddr, request: &RemotingCommand) -> Result<(), Refusal> {
        if self.global_white_remote_addresses.iter().any(|p| p.matches(peer)) {
            return Ok(());
        }
        let Some(access_key) = request.ext_fields.get(ACCESS_KEY) else {
            return Err(acl_refusal("No accessKey is configured"));
        };
        let Some(account) = self.accounts.get(access_key) else {
            return Err(acl_refusal(format_args!("No acl config for {access_key}")));
        };
        if account.white_remote_address.matches(peer) {
            return Ok(());
        }
        let given = request.ext_fields.get(SIGNATURE).map(String::as_str).unwrap_or("");
        if !signature_matches(&account.secret_key, given, request) {
            return Err(acl_refusal(format_args!("Check signature failed for accessKey={access_key}")));
        }
        let code = request.request_code();
        if ADMIN_CODES.contains(&code) && !account.admin {
            return Err(acl_refusal(format_args!(
                "Need admin permission for request code={}, but accessKey={access_key} is not",
                code.0
            )));
        }
        let needed = needed_resources(request).map_err(acl_refusal)?;
        if needed.len() == 1 && needed[0] == (TRACE_TOPIC.to_owned(), Perm::PUB) {
            return Ok(());
        }
        if account.admin && account.resource_perms.is_empty() {
            return Ok(());
        }
        for (resource, perm) in &needed {
            let owned = account.resource_perms.get(resource).copied().unwrap_or(
                if resource.starts_with(RETRY_PREFIX) {
                    account.default_group_perm
                } else {
                    account.default_topic_perm
                },
            );
            if !perm.granted_by(owned) {
                return Err(acl_refusal(format_args!(
                    "No default permission for {}",
                    resource_text(resource)
                )));
            }
        }
        Ok(())
    }
}

/// The ACL [`Authorizer`]: the loaded [`AclConfig`], replaced when the file changes.
#[derive(Debug)]
pub struct PlainAcl {
    path: PathBuf,
    state: RwLock<(Arc<AclConfig>, Option<FileStamp>)>,
}

/// A file's modification time and length: what tells a change.
type FileStamp = (SystemTime, u64);

fn stamp(path: &Path) -> Option<FileStamp> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl PlainAcl {
    /// Loads `path`; an error refuses the start.
    pub fn load(path: &Path) -> Result<Self, AclError> {
        let before = stamp(path);
        let config = AclConfig::load(path)?;
        Ok(Self { path: path.into(), state: RwLock::new((Arc::new(config), before)) })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<AclConfig> {
        self.state.read().unwrap_or_else(|e| e.into_inner()).0.clone()
    }

    /// Reloads the file if its modification time or length changed (Java watches it and
    /// reloads likewise). A file that no longer parses keeps the configuration in force, as
    /// Java does, and is returned as the error to log. `Ok(true)`: reloaded.
    pub fn reload_if_changed(&self) -> Result<bool, AclError> {
        let now = stamp(&self.path);
        if now == self.state.read().unwrap_or_else(|e| e.into_inner()).1 {
            return Ok(false);
        }
        let config = AclConfig::load(&self.path);
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        state.1 = now;
        state.0 = Arc::new(config?);
        Ok(true)
    }
}

impl Authorizer for PlainAcl {
    fn authorize(&self, connection: &Connection, request: &RemotingCommand) -> Result<(), Refusal> {
        let result = self.config().check(connection.peer.ip(), request);
        if let Err(refusal) = &result {
            tracing::info!(peer = %connection.peer, code = request.code, remark = %refusal.remark, "ACL refused a request");
        }
        result
    }
}

#[cfg(test)]
mod tests;
