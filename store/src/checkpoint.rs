//! The `checkpoint` file (protocol notes §6.6): one 4 KiB page in RocketMQ's layout, plus a
//! logship block that RocketMQ ignores.
//!
//! RocketMQ's fields, big-endian `i64`s: `physicMsgTimestamp @0`, `logicsMsgTimestamp @8`,
//! `indexMsgTimestamp @16`, and (5.x) `masterFlushedOffset @24`, `confirmPhyOffset @32`. A Java
//! broker reads and writes only these, so a store written by logship opens in RocketMQ and vice
//! versa.
//!
//! The logship block at byte 256 records what recovery needs to be exact rather than heuristic:
//! the flushed message boundary (everything before it is durable and whole, so an invalid record
//! before it is corruption, not a torn tail), whether the last shutdown was clean and where the
//! log ended then, the first offset of a log that adopted a non-segment-aligned start, the
//! commit-log offset up to which the consume queues are durable, and (version 2) the
//! replication-confirmed offset of controller mode, which local puts never raise (a slave
//! never truncates below it). It is protected by a CRC32. Version 1 blocks still read; their
//! confirmed offset is taken to be `confirmPhyOffset`.
//! The page's other bytes are preserved as found.
//!
//! Everything the store reads lies in the page's first 512-byte sector, which disks write
//! atomically, so a write torn by a power cut leaves the old or the new checkpoint, not a mix.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, StoreError};

/// Length of the checkpoint file: one OS page, as RocketMQ maps it.
pub(crate) const CHECKPOINT_LEN: usize = 4096;
const BLOCK_AT: usize = 256;
/// A version 1 block: magic, version, flags, four offsets, CRC.
const BLOCK_LEN_V1: usize = 8 + 4 + 4 + 8 * 4 + 4;
/// A version 2 block: the same and the confirmed offset before the CRC.
const BLOCK_LEN: usize = BLOCK_LEN_V1 + 8;
const MAGIC: [u8; 8] = *b"LOGSHIP1";
const VERSION: u32 = 2;
const FLAG_CLEAN: u32 = 1;

/// The logship block of the checkpoint.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LogshipState {
    /// The last shutdown was clean and the log ended at `clean_end`.
    pub(crate) clean: bool,
    /// A message boundary at or below which every byte is durable.
    pub(crate) flushed: u64,
    /// The end of the log at the last clean shutdown.
    pub(crate) clean_end: u64,
    /// The first offset of the log, if it adopted a start inside its first segment.
    pub(crate) min_offset: u64,
    /// The commit-log offset up to which consume-queue entries are durable.
    pub(crate) dispatched: u64,
    /// The replication-confirmed offset (controller mode: what a master's sync-state-set
    /// acknowledged, as this broker learned it); `None` in a version 1 block.
    pub(crate) confirmed: Option<u64>,
}

/// The checkpoint's contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub(crate) physic_msg_timestamp: i64,
    pub(crate) logics_msg_timestamp: i64,
    pub(crate) index_msg_timestamp: i64,
    pub(crate) master_flushed_offset: i64,
    pub(crate) confirm_phy_offset: i64,
    /// `None` for a checkpoint written by RocketMQ (the block is all zero).
    pub(crate) logship: Option<LogshipState>,
}

fn be_i64(page: &[u8], at: usize) -> i64 {
    let mut b = [0; 8];
    b.copy_from_slice(&page[at..at + 8]);
    i64::from_be_bytes(b)
}

fn be_u64(page: &[u8], at: usize) -> u64 {
    be_i64(page, at) as u64
}

fn be_u32(page: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([page[at], page[at + 1], page[at + 2], page[at + 3]])
}

/// Parses a checkpoint page.
pub(crate) fn parse(path: &Path, page: &[u8]) -> Result<Checkpoint, StoreError> {
    let corrupt = |reason: String| StoreError::CheckpointCorrupt { path: path.to_path_buf(), reason };
    if page.len() != CHECKPOINT_LEN {
        return Err(StoreError::CheckpointTruncated {
            path: path.to_path_buf(),
            len: page.len() as u64,
            expected: CHECKPOINT_LEN as u64,
        });
    }
    let fields = [
        "physicMsgTimestamp",
        "logicsMsgTimestamp",
        "indexMsgTimestamp",
        "masterFlushedOffset",
        "confirmPhyOffset",
    ];
    let mut values = [0i64; 5];
    for (i, name) in fields.iter().enumerate() {
        values[i] = be_i64(page, i * 8);
        if values[i] < 0 {
            return Err(corrupt(format!("{name} is negative ({})", values[i])));
        }
    }
    let block = &page[BLOCK_AT..BLOCK_AT + BLOCK_LEN];
    let logship = if block[..8] == MAGIC {
        let version = be_u32(block, 8);
        let len = match version {
            1 => BLOCK_LEN_V1,
            VERSION => BLOCK_LEN,
            _ => return Err(corrupt(format!("unsupported logship block version {version}"))),
        };
        let crc = be_u32(block, len - 4);
        if crc32fast::hash(&block[..len - 4]) != crc {
            return Err(corrupt("logship block CRC mismatch".into()));
        }
        let flags = be_u32(block, 12);
        if flags & !FLAG_CLEAN != 0 {
            return Err(corrupt(format!("unknown logship flags 0x{flags:08X}")));
        }
        let state = LogshipState {
            clean: flags & FLAG_CLEAN != 0,
            flushed: be_u64(block, 16),
            clean_end: be_u64(block, 24),
            min_offset: be_u64(block, 32),
            dispatched: be_u64(block, 40),
            confirmed: (version >= 2).then(|| be_u64(block, 48)),
        };
        for (name, v) in [
            ("flushed", state.flushed),
            ("clean_end", state.clean_end),
            ("min_offset", state.min_offset),
            ("dispatched", state.dispatched),
            ("confirmed", state.confirmed.unwrap_or(0)),
        ] {
            if v > i64::MAX as u64 {
                return Err(corrupt(format!("logship {name} offset {v} is out of range")));
            }
        }
        Some(state)
    } else if block.iter().any(|&b| b != 0) {
        return Err(corrupt("unrecognised bytes where the logship block belongs".into()));
    } else {
        None
    };
    Ok(Checkpoint {
        physic_msg_timestamp: values[0],
        logics_msg_timestamp: values[1],
        index_msg_timestamp: values[2],
        master_flushed_offset: values[3],
        confirm_phy_offset: values[4],
        logship,
    })
}

/// Writes `ckpt` over `page`, leaving bytes it does not own untouched.
fn render(page: &mut [u8], ckpt: &Checkpoint) {
    let values = [
        ckpt.physic_msg_timestamp,
        ckpt.logics_msg_timestamp,
        ckpt.index_msg_timestamp,
        ckpt.master_flushed_offset,
        ckpt.confirm_phy_offset,
    ];
    for (i, v) in values.iter().enumerate() {
        page[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
    }
    let block = &mut page[BLOCK_AT..BLOCK_AT + BLOCK_LEN];
    match &ckpt.logship {
        None => block.fill(0),
        Some(s) => {
            block[..8].copy_from_slice(&MAGIC);
            block[8..12].copy_from_slice(&VERSION.to_be_bytes());
            block[12..16].copy_from_slice(&(if s.clean { FLAG_CLEAN } else { 0 }).to_be_bytes());
            block[16..24].copy_from_slice(&s.flushed.to_be_bytes());
            block[24..32].copy_from_slice(&s.clean_end.to_be_bytes());
            block[32..40].copy_from_slice(&s.min_offset.to_be_bytes());
            block[40..48].copy_from_slice(&s.dispatched.to_be_bytes());
            block[48..56].copy_from_slice(&s.confirmed.unwrap_or(0).to_be_bytes());
            let crc = crc32fast::hash(&block[..BLOCK_LEN - 4]);
            block[BLOCK_LEN - 4..].copy_from_slice(&crc.to_be_bytes());
        }
    }
}

/// The open checkpoint file.
#[derive(Debug)]
pub(crate) struct CheckpointFile {
    path: PathBuf,
    file: File,
    page: Vec<u8>,
    current: Checkpoint,
}

impl CheckpointFile {
    /// Opens the checkpoint at `path`; `Ok((file, None))` if it did not exist. A missing
    /// checkpoint is created whole (a zero page written under a temporary name, fsynced, renamed,
    /// directory fsynced), so a crash never leaves an empty or partial one behind.
    pub(crate) fn open(path: &Path) -> Result<(Self, Option<Checkpoint>), StoreError> {
        let tmp = path.with_extension("tmp");
        if tmp.exists() {
            std::fs::remove_file(&tmp).at(&tmp)?;
        }
        let existed = path.exists();
        if !existed {
            let file = File::options().write(true).create(true).truncate(true).open(&tmp).at(&tmp)?;
            file.write_all_at(&[0; CHECKPOINT_LEN], 0).at(&tmp)?;
            file.sync_all().at(&tmp)?;
            std::fs::rename(&tmp, path).at(path)?;
            if let Some(dir) = path.parent() {
                crate::segment::sync_dir(dir)?;
            }
        }
        let mut file = File::options().read(true).write(true).open(path).at(path)?;
        let mut page = Vec::new();
        file.read_to_end(&mut page).at(path)?;
        let loaded = if existed { Some(parse(path, &page)?) } else { None };
        page.resize(CHECKPOINT_LEN, 0);
        let current = loaded.clone().unwrap_or_default();
        Ok((Self { path: path.to_path_buf(), file, page, current }, loaded))
    }

    /// The contents last written (or loaded).
    pub(crate) fn current(&self) -> &Checkpoint {
        &self.current
    }

    /// Writes `ckpt` and waits until it is on disk.
    pub(crate) fn write(&mut self, ckpt: Checkpoint) -> Result<(), StoreError> {
        render(&mut self.page, &ckpt);
        self.file.write_all_at(&self.page, 0).at(&self.path)?;
        self.file.sync_data().at(&self.path)?;
        self.current = ckpt;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            physic_msg_timestamp: 1,
            logics_msg_timestamp: 2,
            index_msg_timestamp: 3,
            master_flushed_offset: 0,
            confirm_phy_offset: 0,
            logship: Some(LogshipState {
                clean: true,
                flushed: 100,
                clean_end: 200,
                min_offset: 5,
                dispatched: 150,
                confirmed: Some(120),
            }),
        }
    }

    #[test]
    fn a_version_1_block_still_reads_without_a_confirmed_offset() {
        let mut page = vec![0; CHECKPOINT_LEN];
        let block = &mut page[BLOCK_AT..BLOCK_AT + BLOCK_LEN_V1];
        block[..8].copy_from_slice(&MAGIC);
        block[8..12].copy_from_slice(&1u32.to_be_bytes());
        block[16..24].copy_from_slice(&100u64.to_be_bytes());
        let crc = crc32fast::hash(&block[..BLOCK_LEN_V1 - 4]);
        block[BLOCK_LEN_V1 - 4..].copy_from_slice(&crc.to_be_bytes());
        let c = parse(Path::new("c"), &page).unwrap();
        let state = c.logship.unwrap();
        assert_eq!((state.flushed, state.confirmed), (100, None));
    }

    #[test]
    fn round_trips_and_keeps_rocketmq_fields_where_java_reads_them() {
        let mut page = vec![0; CHECKPOINT_LEN];
        render(&mut page, &sample());
        assert_eq!(&page[0..8], &1i64.to_be_bytes());
        assert_eq!(&page[8..16], &2i64.to_be_bytes());
        assert_eq!(&page[16..24], &3i64.to_be_bytes());
        assert_eq!(parse(Path::new("c"), &page).unwrap(), sample());
    }

    #[test]
    fn a_rocketmq_checkpoint_has_no_logship_block() {
        let mut page = vec![0; CHECKPOINT_LEN];
        page[0..8].copy_from_slice(&7i64.to_be_bytes());
        page[40..48].copy_from_slice(&9i64.to_be_bytes()); // bytes other writers use are fine
        let c = parse(Path::new("c"), &page).unwrap();
        assert_eq!((c.physic_msg_timestamp, c.logship), (7, None));
    }

    #[test]
    fn truncated_and_garbage_checkpoints_are_distinct_errors() {
        let e = parse(Path::new("c"), &[0; 100]).unwrap_err();
        assert!(matches!(e, StoreError::CheckpointTruncated { len: 100, expected: 4096, .. }), "{e}");
        let mut page = vec![0; CHECKPOINT_LEN];
        render(&mut page, &sample());
        page[BLOCK_AT + 20] ^= 1;
        assert!(matches!(parse(Path::new("c"), &page), Err(StoreError::CheckpointCorrupt { .. })));
        let garbage: Vec<u8> = (0..CHECKPOINT_LEN).map(|i| (i * 7 + 3) as u8 | 0x80).collect();
        assert!(matches!(parse(Path::new("c"), &garbage), Err(StoreError::CheckpointCorrupt { .. })));
    }
}
