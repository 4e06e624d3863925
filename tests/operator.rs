//! The operator's view of a running broker: `/metrics` as Prometheus reads it, `logship status`,
//! logs and errors.

mod process;

use std::io::Write;
use std::process::{Command, Stdio};

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
    eventually("the slave to connect", || master.status()["slaves"].as_array().is_some_and(|s| s.len() == 1));
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
        master.status()["slaves"].as_array().is_some_and(|s| s.len() == 1 && s[0]["inSync"] == true)
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
    assert_eq!(docs[1]["status"]["slaves"][0]["name"], "broker-a-s1");
    assert!(docs[1]["ratesBytesPerSecond"]["broker-a-s1"].is_number(), "{out}");

    let (code, out, _) = logship_status(&["--broker", &slave.http_addr()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("SLAVE") && out.contains("STREAMING"), "{out}");

    slave.kill9();
    eventually("the master to see the slave gone", || {
        master.status()["slaves"].as_array().is_some_and(Vec::is_empty)
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
    eventually("the stray report to be refused", || master.status()["haRefusals"]["implausibleReports"] == 1);
    assert_eq!(master.status()["haTrust"]["mode"], "protected", "{}", master.status());
    assert!(master.status()["fence"].is_null(), "stray bytes must not fence: {}", master.status());
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
