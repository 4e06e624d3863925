//! The remoting port on tokio: accepts RocketMQ clients on `listenPort` (and `fastListenPort`),
//! drives each connection's [`ServerConnection`] and dispatches its requests to
//! `logship-broker`'s processors. Thin glue: the protocol is `logship-remoting`'s, the answers
//! `logship-broker`'s.

mod connection;
pub mod host;
pub mod registration;
mod schedule;
pub mod slave_sync;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use logship_broker::Broker;
use logship_remoting::server::{ConnectionLimits, InFlightBudget, ServerConfig};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

/// Counters of the remoting port, for `/status` and the metrics.
#[derive(Debug, Default)]
pub struct RemotingStats {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections refused at accept (a cap).
    pub refused: AtomicU64,
    /// Connections closed for bad bytes (garbage, oversized or truncated frames).
    pub bad_frames: AtomicU64,
    /// Connections closed idle, or stalled on reading, or with a frame that never finished.
    pub timed_out: AtomicU64,
    /// Requests answered `SYSTEM_BUSY` for an in-flight cap.
    pub busy: AtomicU64,
}

impl RemotingStats {
    /// The counters now.
    pub fn port(&self) -> logship::status::RemotingPort {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        logship::status::RemotingPort {
            accepted: get(&self.accepted),
            refused: get(&self.refused),
            bad_frames: get(&self.bad_frames),
            timed_out: get(&self.timed_out),
            busy: get(&self.busy),
        }
    }
}

/// The remoting side of a running broker, for `/status`.
pub struct RemotingState {
    /// The remoting addresses bound.
    pub addrs: Vec<SocketAddr>,
    /// The processors' broker.
    pub broker: Arc<Broker>,
    /// The port's counters.
    pub stats: Arc<RemotingStats>,
    /// Requests in flight in all.
    pub budget: Arc<InFlightBudget>,
    /// The NameServer registrations (none without `namesrvAddr`).
    pub registration: Option<Arc<registration::Registration>>,
    /// A slave's metadata sync from its master (none on a master outside controller mode).
    pub slave_sync: Option<Arc<std::sync::Mutex<slave_sync::SlaveSyncStatus>>>,
}

impl crate::broker::RemotingStatus for RemotingState {
    fn status(&self) -> logship::status::Remoting {
        let (in_flight, in_flight_bytes) = self.budget.used();
        logship::status::Remoting {
            addresses: self.addrs.iter().map(ToString::to_string).collect(),
            connections: self.broker.open_connections(),
            requests: self.broker.requests(),
            in_flight: in_flight as u64,
            in_flight_bytes: in_flight_bytes as u64,
            port: self.stats.port(),
            name_servers: self.registration.as_ref().map(|r| r.status()),
            slave_sync: self
                .slave_sync
                .as_ref()
                .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).status(std::time::Instant::now())),
        }
    }
}

/// What every connection of the port shares.
pub struct Shared {
    pub broker: Arc<Broker>,
    pub config: ServerConfig,
    pub limits: Arc<ConnectionLimits>,
    pub budget: Arc<InFlightBudget>,
    pub stats: Arc<RemotingStats>,
    pub drain_timeout: Duration,
    next_id: AtomicU64,
}

impl Shared {
    /// The port's shared state for `broker`.
    pub fn new(
        broker: Arc<Broker>,
        config: ServerConfig,
        limits: Arc<ConnectionLimits>,
        budget: Arc<InFlightBudget>,
        stats: Arc<RemotingStats>,
        drain_timeout: Duration,
    ) -> Arc<Self> {
        Arc::new(Self { broker, config, limits, budget, stats, drain_timeout, next_id: AtomicU64::new(1) })
    }
}

/// Completes once `stopped` says true (or its sender is gone).
pub async fn until_stopped(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

/// Binds the remoting listeners: `addr`, and `fast` (the VIP channel) when set.
pub async fn bind(addr: SocketAddr, fast: Option<SocketAddr>) -> anyhow::Result<Vec<TcpListener>> {
    use anyhow::Context;
    let mut out = vec![TcpListener::bind(addr).await.with_context(|| {
        format!(
            "cannot listen on {addr} (listenAddress, default brokerIP1, and listenPort: the remoting port)"
        )
    })?];
    if let Some(fast) = fast {
        out.push(
            TcpListener::bind(fast)
                .await
                .with_context(|| format!("cannot listen on {fast} (fastListenPort, the VIP channel)"))?,
        );
    }
    Ok(out)
}

/// Serves the remoting protocol on `listeners` until `stopped` says true; then stops
/// accepting, lets each connection finish what is in flight for up to the drain timeout and
/// closes them.
pub async fn serve(listeners: Vec<TcpListener>, shared: Arc<Shared>, stopped: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    let mut accepts = JoinSet::new();
    let (accepted_tx, mut accepted_rx) = tokio::sync::mpsc::channel(64);
    for listener in listeners {
        let tx = accepted_tx.clone();
        let mut stop = stopped.clone();
        accepts.spawn(async move {
            loop {
                tokio::select! {
                    () = until_stopped(&mut stop) => return,
                    accepted = listener.accept() => match accepted {
                        Ok((stream, peer)) => {
                            if tx.send((stream, peer)).await.is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            warn!(%e, "remoting accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    },
                }
            }
        });
    }
    drop(accepted_tx);
    let mut stop = stopped.clone();
    loop {
        tokio::select! {
            () = until_stopped(&mut stop) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            next = accepted_rx.recv() => {
                let Some((stream, peer)) = next else { break };
                let permit = match shared.limits.try_accept(peer.ip()) {
                    Ok(p) => p,
                    Err(e) => {
                        shared.stats.refused.fetch_add(1, Ordering::Relaxed);
                        debug!(%peer, reason = %e, "remoting connection refused");
                        continue;
                    }
                };
                shared.stats.accepted.fetch_add(1, Ordering::Relaxed);
                let _ = stream.set_nodelay(true);
                let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
                let span = tracing::info_span!("remoting", conn = id, %peer);
                let (shared, stopped) = (shared.clone(), stopped.clone());
                connections.spawn(tracing::Instrument::instrument(async move {
                    connection::run(stream, peer, id, shared, stopped).await;
                    drop(permit);
                }, span));
            }
        }
    }
    accepts.shutdown().await;
    let open = connections.len();
    if open > 0 {
        info!(open, "remoting stopped accepting; draining connections");
    }
    // Each connection drains by itself within the drain timeout; a margin for the closes.
    let drained = tokio::time::timeout(shared.drain_timeout + Duration::from_secs(1), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(open = connections.len(), "remoting connections did not drain; closing them");
        connections.shutdown().await;
    }
}

/// The remoting side of a broker once started: the port, the registrations, the metadata
/// persistence and the message index, each with its task.
pub struct Running {
    /// For `/status`.
    pub state: Arc<RemotingState>,
    serve: tokio::task::JoinHandle<()>,
    background: Vec<tokio::task::JoinHandle<()>>,
    stop: watch::Sender<bool>,
}

/// How often changed metadata is written (Java's `flushConsumerOffsetInterval`).
const PERSIST_INTERVAL: Duration = Duration::from_secs(5);
/// How often the message index follows the log.
const INDEX_INTERVAL: Duration = Duration::from_millis(20);

/// Opens the metadata and the message index of `store`, binds the remoting port, starts
/// registering with the NameServers and serving. `stopped` ends serving (the drain follows);
/// [`Running::shutdown`] finishes the rest.
pub async fn start(
    http: Arc<crate::http::Broker>,
    store: Arc<logship_store::CommitLog>,
    stopped: watch::Receiver<bool>,
) -> anyhow::Result<Running> {
    use anyhow::Context;
    let settings = &http.settings;
    let broker_settings = settings.broker_crate_settings();
    let root = settings.store_path_root_dir.clone();
    let (metadata, index) = {
        let (store, broker_settings) = (store.clone(), broker_settings.clone());
        let (index_on, index_config) = (settings.remoting.message_index_enable, settings.index_config());
        tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            let metadata = logship_broker::BrokerMetadata::open(&root, broker_settings, host::now_ms())
                .with_context(|| {
                    format!("cannot open the broker metadata under {}/config", root.display())
                })?;
            let index = match index_on {
                true => {
                    Some(Arc::new(logship_store::MessageIndex::open(&store, index_config).with_context(
                        || format!("cannot open the message index under {}/index", root.display()),
                    )?))
                }
                false => None,
            };
            Ok((Arc::new(metadata), index))
        })
        .await??
    };
    let (topics_tx, topics_rx) = watch::channel(0u64);
    let host = Arc::new(host::BinaryHost::new(http.clone(), topics_tx));
    let mut broker = Broker::new(broker_settings, store.clone(), metadata.clone(), index.clone(), host);
    let acl = match settings.remoting.acl_enable {
        true => {
            let path = settings
                .remoting
                .acl_file
                .clone()
                .unwrap_or_else(|| settings.store_path_root_dir.join("config").join("plain_acl.yml"));
            let acl = Arc::new(
                logship_broker::acl::PlainAcl::load(&path)
                    .context("aclEnable=true but the ACL file cannot be used; the broker does not start")?,
            );
            info!(file = %path.display(), accounts = acl.config().accounts.len(), "ACL enabled");
            broker = broker.with_authorizer(acl.clone());
            Some(acl)
        }
        false => None,
    };
    let broker = Arc::new(broker);
    let listeners = bind(settings.remoting_addr(), settings.fast_remoting_addr()).await?;
    let addrs: Vec<SocketAddr> = listeners.iter().filter_map(|l| l.local_addr().ok()).collect();
    let stats = Arc::new(RemotingStats::default());
    let r = &settings.remoting;
    let budget = InFlightBudget::new(r.max_in_flight, r.max_in_flight_bytes as usize);
    let shared = Shared::new(
        broker.clone(),
        settings.remoting_server_config(),
        ConnectionLimits::new(r.max_connections, r.max_connections_per_ip),
        budget.clone(),
        stats.clone(),
        settings.http.shutdown_drain_timeout,
    );
    let (learned_master, learned) = match settings.learns_master_from_name_server() {
        true => {
            let (tx, rx) = watch::channel(None);
            (Some(tx), Some(rx))
        }
        false => (None, None),
    };
    // A slave syncs its master's metadata when it can find the master's remoting address.
    let syncs = (settings.broker_role == logship_core::BrokerRole::Slave || http.roles.is_some())
        && (!r.namesrv_addr.is_empty() || r.slave_sync_master_address.is_some());
    let (master_remoting, master_remoting_rx) = watch::channel(r.slave_sync_master_address.clone());
    let master_remoting = (syncs && r.slave_sync_master_address.is_none()).then_some(master_remoting);
    let registration = (!r.namesrv_addr.is_empty()).then(|| {
        let roles_http = http.clone();
        let fixed_id = settings.registered_broker_id();
        let register_as = Arc::new(move || {
            let role = roles_http.roles.as_ref().map(|r| r.current());
            registration::RegisterAs::for_role(role.as_ref(), fixed_id)
        });
        let target = registration::RegistrationTarget {
            broker: broker.clone(),
            register_as,
            role_changes: http.roles.as_ref().map(|r| r.changes()),
            ha_server_addr: settings.ha_server_addr().to_string(),
            period: r.register_name_server_period,
            timeout: r.register_broker_timeout,
            learned_master,
            master_remoting,
        };
        Arc::new(registration::Registration::start(&r.namesrv_addr, target, topics_rx))
    });
    let (stop, background_stopped) = watch::channel(false);
    let mut slave_sync_task = None;
    let slave_sync = syncs.then(|| {
        let roles_http = http.clone();
        let target = slave_sync::SlaveSyncTarget {
            metadata: metadata.clone(),
            is_slave: Arc::new(move || match &roles_http.roles {
                None => true,
                Some(roles) => matches!(roles.current(), crate::roles::Role::Slave { .. }),
            }),
            master: master_remoting_rx,
            interval: r.slave_sync_interval,
            timeout: Duration::from_secs(3),
        };
        let (status, task) = slave_sync::start(target, background_stopped.clone());
        slave_sync_task = Some(task);
        status
    });
    let state =
        Arc::new(RemotingState { addrs, broker: broker.clone(), stats, budget, registration, slave_sync });
    let mut background = vec![
        tokio::spawn(persist_metadata(metadata, background_stopped.clone())),
        tokio::spawn(schedule::run(broker.clone(), background_stopped.clone())),
        tokio::spawn(housekeeping(broker.clone(), background_stopped.clone())),
    ];
    if let Some(learned) = learned {
        background.push(tokio::spawn(follow_named_master(
            http.clone(),
            store.clone(),
            learned,
            background_stopped.clone(),
        )));
    }
    background.extend(slave_sync_task);
    if let Some(acl) = acl {
        background.push(tokio::spawn(reload_acl(acl, background_stopped.clone())));
    }
    if let Some(index) = index {
        background.push(tokio::spawn(follow_index(index, store, background_stopped)));
    }
    let serve = tokio::spawn(serve(listeners, shared, stopped));
    Ok(Running { state, serve, background, stop })
}

impl Running {
    /// After the port stopped accepting: unregisters from the NameServers, waits for the
    /// connections to drain, writes every metadata table and the index headers.
    pub async fn shutdown(self) {
        if let Some(r) = &self.state.registration {
            r.stop().await;
        }
        if let Err(e) = self.serve.await {
            warn!(%e, "the remoting server task failed");
        }
        let _ = self.stop.send(true);
        for task in self.background {
            let _ = task.await;
        }
    }
}

/// Samples the broker's counters every second (the rates `GET_BROKER_RUNTIME_INFO` reports)
/// and drops silent clients every [`logship_broker::serve::HOUSEKEEPING_INTERVAL`].
async fn housekeeping(broker: Arc<logship_broker::Broker>, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let every = logship_broker::serve::HOUSEKEEPING_INTERVAL.as_secs().max(1);
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            () = until_stopped(&mut stopped) => break,
            _ = tick.tick() => {}
        }
        broker.stats.sample(broker.host.now_ms());
        ticks += 1;
        if ticks % every == 0 {
            let closed = broker.sweep_clients();
            if closed > 0 {
                info!(closed, "closed connections of clients without heartbeat");
            }
        }
    }
}

/// Writes changed metadata every [`PERSIST_INTERVAL`], and everything once stopped.
async fn persist_metadata(metadata: Arc<logship_broker::BrokerMetadata>, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(PERSIST_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = until_stopped(&mut stopped) => break,
            _ = tick.tick() => {
                let m = metadata.clone();
                match tokio::task::spawn_blocking(move || m.persist_if_dirty()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => warn!(error = %e, "persisting the broker metadata failed; retrying in 5 s"),
                    Err(e) => warn!(%e, "the metadata persist task failed"),
                }
            }
        }
    }
    match tokio::task::spawn_blocking(move || metadata.persist_all()).await {
        Ok(Ok(())) => debug!("broker metadata persisted"),
        Ok(Err(e)) => warn!(error = %e, "persisting the broker metadata at shutdown failed"),
        Err(e) => warn!(%e, "the metadata persist task failed"),
    }
}

/// Reloads `plain_acl.yml` when it changes, checked every [`ACL_RELOAD_INTERVAL`] (Java's
/// file watcher polls every 500 ms). A file that no longer parses keeps the accounts in force.
async fn reload_acl(acl: Arc<logship_broker::acl::PlainAcl>, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(ACL_RELOAD_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = until_stopped(&mut stopped) => break,
            _ = tick.tick() => match acl.reload_if_changed() {
                Ok(true) => info!(file = %acl.path().display(), accounts = acl.config().accounts.len(), "ACL file reloaded"),
                Ok(false) => {}
                Err(e) => warn!(error = %e, "the changed ACL file is not used; the previous accounts stay in force"),
            },
        }
    }
}

/// How often the ACL file is checked for changes.
const ACL_RELOAD_INTERVAL: Duration = Duration::from_millis(500);

/// Indexes what the store dispatched (and re-reads after a truncation), every
/// [`INDEX_INTERVAL`]; flushes the index once stopped.
async fn follow_index(
    index: Arc<logship_store::MessageIndex>,
    store: Arc<logship_store::CommitLog>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut truncations = store.truncations();
    let mut tick = tokio::time::interval(INDEX_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            () = until_stopped(&mut stopped) => break,
            _ = tick.tick() => {}
        }
        let now = store.truncations();
        let behind = index.indexed_to() < store.dispatched_offset();
        if now == truncations && !behind {
            continue;
        }
        let (i, s, truncated) = (index.clone(), store.clone(), now != truncations);
        let done = tokio::task::spawn_blocking(move || {
            if truncated {
                i.truncate(&s)?;
            }
            i.catch_up(&s)
        })
        .await;
        match done {
            Ok(Ok(_)) => {
                truncations = now;
                failing = false;
            }
            Ok(Err(e)) if !failing => {
                failing = true;
                warn!(error = %e, "indexing messages failed; QUERY_MESSAGE misses the newest until it works");
            }
            Ok(Err(_)) => {}
            Err(e) => warn!(%e, "the index task failed"),
        }
    }
    match tokio::task::spawn_blocking(move || finish_index(&index, &store)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            warn!(error = %e, "indexing the last messages at stop failed; the next start indexes them")
        }
        Err(e) => warn!(%e, "the index task failed at stop"),
    }
}

/// At a clean stop: dispatches what the store has not yet, indexes every message up to it and
/// writes the index, so that the store is left as a Java broker leaves its own (a Java broker
/// opened on it re-indexes nothing after a clean stop).
fn finish_index(
    index: &logship_store::MessageIndex,
    store: &logship_store::CommitLog,
) -> Result<(), logship_store::StoreError> {
    store.dispatch_pending()?;
    index.catch_up(store)?;
    index.flush()
}

/// A slave without `haMasterAddress`: replicates from the master the NameServers name (the
/// `haServerAddr` of their REGISTER_BROKER replies), and when a reply names another address,
/// stops the HA link and follows that one. Ends on `stopped`, leaving the last link to the
/// broker's shutdown.
async fn follow_named_master(
    http: Arc<crate::http::Broker>,
    store: Arc<logship_store::CommitLog>,
    mut learned: watch::Receiver<Option<String>>,
    mut stopped: watch::Receiver<bool>,
) {
    use crate::http::ReplicationHandle;
    loop {
        tokio::select! {
            () = until_stopped(&mut stopped) => return,
            changed = learned.changed() => if changed.is_err() { return },
        }
        let Some(master) = learned.borrow_and_update().clone() else { continue };
        let config = match http.settings.named_master_slave_config(&master) {
            Ok(config) => config,
            Err(e) => {
                warn!(%e, master_ha = %master, "the named master's host is no TLS server name; not following it");
                continue;
            }
        };
        if let Err(e) = config.validate() {
            warn!(%e, master_ha = %master, "the NameServer named an unusable master address; not following it");
            continue;
        }
        if let ReplicationHandle::Slave(old) = http.set_node(ReplicationHandle::Unassigned) {
            old.shutdown().await;
        }
        match logship_tokio::spawn_slave(config, store.clone()).await {
            Ok(slave) => {
                info!(master_ha = %master, "following the master the NameServer names");
                http.set_node(ReplicationHandle::Slave(slave));
            }
            Err(e) => warn!(%e, master_ha = %master, "cannot start replicating from the named master"),
        }
    }
}

#[cfg(test)]
mod tests {
    use logship_store::{CommitLog, IndexConfig, Message, MessageIndex, StoreConfig};

    #[test]
    fn a_clean_stop_indexes_the_messages_put_since_the_last_catch_up() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = StoreConfig::default();
        config.mapped_file_size_commit_log = 1 << 20;
        config.max_message_size = 65_536;
        let store = CommitLog::open(dir.path(), config).unwrap();
        let mut index_config = IndexConfig::default();
        index_config.max_hash_slot_num = 64;
        index_config.max_index_num = 256;
        let index = MessageIndex::open(&store, index_config).unwrap();
        let keyed = |key: &str| {
            let mut m = Message::new("IndexT", 0, b"body".to_vec());
            m.properties.push(("KEYS".into(), key.into()));
            m
        };
        assert_eq!(store.put(keyed("first")).status, logship_store::PutStatus::PutOk);
        store.dispatch_pending().unwrap();
        index.catch_up(&store).unwrap();
        // Put after the index's last round, as in the last 20 ms before a stop.
        assert_eq!(store.put(keyed("last")).status, logship_store::PutStatus::PutOk);
        super::finish_index(&index, &store).unwrap();
        assert_eq!(index.indexed_to(), store.dispatched_offset());
        let found = index.query_offsets("IndexT", "last", 16, 0, i64::MAX).unwrap();
        assert_eq!(found.phy_offsets.len(), 1, "the last message is found by its key");
        store.shutdown().unwrap();
    }
}
