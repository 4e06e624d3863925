//! Which connections a master admits as replicas, and which it trusts.
//!
//! The classic HA protocol carries no identity: a connection is an address and the 8-byte
//! reports it sends. So admission is by address, checked at accept before anything is read or
//! sent, which keeps the wire format (and Java peers) unchanged:
//!
//! - **Open** (no allow-list, RocketMQ's behaviour): every connection is admitted and counts
//!   for SYNC waits, but none is *trusted*. A report past the master's end is refused with
//!   `SlaveAhead`, logged at WARN and counted; it never fences the master.
//! - **Allow-list**: only connections from the listed addresses or networks are admitted; any
//!   other is closed at once, unread. Admitted connections are trusted: one reporting past the
//!   master's end, or off a record boundary, fences the master. Only hosts an address entry
//!   names lift the restart fence: a network entry admits strangers too, and a stranger is no
//!   replica ([`Admission::check_restart_fence`]).
//!
//! - **TLS** ([`MasterTls`], `haTlsMode` `optional` or `required`): a slave that opens with a
//!   TLS handshake and presents a client certificate from the configured CA naming a listed
//!   replica is admitted and trusted, from any address; the allow-list then applies to plain
//!   connections only (`optional`), or plain connections are closed unread (`required`). See
//!   [`crate::service::tls`].
//!
//! Connection limits apply in every mode, at accept, before any byte is read.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::config::CoreConfigError;
use crate::service::tls::{MasterTls, TlsMode};

/// logship's default cap on live HA connections from one address.
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 8;
/// logship's default cap on live HA connections in all.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

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
    /// TLS on the HA port; `None`: plain links only (`haTlsMode=off`).
    pub tls: Option<MasterTls>,
}

impl Default for Admission {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            tls: None,
        }
    }
}

impl Admission {
    /// Only `allow` is admitted, and trusted; default limits.
    pub fn allow_list(allow: Vec<IpNet>) -> Self {
        Self { allow, ..Self::default() }
    }

    /// Whether an allow-list is configured (and so whether admitted connections are trusted).
    pub fn is_restricted(&self) -> bool {
        !self.allow.is_empty()
    }

    /// Whether any connection can be trusted: an allow-list or TLS is configured.
    pub fn can_trust(&self) -> bool {
        self.is_restricted() || self.tls.is_some()
    }

    /// Whether a plain connection from `ip` may become a replica.
    pub fn admits(&self, ip: IpAddr) -> bool {
        self.allow.is_empty() || self.allow.iter().any(|net| net.contains(ip))
    }

    /// Whether a plain connection from `ip` is trusted: listed in a configured allow-list.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.is_restricted() && self.admits(ip)
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
        if entries.iter().any(|net| net.addr.is_loopback()) {
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
        ] {
            if value == 0 {
                return Err(CoreConfigError::Invalid {
                    field,
                    value: value.to_string(),
                    reason: "must be at least 1",
                });
            }
        }
        Ok(())
    }
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
        let open = Admission::default();
        assert!(open.admits(ip("203.0.113.9")) && !open.trusts(ip("127.0.0.1")));
        let listed = Admission::allow_list(vec!["127.0.0.1".parse().unwrap()]);
        assert!(listed.admits(ip("127.0.0.1")) && listed.trusts(ip("127.0.0.1")));
        assert!(!listed.admits(ip("127.0.0.5")) && !listed.trusts(ip("127.0.0.5")));
        let zero = Admission { max_connections: 0, ..Admission::default() };
        assert!(zero.validate().unwrap_err().to_string().contains("max_connections"));
    }
}
