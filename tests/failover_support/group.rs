//! A broker group: `n` `logship broker` processes (controller mode, automatic failover on etcd,
//! the keys of iface13) over one etcd cluster, each broker in its own network namespace when
//! [`Net::available`], on loopback otherwise.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::checker::{self, Replica};
use super::net::Net;
use crate::etcd_support::EtcdCluster;
use crate::process::{self, Log};

/// The lease every broker holds (`etcdLeaseTtlMs`): the 3 s.
pub const LEASE_TTL: Duration = Duration::from_millis(3000);
/// `etcdLeaseMarginMs`: a master closes its lease guard this long before the lease can expire.
pub const LEASE_MARGIN: Duration = Duration::from_millis(500);
/// The topic of the workload.
pub const TOPIC: &str = "FailoverTopic";
/// How long the group may take to do something it must do (a hang detector, not a measurement).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// One broker process of the group.
pub struct Broker {
    /// Its `brokerId` (1, 2, ...).
    pub id: i64,
    /// The address it binds and publishes (`brokerIP1`).
    pub ip: IpAddr,
    /// Its `listenPort` (remoting; HA is `listenPort + 1`, HTTP `listenPort + 2`).
    pub port: u16,
    /// Its store (`storePathRootDir`).
    pub dir: PathBuf,
    namespace: Option<String>,
    args: Vec<String>,
    child: Option<Child>,
    log: Log,
    /// The logs of its earlier lives (before a restart).
    earlier: String,
    paused: bool,
}

impl Broker {
    fn spawn(&mut self) {
        let mut command = match &self.namespace {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(process::bin());
                c
            }
            None => Command::new(process::bin()),
        };
        command.args(&self.args).env("RUST_LOG", "info").stdin(Stdio::null()).stdout(Stdio::null());
        let mut child = command.stderr(Stdio::piped()).spawn().expect("start logship");
        self.log = process::capture_stderr(&mut child);
        self.child = Some(child);
        self.paused = false;
    }

    /// Waits until it serves `/status`.
    pub fn wait_ready(&mut self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if self.status().is_some() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!("broker {} exited with {status}:\n{}", self.id, self.log()));
            }
            if start.elapsed() > PATIENCE {
                return Err(format!("broker {} did not start:\n{}", self.id, self.log()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `ip:port` of its HTTP API (httpListenPort = listenPort + 2).
    pub fn http_addr(&self) -> String {
        format!("{}:{}", self.ip, self.port + 2)
    }

    /// Whether its process runs (paused counts as running).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Whether it is SIGSTOPped.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// `GET /status` (2 s timeout); `None` if it does not answer 200.
    pub fn status(&self) -> Option<Value> {
        let agent = process::agent_with(Duration::from_secs(2), None);
        let r = agent.get(format!("http://{}/status", self.http_addr())).call().ok()?;
        match process::json_reply(r) {
            (200, v) => Some(v),
            _ => None,
        }
    }

    /// kill -9 (after SIGCONT if paused, so it dies at once), and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            if self.paused {
                process::signal(child.id(), "-CONT");
            }
            let _ = child.wait();
            self.paused = false;
            std::thread::sleep(Duration::from_millis(50));
            self.earlier.push_str(&self.log.lock().unwrap());
            self.earlier.push_str("\n--- killed -9 ---\n");
        }
    }

    /// SIGSTOP.
    pub fn pause(&mut self) {
        if let Some(child) = &self.child {
            process::signal(child.id(), "-STOP");
            self.paused = true;
        }
    }

    /// SIGCONT.
    pub fn resume(&mut self) {
        if let Some(child) = &self.child {
            process::signal(child.id(), "-CONT");
            self.paused = false;
        }
    }

    /// Starts it again over the same store (kill -9 first if it runs) and waits until it serves.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill9();
        self.spawn();
        self.wait_ready()
    }

    /// Everything it logged, over all its lives.
    pub fn log(&self) -> String {
        format!("{}{}", self.earlier, self.log.lock().unwrap())
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// What one `/status` poll of the group saw.
#[derive(Clone, Debug, Default)]
pub struct View {
    /// `(brokerId, status)` of every broker that answered.
    pub statuses: Vec<(i64, Value)>,
}

impl View {
    /// The brokers that say they are master with an open lease guard.
    pub fn masters(&self) -> Vec<i64> {
        self.statuses.iter().filter(|(id, s)| is_open_master(*id, s)).map(|(id, _)| *id).collect()
    }

    /// One line per broker: role, offsets and the group it sees.
    pub fn summary(&self) -> String {
        self.statuses
            .iter()
            .map(|(id, s)| {
                format!("broker {id}: role={} maxOffset={} group={}", s["role"], s["maxOffset"], s["group"])
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn of(&self, id: i64) -> Option<&Value> {
        self.statuses.iter().find(|(i, _)| *i == id).map(|(_, s)| s)
    }
}

/// Whether broker `id`'s status says it is master with its lease guard open (iface13: role
/// `SYNC_MASTER`, `group.masterId` its id, `group.leaseOpen`).
pub fn is_open_master(id: i64, status: &Value) -> bool {
    let group = &status["group"];
    status["role"] == "SYNC_MASTER"
        && group["masterId"].as_i64() == Some(id)
        && group["leaseOpen"].as_bool() == Some(true)
}

/// A broker group over its etcd (and namespaces); everything is killed and removed on drop.
pub struct Group {
    /// The brokers, `brokers[i].id == i + 1`.
    pub brokers: Vec<Broker>,
    /// The etcd cluster.
    pub etcd: EtcdCluster,
    /// The namespaces, when the group runs in them.
    pub net: Option<Net>,
    /// Where the brokers' stores are.
    pub dir: tempfile::TempDir,
}

impl Group {
    /// Starts `etcd_nodes` etcd members and `n` brokers, in namespaces if `namespaces`
    /// (an error if they cannot be made), then waits until one of them is master.
    pub fn start(etcd_nodes: usize, n: usize, namespaces: bool, extra: &[String]) -> Result<Self, String> {
        let net = if namespaces { Some(Net::create(n)?) } else { None };
        let etcd_host = net.as_ref().map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), Net::etcd_ip);
        let etcd = EtcdCluster::start_on(etcd_nodes, etcd_host);
        let dir = tempfile::tempdir().unwrap();
        let prefix = format!("/logship-test-{}-{}", std::process::id(), process::free_port());
        let mut brokers = Vec::new();
        for i in 0..n {
            let id = i as i64 + 1;
            let ip = net.as_ref().map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |net| net.broker_ip(i));
            // In a namespace every port is free; on loopback, probe for two.
            let port = if net.is_some() { 10911 } else { process::free_port_pair() };
            let store = dir.path().join(format!("broker-{id}"));
            let mut keys = vec![
                format!("brokerId={id}"),
                format!("brokerIP1={ip}"),
                "brokerClusterName=FailoverCluster".to_string(),
                "brokerName=broker-a".to_string(),
                "allAckInSyncStateSet=true".to_string(),
                "haHousekeepingInterval=2000".to_string(),
                // A slave that stops answering leaves the set after 3 s, not RocketMQ's 15 s.
                "haMaxTimeSlaveNotCatchup=3000".to_string(),
                format!("etcdEndpoints={}", etcd.endpoints().join(",")),
                format!("etcdKeyPrefix={prefix}"),
                format!("etcdLeaseTtlMs={}", LEASE_TTL.as_millis()),
                format!("etcdLeaseMarginMs={}", LEASE_MARGIN.as_millis()),
                "etcdLeaseRenewIntervalMs=1000".to_string(),
                "etcdRequestTimeoutMs=1000".to_string(),
            ];
            keys.extend(extra.iter().cloned());
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let mut args: Vec<String> =
                ["broker", "--store", &store.display().to_string(), "--listen-port", &port.to_string()]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
            args.extend(process::test_settings(&keys));
            let mut broker = Broker {
                id,
                ip,
                port,
                dir: store,
                namespace: net.as_ref().map(|net| net.namespace(i).to_string()),
                args,
                child: None,
                log: Log::default(),
                earlier: String::new(),
                paused: false,
            };
            broker.spawn();
            brokers.push(broker);
        }
        let mut group = Self { brokers, etcd, net, dir };
        for b in &mut group.brokers {
            b.wait_ready()?;
        }
        group.wait_for_master(PATIENCE)?;
        Ok(group)
    }

    /// Broker `id`.
    pub fn broker(&mut self, id: i64) -> &mut Broker {
        &mut self.brokers[(id - 1) as usize]
    }

    /// Polls every running, unpaused broker's `/status`.
    pub fn view(&self) -> View {
        let statuses = self
            .brokers
            .iter()
            .filter(|b| b.is_running() && !b.is_paused())
            .filter_map(|b| Some((b.id, b.status()?)))
            .collect();
        View { statuses }
    }

    /// Waits until exactly one broker is master with an open lease guard; its id.
    pub fn wait_for_master(&self, patience: Duration) -> Result<i64, String> {
        let start = Instant::now();
        loop {
            let view = self.view();
            if let [m] = view.masters()[..] {
                return Ok(m);
            }
            if start.elapsed() > patience {
                return Err(format!(
                    "no single master after {patience:?}: {:?}\n{}",
                    view.statuses,
                    self.logs()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the group is whole again: every broker runs, exactly one is master, its
    /// sync-state-set holds every broker, and every broker's `maxOffset` equals the master's
    /// (twice in a row). The master's id.
    pub fn wait_converged(&self, patience: Duration) -> Result<i64, String> {
        let start = Instant::now();
        let all: Vec<i64> = self.brokers.iter().map(|b| b.id).collect();
        let mut stable = 0;
        loop {
            let view = self.view();
            let ok = (|| {
                let [m] = view.masters()[..] else { return None };
                let status = view.of(m)?;
                let mut set: Vec<i64> =
                    status["group"]["syncStateSet"].as_array()?.iter().filter_map(Value::as_i64).collect();
                set.sort_unstable();
                if set != all || view.statuses.len() != all.len() {
                    return None;
                }
                let max = status["maxOffset"].as_u64()?;
                view.statuses.iter().all(|(_, s)| s["maxOffset"].as_u64() == Some(max)).then_some(m)
            })();
            match ok {
                Some(m) => {
                    stable += 1;
                    if stable >= 2 {
                        return Ok(m);
                    }
                }
                None => stable = 0,
            }
            if start.elapsed() > patience {
                return Err(format!(
                    "the group did not converge within {patience:?}:\n{}\n{}",
                    view.summary(),
                    self.logs()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// kill -9 every broker (their stores stay for the checker).
    pub fn stop_brokers(&mut self) {
        for b in &mut self.brokers {
            b.kill9();
        }
    }

    /// The stopped brokers' stores, read with logship_store.
    pub fn replicas(&self) -> Result<Vec<Replica>, String> {
        self.brokers.iter().map(|b| checker::read_replica(b.id, &b.dir)).collect()
    }

    /// Every broker's log (the last 150 lines of each) and etcd's, for a failure message.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for b in &self.brokers {
            let log = b.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(150)..];
            out.push_str(&format!("--- broker {} ({}):\n{}\n", b.id, b.http_addr(), tail.join("\n")));
        }
        out
    }

    /// Writes every broker's whole log into `dir` (for a soak's evidence).
    pub fn save_logs(&self, dir: &std::path::Path) {
        let _ = std::fs::create_dir_all(dir);
        for b in &self.brokers {
            let _ = std::fs::write(dir.join(format!("broker-{}.log", b.id)), process::strip_ansi(&b.log()));
        }
        let _ = std::fs::write(dir.join("etcd.log"), self.etcd.logs());
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.stop_brokers();
    }
}
