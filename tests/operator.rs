//! The operator's view of a running broker: `/metrics` as Prometheus reads it, `logship status`,
//! logs and errors.

mod process;
mod remoting_support;

use std::io::Write;
use std::process::{Command, Stdio};

use logship::status::Status;
use process::{Broker, eventually, have, sample};

fn promtool_check(text: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

#[test]
fn metrics_pass_promtool_check_on_master_and_slave() {
    if !have("promtool", "metrics_pass_promtool_check_on_master_and_slave") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (master, slave) = Broker::pair(dir.path(), &["--role", "SYNC_MASTER"]);
    eventually("the slave to connect", || master.status_doc().master().is_some_and(|m| m.slaves.len() == 1));
    assert_eq!(master.put("hello"), 200);
    for broker in [&master, &slave] {
        for accept in [None, Some("text/plain;version=0.0.4")] {
            let (code, _, text) = broker.get_text("/metrics", accept);
            assert_eq!(code, 200);
            let (ok, said) = promtool_check(&text);
            assert!(ok, "promtool check metrics (Accept {accept:?}) failed:\n{said}\n--- metrics:\n{text}");
        }
    }
}

#[test]
fn metrics_honour_the_accept_header() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start("master", &dir.path().join("m"), process::free_port_pair(), &[]);
    let (_, ct, text) = master.get_text("/metrics", Some("text/plain;version=0.0.4"));
    assert!(ct.starts_with("text/plain") && ct.contains("version=0.0.4"), "{ct}");
    assert!(!text.contains("# EOF"), "0.0.4 text has no EOF marker:\n{text}");
    assert!(text.contains("# TYPE logship_replicated_bytes_total counter"), "{text}");
    let (_, ct, text) = master.get_text("/metrics", Some("application/openmetrics-text;version=1.0.0"));
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    // Prometheus' own scrape header prefers OpenMetrics.
    let prometheus =
        "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2,*/*;q=0.1";
    let (_, ct, _) = master.get_text("/metrics", Some(prometheus));
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    let (_, ct, _) = master.get_text("/metrics", None);
    assert!(ct.starts_with("text/plain"), "no Accept: the classic text format: {ct}");
}

#[test]
fn metrics_name_replicas_stably_and_keep_a_dead_one_out_of_sync() {
    let dir = tempfile::tempdir().unwrap();
    let (master, mut slave) = Broker::pair(
        dir.path(),
        &[
            "--role",
            "SYNC_MASTER",
            "--set",
            "totalReplicas=2",
            "--set",
            "haReplicaAllowList=127.0.0.1",
            "--set",
            "replicaNames=broker-a-s1@127.0.0.1",
            "--set",
            "brokerClusterName=ClusterX",
            "--set",
            "brokerName=broker-a",
        ],
    );
    let metrics = || master.get_text("/metrics", None).2;
    eventually("the slave to be in sync", || {
        sample(&metrics(), "logship_slave_in_sync{").is_some_and(|v| v == 1.0)
    });
    assert_eq!(master.put("one"), 200);
    let text = metrics();
    let labels = r#"{cluster="ClusterX",broker_name="broker-a",replica="broker-a-s1"}"#;
    assert_eq!(sample(&text, &format!("logship_slave_in_sync{labels}")), Some(1.0), "{text}");
    assert_eq!(sample(&text, "logship_replicas_expected{"), Some(2.0), "{text}");
    assert_eq!(sample(&text, "logship_under_replicated{"), Some(0.0), "{text}");
    assert!(sample(&text, "logship_messages_in_total{").is_some_and(|n| n >= 1.0), "{text}");
    slave.kill9();
    eventually("the dead slave's series to show it out of sync", || {
        let text = metrics();
        sample(&text, &format!("logship_slave_in_sync{labels}")) == Some(0.0)
            && sample(&text, "logship_under_replicated{") == Some(1.0)
    });
}

fn logship_status(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(process::BIN).arg("status").args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[test]
fn status_command_shows_each_replica_and_exits_by_health() {
    let dir = tempfile::tempdir().unwrap();
    let (master, mut slave) = Broker::pair(
        dir.path(),
        &[
            "--set",
            "totalReplicas=2",
            "--set",
            "haReplicaAllowList=127.0.0.1",
            "--set",
            "replicaNames=broker-a-s1@127.0.0.1",
        ],
    );
    eventually("the slave to be in sync", || {
        master.status_doc().master().is_some_and(|m| m.slaves.len() == 1 && m.slaves[0].in_sync)
    });
    assert_eq!(master.put("one"), 200);
    let (code, out, err) = logship_status(&["--broker", &master.http_addr()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ASYNC_MASTER") && out.contains("fence none"), "{out}");
    let row = out.lines().find(|l| l.starts_with("broker-a-s1")).unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("127.0.0.1:") && row.contains(" yes "), "{row}");
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    assert!(out.contains("health OK"), "{out}");

    let (code, out, _) = logship_status(&["--broker", &master.http_addr(), "--json", "-i", "0.2", "-n", "2"]);
    assert_eq!(code, 0, "{out}");
    let docs: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(docs.len(), 2, "{out}");
    assert_eq!(docs[1]["health"], "OK");
    let reported: Status = serde_json::from_value(docs[1]["status"].clone()).unwrap();
    assert_eq!(reported.master().unwrap().slaves[0].name, "broker-a-s1");
    assert!(docs[1]["ratesBytesPerSecond"]["broker-a-s1"].is_number(), "{out}");

    let (code, out, _) = logship_status(&["--broker", &slave.http_addr()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("SLAVE") && out.contains("STREAMING"), "{out}");

    slave.kill9();
    eventually("the master to see the slave gone", || {
        master.status_doc().master().is_some_and(|m| m.slaves.is_empty())
    });
    let (code, out, _) = logship_status(&["--broker", &master.http_addr()]);
    assert_eq!(code, 1, "WARNING: {out}");
    assert!(out.contains("broker-a-s1") && out.contains("(not connected)"), "{out}");
    assert!(out.contains("under-replicated: 1 of 2"), "{out}");

    let (code, _, err) = logship_status(&["--broker", &slave.http_addr()]);
    assert_eq!(code, 3, "UNKNOWN when the broker is down: {err}");
    assert!(err.contains("cannot reach"), "{err}");
}

#[test]
fn status_command_is_critical_for_a_sync_master_without_slaves() {
    let dir = tempfile::tempdir().unwrap();
    let master =
        Broker::start("master", &dir.path().join("m"), process::free_port_pair(), &["--role", "SYNC_MASTER"]);
    let (code, out, _) = logship_status(&["--broker", &master.http_addr()]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("health CRITICAL"), "{out}");
}

#[test]
fn an_error_names_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let port = process::free_port_pair();
    let _first = Broker::start("master", &dir.path().join("a"), port, &[]);
    let out = Command::new(process::BIN)
        .args([
            "master",
            "--store",
            &dir.path().join("b").display().to_string(),
            "--listen-port",
            &port.to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("Address already in use").count(), 1, "{err}");
}

#[test]
fn logs_have_no_colour_codes_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start("master", &dir.path().join("m"), process::free_port_pair(), &[]);
    let log = master.stderr.lock().unwrap().clone();
    assert!(log.contains("logship ready"), "{log}");
    assert!(!log.contains('\u{1b}'), "ANSI escapes in a piped log: {log:?}");
}

#[test]
fn connection_failures_are_logged_at_warn() {
    let dir = tempfile::tempdir().unwrap();
    let nobody = process::free_port_pair();
    let slave = Broker::start(
        "slave",
        &dir.path().join("s"),
        process::free_port_pair(),
        &["--master", &format!("127.0.0.1:{nobody}")],
    );
    eventually("a WARN line for the refused connection", || {
        let log = slave.stderr.lock().unwrap();
        log.lines().any(|l| l.contains(" WARN ") && l.contains("cannot connect to master"))
    });
}

#[test]
fn config_warnings_are_printed_before_the_error_that_stops_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("broker-a-s.properties");
    // RocketMQ's stock slave file, with a typo, and no haMasterAddress.
    std::fs::write(
        &conf,
        "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=1\nbrokerRole=SLAVE\n\
         flushDiskType=ASYNC_FLUSH\nhaMasterAdress=10.0.0.1:10912\n",
    )
    .unwrap();
    let out = Command::new(process::BIN)
        .args([
            "slave",
            "--config",
            &conf.display().to_string(),
            "--store",
            &dir.path().join("s").display().to_string(),
        ])
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let warning = err.find("unknown key haMasterAdress").unwrap_or_else(|| panic!("no warning: {err}"));
    let error = err.find("\nlogship: ").unwrap_or_else(|| panic!("no error: {err}"));
    assert!(warning < error, "the warning comes first: {err}");
    assert!(err[error..].contains("haMasterAddress") && err[error..].contains("--master"), "{err}");
}

#[test]
fn stray_bytes_on_the_ha_port_show_as_a_refusal_in_status_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let port = process::free_port_pair();
    let master = Broker::start("master", &dir.path().join("m"), port, &[]);
    let mut probe = std::net::TcpStream::connect(("127.0.0.1", port + 1)).unwrap();
    probe.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    // Loopback peers are identified by default; their stray bytes are no real offset.
    let refusals = || master.status_doc().master().unwrap().ha_refusals.implausible_reports;
    eventually("the stray report to be refused", || refusals() == 1);
    let status = master.status_doc();
    let fields = status.master().unwrap();
    assert_eq!(fields.ha_trust.mode, "protected", "{status}");
    assert!(fields.fence.is_none(), "stray bytes must not fence: {status}");
    assert_eq!(master.put("still writable"), 200);
    let (_, _, text) = master.get_text("/metrics", None);
    let value = |name: &str, label: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    assert_eq!(value("logship_ha_refusals_total", "reason=\"implausible_report\""), Some(1.0), "{text}");
    assert_eq!(value("logship_fenced", ""), Some(0.0), "{text}");
}

/// Runs `logship master --config <config>` and expects a refusal: exit code 2 and the stderr.
/// A hang detector kills the process (and fails) if it neither exits nor refuses in time.
fn refused_config(config: &std::path::Path, store: &std::path::Path) -> String {
    // Under a 2 GiB address-space limit, so that a broker reading without bound fails the
    // test instead of exhausting the machine.
    let mut child = Command::new("sh")
        .args(["-c", "ulimit -v 2097152 && exec \"$0\" \"$@\"", process::BIN])
        .args(["master", "--config", &config.display().to_string(), "--store", &store.display().to_string()])
        .args(["--listen-port", "0", "--ha-listen-port", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = process::capture_stderr(&mut child);
    let status = process::wait_exit(&mut child);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let err = stderr.lock().unwrap().clone();
    assert_eq!(status.and_then(|s| s.code()), Some(2), "{err}");
    err
}

#[test]
fn a_configuration_file_above_1_mib_is_refused_naming_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    // /dev/zero never ends: the broker reads at most the cap and a byte more.
    let err = refused_config(std::path::Path::new("/dev/zero"), &dir.path().join("a"));
    assert!(err.contains("/dev/zero") && err.contains("1 MiB"), "{err}");
    let big = dir.path().join("big.conf");
    let mut text = String::from("brokerRole=ASYNC_MASTER\n");
    while text.len() <= 1 << 20 {
        text.push_str("# a comment line to make the file larger than the cap\n");
    }
    std::fs::write(&big, text).unwrap();
    let err = refused_config(&big, &dir.path().join("b"));
    assert!(err.contains("big.conf") && err.contains("1 MiB"), "{err}");
}

const FORGET_TOKEN: &str = "operator-token-0123456789";

/// A master with two slaves on one host and neither `totalReplicas` nor `replicaNames`: a
/// slave stopped with SIGTERM stays in `/status`, `logship status` and the metrics as away,
/// the counts never read "N of M" with N > M, and it leaves only when an operator forgets it
/// (`logship status --forget`, `POST /ha/forgetReplica`).
#[test]
fn a_stopped_slave_stays_away_until_an_operator_forgets_it() {
    let dir = tempfile::tempdir().unwrap();
    let token = format!("httpAuthToken={FORGET_TOKEN}");
    let master =
        Broker::start("master", &dir.path().join("m"), process::free_port_pair(), &["--set", &token]);
    let slave = |name: &str| {
        Broker::start(
            "slave",
            &dir.path().join(name),
            process::free_port_pair(),
            &["--master", &master.ha_addr()],
        )
    };
    let _s1 = slave("s1");
    let mut s2 = slave("s2");
    eventually("both slaves to be in sync", || {
        master
            .status_doc()
            .master()
            .is_some_and(|m| m.slaves.len() == 2 && m.slaves.iter().all(|r| r.in_sync))
    });
    assert_eq!(master.put("one"), 200);
    let metrics = || master.get_text("/metrics", None).2;
    let text = metrics();
    assert_eq!(sample(&text, "logship_replicas_expected{"), Some(3.0), "{text}");
    assert_eq!(sample(&text, "logship_replicas_in_sync{"), Some(3.0), "{text}");
    assert_eq!(sample(&text, "logship_under_replicated{"), Some(0.0), "{text}");
    let status = master.status_doc();
    let fields = status.master().unwrap();
    assert_eq!((fields.replicas_expected, fields.replicas_in_sync), (3, 3), "{status}");
    let broker = master.http_addr();
    let (code, out, err) = logship_status(&["--broker", &broker, "--token", FORGET_TOKEN]);
    assert_eq!(code, 0, "{out}{err}");

    s2.terminate();
    eventually("the master to see one slave", || {
        master.status_doc().master().is_some_and(|m| m.slaves.len() == 1)
    });
    let status = master.status_doc();
    let fields = status.master().unwrap();
    let away = &fields.absent_replicas;
    assert_eq!(away.len(), 1, "the stopped slave is away: {status}");
    let name = away[0].name.clone();
    assert!(away[0].away_seconds.is_some(), "{status}");
    assert_eq!((fields.replicas_expected, fields.replicas_in_sync), (3, 2), "{status}");
    assert!(fields.under_replicated, "{status}");
    let text = metrics();
    assert_eq!(sample(&text, "logship_replicas_expected{"), Some(3.0), "{text}");
    assert_eq!(sample(&text, "logship_replicas_in_sync{"), Some(2.0), "{text}");
    assert_eq!(sample(&text, "logship_under_replicated{"), Some(1.0), "{text}");
    let series = |text: &str| {
        let tag = format!("replica=\"{name}\"");
        text.lines().find(|l| l.starts_with("logship_slave_in_sync{") && l.contains(&tag)).map(str::to_string)
    };
    assert!(series(&text).is_some_and(|l| l.ends_with(" 0")), "{text}");
    let (code, out, _) = logship_status(&["--broker", &broker, "--token", FORGET_TOKEN]);
    assert_eq!(code, 1, "WARNING: {out}");
    assert!(out.contains(&format!("replica {name} not connected")), "{out}");
    assert!(out.contains("under-replicated: 2 of 3"), "{out}");

    // Forgetting needs the token, and names a replica that is away.
    let (code, body) = json_post(&broker, "/ha/forgetReplica", None, &format!(r#"{{"replica":"{name}"}}"#));
    assert_eq!(code, 401, "{body}");
    let (code, body) =
        json_post(&broker, "/ha/forgetReplica", Some(FORGET_TOKEN), r#"{"replica":"no-such-replica"}"#);
    assert_eq!(code, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("no-such-replica"), "{body}");
    let live = &fields.slaves[0].name;
    let (code, body) =
        json_post(&broker, "/ha/forgetReplica", Some(FORGET_TOKEN), &format!(r#"{{"replica":"{live}"}}"#));
    assert_eq!(code, 409, "a connected replica cannot be forgotten: {body}");

    let (code, out, err) = logship_status(&["--broker", &broker, "--token", FORGET_TOKEN, "--forget", &name]);
    assert!(out.contains(&format!("forgot replica {name}")), "{out}{err}");
    assert_eq!(code, 0, "{out}{err}");
    let status = master.status_doc();
    let fields = status.master().unwrap();
    assert!(fields.absent_replicas.is_empty(), "{status}");
    assert_eq!(fields.replicas_expected, 2, "{status}");
    let text = metrics();
    assert_eq!(sample(&text, "logship_replicas_expected{"), Some(2.0), "{text}");
    assert_eq!(sample(&text, "logship_under_replicated{"), Some(0.0), "{text}");
    assert_eq!(series(&text), None, "a forgotten replica has no series: {text}");
}

/// Two slaves on one host named in `replicaNames`: both are expected, and each is reported by
/// name.
#[test]
fn replica_names_can_name_two_slaves_on_one_host() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start(
        "master",
        &dir.path().join("m"),
        process::free_port_pair(),
        &["--set", "replicaNames=broker-a-s1@127.0.0.1, broker-a-s2@127.0.0.1"],
    );
    let status = master.status_doc();
    let fields = status.master().unwrap();
    assert_eq!(fields.replicas_expected, 3, "{status}");
    let away: Vec<&str> = fields.absent_replicas.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(away, ["broker-a-s1", "broker-a-s2"], "{status}");
    let _s1 = Broker::start(
        "slave",
        &dir.path().join("s1"),
        process::free_port_pair(),
        &["--master", &master.ha_addr()],
    );
    let _s2 = Broker::start(
        "slave",
        &dir.path().join("s2"),
        process::free_port_pair(),
        &["--master", &master.ha_addr()],
    );
    eventually("both named slaves to be in sync", || {
        let status = master.status_doc();
        let m = status.master().unwrap();
        let mut names: Vec<&str> = m.slaves.iter().filter(|r| r.in_sync).map(|r| r.name.as_str()).collect();
        names.sort();
        names == ["broker-a-s1", "broker-a-s2"] && m.absent_replicas.is_empty()
    });
}

/// `POST path` on `broker` with a JSON body and an optional bearer token.
fn json_post(broker: &str, path: &str, token: Option<&str>, body: &str) -> (u16, serde_json::Value) {
    let mut request =
        process::agent().post(format!("http://{broker}{path}")).header("Content-Type", "application/json");
    if let Some(t) = token {
        request = request.header("Authorization", &format!("Bearer {t}"));
    }
    process::json_reply(request.send(body.as_bytes()).unwrap())
}

/// A slave whose `mappedFileSizeCommitLog` differs from its master's: each retry logs one
/// ERROR naming the key, both sizes and the fix, and `/status` and `logship status` give the
/// same cause.
#[test]
fn a_segment_size_mismatch_names_the_key_both_sizes_and_the_fix_once_per_retry() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start("master", &dir.path().join("m"), process::free_port_pair(), &[]);
    let slave = Broker::start(
        "slave",
        &dir.path().join("s"),
        process::free_port_pair(),
        &["--master", &master.ha_addr(), "--set", "mappedFileSizeCommitLog=2097152"],
    );
    let body = vec![b'y'; 64 * 1024];
    for _ in 0..20 {
        assert_eq!(master.post("/topics/OpsTopic/messages", &body).0, 200);
    }
    let link = || slave.status_doc().slave().expect("a slave's status").master.clone();
    eventually("two retries", || link().append_failures >= 2);
    let link_now = link();
    let failures = link_now.append_failures;
    let cause = link_now.append_error.clone().unwrap_or_default();
    for part in
        ["mappedFileSizeCommitLog", "2097152", "1048576", "one record", "set mappedFileSizeCommitLog=1048576"]
    {
        assert!(cause.contains(part), "/status names {part:?}: {cause}");
    }
    assert!(!cause.contains("mapped_file_size_commit_log"), "{cause}");
    assert!(!cause.contains("segment ends"), "{cause}");
    eventually("the slave to log each failure", || {
        process::strip_ansi(&slave.log()).lines().filter(|l| l.contains(" ERROR ")).count() as u64 >= failures
    });
    let later = link().append_failures;
    let log = process::strip_ansi(&slave.log());
    let errors: Vec<&str> = log.lines().filter(|l| l.contains(" ERROR ")).collect();
    assert!(errors.len() as u64 <= later + 1, "one ERROR per retry ({later} retries):\n{log}");
    assert!(
        errors.iter().all(|l| l.contains("mappedFileSizeCommitLog=1048576")),
        "each names the fix:\n{log}"
    );
    let warns = log.lines().filter(|l| l.contains(" WARN ") && l.contains("segment")).count();
    assert_eq!(warns, 0, "no WARN repeating the cause:\n{log}");

    let (code, out, err) = logship_status(&["--broker", &slave.http_addr()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("mappedFileSizeCommitLog=1048576"), "the CLI gives the cause: {out}");
}

/// A slave pointed at its master's HTTP port or remoting port (listenPort) instead of
/// haListenPort says which port it reached and to use haListenPort, not that a push frame is
/// too large.
#[test]
fn a_slave_pointed_at_the_http_or_remoting_port_says_to_use_ha_listen_port() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start("master", &dir.path().join("m"), process::free_port_pair(), &[]);
    for (name, address, says) in [
        ("http", master.http_addr(), "an HTTP port"),
        ("remoting", master.remoting_addr().to_string(), "a RocketMQ remoting port"),
    ] {
        let slave = Broker::start(
            "slave",
            &dir.path().join(name),
            process::free_port_pair(),
            &["--master", &address],
        );
        let log = process::strip_ansi(&slave.log_until("haListenPort"));
        let line = log.lines().find(|l| l.contains("haListenPort")).unwrap();
        assert!(line.contains(says) && line.contains(&address), "{name}: {line}");
        assert!(!log.contains("exceeds the limit"), "{name}:\n{log}");
    }
}

/// A put refused because the master is fenced (here: restarted after a crash, waiting for its
/// replica) answers 503 with the fence's reason.
#[test]
fn a_fenced_put_answers_503_with_the_fences_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut master = Broker::start(
        "master",
        &dir.path().join("m"),
        process::free_port_pair(),
        &["--set", "totalReplicas=2", "--set", "haReplicaAllowList=127.0.0.1"],
    );
    assert_eq!(master.put("before the crash"), 200);
    master.restart();
    let fence = master
        .status_doc()
        .master()
        .and_then(|m| m.fence.clone())
        .unwrap_or_else(|| panic!("fenced after a crash"));
    let (code, body) = master.post("/topics/OpsTopic/messages", b"refused");
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["status"], "SERVICE_NOT_AVAILABLE", "{body}");
    let error = body["error"].as_str().unwrap_or_else(|| panic!("a reason: {body}"));
    assert!(error.contains(&fence), "the fence's reason {fence:?}: {error}");
}

/// Starts `logship master` on `store` with `extra` arguments and expects it to refuse to start;
/// its stderr.
fn refused_start(store: &std::path::Path, extra: &[&str]) -> String {
    let mut child = Command::new(process::BIN)
        .args([
            "master",
            "--store",
            &store.display().to_string(),
            "--listen-port",
            "0",
            "--ha-listen-port",
            "0",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = process::capture_stderr(&mut child);
    let status = process::wait_exit(&mut child);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let err = process::strip_ansi(&stderr.lock().unwrap().clone());
    assert!(status.is_some_and(|s| !s.success()), "refused to start: {err}");
    err
}

/// A second broker on a store another one runs on names the lock holder's PID.
#[test]
fn a_second_broker_on_one_store_names_the_lock_holders_pid() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("m");
    let first = Broker::start("master", &store, process::free_port_pair(), &[]);
    let err = refused_start(&store, &[]);
    let pid = format!("PID {}", first.child.id());
    assert!(err.contains(&pid) && err.contains("storePathRootDir"), "names {pid}: {err}");
}

/// A store that cannot be created or written names storePathRootDir. (Tests run as root here,
/// where permissions stop nothing: a path below a regular file fails for everybody.)
#[test]
fn an_unwritable_store_names_store_path_root_dir() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let store = file.join("store");
    let err = refused_start(&store, &[]);
    assert!(err.contains("storePathRootDir") && err.contains(&store.display().to_string()), "{err}");
}

/// The lines a slave logs for one connection cycle: after 5 reconnects to a master that closes
/// every connection, and 5 failed connects to a port nobody listens on, no line carries the
/// `conn` field twice or Rust `Debug` output, and a cycle costs at most 2 lines.
#[test]
fn log_lines_stay_readable_after_5_reconnects() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closing = listener.local_addr().unwrap().to_string();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(stream);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let slave =
        Broker::start("slave", &dir.path().join("s"), process::free_port_pair(), &["--master", &closing]);
    let nobody = format!("127.0.0.1:{}", process::free_port());
    let refused =
        Broker::start("slave", &dir.path().join("r"), process::free_port_pair(), &["--master", &nobody]);
    eventually("6 connections", || accepted.load(std::sync::atomic::Ordering::SeqCst) >= 6);
    let start_line = "logship ready";
    let log = process::strip_ansi(&slave.log());
    if std::env::var_os("SHOW_LOG").is_some() {
        println!("{log}");
    }
    let debug_output = ["Some(", "None", "ConnId(", " { "];
    for line in log.lines() {
        assert!(line.matches("conn=").count() <= 1, "the conn field once: {line}");
        for d in debug_output {
            assert!(!line.contains(d), "Rust Debug output {d:?}: {line}");
        }
        let b = line.as_bytes();
        let exponent = b
            .windows(4)
            .any(|w| w[0].is_ascii_digit() && w[1] == b'e' && w[2] == b'-' && w[3].is_ascii_digit());
        assert!(!exponent, "a float in Debug's exponent form: {line}");
    }
    let after: Vec<&str> = log.lines().skip_while(|l| !l.contains(start_line)).skip(1).collect();
    let cycles = accepted.load(std::sync::atomic::Ordering::SeqCst);
    let link: Vec<&&str> = after.iter().filter(|l| l.contains("ha_conn")).collect();
    assert!(
        link.len() <= 2 * (cycles + 1),
        "{} lines for {cycles} connections:\n{}",
        link.len(),
        after.join("\n")
    );
    // A failed connect costs one line, naming the error as `error`.
    let log = process::strip_ansi(&refused.log());
    let attempts = log.lines().filter(|l| l.contains("cannot connect to master")).count();
    let link = log.lines().filter(|l| l.contains("ha_conn")).count();
    assert!(attempts >= 4, "{attempts} attempts:\n{log}");
    assert_eq!(link, attempts, "one line per failed connect:\n{log}");
    assert!(log.lines().filter(|l| l.contains("cannot connect")).all(|l| l.contains(" error=")), "{log}");
}

/// A body a producer compressed (sysFlag bit 0, as a Java producer sets it above 4 KiB) is
/// marked in the HTTP pull, and served as the producer sent it with `decompress=true`.
#[test]
fn a_compressed_body_is_marked_in_the_pull_and_served_decompressed_on_request() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start("master", &dir.path().join("m"), process::free_port_pair(), &[]);
    let original = "a body the producer compressed ".repeat(200);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(original.as_bytes()).unwrap();
    let zlib = z.finish().unwrap();
    let mut client = remoting_support::Client::connect(master.remoting_addr());
    let mut request = remoting_support::send_request("OpsTopic", 0, "", &zlib);
    let mut header = remoting_support::v2("OpsTopic", 0, "");
    header.f = 1; // sysFlag: COMPRESSED
    request = request.with_header(&header);
    let answer = client.call(request);
    assert_eq!(answer.code, 0, "{:?}", answer.remark);
    let (code, pulled) = master.get("/topics/OpsTopic/queues/0/messages?offset=0");
    assert_eq!(code, 200, "{pulled}");
    let m = &pulled["messages"][0];
    assert_eq!(m["compressed"], true, "{m}");
    assert_eq!(m["compression"], "zlib", "{m}");
    assert_eq!(m["bodyEncoding"], "base64", "as stored: {m}");
    let (code, pulled) = master.get("/topics/OpsTopic/queues/0/messages?offset=0&decompress=true");
    assert_eq!(code, 200, "{pulled}");
    let m = &pulled["messages"][0];
    assert_eq!(m["body"], original.as_str(), "{m}");
    assert_eq!(m["bodyEncoding"], "utf8", "{m}");
    assert_eq!(m["decompressed"], true, "{m}");
}
