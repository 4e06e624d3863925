//! Write throughput of the store, each figure next to a raw memcpy of the same bytes into a
//! pre-faulted, file-backed shared mapping measured in the same run (and, for context, a memcpy
//! into fresh file pages, which pays the page faults a new segment costs):
//!
//! - `put/1KiB`, `put/128B`: master puts of 1 KiB and 128-byte bodies (ASYNC_FLUSH defaults,
//!   256 MiB segments preallocated and page-touched in the background);
//! - `append_at/32KiB`: slave appends of 32 KiB replicated chunks of 1 KiB messages (the reput
//!   thread indexes them concurrently).
//!
//! Run with `cargo bench -p logship-store --bench throughput`; a summary with MB/s, msgs/s and
//! the ratios to memcpy is printed at the end. The files go to the system temporary directory,
//! or to `LOGSHIP_BENCH_DIR` (for example a tmpfs, to take the disk out of the figures).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use logship_store::bench::MmapTarget;
use logship_store::codec::{self, StoreFields};
use logship_store::{CommitLog, Message, PutStatus, StoreConfig};

const SEGMENT: u64 = 256 * 1024 * 1024;
const CHUNK: usize = 32 * 1024;

/// `(name, bytes per op, messages per op, seconds per op)` of each measured case.
static RESULTS: Mutex<Vec<(String, u64, u64, f64)>> = Mutex::new(Vec::new());

fn record(name: &str, bytes: u64, msgs: u64, iters: u64, elapsed: Duration) {
    RESULTS.lock().unwrap().push((name.to_string(), bytes, msgs, elapsed.as_secs_f64() / iters as f64));
}

/// A temporary directory under `LOGSHIP_BENCH_DIR` or the system temporary directory.
fn tempdir() -> tempfile::TempDir {
    match std::env::var_os("LOGSHIP_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

fn config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.mapped_file_size_commit_log = SEGMENT;
    c
}

fn message(body: usize) -> Message {
    Message::new("BenchTopic", 0, vec![b'x'; body]).with_tags("TagA").with_property("KEYS", "order-1")
}

fn stored_len(body: usize) -> usize {
    let fields = StoreFields {
        queue_offset: 0,
        physical_offset: 0,
        store_timestamp: 0,
        store_host: "127.0.0.1:10911".parse().unwrap(),
    };
    codec::encode(&message(body), &fields).unwrap().len()
}

fn bench_put(c: &mut Criterion, body: usize, label: &str) {
    let len = stored_len(body);
    let dir = tempdir();
    let log = CommitLog::open(dir.path(), config()).unwrap();
    let target_dir = tempdir();
    let mut target = MmapTarget::prefaulted(&target_dir.path().join("memcpy"), SEGMENT).unwrap();
    let record_bytes = vec![b'x'; len];
    let mut group = c.benchmark_group("put");
    group.throughput(Throughput::Bytes(len as u64));
    group.bench_function(BenchmarkId::new("store", label), |b| {
        b.iter_custom(|iters| {
            let msgs: Vec<_> = (0..iters).map(|_| message(body)).collect();
            let start = Instant::now();
            for m in msgs {
                let r = log.put(m);
                debug_assert_eq!(r.status, PutStatus::PutOk);
                let _ = std::hint::black_box(r);
            }
            let elapsed = start.elapsed();
            record(&format!("put {label} store"), len as u64, 1, iters, elapsed);
            elapsed
        })
    });
    group.bench_function(BenchmarkId::new("memcpy", label), |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                target.copy(std::hint::black_box(&record_bytes)).unwrap();
            }
            let elapsed = start.elapsed();
            record(&format!("put {label} memcpy"), len as u64, 1, iters, elapsed);
            elapsed
        })
    });
    group.finish();
    log.shutdown().unwrap();
}

/// The byte stream a master writes (1 KiB messages at their offsets, BLANK-padded at segment
/// ends), cut into 32 KiB chunks that never cross a segment end, as the HA master sends it.
struct RemoteLog {
    /// Offset of the first unsent byte.
    sent: u64,
    /// Encoded bytes from `sent` on.
    buf: Vec<u8>,
    queue_offset: i64,
    message: Message,
}

impl RemoteLog {
    fn new() -> Self {
        Self { sent: 0, buf: Vec::new(), queue_offset: 0, message: message(1024) }
    }

    /// The next chunk and its offset.
    fn next_chunk(&mut self, out: &mut Vec<u8>) -> u64 {
        let seg_end = (self.sent / SEGMENT + 1) * SEGMENT;
        let host = "127.0.0.1:10911".parse().unwrap();
        while self.buf.len() < CHUNK && self.sent + (self.buf.len() as u64) < seg_end {
            let at = self.sent + self.buf.len() as u64;
            let fields = StoreFields {
                queue_offset: self.queue_offset,
                physical_offset: at as i64,
                store_timestamp: 1,
                store_host: host,
            };
            let bytes = codec::encode(&self.message, &fields).unwrap();
            if at + bytes.len() as u64 + 8 > seg_end {
                let remaining = (seg_end - at) as usize;
                self.buf.extend_from_slice(&codec::blank_record(remaining));
                self.buf.resize(self.buf.len() + remaining - 8, 0);
            } else {
                self.buf.extend_from_slice(&bytes);
                self.queue_offset += 1;
            }
        }
        let n = CHUNK.min((seg_end - self.sent) as usize).min(self.buf.len());
        out.clear();
        out.extend(self.buf.drain(..n));
        let at = self.sent;
        self.sent += n as u64;
        at
    }
}

fn bench_append(c: &mut Criterion) {
    let dir = tempdir();
    let log = CommitLog::open(dir.path(), config()).unwrap();
    let target_dir = tempdir();
    let mut target = MmapTarget::prefaulted(&target_dir.path().join("memcpy"), SEGMENT).unwrap();
    let mut fresh = MmapTarget::fresh(&target_dir.path().join("fresh"), SEGMENT).unwrap();
    let mut remote = RemoteLog::new();
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut group = c.benchmark_group("append_at");
    group.throughput(Throughput::Bytes(CHUNK as u64));
    group.bench_function(BenchmarkId::new("store", "32KiB"), |b| {
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            let mut bytes = 0u64;
            for _ in 0..iters {
                let at = remote.next_chunk(&mut chunk);
                let start = Instant::now();
                log.append_at(at, std::hint::black_box(&chunk)).unwrap();
                elapsed += start.elapsed();
                bytes += chunk.len() as u64;
            }
            // Messages per chunk, on average (the chunks also carry segment padding).
            let msgs = bytes / stored_len(1024) as u64 / iters;
            record("append_at 32KiB store", bytes / iters, msgs, iters, elapsed);
            elapsed
        })
    });
    let data = vec![b'x'; CHUNK];
    group.bench_function(BenchmarkId::new("memcpy", "32KiB"), |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                target.copy(std::hint::black_box(&data)).unwrap();
            }
            let elapsed = start.elapsed();
            record("append_at 32KiB memcpy", CHUNK as u64, 0, iters, elapsed);
            elapsed
        })
    });
    group.bench_function(BenchmarkId::new("memcpy-fresh-pages", "32KiB"), |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                fresh.copy(std::hint::black_box(&data)).unwrap();
            }
            let elapsed = start.elapsed();
            record("32KiB memcpy, fresh pages", CHUNK as u64, 0, iters, elapsed);
            elapsed
        })
    });
    group.finish();
    log.shutdown().unwrap();
}

/// Prints, for each case, the median of its samples: MB/s, msgs/s and the ratio to memcpy.
fn summary() {
    let results = RESULTS.lock().unwrap();
    let mut cases: Vec<(String, u64, u64, Vec<f64>)> = Vec::new();
    for (name, bytes, msgs, secs) in results.iter() {
        match cases.iter_mut().find(|c| c.0 == *name) {
            Some(c) => c.3.push(*secs),
            None => cases.push((name.clone(), *bytes, *msgs, vec![*secs])),
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("\n{:<28} {:>10} {:>12} {:>18}", "case (median of samples)", "MB/s", "msgs/s", "vs memcpy");
    for (name, bytes, msgs, samples) in &cases {
        let secs = median(samples);
        let mbps = *bytes as f64 / secs / 1e6;
        let ratio = match name.strip_suffix(" store") {
            Some(base) => cases
                .iter()
                .find(|c| c.0 == format!("{base} memcpy"))
                .map_or(String::new(), |m| format!("{:.2} of memcpy", median(&m.3) / secs)),
            None => String::new(),
        };
        let msgs_per_s = if *msgs == 0 { String::from("-") } else { format!("{:.0}", *msgs as f64 / secs) };
        println!("{name:<28} {mbps:>10.1} {msgs_per_s:>12} {ratio:>18}");
    }
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .configure_from_args();
    bench_put(&mut c, 1024, "1KiB");
    bench_put(&mut c, 128, "128B");
    bench_append(&mut c);
    c.final_summary();
    summary();
}
