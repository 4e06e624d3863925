//! Damage found late: the background scrub, the open-time cross-check of the files against
//! the checkpoint, and a restart on a full disk.

mod common;

use common::{Env, SEGMENT, config, eventually, message, segment_path};
use logship_store::{CommitLog, LogSpan, PutStatus, RecoveryKind, StoreError};

fn fill(log: &CommitLog, segments: u64) -> Vec<logship_store::PutResult> {
    let mut puts = Vec::new();
    let mut i = 0;
    while log.bounds().max < segments * SEGMENT + 100 {
        let r = log.put(message(i));
        assert_eq!(r.status, PutStatus::PutOk);
        puts.push(r);
        i += 1;
    }
    puts
}

/// Flips one bit in the body of the message at `offset` (a record's body comes right after
/// its fixed fields and before its topic; this finds it by content).
fn flip_body_byte(root: &std::path::Path, log_bytes: &[u8], offset: u64, body: &[u8]) {
    let from = offset as usize;
    let at = from + log_bytes[from..].windows(body.len()).position(|w| w == body).unwrap();
    let seg = at as u64 / SEGMENT * SEGMENT;
    common::patch(&segment_path(root, seg), at as u64 - seg, &[log_bytes[at] ^ 0x10]);
}

/// Tests here run one at a time: one of them spawns `mount`, `fallocate` and `dd`, and a child
/// forked by one test holds a copy of every descriptor of the process until it execs, the
/// store's lock file included, so another test's reopen right after a shutdown could find its
/// store still locked.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn the_scrub_finds_flipped_bytes_in_older_segments_after_a_clean_restart() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    let puts = fill(&log, 3);
    let max = log.bounds().max;
    let mut all = Vec::new();
    let mut at = 0;
    while at < max {
        let len = (SEGMENT - at % SEGMENT).min(max - at);
        all.extend_from_slice(&log.read(LogSpan { offset: at, len: len as u32 }).unwrap());
        at += len;
    }
    log.shutdown().unwrap();
    drop(log);
    // Two damaged messages in the first segment, one in the second.
    let victims = [3, 5, puts.iter().position(|p| p.offset > SEGMENT).unwrap() + 2];
    for &v in &victims {
        flip_body_byte(dir.path(), &all, puts[v].offset, &message(v).body);
    }
    let mut cfg = config();
    cfg.scrub_bytes_per_second = 1 << 30;
    cfg.scrub_start_delay = std::time::Duration::ZERO;
    let log = env.open(dir.path(), cfg).unwrap();
    assert_eq!(log.recovery_report().kind, RecoveryKind::Clean, "a clean restart scans nothing");
    eventually("a scrub pass", || log.status().scrub.passes >= 1);
    let scrub = log.status().scrub;
    assert!(scrub.enabled);
    let found: Vec<u64> = scrub.findings.iter().map(|f| f.offset).collect();
    assert_eq!(found, victims.map(|v| puts[v].offset), "{scrub:?}");
    assert_eq!(scrub.damaged_records, 3);
    assert!(scrub.bytes_verified >= max - 3 * 1000, "the whole log was read: {}", scrub.bytes_verified);
    let first = &scrub.findings[0];
    assert_eq!(first.segment, segment_path(dir.path(), 0));
    assert!(first.error.contains("CRC"), "{}", first.error);
    assert_eq!(first.resumed_at, Some(puts[4].offset), "the scrub goes on after the damaged record");
}

#[test]
fn a_missing_head_segment_is_an_error_unless_retention_deleted_it() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    fill(&log, 3);
    log.shutdown().unwrap();
    drop(log);
    std::fs::remove_file(segment_path(dir.path(), 0)).unwrap();
    let e = env.open(dir.path(), config()).unwrap_err();
    assert!(matches!(e, StoreError::MissingSegments { from: 0, to: SEGMENT, .. }), "{e}");
    // The operator may accept the loss.
    let mut cfg = config();
    cfg.recovery.truncate_on_corruption = true;
    let log = env.open(dir.path(), cfg).unwrap();
    assert_eq!(log.bounds().min, SEGMENT);
    log.shutdown().unwrap();
    drop(log);
    // Deleted by retention (forced here), the same segments are no error, after a clean
    // shutdown or a crash.
    let mut cfg = config();
    cfg.clean_file_forcibly_enable = true;
    let log = env.open(dir.path(), cfg.clone()).unwrap();
    env.disk.set(0.86);
    assert_eq!(log.run_retention().unwrap().deleted_segments.len(), 2);
    log.abandon();
    env.disk.set(0.1);
    let log = env.open(dir.path(), cfg).unwrap();
    assert_eq!(log.bounds().min, 3 * SEGMENT);
}

#[test]
fn a_missing_tail_segment_is_an_error_not_a_shorter_log() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    fill(&log, 3);
    log.shutdown().unwrap();
    drop(log);
    std::fs::remove_file(segment_path(dir.path(), 3 * SEGMENT)).unwrap();
    let e = env.open(dir.path(), config()).unwrap_err();
    assert!(matches!(e, StoreError::MissingSegments { from, .. } if from == 3 * SEGMENT), "{e}");
}

/// A tmpfs of `size` on a temporary directory, unmounted on drop; `None` (after one line saying
/// why) when mounting is not permitted, unless `LOGSHIP_REQUIRE_MOUNT` is set.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Self(dir)),
            other => {
                let why = match other {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                    Err(e) => e.to_string(),
                };
                assert!(
                    std::env::var_os("LOGSHIP_REQUIRE_MOUNT").is_none(),
                    "LOGSHIP_REQUIRE_MOUNT is set but a tmpfs cannot be mounted: {why}"
                );
                println!("skipped: cannot mount a tmpfs here ({why}); run as root to test a full disk");
                None
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

#[test]
fn a_restart_on_a_full_disk_with_a_sparse_active_segment_refuses_writes_instead_of_crashing() {
    let _serial = serial();
    let Some(disk) = SmallDisk::mount("24m") else { return };
    let root = disk.0.path().join("store");
    let mut cfg = config();
    cfg.mapped_file_size_commit_log = 16 << 20;
    let env = Env::default();
    let log = env.open(&root, cfg.clone()).unwrap();
    for i in 0..20 {
        assert_eq!(log.put(message(i)).status, PutStatus::PutOk, "{:?}", log.status());
    }
    let end = log.bounds().max;
    log.shutdown().unwrap();
    drop(log);
    // The segment's unwritten tail becomes a hole (as a store written before reservations left
    // it), and the disk fills up.
    let seg = segment_path(&root, 0);
    let punched = std::process::Command::new("fallocate")
        .args(["-p", "-o", "1048576", "-l", "15728640"])
        .arg(&seg)
        .status()
        .unwrap();
    assert!(punched.success());
    let filler = disk.0.path().join("filler");
    let _ = std::process::Command::new("dd")
        .args(["if=/dev/zero", "bs=1M", &format!("of={}", filler.display())])
        .stderr(std::process::Stdio::null())
        .status();
    let log = env.open(&root, cfg).unwrap();
    assert_eq!(log.bounds().max, end, "the store opens on a full disk");
    assert_eq!(log.read_message(0).unwrap().body, message(0).body, "reads go on");
    let mut refused = None;
    for i in 0..20_000 {
        let r = log.put(message(i));
        if r.status != PutStatus::PutOk {
            refused = Some(r.status);
            break;
        }
    }
    assert_eq!(refused, Some(PutStatus::ServiceNotAvailable));
    let e = log.write_refusal().expect("the refusal is typed");
    assert!(matches!(&e, StoreError::DiskFull { path, needed, .. } if *path == seg && *needed > 0), "{e}");
    assert!(e.to_string().contains("disk full"), "{e}");
    // Space returns: writes resume.
    std::fs::remove_file(&filler).unwrap();
    let r = log.put(message(1));
    assert_eq!(r.status, PutStatus::PutOk, "{:?}", log.status());
    assert!(log.write_refusal().is_none());
}

#[test]
fn consume_queue_files_reserve_their_blocks_as_they_grow_not_all_at_once() {
    let _serial = serial();
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config();
    cfg.mapped_file_size_consume_queue = 300_000 * 20; // RocketMQ's 6 MB
    let log = Env::default().open(dir.path(), cfg).unwrap();
    for i in 0..10 {
        assert_eq!(log.put(message(i * 6)).status, PutStatus::PutOk);
    }
    let cq = dir.path().join("consumequeue/T0/0").join(format!("{:020}", 0));
    let meta = std::fs::metadata(&cq).unwrap();
    assert_eq!(meta.len(), 6_000_000);
    assert!(meta.blocks() * 512 <= 256 * 1024, "{} bytes allocated", meta.blocks() * 512);
    // The commit-log segment is reserved whole.
    let seg = std::fs::metadata(segment_path(dir.path(), 0)).unwrap();
    assert!(seg.blocks() * 512 >= SEGMENT, "{} bytes allocated", seg.blocks() * 512);
}
