//! Registration with the NameServers on tokio: one task per `namesrvAddr` entry, each with its
//! own long-lived connection and [`RegistrationSchedule`], so that a NameServer that is down,
//! slow or answers garbage delays nothing but its own registrations (never a put, never
//! replication, never another NameServer). The requests and replies are
//! `logship_broker::register`'s.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use logship_broker::register::{
    RegistrationError, RegistrationSchedule, Registrations, parse_register_response,
    parse_unregister_response, register_broker_request, unregister_broker_request,
};
use logship_remoting::{FrameDecoder, RemotingCommand};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

/// Under what the broker registers now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisterAs {
    /// The `brokerId` of the request: 0 for the master.
    pub broker_id: i64,
    /// The `stateVersion` of the topic table's `DataVersion` (controller mode: the master
    /// epoch); `None` keeps the table's own.
    pub state_version: Option<i64>,
}

impl RegisterAs {
    /// How a broker registers with `role` (`None`: outside controller mode, as `fixed_id`): the
    /// master as broker id 0, a slave as `fixed_id`, both claiming the master epoch as Java's
    /// `ReplicasManager` stamps it; without a role, not at all.
    pub fn for_role(role: Option<&crate::roles::Role>, fixed_id: i64) -> Option<Self> {
        use crate::roles::Role;
        match role {
            None => Some(Self { broker_id: fixed_id, state_version: None }),
            Some(Role::Master { epoch }) => {
                Some(Self { broker_id: 0, state_version: Some(i64::from(*epoch)) })
            }
            Some(Role::Slave { epoch, .. }) => {
                Some(Self { broker_id: fixed_id, state_version: Some(i64::from(*epoch)) })
            }
            Some(Role::None) => None,
        }
    }
}

/// What the registration tasks need to know about the broker.
#[derive(Clone)]
pub struct RegistrationTarget {
    /// The processors' broker (settings and topics).
    pub broker: Arc<logship_broker::Broker>,
    /// How to register now; `None`: do not register (controller mode without a role).
    pub register_as: Arc<dyn Fn() -> Option<RegisterAs> + Send + Sync>,
    /// Controller mode: the role's changes, each of which registers again at once (Java's
    /// `registerBrokerWhenRoleChange`), so that the NameServer names a new master without
    /// waiting for `registerNameServerPeriod`.
    pub role_changes: Option<watch::Receiver<crate::roles::Role>>,
    /// `haServerAddr`: `brokerIP2:haListenPort`.
    pub ha_server_addr: String,
    /// `registerNameServerPeriod`.
    pub period: Duration,
    /// `registerBrokerTimeoutMills`: one request's limit (the connection's included).
    pub timeout: Duration,
    /// A slave that learns its master from the NameServers: each reply's `haServerAddr` goes
    /// here (the latest reply naming one wins; a reply naming none changes nothing, as in
    /// Java). Java's broker takes the first reply of each registration round to arrive, so
    /// with NameServers that disagree both follow whichever answered last or first.
    pub learned_master: Option<watch::Sender<Option<String>>>,
    /// A slave's master remoting address for the metadata sync: each reply's `masterAddr` goes
    /// here (Java's `slaveSynchronize.setMasterAddr`). A reply naming no master keeps the last
    /// address (the sync then fails and says so), where Java sets it to null and stops syncing.
    pub master_remoting: Option<watch::Sender<Option<String>>>,
}

/// The running registration tasks.
pub struct Registration {
    /// Every NameServer's schedule, for `/status`.
    pub status: Arc<Mutex<Registrations>>,
    stop: watch::Sender<bool>,
    tasks: tokio::sync::Mutex<JoinSet<()>>,
}

impl Registration {
    /// Starts one task per NameServer in `addrs`; each wakes at once when `topics` changes.
    pub fn start(addrs: &[String], target: RegistrationTarget, topics: watch::Receiver<u64>) -> Self {
        let now = Instant::now();
        let status: Registrations =
            addrs.iter().map(|a| (a.clone(), RegistrationSchedule::new(now, target.period))).collect();
        let status = Arc::new(Mutex::new(status));
        let (stop, stopped) = watch::channel(false);
        let mut tasks = JoinSet::new();
        for addr in addrs {
            let span = tracing::info_span!("namesrv", addr = %addr);
            tasks.spawn(tracing::Instrument::instrument(
                run(addr.clone(), target.clone(), status.clone(), topics.clone(), stopped.clone()),
                span,
            ));
        }
        if !addrs.is_empty() {
            info!(
                namesrv = addrs.join(";"),
                period_ms = target.period.as_millis() as u64,
                "registering with the NameServers"
            );
        }
        Self { status, stop, tasks: tokio::sync::Mutex::new(tasks) }
    }

    /// Each NameServer's registration now, by address.
    pub fn status(&self) -> std::collections::BTreeMap<String, logship::status::RegistrationStatus> {
        let now = Instant::now();
        let status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        status.iter().map(|(a, s)| (a.clone(), s.status(now))).collect()
    }

    /// Stops registering and unregisters from every NameServer (each within 3 s, in parallel).
    pub async fn stop(&self) {
        let _ = self.stop.send(true);
        let mut tasks = self.tasks.lock().await;
        while tasks.join_next().await.is_some() {}
    }
}

/// One long-lived remoting connection (to a NameServer, or to a master for the metadata
/// sync), and its frame decoder.
pub(super) struct NameServer {
    stream: TcpStream,
    decoder: FrameDecoder,
    next_opaque: i32,
}

impl NameServer {
    pub(super) async fn connect(addr: &str) -> Result<Self, RegistrationError> {
        let stream = TcpStream::connect(addr).await.map_err(|e| RegistrationError::Connect(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        Ok(Self { stream, decoder: FrameDecoder::new(), next_opaque: 1 })
    }

    /// Sends `request` and reads its answer (other frames are skipped).
    pub(super) async fn call(
        &mut self,
        mut request: RemotingCommand,
    ) -> Result<RemotingCommand, RegistrationError> {
        let broken = |e: String| RegistrationError::Connection(e);
        let opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1).max(1);
        request.opaque = opaque;
        let mut wire = BytesMut::new();
        request.encode(&mut wire).map_err(|e| broken(e.to_string()))?;
        self.stream.write_all(&wire).await.map_err(|e| broken(e.to_string()))?;
        let mut buf = vec![0u8; 16 << 10];
        loop {
            match self.decoder.decode() {
                Ok(Some(cmd)) if cmd.is_response() && cmd.opaque == opaque => return Ok(cmd),
                Ok(Some(_)) => continue,
                Ok(None) => {}
                Err(e) => {
                    return Err(broken(format!(
                        "the NameServer sent bytes that are not a remoting frame: {e}"
                    )));
                }
            }
            let n = self.stream.read(&mut buf).await.map_err(|e| broken(e.to_string()))?;
            if n == 0 {
                return Err(broken("the NameServer closed the connection".into()));
            }
            self.decoder.feed(&buf[..n]);
        }
    }
}

async fn register(
    addr: &str,
    connection: &mut Option<NameServer>,
    target: &RegistrationTarget,
    register_as: RegisterAs,
) -> Result<logship_broker::register::RegisterBrokerResult, RegistrationError> {
    let work = async {
        if connection.is_none() {
            *connection = Some(NameServer::connect(addr).await?);
        }
        let b = &target.broker;
        let request = register_broker_request(
            &b.settings,
            register_as.broker_id,
            &target.ha_server_addr,
            &b.metadata.topics.serialize_wrapper(),
            register_as.state_version,
        );
        let conn = connection.as_mut().expect("connected above");
        parse_register_response(&conn.call(request).await?)
    };
    match tokio::time::timeout(target.timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(RegistrationError::Timeout(target.timeout.as_millis())),
    }
}

/// Completes when the role changes (an error once its sender is gone); pending without roles.
async fn role_changed(
    roles: &mut Option<watch::Receiver<crate::roles::Role>>,
) -> Result<(), watch::error::RecvError> {
    match roles {
        Some(r) => r.changed().await,
        None => std::future::pending().await,
    }
}

/// Waits until the NameServer closes `connection` (or sends garbage); pending while there is none.
async fn closed(connection: &mut Option<NameServer>) {
    let Some(c) = connection else { return std::future::pending().await };
    let mut buf = [0u8; 4096];
    loop {
        match c.stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => c.decoder.feed(&buf[..n]),
        }
    }
}

async fn run(
    addr: String,
    target: RegistrationTarget,
    status: Arc<Mutex<Registrations>>,
    mut topics: watch::Receiver<u64>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut connection: Option<NameServer> = None;
    let mut warned_masterless = false;
    let mut registered_as: Option<RegisterAs> = None;
    let mut roles = target.role_changes.clone();
    let with = |f: &mut dyn FnMut(&mut RegistrationSchedule)| {
        let mut s = status.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = s.get_mut(&addr) {
            f(s);
        }
    };
    loop {
        let next = status.lock().unwrap_or_else(|e| e.into_inner()).get(&addr).map(|s| s.next());
        let next = tokio::time::Instant::from_std(next.unwrap_or_else(Instant::now));
        tokio::select! {
            () = super::until_stopped(&mut stopped) => break,
            changed = topics.changed() => {
                if changed.is_ok() {
                    with(&mut |s| s.due_now(Instant::now()));
                }
                continue;
            }
            changed = role_changed(&mut roles) => {
                match changed {
                    Ok(()) => with(&mut |s| s.due_now(Instant::now())),
                    Err(_) => roles = None,
                }
                continue;
            }
            () = closed(&mut connection) => {
                // The NameServer dropped the connection, and the broker from its route with it.
                debug!("the NameServer closed the connection; registering again");
                connection = None;
                with(&mut |s| s.due_now(Instant::now()));
                continue;
            }
            () = tokio::time::sleep_until(next) => {}
        }
        let Some(now_as) = (target.register_as)() else {
            with(&mut |s| s.postpone(Instant::now()));
            continue;
        };
        match register(&addr, &mut connection, &target, now_as).await {
            Ok(result) => {
                if registered_as != Some(now_as) {
                    info!(
                        broker_id = now_as.broker_id,
                        state_version = now_as.state_version.unwrap_or(0),
                        master = result.master_addr.as_deref().unwrap_or("none"),
                        "registered with the NameServer"
                    );
                }
                registered_as = Some(now_as);
                let names_master = result.ha_server_addr.is_some();
                if target.learned_master.is_some() && !names_master && !warned_masterless {
                    warn!(
                        broker_name = %target.broker.settings.broker_name,
                        cluster = %target.broker.settings.broker_cluster_name,
                        "the NameServer names no master for this slave: check that brokerClusterName and \
                         brokerName match the master's, and that the master registers"
                    );
                }
                warned_masterless = target.learned_master.is_some() && !names_master;
                if let (Some(learned), Some(ha)) = (&target.learned_master, &result.ha_server_addr) {
                    learned.send_if_modified(|current| {
                        let changed = current.as_deref() != Some(ha.as_str());
                        if changed {
                            info!(master_ha = %ha, "the NameServer names the master");
                            *current = Some(ha.clone());
                        }
                        changed
                    });
                }
                if let (Some(master), Some(addr)) = (&target.master_remoting, &result.master_addr) {
                    master.send_if_modified(|current| {
                        let changed = current.as_deref() != Some(addr.as_str());
                        if changed {
                            *current = Some(addr.clone());
                        }
                        changed
                    });
                }
                with(&mut |s| s.succeeded(Instant::now(), result.clone()));
            }
            Err(e) => {
                connection = None;
                let failures =
                    status.lock().unwrap_or_else(|e| e.into_inner()).get(&addr).map_or(0, |s| s.failures());
                if failures == 0 {
                    warn!(error = %e, "registration with the NameServer failed; retrying with backoff");
                } else {
                    debug!(error = %e, failures, "registration with the NameServer failed again");
                }
                with(&mut |s| s.failed(Instant::now(), e.clone()));
            }
        }
    }
    let Some(RegisterAs { broker_id, .. }) = registered_as else { return };
    let unregister = async {
        if connection.is_none() {
            connection = Some(NameServer::connect(&addr).await?);
        }
        let request = unregister_broker_request(&target.broker.settings, broker_id);
        parse_unregister_response(&connection.as_mut().expect("connected above").call(request).await?)
    };
    match tokio::time::timeout(Duration::from_secs(3), unregister).await {
        Ok(Ok(())) => info!(broker_id, "unregistered from the NameServer"),
        Ok(Err(e)) => warn!(error = %e, "unregistering from the NameServer failed"),
        Err(_) => warn!("unregistering from the NameServer timed out (3 s)"),
    }
}

#[cfg(test)]
mod tests {
    use super::RegisterAs;
    use crate::roles::Role;

    #[test]
    fn a_controller_mode_broker_registers_as_its_role_with_the_master_epoch() {
        let master = Role::Master { epoch: 4 };
        assert_eq!(
            RegisterAs::for_role(Some(&master), 2),
            Some(RegisterAs { broker_id: 0, state_version: Some(4) })
        );
        let slave = Role::Slave { master_address: "127.0.0.1:10912".into(), master_broker_id: 1, epoch: 4 };
        assert_eq!(
            RegisterAs::for_role(Some(&slave), 2),
            Some(RegisterAs { broker_id: 2, state_version: Some(4) })
        );
        assert_eq!(RegisterAs::for_role(Some(&Role::None), 2), None, "no role: no registration");
        assert_eq!(
            RegisterAs::for_role(None, 1),
            Some(RegisterAs { broker_id: 1, state_version: None }),
            "outside controller mode: brokerId and the topic table's own version"
        );
    }
}
