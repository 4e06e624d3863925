//! logship-broker against Apache RocketMQ's own broker metadata managers (`TopicConfigManager`,
//! `ConsumerOffsetManager`, `SubscriptionGroupManager`, `ScheduleMessageService`), run from
//! `tests/interop/rocketmq-broker-config` for rocketmq-broker 4.9.7 and 5.5.0:
//!
//! - files Java's managers write load in logship with the same content, and the reverse;
//! - with the file torn, both sides load the `.bak` the other wrote;
//! - the same operations (topic auto-creation, retry and DLQ topics, commits, group creation,
//!   deletes) give the same tables and version counters on both sides.
//!
//! Both sides print a table as sorted lines (`Dump.java` and [`dump`] here) and the lines are
//! compared. Without `LOGSHIP_REQUIRE_JAVA`, a machine lacking `java` or `mvn` skips each test
//! with one line on stderr; with it set, that fails the test.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::SystemTime;

use logship_broker::names::perm;
use logship_broker::{BrokerMetadata, BrokerSettings, RocketmqLine, SubscriptionGroupConfig, TopicConfig};

#[derive(Clone, Copy, Debug)]
struct Line {
    line: RocketmqLine,
    version: &'static str,
    profile: &'static str,
    slot: usize,
}

const V4: Line = Line { line: RocketmqLine::V4_9, version: "4.9.7", profile: "rocketmq-4", slot: 0 };
const V5: Line = Line { line: RocketmqLine::V5, version: "5.5.0", profile: "rocketmq-5", slot: 1 };

static BUILDS: [OnceLock<Result<String, String>>; 2] = [OnceLock::new(), OnceLock::new()];

fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/interop/rocketmq-broker-config")
}

fn required() -> bool {
    std::env::var("LOGSHIP_REQUIRE_JAVA").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == "target") {
            continue;
        }
        let t = if path.is_dir() {
            newest_source(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH)
        };
        newest = newest.max(t);
    }
    newest
}

/// Builds the tool for `line` (unless fresh) and returns its classpath.
fn build(line: Line) -> Result<String, String> {
    if !runs("java", "-version") {
        return Err("no `java` on PATH".into());
    }
    let dir = project();
    let out = dir.join("target").join(line.version);
    let jar = out.join("tool.jar");
    let deps = out.join("classpath.txt");
    let fresh = std::fs::metadata(&jar).and_then(|m| m.modified()).is_ok_and(|built| {
        built >= newest_source(&dir)
            && std::fs::read_to_string(&deps)
                .is_ok_and(|cp| cp.trim().split(':').all(|e| Path::new(e).is_file()))
    });
    if !fresh {
        if !runs("mvn", "-v") {
            return Err("no `mvn` on PATH to build the RocketMQ config tool".into());
        }
        let mut last = String::new();
        for offline in [true, false] {
            let mut cmd = Command::new("mvn");
            cmd.current_dir(&dir).args(["-q", "-B", "package", "-P", line.profile]);
            if offline {
                cmd.arg("-o");
            }
            let o = cmd.output().map_err(|e| format!("cannot run mvn: {e}"))?;
            if o.status.success() {
                last.clear();
                break;
            }
            last = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        }
        if !last.is_empty() {
            let tail: Vec<&str> = last.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect();
            return Err(format!(
                "the config tool for rocketmq-broker {} did not build:\n{}",
                line.version,
                tail.join("\n")
            ));
        }
    }
    let deps = std::fs::read_to_string(&deps).map_err(|e| format!("cannot read {}: {e}", deps.display()))?;
    Ok(format!("{}:{}", jar.display(), deps.trim()))
}

fn tool(line: Line, test: &str) -> Option<Tool> {
    match BUILDS[line.slot].get_or_init(|| build(line)) {
        Ok(cp) => Some(Tool { classpath: cp.clone() }),
        Err(why) if required() => panic!("LOGSHIP_REQUIRE_JAVA is set, but {why}"),
        Err(why) => {
            use std::io::Write as _;
            let first = why.lines().next().unwrap_or_default();
            let _ = writeln!(
                std::io::stderr(),
                "{test}: skipped against rocketmq-broker {}: {first}",
                line.version
            );
            None
        }
    }
}

struct Tool {
    classpath: String,
}

impl Tool {
    fn run(&self, args: &[&str]) {
        let o = Command::new("java")
            .args([
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-Drocketmq.client.logUseSlf4j=false",
                "-cp",
                &self.classpath,
            ])
            .arg("logship.brokerconfig.Tool")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run java");
        assert!(
            o.status.success(),
            "java Tool {args:?} failed ({}):\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .filter(|l| !l.contains("logback"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    fn write(&self, root: &Path) {
        self.run(&["write", root.to_str().unwrap()]);
    }

    fn dump(&self, root: &Path) -> String {
        let out = root.parent().unwrap().join(format!("java-dump-{}", std::process::id()));
        self.run(&["dump", root.to_str().unwrap(), out.to_str().unwrap()]);
        let text = std::fs::read_to_string(&out).unwrap();
        std::fs::remove_file(&out).unwrap();
        text
    }
}

fn settings(line: Line) -> BrokerSettings {
    let mut s = BrokerSettings::default();
    s.line = line.line;
    s.broker_cluster_name = "LogshipCluster".into();
    s.broker_name = "broker-a".into();
    s
}

fn attrs(a: &std::collections::BTreeMap<String, String>) -> String {
    let inner: Vec<String> = a.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", inner.join(","))
}

fn version(v: logship_broker::DataVersion, line: Line) -> String {
    match line.line {
        RocketmqLine::V4_9 => format!("timestamp={} counter={}", v.timestamp, v.counter),
        _ => format!("timestamp={} counter={} stateVersion={}", v.timestamp, v.counter, v.state_version),
    }
}

/// The lines `Dump.java` prints for the same tables.
fn dump(m: &BrokerMetadata, line: Line) -> String {
    let v5 = line.line == RocketmqLine::V5;
    let mut lines = Vec::new();
    for t in m.topics.table().values() {
        let mut s = format!(
            "topic {} read={} write={} perm={} filter={} sysflag={} order={}",
            t.topic_name,
            t.read_queue_nums,
            t.write_queue_nums,
            t.perm,
            t.topic_filter_type.as_str(),
            t.topic_sys_flag,
            t.order
        );
        if v5 {
            write!(s, " attributes={}", attrs(&t.attributes)).unwrap();
        }
        lines.push(s);
    }
    lines.push(format!("topics.dataVersion {}", version(m.topics.data_version(), line)));
    for (key, queues) in m.offsets.table() {
        for (q, o) in queues {
            lines.push(format!("offset {key} {q} {o}"));
        }
    }
    if v5 {
        lines.push(format!("offsets.dataVersion {}", version(m.offsets.data_version(), line)));
    }
    for g in m.groups.table().values() {
        let mut s = format!(
            "group {} consumeEnable={} consumeFromMinEnable={} consumeBroadcastEnable={}",
            g.group_name, g.consume_enable, g.consume_from_min_enable, g.consume_broadcast_enable
        );
        if v5 {
            write!(s, " consumeMessageOrderly={}", g.consume_message_orderly).unwrap();
        }
        write!(
            s,
            " retryQueueNums={} retryMaxTimes={} brokerId={} whichBrokerWhenConsumeSlowly={} notifyConsumerIdsChangedEnable={}",
            g.retry_queue_nums, g.retry_max_times, g.broker_id, g.which_broker_when_consume_slowly, g.notify_consumer_ids_changed_enable
        )
        .unwrap();
        if v5 {
            let policy = g.group_retry_policy.get("type").and_then(|t| t.as_str()).unwrap_or("null");
            write!(
                s,
                " groupSysFlag={} consumeTimeoutMinute={} retryPolicy={policy} attributes={}",
                g.group_sys_flag,
                g.consume_timeout_minute,
                attrs(&g.attributes)
            )
            .unwrap();
        }
        lines.push(s);
    }
    if v5 {
        for (group, topics) in m.groups.serialize_wrapper().forbidden_table.unwrap_or_default() {
            for (topic, value) in topics {
                lines.push(format!("forbidden {group} {topic} {value}"));
            }
        }
    }
    lines.push(format!("groups.dataVersion {}", version(m.groups.data_version(), line)));
    for (level, offset) in m.delays.table() {
        lines.push(format!("delay {level} {offset}"));
    }
    if v5 {
        lines.push(format!("delay.dataVersion {}", version(m.delays.data_version(), line)));
    }
    lines.sort();
    lines.join("\n") + "\n"
}

/// The lines, without the ones nobody can match: 4.9.7's SubscriptionGroupManager loses the
/// file's dataVersion on load (its field is final and has no setter, so fastjson leaves a new
/// one, stamped with the time of the load), so that line is Java's clock, not the file.
fn comparable(text: &str, line: Line) -> String {
    text.lines()
        .filter(|l| !(line.line == RocketmqLine::V4_9 && l.starts_with("groups.dataVersion")))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The lines with every timestamp blanked: for comparing two runs of the same operations.
fn without_timestamps(text: &str) -> String {
    text.lines()
        .map(|l| {
            l.split(' ')
                .map(|w| if w.starts_with("timestamp=") { "timestamp=_" } else { w })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The scenario of `Tool.write`, through logship's API.
fn scenario(root: &Path, line: Line) -> BrokerMetadata {
    let v5 = line.line == RocketmqLine::V5;
    let m = BrokerMetadata::open(root, settings(line), 1_000).unwrap();
    let now = 2_000;
    m.topics.create_in_send_message("TopicA", "TBW102", 4, 0, now).unwrap();
    m.topics.create_in_send_message("TopicBig", "TBW102", 16, 0, now).unwrap();
    let rw = perm::READ | perm::WRITE;
    m.topics.create_in_send_message_back("%RETRY%GroupA", 1, rw, None, 0, now).unwrap();
    m.topics.create_in_send_message_back("%DLQ%GroupA", 1, rw, None, 0, now).unwrap();
    let mut order = TopicConfig::with_queues("OrderTopic", 2, 2, rw);
    order.order = true;
    if v5 {
        order.attributes.insert("+message.type".into(), "FIFO".into());
    }
    m.topics.update_topic_config(order, now).unwrap();
    m.topics.delete_topic_config("TopicBig", now).unwrap();
    m.topics.delete_topic_config("SELF_TEST_TOPIC", now).unwrap();
    m.topics.persist().unwrap();
    m.topics.persist().unwrap();

    for (topic, group, q, o) in [
        ("TopicA", "GroupA", 0, 12),
        ("TopicA", "GroupA", 1, 3),
        ("TopicA", "GroupA", 2, 0),
        ("TopicA", "GroupA", 3, 1_234_567_890_123),
        ("%RETRY%GroupA", "GroupA", 0, 5),
        ("TopicA", "GroupB", 0, 7),
    ] {
        m.offsets.commit_offset(group, topic, q, o, now);
    }
    m.offsets.persist().unwrap();
    m.offsets.commit_offset("GroupA", "TopicA", 1, 4, now);
    m.offsets.persist().unwrap();

    m.groups.find_subscription_group_config("GroupA", now).unwrap();
    let mut b = SubscriptionGroupConfig::new("GroupB");
    b.retry_max_times = 3;
    b.consume_broadcast_enable = false;
    b.which_broker_when_consume_slowly = 2;
    if v5 {
        b.consume_message_orderly = true;
        b.consume_timeout_minute = 20;
    }
    m.groups.update_subscription_group_config(b, now).unwrap();
    if v5 {
        m.groups.update_forbidden("GroupA", "TopicA", 1, true, now);
    }
    m.groups.delete_subscription_group_config("CID_ONSAPI_OWNER", now).unwrap();
    m.groups.persist().unwrap();
    m.groups.persist().unwrap();

    m.delays.update_offset(1, 10, now);
    m.delays.update_offset(3, 7, now);
    m.delays.update_offset(18, 0, now);
    m.delays.persist().unwrap();
    m.delays.update_offset(3, 8, now);
    m.delays.persist().unwrap();
    m
}

fn config_files() -> [&'static str; 4] {
    ["topics.json", "consumerOffset.json", "subscriptionGroup.json", "delayOffset.json"]
}

fn java_writes_and_logship_reads(line: Line, test: &str) {
    let Some(java) = tool(line, test) else { return };
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("store");
    java.write(&root);
    for f in config_files() {
        assert!(root.join("config").join(f).is_file(), "Java wrote no {f}");
        assert!(root.join("config").join(format!("{f}.bak")).is_file(), "Java wrote no {f}.bak");
    }
    let expected = java.dump(&root);
    assert!(expected.contains("offset TopicA@GroupA 3 1234567890123"), "{expected}");
    let ours = BrokerMetadata::open(&root, settings(line), 5_000).unwrap();
    assert_eq!(comparable(&dump(&ours, line), line), comparable(&expected, line));

    // Torn files: both sides fall back to the .bak Java wrote, and agree on its content.
    for f in config_files() {
        let path = root.join("config").join(f);
        let text = std::fs::read(&path).unwrap();
        std::fs::write(&path, &text[..text.len() / 2]).unwrap();
    }
    let expected_bak = java.dump(&root);
    assert_ne!(expected_bak, expected, "the .bak files hold the previous versions");
    let ours = BrokerMetadata::open(&root, settings(line), 5_000).unwrap();
    assert_eq!(comparable(&dump(&ours, line), line), comparable(&expected_bak, line));
}

fn logship_writes_and_java_reads(line: Line, test: &str) {
    let Some(java) = tool(line, test) else { return };
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("store");
    drop(scenario(&root, line));
    // Reopened, as Java's dump reopens: deleted defaults are back on both sides.
    let written = dump(&BrokerMetadata::open(&root, settings(line), 5_000).unwrap(), line);
    assert_eq!(comparable(&java.dump(&root), line), comparable(&written, line));

    // Torn files: Java falls back to the .bak logship kept, as logship does.
    for f in config_files() {
        let path = root.join("config").join(f);
        let text = std::fs::read(&path).unwrap();
        std::fs::write(&path, &text[..text.len() / 3]).unwrap();
    }
    let ours_bak = BrokerMetadata::open(&root, settings(line), 5_000).unwrap();
    let bak = dump(&ours_bak, line);
    assert_ne!(bak, written, "the .bak files hold the previous versions");
    assert_eq!(comparable(&java.dump(&root), line), comparable(&bak, line));
}

fn the_same_operations_give_the_same_tables(line: Line, test: &str) {
    let Some(java) = tool(line, test) else { return };
    let d = tempfile::tempdir().unwrap();
    let (jroot, root) = (d.path().join("java"), d.path().join("logship"));
    java.write(&jroot);
    let theirs = java.dump(&jroot);
    let ours = scenario(&root, line);
    drop(ours);
    // Reopened, as Java's dump reopens: deleted defaults are back on both sides.
    let ours = BrokerMetadata::open(&root, settings(line), 5_000).unwrap();
    assert_eq!(
        without_timestamps(&comparable(&dump(&ours, line), line)),
        without_timestamps(&comparable(&theirs, line))
    );
}

#[test]
fn files_rocketmq_4_writes_load_in_logship_with_the_same_content() {
    java_writes_and_logship_reads(V4, "files_rocketmq_4_writes_load_in_logship_with_the_same_content");
}

#[test]
fn files_rocketmq_5_writes_load_in_logship_with_the_same_content() {
    java_writes_and_logship_reads(V5, "files_rocketmq_5_writes_load_in_logship_with_the_same_content");
}

#[test]
fn files_logship_writes_load_in_rocketmq_4_with_the_same_content() {
    logship_writes_and_java_reads(V4, "files_logship_writes_load_in_rocketmq_4_with_the_same_content");
}

#[test]
fn files_logship_writes_load_in_rocketmq_5_with_the_same_content() {
    logship_writes_and_java_reads(V5, "files_logship_writes_load_in_rocketmq_5_with_the_same_content");
}

#[test]
fn the_same_operations_give_rocketmq_4s_tables() {
    the_same_operations_give_the_same_tables(V4, "the_same_operations_give_rocketmq_4s_tables");
}

#[test]
fn the_same_operations_give_rocketmq_5s_tables() {
    the_same_operations_give_the_same_tables(V5, "the_same_operations_give_rocketmq_5s_tables");
}
