//! What an embedder relies on beyond the examples: waiting for in-sync replicas ends with a
//! typed error when they do not come, on both adapters.

use std::sync::Arc;
use std::time::Duration;

use logship_core::BrokerRole;
use logship_core::memlog::MemoryLog;
use logship_core::service::InSyncError;
use logship_core::service::{MasterServiceConfig, SlaveServiceConfig};

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
