//! Test support: one scenario, any runtime. Each `Side` starts services on its own executor;
//! scenario bodies run under `futures_lite::future::block_on` and talk to the services through
//! runtime-agnostic handles, so a tokio master can serve a smol slave and the reverse.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use logship_core::service::{
    MasterService, MasterServiceConfig, MasterStatus, SlaveService, SlaveServiceConfig, SlaveStatus,
};
use logship_core::{LogWrite, MessageLog, PutResult};

pub mod apps;
pub mod pki;

/// Where a service runs.
#[derive(Clone)]
pub enum Side {
    /// A multi-threaded tokio runtime.
    Tokio(Arc<std::sync::Mutex<Option<tokio::runtime::Runtime>>>),
    /// A smol executor on its own threads; the tasks it was given, so they can be dropped.
    Smol(Arc<smol::Executor<'static>>, Arc<std::sync::Mutex<Vec<smol::Task<()>>>>),
    /// async-std's global executor; the tasks it was given, so they can be cancelled.
    AsyncStd(Arc<std::sync::Mutex<Vec<async_std::task::JoinHandle<()>>>>),
}

impl Side {
    pub fn tokio() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        Self::Tokio(Arc::new(std::sync::Mutex::new(Some(rt))))
    }

    pub fn smol() -> Self {
        let ex = Arc::new(smol::Executor::new());
        for _ in 0..2 {
            let ex = ex.clone();
            std::thread::spawn(move || smol::block_on(ex.run(smol::future::pending::<()>())));
        }
        Self::Smol(ex, Arc::default())
    }

    pub fn async_std() -> Self {
        Self::AsyncStd(Arc::default())
    }

    /// A new, independent side of the same kind.
    pub fn fresh(&self) -> Self {
        match self {
            Self::Tokio(_) => Self::tokio(),
            Self::Smol(..) => Self::smol(),
            Self::AsyncStd(_) => Self::async_std(),
        }
    }

    /// Drops every task of this side at once, as if its process died: no shutdown code runs.
    pub async fn kill(&self) {
        match self {
            Self::Tokio(rt) => {
                if let Some(rt) = rt.lock().unwrap().take() {
                    rt.shutdown_background();
                }
            }
            Self::Smol(_, tasks) => drop(std::mem::take(&mut *tasks.lock().unwrap())),
            Self::AsyncStd(tasks) => {
                let handles = std::mem::take(&mut *tasks.lock().unwrap());
                for h in handles {
                    h.cancel().await;
                }
            }
        }
    }

    fn tokio_handle(rt: &std::sync::Mutex<Option<tokio::runtime::Runtime>>) -> tokio::runtime::Handle {
        rt.lock().unwrap().as_ref().expect("the side was killed").handle().clone()
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Tokio(_) => "tokio",
            Self::Smol(..) => "smol",
            Self::AsyncStd(_) => "async-std",
        }
    }

    fn spawner(&self) -> impl logship_smol::Spawn + Clone {
        let side = self.clone();
        move |task: logship_smol::Task| match &side {
            Self::Smol(ex, tasks) => tasks.lock().unwrap().push(ex.spawn(task)),
            Self::AsyncStd(tasks) => tasks.lock().unwrap().push(async_std::task::spawn(task)),
            Self::Tokio(_) => unreachable!("tokio services use logship-tokio"),
        }
    }

    pub async fn master<L: MessageLog>(&self, config: MasterServiceConfig, log: Arc<L>) -> AnyMaster<L> {
        self.master_on(config, log, "127.0.0.1:0".parse().unwrap()).await
    }

    pub async fn master_on<L: MessageLog>(
        &self,
        config: MasterServiceConfig,
        log: Arc<L>,
        listen: SocketAddr,
    ) -> AnyMaster<L> {
        match self {
            Self::Tokio(rt) => {
                let rt = Self::tokio_handle(rt);
                let handle =
                    rt.spawn(logship_tokio::spawn_master(config, log, listen)).await.unwrap().unwrap();
                AnyMaster(Box::new(handle))
            }
            _ => AnyMaster(Box::new(
                logship_smol::spawn_master(config, log, listen, self.spawner()).await.unwrap(),
            )),
        }
    }

    pub async fn slave<L: LogWrite>(&self, config: SlaveServiceConfig, log: Arc<L>) -> AnySlave {
        match self {
            Self::Tokio(rt) => {
                let rt = Self::tokio_handle(rt);
                AnySlave(Box::new(rt.spawn(logship_tokio::spawn_slave(config, log)).await.unwrap().unwrap()))
            }
            _ => AnySlave(Box::new(logship_smol::spawn_slave(config, log, self.spawner()).await.unwrap())),
        }
    }
}

/// A master on either adapter, through the service layer's handle trait.
pub struct AnyMaster<L: MessageLog>(Box<dyn MasterService<L>>);

impl<L: MessageLog> AnyMaster<L> {
    pub fn addr(&self) -> SocketAddr {
        self.0.local_addr()
    }

    pub async fn put(&self, message: L::Message) -> PutResult {
        self.0.put(message).await
    }

    pub async fn status(&self) -> MasterStatus {
        self.0.status().await.expect("master running")
    }

    pub async fn shutdown(&self) {
        self.0.shutdown().await
    }
}

/// A slave on either adapter, through the service layer's handle trait.
pub struct AnySlave(Box<dyn SlaveService>);

impl AnySlave {
    pub async fn status(&self) -> SlaveStatus {
        self.0.status().await.expect("slave running")
    }

    pub async fn shutdown(&self) {
        self.0.shutdown().await
    }
}

/// Runs a scenario body to completion on the calling thread.
pub fn run<F: Future>(body: F) -> F::Output {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    futures_lite::future::block_on(body)
}

pub async fn sleep(d: Duration) {
    async_io::Timer::after(d).await;
}

/// Polls `check` every 10 ms until it returns `Some`, or panics after `limit` naming `what`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    #[allow(clippy::disallowed_methods)]
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting for {what}");
        sleep(Duration::from_millis(10)).await;
    }
}

/// Instantiates `scenario(side)` on each runtime (scenarios with one logship node).
#[macro_export]
macro_rules! on_each_runtime {
    ($($scenario:ident),* $(,)?) => {
        $(
            mod $scenario {
                use super::*;
                #[test] fn tokio() { super::$scenario(Side::tokio()) }
                #[test] fn smol() { super::$scenario(Side::smol()) }
                #[test] fn async_std() { super::$scenario(Side::async_std()) }
            }
        )*
    };
}

/// Instantiates `scenario(master_side, slave_side)` on every runtime and across runtimes.
#[macro_export]
macro_rules! on_every_runtime {
    ($($scenario:ident),* $(,)?) => {
        $(
            mod $scenario {
                use super::*;
                #[test] fn tokio() { super::$scenario(Side::tokio(), Side::tokio()) }
                #[test] fn smol() { super::$scenario(Side::smol(), Side::smol()) }
                #[test] fn async_std() { super::$scenario(Side::async_std(), Side::async_std()) }
                #[test] fn tokio_master_smol_slave() { super::$scenario(Side::tokio(), Side::smol()) }
                #[test] fn smol_master_tokio_slave() { super::$scenario(Side::smol(), Side::tokio()) }
            }
        )*
    };
}

// ---- store helpers ----------------------------------------------------------------------

pub use logship_store::{CommitLog, Message, StoreConfig};

/// Segment size for tests: small, so scenarios cross segment boundaries quickly.
pub const SEGMENT: u64 = 64 * 1024;

pub fn store_config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.mapped_file_size_commit_log = SEGMENT;
    c.max_message_size = 16 * 1024;
    c
}

pub fn open_store(dir: &std::path::Path) -> Arc<CommitLog> {
    Arc::new(CommitLog::open(dir, store_config()).unwrap())
}

/// A message whose body encodes `i`, `size` bytes long.
pub fn message(i: u64, size: usize) -> Message {
    let mut body = format!("message-{i:08}-").into_bytes();
    body.resize(size, b'a' + (i % 26) as u8);
    Message::new("E2eTopic", (i % 4) as i32, bytes::Bytes::from(body))
}

/// Puts `count` messages straight into a store (no replication).
pub fn fill(store: &CommitLog, from: u64, count: u64, size: usize) {
    for i in from..from + count {
        let r = store.put(message(i, size));
        assert_eq!(r.status, logship_core::PutStatus::PutOk, "fill put {i}");
    }
}

/// Waits until `slave` holds everything `master` holds.
pub async fn caught_up(master: &CommitLog, slave: &CommitLog) {
    let end = master.max_offset();
    eventually(Duration::from_secs(20), "the slave to catch up", || async {
        (slave.max_offset() >= end).then_some(())
    })
    .await;
}

/// Compares the commit-log segment files of two stores byte for byte over `[from, to)`.
pub fn assert_same_segments(master_dir: &std::path::Path, slave_dir: &std::path::Path, from: u64, to: u64) {
    assert!(from <= to, "empty range {from}..{to}");
    let mut at = from;
    while at < to {
        let base = at - at % SEGMENT;
        let name = format!("{base:020}");
        let a = std::fs::read(master_dir.join("commitlog").join(&name)).unwrap();
        let b = std::fs::read(slave_dir.join("commitlog").join(&name)).unwrap();
        let (lo, hi) = ((at - base) as usize, (to.min(base + SEGMENT) - base) as usize);
        if a[lo..hi] != b[lo..hi] {
            let first = (lo..hi).find(|&i| a[i] != b[i]).unwrap();
            panic!("segment {name} differs at offset {}", base + first as u64);
        }
        at = base + hi as u64;
    }
}

pub fn temp() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("logship-e2e-").tempdir().unwrap()
}

/// Waits until nothing else holds `store`, then closes it cleanly (or, with `crash`, as a
/// crash would: no clean checkpoint, so the next open runs recovery).
pub async fn close_store(store: Arc<CommitLog>, crash: bool) {
    let mut store = store;
    let deadline = Instant::now() + Duration::from_secs(10);
    let owned = loop {
        match Arc::try_unwrap(store) {
            Ok(s) => break s,
            Err(s) => {
                assert!(Instant::now() < deadline, "the store is still in use");
                store = s;
                sleep(Duration::from_millis(10)).await;
            }
        }
    };
    if crash {
        owned.abandon();
    } else {
        owned.shutdown().unwrap();
    }
}
