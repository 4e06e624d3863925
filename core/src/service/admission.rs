//! Which connections a master admits as replicas, and which it trusts.
//!
//! The classic HA protocol carries no identity: a connection is an address and the 8-byte
//! reports it sends. So admission is by address, checked at accept before anything is read or
//! sent, which keeps the wire format (and Java peers) unchanged. A connection's [`Trust`] says
//! what it may do: only an *identified* one (a replica the configuration names) counts for
//! SYNC waits and the sync-state-set, moves the confirmOffset, fences the master and lifts its
//! restart fence; a *stranger* may at most read the log.
//!
//! - **Protected mode** (no allow-list, no TLS, the default; like Redis's): loopback peers are
//!   identified, since one host runs several slaves (tests, the demo) and a local process is
//!   inside the host's trust; any other connection is closed at accept, unread. A broker
//!   whose HA port would take off-loopback connections this way refuses to start (the
//!   binary's configuration check). In controller mode with a member directory (on etcd, the
//!   HA addresses the members published), off-loopback connections are admitted as strangers
//!   and identified by their handshake's broker id ([`MemberAddress`]).
//! - **Allow-list**: only connections from the listed addresses or networks are admitted, and
//!   identified; any other is closed at once, unread. Only hosts an address entry names lift
//!   the restart fence: a network entry admits strangers too, and a stranger is no replica
//!   ([`Admission::check_restart_fence`]).
//! - **TLS** ([`MasterTls`], `haTlsMode` `optional` or `required`): a slave that opens with a
//!   TLS handshake and presents a client certificate from the configured CA naming a listed
//!   replica is admitted and identified, from any address; the allow-list then applies to
//!   plain connections only (`optional`: unlisted ones, loopback included, are strangers
//!   without a list), or plain connections are closed unread (`required`). See
//!   [`crate::service::tls`].
//! - **Any replica** ([`Admission::trust_any`], `haTrustAnyReplica=true`, RocketMQ's open
//!   admission, loudly warned): connections that would be strangers are admitted and count
//!   for SYNC waits, but are not identified: they never fence nor lift the restart fence.
//!
//! **Slots.** Connection limits apply in every mode, at accept, before any byte is read, and
//! keep a stranger from locking the replicas out ([`Admission::allot`]): connections not yet
//! identified (strangers, and those whose TLS negotiation or handshake is still to decide)
//! hold at most [`max_untrusted_connections`](Admission::max_untrusted_connections) slots in
//! all, and every address but an identified loopback one at most
//! [`max_connections_per_peer`](Admission::max_connections_per_peer). A new connection that
//! would exceed a limit displaces the least trusted connection within it, oldest first: an
//! identified one displaces a stranger, an undecided one, or an identified one that has not
//! reported yet; an undecided one displaces only a stranger or another undecided one. A
//! replica that has reported is never displaced.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::ConnId;
use crate::config::CoreConfigError;
use crate::service::Refusals;
use crate::service::tls::Link;
use crate::service::tls::{MasterTls, TlsMode};

/// logship's default cap on live HA connections from one address.
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 8;
/// logship's default cap on live HA connections in all.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// logship's default cap on live HA connections not identified as replicas (strangers, and
/// those still negotiating TLS or to be identified by their handshake), in all.
pub const DEFAULT_MAX_UNTRUSTED_CONNECTIONS: usize = 16;

/// What a connection may do, as its admission decided.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Trust {
    /// Not identified: it may read the log, but never counts for SYNC waits or the
    /// sync-state-set, never moves the confirmOffset, never fences the master.
    Stranger,
    /// Admitted by [`Admission::trust_any`]: counts for SYNC waits, but is not identified, so
    /// it never fences the master nor lifts its restart fence.
    Counted,
    /// Identified: a loopback peer in protected mode, an allow-listed address or network, a
    /// TLS replica name, or (controller mode) the HA address its broker id published. Counts,
    /// and fences the master when it holds bytes the master lacks.
    Identified,
}

impl Trust {
    /// Whether its acknowledgements count.
    pub fn counts(self) -> bool {
        self != Self::Stranger
    }

    /// The word `/status` and logs use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Stranger => "stranger",
            Self::Counted => "counted",
            Self::Identified => "identified",
        }
    }
}

/// The identity a broker id is bound to (controller mode): the HA address that member
/// published (on etcd), or a name or address the configuration gives. A handshake claiming the
/// id from another identity is refused.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MemberAddress {
    /// Connections of this member come from this IP.
    Ip(IpAddr),
    /// Connections of this member carry this TLS replica name.
    TlsName(String),
}

/// A connection as [`Admission::allot`] sees it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The connection.
    pub conn: crate::ConnId,
    /// Its source address.
    pub ip: IpAddr,
    /// Its trust; `None` while it is still to be decided (TLS negotiating, or a handshake to
    /// identify).
    pub trust: Option<Trust>,
    /// Whether it has reported (classic: a first report; AutoSwitch: a first ack).
    pub reported: bool,
    /// When it was accepted.
    pub since: crate::time::Instant,
}

impl Slot {
    /// How readily it is displaced: lower first. `None`: never (an identified replica that
    /// reported).
    fn rank(&self) -> Option<u8> {
        match (self.trust, self.reported) {
            (Some(Trust::Stranger), _) => Some(0),
            (None, _) => Some(1),
            (Some(Trust::Counted), false) => Some(2),
            (Some(Trust::Counted), true) => Some(3),
            (Some(Trust::Identified), false) => Some(4),
            (Some(Trust::Identified), true) => None,
        }
    }

    fn untrusted(&self) -> bool {
        self.trust != Some(Trust::Identified)
    }
}

/// What [`Admission::allot`] decided for a new connection.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Allotment {
    /// A free slot.
    Admit,
    /// Admitted in the slot of this less trusted connection, to be closed now.
    Displace(crate::ConnId),
    /// Refused: every slot within this limit is held by connections it may not displace.
    Refuse(&'static str),
}

/// An IP network: an address and a prefix length (`10.0.0.0/8`, `fd00::/8`); a bare address
/// is a network of one.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

/// Why an allow-list entry does not parse.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
#[error("invalid address or network {text:?}: {reason}")]
pub struct IpNetError {
    /// The entry as given.
    pub text: String,
    /// What was wrong.
    pub reason: &'static str,
}

impl IpNet {
    /// The network `addr/prefix`; `None` if the prefix is longer than the address. An
    /// IPv4-mapped IPv6 network of at least 96 bits is its IPv4 network
    /// (`::ffff:10.0.0.0/120` is `10.0.0.0/24`).
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Self> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return None;
        }
        Some(match addr {
            IpAddr::V6(v6) if prefix >= 96 && v6.to_ipv4_mapped().is_some() => {
                Self { addr: addr.to_canonical(), prefix: prefix - 96 }
            }
            _ => Self { addr, prefix },
        })
    }

    /// Whether this entry is one address (`/32`, `/128`) rather than a network.
    pub fn is_address(&self) -> bool {
        self.prefix == if self.addr.is_ipv4() { 32 } else { 128 }
    }

    /// Whether `ip` is in this network. IPv4-mapped IPv6 addresses match their IPv4 network,
    /// and an IPv6 network holds the IPv4 addresses whose mapped form it holds.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match (self.addr, ip.to_canonical()) {
            (IpAddr::V6(_), IpAddr::V4(v4)) => IpAddr::V6(v4.to_ipv6_mapped()),
            (_, ip) => ip,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for IpNet {
    type Err = IpNetError;

    fn from_str(text: &str) -> Result<Self, IpNetError> {
        let err = |reason| IpNetError { text: text.to_string(), reason };
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr.trim().parse().map_err(|_| err("not an IPv4 or IPv6 address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p.trim().parse::<u8>().map_err(|_| err("the prefix length is not a number"))?,
        };
        Self::new(addr, prefix).ok_or_else(|| err("the prefix length is longer than the address"))
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Parses a comma-separated allow-list (`10.0.0.7, 10.1.0.0/16`); blanks are skipped.
pub fn parse_allow_list(text: &str) -> Result<Vec<IpNet>, IpNetError> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::parse).collect()
}

/// A master's admission rules for HA connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    /// The replicas' addresses or networks. Empty: every address is admitted and none is
    /// trusted (see the module docs).
    pub allow: Vec<IpNet>,
    /// Most live connections from one address (not loopback); more are refused at accept.
    pub max_connections_per_peer: usize,
    /// Most live connections in all; more are refused at accept.
    pub max_connections: usize,
    /// Most live connections not identified (strangers, and those still to be decided), in
    /// all: below `max_connections`, so the rest is kept for identified replicas.
    pub max_untrusted_connections: usize,
    /// TLS on the HA port; `None`: plain links only (`haTlsMode=off`).
    pub tls: Option<MasterTls>,
    /// `haTrustAnyReplica`: connections that would be strangers are admitted and count for
    /// SYNC waits (RocketMQ's open admission), though none is identified. Off by default.
    pub trust_any: bool,
}

impl Default for Admission {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_untrusted_connections: DEFAULT_MAX_UNTRUSTED_CONNECTIONS,
            tls: None,
            trust_any: false,
        }
    }
}

impl Admission {
    /// Only `allow` is admitted, and identified; default limits.
    pub fn allow_list(allow: Vec<IpNet>) -> Self {
        Self { allow, ..Self::default() }
    }

    /// Whether an allow-list is configured (and so whether admitted connections are trusted).
    pub fn is_restricted(&self) -> bool {
        !self.allow.is_empty()
    }

    /// Whether any connection can be identified beyond loopback: an allow-list or TLS is
    /// configured.
    pub fn can_trust(&self) -> bool {
        self.is_restricted() || self.tls.is_some()
    }

    /// Protected mode: no allow-list and no TLS, so only loopback peers are identified.
    pub fn is_protected(&self) -> bool {
        !self.can_trust()
    }

    /// Whether a plain connection from `ip` may become a replica: listed in the allow-list, or
    /// without one, loopback in protected mode, anyone under TLS `optional` or `trust_any`.
    /// `directory`: off-loopback connections of protected mode wait for their handshake to
    /// be identified by a member directory (controller mode on etcd).
    pub fn admits_plain(&self, ip: IpAddr, directory: bool) -> bool {
        if self.is_restricted() {
            return self.allow.iter().any(|net| net.contains(ip));
        }
        self.tls.is_some() || self.trust_any || directory || ip.to_canonical().is_loopback()
    }

    /// Whether a plain connection from `ip` is admitted ([`admits_plain`](Self::admits_plain)
    /// without a member directory).
    pub fn admits(&self, ip: IpAddr) -> bool {
        self.admits_plain(ip, false)
    }

    /// The trust of an admitted plain connection from `ip`: identified when the allow-list
    /// lists it or, in protected mode, on loopback; counted under `trust_any`; else a
    /// stranger.
    pub fn plain_trust(&self, ip: IpAddr) -> Trust {
        let listed = self.is_restricted() && self.allow.iter().any(|net| net.contains(ip));
        if listed || (self.is_protected() && ip.to_canonical().is_loopback()) {
            Trust::Identified
        } else if self.trust_any {
            Trust::Counted
        } else {
            Trust::Stranger
        }
    }

    /// Whether a plain connection from `ip` is trusted: identified by the allow-list or, in
    /// protected mode, as a loopback peer.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.plain_trust(ip) == Trust::Identified
    }

    /// Decides the slot of a new connection from `ip` whose trust is `trust` (`None`: still
    /// to be decided), among the `live` ones (see the module docs): `Admit`, `Displace` the
    /// least trusted connection within the limit it would exceed, or `Refuse` naming the
    /// limit.
    pub fn allot(&self, live: &[Slot], ip: IpAddr, trust: Option<Trust>) -> Allotment {
        let ip = ip.to_canonical();
        let new_untrusted = trust != Some(Trust::Identified);
        // The most trusted kind of connection the newcomer may displace.
        let may_displace = match trust {
            Some(Trust::Identified) => 4,
            Some(Trust::Counted) => 2,
            Some(Trust::Stranger) | None => 1,
        };
        let exempt = |s: &Slot| s.trust == Some(Trust::Identified) && s.ip.to_canonical().is_loopback();
        let victim = |within: &dyn Fn(&Slot) -> bool| {
            live.iter()
                .filter(|s| within(s))
                .filter_map(|s| s.rank().filter(|&r| r <= may_displace).map(|r| (r, s.since, s.conn)))
                .min()
                .map(|(_, _, conn)| conn)
        };
        let same_peer = |s: &Slot| s.ip.to_canonical() == ip && !exempt(s);
        let newcomer_exempt = trust == Some(Trust::Identified) && ip.is_loopback();
        // One displaced connection frees a slot under every later limit too: it is in the
        // table, and untrusted whenever the newcomer is.
        if !newcomer_exempt && live.iter().filter(|s| same_peer(s)).count() >= self.max_connections_per_peer {
            return victim(&same_peer)
                .map_or(Allotment::Refuse("too many HA connections from this address"), Allotment::Displace);
        }
        if new_untrusted && live.iter().filter(|s| s.untrusted()).count() >= self.max_untrusted_connections {
            return victim(&|s: &Slot| s.untrusted()).map_or(
                Allotment::Refuse("too many HA connections not identified as replicas"),
                Allotment::Displace,
            );
        }
        if live.len() >= self.max_connections {
            return victim(&|_: &Slot| true)
                .map_or(Allotment::Refuse("too many HA connections"), Allotment::Displace);
        }
        Allotment::Admit
    }

    /// Whether the allow-list names `ip` exactly (an address entry, not a network): only such
    /// a host is a replica the restart fence counts.
    pub fn names(&self, ip: IpAddr) -> bool {
        self.allow.iter().any(|net| net.is_address() && net.contains(ip))
    }

    /// Checks that a restart fence of `replicas` can lift: it counts distinct replicas named
    /// exactly, a plain one by an address entry of the allow-list (unless TLS is required), a
    /// TLS one by its replica name; a network entry admits and trusts any host on it, but a
    /// stranger there is no replica, so it never counts. On loopback, where one host runs
    /// several slaves (tests, the demo), every admitted connection counts while it is up.
    /// Refuses a fence more named replicas must lift than are named, naming a network entry
    /// if there is one.
    pub fn check_restart_fence(&self, replicas: usize) -> Result<(), CoreConfigError> {
        if replicas == 0 {
            return Ok(());
        }
        let plain = self.tls.as_ref().is_none_or(|tls| tls.mode() != TlsMode::Required);
        let entries: &[IpNet] = if plain { &self.allow } else { &[] };
        if entries.iter().any(|net| net.addr.is_loopback()) || self.is_protected() {
            // Loopback replicas (listed, or identified in protected mode) count each while
            // connected.
            return Ok(());
        }
        let mut hosts: Vec<IpAddr> = entries.iter().filter(|n| n.is_address()).map(|n| n.addr).collect();
        hosts.sort_unstable();
        hosts.dedup();
        let mut names = self.tls.as_ref().map(MasterTls::replica_names).unwrap_or_default();
        names.sort_unstable();
        names.dedup();
        let named = hosts.len() + names.len();
        if replicas <= named {
            return Ok(());
        }
        if let Some(net) = entries.iter().find(|n| !n.is_address()) {
            return Err(CoreConfigError::Invalid {
                field: "restart_fence",
                value: format!("{replicas} over the allow-list entry {net}"),
                reason: "the restart fence counts only replicas named exactly (an address entry or a TLS \
                         replica name); a network entry admits and trusts any host on it, but a stranger \
                         there is no replica and never lifts the fence: list the replicas' own addresses",
            });
        }
        Err(CoreConfigError::Invalid {
            field: "restart_fence",
            value: format!("{replicas}, but the allow-list and the TLS replica names name {named}"),
            reason: "the restart fence waits for that many distinct named replicas, more than are named: it could never lift",
        })
    }

    /// Checks the limits, naming the first that cannot work.
    pub fn validate(&self) -> Result<(), CoreConfigError> {
        for (field, value) in [
            ("admission.max_connections_per_peer", self.max_connections_per_peer),
            ("admission.max_connections", self.max_connections),
            ("admission.max_untrusted_connections", self.max_untrusted_connections),
        ] {
            if value == 0 {
                return Err(CoreConfigError::Invalid {
                    field,
                    value: value.to_string(),
                    reason: "must be at least 1",
                });
            }
        }
        if self.max_untrusted_connections >= self.max_connections {
            return Err(CoreConfigError::Invalid {
                field: "admission.max_untrusted_connections",
                value: format!(
                    "{} of max_connections {}",
                    self.max_untrusted_connections, self.max_connections
                ),
                reason: "must be below max_connections, so that strangers can never hold every slot",
            });
        }
        Ok(())
    }
}

// The admission decisions both master drivers make of their connections, as plain functions
// over an [`Admission`]: which connection is closed at accept or displaced to make room, and
// what a TLS negotiation makes of one. Both protocols admit and trust the same connections.

/// Decides a new connection from `ip` at accept, counting a refusal: closed if not admitted
/// (without TLS: not in the allow-list, or in protected mode off loopback unless a member
/// directory is to identify it, `directory`), else given a slot ([`Admission::allot`]) by its
/// `trust` (`None`: still to be decided). `Ok(None)`: a free slot; `Ok(Some(victim))`: the
/// slot of a less trusted connection, which the caller closes (counted as displaced by it);
/// `Err(why)`: refused.
pub(crate) fn refuse_at_accept(
    admission: &Admission,
    ip: IpAddr,
    trust: Option<Trust>,
    slots: &[Slot],
    directory: bool,
    refusals: &mut Refusals,
) -> Result<Option<ConnId>, &'static str> {
    if admission.tls.is_none() && !admission.admits_plain(ip, directory) {
        refusals.not_admitted += 1;
        return Err(if admission.is_protected() {
            "protected mode: without haReplicaAllowList or TLS only loopback peers are admitted"
        } else {
            "not in the replica allow-list"
        });
    }
    match admission.allot(slots, ip, trust) {
        Allotment::Admit => Ok(None),
        Allotment::Displace(victim) => Ok(Some(victim)),
        Allotment::Refuse(why) => {
            refusals.over_limit += 1;
            Err(why)
        }
    }
}

/// What a finished negotiation (TLS configured) makes of a connection from `ip`.
#[derive(Debug)]
pub(crate) enum Negotiation {
    /// Admitted; with its trust and the replica name its certificate carries.
    Admitted {
        /// What it may do.
        trust: Trust,
        /// The TLS replica name; `None` for a plain link.
        identity: Option<String>,
    },
    /// Refused (counted), for this reason.
    Refused(String),
}

/// Decides a negotiated link: a plain one is refused if TLS is required, else follows the
/// allow-list (unlisted plain links are strangers without one); a TLS one is admitted and
/// identified if its certificate names a listed replica. `None` when TLS is not configured
/// (nothing to decide). Counts refusals.
pub(crate) fn decide_link(
    admission: &Admission,
    ip: IpAddr,
    link: Link,
    refusals: &mut Refusals,
) -> Option<Negotiation> {
    let tls = admission.tls.as_ref()?;
    Some(match link {
        Link::Plain if tls.mode() == TlsMode::Required => {
            refusals.plain_refused += 1;
            Negotiation::Refused("a plain link, and TLS is required".to_string())
        }
        Link::Plain if !admission.admits(ip) => {
            refusals.not_admitted += 1;
            Negotiation::Refused("a plain link not in the replica allow-list".to_string())
        }
        Link::Plain => Negotiation::Admitted { trust: admission.plain_trust(ip), identity: None },
        Link::Tls { peer_certificates } => match tls.identify(&peer_certificates) {
            Ok(name) => Negotiation::Admitted { trust: Trust::Identified, identity: Some(name) },
            Err(e) => {
                refusals.tls_refused += 1;
                Negotiation::Refused(e.to_string())
            }
        },
        Link::TlsFailed { error } => {
            refusals.tls_refused += 1;
            Negotiation::Refused(format!("TLS handshake failed: {error}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_parse_and_match_by_prefix() {
        let net: IpNet = "10.1.0.0/16".parse().unwrap();
        assert!(net.contains(ip("10.1.255.3")));
        assert!(!net.contains(ip("10.2.0.1")));
        assert!(!net.contains(ip("::1")));
        let one: IpNet = "192.168.0.7".parse().unwrap();
        assert_eq!(one.to_string(), "192.168.0.7/32");
        assert!(one.contains(ip("::ffff:192.168.0.7")), "IPv4-mapped IPv6 matches");
        assert!(!one.contains(ip("192.168.0.8")));
        let v6: IpNet = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        let all: IpNet = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.9")));
    }

    #[test]
    fn ipv4_mapped_entries_are_their_ipv4_networks() {
        let one: IpNet = "::ffff:10.0.0.6".parse().unwrap();
        assert_eq!(one.to_string(), "10.0.0.6/32");
        assert!(one.contains(ip("10.0.0.6")) && !one.contains(ip("10.0.0.7")));
        let net: IpNet = "::ffff:10.0.0.0/120".parse().unwrap();
        assert_eq!(net.to_string(), "10.0.0.0/24");
        assert!(net.contains(ip("10.0.0.99")) && !net.contains(ip("10.0.1.1")));
        let wide: IpNet = "::ffff:0.0.0.0/64".parse().unwrap();
        assert!(wide.contains(ip("10.0.0.1")) && wide.contains(ip("::ffff:10.0.0.1")));
        assert!(!"fd00::/8".parse::<IpNet>().unwrap().contains(ip("10.0.0.1")));
        assert!(one.is_address() && !net.is_address() && "::1".parse::<IpNet>().unwrap().is_address());
    }

    #[test]
    fn bad_entries_are_named() {
        for (text, reason) in [
            ("10.0.0/8", "not an IPv4 or IPv6 address"),
            ("10.0.0.0/33", "the prefix length is longer than the address"),
            ("10.0.0.0/x", "the prefix length is not a number"),
            ("host.example", "not an IPv4 or IPv6 address"),
        ] {
            let e = text.parse::<IpNet>().unwrap_err();
            assert_eq!((e.text.as_str(), e.reason), (text, reason));
        }
        assert_eq!(parse_allow_list(" 10.0.0.1 , ,10.0.1.0/24").unwrap().len(), 2);
        assert!(parse_allow_list("10.0.0.1,nope").is_err());
    }

    #[test]
    fn only_a_configured_list_makes_connections_trusted() {
        let open = Admission { trust_any: true, ..Admission::default() };
        assert!(open.admits(ip("203.0.113.9")) && !open.trusts(ip("203.0.113.9")));
        assert_eq!(open.plain_trust(ip("203.0.113.9")), Trust::Counted);
        let listed = Admission::allow_list(vec!["127.0.0.1".parse().unwrap()]);
        assert!(listed.admits(ip("127.0.0.1")) && listed.trusts(ip("127.0.0.1")));
        assert!(!listed.admits(ip("127.0.0.5")) && !listed.trusts(ip("127.0.0.5")));
        let zero = Admission { max_connections: 0, ..Admission::default() };
        assert!(zero.validate().unwrap_err().to_string().contains("max_connections"));
    }

    #[test]
    fn protected_mode_identifies_loopback_peers_only() {
        let protected = Admission::default();
        assert!(protected.is_protected());
        for loopback in ["127.0.0.1", "127.0.0.5", "::1", "::ffff:127.0.0.1"] {
            assert!(protected.admits(ip(loopback)), "{loopback}");
            assert_eq!(protected.plain_trust(ip(loopback)), Trust::Identified, "{loopback}");
        }
        assert!(!protected.admits(ip("10.0.0.6")), "off loopback: closed at accept");
        assert!(protected.admits_plain(ip("10.0.0.6"), true), "a member directory identifies it later");
        assert_eq!(protected.plain_trust(ip("10.0.0.6")), Trust::Stranger);
        // An allow-list replaces protected mode: loopback must be listed too.
        let listed = Admission::allow_list(vec!["10.0.0.6".parse().unwrap()]);
        assert!(!listed.admits(ip("127.0.0.1")) && listed.trusts(ip("10.0.0.6")));
    }

    fn slot(conn: u64, peer: &str, trust: Option<Trust>, reported: bool, at: u64) -> Slot {
        Slot {
            conn: crate::ConnId(conn),
            ip: ip(peer),
            trust,
            reported,
            since: crate::time::Instant::ZERO + std::time::Duration::from_millis(at),
        }
    }

    #[test]
    fn strangers_never_hold_every_slot_and_a_replica_displaces_one() {
        let a = Admission {
            max_connections: 4,
            max_untrusted_connections: 2,
            max_connections_per_peer: 8,
            ..Admission::default()
        };
        let strangers =
            [slot(1, "10.0.0.1", None, false, 0), slot(2, "10.0.0.2", Some(Trust::Stranger), true, 1)];
        // Over the strangers' share, a newcomer displaces a decided stranger first, whatever its
        // age, then the oldest undecided connection.
        assert_eq!(a.allot(&strangers, ip("10.0.0.3"), None), Allotment::Displace(crate::ConnId(2)));
        let full = [
            slot(1, "10.0.0.1", None, false, 0),
            slot(2, "10.0.0.2", None, false, 1),
            slot(3, "127.0.0.1", Some(Trust::Identified), true, 2),
            slot(4, "127.0.0.1", Some(Trust::Identified), false, 3),
        ];
        // An identified newcomer displaces an undecided connection, never a reported replica.
        assert_eq!(
            a.allot(&full, ip("127.0.0.1"), Some(Trust::Identified)),
            Allotment::Displace(crate::ConnId(1))
        );
        let replicas = [
            slot(1, "127.0.0.1", Some(Trust::Identified), true, 0),
            slot(2, "127.0.0.1", Some(Trust::Identified), true, 1),
            slot(3, "127.0.0.1", Some(Trust::Identified), true, 2),
            slot(4, "127.0.0.1", Some(Trust::Identified), false, 3),
        ];
        assert_eq!(
            a.allot(&replicas, ip("127.0.0.1"), Some(Trust::Identified)),
            Allotment::Displace(crate::ConnId(4))
        );
        assert_eq!(a.allot(&replicas, ip("10.0.0.9"), None), Allotment::Refuse("too many HA connections"));
        let reported = replicas.map(|s| Slot { reported: true, ..s });
        assert_eq!(
            a.allot(&reported, ip("127.0.0.1"), Some(Trust::Identified)),
            Allotment::Refuse("too many HA connections")
        );
    }

    #[test]
    fn the_per_address_limit_spares_identified_loopback_only() {
        let a = Admission { max_connections_per_peer: 2, ..Admission::default() };
        let two = [slot(1, "127.0.0.1", None, false, 0), slot(2, "127.0.0.1", None, false, 1)];
        assert_eq!(
            a.allot(&two, ip("127.0.0.1"), None),
            Allotment::Displace(crate::ConnId(1)),
            "untrusted loopback is capped"
        );
        let replicas = [
            slot(1, "127.0.0.1", Some(Trust::Identified), true, 0),
            slot(2, "127.0.0.1", Some(Trust::Identified), true, 1),
        ];
        assert_eq!(a.allot(&replicas, ip("127.0.0.1"), Some(Trust::Identified)), Allotment::Admit);
        assert_eq!(
            a.allot(&replicas, ip("127.0.0.1"), None),
            Allotment::Admit,
            "identified loopback holds no address slot"
        );
        let remote = [
            slot(1, "10.0.0.6", Some(Trust::Identified), true, 0),
            slot(2, "10.0.0.6", Some(Trust::Identified), true, 1),
        ];
        assert_eq!(
            a.allot(&remote, ip("10.0.0.6"), Some(Trust::Identified)),
            Allotment::Refuse("too many HA connections from this address")
        );
    }

    #[test]
    fn strangers_may_take_no_more_than_their_share_of_slots() {
        let a = Admission { max_untrusted_connections: 1, max_connections: 3, ..Admission::default() };
        assert!(a.validate().is_ok());
        assert!(
            Admission { max_untrusted_connections: 3, max_connections: 3, ..a.clone() }.validate().is_err()
        );
    }
}
