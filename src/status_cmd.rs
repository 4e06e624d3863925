//! `logship status`: a broker's replication state from its HTTP `/status`, like RocketMQ's
//! `mqadmin haStatus`. One report, or one every `-i` seconds; a table or `--json`.
//!
//! Exit codes follow health, as monitoring plugins expect: 0 OK; 1 WARNING (a replica out of
//! sync or away, fewer in-sync copies than expected, a slave behind); 2 CRITICAL (the master
//! refuses puts: fenced, or a SYNC_MASTER without an in-sync slave; a slave not streaming);
//! 3 UNKNOWN (the broker cannot be reached or answers nonsense, or `--forget` was refused).
//!
//! `--forget NAME` first makes a master forget a replica that is away (it was retired): a
//! replica seen since start stays expected, and the health WARNING, until then.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use logship::status::{Remoting, RoleStatus, Status};
use serde::Deserialize;
use serde_json::{Value, json};

/// `logship status` options.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The broker's HTTP address (httpListenPort, default listenPort + 2).
    #[arg(long, short, default_value = "127.0.0.1:10913", value_name = "HOST:PORT")]
    pub broker: String,
    /// Report again every SECS seconds (transfer rates are measured between reports).
    #[arg(long, short = 'i', value_name = "SECS")]
    pub interval: Option<f64>,
    /// Stop after N reports (with -i; default: until interrupted).
    #[arg(long, short = 'n', value_name = "N")]
    pub count: Option<u64>,
    /// Print JSON, one document per report.
    #[arg(long)]
    pub json: bool,
    /// The broker's `httpAuthToken`, if it has one (else read from `LOGSHIP_HTTP_TOKEN`).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// First make the master forget the away replica NAME (it was retired): it leaves the
    /// away list and the expected count (`POST /ha/forgetReplica`; needs httpAuthToken).
    #[arg(long, value_name = "NAME")]
    pub forget: Option<String>,
}

/// How healthy the broker's replication is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Health {
    /// Every expected replica in sync.
    Ok,
    /// Puts succeed, but with fewer copies than configured.
    Warning,
    /// Puts are refused or cannot be replicated.
    Critical,
    /// The broker could not be asked.
    Unknown,
}

impl Health {
    fn name(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::Warning => "WARNING",
            Self::Critical => "CRITICAL",
            Self::Unknown => "UNKNOWN",
        }
    }

    fn exit_code(self) -> u8 {
        match self {
            Self::Ok => 0,
            Self::Warning => 1,
            Self::Critical => 2,
            Self::Unknown => 3,
        }
    }
}

/// The health of a `/status` document, and the reasons it is not OK.
pub fn assess(status: &Status) -> (Health, Vec<String>) {
    let mut health = Health::Ok;
    let mut why = Vec::new();
    let mut worse = |h: Health, reason: String, why: &mut Vec<String>| {
        health = health.max(h);
        why.push(reason);
    };
    let master = match &status.node {
        RoleStatus::Unassigned(_) => {
            let why_none = "controller mode: no HA role yet (POST /ha/changeToMaster or /ha/changeToSlave)";
            worse(Health::Critical, why_none.into(), &mut why);
            return (health, why);
        }
        RoleStatus::Slave(slave) => {
            let m = &slave.master;
            if let Some(cause) = &m.append_error {
                worse(Health::Critical, format!("cannot store what the master sends: {cause}"), &mut why);
            } else if m.state != "STREAMING" {
                let state = if m.state.is_empty() { "UNKNOWN" } else { &m.state };
                worse(Health::Critical, format!("not streaming from the master ({state})"), &mut why);
            } else if !m.in_sync {
                worse(Health::Warning, format!("behind the master by {} bytes", m.lag_bytes), &mut why);
            }
            return (health, why);
        }
        RoleStatus::SyncMaster(m) | RoleStatus::AsyncMaster(m) => m,
    };
    if let Some(fence) = &master.fence {
        worse(Health::Critical, format!("fenced: {fence}"), &mut why);
    }
    let in_sync = master.slaves.iter().filter(|s| s.in_sync).count();
    for s in master.slaves.iter().filter(|s| !s.in_sync) {
        let name = if s.name.is_empty() { &s.address } else { &s.name };
        worse(
            Health::Warning,
            format!("replica {name} out of sync ({} bytes behind)", s.lag_bytes),
            &mut why,
        );
    }
    for a in &master.absent_replicas {
        worse(Health::Warning, format!("replica {} not connected", a.name), &mut why);
    }
    // A document without the counts (an older broker's): the master alone is expected, and the
    // in-sync slaves are the copies.
    let expected = if master.replicas_expected == 0 { 1 } else { master.replicas_expected };
    let copies = if master.replicas_in_sync == 0 { in_sync as u64 + 1 } else { master.replicas_in_sync };
    if copies < expected {
        worse(Health::Warning, format!("under-replicated: {copies} of {expected} copies in sync"), &mut why);
    }
    // In controller mode the sync policy (allAckInSyncStateSet, inSyncReplicas) decides what a
    // put waits for, and a master alone in its sync-state-set is a legal state.
    if matches!(status.node, RoleStatus::SyncMaster(_)) && in_sync == 0 && master.controller.is_none() {
        worse(
            Health::Critical,
            "SYNC_MASTER without an in-sync slave: puts cannot be replicated".into(),
            &mut why,
        );
    }
    (health, why)
}

/// The broker's `/status`: the document as served (for `--json`) and typed.
fn fetch(agent: &ureq::Agent, broker: &str, token: Option<&str>) -> Result<(Value, Status), String> {
    let url = format!("http://{broker}/status");
    let mut request = agent.get(&url);
    if let Some(token) = token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let mut response = request.call().map_err(|e| format!("cannot reach {url}: {e}"))?;
    let code = response.status().as_u16();
    let body = response.body_mut().read_to_string().map_err(|e| format!("reading {url}: {e}"))?;
    let value: Value =
        serde_json::from_str(&body).map_err(|e| format!("{url} answered {code} with no JSON: {e}"))?;
    if code != 200 {
        let error = value["error"].as_str().unwrap_or("");
        return Err(format!("{url} answered {code}: {error}"));
    }
    if value["role"].as_str().is_none() {
        return Err(format!("{url} answered a document without a role: is this a logship broker?"));
    }
    let status =
        Status::deserialize(&value).map_err(|e| format!("{url} answered a document it cannot read: {e}"))?;
    Ok((value, status))
}

/// Asks the master at `broker` to forget the away replica `name`.
fn forget(agent: &ureq::Agent, broker: &str, token: Option<&str>, name: &str) -> Result<(), String> {
    let url = format!("http://{broker}/ha/forgetReplica");
    let mut request = agent.post(&url).header("Content-Type", "application/json");
    if let Some(token) = token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let body = json!({ "replica": name }).to_string();
    let mut response = request.send(body.as_bytes()).map_err(|e| format!("cannot reach {url}: {e}"))?;
    let code = response.status().as_u16();
    if code == 200 {
        return Ok(());
    }
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let error = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or(text);
    Err(format!("{url} answered {code}: {error}"))
}

/// Bytes per second per replica (master) or of the slave's own log, between two reports.
fn rates(prev: Option<&(Instant, Status)>, now: Instant, status: &Status) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let Some((then, before)) = prev else { return out };
    let secs = now.duration_since(*then).as_secs_f64();
    if secs <= 0.0 {
        return out;
    }
    if status.node.slave().is_some() {
        if before.node.slave().is_some() {
            out.insert("self".into(), status.max_offset.saturating_sub(before.max_offset) as f64 / secs);
        }
        return out;
    }
    let sent = |v: &Status| -> BTreeMap<String, u64> {
        v.node.master().into_iter().flat_map(|m| &m.slaves).map(|s| (s.name.clone(), s.bytes_sent)).collect()
    };
    let (before, after) = (sent(before), sent(status));
    for (name, b) in after {
        if let Some(a) = before.get(&name) {
            out.insert(name, b.saturating_sub(*a) as f64 / secs);
        }
    }
    out
}

fn bytes_per_second(rate: Option<f64>) -> String {
    match rate {
        None => "-".into(),
        Some(r) if r >= 1024.0 * 1024.0 => format!("{:.1} MiB/s", r / (1024.0 * 1024.0)),
        Some(r) if r >= 1024.0 => format!("{:.1} KiB/s", r / 1024.0),
        Some(r) => format!("{r:.0} B/s"),
    }
}

fn number(n: Option<u64>) -> String {
    n.map_or_else(|| "-".into(), |n| n.to_string())
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// The table form of one report.
pub fn table(
    broker: &str,
    status: &Status,
    rates: &BTreeMap<String, f64>,
    health: Health,
    why: &[String],
) -> String {
    let mut out = String::new();
    let role = status.node.role();
    out.push_str(&format!(
        "{broker}  {role}  min {}  max {}  flushed {}",
        status.min_offset, status.max_offset, status.flushed_offset,
    ));
    match &status.node {
        RoleStatus::Slave(slave) => {
            let m = &slave.master;
            out.push('\n');
            out.push_str(&format!(
                "{:<22} {:<12} {:>12} {:>12} {:>10} {:>7} {:>7} {:>11}\n",
                "MASTER", "STATE", "ACK", "MASTER-END", "LAG-BYTES", "LAG-S", "IN-SYNC", "RATE"
            ));
            out.push_str(&format!(
                "{:<22} {:<12} {:>12} {:>12} {:>10} {:>7.1} {:>7} {:>11}\n",
                if m.address.is_empty() { "-" } else { &m.address },
                if m.state.is_empty() { "-" } else { &m.state },
                number(m.ack_offset),
                number(m.master_offset),
                m.lag_bytes,
                m.lag_seconds,
                yes_no(m.in_sync),
                bytes_per_second(rates.get("self").copied()),
            ));
        }
        RoleStatus::SyncMaster(master) | RoleStatus::AsyncMaster(master) => {
            let fence = master.fence.as_deref().unwrap_or("none");
            out.push_str(&format!("  replicated {}  fence {fence}\n", number(master.replicated_offset)));
            out.push_str(&format!(
                "{:<16} {:<22} {:>12} {:>10} {:>7} {:>7} {:>11}\n",
                "REPLICA", "ADDRESS", "ACK", "LAG-BYTES", "LAG-S", "IN-SYNC", "RATE"
            ));
            for s in &master.slaves {
                let rate = rates.get(&s.name).copied().or_else(|| {
                    // One report: the average since the connection opened.
                    (s.connected_seconds > 0.0).then(|| s.bytes_sent as f64 / s.connected_seconds)
                });
                out.push_str(&format!(
                    "{:<16} {:<22} {:>12} {:>10} {:>7.1} {:>7} {:>11}\n",
                    if s.name.is_empty() { "-" } else { &s.name },
                    if s.address.is_empty() { "-" } else { &s.address },
                    number(s.ack_offset),
                    s.lag_bytes,
                    s.lag_seconds,
                    yes_no(s.in_sync),
                    bytes_per_second(rate),
                ));
            }
            for a in &master.absent_replicas {
                out.push_str(&format!(
                    "{:<16} {:<22} {:>12} {:>10} {:>7} {:>7} {:>11}\n",
                    a.name,
                    "(not connected)",
                    number(a.ack_offset),
                    "-",
                    "-",
                    "no",
                    "-",
                ));
            }
        }
        RoleStatus::Unassigned(_) => {
            out.push_str(&format!(
                "  replicated -  fence none\n{:<16} {:<22} {:>12} {:>10} {:>7} {:>7} {:>11}\n",
                "REPLICA", "ADDRESS", "ACK", "LAG-BYTES", "LAG-S", "IN-SYNC", "RATE"
            ));
        }
    }
    out.push_str(&remoting_lines(status.remoting.as_ref(), role));
    out.push_str(&format!("health {}", health.name()));
    for w in why {
        out.push_str(&format!("; {w}"));
    }
    out.push('\n');
    out
}

/// One line per NameServer (its last registration's age, and its last error) and one for a
/// slave's metadata sync from its master (the last good sync's age, and its last error). A
/// slave's NameServer that answered but named no master gets what to check.
fn remoting_lines(remoting: Option<&Remoting>, role: &str) -> String {
    let ago =
        |ms: Option<u64>| ms.map_or("never".to_string(), |ms| format!("{:.1}s ago", ms as f64 / 1000.0));
    let mut out = String::new();
    let Some(remoting) = remoting else { return out };
    for (addr, n) in remoting.name_servers.iter().flatten() {
        out.push_str(&format!("namesrv {addr}  registered {}", ago(n.last_ok_ms_ago)));
        if let Some(e) = &n.last_error {
            out.push_str(&format!("  last error {} ({e})", ago(n.last_error_ms_ago)));
        }
        if role == "SLAVE" && n.last_ok_ms_ago.is_some() && n.master_addr.is_none() {
            out.push_str(
                "  names no master (check that brokerClusterName and brokerName match the master's)",
            );
        }
        out.push('\n');
    }
    if let Some(sync) = &remoting.slave_sync {
        out.push_str(&format!(
            "metadata sync from {}  last {}",
            sync.master.as_deref().unwrap_or("(no master yet)"),
            ago(sync.age_ms)
        ));
        if let Some(e) = &sync.last_error {
            out.push_str(&format!("  failing ({} in a row): {e}", sync.failures));
        }
        out.push('\n');
    }
    out
}

/// Runs `logship status`; the exit code follows the last report's health.
pub fn main(args: &StatusArgs) -> ExitCode {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    let interval = match args.interval {
        Some(secs) if !(secs.is_finite() && secs > 0.0) => {
            eprintln!("logship status: -i must be a positive number of seconds, not {secs}");
            return ExitCode::from(Health::Unknown.exit_code());
        }
        Some(secs) => Some(Duration::from_secs_f64(secs)),
        None => None,
    };
    let reports = if interval.is_some() { args.count.unwrap_or(u64::MAX) } else { 1 };
    let token =
        args.token.clone().or_else(|| std::env::var("LOGSHIP_HTTP_TOKEN").ok().filter(|t| !t.is_empty()));
    if let Some(name) = &args.forget {
        match forget(&agent, &args.broker, token.as_deref(), name) {
            Ok(()) => println!("forgot replica {name}: it is no longer expected"),
            Err(e) => {
                eprintln!("logship status: cannot forget replica {name}: {e}");
                return ExitCode::from(Health::Unknown.exit_code());
            }
        }
    }
    let mut prev: Option<(Instant, Status)> = None;
    let mut health = Health::Unknown;
    for n in 0..reports {
        if n > 0 {
            std::thread::sleep(interval.unwrap_or_default());
        }
        let now = Instant::now();
        match fetch(&agent, &args.broker, token.as_deref()) {
            Ok((served, status)) => {
                let (h, why) = assess(&status);
                health = h;
                let rates = rates(prev.as_ref(), now, &status);
                if args.json {
                    let doc = json!({
                        "broker": args.broker,
                        "health": h.name(),
                        "problems": why,
                        "ratesBytesPerSecond": rates,
                        "status": served,
                    });
                    println!("{doc}");
                } else {
                    print!("{}", table(&args.broker, &status, &rates, h, &why));
                    if interval.is_some() {
                        println!();
                    }
                }
                prev = Some((now, status));
            }
            Err(e) => {
                health = Health::Unknown;
                if args.json {
                    println!("{}", json!({ "broker": args.broker, "health": "UNKNOWN", "problems": [e] }));
                } else {
                    eprintln!("logship status: {e}");
                }
                prev = None;
            }
        }
    }
    ExitCode::from(health.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A partial `/status` document, typed as `logship status` reads it.
    fn doc(v: Value) -> Status {
        serde_json::from_value(v).expect("a status document")
    }

    /// A partial `remoting` part of `/status`.
    fn remoting(v: Value) -> Remoting {
        serde_json::from_value(v).expect("a remoting document")
    }

    #[test]
    fn the_table_shows_name_server_registration_and_metadata_sync_state() {
        let remoting = remoting(json!({
            "nameServers": {"10.0.0.1:9876": {"lastOkMsAgo": 1500, "lastError": "timed out", "lastErrorMsAgo": 40000}},
            "slaveSync": {"master": "10.0.0.2:10911", "ageMs": 2000, "lastError": "cannot connect", "failures": 3},
        }));
        let text = remoting_lines(Some(&remoting), "SLAVE");
        assert!(
            text.contains("namesrv 10.0.0.1:9876  registered 1.5s ago  last error 40.0s ago (timed out)"),
            "{text}"
        );
        assert!(
            text.contains(
                "metadata sync from 10.0.0.2:10911  last 2.0s ago  failing (3 in a row): cannot connect"
            ),
            "{text}"
        );
        assert_eq!(remoting_lines(None, "SLAVE"), "");
    }

    #[test]
    fn a_slave_whose_name_server_names_no_master_is_told_what_to_check() {
        let remoting = remoting(json!({
            "nameServers": {
                "10.0.0.1:9876": {"lastOkMsAgo": 1500, "masterAddr": null},
                "10.0.0.3:9876": {"lastOkMsAgo": 900, "masterAddr": "10.0.0.2:10911"},
            },
        }));
        let text = remoting_lines(Some(&remoting), "SLAVE");
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("names no master") && lines[0].contains("brokerClusterName"), "{text}");
        assert!(!lines[1].contains("names no master"), "{text}");
        assert!(
            !remoting_lines(Some(&remoting), "SYNC_MASTER").contains("names no master"),
            "a master has none"
        );
    }

    #[test]
    fn health_of_master_documents() {
        let ok = json!({"role": "SYNC_MASTER", "fence": null, "replicasExpected": 2,
            "slaves": [{"name": "s1", "inSync": true, "lagBytes": 0}], "absentReplicas": []});
        assert_eq!(assess(&doc(ok)).0, Health::Ok);
        let behind = json!({"role": "ASYNC_MASTER", "replicasExpected": 1,
            "slaves": [{"name": "s1", "inSync": false, "lagBytes": 10}]});
        assert_eq!(assess(&doc(behind)).0, Health::Warning);
        let absent = json!({"role": "ASYNC_MASTER", "replicasExpected": 2, "slaves": [],
            "absentReplicas": [{"name": "s1"}]});
        let (h, why) = assess(&doc(absent));
        assert_eq!(h, Health::Warning);
        assert!(why.iter().any(|w| w.contains("s1 not connected")), "{why:?}");
        let sync_alone = json!({"role": "SYNC_MASTER", "replicasExpected": 1, "slaves": []});
        assert_eq!(assess(&doc(sync_alone)).0, Health::Critical);
        let fenced = json!({"role": "ASYNC_MASTER", "fence": "restarted", "slaves": []});
        assert_eq!(assess(&doc(fenced)).0, Health::Critical);
    }

    #[test]
    fn health_of_controller_mode_documents() {
        let unassigned = json!({"role": "NONE", "controller": {"brokerId": 1}});
        let (h, why) = assess(&doc(unassigned));
        assert_eq!(h, Health::Critical);
        assert!(why.iter().any(|w| w.contains("no HA role")), "{why:?}");
        let alone = json!({"role": "SYNC_MASTER", "replicasExpected": 1, "slaves": [],
            "controller": {"epoch": 2, "syncStateSet": [1]}});
        assert_eq!(assess(&doc(alone)).0, Health::Ok, "a controller-mode master alone in its set");
    }

    #[test]
    fn health_of_slave_documents() {
        let ok = json!({"role": "SLAVE", "master": {"state": "STREAMING", "inSync": true}});
        assert_eq!(assess(&doc(ok)).0, Health::Ok);
        let behind =
            json!({"role": "SLAVE", "master": {"state": "STREAMING", "inSync": false, "lagBytes": 5}});
        assert_eq!(assess(&doc(behind)).0, Health::Warning);
        let down = json!({"role": "SLAVE", "master": {"state": "CONNECTING", "inSync": false}});
        assert_eq!(assess(&doc(down)).0, Health::Critical);
        let refused = json!({"role": "SLAVE", "master": {"state": "DISCONNECTED", "inSync": false,
            "appendError": "segment size mismatch at offset 5: set mappedFileSizeCommitLog=1048576"}});
        let (h, why) = assess(&doc(refused));
        assert_eq!(h, Health::Critical);
        assert!(why[0].contains("mappedFileSizeCommitLog=1048576"), "the cause, not only the state: {why:?}");
    }
}
