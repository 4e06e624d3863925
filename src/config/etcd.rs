//! The failover keys' checks: etcd endpoints, lease timings, and the TLS and credential files.

use super::keys::{BROKER, declare_keys};
use super::*;

/// The most bytes a PEM file of the etcd TLS keys may hold.
const MAX_PEM_FILE_BYTES: u64 = 1 << 20;

/// The etcd TLS and authentication keys, as given (paths and names), before their files are
/// read.
#[derive(Default)]
pub(super) struct EtcdSecurityKeys {
    ca: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    server_name: Option<String>,
    user: Option<String>,
    password_file: Option<String>,
}

impl EtcdSecurityKeys {
    /// Parses `key` if it is one of these; `false` if it is not.
    pub(super) fn set(&mut self, key: &str, v: &str) -> Result<bool, BrokerConfigError> {
        set_etcd_security(self, key, v)
    }

    /// Reads and checks the files: the TLS settings (which need `https://` endpoints, and the
    /// reverse), and the credentials (a user needs a password file, and the reverse). Warnings
    /// say when etcd is reached without credentials, or with a password in clear.
    pub(super) fn build(
        self,
        etcd: &mut EtcdKeys,
        warnings: &mut Vec<String>,
    ) -> Result<(), BrokerConfigError> {
        let conflict =
            |keys: String, reason: &str| BrokerConfigError::Conflict { keys, reason: reason.into() };
        let https = etcd.endpoints.iter().filter(|e| e.starts_with("https://")).count();
        let tls_keys =
            self.ca.is_some() || self.cert.is_some() || self.key.is_some() || self.server_name.is_some();
        if tls_keys && https != etcd.endpoints.len() {
            return Err(conflict(
                format!("etcdEndpoints={}", etcd.endpoints.join(",")),
                "the etcdTls* keys are set: every etcd endpoint must be an https:// URL",
            ));
        }
        if https > 0 && self.ca.is_none() {
            return Err(conflict(
                format!("etcdEndpoints={} etcdTlsCaPath=(unset)", etcd.endpoints.join(",")),
                "https:// endpoints need etcdTlsCaPath: the PEM file of the CA that signed etcd's certificate",
            ));
        }
        if self.cert.is_some() != self.key.is_some() {
            return Err(conflict(
                format!(
                    "etcdTlsCertPath={} etcdTlsKeyPath={}",
                    self.cert.as_deref().unwrap_or("(unset)"),
                    self.key.as_deref().unwrap_or("(unset)")
                ),
                "a client certificate needs both its certificate chain and its private key",
            ));
        }
        if let Some(ca) = &self.ca {
            let ca_pem = pem_file("etcdTlsCaPath", ca, PemKind::Certificates)?;
            let identity = match (&self.cert, &self.key) {
                (Some(cert), Some(key)) => Some((
                    pem_file("etcdTlsCertPath", cert, PemKind::Certificates)?,
                    pem_file("etcdTlsKeyPath", key, PemKind::PrivateKey)?,
                )),
                _ => None,
            };
            etcd.tls = Some(EtcdTlsKeys { ca_pem, identity, server_name: self.server_name });
        }
        match (self.user, self.password_file) {
            (None, None) => {}
            (Some(user), Some(file)) => {
                let text = read_secret_file(Path::new(&file)).map_err(|reason| {
                    BrokerConfigError::Invalid { key: "etcdPasswordFile".into(), value: file.clone(), reason }
                })?;
                let password =
                    text.strip_suffix('\n').map(|p| p.strip_suffix('\r').unwrap_or(p)).unwrap_or(&text);
                if password.is_empty() {
                    return Err(BrokerConfigError::Invalid {
                        key: "etcdPasswordFile".into(),
                        value: file,
                        reason: "the password file is empty: write etcdUser's password into it".into(),
                    });
                }
                etcd.credentials = Some(EtcdCredentialKeys { user, password: password.to_string() });
            }
            (user, file) => {
                return Err(conflict(
                    format!(
                        "etcdUser={} etcdPasswordFile={}",
                        user.as_deref().unwrap_or("(unset)"),
                        file.as_deref().unwrap_or("(unset)")
                    ),
                    "etcd's authentication needs both a user and the file holding its password",
                ));
            }
        }
        let client_certificate = etcd.tls.as_ref().is_some_and(|t| t.identity.is_some());
        if etcd.credentials.is_none() && !client_certificate {
            warnings.push(
                "etcd is reached without credentials (no etcdUser, no etcdTlsCertPath): anybody who reaches \
                 etcd can rewrite the group record and decide who is master; enable etcd's authentication \
                 or client certificates and set them here"
                    .to_string(),
            );
        }
        if etcd.credentials.is_some() && etcd.tls.is_none() {
            warnings.push(
                "etcdUser over http:// endpoints: the password and the token travel in clear; use https:// \
                 endpoints with etcdTlsCaPath"
                    .to_string(),
            );
        }
        Ok(())
    }
}

/// What a PEM file of the etcd TLS keys must hold.
#[derive(Copy, Clone)]
enum PemKind {
    Certificates,
    PrivateKey,
}

/// Reads a PEM file (at most 1 MiB) and checks it holds what `kind` says.
fn pem_file(key: &str, path: &str, kind: PemKind) -> Result<Vec<u8>, BrokerConfigError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let invalid =
        |reason: String| BrokerConfigError::Invalid { key: key.to_string(), value: path.to_string(), reason };
    let bytes = read_capped(Path::new(path), MAX_PEM_FILE_BYTES).map_err(|e| match e {
        CappedReadError::TooLarge => invalid("the file is larger than 1 MiB".into()),
        CappedReadError::Io(e) => invalid(format!("cannot read the file: {e}")),
    })?;
    match kind {
        PemKind::Certificates => {
            let certs = CertificateDer::pem_slice_iter(&bytes).collect::<Result<Vec<_>, _>>();
            if !certs.is_ok_and(|c| !c.is_empty()) {
                return Err(invalid("expected PEM certificates (-----BEGIN CERTIFICATE-----)".into()));
            }
        }
        PemKind::PrivateKey => {
            if PrivateKeyDer::from_pem_slice(&bytes).is_err() {
                return Err(invalid("expected a PEM private key (PKCS#8, PKCS#1 or SEC1)".into()));
            }
        }
    }
    Ok(bytes)
}

/// `etcdEndpoints`: comma-separated `http://host:port` URLs.
pub(super) fn etcd_endpoints(key: &str, v: &str) -> Result<Vec<String>, BrokerConfigError> {
    let endpoints: Vec<String> =
        v.split(',').map(str::trim).filter(|e| !e.is_empty()).map(String::from).collect();
    for e in &endpoints {
        let rest = e.strip_prefix("http://").or_else(|| e.strip_prefix("https://"));
        if rest.is_none_or(|r| r.is_empty() || r.contains('/')) {
            return Err(invalid(key, v, "comma-separated etcd client URLs such as http://127.0.0.1:2379"));
        }
    }
    Ok(endpoints)
}

/// The failover keys against each other and the build: etcd support is the crate feature
/// `etcd`, and the lease settings must be able to fence.
pub(super) fn check_etcd(etcd: &EtcdKeys) -> Result<(), BrokerConfigError> {
    if !cfg!(feature = "etcd") {
        return Err(BrokerConfigError::Unsupported {
            origin: "config".into(),
            key: "etcdEndpoints".into(),
            value: etcd.endpoints.join(","),
            reason: "this logship was built without the `etcd` feature: rebuild with \
                     `cargo build --release --features etcd` (needs protoc) for automatic failover"
                .into(),
        });
    }
    let prefix_ok = etcd.key_prefix.strip_prefix('/').is_some_and(|p| {
        p.split('/').all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_graphic()))
    });
    if !prefix_ok {
        return Err(invalid(
            "etcdKeyPrefix",
            &etcd.key_prefix,
            "a key path such as /logship: starts with `/`, printable ASCII, no empty part",
        ));
    }
    let lease = logship_core::service::coordinator::LeaseConfig {
        ttl: etcd.lease_ttl,
        margin: etcd.lease_margin,
        renew_interval: etcd.lease_renew_interval,
    };
    lease.validate().map_err(|e| BrokerConfigError::Conflict {
        keys: format!(
            "etcdLeaseTtlMs={} etcdLeaseMarginMs={} etcdLeaseRenewIntervalMs={}",
            etcd.lease_ttl.as_millis(),
            etcd.lease_margin.as_millis(),
            etcd.lease_renew_interval.as_millis()
        ),
        reason: e.to_string(),
    })
}

declare_keys! {
    fn set_etcd_security(e: &mut EtcdSecurityKeys; key, v);
    pub(super) const ETCD_SECURITY_KEYS = "etcd TLS and authentication";
    "etcdTlsCaPath", BROKER, Note "—",
        "failover: PEM file of the CA(s) etcd's certificate must chain to; required with `https://` endpoints, and TLS keys need `https://` endpoints (see [etcd](security.md#etcd))"
        => e.ca = (!v.is_empty()).then(|| v.to_string());
    "etcdTlsCertPath", BROKER, Note "—",
        "failover: PEM client certificate chain and private key (PKCS#8, PKCS#1 or SEC1) presented to an etcd run with `--client-cert-auth`; both or neither"
        => e.cert = (!v.is_empty()).then(|| v.to_string());
    "etcdTlsKeyPath", BROKER, Note "—",
        "failover: PEM client certificate chain and private key (PKCS#8, PKCS#1 or SEC1) presented to an etcd run with `--client-cert-auth`; both or neither"
        => e.key = (!v.is_empty()).then(|| v.to_string());
    "etcdTlsServerName", BROKER, Note "each endpoint's host",
        "failover: the name (DNS or IP) etcd's certificate must carry"
        => e.server_name = (!v.is_empty()).then(|| v.to_string());
    "etcdUser", BROKER, Note "—",
        "failover: etcd's authentication (`etcdctl auth enable`): the user, and a file holding its password (its trailing line break dropped; at most 64 KiB); both or neither. Without TLS the password travels in clear (warned at start)"
        => e.user = (!v.is_empty()).then(|| v.to_string());
    "etcdPasswordFile", BROKER, Note "—",
        "failover: etcd's authentication (`etcdctl auth enable`): the user, and a file holding its password (its trailing line break dropped; at most 64 KiB); both or neither. Without TLS the password travels in clear (warned at start)"
        => e.password_file = (!v.is_empty()).then(|| v.to_string());
}
