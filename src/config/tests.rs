//! The configuration's unit tests.

use super::*;

fn load_text(text: &str) -> Result<Loaded, BrokerConfigError> {
    let mut raw = BTreeMap::new();
    for (k, v, line) in parse_properties(text.as_bytes(), "broker.conf")? {
        raw.insert(k, Setting { value: v, origin: format!("broker.conf:{line}") });
    }
    from_map(raw)
}

#[test]
fn properties_format_handles_comments_separators_escapes_and_continuations() {
    let text = "# comment\n! also\n\nbrokerRole = SYNC_MASTER\nlistenPort:20911\nstorePathRootDir /data/\\\n  store\nx=a\\u0041\\tb\n";
    let got = parse_properties(text.as_bytes(), "f").unwrap();
    let pairs: Vec<_> = got.iter().map(|(k, v, _)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        pairs,
        [
            ("brokerRole", "SYNC_MASTER"),
            ("listenPort", "20911"),
            ("storePathRootDir", "/data/store"),
            ("x", "aA\tb")
        ]
    );
}

#[test]
fn rocketmq_broker_conf_loads_with_rocketmq_defaults_elsewhere() {
    let loaded = load_text(
        "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\nbrokerRole=SYNC_MASTER\n\
         flushDiskType=ASYNC_FLUSH\nlistenPort=30911\n",
    )
    .unwrap();
    let s = loaded.settings;
    assert_eq!(s.broker_role, BrokerRole::SyncMaster);
    assert_eq!(s.ha_listen_port, 30912, "haListenPort defaults to listenPort + 1");
    assert_eq!(s.ha_transfer_batch_size, 32768);
    assert_eq!(s.effective_ack_policy(), AckPolicy::AnySlave);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(s.registered_broker_id(), 0);
    assert_eq!((s.listen_port, s.http_listen_port()), (30911, 30913), "the remoting port, HTTP at + 2");
    assert_eq!((s.broker_cluster_name.as_str(), s.broker_name.as_str()), ("DefaultCluster", "broker-a"));
}

#[test]
fn store_recovery_and_disk_keys_reach_the_store_config() {
    let loaded = load_text(
        "rebuildConsumeQueues=true\ntruncateOnCorruption=true\ncleanFileForciblyEnable=true\n\
         diskSpaceCleanForciblyRatio=0.8\ndiskSpaceWarningLevelRatio=0.95\nwarmMapedFileEnable=false\n",
    )
    .unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let mut c = logship_store::StoreConfig::default();
    loaded.settings.store.apply(&mut c);
    assert!(c.recovery.rebuild_consume_queues && c.recovery.truncate_on_corruption);
    assert!(c.clean_file_forcibly_enable && !c.warm_mapped_file_enable);
    assert_eq!((c.disk_space_clean_forcibly_ratio, c.disk_space_warning_level_ratio), (0.8, 0.95));
    let defaults = load_text("").unwrap().settings.store;
    assert!(!defaults.clean_file_forcibly_enable, "no forced deletion unless asked");
    assert!(!defaults.rebuild_consume_queues && !defaults.truncate_on_corruption);
    let err = load_text("diskSpaceWarningLevelRatio=190\n").unwrap_err();
    assert!(err.to_string().contains("diskSpaceWarningLevelRatio: \"190\""), "{err}");
}

#[test]
fn disk_ratios_in_rocketmq_5s_integer_percent_read_as_java_reads_them() {
    // RocketMQ 5's MessageStoreConfig declares both as `int` percents (90 and 85); a Java 5
    // broker.conf must load unchanged. A value with a decimal point is a fraction.
    let loaded = load_text("diskSpaceCleanForciblyRatio=80\ndiskSpaceWarningLevelRatio=95\n").unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let store = &loaded.settings.store;
    assert_eq!((store.disk_space_clean_forcibly_ratio, store.disk_space_warning_level_ratio), (0.8, 0.95));
    let defaults = load_text("").unwrap().settings.store;
    assert_eq!(
        (defaults.disk_space_clean_forcibly_ratio, defaults.disk_space_warning_level_ratio),
        (0.85, 0.9)
    );
    for bad in ["0", "101", "-5", "0.0", "1.5", "ninety"] {
        let err = load_text(&format!("diskSpaceWarningLevelRatio={bad}\n")).unwrap_err().to_string();
        assert!(err.contains("a percent from 1 to 100"), "{bad}: {err}");
    }
}

#[test]
fn unknown_key_is_a_warning_naming_it() {
    let loaded = load_text("brokerRole=ASYNC_MASTER\nzzzUnheardOf=65536\n").unwrap();
    assert_eq!(loaded.warnings, ["broker.conf:2: unknown key zzzUnheardOf; ignored"]);
}

#[test]
fn an_unknown_key_names_the_key_meant() {
    let loaded =
        load_text("brokerrole=ASYNC_MASTER\nhaTransferBatchSzie=65536\nhaMasterAdress=h:1\n").unwrap();
    assert_eq!(
        loaded.warnings,
        [
            "broker.conf:1: unknown key brokerrole; ignored (did you mean brokerRole?)",
            "broker.conf:2: unknown key haTransferBatchSzie; ignored (did you mean haTransferBatchSize?)",
            "broker.conf:3: unknown key haMasterAdress; ignored (did you mean haMasterAddress?)",
        ]
    );
}

#[test]
fn the_legacy_spelling_maped_file_size_commit_log_sets_the_segment_size() {
    let loaded = load_text("mapedFileSizeCommitLog=16777216\n").unwrap();
    assert_eq!(loaded.settings.mapped_file_size_commit_log, 16 << 20);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn both_spellings_of_the_segment_size_with_different_values_are_refused() {
    let err = load_text("mappedFileSizeCommitLog=16777216\nmapedFileSizeCommitLog=33554432\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "mappedFileSizeCommitLog=16777216 mapedFileSizeCommitLog=33554432: two spellings of one key with \
         different values; keep mappedFileSizeCommitLog alone"
    );
    let same = load_text("mappedFileSizeCommitLog=16777216\nmapedFileSizeCommitLog=16777216\n").unwrap();
    assert_eq!(same.settings.mapped_file_size_commit_log, 16 << 20);
}

#[test]
fn rocketmq_keys_logship_does_not_use_are_named_as_such() {
    let loaded = load_text("useReentrantLockWhenPutMessage=true\nwaitTimeMillsInSendQueue=200\n").unwrap();
    assert_eq!(
        loaded.warnings,
        [
            "broker.conf:1: RocketMQ key useReentrantLockWhenPutMessage is not used by logship; ignored",
            "broker.conf:2: RocketMQ key waitTimeMillsInSendQueue is not used by logship; ignored",
        ]
    );
}

/// The setters (`set<Key>`) of `classes`, read with one `javap` over `jars`.
fn java_setters(jars: &[PathBuf], classes: &[&str]) -> Vec<String> {
    let classpath = std::env::join_paths(jars).unwrap();
    let out = std::process::Command::new("javap")
        .arg("-cp")
        .arg(classpath)
        .args(classes)
        .output()
        .expect("javap runs");
    assert!(out.status.success(), "javap {classes:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(" void set")?.1.split_once('(').map(|(name, _)| name.to_string()))
        .map(|name| name[..1].to_ascii_lowercase() + &name[1..])
        .collect()
}

#[test]
fn every_java_broker_and_store_key_of_4_9_and_5_is_known() {
    let required = std::env::var("LOGSHIP_REQUIRE_JAVA").is_ok_and(|v| !v.is_empty() && v != "0");
    let m2 = PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
        .join(".m2/repository/org/apache/rocketmq");
    let mut missing = Vec::new();
    let mut read = 0;
    for version in ["4.9.7", "5.5.0"] {
        let jars: Vec<PathBuf> = ["rocketmq-common", "rocketmq-store", "rocketmq-remoting"]
            .iter()
            .map(|a| m2.join(format!("{a}/{version}/{a}-{version}.jar")))
            .collect();
        if let Some(jar) = jars.iter().find(|j| !j.exists()) {
            assert!(!required, "{} is missing (LOGSHIP_REQUIRE_JAVA is set)", jar.display());
            continue;
        }
        let mut classes = vec![
            "org.apache.rocketmq.common.BrokerConfig",
            "org.apache.rocketmq.store.config.MessageStoreConfig",
            "org.apache.rocketmq.remoting.netty.NettyServerConfig",
            "org.apache.rocketmq.remoting.netty.NettyClientConfig",
        ];
        if version.starts_with('5') {
            classes.push("org.apache.rocketmq.common.BrokerIdentity");
        }
        for key in java_setters(&jars, &classes) {
            read += 1;
            if !all_key_names().any(|k| k == key) && !rocketmq_keys::is_rocketmq_key(&key) {
                missing.push(format!("{key} ({version})"));
            }
        }
    }
    if read == 0 {
        assert!(!required, "no RocketMQ jar read");
        eprintln!("skipped: no RocketMQ jars in {}", m2.display());
    }
    assert!(missing.is_empty(), "RocketMQ keys unknown to logship: {missing:?}");
}

#[test]
fn every_declared_default_value_is_what_the_broker_uses() {
    let base = BrokerSettings::default();
    for k in SECTIONS.iter().flat_map(|s| s.keys.iter()) {
        let keys::KeyDefault::Value(v) = k.default else { continue };
        let raw = BTreeMap::from([(k.name.to_string(), Setting { value: v.into(), origin: "test".into() })]);
        let loaded = from_map(raw).unwrap_or_else(|e| panic!("{}={v}: {e}", k.name));
        let mut s = loaded.settings;
        if k.roles == keys::BROKER {
            continue;
        }
        s.controller = None;
        assert_eq!(s, base, "{}: the declared default {v:?} is not the default", k.name);
    }
    let mut c = ControllerKeys::unset();
    let mut etcd = EtcdKeys::default();
    for k in SECTIONS.iter().flat_map(|s| s.keys.iter()).filter(|k| k.roles == keys::BROKER) {
        let keys::KeyDefault::Value(v) = k.default else { continue };
        let (mut s, mut f) = (BrokerSettings::default(), Flags::default());
        assert!(set_broker_key(&mut s, &mut c, &mut etcd, &mut f, "test", k.name, v).unwrap(), "{}", k.name);
        assert_eq!((&c, &etcd), (&ControllerKeys::unset(), &EtcdKeys::default()), "{}={v}", k.name);
    }
}

#[test]
fn the_configuration_reference_lists_the_declared_keys() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let tables = keys::markdown(SECTIONS);
    let (begin, end) =
        ("<!-- keys: generated by `logship config-keys`; do not edit -->\n", "<!-- end of keys -->");
    let split = doc.split_once(begin).and_then(|(head, rest)| Some((head, rest.split_once(end)?)));
    let Some((head, (inside, tail))) = split else { panic!("docs/configuration.md lacks the key markers") };
    if inside != tables && std::env::var_os("LOGSHIP_BLESS").is_some() {
        std::fs::write(&path, format!("{head}{begin}{tables}{end}{tail}")).unwrap();
        return;
    }
    assert!(
        inside == tables,
        "docs/configuration.md's key tables differ from the declarations in src/config/: rerun this test \
         with LOGSHIP_BLESS=1 to rewrite them (or paste the output of `cargo run -- config-keys`)"
    );
}

#[test]
fn every_boolean_key_warns_on_a_value_java_reads_as_false() {
    let loaded = load_text("autoCreateTopicEnable=yes\nhaTlsEnable=1\n").unwrap();
    assert_eq!(
        loaded.warnings,
        [
            "broker.conf:1: autoCreateTopicEnable=\"yes\" reads as false, as Java's Boolean.parseBoolean does; write true or false",
            "broker.conf:2: haTlsEnable=\"1\" reads as false, as Java's Boolean.parseBoolean does; write true or false",
        ]
    );
}

#[test]
fn an_etcd_key_without_endpoints_is_named_as_the_file_first_sets_it() {
    let text = "enableControllerMode=true\nbrokerId=1\netcdLeaseTtlMs=3000\netcdKeyPrefix=/x\n";
    let loaded = load_text(text).unwrap();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w == "broker.conf:3: etcdLeaseTtlMs has no effect without etcdEndpoints"),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn controller_key_warnings_come_in_line_order() {
    let loaded = load_text("readUnCommitted=true\nallAckInSyncStateSet=true\n").unwrap();
    assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].starts_with("broker.conf:1: readUnCommitted"), "{:?}", loaded.warnings);
    assert!(loaded.warnings[1].starts_with("broker.conf:2: allAckInSyncStateSet"), "{:?}", loaded.warnings);
}

#[test]
fn print_config_names_each_values_source() {
    let loaded = load_text("brokerRole=SYNC_MASTER\n").unwrap();
    let text = print_effective(&loaded.effective);
    let line =
        |key: &str| text.lines().find(|l| l.starts_with(&format!("{key}="))).unwrap_or_default().to_string();
    assert!(
        line("brokerRole").starts_with("brokerRole=SYNC_MASTER")
            && line("brokerRole").ends_with("# broker.conf:1"),
        "{text}"
    );
    assert!(line("haTransferBatchSize").ends_with("# default"), "{text}");
    assert!(line("haListenPort").starts_with("haListenPort=10912 "), "{text}");
    assert!(line("haListenPort").ends_with("# default: listenPort + 1"), "{text}");
}

#[test]
fn invalid_value_is_an_error_naming_key_and_value() {
    let err = load_text("brokerRole=MASTER\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid value for brokerRole: \"MASTER\": expected ASYNC_MASTER, SYNC_MASTER or SLAVE"
    );
    let err = load_text("haTransferBatchSize=0\n").unwrap_err();
    assert!(err.to_string().starts_with("invalid value for haTransferBatchSize: \"0\""), "{err}");
    let err = load_text("listenPort=99999\n").unwrap_err();
    assert!(err.to_string().contains("listenPort: \"99999\""), "{err}");
}

#[test]
fn slave_without_master_address_is_refused() {
    let err = load_text("brokerRole=SLAVE\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "brokerRole=SLAVE haMasterAddress=(unset) namesrvAddr=(unset): a slave needs haMasterAddress \
         (set it in broker.conf or pass --master HOST:PORT), or namesrvAddr to learn its master from the \
         NameServer"
    );
    load_text("brokerRole=SLAVE\nhaMasterAddress=10.0.0.1:10912\n").unwrap();
    let named = load_text("brokerRole=SLAVE\nnamesrvAddr=10.0.0.1:9876\nbrokerId=1\n").unwrap().settings;
    assert!(named.learns_master_from_name_server());
    assert_eq!(named.named_master_slave_config("10.0.0.3:10912").unwrap().master_address, "10.0.0.3:10912");
    let fixed = "brokerRole=SLAVE\nnamesrvAddr=10.0.0.1:9876\nbrokerId=1\nhaMasterAddress=10.0.0.2:10912\n";
    assert!(!load_text(fixed).unwrap().settings.learns_master_from_name_server(), "a static address wins");
    let err = load_text("brokerRole=SLAVE\nhaMasterAddress=10.0.0.1\n").unwrap_err();
    assert!(err.to_string().contains("haMasterAddress"), "{err}");
}

#[test]
fn port_clash_is_refused() {
    let err = load_text("listenPort=10911\nhaListenPort=10911\n").unwrap_err();
    assert!(err.to_string().starts_with("listenPort=10911 haListenPort=10911"), "{err}");
}

#[test]
fn quorum_needs_two_in_sync_replicas() {
    let err = load_text("ackPolicy=QUORUM\n").unwrap_err();
    assert!(matches!(err, BrokerConfigError::Conflict { .. }), "{err}");
    let s = load_text(
        "brokerRole=SYNC_MASTER\ninSyncReplicas=2\ntotalReplicas=3\nhaReplicaAllowList=10.0.0.6, 10.0.0.7\n",
    )
    .unwrap()
    .settings;
    assert_eq!(s.effective_ack_policy(), AckPolicy::Quorum { in_sync_replicas: 2 });
    let err = load_text("inSyncReplicas=3\ntotalReplicas=2\nhaReplicaAllowList=10.0.0.1\n").unwrap_err();
    assert!(err.to_string().contains("cannot exceed"), "{err}");
}

#[test]
fn command_line_overrides_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broker.conf");
    std::fs::write(&path, "listenPort=20911\nbrokerRole=SYNC_MASTER\n").unwrap();
    let loaded =
        load(&[("brokerRole", "SLAVE")], Some(&path), &[("listenPort".into(), "40911".into())]).unwrap();
    assert_eq!(loaded.settings.listen_port, 40911);
    assert_eq!(loaded.settings.ha_listen_port, 40912);
    assert_eq!(loaded.settings.broker_role, BrokerRole::SyncMaster);
}

#[test]
fn missing_file_is_an_error_naming_it() {
    let err = load(&[], Some(Path::new("/nonexistent/broker.conf")), &[]).unwrap_err();
    assert!(err.to_string().starts_with("cannot read /nonexistent/broker.conf"), "{err}");
}

#[test]
fn a_configuration_file_above_the_cap_is_refused_naming_it() {
    let err = load(&[], Some(Path::new("/dev/zero")), &[]).unwrap_err().to_string();
    assert!(err.contains("/dev/zero") && err.contains("larger than 1 MiB"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let at_cap = dir.path().join("at-cap.conf");
    let mut text = "#".repeat(MAX_CONFIG_FILE_BYTES as usize - 1);
    text.push('\n');
    std::fs::write(&at_cap, &text).unwrap();
    assert!(load(&[], Some(&at_cap), &[]).is_ok(), "a file of exactly the cap is read");
    text.push('\n');
    std::fs::write(&at_cap, &text).unwrap();
    let err = load(&[], Some(&at_cap), &[]).unwrap_err().to_string();
    assert!(err.contains("at-cap.conf") && err.contains("1 MiB"), "{err}");
}

#[test]
fn a_token_file_holding_no_token_or_too_much_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    let with = |content: &[u8]| {
        std::fs::write(&file, content).unwrap();
        load_text(&format!("httpAuthTokenFile={}\n", file.display()))
    };
    let token = with(b"  0123456789abcdef\n").unwrap().settings.http.auth_token;
    assert_eq!(token.as_deref(), Some("0123456789abcdef"), "surrounding whitespace is trimmed");
    for blank in [&b""[..], b"\n", b" \t\r\n"] {
        let err = with(blank).unwrap_err().to_string();
        assert!(err.contains("httpAuthTokenFile") && err.contains("empty"), "{err}");
        assert!(err.contains(&file.display().to_string()), "{err}");
    }
    let err = with(&vec![b'a'; MAX_SECRET_FILE_BYTES as usize + 1]).unwrap_err().to_string();
    assert!(err.contains("64 KiB"), "{err}");
    let err = load_text("httpAuthTokenFile=/dev/zero\n").unwrap_err().to_string();
    assert!(err.contains("64 KiB") && !err.contains("\0"), "{err}");
}

#[test]
fn logship_keys_parse() {
    let s =
        load_text("newSlaveStart=LAST_FILE\nslaveAckOn=FLUSHED\nackPolicy=ALL_IN_SYNC\n").unwrap().settings;
    assert_eq!(s.new_slave_start, NewSlaveStart::LastFile);
    assert_eq!(s.slave_ack_on, AckOn::Flushed);
    assert_eq!(s.effective_ack_policy(), AckPolicy::AllInSync);
    assert!(load_text("slaveAckOn=DISK\n").unwrap_err().to_string().contains("slaveAckOn"));
}

#[test]
fn http_keys_parse_and_check_their_ranges() {
    let s = load_text(
        "listenAddress=0.0.0.0\nhaListenAddress=127.0.0.1\nhttpAuthToken=0123456789abcdef\nhttpHeaderTimeout=1500\n\
         httpBodyTimeout=2500\nhttpIdleTimeout=6500\nhttpMaxConnections=7\n\
         httpMaxInFlightBytes=8388608\nmaxTransferBytesOnMessageInMemory=1000\n\
         maxTransferCountOnMessageInMemory=3\nshutdownDrainTimeout=250\ndefaultTopicQueueNums=4\n",
    )
    .unwrap()
    .settings;
    let h = &s.http;
    assert_eq!(s.http_addr(), "0.0.0.0:10913".parse().unwrap());
    assert_eq!(h.auth_token.as_deref(), Some("0123456789abcdef"));
    assert_eq!(
        (h.header_timeout, h.body_timeout, h.idle_timeout, h.shutdown_drain_timeout),
        (
            Duration::from_millis(1500),
            Duration::from_millis(2500),
            Duration::from_millis(6500),
            Duration::from_millis(250)
        )
    );
    assert_eq!((h.max_connections, h.max_in_flight_bytes), (7, 8 << 20));
    assert_eq!((h.max_transfer_bytes, h.max_transfer_count, h.default_topic_queue_nums), (1000, 3, 4));
    // Defaults: bind brokerIP1, no token, RocketMQ's 8 queues, 256 KiB / 32 messages a pull.
    let d = load_text("brokerIP1=10.1.2.3\nhaListenAddress=127.0.0.1\n").unwrap().settings;
    assert_eq!(d.http_addr(), "10.1.2.3:10913".parse().unwrap());
    assert_eq!(d.remoting_addr(), "10.1.2.3:10911".parse().unwrap());
    assert_eq!((d.http.auth_token.clone(), d.http.default_topic_queue_nums), (None, 8));
    assert_eq!((d.http.max_transfer_bytes, d.http.max_transfer_count), (256 << 10, 32));
    // One client gets an eighth of the connections and of the in-flight budget by default.
    assert_eq!((d.http.max_connections_per_ip, d.http.max_in_flight_bytes_per_ip), (128, 32 << 20));
    assert_eq!(
        (h.max_connections_per_ip, h.max_in_flight_bytes_per_ip),
        (1, 4 << 20),
        "derived from httpMaxConnections=7 and httpMaxInFlightBytes=8 MiB: at least one message"
    );
    let set = load_text("httpMaxConnectionsPerIp=0\nhttpMaxInFlightBytesPerIp=0\n").unwrap().settings;
    assert_eq!((set.http.max_connections_per_ip, set.http.max_in_flight_bytes_per_ip), (0, 0), "0: off");
    let err = load_text("httpMaxInFlightBytesPerIp=1000\n").unwrap_err();
    assert!(
        matches!(err, BrokerConfigError::Conflict { .. }) && err.to_string().contains("maxMessageSize"),
        "{err}"
    );
    for bad in [
        "listenAddress=localhost",
        "httpMaxConnections=0",
        "defaultTopicQueueNums=0",
        "maxTransferCountOnMessageInMemory=1001",
        "httpHeaderTimeout=0",
    ] {
        let key = bad.split('=').next().unwrap();
        assert!(load_text(bad).unwrap_err().to_string().contains(key), "{bad}");
    }
    let err = load_text("httpAuthToken=hunter2\n").unwrap_err().to_string();
    assert!(err.contains("httpAuthToken") && !err.contains("hunter2"), "{err}");
    let err = load_text("httpAuthToken=\n").unwrap_err().to_string();
    assert!(err.contains("httpAuthToken") && err.contains("empty"), "{err}");
    let err = load_text("maxMessageSize=4194304\nhttpMaxInFlightBytes=4194304\n").unwrap_err();
    assert!(matches!(err, BrokerConfigError::Conflict { .. }), "{err}");
    for half in ["httpTlsCertFile=/c.pem\n", "httpTlsKeyFile=/k.pem\n", "httpTlsClientCaFile=/ca.pem\n"] {
        let err = load_text(half).unwrap_err();
        assert!(
            matches!(err, BrokerConfigError::Conflict { .. }) && err.to_string().contains("httpTlsCertFile"),
            "{err}"
        );
    }
    let err = load_text("httpIdleTimeout=3000\n").unwrap_err();
    assert!(
        matches!(err, BrokerConfigError::Conflict { .. }) && err.to_string().contains("syncFlushTimeout"),
        "{err}"
    );
    let tls = load_text("httpTlsCertFile=/c.pem\nhttpTlsKeyFile=/k.pem\n").unwrap().settings.http;
    assert_eq!((tls.tls_cert_file, tls.tls_client_ca_file), (Some(PathBuf::from("/c.pem")), None));
}

/// Parses `bytes` as Java's `Properties.load(InputStream)` would, as sorted pairs.
fn java_pairs(bytes: &[u8]) -> Vec<(String, String)> {
    let mut map = BTreeMap::new();
    for (k, v, _) in parse_properties(bytes, "f").unwrap() {
        map.insert(k, v);
    }
    map.into_iter().collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Vectors produced by `java.util.Properties.load(InputStream)` (OpenJDK 17): each input's
/// bytes, then the key/value pairs Java read from them.
#[test]
fn properties_parse_as_java_properties_load_does() {
    type Vector<'a> = (&'a [u8], &'a [(&'a str, &'a str)]);
    let vectors: &[Vector<'_>] = &[
        (b"k=v", &[("k", "v")]),
        (b"  k = v  \n", &[("k", "v  ")]),
        (b"k:v\nk2 v2\nk3\t=\t v3", &[("k", "v"), ("k2", "v2"), ("k3", "v3")]),
        (b"# c\n! c\n  # c2\nk=v", &[("k", "v")]),
        (b"k=a\\\n   b\\\n c", &[("k", "abc")]),
        (b"k=a\\\\\nk2=b", &[("k", "a\\"), ("k2", "b")]),
        (b"a\\=b=c", &[("a=b", "c")]),
        (b"a\\ b=c d", &[("a b", "c d")]),
        (b"k=\\u0041\\u00e9\\t\\n\\r\\f\\x\\\\", &[("k", "A\u{e9}\t\n\r\u{c}x\\")]),
        (b"k=caf\xe9", &[("k", "caf\u{e9}")]),
        (b"k", &[("k", "")]),
        (b"k=", &[("k", "")]),
        (b"k==v", &[("k", "=v")]),
        (b"k = = v", &[("k", "= v")]),
        (b"line1=a\r\nline2=b\rline3=c", &[("line1", "a"), ("line2", "b"), ("line3", "c")]),
        (b"#comment\\\nk=v", &[("k", "v")]),
        (b"k=v\\", &[("k", "v")]),
        (b"  \\ k=v", &[(" k", "v")]),
        (b"k:=v", &[("k", "=v")]),
        (b"k=v # not a comment", &[("k", "v # not a comment")]),
        (b"k=a\\\n#notcomment", &[("k", "a#notcomment")]),
        // Bytes are ISO-8859-1: UTF-8's two bytes for 'é' are two characters to Java.
        (b"k=caf\xc3\xa9", &[("k", "caf\u{c3}\u{a9}")]),
        // 0xA0 (no-break space) is not a separator to Java.
        (b"k\xa0x=v", &[("k\u{a0}x", "v")]),
    ];
    for (input, expected) in vectors {
        assert_eq!(java_pairs(input), pairs(expected), "input {:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn properties_tolerate_a_utf8_byte_order_mark() {
    // Java would read the BOM into the first key; logship drops it so the key is found.
    assert_eq!(java_pairs(b"\xef\xbb\xbfbrokerRole=SLAVE\n"), pairs(&[("brokerRole", "SLAVE")]));
}

#[test]
fn malformed_unicode_escape_is_an_error_naming_the_line() {
    // Java: IllegalArgumentException "Malformed \uxxxx encoding."
    for text in [&b"a=1\nk=\\u00zz\n"[..], b"a=1\nk=\\u00"] {
        let err = parse_properties(text, "broker.conf").unwrap_err();
        assert!(matches!(err, BrokerConfigError::Syntax { line: 2, .. }), "{err}");
        assert!(err.to_string().contains("\\uXXXX"), "{err}");
    }
}

#[test]
fn booleans_parse_as_java_boolean_parse_boolean() {
    // Java's Boolean.parseBoolean: true only for "true" in any case.
    for (text, expected) in
        [("true", true), ("TRUE", true), ("True", true), ("false", false), ("FALSE", false)]
    {
        let loaded = load_text(&format!("slaveReadEnable={text}\n")).unwrap();
        assert_eq!(loaded.settings.slave_read_enable, expected, "{text}");
        assert!(loaded.warnings.is_empty(), "{text}: {:?}", loaded.warnings);
    }
    // Java reads anything else as false; logship does too, and says so.
    let loaded = load_text("slaveReadEnable=yes\n").unwrap();
    assert!(!loaded.settings.slave_read_enable);
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].contains("slaveReadEnable=\"yes\" reads as false"), "{:?}", loaded.warnings);
}

#[test]
fn rocketmq_modes_logship_lacks_are_errors() {
    let key = "enableDLegerCommitLog";
    let err = load_text(&format!("brokerRole=ASYNC_MASTER\n{key}=true\n")).unwrap_err();
    assert!(matches!(err, BrokerConfigError::Unsupported { .. }), "{key}: {err}");
    assert!(err.to_string().contains(key), "{err}");
    let loaded = load_text(&format!("{key}=false\n")).unwrap();
    assert!(loaded.warnings.is_empty(), "{key}=false is RocketMQ's default: {:?}", loaded.warnings);
}

#[test]
fn warnings_collected_before_an_error_are_returned_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broker.conf");
    // A typo'd key, then the error it causes.
    std::fs::write(&path, "brokerRole=SLAVE\nhaMasterAdress=10.0.0.1:10912\n").unwrap();
    let err = load(&[], Some(&path), &[]).unwrap_err();
    assert!(err.error.to_string().contains("haMasterAddress"), "{err}");
    assert_eq!(err.warnings.len(), 1, "{:?}", err.warnings);
    assert!(err.warnings[0].contains("unknown key haMasterAdress"), "{:?}", err.warnings);
    // A warning on a key read before a bad value.
    std::fs::write(&path, "haTransferBatchSzie=65536\nlistenPort=x\n").unwrap();
    let err = load(&[], Some(&path), &[]).unwrap_err();
    assert!(err.error.to_string().contains("listenPort"), "{err}");
    assert_eq!(err.warnings.len(), 1, "{:?}", err.warnings);
    assert!(err.warnings[0].contains("haTransferBatchSzie"), "{:?}", err.warnings);
}

#[test]
fn stock_slave_properties_without_ha_master_address_name_the_key_and_the_flag() {
    // RocketMQ's conf/2m-2s-async/broker-a-s.properties.
    let text = "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=1\ndeleteWhen=04\n\
                fileReservedTime=48\nbrokerRole=SLAVE\nflushDiskType=ASYNC_FLUSH\n";
    let err = load_text(text).unwrap_err();
    let shown = err.to_string();
    assert!(shown.contains("haMasterAddress") && shown.contains("--master"), "{shown}");
}

#[test]
fn config_warnings_come_in_line_order() {
    let loaded = load_text("zzUnknownKey=1\nuseReentrantLockWhenPutMessage=true\naaUnknownKey=2\n").unwrap();
    let lines: Vec<&str> =
        loaded.warnings.iter().map(|w| w.split(':').nth(1).unwrap_or("").trim_start()).collect();
    assert_eq!(lines[0..3], ["1", "2", "3"], "{:?}", loaded.warnings);
}

#[test]
fn replica_names_parse_and_bad_ones_are_refused() {
    let s = load_text("replicaNames=broker-a-s1@10.0.0.2, broker-a-s2@10.0.0.3\n").unwrap().settings;
    assert_eq!(
        s.replica_names,
        [
            ("broker-a-s1".to_string(), "10.0.0.2".parse().unwrap()),
            ("broker-a-s2".into(), "10.0.0.3".parse().unwrap())
        ]
    );
    let s = load_text("replicaNames=s1@127.0.0.1, s2@127.0.0.1\n").unwrap().settings;
    assert_eq!(s.replica_names.len(), 2, "two slaves on one host");
    for bad in ["s1", "s1@nohost", "@10.0.0.2", "a@10.0.0.2,a@10.0.0.3", "a b@10.0.0.2"] {
        let err = load_text(&format!("replicaNames={bad}\n")).unwrap_err();
        assert!(err.to_string().contains("replicaNames"), "{bad}: {err}");
    }
}

#[test]
fn store_path_commit_log_is_honoured_under_the_root_and_elsewhere() {
    let s = load_text("storePathCommitLog=/data/rmq/commitlog\n").unwrap().settings;
    assert_eq!(s.store_path_root_dir, PathBuf::from("/data/rmq"));
    let s =
        load_text("storePathRootDir=/data/rmq\nstorePathCommitLog=/data/rmq/commitlog\n").unwrap().settings;
    assert_eq!((s.store_path_root_dir, s.store_path_commit_log), (PathBuf::from("/data/rmq"), None));
    let s = load_text("storePathRootDir=/data/rmq\nstorePathCommitLog=/ssd/commitlog\n").unwrap().settings;
    assert_eq!(s.store_path_root_dir, PathBuf::from("/data/rmq"));
    assert_eq!(s.store_path_commit_log, Some(PathBuf::from("/ssd/commitlog")));
    assert_eq!(s.store_config().store_path_commit_log, Some(PathBuf::from("/ssd/commitlog")));
}

#[test]
fn store_path_epoch_file_reaches_the_store() {
    let s = load_text("storePathRootDir=/data/rmq\n").unwrap().settings;
    assert_eq!(s.store_config().store_path_epoch_file, None);
    let s = load_text("storePathEpochFile=/ssd/epochs\n").unwrap().settings;
    assert_eq!(s.store_config().store_path_epoch_file, Some(PathBuf::from("/ssd/epochs")));
}

#[test]
fn ha_security_keys_parse_and_reach_the_services() {
    let text = "haListenAddress=10.0.0.5\nhaReplicaAllowList=10.0.0.7, 10.1.0.0/16\n\
                haMaxConnectionsPerPeer=2\nhaMaxConnections=10\nhaFirstReportTimeout=3000\n\
                haSlaveMaxFirstOffset=4096\ntotalReplicas=2\n";
    let s = load_text(text).unwrap().settings;
    assert_eq!(s.ha_addr(), "10.0.0.5:10912".parse().unwrap());
    let m = s.master_service_config();
    assert_eq!(m.admission.allow.len(), 2);
    assert!(m.admission.trusts("10.1.2.3".parse().unwrap()));
    assert_eq!((m.admission.max_connections_per_peer, m.admission.max_connections), (2, 10));
    assert_eq!(m.core.first_report_timeout, Duration::from_secs(3));
    assert_eq!(s.slave_service_config().core.max_first_offset, 4096);
    let err = load_text("haReplicaAllowList=10.0.0.0/40\n").unwrap_err();
    assert!(err.to_string().contains("haReplicaAllowList"), "{err}");
    let err = load_text("haListenAddress=example.org\n").unwrap_err();
    assert!(err.to_string().contains("haListenAddress"), "{err}");
}

#[test]
fn total_replicas_over_a_network_allow_list_is_refused_naming_the_entry() {
    let err =
        load_text("brokerRole=SYNC_MASTER\ntotalReplicas=3\nhaReplicaAllowList=10.0.0.6, 10.0.0.0/24\n")
            .unwrap_err();
    assert!(matches!(err, BrokerConfigError::Conflict { .. }), "{err}");
    assert!(err.to_string().contains("allow-list entry 10.0.0.0/24"), "{err}");
    let err =
        load_text("brokerRole=SYNC_MASTER\ntotalReplicas=3\nhaReplicaAllowList=10.0.0.6\n").unwrap_err();
    assert!(err.to_string().contains("name 1"), "{err}");
    load_text(
        "brokerRole=SYNC_MASTER\ntotalReplicas=3\nhaReplicaAllowList=10.0.0.6, 10.0.0.7, 10.0.0.0/24\n",
    )
    .unwrap();
    load_text("brokerRole=SYNC_MASTER\ntotalReplicas=3\nhaReplicaAllowList=127.0.0.1\n").unwrap();
}

#[test]
fn total_replicas_needs_named_replicas() {
    // On loopback (protected mode) each loopback replica is named while it is connected.
    load_text("brokerRole=SYNC_MASTER\ntotalReplicas=2\n").unwrap();
    let opt_in =
        "brokerRole=SYNC_MASTER\ntotalReplicas=2\nhaListenAddress=10.0.0.5\nhaTrustAnyReplica=true\n";
    let err = load_text(opt_in).unwrap_err();
    assert!(err.to_string().contains("haReplicaAllowList"), "{err}");
}

#[test]
fn listen_port_is_the_remoting_port_and_http_moves_to_its_own_key() {
    let s = load_text("listenPort=20911\n").unwrap().settings;
    assert_eq!(
        (s.remoting_addr().port(), s.ha_listen_port, s.http_addr().port(), s.fast_remoting_addr()),
        (20911, 20912, 20913, None)
    );
    let s =
        load_text("listenPort=20911\nhttpListenPort=8088\nfastListenPort=20909\nhttpListenAddress=0.0.0.0\n")
            .unwrap()
            .settings;
    assert_eq!(s.http_addr(), "0.0.0.0:8088".parse().unwrap());
    assert_eq!(s.fast_remoting_addr(), Some("127.0.0.1:20909".parse().unwrap()));
    assert_eq!(s.remoting_addr(), "127.0.0.1:20911".parse().unwrap(), "listenAddress, not httpListenAddress");
    let any = load_text("listenPort=0\n").unwrap().settings;
    assert_eq!((any.ha_listen_port, any.http_listen_port()), (0, 0), "any port: each on any port");
    for (text, keys) in [
        ("listenPort=20911\nhttpListenPort=20912\n", "haListenPort=20912 httpListenPort=20912"),
        ("listenPort=20911\nhttpListenPort=20911\n", "listenPort=20911 httpListenPort=20911"),
        ("listenPort=20911\nfastListenPort=20913\n", "httpListenPort=20913 fastListenPort=20913"),
    ] {
        let err = load_text(text).unwrap_err().to_string();
        assert!(err.starts_with(keys), "{text:?}: {err}");
    }
    assert!(load_text("listenPort=65534\n").unwrap_err().to_string().contains("httpListenPort"));
}

#[test]
fn registration_keys_parse_and_a_registering_slave_needs_its_broker_id() {
    let s = load_text(
        "namesrvAddr=10.0.0.1:9876; 10.0.0.2:9876;\nregisterNameServerPeriod=5000\nbrokerIP2=10.0.0.9\n\
         brokerRole=SLAVE\nhaMasterAddress=10.0.0.3:10912\nbrokerId=2\n",
    )
    .unwrap()
    .settings;
    assert_eq!(s.remoting.namesrv_addr, ["10.0.0.1:9876", "10.0.0.2:9876"]);
    assert_eq!(s.remoting.register_name_server_period, Duration::from_secs(10), "clamped as Java clamps it");
    assert_eq!(s.ha_server_addr(), "10.0.0.9:10912".parse().unwrap());
    assert_eq!(s.registered_broker_id(), 2);
    let err = load_text("namesrvAddr=10.0.0.1:9876\nbrokerRole=SLAVE\nhaMasterAddress=10.0.0.3:10912\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("brokerId=(unset)") && err.contains("1 or more"), "{err}");
    for bad in ["namesrvAddr=10.0.0.1", "namesrvAddr=:9876", "namesrvAddr=a:b", "brokerId=-1", "brokerId=x"] {
        assert!(load_text(&format!("{bad}\n")).is_err(), "{bad}");
    }
    let m = load_text("brokerId=3\n").unwrap();
    assert_eq!(m.settings.registered_broker_id(), 0, "a master registers as 0");
    assert!(m.warnings.iter().any(|w| w.contains("brokerId=3 on a master")), "{:?}", m.warnings);
    let b = m.settings.broker_crate_settings();
    assert_eq!((b.broker_id, b.listen_port, b.version()), (0, 10911, 513));
    let v4 = load_text("rocketmqLine=4.9\nautoCreateTopicEnable=false\n")
        .unwrap()
        .settings
        .broker_crate_settings();
    assert_eq!((v4.version(), v4.auto_create_topic_enable), (407, false));
}

#[test]
fn acl_is_off_by_default_and_its_file_key_takes_a_path() {
    let d = load_text("").unwrap().settings;
    assert_eq!((d.remoting.acl_enable, d.remoting.acl_file.clone()), (false, None));
    let on = load_text("aclEnable=true\naclFile=/etc/logship/plain_acl.yml\n").unwrap().settings;
    assert!(on.remoting.acl_enable);
    let file = on.remoting.acl_file.as_deref();
    assert_eq!(file, Some(std::path::Path::new("/etc/logship/plain_acl.yml")));
    let e = load_text("aclFile= \n").unwrap_err().to_string();
    assert!(e.contains("aclFile") && e.contains("plain_acl.yml"), "{e}");
    let maybe = load_text("aclEnable=maybe\n").unwrap().settings;
    assert!(!maybe.remoting.acl_enable, "Java's Boolean.parseBoolean: off");
}

#[test]
fn a_master_whose_ha_port_would_count_strangers_refuses_to_start_unless_told_otherwise() {
    for text in ["brokerIP1=10.0.0.5\n", "brokerIP1=10.0.0.5\nlistenAddress=0.0.0.0\n"] {
        let err = load_text(text).unwrap_err();
        let shown = err.to_string();
        for key in ["haListenAddress", "haReplicaAllowList", "haTlsMode", "haTrustAnyReplica=true"] {
            assert!(shown.contains(key), "{text:?}: names {key}: {shown}");
        }
    }
    // The opt-in starts it, warned loudly.
    let loaded = load_text("brokerIP1=10.0.0.5\nhaTrustAnyReplica=true\n").unwrap();
    assert_eq!(loaded.settings.ha_addr(), "10.0.0.5:10912".parse().unwrap());
    assert!(loaded.settings.master_service_config().admission.trust_any);
    assert!(
        loaded.warnings.iter().any(|w| w.contains("haTrustAnyReplica=true") && w.contains("10.0.0.5:10912")),
        "{:?}",
        loaded.warnings
    );
    // A slave takes no acknowledgements.
    load_text("brokerIP1=10.0.0.5\nbrokerRole=SLAVE\nhaMasterAddress=10.0.0.6:10912\n").unwrap();
    // The strangers' share of slots must leave room for replicas.
    let err = load_text("haMaxConnections=8\nhaMaxUntrustedConnections=8\n").unwrap_err();
    assert!(err.to_string().contains("haMaxUntrustedConnections"), "{err}");
    let small = load_text("haMaxConnections=8\n").unwrap().settings;
    assert_eq!(small.master_service_config().admission.max_untrusted_connections, 7);
    let loaded = load_text("listenAddress=0.0.0.0\nhaListenAddress=127.0.0.1\n").unwrap();
    assert_eq!(loaded.settings.ha_addr().ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert!(
        loaded.warnings.iter().all(|w| w.starts_with("the remoting port listens on 0.0.0.0:10911")),
        "only the open remoting port is warned about: {:?}",
        loaded.warnings
    );
    let loaded = load_text("haListenAddress=0.0.0.0\nhaReplicaAllowList=10.0.0.7\n").unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(load_text("").unwrap().settings.ha_addr().ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
}

/// Writes a CA and a certificate it signs (for `replica-a`) as PEM files; returns the
/// `haTls*Path` lines.
fn tls_files(dir: &Path) -> String {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["replica-a".to_string()]).unwrap();
    let cert = cert.signed_by(&key, &ca, &ca_key).unwrap();
    let mut lines = String::new();
    for (k, file, pem) in [
        ("haTlsCertPath", "cert.pem", cert.pem()),
        ("haTlsKeyPath", "key.pem", key.serialize_pem()),
        ("haTlsCaPath", "ca.pem", ca.pem()),
    ] {
        std::fs::write(dir.join(file), pem).unwrap();
        lines.push_str(&format!("{k}={}\n", dir.join(file).display()));
    }
    lines
}

#[test]
fn tls_keys_build_each_sides_settings_and_name_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let files = tls_files(dir.path());
    let text = format!(
        "brokerRole=SYNC_MASTER\nhaTlsMode=required\nhaTlsReplicaNames=replica-a, replica-b\ntotalReplicas=2\n{files}"
    );
    let m = load_text(&text).unwrap().settings.master_service_config();
    let tls = m.admission.tls.as_ref().expect("TLS configured");
    assert_eq!(tls.mode(), TlsMode::Required);
    assert_eq!(tls.replica_names(), ["replica-a", "replica-b"]);
    assert!(m.validate().is_ok(), "TLS replicas can lift the restart fence");
    // A slave checks the master's certificate for the host of haMasterAddress by default.
    let slave = format!("brokerRole=SLAVE\nhaMasterAddress=master.example:10912\nhaTlsEnable=true\n{files}");
    let s = load_text(&slave).unwrap().settings.slave_service_config();
    assert_eq!(s.tls.expect("TLS configured").server_name().to_str(), "master.example");
    let named = format!("{slave}haTlsServerName=10.0.0.5\n");
    let s = load_text(&named).unwrap().settings.slave_service_config();
    assert_eq!(s.tls.unwrap().server_name().to_str(), "10.0.0.5");
    let master_with_slave_key = load_text("haTlsEnable=true\n").unwrap();
    assert!(master_with_slave_key.settings.slave_tls.is_none(), "ignored on a master");
    assert!(master_with_slave_key.warnings.iter().any(|w| w.contains("haTlsEnable is a slave key")));
    // What is wrong is named.
    let optional = format!("haTlsMode=optional\nhaTlsReplicaNames=replica-a\n{files}");
    let warnings = load_text(&optional).unwrap().warnings;
    assert!(
        warnings.iter().any(|w| w.contains("haTlsMode=optional without haReplicaAllowList")),
        "{warnings:?}"
    );
    let listed = format!("{optional}haReplicaAllowList=10.0.0.6\n");
    assert!(!load_text(&listed).unwrap().warnings.iter().any(|w| w.contains("haTlsMode")));
    let no_names = format!("haTlsMode=optional\n{files}");
    assert!(load_text(&no_names).unwrap_err().to_string().contains("haTlsReplicaNames"));
    let no_key = "haTlsMode=optional\nhaTlsReplicaNames=a\nhaTlsCertPath=/x\nhaTlsCaPath=/y\n";
    assert!(load_text(no_key).unwrap_err().to_string().contains("haTlsKeyPath"));
    let missing =
        format!("haTlsMode=optional\nhaTlsReplicaNames=a\n{files}haTlsCaPath=/nonexistent/ca.pem\n");
    let err = load_text(&missing).unwrap_err();
    assert!(matches!(err, BrokerConfigError::Invalid { ref key, .. } if key == "haTlsCaPath"), "{err}");
    assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
    let swapped = text.replace("cert.pem", "ca.pem.tmp").replace("key.pem", "cert.pem");
    std::fs::copy(dir.path().join("ca.pem"), dir.path().join("ca.pem.tmp")).unwrap();
    assert!(load_text(&swapped).unwrap_err().to_string().contains("key"), "a certificate is no key");
    assert!(load_text("haTlsMode=on\n").unwrap_err().to_string().contains("haTlsMode"));
    let err = load_text("totalReplicas=2\nhaListenAddress=10.0.0.5\nhaTrustAnyReplica=true\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("haReplicaAllowList") && err.contains("haTlsMode"), "{err}");
}
const ETCD_BASE: &str = "enableControllerMode=true\nbrokerId=2\nhttpAuthToken=0123456789abcdef\n";

#[cfg(feature = "etcd")]
#[test]
fn failover_keys_read_with_their_defaults_and_the_unclean_election_warns() {
    let loaded =
        load_text(&format!("{ETCD_BASE}etcdEndpoints=http://127.0.0.1:2379, http://127.0.0.1:2479\n"))
            .unwrap();
    let etcd = loaded.settings.controller.unwrap().etcd.expect("failover on");
    assert_eq!(etcd.endpoints, ["http://127.0.0.1:2379", "http://127.0.0.1:2479"]);
    assert_eq!(
        etcd,
        EtcdKeys { endpoints: etcd.endpoints.clone(), ..EtcdKeys::default() },
        "prefix /logship, 3 s lease, 500 ms margin, 1 s renewals, 1 s requests, no unclean election"
    );
    let text = format!(
        "{ETCD_BASE}etcdEndpoints=http://e:2379\netcdKeyPrefix=/a/b\netcdLeaseTtlMs=5000\n\
         etcdLeaseMarginMs=1000\netcdLeaseRenewIntervalMs=1500\netcdRequestTimeoutMs=700\n\
         enableElectUncleanMaster=true\n"
    );
    let loaded = load_text(&text).unwrap();
    let etcd = loaded.settings.controller.unwrap().etcd.unwrap();
    assert_eq!(
        (etcd.key_prefix.as_str(), etcd.lease_ttl, etcd.lease_margin, etcd.lease_renew_interval),
        ("/a/b", Duration::from_secs(5), Duration::from_secs(1), Duration::from_millis(1500))
    );
    assert_eq!((etcd.request_timeout, etcd.elect_unclean_master), (Duration::from_millis(700), true));
    assert!(loaded.warnings.iter().any(|w| w.contains("LOST")), "{:?}", loaded.warnings);
}

#[cfg(feature = "etcd")]
#[test]
fn failover_keys_that_cannot_fence_or_address_etcd_are_refused_naming_them() {
    let err = |more: &str| load_text(&format!("{ETCD_BASE}etcdEndpoints=http://e:2379\n{more}")).unwrap_err();
    for (more, names) in [
        ("etcdLeaseTtlMs=2500\n", "etcdLeaseTtlMs=2500"),
        ("etcdLeaseMarginMs=3000\n", "etcdLeaseMarginMs=3000"),
        ("etcdLeaseRenewIntervalMs=2500\n", "etcdLeaseRenewIntervalMs=2500"),
        ("etcdKeyPrefix=logship\n", "etcdKeyPrefix"),
        ("etcdKeyPrefix=/a//b\n", "etcdKeyPrefix"),
    ] {
        let e = err(more);
        assert!(e.to_string().contains(names), "{more}: {e}");
    }
    let e = load_text(&format!("{ETCD_BASE}etcdEndpoints=127.0.0.1:2379\n")).unwrap_err();
    assert!(matches!(&e, BrokerConfigError::Invalid { key, .. } if key == "etcdEndpoints"), "{e}");
}

/// A CA certificate, and a client certificate and key it signed, as PEM files in `dir`.
#[cfg(feature = "etcd")]
fn etcd_pem_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["broker-1".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let files = (dir.join("ca.pem"), dir.join("client.pem"), dir.join("client.key"));
    std::fs::write(&files.0, ca.pem()).unwrap();
    std::fs::write(&files.1, cert.pem()).unwrap();
    std::fs::write(&files.2, key.serialize_pem()).unwrap();
    files
}

#[cfg(feature = "etcd")]
#[test]
fn etcd_tls_and_authentication_keys_read_their_files_and_refuse_what_cannot_work() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = etcd_pem_files(dir.path());
    let password = dir.path().join("etcd.password");
    std::fs::write(&password, "s3cret pass\n").unwrap();
    let tls = format!(
        "etcdTlsCaPath={}\netcdTlsCertPath={}\netcdTlsKeyPath={}\n",
        ca.display(),
        cert.display(),
        key.display()
    );
    let auth = format!("etcdUser=logship\netcdPasswordFile={}\n", password.display());
    let https = "etcdEndpoints=https://127.0.0.1:2379\n";
    let loaded = load_text(&format!("{ETCD_BASE}{https}{tls}{auth}etcdTlsServerName=etcd-1\n")).unwrap();
    let etcd = loaded.settings.controller.unwrap().etcd.unwrap();
    let t = etcd.tls.as_ref().expect("TLS");
    assert_eq!(t.ca_pem, std::fs::read(&ca).unwrap());
    assert_eq!(t.identity.as_ref().map(|(c, _)| c.clone()), Some(std::fs::read(&cert).unwrap()));
    assert_eq!(t.server_name.as_deref(), Some("etcd-1"));
    let c = etcd.credentials.as_ref().expect("credentials");
    assert_eq!((c.user.as_str(), c.password.as_str()), ("logship", "s3cret pass"), "the line break goes");
    assert!(!format!("{c:?}").contains("s3cret"), "the password is never shown");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    // No credentials at all, or a password in clear: warned about.
    let plain = load_text(&format!("{ETCD_BASE}etcdEndpoints=http://e:2379\n")).unwrap();
    assert!(plain.warnings.iter().any(|w| w.contains("without credentials")), "{:?}", plain.warnings);
    let clear = load_text(&format!("{ETCD_BASE}etcdEndpoints=http://e:2379\n{auth}")).unwrap();
    assert!(clear.warnings.iter().any(|w| w.contains("in clear")), "{:?}", clear.warnings);
    // Refused, naming the keys.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let cases = [
        (format!("etcdEndpoints=http://e:2379\n{tls}"), "https://"),
        (https.to_string(), "etcdTlsCaPath"),
        (
            format!("{https}etcdTlsCaPath={}\netcdTlsCertPath={}\n", ca.display(), cert.display()),
            "etcdTlsKeyPath",
        ),
        (format!("{https}etcdTlsCaPath={}\n", key.display()), "etcdTlsCaPath"),
        (
            format!(
                "{https}etcdTlsCaPath={}\netcdTlsCertPath={}\netcdTlsKeyPath={}\n",
                ca.display(),
                cert.display(),
                cert.display()
            ),
            "etcdTlsKeyPath",
        ),
        (format!("{https}etcdTlsCaPath=/nonexistent/ca.pem\n"), "etcdTlsCaPath"),
        ("etcdEndpoints=http://e:2379\netcdUser=logship\n".to_string(), "etcdPasswordFile"),
        (format!("etcdEndpoints=http://e:2379\netcdPasswordFile={}\n", password.display()), "etcdUser"),
        (format!("etcdEndpoints=http://e:2379\netcdUser=u\netcdPasswordFile={}\n", empty.display()), "empty"),
        ("etcdEndpoints=http://e:2379\netcdUser=u\netcdPasswordFile=/dev/zero\n".to_string(), "64 KiB"),
    ];
    for (more, names) in cases {
        let e = load_text(&format!("{ETCD_BASE}{more}")).unwrap_err().to_string();
        assert!(e.contains(names), "{more}: {e}");
        assert!(!e.contains("s3cret"), "{e}");
    }
}

#[cfg(not(feature = "etcd"))]
#[test]
fn failover_without_the_etcd_feature_is_a_config_error_naming_the_feature() {
    let e = load_text(&format!("{ETCD_BASE}etcdEndpoints=http://127.0.0.1:2379\n")).unwrap_err();
    assert!(matches!(&e, BrokerConfigError::Unsupported { key, .. } if key == "etcdEndpoints"), "{e}");
    assert!(e.to_string().contains("--features etcd"), "{e}");
}

#[test]
fn failover_keys_without_their_mode_warn() {
    let loaded = load_text("etcdEndpoints=http://127.0.0.1:2379\n").unwrap();
    assert!(loaded.warnings.iter().any(|w| w.contains("etcdEndpoints") && w.contains("controller-mode")));
    let loaded = load_text(&format!("{ETCD_BASE}etcdLeaseTtlMs=5000\n")).unwrap();
    assert!(loaded.settings.controller.unwrap().etcd.is_none());
    assert!(loaded.warnings.iter().any(|w| w.contains("etcdLeaseTtlMs has no effect without etcdEndpoints")));
}

#[test]
fn controller_mode_reads_its_keys_with_javas_defaults() {
    let s = load_text("enableControllerMode=true\nbrokerId=2\nhttpAuthToken=0123456789abcdef\n")
        .unwrap()
        .settings;
    let c = s.controller.clone().expect("controller mode");
    assert_eq!(c.broker_id, 2);
    assert_eq!(
        c.sync_policy(),
        SyncPolicy { all_ack_in_sync_state_set: false, in_sync_replicas: 1, min_in_sync_replicas: 1 }
    );
    assert_eq!(c.ha_max_time_slave_not_catchup, Duration::from_millis(15_000));
    assert!(!c.async_learner && !c.sync_from_last_file && !c.read_uncommitted);
    assert!(s.store_config().dispatch_up_to_confirm, "consumers read below confirmOffset");
    let text = "enableControllerMode=true\nbrokerId=3\nallAckInSyncStateSet=true\ninSyncReplicas=2\n\
                minInSyncReplicas=2\nhaMaxTimeSlaveNotCatchup=4000\nasyncLearner=true\n\
                syncFromLastFile=true\nreadUnCommitted=true\nstorePathEpochFile=/ssd/epochs\n";
    let s = load_text(text).unwrap().settings;
    let c = s.controller.clone().unwrap();
    assert_eq!(
        c.sync_policy(),
        SyncPolicy { all_ack_in_sync_state_set: true, in_sync_replicas: 2, min_in_sync_replicas: 2 }
    );
    assert_eq!(c.ha_max_time_slave_not_catchup, Duration::from_secs(4));
    assert!(c.async_learner && c.sync_from_last_file && c.read_uncommitted);
    let store = s.store_config();
    assert!(!store.dispatch_up_to_confirm);
    assert_eq!(store.store_path_epoch_file, Some(PathBuf::from("/ssd/epochs")));
    let m = s.controller_master_config(3, [1].into(), 1).unwrap();
    let mc = m.controller.clone().unwrap();
    assert_eq!((m.role, mc.broker_id, mc.epoch, mc.sync), (BrokerRole::SyncMaster, 3, 3, c.sync_policy()));
    assert_eq!(mc.ha_max_time_slave_not_catchup, Duration::from_secs(4));
    assert!(m.validate().is_ok(), "{:?}", m.validate());
    let sl = s.controller_slave_config("127.0.0.1:10912", 1, 3).unwrap().unwrap();
    let sc = sl.controller.clone().unwrap();
    assert_eq!((sc.broker_id, sc.master_broker_id, sc.master_epoch), (3, 1, 3));
    assert!(sc.async_learner && sc.sync_from_last_file);
    assert_eq!(sl.master_address, "127.0.0.1:10912");
    // Classic mode has none of it.
    let classic = load_text("").unwrap().settings;
    assert!(classic.controller.is_none() && classic.controller_master_config(1, [].into(), 1).is_none());
    assert!(!classic.store_config().dispatch_up_to_confirm);
}

#[test]
fn the_truncation_override_and_the_adoption_key_reach_the_slave_and_the_store() {
    let base = "enableControllerMode=true\nbrokerId=2\nhttpAuthToken=0123456789abcdef\n";
    let s = load_text(base).unwrap().settings;
    let store = s.store_config();
    assert!(store.require_epoch_file, "controller mode needs the epoch file");
    assert_eq!(store.adopt_log_without_epochs, None);
    let sl = s.controller_slave_config("127.0.0.1:10912", 1, 3).unwrap().unwrap();
    assert_eq!(sl.controller.unwrap().drop_confirmed, None, "never below the confirmOffset by default");
    let text = format!("{base}haSlaveDropConfirmed=516000-774000\nadoptLogWithoutEpochs=1828\n");
    let s = load_text(&text).unwrap().settings;
    let sl = s.controller_slave_config("127.0.0.1:10912", 1, 3).unwrap().unwrap();
    assert_eq!(sl.controller.unwrap().drop_confirmed, Some(516_000..774_000));
    assert_eq!(s.store_config().adopt_log_without_epochs, Some(1828));
    for bad in
        ["haSlaveDropConfirmed=774000-516000", "haSlaveDropConfirmed=5-5", "haSlaveDropConfirmed=516000"]
    {
        let e = load_text(&format!("{base}{bad}\n")).unwrap_err();
        assert!(e.to_string().contains("haSlaveDropConfirmed"), "{bad}: {e}");
    }
    let classic = load_text("haSlaveDropConfirmed=1-2\n").unwrap();
    assert!(!classic.settings.store_config().require_epoch_file);
    assert!(classic.warnings.iter().any(|w| w.contains("haSlaveDropConfirmed")), "{:?}", classic.warnings);
}

#[test]
fn controller_mode_keys_are_range_checked() {
    for bad in [
        "minInSyncReplicas=0",
        "minInSyncReplicas=65",
        "haMaxTimeSlaveNotCatchup=0",
        "haMaxTimeSlaveNotCatchup=soon",
        "brokerId=x",
        "brokerId=-1",
    ] {
        let key = bad.split('=').next().unwrap();
        let err = load_text(&format!("enableControllerMode=true\nbrokerId=1\n{bad}\n")).unwrap_err();
        assert!(matches!(err, BrokerConfigError::Invalid { .. }), "{bad}: {err}");
        assert!(err.to_string().contains(key), "{bad}: {err}");
    }
    let err = load_text("enableControllerMode=true\nbrokerId=-1\n").unwrap_err();
    assert!(err.to_string().contains("no controller"), "RocketMQ's -1 is explained: {err}");
}

#[test]
fn controller_mode_needs_a_broker_id() {
    let err = load_text("enableControllerMode=true\n").unwrap_err();
    assert!(matches!(err, BrokerConfigError::Conflict { .. }), "{err}");
    assert!(err.to_string().contains("brokerId=(unset)"), "{err}");
}

#[test]
fn controller_mode_refuses_classic_keys_naming_them() {
    for (line, key) in [
        ("haMasterAddress=10.0.0.1:10912", "haMasterAddress"),
        ("totalReplicas=2\nhaReplicaAllowList=10.0.0.1", "totalReplicas"),
        ("ackPolicy=ANY_SLAVE", "ackPolicy"),
        ("newSlaveStart=LAST_FILE", "newSlaveStart"),
    ] {
        let err = load_text(&format!("enableControllerMode=true\nbrokerId=1\n{line}\n")).unwrap_err();
        assert!(matches!(err, BrokerConfigError::Conflict { .. }), "{line}: {err}");
        let shown = err.to_string();
        assert!(shown.contains("enableControllerMode=true") && shown.contains(key), "{line}: {shown}");
    }
}

/// A controller-mode broker is master and slave in turn: one set of `haTls*` keys gives
/// it both sides, whatever `brokerRole` says.
#[test]
fn controller_mode_takes_tls_keys_for_both_roles() {
    let dir = tempfile::tempdir().unwrap();
    let files = tls_files(dir.path());
    let base =
        "enableControllerMode=true\nbrokerId=1\nbrokerRole=SLAVE\nhaTlsReplicaNames=replica-a, replica-b\n";
    let text = format!("{base}haTlsMode=required\nhaTlsEnable=true\n{files}");
    let loaded = load_text(&text).unwrap();
    let tls_warnings: Vec<_> = loaded.warnings.iter().filter(|w| w.contains("haTls")).collect();
    assert!(tls_warnings.is_empty(), "{tls_warnings:?}");
    let s = loaded.settings;
    let m = s.controller_master_config(2, [1].into(), 1).unwrap();
    let tls = m.admission.tls.as_ref().expect("master TLS in controller mode");
    assert_eq!(
        (tls.mode(), tls.replica_names()),
        (TlsMode::Required, vec!["replica-a".into(), "replica-b".into()])
    );
    // Without haTlsServerName the master's certificate must carry the host it is followed at.
    for (address, host) in
        [("10.0.0.5:10912", "10.0.0.5"), ("[::1]:10912", "::1"), ("b.example:10912", "b.example")]
    {
        let sl = s.controller_slave_config(address, 2, 2).unwrap().unwrap();
        assert_eq!(sl.tls.expect("slave TLS in controller mode").server_name().to_str(), host, "{address}");
    }
    // With it, every master followed must carry that one name (the group's).
    let named = load_text(&format!("{text}haTlsServerName=ha.group-a.test\n")).unwrap().settings;
    for address in ["10.0.0.5:10912", "b.example:10912"] {
        let sl = named.controller_slave_config(address, 2, 2).unwrap().unwrap();
        assert_eq!(sl.tls.unwrap().server_name().to_str(), "ha.group-a.test", "{address}");
    }
    // Missing or unreadable files are refused at start, naming the key.
    let no_cert: String =
        files.lines().filter(|l| !l.starts_with("haTlsCertPath")).map(|l| format!("{l}\n")).collect();
    for missing in [
        format!("{base}haTlsMode=required\nhaTlsEnable=true\n{no_cert}"),
        format!("{base}haTlsMode=optional\n{no_cert}"),
        format!("{base}haTlsMode=off\nhaTlsEnable=true\n{no_cert}"),
        format!("{base}haTlsMode=required\nhaTlsEnable=true\n{no_cert}haTlsCertPath=/nonexistent/cert.pem\n"),
    ] {
        let err = load_text(&missing).unwrap_err().to_string();
        assert!(err.contains("haTlsCertPath"), "{missing}: {err}");
    }
    // A master that requires TLS and a slave that would connect in plain cannot be one broker.
    let err = load_text(&format!("{base}haTlsMode=required\n{files}")).unwrap_err().to_string();
    assert!(err.contains("haTlsMode=required") && err.contains("haTlsEnable"), "{err}");
    let half = load_text(&format!("{base}haTlsEnable=true\n{files}")).unwrap();
    assert!(half.settings.controller_master_config(2, [1].into(), 1).unwrap().admission.tls.is_none());
    assert!(
        half.warnings.iter().any(|w| w.contains("haTlsEnable=true with haTlsMode=off")),
        "{:?}",
        half.warnings
    );
    let migrating =
        load_text(&format!("{base}haTlsMode=optional\nhaReplicaAllowList=10.0.0.7\n{files}")).unwrap();
    assert!(
        migrating.settings.controller_slave_config("10.0.0.5:10912", 2, 2).unwrap().unwrap().tls.is_none()
    );
}

#[test]
fn a_stock_rocketmq_controller_conf_loads_and_warns_about_what_it_ignores() {
    // Shaped like RocketMQ's conf/controller broker files (brokerRole=SLAVE and all).
    let text = "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=1\nbrokerRole=SLAVE\n\
                deleteWhen=04\nfileReservedTime=48\nenableControllerMode=true\nallAckInSyncStateSet=true\n\
                listenPort=30911\n";
    let loaded = load_text(text).unwrap();
    assert!(loaded.settings.controller.as_ref().is_some_and(|c| c.all_ack_in_sync_state_set));
    let warnings = loaded.warnings.join("\n");
    assert!(warnings.contains("brokerRole=SLAVE is ignored in controller mode"), "{warnings}");
    assert!(warnings.contains("httpAuthToken"), "admin calls need a token: {warnings}");
}

#[test]
fn controller_keys_without_controller_mode_are_warnings() {
    let loaded = load_text("allAckInSyncStateSet=true\nminInSyncReplicas=2\nbrokerId=1\n").unwrap();
    assert!(loaded.settings.controller.is_none());
    let warnings = loaded.warnings.join("\n");
    for key in ["allAckInSyncStateSet", "minInSyncReplicas", "brokerId"] {
        assert!(warnings.contains(key), "{key}: {warnings}");
    }
    assert!(load_text("enableControllerMode=false\n").unwrap().warnings.is_empty());
}

#[test]
fn the_rocketmq_key_list_is_sorted_for_its_binary_search() {
    let keys = rocketmq_keys::ROCKETMQ_KEYS;
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "ROCKETMQ_KEYS must be sorted and without duplicates");
    assert!(keys.iter().all(|k| rocketmq_keys::is_rocketmq_key(k)));
}
