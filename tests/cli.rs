//! The `logship` binary as users run it: real processes, free ports, temporary directories,
//! HTTP over loopback, `kill -9`.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

#[path = "support/pki.rs"]
mod pki;
mod process;

use process::{BIN, Broker, agent, eventually, free_port_pair};

const TOPIC: &str = "CliTopic";

/// Puts `body` to the test topic with `query`: status code and JSON reply.
fn put(b: &Broker, body: &str, query: &str) -> (u16, Value) {
    b.post(&format!("/topics/{TOPIC}/messages{query}"), body.as_bytes())
}

fn max_offset(b: &Broker) -> u64 {
    b.status()["maxOffset"].as_u64().unwrap()
}

/// The commit log of a store directory, concatenated in segment order (1 MiB segments).
fn commit_log(dir: &Path, upto: u64) -> Vec<u8> {
    let mut names: Vec<_> =
        std::fs::read_dir(dir.join("commitlog")).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    let mut out = Vec::new();
    for n in names {
        out.extend(std::fs::read(n).unwrap());
    }
    out.truncate(upto as usize);
    out
}

fn master_and_slave(master_extra: &[&str]) -> (tempfile::TempDir, Broker, Broker) {
    let dir = tempfile::tempdir().unwrap();
    let mport = free_port_pair();
    let master = Broker::start("master", &dir.path().join("master"), mport, master_extra);
    let sport = free_port_pair();
    let ha = format!("127.0.0.1:{}", mport + 1);
    let slave = Broker::start(
        "slave",
        &dir.path().join("slave"),
        sport,
        &["--master", &ha, "--set", "slaveReadEnable=true"],
    );
    (dir, master, slave)
}

#[test]
fn messages_produced_over_http_are_read_back_from_the_slave() {
    let (_dir, master, slave) = master_and_slave(&["--role", "SYNC_MASTER"]);
    eventually("the slave to connect", || master.status()["slaves"].as_array().is_some_and(|s| s.len() == 1));
    let mut acked = Vec::new();
    for i in 0..20 {
        let (code, reply) = put(&master, &format!("hello {i}"), "?queueId=0&tags=TagA&keys=k1&color=blue");
        assert_eq!(code, 200, "{reply}");
        assert_eq!(reply["status"], "PUT_OK");
        assert_eq!(reply["queueOffset"], i);
        assert_eq!(reply["msgId"].as_str().unwrap().len(), 32);
        acked.push(reply);
    }
    eventually("the slave's consume queue", || {
        slave.get(&format!("/topics/{TOPIC}/queues/0/messages?offset=0&max=100")).1["messages"]
            .as_array()
            .is_some_and(|m| m.len() == 20)
    });
    let (code, read) = slave.get(&format!("/topics/{TOPIC}/queues/0/messages?offset=5&max=3"));
    assert_eq!(code, 200);
    let messages = read["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[0]["body"], "hello 5");
    assert_eq!(messages[0]["tags"], "TagA");
    assert_eq!(messages[0]["properties"]["KEYS"], "k1");
    assert_eq!(messages[0]["properties"]["color"], "blue");
    assert_eq!(messages[0]["msgId"], acked[5]["msgId"]);
    assert_eq!(read["nextOffset"], 8);
    assert_eq!(read["suggestPullingFromSlave"], false);
    let status = master.status();
    assert_eq!(status["role"], "SYNC_MASTER");
    assert_eq!(status["slaves"][0]["lagBytes"], 0);
    assert_eq!(slave.status()["master"]["state"], "STREAMING");
    let (code, metrics) = {
        let mut r = agent().get(master.url("/metrics")).call().unwrap();
        (r.status().as_u16(), r.body_mut().read_to_string().unwrap())
    };
    assert_eq!(code, 200);
    for name in [
        "logship_slave_lag_bytes",
        "logship_slave_lag_seconds",
        "logship_replicated_bytes_total",
        "logship_put_latency_seconds_bucket",
        "logship_connections",
        "logship_disk_used_ratio",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics:\n{metrics}");
    }
    assert!(metrics.contains("status=\"PUT_OK\""), "{metrics}");
}

#[test]
fn a_killed_slave_catches_up_after_restart() {
    let (_dir, master, mut slave) = master_and_slave(&[]);
    for i in 0..50 {
        assert_eq!(put(&master, &format!("before {i}"), "").0, 200);
    }
    eventually("the slave to catch up", || max_offset(&slave) == max_offset(&master));
    slave.kill9();
    for i in 0..200 {
        assert_eq!(put(&master, &"x".repeat(2000 + i), "").0, 200);
    }
    slave.restart();
    eventually("the restarted slave to catch up", || max_offset(&slave) == max_offset(&master));
    let end = max_offset(&master);
    assert_eq!(commit_log(&slave.dir, end), commit_log(&master.dir, end));
}

#[test]
fn a_killed_sync_master_keeps_every_acknowledged_message() {
    let (_dir, mut master, slave) = master_and_slave(&[
        "--role",
        "SYNC_MASTER",
        "--set",
        "totalReplicas=2",
        "--set",
        "haReplicaAllowList=127.0.0.1",
    ]);
    eventually("the slave to connect", || master.status()["slaves"].as_array().is_some_and(|s| s.len() == 1));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let (acked, stop, url) =
                (acked.clone(), stop.clone(), master.url(&format!("/topics/{TOPIC}/messages?queueId={p}")));
            std::thread::spawn(move || {
                let agent = agent();
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let body = format!("producer {p} message {i}");
                    let Ok(mut r) = agent.post(&url).send(&body) else { return };
                    if r.status() == 200 {
                        let reply: Value =
                            serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
                        acked.lock().unwrap().push((p, reply["queueOffset"].as_u64().unwrap(), body));
                    }
                    i += 1;
                }
            })
        })
        .collect();
    eventually("some acknowledged puts", || acked.lock().unwrap().len() >= 200);
    master.kill9();
    stop.store(true, Ordering::Relaxed);
    for p in producers {
        p.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    master.restart();
    // The slave reconnects only after its 5 s back-off, so the fence is still up here.
    let fence = master.status()["fence"].as_str().map(str::to_string);
    assert!(fence.as_deref().is_some_and(|f| f.contains("restarted after a crash")), "{fence:?}");
    assert_eq!(put(&master, "while fenced", "").0, 503);
    for (queue, offset, body) in &acked {
        let (code, read) =
            master.get(&format!("/topics/{TOPIC}/queues/{queue}/messages?offset={offset}&max=1"));
        assert_eq!(code, 200);
        assert_eq!(
            read["messages"][0]["body"],
            body.as_str(),
            "PUT_OK message lost: queue {queue} offset {offset}"
        );
    }
    // After a crash the master takes no puts until its slave has reported (it might hold bytes
    // the master lost); then it does.
    eventually("the restart fence to lift", || master.status()["fence"].is_null());
    assert_eq!(put(&master, "after the restart", "?queueId=7").0, 200);
    // The slave's log is a prefix of the master's.
    eventually("the slave to resume", || max_offset(&slave) == max_offset(&master));
    let end = max_offset(&slave);
    assert_eq!(commit_log(&slave.dir, end), commit_log(&master.dir, end));
}

/// After a crash a master with `totalReplicas=3` is fenced until two replicas report. A clean
/// stop (SIGTERM) while fenced does not lift the fence: the replicas it waits for have not
/// reported, so the restarted master is still fenced; once they report it takes puts, and a
/// clean restart after that is not fenced.
#[test]
fn the_restart_fence_survives_a_clean_restart_until_its_replicas_report() {
    let dir = tempfile::tempdir().unwrap();
    let mport = free_port_pair();
    let mut master = Broker::start(
        "master",
        &dir.path().join("master"),
        mport,
        &["--role", "SYNC_MASTER", "--set", "totalReplicas=3", "--set", "haReplicaAllowList=127.0.0.1"],
    );
    let ha = format!("127.0.0.1:{}", mport + 1);
    let mut slaves: Vec<Broker> = (0..2)
        .map(|i| {
            Broker::start(
                "slave",
                &dir.path().join(format!("slave{i}")),
                free_port_pair(),
                &["--master", &ha],
            )
        })
        .collect();
    eventually("both slaves to connect", || {
        master.status()["slaves"].as_array().is_some_and(|s| s.len() == 2)
    });
    assert_eq!(put(&master, "before the crash", "").0, 200);
    master.kill9();
    for slave in &mut slaves {
        slave.kill9();
    }
    master.restart();
    let fenced = |master: &Broker| {
        let fence = master.status()["fence"].as_str().map(str::to_string);
        assert!(
            fence.as_deref().is_some_and(|f| f.contains("waiting for 2")),
            "not fenced: {fence:?}\n{}",
            master.log()
        );
        assert_eq!(put(master, "while fenced", "").0, 503);
    };
    fenced(&master);
    // A clean stop while fenced, and a start: still fenced, whatever the store's abort marker says.
    let status = master.terminate();
    assert!(status.is_some_and(|s| s.success()), "{status:?}\n{}", master.log());
    master.restart();
    fenced(&master);
    assert!(master.dir.join("restartFence").exists(), "the fence is recorded in the store");
    let log = master.log();
    assert!(log.contains("restart fence"), "the start says why it is fenced:\n{log}");
    // The replicas report: the fence lifts, and a clean restart now takes puts at once.
    for slave in &mut slaves {
        slave.restart();
    }
    eventually("the restart fence to lift", || master.status()["fence"].is_null());
    assert_eq!(put(&master, "after the replicas reported", "").0, 200);
    let status = master.terminate();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    master.restart();
    assert!(master.status()["fence"].is_null(), "{}", master.status());
    assert!(!master.dir.join("restartFence").exists(), "the lifted fence left no marker");
    eventually("both slaves to reconnect", || {
        master.status()["slaves"].as_array().is_some_and(|s| s.len() == 2)
    });
    assert_eq!(put(&master, "after a clean restart", "").0, 200);
}

#[test]
fn sigterm_shuts_down_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut master = Broker::start("master", &dir.path().join("m"), free_port_pair(), &[]);
    assert_eq!(put(&master, "one", "").0, 200);
    assert!(master.dir.join("abort").exists(), "the abort marker exists while running");
    let status = master.terminate().expect("an exit after SIGTERM");
    assert!(status.success(), "{status:?}");
    assert!(!master.dir.join("abort").exists(), "a clean shutdown removes the abort marker");
    master.log_until("logship stopped cleanly");
}

#[test]
fn bad_requests_get_their_documented_errors() {
    let (_dir, master, slave) = master_and_slave(&[]);
    let (code, reply) = put(&master, "x", "?queueId=abc");
    assert_eq!((code, reply["error"].as_str().unwrap()), (400, "queueId \"abc\" is not a queue number"));
    let mut r = agent().post(master.url("/topics/bad%20topic/messages")).send("x").unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.body_mut().read_to_string().unwrap().contains("topic \\\"bad topic\\\""));
    let (code, reply) = master.get(&format!("/topics/{TOPIC}/queues/0/messages?max=0"));
    assert_eq!((code, reply["error"].as_str().unwrap()), (400, "max must be between 1 and 1000"));
    let (code, reply) = put(&slave, "x", "");
    assert_eq!((code, reply["status"].as_str().unwrap()), (503, "SERVICE_NOT_AVAILABLE"));
    assert_eq!(reply["stored"], false);
    // A SYNC_MASTER with no slave stores the message but says it is not replicated.
    let dir = tempfile::tempdir().unwrap();
    let lonely = Broker::start("master", dir.path(), free_port_pair(), &["--role", "SYNC_MASTER"]);
    let (code, reply) = put(&lonely, "alone", "");
    assert_eq!(
        (code, reply["status"].as_str().unwrap(), &reply["stored"]),
        (502, "SLAVE_NOT_AVAILABLE", &Value::Bool(true))
    );
}

#[test]
fn slave_refuses_reads_without_slave_read_enable() {
    let dir = tempfile::tempdir().unwrap();
    let mport = free_port_pair();
    let _master = Broker::start("master", &dir.path().join("m"), mport, &[]);
    let ha = format!("127.0.0.1:{}", mport + 1);
    let slave = Broker::start("slave", &dir.path().join("s"), free_port_pair(), &["--master", &ha]);
    let (code, reply) = slave.get(&format!("/topics/{TOPIC}/queues/0/messages"));
    assert_eq!(code, 403);
    assert!(reply["error"].as_str().unwrap().contains("slaveReadEnable"));
}

fn run_with_config(role: &str, conf: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broker.conf");
    std::fs::write(&path, conf).unwrap();
    Command::new(BIN).args([role, "--config", path.to_str().unwrap()]).output().unwrap()
}

#[test]
fn bad_config_fails_before_starting_naming_key_and_value() {
    let cases = [
        ("master", "brokerRole=MASTER\n", "invalid value for brokerRole: \"MASTER\""),
        ("master", "haTransferBatchSize=zero\n", "invalid value for haTransferBatchSize: \"zero\""),
        (
            "slave",
            "brokerRole=SLAVE\n",
            "brokerRole=SLAVE haMasterAddress=(unset) namesrvAddr=(unset): a slave needs haMasterAddress",
        ),
        ("master", "listenPort=20911\nhaListenPort=20911\n", "listenPort=20911 haListenPort=20911"),
        ("master", "brokerRole=SLAVE\nhaMasterAddress=127.0.0.1:1\n", "use `logship slave`"),
    ];
    for (role, conf, expected) in cases {
        let out = run_with_config(role, conf);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{conf}: {stderr}");
        assert!(stderr.contains(expected), "{conf}: expected {expected:?} in {stderr}");
    }
}

#[test]
fn unknown_config_key_is_a_warning_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port_pair();
    let conf = dir.path().join("broker.conf");
    std::fs::write(
        &conf,
        format!(
            "listenPort={port}\nstorePathRootDir={}\nhaTransferBatchSzie=1\n",
            dir.path().join("s").display()
        ),
    )
    .unwrap();
    let broker =
        Broker::spawn(vec!["master".into(), "--config".into(), conf.display().to_string()], dir.path());
    broker.log_until("unknown key haTransferBatchSzie");
}

#[test]
fn demo_with_2000_messages_exits_zero_with_identical_logs() {
    let out = Command::new(BIN).args(["demo", "--messages", "2000"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.matches("identical").count(), 2, "{stdout}");
    assert!(stdout.contains("PUT_OK 2000"), "{stdout}");
    assert!(stdout.contains("demo passed"), "{stdout}");
}

#[test]
fn demo_survives_a_slave_killed_mid_run() {
    let out =
        Command::new(BIN).args(["demo", "--messages", "3000", "--kill-slave-at", "1000"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("stopped slave-1") && stdout.contains("restarted slave-1"), "{stdout}");
    assert_eq!(stdout.matches("identical").count(), 2, "{stdout}");
}

/// Writes `name`'s certificate and key from `ca` into `dir`; returns the `--set` arguments for
/// them and the CA.
fn tls_args(dir: &Path, ca: &pki::Ca, name: &str) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    let id = ca.issue(&[name]);
    let mut args = Vec::new();
    for (key, file, pem) in [
        ("haTlsCertPath", format!("{name}.pem"), id.cert.clone()),
        ("haTlsKeyPath", format!("{name}.key"), id.key.clone()),
        ("haTlsCaPath", "ca.pem".to_string(), ca.pem()),
    ] {
        let path = dir.join(file);
        std::fs::write(&path, pem).unwrap();
        args.push("--set".to_string());
        args.push(format!("{key}={}", path.display()));
    }
    args
}

#[test]
fn tls_brokers_replicate_over_an_authenticated_link_and_a_plain_slave_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ca = pki::Ca::new("logship test CA");
    let certs = dir.path().join("certs");
    let mport = free_port_pair();
    let mut margs: Vec<String> = ["--role", "SYNC_MASTER", "--set", "haTlsMode=required", "--set"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    margs.push("haTlsReplicaNames=replica-a".into());
    margs.extend(tls_args(&certs, &ca, pki::MASTER_NAME));
    let margs: Vec<&str> = margs.iter().map(String::as_str).collect();
    let master = Broker::start("master", &dir.path().join("master"), mport, &margs);
    let ha = format!("127.0.0.1:{}", mport + 1);
    let mut sargs: Vec<String> =
        ["--master", &ha, "--set", "haTlsEnable=true", "--set"].iter().map(|s| s.to_string()).collect();
    sargs.push(format!("haTlsServerName={}", pki::MASTER_NAME));
    sargs.extend(tls_args(&certs, &ca, "replica-a"));
    let sargs: Vec<&str> = sargs.iter().map(String::as_str).collect();
    let slave = Broker::start("slave", &dir.path().join("slave"), free_port_pair(), &sargs);
    eventually("the TLS slave to connect", || {
        master.status()["slaves"].as_array().is_some_and(|s| s.len() == 1)
    });
    for i in 0..5 {
        let (code, reply) = put(&master, &format!("secret {i}"), "");
        assert_eq!(code, 200, "{reply}");
    }
    let end = max_offset(&master);
    eventually("the slave to catch up", || max_offset(&slave) == end);
    let link = &master.status()["slaves"][0];
    assert_eq!((link["trusted"].as_bool(), link["replica"].as_str()), (Some(true), Some("replica-a")));
    // A classic plain slave gets nothing from a master that requires TLS.
    let plain = Broker::start("slave", &dir.path().join("plain"), free_port_pair(), &["--master", &ha]);
    eventually("the plain slave to be refused", || {
        master.status()["haRefusals"]["plainRefused"].as_u64().is_some_and(|n| n >= 1)
    });
    assert_eq!(max_offset(&plain), 0);
    assert_eq!(master.status()["slaves"].as_array().map(Vec::len), Some(1));
}

#[test]
fn master_refuses_the_slaves_master_flag() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["master", "--store", dir.path().to_str().unwrap(), "--master", "127.0.0.1:10912", "--check"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--master sets haMasterAddress") && stderr.contains("`logship slave`"),
        "{stderr}"
    );
}

#[test]
fn check_and_print_config_read_the_file_without_starting_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broker.conf");
    let store = dir.path().join("store");
    std::fs::write(
        &path,
        format!("storePathRootDir={}\nbrokerRole=SYNC_MASTER\nbrokerrole=x\n", store.display()),
    )
    .unwrap();
    let conf = path.to_str().unwrap();
    let out = Command::new(BIN)
        .args(["master", "-c", conf, "--check", "--set", "haTransferBatchSize=65536"])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("configuration OK, 1 warning(s)"), "{stdout}");
    assert!(stderr.contains("did you mean brokerRole?"), "{stderr}");
    assert!(!store.exists(), "--check opened the store");

    let out = Command::new(BIN)
        .args(["master", "-c", conf, "--print-config", "--set", "haTransferBatchSize=65536"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let line =
        |key: &str| stdout.lines().find(|l| l.starts_with(&format!("{key}="))).unwrap_or("").to_string();
    assert!(
        line("brokerRole").contains("SYNC_MASTER") && line("brokerRole").ends_with(&format!("# {conf}:2")),
        "{stdout}"
    );
    assert!(
        line("haTransferBatchSize").contains("65536")
            && line("haTransferBatchSize").ends_with("# command line"),
        "{stdout}"
    );
    assert!(line("slaveTimeout").ends_with("# default"), "{stdout}");
    assert!(!store.exists(), "--print-config opened the store");

    std::fs::write(&path, "brokerRole=MASTER\n").unwrap();
    let out = Command::new(BIN).args(["master", "-c", conf, "--check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid value for brokerRole: \"MASTER\""));
}

#[test]
fn the_readme_is_a_landing_page_with_exactly_the_two_commands() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 200, "the README has {lines} lines; move reference text into docs/ (at most 200)");
    let block = readme
        .split("## Two commands")
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|b| b.split_once("```").map(|(b, _)| b))
        .expect("a `## Two commands` section with a sh block");
    let commands: Vec<&str> = block.lines().map(|l| l.split('#').next().unwrap().trim()).collect();
    assert_eq!(commands, ["cargo run --release -- demo", "cargo test --workspace"]);
    // The test command must be the one CI runs, and `demo` a subcommand the binary has (the
    // demo tests above run it).
    let ci = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run")).unwrap();
    assert!(ci.contains("cargo test --workspace"), ".ci/run no longer runs the README's test command");
    let help = Command::new(BIN).arg("--help").output().unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("demo"), "the binary has no demo subcommand");
}

#[test]
fn the_readmes_master_and_slave_broker_conf_pass_check() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let blocks: Vec<&str> =
        readme.split("```properties\n").skip(1).filter_map(|b| b.split_once("```").map(|(b, _)| b)).collect();
    assert_eq!(blocks.len(), 2, "the README shows a master's and a slave's broker.conf");
    let dir = tempfile::tempdir().unwrap();
    for (role, conf) in ["master", "slave"].into_iter().zip(blocks) {
        let path = dir.path().join(format!("{role}.conf"));
        std::fs::write(&path, conf).unwrap();
        let out = Command::new(BIN).args([role, "-c", path.to_str().unwrap(), "--check"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{role}: {stderr}");
        assert!(
            !stderr.contains("unknown key") && !stderr.contains("not used by logship"),
            "{role}: {stderr}"
        );
    }
}
