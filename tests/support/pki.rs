//! Test certificates made with rcgen: a CA, and leaf certificates it signs for the names given.
#![allow(dead_code, unreachable_pub)]

use logship_core::service::tls::{MasterTls, SlaveTls, TlsMode, TlsPem};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

/// A certificate authority.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A leaf certificate and its key, PEM.
pub struct Identity {
    pub cert: String,
    pub key: String,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        Self { cert, key }
    }

    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A certificate for `names` (DNS names or IP addresses, as subject alternative names),
    /// good for both ends of a link.
    pub fn issue(&self, names: &[&str]) -> Identity {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or("nobody"));
        params.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        Identity { cert: cert.pem(), key: key.serialize_pem() }
    }
}

impl Identity {
    pub fn pem<'a>(&'a self, ca: &'a str) -> TlsPem<'a> {
        TlsPem { cert_chain: self.cert.as_bytes(), key: self.key.as_bytes(), ca: ca.as_bytes() }
    }
}

/// The name every test master's certificate carries.
pub const MASTER_NAME: &str = "master.logship.test";

/// A master's TLS settings in `mode`, trusting `replicas`.
pub fn master_tls(ca: &Ca, mode: TlsMode, replicas: &[&str]) -> MasterTls {
    let id = ca.issue(&[MASTER_NAME]);
    let names: Vec<String> = replicas.iter().map(|r| r.to_string()).collect();
    MasterTls::new(mode, id.pem(&ca.pem()), &names).unwrap()
}

/// A slave's TLS settings: a certificate for `name` from `issuer`, trusting `ca` for the master.
pub fn slave_tls(issuer: &Ca, name: &str, ca: &Ca) -> SlaveTls {
    let id = issuer.issue(&[name]);
    SlaveTls::new(id.pem(&ca.pem()), MASTER_NAME).unwrap()
}
