//! `logship master` and `logship slave`: a broker process. Opens the store, starts the HA
//! service and the HTTP API, and on SIGINT or SIGTERM stops accepting, lets in-flight requests
//! finish for up to `shutdownDrainTimeout`, closes what is left, flushes and closes the store.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use logship_core::BrokerRole;
use logship_store::{CommitLog, RecoveryKind, StoreError};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower_service::Service;
use tracing::{debug, info, warn};

use crate::broker::{
    Broker, InFlight, RemotingStatus, ReplicationHandle, feed_retention_floor, total_memory,
};
use crate::config::{BrokerSettings, HttpSettings};
use crate::http::router;
use crate::metrics::Metrics;

/// What an operator can set to get past a store that does not open.
fn open_hint(e: &StoreError) -> &'static str {
    match e {
        StoreError::ConsumeQueueCorrupt { .. } => {
            "; set rebuildConsumeQueues=true (broker.conf or --set) to rebuild the consume queues from the commit log"
        }
        StoreError::EpochFileMissing { .. } => {
            "; to refetch everything from the master, stop the broker, move storePathRootDir aside and start \
             it again (the procedure is in docs/controller.md, Epochs in controller mode); to take a log from the classic mode \
             as it is, set adoptLogWithoutEpochs to the end offset named above (broker.conf or --set)"
        }
        StoreError::EpochFileCorrupt { .. } => {
            "; to refetch everything from the master, stop the broker, move storePathRootDir aside and start \
             it again (the procedure is in docs/controller.md, Epochs in controller mode)"
        }
        StoreError::Locked { .. } => {
            "; another broker runs on this store: stop it, or give this one its own storePathRootDir"
        }
        StoreError::Io { .. } => {
            "; storePathRootDir must be a directory this user can create and write (broker.conf, --set or \
             --store)"
        }
        StoreError::Corrupt { .. } | StoreError::MissingSegments { .. } => {
            "; set truncateOnCorruption=true (broker.conf or --set) to accept the loss: the log is cut at the damage, discarding what follows it"
        }
        _ => "",
    }
}

/// Opens the store (recovering it if needed) off the async threads.
pub async fn open_store(s: &BrokerSettings) -> anyhow::Result<Arc<CommitLog>> {
    let root = s.store_path_root_dir.clone();
    let config = s.store_config();
    let shown = root.display().to_string();
    let store = tokio::task::spawn_blocking(move || CommitLog::open(&root, config)).await?;
    let store = match store {
        Ok(store) => store,
        Err(e) => {
            let hint = open_hint(&e);
            return Err(anyhow::Error::new(e)
                .context(format!("cannot open the store at storePathRootDir={shown}{hint}")));
        }
    };
    Ok(Arc::new(store))
}

/// Runs a broker until SIGINT or SIGTERM.
pub async fn run(settings: BrokerSettings) -> anyhow::Result<()> {
    let store = open_store(&settings).await?;
    let start_offset = store.max_offset();
    let roles = settings.controller.as_ref().map(|c| crate::roles::Roles::new(c.broker_id));
    let node = match settings.broker_role {
        // Controller mode: no HA role until an admin call (RocketMQ: the controller) gives one.
        _ if roles.is_some() => ReplicationHandle::Unassigned,
        // No HA link until a NameServer names the master (`remoting::follow_named_master`).
        BrokerRole::Slave if settings.learns_master_from_name_server() => ReplicationHandle::Unassigned,
        BrokerRole::Slave => {
            let slave = logship_tokio::spawn_slave(settings.slave_service_config(), store.clone()).await?;
            ReplicationHandle::Slave(slave)
        }
        _ => {
            let ha = settings.ha_addr();
            let mut config = settings.master_service_config();
            let fenced = restart_fence_at_start(&settings, store.recovery_report().kind)?;
            config.restart_fence = fenced;
            let master = logship_tokio::spawn_master(config, store.clone(), ha).await.with_context(|| {
                format!(
                    "cannot start the HA service on {ha} (haListenAddress, default listenAddress or \
                         brokerIP1, and haListenPort)"
                )
            })?;
            tokio::spawn(feed_retention_floor(master.clone(), store.clone()));
            if fenced > 0 {
                let root = settings.store_path_root_dir.clone();
                tokio::spawn(lift_restart_fence_marker(master.clone(), root));
            }
            ReplicationHandle::Master(master)
        }
    };
    let http_addr = settings.http_addr();
    let listener = tokio::net::TcpListener::bind(http_addr).await.with_context(|| {
        format!(
            "cannot listen on {http_addr} (httpListenAddress, default listenAddress or brokerIP1, and \
             httpListenPort, default listenPort + 2)"
        )
    })?;
    let http_addr = listener.local_addr().unwrap_or(http_addr);
    let coordination = failover_coordination(&settings);
    let broker = Arc::new(Broker {
        node: std::sync::Mutex::new(node),
        roles,
        store: store.clone(),
        metrics: Metrics::for_broker(&settings),
        start_offset,
        total_memory: total_memory(),
        in_flight: InFlight::new(settings.http.max_in_flight_bytes, settings.http.max_in_flight_bytes_per_ip),
        coordination,
        settings,
        remoting: std::sync::OnceLock::new(),
    });
    let role = if broker.roles.is_some() {
        "NONE (controller mode)"
    } else {
        broker.settings.broker_role.rocketmq_name()
    };
    info!(
        role,
        http = %http_addr,
        ha = %match broker.node() { ReplicationHandle::Master(m) => m.local_addr().to_string(), _ => "-".into() },
        store = %broker.settings.store_path_root_dir.display(),
        min_offset = store.min_offset(),
        max_offset = start_offset,
        http_auth = broker.settings.http.auth_token.is_some(),
        https = broker.settings.http.tls_cert_file.is_some(),
        http_client_certs = broker.settings.http.tls_client_ca_file.is_some(),
        "logship ready"
    );
    let (stop, stopped) = watch::channel(false);
    let remoting = crate::remoting::start(broker.clone(), store.clone(), stopped.clone()).await?;
    let _ = broker.remoting.set(remoting.state.clone() as Arc<dyn RemotingStatus>);
    info!(
        remoting = %remoting.state.addrs.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
        namesrv = %broker.settings.remoting.namesrv_addr.join(";"),
        "remoting ready"
    );
    let tls = tls_acceptor(&broker.settings.http)?;
    let failover = start_failover(&broker, http_addr);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    });
    let mut http_stopped = stopped.clone();
    let http_stop = async move {
        let _ = http_stopped.wait_for(|s| *s).await;
    };
    serve_http(listener, router(broker.clone()), &broker.settings.http, tls, http_stop).await;
    remoting.shutdown().await;
    if let Some((stop, task)) = failover {
        // Steps down and revokes the lease, so the group elects at once.
        let _ = stop.send(true);
        if tokio::time::timeout(Duration::from_secs(5), task).await.is_err() {
            warn!("the etcd coordinator did not stop within 5 s");
        }
    }
    info!("HTTP closed; stopping replication");
    // A role change in progress finishes first; none starts after.
    let _frozen = match &broker.roles {
        Some(roles) => Some(roles.freeze().await),
        None => None,
    };
    match broker.set_node(ReplicationHandle::Unassigned) {
        ReplicationHandle::Master(m) => {
            // A fence that lifted since the marker watcher last looked: the clean stop must not
            // leave its marker behind.
            if m.status().await.is_some_and(|s| s.fence.is_none()) {
                let root = broker.settings.store_path_root_dir.clone();
                match tokio::task::spawn_blocking(move || crate::restart_fence::lift(&root)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        warn!(%e, "cannot remove the restart fence's marker; the next start is fenced again")
                    }
                    Err(e) => warn!(%e, "cannot remove the restart fence's marker"),
                }
            }
            m.shutdown().await
        }
        ReplicationHandle::Slave(s) => s.shutdown().await,
        ReplicationHandle::Unassigned => {}
    }
    let closing = store.clone();
    tokio::task::spawn_blocking(move || closing.shutdown())
        .await?
        .context("flushing the store at shutdown")?;
    info!(max_offset = store.max_offset(), "logship stopped cleanly");
    Ok(())
}

/// The restart fence a master starts with: `totalReplicas - 1` replicas after a crash (a
/// slave may hold bytes the crash lost), or while the store's `restartFence` marker says an
/// earlier fence never lifted (the master was stopped cleanly while fenced); 0 otherwise. A
/// fence is recorded in the store before the master serves.
fn restart_fence_at_start(s: &BrokerSettings, recovery: RecoveryKind) -> anyhow::Result<usize> {
    let root = &s.store_path_root_dir;
    let marker = crate::restart_fence::path(root);
    let crashed = matches!(recovery, RecoveryKind::Crash | RecoveryKind::ForeignCrash);
    let pending = crate::restart_fence::pending(root)
        .with_context(|| format!("cannot tell whether {} exists", marker.display()))?;
    if s.total_replicas <= 1 {
        if pending {
            warn!(
                marker = %marker.display(),
                "a restart fence was never lifted, but totalReplicas=1 names no replica to wait for: lifting it"
            );
            crate::restart_fence::lift(root)
                .with_context(|| format!("cannot remove {}", marker.display()))?;
        }
        return Ok(0);
    }
    if !crashed && !pending {
        return Ok(0);
    }
    let waiting_for = s.total_replicas as usize - 1;
    if !crashed {
        warn!(
            marker = %marker.display(),
            waiting_for,
            "the restart fence of an earlier crash never lifted (this master was stopped while fenced): \
             refusing puts until the replicas report"
        );
    }
    crate::restart_fence::raise(root, waiting_for)
        .with_context(|| format!("cannot record the restart fence in {}", marker.display()))?;
    Ok(waiting_for)
}

/// Removes the store's `restartFence` marker once the master's fence has lifted (every replica
/// it waited for reported, and nothing else fences it).
async fn lift_restart_fence_marker(master: logship_tokio::MasterHandle<CommitLog>, root: std::path::PathBuf) {
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tick.tick().await;
        let Some(status) = master.status().await else { return };
        if status.fence.is_none() {
            match tokio::task::spawn_blocking(move || crate::restart_fence::lift(&root)).await {
                Ok(Ok(())) => info!("the restart fence lifted; its marker is removed from the store"),
                Ok(Err(e)) => {
                    warn!(%e, "cannot remove the restart fence's marker; the next start is fenced again")
                }
                Err(e) => warn!(%e, "cannot remove the restart fence's marker"),
            }
            return;
        }
    }
}

/// The failover state of a broker with `etcdEndpoints` (checked at load: only with the `etcd`
/// feature).
#[cfg(feature = "etcd")]
fn failover_coordination(settings: &BrokerSettings) -> Option<Arc<crate::coordination::Coordination>> {
    settings.controller.as_ref()?.etcd.as_ref()?;
    Some(Arc::new(crate::coordination::Coordination::new(logship::coordinator::tokio_clock())))
}

#[cfg(not(feature = "etcd"))]
fn failover_coordination(_: &BrokerSettings) -> Option<Arc<crate::coordination::Coordination>> {
    None
}

type FailoverTask = (watch::Sender<bool>, tokio::task::JoinHandle<()>);

/// Starts the coordinator loop of automatic failover, if configured.
#[cfg(feature = "etcd")]
fn start_failover(broker: &Arc<Broker>, http_addr: SocketAddr) -> Option<FailoverTask> {
    let coordination = broker.coordination.clone()?;
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(crate::failover::run(broker.clone(), coordination, http_addr, stopped));
    info!("automatic failover on etcd: the coordinator decides this broker's role");
    Some((stop, task))
}

#[cfg(not(feature = "etcd"))]
fn start_failover(_: &Arc<Broker>, _: SocketAddr) -> Option<FailoverTask> {
    None
}

/// Why a new HTTP connection is refused at accept.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Refusal {
    /// `httpMaxConnections` connections are open.
    Broker,
    /// This client IP holds `httpMaxConnectionsPerIp` connections.
    Client,
}

impl Refusal {
    /// The answer written once before closing the connection: a 503 naming the limit.
    fn answer(self) -> &'static [u8] {
        static BROKER: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        static CLIENT: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        let (cell, error) = match self {
            Self::Broker => (&BROKER, "too many connections (httpMaxConnections): retry later"),
            Self::Client => (
                &CLIENT,
                "too many connections from this client (httpMaxConnectionsPerIp): close some, or retry later",
            ),
        };
        cell.get_or_init(|| {
            let body = format!("{{\"error\":\"{error}\"}}\n");
            format!(
                "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n\
                 content-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        })
    }
}

/// Refused connections being answered at once. Each holds its socket for at most
/// [`REFUSAL_LINGER`]; beyond this many, a refused connection is answered with what fits in its
/// send buffer and closed at once.
const MAX_LINGERING_REFUSALS: usize = 256;
/// How long a refused connection is kept to deliver its 503 and read what its client sent.
const REFUSAL_LINGER: Duration = Duration::from_secs(2);
/// The most request bytes read (and dropped) from a refused connection before closing it.
const REFUSAL_DRAIN_BYTES: usize = 1 << 20;

/// Answers a refused connection 503 and closes it without resetting it: a socket closed with
/// unread bytes (the request the client sent before it was refused) sends a reset, which can
/// destroy the answer before the client reads it. So the answer is written, the sending side
/// shut, and what the client sent read and dropped, within [`REFUSAL_LINGER`].
fn refuse(mut stream: tokio::net::TcpStream, peer: SocketAddr, refusal: Refusal, lingering: &Arc<Semaphore>) {
    debug!(%peer, ?refusal, "HTTP connection refused");
    let Ok(permit) = Arc::clone(lingering).try_acquire_owned() else {
        let _ = stream.try_write(refusal.answer());
        return;
    };
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let linger = async {
            stream.write_all(refusal.answer()).await?;
            stream.shutdown().await?;
            let mut buf = [0u8; 8192];
            let mut drained = 0;
            while drained < REFUSAL_DRAIN_BYTES {
                match stream.read(&mut buf).await? {
                    0 => break,
                    n => drained += n,
                }
            }
            Ok::<(), std::io::Error>(())
        };
        let _ = tokio::time::timeout(REFUSAL_LINGER, linger).await;
        drop(permit);
    });
}

/// Serves HTTP/1.1 on `listener` until `shutdown` completes, then lets open requests finish for
/// up to `shutdownDrainTimeout` and closes whatever is left (a half-sent header, a stalled body,
/// a response nobody reads).
///
/// Each connection is closed when its request header is not complete within `httpHeaderTimeout`
/// of the connection opening or of the previous response, or when it moves no byte for
/// `httpIdleTimeout`. Beyond `httpMaxConnections` open connections, or `httpMaxConnectionsPerIp`
/// from one client IP, a new one is answered 503 and closed at once.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: &HttpSettings,
    tls: Option<TlsAcceptor>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let per_peer: PeerCounts = Arc::default();
    let lingering = Arc::new(Semaphore::new(MAX_LINGERING_REFUSALS));
    let (stop, stopped) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors, or a connection reset before accept: back off a
                        // little instead of spinning, and keep serving the open connections.
                        warn!(%e, "HTTP accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                // The client's own limit first: a client at its limit is told so, whether or
                // not the broker is full.
                let Some(peer_slot) = PeerSlot::take(&per_peer, peer.ip(), limits.max_connections_per_ip) else {
                    refuse(stream, peer, Refusal::Client, &lingering);
                    continue;
                };
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    drop(peer_slot);
                    refuse(stream, peer, Refusal::Broker, &lingering);
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let (router, limits, stopped, tls) = (router.clone(), limits.clone(), stopped.clone(), tls.clone());
                let span = tracing::debug_span!("http_connection", %peer);
                connections.spawn(tracing::Instrument::instrument(async move {
                    match tls {
                        None => serve_connection(stream, peer, router, limits, stopped).await,
                        Some(acceptor) => {
                            // The handshake counts against the header timeout.
                            match tokio::time::timeout(limits.header_timeout, acceptor.accept(stream)).await {
                                Ok(Ok(tls)) => serve_connection(tls, peer, router, limits, stopped).await,
                                Ok(Err(e)) => debug!(%peer, %e, "HTTPS handshake failed"),
                                Err(_) => debug!(%peer, "HTTPS handshake not complete within httpHeaderTimeout"),
                            }
                        }
                    }
                    drop((slot, peer_slot));
                }, span));
            }
        }
    }
    drop(listener);
    let open = connections.len();
    info!(open, drain = ?limits.shutdown_drain_timeout, "HTTP stopped accepting; draining");
    let _ = stop.send(true);
    let drained = tokio::time::timeout(limits.shutdown_drain_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            left = connections.len(),
            "shutdownDrainTimeout passed with connections still open; closing them"
        );
        connections.abort_all();
        while connections.join_next().await.is_some() {}
    }
}

/// Open HTTP connections per client IP.
type PeerCounts = Arc<std::sync::Mutex<std::collections::HashMap<IpAddr, usize>>>;

/// One of a client IP's `httpMaxConnectionsPerIp` connections, given back on drop (also when
/// the connection's task is aborted).
struct PeerSlot {
    counts: PeerCounts,
    ip: IpAddr,
}

impl PeerSlot {
    /// A slot for `ip`, or `None` if it holds `limit` already (`limit` 0: no limit).
    fn take(counts: &PeerCounts, ip: IpAddr, limit: usize) -> Option<Self> {
        let mut map = counts.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(ip).or_default();
        if limit > 0 && *n >= limit {
            return None;
        }
        *n += 1;
        Some(Self { counts: Arc::clone(counts), ip })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut map = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// Milliseconds since the first call, for connection activity stamps.
fn now_millis() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    peer: SocketAddr,
    router: axum::Router,
    limits: HttpSettings,
    mut stop: watch::Receiver<bool>,
) {
    let activity = Arc::new(AtomicU64::new(now_millis()));
    let io = TokioIo::new(Tracked { io: stream, activity: Arc::clone(&activity) });
    let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        let mut router = router.clone();
        async move {
            let size = request_head_size(&request);
            if size > MAX_HEADER_BYTES {
                debug!(%peer, size, "HTTP request header above 64 KiB refused");
                return Ok(header_too_large(size));
            }
            router.call(request).await
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEADER_BYTES)
        .keep_alive(true);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let idle = limits.idle_timeout.as_millis() as u64;
    let mut draining = *stop.borrow();
    if draining {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        let quiet = now_millis().saturating_sub(activity.load(Ordering::Relaxed));
        if quiet >= idle {
            debug!(%peer, "HTTP connection idle for httpIdleTimeout; closing");
            return;
        }
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    debug!(%peer, %e, "HTTP connection closed");
                }
                return;
            }
            changed = stop.changed(), if !draining => {
                draining = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
            () = tokio::time::sleep(Duration::from_millis(idle - quiet)) => {}
        }
    }
}

/// The TLS acceptor of `httpTlsCertFile` and `httpTlsKeyFile`, requiring client certificates
/// signed by `httpTlsClientCaFile` when that is set; `None` for plain HTTP.
pub fn tls_acceptor(h: &HttpSettings) -> anyhow::Result<Option<TlsAcceptor>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let (Some(cert), Some(key)) = (&h.tls_cert_file, &h.tls_key_file) else {
        return Ok(None);
    };
    let certs = |key: &str, path: &std::path::Path| -> anyhow::Result<Vec<CertificateDer<'static>>> {
        let read = || CertificateDer::pem_file_iter(path)?.collect::<Result<Vec<_>, _>>();
        let certs =
            read().with_context(|| format!("{key}={}: cannot read PEM certificates", path.display()))?;
        anyhow::ensure!(!certs.is_empty(), "{key}={}: no PEM certificate in the file", path.display());
        Ok(certs)
    };
    let chain = certs("httpTlsCertFile", cert)?;
    let private = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("httpTlsKeyFile={}: cannot read a PEM private key", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let builder = match &h.tls_client_ca_file {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs("httpTlsClientCaFile", ca)? {
                roots
                    .add(c)
                    .with_context(|| format!("httpTlsClientCaFile={}: not a CA certificate", ca.display()))?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .with_context(|| format!("httpTlsClientCaFile={}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, private).with_context(|| {
        format!("httpTlsKeyFile={} does not match httpTlsCertFile={}", key.display(), cert.display())
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(TlsAcceptor::from(Arc::new(config))))
}

/// Request heads (request line and headers) larger than this are refused with 431. hyper's
/// read buffer is capped at the same size, which bounds what one connection buffers (about
/// twice this) but is not an exact limit: the check on the parsed head is.
const MAX_HEADER_BYTES: usize = 64 << 10;

/// The size of a request's head as it came on the wire: the request line, each header line
/// and the empty line ending them.
fn request_head_size<B>(request: &hyper::Request<B>) -> usize {
    let line = request.method().as_str().len()
        + request.uri().path_and_query().map_or(1, |p| p.as_str().len())
        + " HTTP/1.1\r\n ".len();
    let headers: usize = request.headers().iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum();
    line + headers + 2
}

/// The 431 answer to a request head above [`MAX_HEADER_BYTES`]; the connection is closed.
fn header_too_large(size: usize) -> axum::response::Response {
    use axum::response::IntoResponse;
    let body = serde_json::json!({
        "error": format!(
            "the request header is {size} bytes; request headers above 64 KiB ({MAX_HEADER_BYTES} bytes) are refused"
        ),
    });
    let mut response =
        (axum::http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    response
}

/// A connection that stamps `activity` each time bytes move either way.
struct Tracked<S> {
    io: S,
    activity: Arc<AtomicU64>,
}

impl<S> Tracked<S> {
    fn touch(&self) {
        self.activity.store(now_millis(), Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.touch();
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.io).poll_write(cx, data);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        result
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                warn!(%e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => info!("SIGINT: shutting down"),
        () = terminate => info!("SIGTERM: shutting down"),
    }
}
