//! A SYNC_MASTER and a slave in one program, on tokio, each on its own on-disk commit log
//! (`logship-store`'s mmap `CommitLog`, the log the server runs on).
//!
//! Run it with `cargo run -p logship-tokio --example store`; `cargo test -p logship-tokio
//! --example store` runs it as a test. It needs only this crate and `logship-store`.

use std::sync::Arc;
use std::time::Duration;

use logship_store::{CommitLog, Message, StoreConfig};
use logship_tokio::{BrokerRole, MasterServiceConfig, PutStatus, SlaveServiceConfig};

/// A small store: 1 MiB segments, so a few hundred puts cross a segment boundary.
fn store_config() -> StoreConfig {
    let mut config = StoreConfig::default();
    config.mapped_file_size_commit_log = 1024 * 1024;
    config.max_message_size = 64 * 1024;
    // Puts must not be refused because the machine's disk is nearly full.
    config.disk_space_warning_level_ratio = 1.0;
    config
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let master_dir = tempfile::tempdir()?;
    let slave_dir = tempfile::tempdir()?;

    // The master: its flush settings and segment size are set once, on its store.
    let master_log = Arc::new(CommitLog::open(master_dir.path(), store_config())?);
    let config =
        MasterServiceConfig { role: BrokerRole::SyncMaster, ..MasterServiceConfig::for_log(&*master_log) };
    let master = logship_tokio::spawn_master(config, master_log.clone(), "127.0.0.1:0".parse()?).await?;

    // The slave stores what the master streams in its own commit log.
    let slave_log = Arc::new(CommitLog::open(slave_dir.path(), store_config())?);
    let slave_config = SlaveServiceConfig::new(master.local_addr().to_string());
    let slave = logship_tokio::spawn_slave(slave_config, slave_log.clone()).await?;

    master.wait_in_sync(1, Duration::from_secs(20)).await?;
    let mut end = 0;
    for i in 0..400 {
        let put = master.put(Message::new("ExampleTopic", 0, vec![b'x'; 4000])).await;
        // SYNC_MASTER: PUT_OK means the slave has acknowledged every byte up to `end`.
        assert_eq!(put.status, PutStatus::PutOk, "put {i}");
        end = put.end();
    }
    let slave_status = slave.status().await.ok_or("the slave stopped")?;
    assert!(slave_status.max_offset >= end, "the slave holds every acknowledged byte");
    assert!(slave_log.bounds().max >= end);
    println!("replicated {end} bytes across {} segments to the slave's store", end.div_ceil(1024 * 1024));

    slave.shutdown().await;
    master.shutdown().await;
    Ok(())
}

#[test]
fn example_replicates_to_the_slaves_store() {
    main().unwrap();
}
