//! `logship master` and `logship slave`: a broker process. Opens the store, starts the HA
//! service and the HTTP API, and on SIGINT or SIGTERM stops accepting, lets in-flight puts
//! finish, flushes and closes.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use logship_core::driver::BrokerRole;
use logship_store::{CommitLog, RecoveryKind, StoreConfig, StoreError};
use tracing::{info, warn};

use crate::config::BrokerSettings;
use crate::http::{Broker, Node, router, total_memory};
use crate::metrics::Metrics;

/// The store configuration for these settings.
pub fn store_config(s: &BrokerSettings) -> StoreConfig {
    let mut c = StoreConfig::default();
    c.mapped_file_size_commit_log = s.mapped_file_size_commit_log;
    c.flush_disk_type = s.flush_disk_type;
    c.flush_interval_commit_log = s.flush_interval_commit_log;
    c.sync_flush_timeout = s.sync_flush_timeout;
    c.max_message_size = s.max_message_size;
    c.file_reserved_time = s.file_reserved_time;
    c.delete_when = s.delete_when.clone();
    c.disk_max_used_space_ratio = s.disk_max_used_space_ratio;
    c.store_host = SocketAddr::new(s.broker_ip1, s.listen_port);
    s.store.apply(&mut c);
    c
}

/// What an operator can set to get past a store that does not open.
fn open_hint(e: &StoreError) -> &'static str {
    match e {
        StoreError::ConsumeQueueCorrupt { .. } => {
            "; set rebuildConsumeQueues=true (broker.conf or --set) to rebuild the consume queues from the commit log"
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
    let config = store_config(s);
    let shown = root.display().to_string();
    let store = tokio::task::spawn_blocking(move || CommitLog::open(&root, config)).await?;
    let store = match store {
        Ok(store) => store,
        Err(e) => {
            let hint = open_hint(&e);
            return Err(anyhow::Error::new(e).context(format!("cannot open the store at {shown}{hint}")));
        }
    };
    Ok(Arc::new(store))
}

/// Runs a broker until SIGINT or SIGTERM.
pub async fn run(settings: BrokerSettings) -> anyhow::Result<()> {
    let store = open_store(&settings).await?;
    let start_offset = store.max_offset();
    let node = match settings.broker_role {
        BrokerRole::Slave => {
            let slave = logship_tokio::spawn_slave(settings.slave_service_config(), store.clone()).await?;
            Node::Slave(slave)
        }
        _ => {
            let ha = settings.ha_addr();
            let mut config = settings.master_service_config();
            let crashed =
                matches!(store.recovery_report().kind, RecoveryKind::Crash | RecoveryKind::ForeignCrash);
            if crashed && settings.total_replicas > 1 {
                // A slave may hold bytes this crash lost: hear from every slave before appending.
                config.restart_fence = settings.total_replicas as usize - 1;
            }
            let master = logship_tokio::spawn_master(config, store.clone(), ha)
                .await
                .with_context(|| format!("cannot start the HA service on {ha} (haListenPort)"))?;
            tokio::spawn(feed_retention_floor(master.clone(), store.clone()));
            Node::Master(master)
        }
    };
    let http_addr = settings.http_addr();
    let listener = tokio::net::TcpListener::bind(http_addr)
        .await
        .with_context(|| format!("cannot listen on {http_addr} (listenPort)"))?;
    let broker = Arc::new(Broker {
        node,
        store: store.clone(),
        metrics: Metrics::new(),
        start_offset,
        total_memory: total_memory(),
        settings,
    });
    info!(
        role = broker.settings.broker_role.rocketmq_name(),
        http = %http_addr,
        ha = %match &broker.node { Node::Master(m) => m.local_addr().to_string(), Node::Slave(_) => "-".into() },
        store = %broker.settings.store_path_root_dir.display(),
        min_offset = store.min_offset(),
        max_offset = start_offset,
        "logship ready"
    );
    let app = router(broker.clone()).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("HTTP server failed")?;
    info!("HTTP drained; stopping replication");
    match &broker.node {
        Node::Master(m) => m.shutdown().await,
        Node::Slave(s) => s.shutdown().await,
    }
    let closing = store.clone();
    tokio::task::spawn_blocking(move || closing.shutdown())
        .await?
        .context("flushing the store at shutdown")?;
    info!(max_offset = store.max_offset(), "logship stopped cleanly");
    Ok(())
}

/// Keeps the store's retention floor at the slowest in-sync slave's ack, so that forced
/// deletion (`cleanFileForciblyEnable`) never removes what a replica still needs. While no slave
/// is in sync the last floor stays (a slave that dropped out comes back for those bytes).
async fn feed_retention_floor(master: logship_tokio::MasterHandle<CommitLog>, store: Arc<CommitLog>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tick.tick().await;
        let Some(status) = master.status().await else { return };
        let slowest = status.slaves.iter().filter(|l| l.in_sync).filter_map(|l| l.ack).min();
        if let Some(ack) = slowest {
            store.set_retention_floor(ack);
        }
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
