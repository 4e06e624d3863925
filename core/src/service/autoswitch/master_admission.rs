//! The admission decisions of a master service's connections, as plain functions over an
//! [`Admission`]: which connection is closed at accept, and what a TLS negotiation makes of
//! one. The AutoSwitch driver calls them; they follow the classic driver's rules exactly (see
//! [`MasterDriver::accept`](crate::service::MasterDriver::accept) and
//! [`MasterDriver::negotiated`](crate::service::MasterDriver::negotiated)), so both protocols
//! admit and trust the same connections.

use std::net::IpAddr;

use crate::service::tls::{Link, TlsMode};
use crate::service::{Admission, Refusals};

/// Why a connection is closed at accept, if it is, counting the refusal: not in the
/// allow-list (without TLS; with it, the list waits for the negotiation), or over a connection
/// limit (the per-address limit does not apply to loopback). `from_peer` is the number of live
/// connections from `ip`, `total` of all live connections.
pub(crate) fn refuse_at_accept(
    admission: &Admission,
    ip: IpAddr,
    from_peer: usize,
    total: usize,
    refusals: &mut Refusals,
) -> Option<&'static str> {
    if admission.tls.is_none() && !admission.admits(ip) {
        refusals.not_admitted += 1;
        Some("not in the replica allow-list")
    } else if !ip.is_loopback() && from_peer >= admission.max_connections_per_peer {
        refusals.over_limit += 1;
        Some("too many HA connections from this address")
    } else if total >= admission.max_connections {
        refusals.over_limit += 1;
        Some("too many HA connections")
    } else {
        None
    }
}

/// What a finished negotiation (TLS configured) makes of a connection from `ip`.
#[derive(Debug)]
pub(crate) enum Negotiation {
    /// Admitted; trusted or not, with the replica name its certificate carries.
    Admitted {
        /// Whether its reports are trusted.
        trusted: bool,
        /// The TLS replica name; `None` for a plain link.
        identity: Option<String>,
    },
    /// Refused (counted), for this reason.
    Refused(String),
}

/// Decides a negotiated link: a plain one is refused if TLS is required, else follows the
/// allow-list; a TLS one is admitted and trusted if its certificate names a listed replica.
/// `None` when TLS is not configured (nothing to decide). Counts refusals.
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
        Link::Plain => Negotiation::Admitted { trusted: admission.trusts(ip), identity: None },
        Link::Tls { peer_certificates } => match tls.identify(&peer_certificates) {
            Ok(name) => Negotiation::Admitted { trusted: true, identity: Some(name) },
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
