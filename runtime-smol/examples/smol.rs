//! A SYNC_MASTER and a slave in one program, on smol's executor, with in-memory logs.
//!
//! Run it with `cargo run -p logship-smol --example smol`; `cargo test -p logship-smol --example smol` runs it as a test.

use std::sync::Arc;
use std::time::Duration;

use logship_smol::BrokerRole;
use logship_smol::logship_core::memlog::MemoryLog;
use logship_smol::{LogRead, PutStatus};
use logship_smol::{MasterServiceConfig, SlaveServiceConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    smol::block_on(async {
        // logship-smol never spawns on its own: it hands each task to this function.
        let spawn = |task: logship_smol::Task| smol::spawn(task).detach();

        // The master: SYNC_MASTER, so a put returns once a slave has acknowledged it.
        let master_log = Arc::new(MemoryLog::new());
        let config = MasterServiceConfig { role: BrokerRole::SyncMaster, ..Default::default() };
        let master =
            logship_smol::spawn_master(config, master_log.clone(), "127.0.0.1:0".parse()?, spawn).await?;

        // The slave connects to the master's HA address and stores what it streams.
        let slave_log = Arc::new(MemoryLog::new());
        let slave_config = SlaveServiceConfig::new(master.local_addr().to_string());
        let slave = logship_smol::spawn_slave(slave_config, slave_log.clone(), spawn).await?;

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
    })
}

#[test]
fn example_replicates_to_the_slave() {
    main().unwrap();
}
