//! A SYNC_MASTER and a slave in one program, on tokio, with in-memory logs.
//!
//! Run it with `cargo run -p logship-tokio --example tokio`; `cargo test -p logship-tokio --example tokio` runs it as a test.

use std::sync::Arc;
use std::time::Duration;

use logship_tokio::BrokerRole;
use logship_tokio::logship_core::memlog::MemoryLog;
use logship_tokio::{LogRead, PutStatus};
use logship_tokio::{MasterServiceConfig, SlaveServiceConfig};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The master: SYNC_MASTER, so a put returns once a slave has acknowledged it.
    let master_log = Arc::new(MemoryLog::new());
    let config = MasterServiceConfig { role: BrokerRole::SyncMaster, ..Default::default() };
    let master = logship_tokio::spawn_master(config, master_log.clone(), "127.0.0.1:0".parse()?).await?;

    // The slave connects to the master's HA address and stores what it streams.
    let slave_log = Arc::new(MemoryLog::new());
    let slave_config = SlaveServiceConfig::new(master.local_addr().to_string());
    let slave = logship_tokio::spawn_slave(slave_config, slave_log.clone()).await?;

    // Wait until the slave is in sync instead of polling `status()`.
    master.wait_in_sync(1, Duration::from_secs(10)).await?;

    for i in 0..100 {
        let put = master.put(format!("message {i}").into_bytes()).await;
        assert_eq!(put.status, PutStatus::PutOk, "put {i}");
    }
    // Every PUT_OK byte is on the slave.
    assert_eq!(slave_log.contents(), master_log.contents());
    println!("replicated {} bytes to the slave", master_log.bounds().max);

    slave.shutdown().await;
    master.shutdown().await;
    Ok(())
}

#[test]
fn example_replicates_to_the_slave() {
    main().unwrap();
}
