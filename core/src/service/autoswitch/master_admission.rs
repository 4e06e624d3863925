//! The admission decisions of a master service's connections, as plain functions over an
//! [`Admission`]: which connection is closed at accept or displaced to make room, and what a
//! TLS negotiation makes of one. Both drivers call them, so both protocols admit and trust the
//! same connections (see [`MasterDriver::accept`](crate::service::MasterDriver::accept) and
//! [`MasterDriver::negotiated`](crate::service::MasterDriver::negotiated)).

use std::net::IpAddr;

use crate::ConnId;
use crate::service::admission::{Allotment, Slot, Trust};
use crate::service::tls::{Link, TlsMode};
use crate::service::{Admission, Refusals};

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
