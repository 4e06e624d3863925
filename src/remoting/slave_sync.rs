//! A slave's metadata sync on tokio (Java's `SlaveSynchronize.syncAll`, first 3 s after start,
//! then every `slaveSyncInterval`, 10 s as in Java): topic configs, consumer offsets, delay
//! offsets and subscription groups fetched from the master's remoting port and written to
//! RocketMQ's files (`logship_broker::slave_sync`). It runs in its own task over its own
//! connection, so a master that is down, slow or answers garbage delays nothing else; a failed
//! round is retried with backoff (1 s doubling, at most the interval) and shown in `/status`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use logship_broker::slave_sync::SyncTable;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::registration::NameServer;

/// The first round's delay after start (Java's 3 s).
const FIRST_DELAY: Duration = Duration::from_secs(3);
/// The first retry after a failed round.
const FIRST_RETRY: Duration = Duration::from_secs(1);

/// What the sync loop needs.
#[derive(Clone)]
pub struct SlaveSyncTarget {
    /// The broker's metadata (written from the master's).
    pub metadata: Arc<logship_broker::BrokerMetadata>,
    /// Whether the broker is a slave now (the loop idles otherwise).
    pub is_slave: Arc<dyn Fn() -> bool + Send + Sync>,
    /// The master's remoting address: `slaveSyncMasterAddress`, or the NameServer's
    /// `masterAddr`.
    pub master: watch::Receiver<Option<String>>,
    /// `slaveSyncInterval`.
    pub interval: Duration,
    /// One table's request limit (Java's 3 s), the connection's included.
    pub timeout: Duration,
}

/// The sync's state, for `/status`.
#[derive(Debug, Default)]
pub struct SlaveSyncStatus {
    master: Option<String>,
    last_success: Option<Instant>,
    last_error: Option<String>,
    failures: u32,
    rounds: u64,
}

impl SlaveSyncStatus {
    /// `/status`'s `slaveSync` at `now`.
    pub fn status(&self, now: Instant) -> logship::status::SlaveSync {
        logship::status::SlaveSync {
            master: self.master.clone(),
            age_ms: self.last_success.map(|t| now.saturating_duration_since(t).as_millis() as u64),
            last_error: self.last_error.clone(),
            failures: self.failures,
            rounds: self.rounds,
        }
    }
}

/// Starts the loop; it ends when `stopped` turns true.
pub fn start(
    target: SlaveSyncTarget,
    stopped: watch::Receiver<bool>,
) -> (Arc<Mutex<SlaveSyncStatus>>, tokio::task::JoinHandle<()>) {
    let status = Arc::new(Mutex::new(SlaveSyncStatus::default()));
    let span = tracing::info_span!("slave_sync");
    let task = tokio::spawn(tracing::Instrument::instrument(run(target, status.clone(), stopped), span));
    (status, task)
}

/// One round: every table, in Java's order, over `connection` (opened if needed).
async fn round(
    addr: &str,
    connection: &mut Option<NameServer>,
    target: &SlaveSyncTarget,
) -> Result<Vec<&'static str>, String> {
    let mut changed = Vec::new();
    for table in SyncTable::ALL {
        let work = async {
            if connection.is_none() {
                *connection = Some(NameServer::connect(addr).await.map_err(|e| e.to_string())?);
            }
            let conn = connection.as_mut().expect("connected above");
            conn.call(table.request()).await.map_err(|e| e.to_string())
        };
        let reply = match tokio::time::timeout(target.timeout, work).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(format!("{}: no answer within {} ms", table.name(), target.timeout.as_millis()));
            }
        };
        let metadata = target.metadata.clone();
        let applied = tokio::task::spawn_blocking(move || table.apply(&metadata, &reply))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        if applied {
            changed.push(table.name());
        }
    }
    Ok(changed)
}

async fn run(
    target: SlaveSyncTarget,
    status: Arc<Mutex<SlaveSyncStatus>>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut master = target.master.clone();
    let mut connection: Option<NameServer> = None;
    let mut connected_to: Option<String> = None;
    let mut wait = FIRST_DELAY;
    let mut retry = FIRST_RETRY;
    loop {
        tokio::select! {
            () = super::until_stopped(&mut stopped) => return,
            () = tokio::time::sleep(wait) => {}
        }
        wait = target.interval;
        let addr = master.borrow_and_update().clone();
        let Some(addr) = addr.filter(|_| (target.is_slave)()) else { continue };
        if connected_to.as_deref() != Some(addr.as_str()) {
            connection = None;
            connected_to = Some(addr.clone());
            info!(master = %addr, "syncing metadata from the master");
        }
        // The master being synced shows from the round's start, so a slow round or a file
        // written before its status is never shown under no master.
        status.lock().unwrap_or_else(|e| e.into_inner()).master = Some(addr.clone());
        let result = round(&addr, &mut connection, &target).await;
        let mut s = status.lock().unwrap_or_else(|e| e.into_inner());
        s.rounds += 1;
        match result {
            Ok(changed) => {
                if !changed.is_empty() {
                    debug!(tables = changed.join(","), "metadata synced from the master");
                }
                s.last_success = Some(Instant::now());
                s.last_error = None;
                s.failures = 0;
                retry = FIRST_RETRY;
            }
            Err(e) => {
                connection = None;
                if s.failures == 0 {
                    warn!(error = %e, "syncing metadata from the master failed; retrying with backoff");
                }
                s.failures += 1;
                s.last_error = Some(e);
                wait = retry.min(target.interval);
                retry = (retry * 2).min(target.interval);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use logship_remoting::{FrameDecoder, RemotingCommand, ResponseCode};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A master that answers every request with `answer(request)` (`None`: silence).
    async fn fake_master(answer: fn(&RemotingCommand) -> Option<RemotingCommand>) -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut d = FrameDecoder::new();
                    let mut buf = vec![0u8; 4096];
                    loop {
                        while let Ok(Some(req)) = d.decode() {
                            if let Some(r) = answer(&req) {
                                let mut wire = BytesMut::new();
                                r.encode(&mut wire).unwrap();
                                if s.write_all(&wire).await.is_err() {
                                    return;
                                }
                            }
                        }
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => d.feed(&buf[..n]),
                        }
                    }
                });
            }
        });
        addr
    }

    async fn wait_for(status: &Mutex<SlaveSyncStatus>, done: impl Fn(&SlaveSyncStatus) -> bool) {
        loop {
            if done(&status.lock().unwrap()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn target(
        metadata: Arc<logship_broker::BrokerMetadata>,
        master: &str,
    ) -> (SlaveSyncTarget, watch::Sender<Option<String>>) {
        let (tx, rx) = watch::channel(Some(master.to_string()));
        let t = SlaveSyncTarget {
            metadata,
            is_slave: Arc::new(|| true),
            master: rx,
            interval: Duration::from_millis(200),
            timeout: Duration::from_millis(300),
        };
        (t, tx)
    }

    #[tokio::test]
    async fn a_slave_writes_the_master_s_offsets_and_a_garbage_master_is_shown_and_retried() {
        let d = tempfile::tempdir().unwrap();
        let metadata = Arc::new(
            logship_broker::BrokerMetadata::open(d.path(), logship_broker::BrokerSettings::default(), 1)
                .unwrap(),
        );
        let good = fake_master(|req| {
            let body: &[u8] = if req.code == logship_remoting::RequestCode::GET_ALL_CONSUMER_OFFSET.0 {
                br#"{"offsetTable":{"TopicA@CG":{0:10,1:20}}}"#
            } else if req.code == logship_remoting::RequestCode::GET_ALL_TOPIC_CONFIG.0 {
                br#"{"topicConfigTable":{},"dataVersion":{"counter":1,"timestamp":1}}"#
            } else {
                b"{}"
            };
            Some(RemotingCommand::response_to(req, ResponseCode::SUCCESS).with_body(body))
        })
        .await;
        let garbage = fake_master(|req| {
            Some(RemotingCommand::response_to(req, ResponseCode::SUCCESS).with_body(&b"[1,"[..]))
        })
        .await;
        let silent = fake_master(|_| None).await;
        let (mut t, tx) = target(metadata.clone(), &garbage);
        t.interval = Duration::from_millis(200);
        let (stop, stopped) = watch::channel(false);
        let (status, task) = start(t, stopped);
        wait_for(&status, |s| s.failures >= 1).await;
        assert!(status.lock().unwrap().last_error.as_deref().unwrap().contains("GET_ALL_TOPIC_CONFIG"));
        tx.send_replace(Some(silent));
        wait_for(&status, |s| s.last_error.as_deref().is_some_and(|e| e.contains("no answer"))).await;
        tx.send_replace(Some(good));
        wait_for(&status, |s| s.last_success.is_some()).await;
        assert_eq!(metadata.offsets.query_offset("CG", "TopicA", 1), 20);
        let file = std::fs::read_to_string(metadata.offsets.path()).unwrap();
        assert!(file.contains("TopicA@CG"), "{file}");
        let v = status.lock().unwrap().status(Instant::now());
        assert_eq!((v.failures, v.last_error.as_deref()), (0, None), "{v:?}");
        stop.send_replace(true);
        task.await.unwrap();
    }
}
