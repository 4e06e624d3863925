//! What an embedder relies on beyond the examples: waiting for in-sync replicas ends with a
//! typed error when they do not come, on both adapters; settings a service shares with its
//! store have one authority, the store; a plain embedder compiles no TLS library.

use std::sync::Arc;
use std::time::Duration;

use logship_core::memlog::MemoryLog;
use logship_core::service::InSyncError;
use logship_core::service::{MasterServiceConfig, SlaveServiceConfig};
use logship_core::{BrokerRole, FlushDiskType, PutStatus};
use logship_store::{CommitLog, Message, StoreConfig};

fn sync_master() -> MasterServiceConfig {
    MasterServiceConfig { role: BrokerRole::SyncMaster, ..Default::default() }
}

#[test]
fn tokio_wait_in_sync_times_out_then_sees_the_slave_then_reports_a_stopped_master() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let log = Arc::new(MemoryLog::new());
        let master =
            logship_tokio::spawn_master(sync_master(), log, "127.0.0.1:0".parse().unwrap()).await.unwrap();
        let err = master.wait_in_sync(1, Duration::from_millis(30)).await.unwrap_err();
        assert_eq!(err, InSyncError::Timeout { wanted: 1, in_sync: 0 });
        let slave_log = Arc::new(MemoryLog::new());
        let slave =
            logship_tokio::spawn_slave(SlaveServiceConfig::new(master.local_addr().to_string()), slave_log)
                .await
                .unwrap();
        let status = master.wait_in_sync(1, Duration::from_secs(20)).await.unwrap();
        assert_eq!(status.slaves.iter().filter(|s| s.in_sync).count(), 1);
        slave.shutdown().await;
        master.shutdown().await;
        assert_eq!(master.wait_in_sync(1, Duration::from_secs(5)).await.unwrap_err(), InSyncError::Stopped);
    });
}

#[test]
fn smol_wait_in_sync_times_out_then_sees_the_slave_then_reports_a_stopped_master() {
    smol::block_on(async {
        let spawn = |task: logship_smol::Task| smol::spawn(task).detach();
        let log = Arc::new(MemoryLog::new());
        let master = logship_smol::spawn_master(sync_master(), log, "127.0.0.1:0".parse().unwrap(), spawn)
            .await
            .unwrap();
        let err = master.wait_in_sync(1, Duration::from_millis(30)).await.unwrap_err();
        assert_eq!(err, InSyncError::Timeout { wanted: 1, in_sync: 0 });
        let slave_log = Arc::new(MemoryLog::new());
        let config = SlaveServiceConfig::new(master.local_addr().to_string());
        let slave = logship_smol::spawn_slave(config, slave_log, spawn).await.unwrap();
        let status = master.wait_in_sync(1, Duration::from_secs(20)).await.unwrap();
        assert_eq!(status.slaves.iter().filter(|s| s.in_sync).count(), 1);
        slave.shutdown().await;
        master.shutdown().await;
        assert_eq!(master.wait_in_sync(1, Duration::from_secs(5)).await.unwrap_err(), InSyncError::Stopped);
    });
}

fn store(dir: &std::path::Path, set: impl FnOnce(&mut StoreConfig)) -> Arc<CommitLog> {
    let mut config = StoreConfig::default();
    // Puts must not depend on how full the test machine's disk is.
    config.disk_space_warning_level_ratio = 1.0;
    set(&mut config);
    Arc::new(CommitLog::open(dir, config).unwrap())
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn a_master_takes_its_segment_size_from_its_store_not_from_the_default_core_config() {
    const SEGMENT: u64 = 64 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let log = store(dir.path(), |c| {
        c.mapped_file_size_commit_log = SEGMENT;
        c.max_message_size = 8 * 1024;
    });
    tokio_runtime().block_on(async {
        // Default core config: 1 GiB segments, which the store would refuse spans for.
        let config = MasterServiceConfig { slave_timeout: Duration::from_secs(20), ..sync_master() };
        let master =
            logship_tokio::spawn_master(config, log.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
        let slave_log = Arc::new(MemoryLog::new());
        let slave = logship_tokio::spawn_slave(
            SlaveServiceConfig::new(master.local_addr().to_string()),
            slave_log.clone(),
        )
        .await
        .unwrap();
        master.wait_in_sync(1, Duration::from_secs(20)).await.unwrap();
        let mut end = 0;
        while end < 3 * SEGMENT {
            let result = master.put(Message::new("EmbedTopic", 0, bytes::Bytes::from(vec![7u8; 4000]))).await;
            assert_eq!(
                result.status,
                PutStatus::PutOk,
                "put ending past {end} (segments of {SEGMENT} bytes)"
            );
            end = result.end();
        }
        assert!(slave.status().await.unwrap().max_offset >= end, "the slave stored every acknowledged byte");
        slave.shutdown().await;
        master.shutdown().await;
    });
}

#[test]
fn a_master_service_flushes_as_its_store_says_with_flush_set_once_on_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let log = store(dir.path(), |c| c.flush_disk_type = FlushDiskType::SyncFlush);
    tokio_runtime().block_on(async {
        // Nothing about flushing is set on the service: the store's SYNC_FLUSH is the only source.
        let config = MasterServiceConfig { role: BrokerRole::AsyncMaster, ..MasterServiceConfig::default() };
        let master = logship_tokio::spawn_master(config, log.clone(), "127.0.0.1:0".parse().unwrap())
            .await
            .expect("a service with no flush setting of its own starts on a SYNC_FLUSH store");
        let result = master.put(Message::new("TopicTest", 0, bytes::Bytes::from_static(b"durable"))).await;
        assert_eq!(result.status, PutStatus::PutOk);
        assert!(logship_core::LogRead::flushed(&*log) >= result.end(), "acknowledged before it was durable");
        master.shutdown().await;
    });
}

#[test]
fn the_store_and_plain_adapters_do_not_depend_on_rustls() {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["tree", "--offline", "-e", "normal", "--prefix", "none", "--manifest-path"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .args(["-p", "logship-store", "-p", "logship-tokio", "-p", "logship-smol"])
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).unwrap();
    assert!(tree.contains("logship-core "), "{tree}");
    let tls: Vec<&str> = tree
        .lines()
        .filter(|l| ["rustls ", "ring ", "tokio-rustls ", "futures-rustls "].iter().any(|c| l.starts_with(c)))
        .collect();
    assert!(tls.is_empty(), "TLS crates in the tree of a plain embedder: {tls:?}");
}

#[test]
fn the_fuzz_targets_of_the_protocol_decoders_build_without_the_server() {
    // Only the `server` feature (on by default, for the `http_request` target) pulls in the
    // HTTP stack: `--no-default-features` builds the protocol, store and remoting targets.
    // Not `--offline`: on a fresh machine the fuzz crate's own dependencies (libfuzzer-sys)
    // are not downloaded before CI's fuzz build, and `cargo tree` resolves them.
    let tree = |features: &[&str]| {
        let out = std::process::Command::new(env!("CARGO"))
            .args(["tree", "-e", "normal", "--prefix", "none", "--manifest-path"])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/Cargo.toml"))
            .args(features)
            .output()
            .unwrap();
        assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let server_crates = |tree: &str| -> Vec<String> {
        tree.lines()
            .filter(|l| ["axum ", "hyper ", "clap ", "logship v"].iter().any(|c| l.starts_with(c)))
            .map(str::to_owned)
            .collect()
    };
    let plain = tree(&["--no-default-features"]);
    assert!(plain.contains("logship-core "), "{plain}");
    assert!(
        server_crates(&plain).is_empty(),
        "server crates in the decoders' fuzz build: {:?}",
        server_crates(&plain)
    );
    let with_server = tree(&[]);
    assert!(
        !server_crates(&with_server).is_empty(),
        "the server feature no longer adds the server: {with_server}"
    );
}

#[test]
fn a_master_whose_segment_size_disagrees_with_its_store_is_refused_at_start_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let log = store(dir.path(), |c| {
        c.mapped_file_size_commit_log = 64 * 1024;
        c.max_message_size = 8 * 1024;
    });
    tokio_runtime().block_on(async {
        let mut config = sync_master();
        config.core.mapped_file_size_commit_log = 128 * 1024;
        let err =
            logship_tokio::spawn_master(config, log, "127.0.0.1:0".parse().unwrap()).await.err().unwrap();
        let text = err.to_string();
        assert!(text.contains("mappedFileSizeCommitLog"), "{text}");
        assert!(text.contains("131072") && text.contains("65536"), "{text}");
    });
}

#[test]
fn a_service_config_for_its_store_takes_the_segment_size_set_once_on_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let log = store(dir.path(), |c| {
        c.flush_disk_type = FlushDiskType::SyncFlush;
        c.sync_flush_timeout = Duration::from_secs(7);
        c.mapped_file_size_commit_log = 64 * 1024;
        c.max_message_size = 8 * 1024;
    });
    let config = MasterServiceConfig { role: BrokerRole::SyncMaster, ..MasterServiceConfig::for_log(&*log) };
    assert_eq!(config.core.mapped_file_size_commit_log, 64 * 1024);
    tokio_runtime().block_on(async {
        let master = logship_tokio::spawn_master(config, log, "127.0.0.1:0".parse().unwrap()).await.unwrap();
        master.shutdown().await;
    });
}

/// Calls made to a master and a slave right after their shutdown returned are answered as
/// stopped, not left waiting: each round races the call against the task dropping its command
/// queue (a tokio send that reserved its slot before the close used to land in a queue no one
/// read, and hung about once in 150 rounds; a smol slave kept the commands queued while it
/// stopped). A hang fails the round after 10 s.
#[test]
fn calls_after_shutdown_are_answered_stopped_on_both_adapters() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for _ in 0..500 {
        rt.block_on(async {
            let limit = Duration::from_secs(10);
            let log = Arc::new(MemoryLog::new());
            let master = logship_tokio::spawn_master(sync_master(), log, "127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            let config = SlaveServiceConfig::new(master.local_addr().to_string());
            let slave = logship_tokio::spawn_slave(config, Arc::new(MemoryLog::new())).await.unwrap();
            slave.shutdown().await;
            let status =
                tokio::time::timeout(limit, slave.status()).await.expect("status hung after shutdown");
            assert!(status.is_none(), "a stopped slave reports no status");
            master.shutdown().await;
            let waited = tokio::time::timeout(limit, master.wait_in_sync(1, Duration::from_secs(5)))
                .await
                .expect("wait_in_sync hung after shutdown");
            assert_eq!(waited.unwrap_err(), InSyncError::Stopped);
        });
    }
    for _ in 0..500 {
        smol::block_on(async {
            let spawn = |task: logship_smol::Task| smol::spawn(task).detach();
            let log = Arc::new(MemoryLog::new());
            let master =
                logship_smol::spawn_master(sync_master(), log, "127.0.0.1:0".parse().unwrap(), spawn)
                    .await
                    .unwrap();
            let config = SlaveServiceConfig::new(master.local_addr().to_string());
            let slave = logship_smol::spawn_slave(config, Arc::new(MemoryLog::new()), spawn).await.unwrap();
            slave.shutdown().await;
            let status = smol::future::or(async { Some(slave.status().await) }, async {
                smol::Timer::after(Duration::from_secs(10)).await;
                None
            })
            .await
            .expect("status hung after shutdown");
            assert!(status.is_none(), "a stopped slave reports no status");
            master.shutdown().await;
        });
    }
}
