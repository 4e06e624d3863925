//! Authenticated HA links: mutual TLS between logship peers, on the classic HA port.
//!
//! The classic protocol carries no identity, so logship can wrap a link in TLS with client
//! certificates. Both sides hold a certificate signed by a CA they share; the master admits a
//! TLS slave as a *trusted replica* when its certificate chains to that CA and carries a
//! subject alternative name (a DNS name or an IP address) listed among the replica names.
//!
//! **Negotiation.** The master sends nothing before the slave's first report, and a classic
//! report is an 8-byte big-endian offset. A TLS connection starts with a handshake record,
//! whose first byte is `0x16`; read as the first byte of an offset that is at least
//! `0x16 << 56` bytes, about 1.4 EiB ([`PLAIN_REPORT_LIMIT`]), far beyond any real log. So
//! the master peeks at one byte: `0x16` is TLS, anything else a classic peer. A plain report at
//! or above the limit is never a real offset and never fences a master, whatever the mode.
//!
//! Adapters only wrap streams (feature `tls`): they peek, run the handshake with `MasterTls::server_config`
//! or `SlaveTls::client_config`, and hand the outcome ([`Link`]) to the
//! [`MasterDriver`](crate::service::MasterDriver), which decides what the connection may do.

use std::fmt;
use std::str::FromStr;
#[cfg(feature = "tls")]
use std::sync::Arc;

#[cfg(feature = "tls")]
use rustls::pki_types::pem::PemObject;
#[cfg(feature = "tls")]
use rustls::pki_types::{PrivateKeyDer, ServerName};
#[cfg(feature = "tls")]
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
#[cfg(feature = "tls")]
use rustls::{ClientConfig, RootCertStore, ServerConfig};
pub use rustls_pki_types::CertificateDer;

use crate::Offset;

/// The TLS library the settings are built with (feature `tls`).
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub use rustls;

/// The first byte of a TLS handshake record (a ClientHello).
pub const TLS_HANDSHAKE_BYTE: u8 = 0x16;

/// The smallest offset whose big-endian encoding starts with [`TLS_HANDSHAKE_BYTE`]: a plain
/// report this large is a TLS ClientHello (or other stray bytes), not a real offset.
pub const PLAIN_REPORT_LIMIT: Offset = (TLS_HANDSHAKE_BYTE as Offset) << 56;

/// Whether a master accepts TLS on its HA port (`haTlsMode`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum TlsMode {
    /// Plain links only: RocketMQ's protocol, unchanged.
    #[default]
    Off,
    /// TLS and plain links: TLS slaves are trusted by certificate; plain ones follow the
    /// replica allow-list, and are strangers without one (they may replicate, never count).
    Optional,
    /// TLS links only: a plain connection is closed unread.
    Required,
}

impl TlsMode {
    /// The `haTlsMode` spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `haTlsMode` is not `off`, `optional` or `required`.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
#[error("unknown TLS mode {0:?}: expected off, optional or required")]
pub struct UnknownTlsMode(pub String);

impl FromStr for TlsMode {
    type Err = UnknownTlsMode;

    fn from_str(s: &str) -> Result<Self, UnknownTlsMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(Self::Off),
            "optional" => Ok(Self::Optional),
            "required" => Ok(Self::Required),
            _ => Err(UnknownTlsMode(s.to_string())),
        }
    }
}

/// What a connection's first byte says it speaks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// The classic protocol: the byte starts an offset.
    Plain,
    /// A TLS handshake.
    Tls,
}

impl LinkKind {
    /// Classifies a connection by its first byte (see the module docs).
    pub fn classify(first_byte: u8) -> Self {
        if first_byte == TLS_HANDSHAKE_BYTE { Self::Tls } else { Self::Plain }
    }
}

/// How a connection's negotiation ended, as an adapter reports it to the master driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Link {
    /// A classic peer: its first byte is not a TLS handshake.
    Plain,
    /// A completed TLS handshake; the client's certificate chain (end entity first) as rustls
    /// verified it against the CA.
    Tls {
        /// The chain; empty if the client sent none.
        peer_certificates: Vec<CertificateDer<'static>>,
    },
    /// The TLS handshake failed (no client certificate, another CA, a protocol error).
    TlsFailed {
        /// What rustls said.
        error: String,
    },
}

impl LinkKind {
    /// Classifies a connection by the bytes a peek returned: `None` when the stream ended
    /// before its first byte.
    pub fn from_peek(peeked: &[u8]) -> Option<Self> {
        peeked.first().map(|&byte| Self::classify(byte))
    }
}

impl Link {
    /// The link a completed handshake made: the client's certificate chain as rustls verified
    /// it (`common` is the server connection's state, as every rustls stream wrapper exposes it).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(common: &rustls::CommonState) -> Self {
        let peer_certificates = common
            .peer_certificates()
            .map(|certs| certs.iter().map(|c| c.clone().into_owned()).collect())
            .unwrap_or_default();
        Self::Tls { peer_certificates }
    }

    /// The link a failed handshake left.
    pub fn failed(error: &dyn fmt::Display) -> Self {
        Self::TlsFailed { error: error.to_string() }
    }
}

/// Why TLS settings cannot be built.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM input holds no certificate.
    #[error("{what}: no PEM certificate found")]
    NoCertificate {
        /// Which input (`certificate`, `CA`).
        what: &'static str,
    },
    /// A PEM input does not parse.
    #[error("{what}: unreadable PEM: {detail}")]
    Pem {
        /// Which input.
        what: &'static str,
        /// The parser's words.
        detail: String,
    },
    /// A CA certificate is not usable as a trust anchor.
    #[error("CA certificate not usable: {0}")]
    BadCa(String),
    /// A replica or server name is neither a DNS name nor an IP address.
    #[error("{0:?} is not a DNS name or an IP address")]
    BadName(String),
    /// `MasterTls` was asked for with [`TlsMode::Off`] (which means no TLS settings at all).
    #[error("TLS mode off: a master without TLS has no TLS settings")]
    ModeOff,
    /// A master with TLS needs at least one replica name to trust.
    #[error("no replica names: a TLS master trusts only certificates naming a listed replica")]
    NoReplicaNames,
    /// rustls refused the certificate, key or CA.
    #[error("TLS setup: {0}")]
    Setup(String),
}

/// PEM inputs of one side of a link: its own certificate chain and key, and the CA that signs
/// the other side's certificate.
#[derive(Copy, Clone)]
pub struct TlsPem<'a> {
    /// This side's certificate chain, end entity first.
    pub cert_chain: &'a [u8],
    /// This side's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: &'a [u8],
    /// The CA certificate(s) the peer's certificate must chain to.
    pub ca: &'a [u8],
}

impl fmt::Debug for TlsPem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsPem").finish_non_exhaustive()
    }
}

#[cfg(feature = "tls")]
struct Parsed {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    roots: Arc<RootCertStore>,
}

#[cfg(feature = "tls")]
fn certificates(pem: &[u8], what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem { what, detail: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { what });
    }
    Ok(certs)
}

#[cfg(feature = "tls")]
fn parse(pem: TlsPem<'_>) -> Result<Parsed, TlsError> {
    let chain = certificates(pem.cert_chain, "certificate")?;
    let key = PrivateKeyDer::from_pem_slice(pem.key)
        .map_err(|e| TlsError::Pem { what: "key", detail: e.to_string() })?;
    let mut roots = RootCertStore::empty();
    for ca in certificates(pem.ca, "CA")? {
        roots.add(ca).map_err(|e| TlsError::BadCa(e.to_string()))?;
    }
    Ok(Parsed { chain, key, roots: Arc::new(roots) })
}

#[cfg(feature = "tls")]
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

#[cfg(feature = "tls")]
fn name(text: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(text.trim().to_string()).map_err(|_| TlsError::BadName(text.to_string()))
}

/// A master's TLS settings: the mode, its server configuration (certificate, key, and the CA
/// every client certificate must chain to; a client certificate is mandatory), and the
/// replica names it trusts.
#[derive(Clone)]
#[cfg(feature = "tls")]
pub struct MasterTls {
    mode: TlsMode,
    replicas: Vec<ServerName<'static>>,
    server: Arc<ServerConfig>,
}

#[cfg(feature = "tls")]
impl MasterTls {
    /// TLS in `mode` (`Optional` or `Required`; `Off` is no `MasterTls` at all) with `pem`,
    /// trusting client certificates that name one of `replicas` (DNS names or IP addresses).
    pub fn new(mode: TlsMode, pem: TlsPem<'_>, replicas: &[String]) -> Result<Self, TlsError> {
        if mode == TlsMode::Off {
            return Err(TlsError::ModeOff);
        }
        let replicas = replicas.iter().map(|r| name(r)).collect::<Result<Vec<_>, _>>()?;
        if replicas.is_empty() {
            return Err(TlsError::NoReplicaNames);
        }
        let parsed = parse(pem)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(parsed.roots, provider())
            .build()
            .map_err(|e| TlsError::Setup(e.to_string()))?;
        let server = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Setup(e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(parsed.chain, parsed.key)
            .map_err(|e| TlsError::Setup(e.to_string()))?;
        Ok(Self { mode, replicas, server: Arc::new(server) })
    }

    /// `Optional` or `Required`.
    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// The configuration an adapter's TLS acceptor runs the handshake with.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.server.clone()
    }

    /// The replica names trusted, as configured.
    pub fn replica_names(&self) -> Vec<String> {
        self.replicas.iter().map(|n| n.to_str().into_owned()).collect()
    }

    /// The replica a verified client chain names: the first listed name its end-entity
    /// certificate is valid for. The chain must come from a handshake with
    /// [`server_config`](Self::server_config), which checked it against the CA.
    pub fn identify(&self, peer_certificates: &[CertificateDer<'_>]) -> Result<String, TlsRefusal> {
        let end_entity = peer_certificates.first().ok_or(TlsRefusal::NoCertificate)?;
        let parsed = ParsedCertificate::try_from(end_entity)
            .map_err(|e| TlsRefusal::Handshake(format!("unreadable client certificate: {e}")))?;
        self.replicas
            .iter()
            .find(|n| rustls::client::verify_server_name(&parsed, n).is_ok())
            .map(|n| n.to_str().into_owned())
            .ok_or(TlsRefusal::NotAReplica)
    }
}

#[cfg(feature = "tls")]
impl PartialEq for MasterTls {
    fn eq(&self, other: &Self) -> bool {
        self.mode == other.mode && self.replicas == other.replicas && Arc::ptr_eq(&self.server, &other.server)
    }
}

#[cfg(feature = "tls")]
impl Eq for MasterTls {}

#[cfg(feature = "tls")]
impl fmt::Debug for MasterTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MasterTls")
            .field("mode", &self.mode)
            .field("replicas", &self.replica_names())
            .finish_non_exhaustive()
    }
}

/// A master's TLS settings. Without the `tls` feature none can be built (there is no rustls),
/// so a master's `admission.tls` is always `None` and every link is plain.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg(not(feature = "tls"))]
pub enum MasterTls {}

#[cfg(not(feature = "tls"))]
impl MasterTls {
    /// `Optional` or `Required`.
    pub fn mode(&self) -> TlsMode {
        match *self {}
    }

    /// The replica names trusted, as configured.
    pub fn replica_names(&self) -> Vec<String> {
        match *self {}
    }

    /// The replica a verified client chain names.
    pub fn identify(&self, _peer_certificates: &[CertificateDer<'_>]) -> Result<String, TlsRefusal> {
        match *self {}
    }
}

/// A slave's TLS settings. Without the `tls` feature none can be built, so a slave's `tls` is
/// always `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg(not(feature = "tls"))]
pub enum SlaveTls {}

/// Why a master refused a TLS connection.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsRefusal {
    /// The handshake failed: no client certificate, one from another CA, a protocol error.
    #[error("TLS handshake failed: {0}")]
    Handshake(String),
    /// The handshake completed without a client certificate.
    #[error("no client certificate")]
    NoCertificate,
    /// The certificate is valid but names none of the replica names.
    #[error("the client certificate names no listed replica")]
    NotAReplica,
}

/// A slave's TLS settings: its client certificate and key, the CA the master's certificate
/// must chain to, and the name the master's certificate must carry.
#[derive(Clone)]
#[cfg(feature = "tls")]
pub struct SlaveTls {
    client: Arc<ClientConfig>,
    server_name: ServerName<'static>,
}

#[cfg(feature = "tls")]
impl SlaveTls {
    /// TLS to a master whose certificate names `server_name` (a DNS name or an IP address).
    pub fn new(pem: TlsPem<'_>, server_name: &str) -> Result<Self, TlsError> {
        let server_name = name(server_name)?;
        let parsed = parse(pem)?;
        let client = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Setup(e.to_string()))?
            .with_root_certificates(parsed.roots)
            .with_client_auth_cert(parsed.chain, parsed.key)
            .map_err(|e| TlsError::Setup(e.to_string()))?;
        Ok(Self { client: Arc::new(client), server_name })
    }

    /// The same certificate, key and CA, to a master whose certificate names `server_name`
    /// (a controller-mode slave follows masters at changing addresses).
    pub fn with_server_name(&self, server_name: &str) -> Result<Self, TlsError> {
        Ok(Self { client: self.client.clone(), server_name: name(server_name)? })
    }

    /// The configuration an adapter's TLS connector runs the handshake with.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        self.client.clone()
    }

    /// The name the master's certificate must carry.
    pub fn server_name(&self) -> ServerName<'static> {
        self.server_name.clone()
    }
}

#[cfg(feature = "tls")]
impl PartialEq for SlaveTls {
    fn eq(&self, other: &Self) -> bool {
        self.server_name == other.server_name && Arc::ptr_eq(&self.client, &other.client)
    }
}

#[cfg(feature = "tls")]
impl Eq for SlaveTls {}

#[cfg(feature = "tls")]
impl fmt::Debug for SlaveTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlaveTls").field("server_name", &self.server_name.to_str()).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_hello_is_told_from_any_real_offset() {
        assert_eq!(LinkKind::classify(0x16), LinkKind::Tls);
        assert_eq!(LinkKind::classify(0), LinkKind::Plain);
        // An offset whose first byte is 0x16 is at least 1.4 EiB.
        assert_eq!(PLAIN_REPORT_LIMIT, 0x1600_0000_0000_0000);
        const { assert!(PLAIN_REPORT_LIMIT > crate::config::DEFAULT_MAX_FIRST_OFFSET) };
        let below = (PLAIN_REPORT_LIMIT - 1).to_be_bytes()[0];
        assert_eq!(LinkKind::classify(below), LinkKind::Plain);
    }

    #[test]
    fn modes_parse() {
        assert_eq!("Optional".parse::<TlsMode>(), Ok(TlsMode::Optional));
        assert_eq!(" required ".parse::<TlsMode>(), Ok(TlsMode::Required));
        assert_eq!("off".parse::<TlsMode>(), Ok(TlsMode::Off));
        assert!("on".parse::<TlsMode>().is_err());
    }

    #[test]
    #[cfg(feature = "tls")]
    fn bad_pem_and_names_are_named() {
        let pem = TlsPem { cert_chain: b"nothing", key: b"", ca: b"" };
        let names = ["replica-a".to_string()];
        assert_eq!(
            MasterTls::new(TlsMode::Required, pem, &names).unwrap_err(),
            TlsError::NoCertificate { what: "certificate" }
        );
        assert_eq!(MasterTls::new(TlsMode::Required, pem, &[]).unwrap_err(), TlsError::NoReplicaNames);
        assert_eq!(MasterTls::new(TlsMode::Off, pem, &names).unwrap_err(), TlsError::ModeOff);
        assert_eq!(
            MasterTls::new(TlsMode::Required, pem, &["not a name!".to_string()]).unwrap_err(),
            TlsError::BadName("not a name!".into())
        );
    }
}
