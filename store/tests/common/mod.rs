//! Helpers shared by the store's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

pub mod truncation;

use logship_store::{Clock, CommitLog, DiskUsage, Message, StoreConfig, StoreEnv, StoreError};

/// 16 KiB segments: small enough to roll often, big enough for a few messages.
pub const SEGMENT: u64 = 16 * 1024;

/// A fixed test time (2026-01-01T12:00:00Z) so encodings are deterministic.
pub const T0: i64 = 1_767_268_800_000;

/// A small, deterministic configuration: no timer-driven flushes or retention during a test.
pub fn config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.mapped_file_size_commit_log = SEGMENT;
    c.mapped_file_size_consume_queue = 64 * 20;
    c.max_message_size = 4096;
    c.flush_interval_commit_log = Duration::from_secs(3600);
    c.flush_commit_log_thorough_interval = Duration::from_secs(3600);
    c.flush_interval_consume_queue = Duration::from_secs(3600);
    c.clean_resource_interval = Duration::from_secs(3600);
    c
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct TestClock {
    pub millis: AtomicI64,
    pub hour: AtomicU32,
}

impl Clock for TestClock {
    fn now_millis(&self) -> i64 {
        self.millis.load(Ordering::SeqCst)
    }
    fn hour_of_day(&self, _millis: i64) -> u32 {
        self.hour.load(Ordering::SeqCst)
    }
}

/// A disk whose usage is whatever the test sets.
#[derive(Debug)]
pub struct TestDisk {
    pub ratio_bits: AtomicU64,
}

impl TestDisk {
    pub fn set(&self, ratio: f64) {
        self.ratio_bits.store(ratio.to_bits(), Ordering::SeqCst);
    }
}

impl DiskUsage for TestDisk {
    fn used_ratio(&self, _path: &Path) -> io::Result<f64> {
        Ok(f64::from_bits(self.ratio_bits.load(Ordering::SeqCst)))
    }
}

/// The injected environment of a test store.
#[derive(Clone, Debug)]
pub struct Env {
    pub clock: Arc<TestClock>,
    pub disk: Arc<TestDisk>,
}

impl Default for Env {
    fn default() -> Self {
        Self {
            clock: Arc::new(TestClock { millis: AtomicI64::new(T0), hour: AtomicU32::new(12) }),
            disk: Arc::new(TestDisk { ratio_bits: AtomicU64::new(0.10f64.to_bits()) }),
        }
    }
}

impl Env {
    pub fn store_env(&self) -> StoreEnv {
        StoreEnv { clock: self.clock.clone(), disk: self.disk.clone() }
    }

    pub fn open(&self, dir: &Path, config: StoreConfig) -> Result<CommitLog, StoreError> {
        CommitLog::open_with(dir, config, self.store_env())
    }
}

/// Message `i` of a test stream: topic `T<i%3>`, queue `i%2`, tag `tag<i%4>`, a body whose length
/// varies with `i`.
pub fn message(i: usize) -> Message {
    let body: Vec<u8> = (0..(20 + (i * 37) % 300)).map(|j| (i * 31 + j) as u8).collect();
    Message::new(format!("T{}", i % 3), (i % 2) as i32, body).with_tags(format!("tag{}", i % 4))
}

/// Runs a future to completion on this thread.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Polls `f` until it is true (for effects of background threads), failing after a generous
/// bound that only a hang reaches.
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..30_000 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("timed out waiting for {what}");
}

/// Overwrites bytes of a file in place.
pub fn patch(path: &Path, at: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, at).unwrap();
}

/// Zeroes a file from `from` to its end (what a crash does to writes that never reached disk).
pub fn zero_from(path: &Path, from: u64) {
    let len = std::fs::metadata(path).unwrap().len();
    if from < len {
        patch(path, from, &vec![0; (len - from) as usize]);
    }
}

/// The path of the segment starting at `base`.
pub fn segment_path(root: &Path, base: u64) -> std::path::PathBuf {
    root.join("commitlog").join(format!("{base:020}"))
}

/// Message `i` encoded as a master would store it at `offset`: the bytes a slave receives.
pub fn record_at(offset: u64, i: usize) -> Vec<u8> {
    let fields = logship_store::StoreFields {
        queue_offset: 0,
        physical_offset: offset as i64,
        store_timestamp: T0,
        store_host: config().store_host,
    };
    logship_store::codec::encode(&message(i), &fields).unwrap()
}
