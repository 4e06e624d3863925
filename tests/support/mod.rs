//! Test support: one scenario, any runtime. Each `Side` starts services on its own executor;
//! scenario bodies run under `futures_lite::future::block_on` and talk to the services through
//! runtime-agnostic handles, so a tokio master can serve a smol slave and the reverse.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use logship_core::driver::{MasterServiceConfig, MasterStatus, SlaveServiceConfig, SlaveStatus};
use logship_core::{LogWrite, MessageLog, PutResult};

/// Where a service runs.
#[derive(Clone)]
pub enum Side {
    /// A multi-threaded tokio runtime.
    Tokio(Arc<tokio::runtime::Runtime>),
    /// A smol executor on its own threads.
    Smol(Arc<smol::Executor<'static>>),
    /// async-std's global executor.
    AsyncStd,
}

impl Side {
    pub fn tokio() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        Self::Tokio(Arc::new(rt))
    }

    pub fn smol() -> Self {
        let ex = Arc::new(smol::Executor::new());
        for _ in 0..2 {
            let ex = ex.clone();
            std::thread::spawn(move || smol::block_on(ex.run(smol::future::pending::<()>())));
        }
        Self::Smol(ex)
    }

    pub fn async_std() -> Self {
        Self::AsyncStd
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Tokio(_) => "tokio",
            Self::Smol(_) => "smol",
            Self::AsyncStd => "async-std",
        }
    }

    fn spawner(&self) -> impl logship_smol::Spawn + Clone {
        let side = self.clone();
        move |task: logship_smol::Task| match &side {
            Self::Smol(ex) => ex.spawn(task).detach(),
            Self::AsyncStd => {
                async_std::task::spawn(task);
            }
            Self::Tokio(_) => unreachable!("tokio services use logship-tokio"),
        }
    }

    pub async fn master<L: MessageLog>(&self, config: MasterServiceConfig, log: Arc<L>) -> AnyMaster<L> {
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        match self {
            Self::Tokio(rt) => {
                let handle =
                    rt.spawn(logship_tokio::spawn_master(config, log, listen)).await.unwrap().unwrap();
                AnyMaster::Tokio(handle)
            }
            _ => AnyMaster::Smol(
                logship_smol::spawn_master(config, log, listen, self.spawner()).await.unwrap(),
            ),
        }
    }

    pub async fn slave<L: LogWrite>(&self, config: SlaveServiceConfig, log: Arc<L>) -> AnySlave {
        match self {
            Self::Tokio(rt) => {
                AnySlave::Tokio(rt.spawn(logship_tokio::spawn_slave(config, log)).await.unwrap().unwrap())
            }
            _ => AnySlave::Smol(logship_smol::spawn_slave(config, log, self.spawner()).await.unwrap()),
        }
    }
}

/// A master on either adapter.
pub enum AnyMaster<L> {
    Tokio(logship_tokio::MasterHandle<L>),
    Smol(logship_smol::MasterHandle<L>),
}

impl<L: MessageLog> AnyMaster<L> {
    pub fn addr(&self) -> SocketAddr {
        match self {
            Self::Tokio(h) => h.local_addr(),
            Self::Smol(h) => h.local_addr(),
        }
    }

    pub async fn put(&self, message: L::Message) -> PutResult {
        match self {
            Self::Tokio(h) => h.put(message).await,
            Self::Smol(h) => h.put(message).await,
        }
    }

    pub async fn status(&self) -> MasterStatus {
        match self {
            Self::Tokio(h) => h.status().await,
            Self::Smol(h) => h.status().await,
        }
        .expect("master running")
    }

    pub async fn shutdown(&self) {
        match self {
            Self::Tokio(h) => h.shutdown().await,
            Self::Smol(h) => h.shutdown().await,
        }
    }
}

/// A slave on either adapter.
pub enum AnySlave {
    Tokio(logship_tokio::SlaveHandle),
    Smol(logship_smol::SlaveHandle),
}

impl AnySlave {
    pub async fn status(&self) -> SlaveStatus {
        match self {
            Self::Tokio(h) => h.status().await,
            Self::Smol(h) => h.status().await,
        }
        .expect("slave running")
    }

    pub async fn shutdown(&self) {
        match self {
            Self::Tokio(h) => h.shutdown().await,
            Self::Smol(h) => h.shutdown().await,
        }
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
