//! Smoke test of both adapters with an in-memory log (the store-backed scenarios live in
//! `e2e_replication.rs`).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use logship_core::BrokerRole;
use logship_core::service::{MasterServiceConfig, SlaveServiceConfig};
use logship_core::*;
use support::*;

#[derive(Default)]
struct MemLog {
    data: Mutex<Vec<u8>>,
    /// Where each put's message starts.
    starts: Mutex<std::collections::BTreeSet<Offset>>,
}

#[derive(Debug, thiserror::Error)]
#[error("mem log: {0}")]
struct MemError(String);

impl LogRead for MemLog {
    type Error = MemError;
    fn bounds(&self) -> LogBounds {
        LogBounds { min: 0, max: self.data.lock().unwrap().len() as u64 }
    }
    fn flushed(&self) -> Offset {
        self.bounds().max
    }
    fn read(&self, span: LogSpan) -> Result<Bytes, MemError> {
        let d = self.data.lock().unwrap();
        d.get(span.offset as usize..span.end() as usize)
            .map(Bytes::copy_from_slice)
            .ok_or_else(|| MemError(format!("{span:?} out of range")))
    }
    fn is_record_boundary(&self, offset: Offset) -> Result<bool, MemError> {
        let end = self.bounds().max;
        if offset > end {
            return Err(MemError(format!("{offset} is beyond the end {end}")));
        }
        Ok(offset == 0 || offset == end || self.starts.lock().unwrap().contains(&offset))
    }
    fn segment_size(&self) -> u64 {
        logship_core::DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG
    }
}

impl LogWrite for MemLog {
    fn append_at(&self, offset: Offset, data: &[u8]) -> Result<Offset, MemError> {
        let mut d = self.data.lock().unwrap();
        if offset != d.len() as u64 {
            return Err(MemError(format!("append at {offset}, end {}", d.len())));
        }
        d.extend_from_slice(data);
        Ok(d.len() as u64)
    }
    fn flush(&self) -> Result<Offset, MemError> {
        Ok(self.bounds().max)
    }
}

impl MessageLog for MemLog {
    type Message = Vec<u8>;
    type Durable = std::future::Ready<Result<Offset, MemError>>;
    fn put(&self, message: Vec<u8>) -> PutResult {
        let mut d = self.data.lock().unwrap();
        let offset = d.len() as u64;
        d.extend_from_slice(&message);
        self.starts.lock().unwrap().insert(offset);
        PutResult {
            status: PutStatus::PutOk,
            offset,
            wrote_bytes: message.len() as u32,
            queue_offset: 0,
            msg_id: String::new(),
        }
    }
    fn durable(&self, offset: Offset) -> Self::Durable {
        std::future::ready(Ok(offset))
    }
    fn flush_settings(&self) -> logship_core::FlushSettings {
        logship_core::FlushSettings::default()
    }
}

fn sync_master_replicates_to_a_slave(master_side: Side, slave_side: Side) {
    run(async {
        let master_log = Arc::new(MemLog::default());
        let config = MasterServiceConfig { role: BrokerRole::SyncMaster, ..Default::default() };
        let master = master_side.master(config, master_log.clone()).await;
        assert_eq!(master.put(b"first".to_vec()).await.status, PutStatus::SlaveNotAvailable);
        let slave_log = Arc::new(MemLog::default());
        let slave =
            slave_side.slave(SlaveServiceConfig::new(master.addr().to_string()), slave_log.clone()).await;
        eventually(Duration::from_secs(10), "the slave's first report", || async {
            master.status().await.slaves.iter().any(|s| s.ack.is_some()).then_some(())
        })
        .await;
        for i in 0..100 {
            let r = master.put(format!("message {i}").into_bytes()).await;
            assert_eq!(r.status, PutStatus::PutOk, "put {i}");
        }
        let status = master.status().await;
        assert_eq!(status.slaves[0].ack, Some(status.max_offset));
        assert_eq!(*slave_log.data.lock().unwrap(), *master_log.data.lock().unwrap());
        assert_eq!(slave.status().await.ack_offset, Some(status.max_offset));
        slave.shutdown().await;
        master.shutdown().await;
    });
}

on_every_runtime!(sync_master_replicates_to_a_slave);
