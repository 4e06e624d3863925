//! What the request processors share: the [`Broker`] (settings, store, metadata, index, and the
//! [`Host`] around them), the [`Connection`] a request came on, the [`RequestContext`] a
//! processor gets, and the [`Refusal`] it answers with when it refuses.
//!
//! # Contract
//!
//! - **No async runtime.** Processors are `async fn`s that await only what the [`Host`] gives
//!   (the put path, a timer); the binary runs them on tokio, tests on anything.
//! - **One function per request code**, in a module per family (`send`, `lookup`, ...), each
//!   named in [`dispatch`](crate::dispatch::dispatch)'s one `match`. A family that keeps state
//!   (a client registry, held pulls) adds it as a field of [`Broker`], built in
//!   [`Broker::new`].
//! - **Every response carries the version of the line emulated** ([`BrokerSettings::version`])
//!   and its request's opaque and serialize type: build it with [`RequestContext::response`].
//! - **Refusals are answers**, never panics or closed connections: a processor returns
//!   `Err(Refusal)` with Java's code and remark.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use logship_core::{BrokerRole, PutResult};
use logship_remoting::{HeaderError, RemotingCommand, ResponseCode};
use logship_store::{CommitLog, Message, MessageIndex};

use crate::{BrokerMetadata, BrokerSettings};

/// How often the host runs [`Broker::sweep_clients`] (Java's 10 s).
pub const HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(10);

/// A boxed future the [`Host`] returns.
pub type HostFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the process around the broker supplies: its clocks and timers, the broker's current
/// role, the put path, and what to do when the topics change. The binary implements it over
/// tokio and its HA service; a test implements it over anything.
pub trait Host: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch (stamps data versions; the store stamps messages).
    fn now_ms(&self) -> i64;

    /// Monotonic time now: when heartbeats came, and when a silent client expires (Java's
    /// `ClientHousekeepingService`). Tests give a clock they move by hand.
    fn now(&self) -> Instant;

    /// A future that completes after `duration` (long polls, retries).
    fn sleep(&self, duration: Duration) -> HostFuture<'static, ()>;

    /// The broker's HA role now; `None` in controller mode while it has none (it then serves
    /// as a slave does).
    fn role(&self) -> Option<BrokerRole>;

    /// Stores `message` through the service layer's put path (the same one every other way
    /// in to the broker takes): appended, then waited on as the role and `flushDiskType` say.
    fn put(&self, message: Message) -> HostFuture<'_, PutOutcome>;

    /// The topic table changed (a topic was created): register with the NameServers now
    /// rather than at the next period.
    fn topics_changed(&self);
}

/// How a put through the [`Host`] ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PutOutcome {
    /// The service layer's result (stored, or refused by the store with its status).
    Put(PutResult),
    /// The host refused to acknowledge it (this broker lost mastership or its failover lease):
    /// the producer must send elsewhere. `stored` tells whether the local log took it.
    Refused {
        /// Whether the message is in the local log.
        stored: bool,
        /// Why, for the remark.
        reason: String,
    },
}

/// Checks a request before it is dispatched (RocketMQ's ACL hook; none by default).
pub trait Authorizer: Send + Sync + 'static {
    /// `Ok` lets the request through; `Err` is its answer.
    fn authorize(&self, connection: &Connection, request: &RemotingCommand) -> Result<(), Refusal>;
}

/// Sends a command the broker starts (a one-way notification) to one connection's peer.
pub trait Outbound: Send + Sync + 'static {
    /// Queues `command` on the connection; false once it is closed.
    fn send(&self, command: RemotingCommand) -> bool;

    /// Closes the connection (its answers in flight are dropped), logging `reason`.
    fn close(&self, reason: &str);
}

/// One client connection, as processors see it (Java's `Channel`).
#[derive(Clone)]
pub struct Connection {
    /// Unique for the life of the process.
    pub id: u64,
    /// The client's address (the `bornHost` of what it sends).
    pub peer: SocketAddr,
    /// The local address it connected to.
    pub local: SocketAddr,
    outbound: Arc<dyn Outbound>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("id", &self.id).field("peer", &self.peer).finish_non_exhaustive()
    }
}

impl Connection {
    /// The connection `id` from `peer` to `local`, whose broker-started commands go through
    /// `outbound`.
    pub fn new(id: u64, peer: SocketAddr, local: SocketAddr, outbound: Arc<dyn Outbound>) -> Self {
        Self { id, peer, local, outbound }
    }

    /// Sends a command the broker starts to the peer (see [`Outbound::send`]).
    pub fn send(&self, command: RemotingCommand) -> bool {
        self.outbound.send(command)
    }

    /// Closes the connection (see [`Outbound::close`]).
    pub fn close(&self, reason: &str) {
        self.outbound.close(reason);
    }
}

/// A request answered with an error: Java's response code and remark.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {remark}")]
pub struct Refusal {
    /// The response code.
    pub code: ResponseCode,
    /// The remark, in Java's words where Java has them.
    pub remark: String,
    /// extFields the answer carries (the send responses' `MSG_REGION` and `TRACE_ON`).
    pub ext_fields: Vec<(String, String)>,
}

impl Refusal {
    /// A refusal with `code` and `remark`.
    pub fn new(code: ResponseCode, remark: impl Into<String>) -> Self {
        Self { code, remark: remark.into(), ext_fields: Vec::new() }
    }

    /// `SYSTEM_ERROR` with `remark`.
    pub fn system_error(remark: impl Into<String>) -> Self {
        Self::new(ResponseCode::SYSTEM_ERROR, remark)
    }

    /// Adds an extFields entry to the answer.
    #[must_use]
    pub fn with_ext_field(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.ext_fields.push((key.into(), value.into()));
        self
    }
}

impl From<HeaderError> for Refusal {
    /// A header a Java broker cannot use gets `SYSTEM_ERROR` with the exception's text, which
    /// names the field.
    fn from(e: HeaderError) -> Self {
        Self::new(e.response_code(), e.java_remark())
    }
}

/// A processor's result: the response, or the refusal that becomes one.
pub type Processed = Result<RemotingCommand, Refusal>;

/// Everything the processors share for one broker.
pub struct Broker {
    /// The settings.
    pub settings: BrokerSettings,
    /// The local store.
    pub store: Arc<CommitLog>,
    /// Topics, offsets, groups and delay offsets.
    pub metadata: Arc<BrokerMetadata>,
    /// The message index (`QUERY_MESSAGE`), when the broker keeps one.
    pub index: Option<Arc<MessageIndex>>,
    /// The process around the broker.
    pub host: Arc<dyn Host>,
    /// Checks each request before dispatch; `None` lets every request through.
    pub authorizer: Option<Arc<dyn Authorizer>>,
    /// The consume side's clients, locks and held pulls.
    pub consume: Arc<crate::consume::ConsumeState>,
    /// Put and pull counters (`GET_BROKER_RUNTIME_INFO`).
    pub stats: Arc<crate::stats::BrokerStats>,
    connections: AtomicU64,
    requests: AtomicU64,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker").field("broker_name", &self.settings.broker_name).finish_non_exhaustive()
    }
}

impl Broker {
    /// A broker over its store and metadata, in `host`.
    pub fn new(
        settings: BrokerSettings,
        store: Arc<CommitLog>,
        metadata: Arc<BrokerMetadata>,
        index: Option<Arc<MessageIndex>>,
        host: Arc<dyn Host>,
    ) -> Self {
        let consume = Arc::new(crate::consume::ConsumeState::new(
            crate::consume::ConsumeSettings::from_broker(&settings),
        ));
        consume.install(&store);
        let stats = Arc::new(crate::stats::BrokerStats::new(host.now_ms()));
        Self {
            consume,
            stats,
            settings,
            store,
            metadata,
            index,
            host,
            authorizer: None,
            connections: AtomicU64::new(0),
            requests: AtomicU64::new(0),
        }
    }

    /// Installs the authorizer every request goes through before dispatch.
    #[must_use]
    pub fn with_authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    /// Whether the broker serves as a slave now (a SLAVE, or controller mode without a role).
    pub fn is_slave(&self) -> bool {
        self.host.role().is_none_or(|r| r == BrokerRole::Slave)
    }

    /// A client connection opened.
    pub fn connection_opened(&self, connection: &Connection) {
        let open = self.connections.fetch_add(1, Ordering::AcqRel) + 1;
        tracing::debug!(conn = connection.id, peer = %connection.peer, open, "remoting connection opened");
    }

    /// A client connection closed: whatever the processors keep about it goes.
    pub fn connection_closed(&self, connection: &Connection) {
        self.consume.connection_closed(connection);
        let open = self.connections.fetch_sub(1, Ordering::AcqRel).saturating_sub(1);
        tracing::debug!(conn = connection.id, peer = %connection.peer, open, "remoting connection closed");
    }

    /// The housekeeping tick the host runs every [`HOUSEKEEPING_INTERVAL`] (Java's
    /// `ClientHousekeepingService`, every 10 s): drops the producer and consumer registrations
    /// silent for `channelExpiredTimeout` (120 s) by the host's clock, closes their
    /// connections and tells the groups that lost members. Returns the connections closed.
    pub fn sweep_clients(&self) -> usize {
        self.consume.sweep_expired(self.host.now())
    }

    /// Client connections open now.
    pub fn open_connections(&self) -> u64 {
        self.connections.load(Ordering::Acquire)
    }

    /// Requests dispatched so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Acquire)
    }

    pub(crate) fn count_request(&self) {
        self.requests.fetch_add(1, Ordering::AcqRel);
    }
}

/// What a processor gets with its request: the broker and the connection.
#[derive(Clone, Debug)]
pub struct RequestContext {
    /// The broker.
    pub broker: Arc<Broker>,
    /// The connection the request came on.
    pub connection: Arc<Connection>,
}

impl RequestContext {
    /// The context of a request on `connection` to `broker`.
    pub fn new(broker: Arc<Broker>, connection: Arc<Connection>) -> Self {
        Self { broker, connection }
    }

    /// The response to `request` with `code`: its opaque and serialize type, the broker's
    /// version.
    pub fn response(&self, request: &RemotingCommand, code: ResponseCode) -> RemotingCommand {
        RemotingCommand::response_to(request, code).with_version(self.broker.settings.version())
    }

    /// The answer a refusal makes to `request`.
    pub fn refusal_response(&self, request: &RemotingCommand, refusal: Refusal) -> RemotingCommand {
        let mut response = self.response(request, refusal.code).with_remark(refusal.remark);
        response.ext_fields.extend(refusal.ext_fields);
        response
    }

    /// Milliseconds since the Unix epoch, from the host.
    pub fn now_ms(&self) -> i64 {
        self.broker.host.now_ms()
    }
}

/// A broker over a temporary store for the crate's tests: a [`Host`] whose put appends
/// straight to the store (no replication wait) and whose clock is a settable number.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Mutex;
    use std::sync::atomic::AtomicI64;

    use logship_core::MessageLog;
    use logship_store::StoreConfig;

    use super::*;

    /// What a test host records and answers.
    pub(crate) struct TestHost {
        pub(crate) store: Arc<CommitLog>,
        pub(crate) now_ms: AtomicI64,
        /// The monotonic clock: real time plus `advanced_ms` moved by hand.
        pub(crate) advanced_ms: AtomicU64,
        pub(crate) role: Mutex<Option<BrokerRole>>,
        pub(crate) topics_changed: AtomicU64,
        /// Set: every put is answered this instead of being stored.
        pub(crate) refuse: Mutex<Option<PutOutcome>>,
    }

    impl Host for TestHost {
        fn now_ms(&self) -> i64 {
            self.now_ms.load(Ordering::Acquire)
        }
        fn now(&self) -> Instant {
            Instant::now() + Duration::from_millis(self.advanced_ms.load(Ordering::Acquire))
        }
        fn sleep(&self, duration: Duration) -> HostFuture<'static, ()> {
            // A timer on its own thread, so that a future racing it (a held pull's wake-up)
            // is polled meanwhile.
            let (tx, rx) = async_channel::bounded::<()>(1);
            std::thread::spawn(move || {
                std::thread::sleep(duration);
                let _ = tx.try_send(());
            });
            Box::pin(async move {
                let _ = rx.recv().await;
            })
        }
        fn role(&self) -> Option<BrokerRole> {
            *self.role.lock().unwrap()
        }
        fn put(&self, message: Message) -> HostFuture<'_, PutOutcome> {
            let refused = self.refuse.lock().unwrap().clone();
            Box::pin(async move {
                refused.unwrap_or_else(|| PutOutcome::Put(MessageLog::put(&*self.store, message)))
            })
        }
        fn topics_changed(&self) {
            self.topics_changed.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// An outbound that keeps what is sent, and why it was closed.
    #[derive(Default)]
    pub(crate) struct Sent(pub(crate) Mutex<Vec<RemotingCommand>>, pub(crate) Mutex<Option<String>>);

    impl Outbound for Sent {
        fn send(&self, command: RemotingCommand) -> bool {
            self.0.lock().unwrap().push(command);
            true
        }
        fn close(&self, reason: &str) {
            *self.1.lock().unwrap() = Some(reason.to_string());
        }
    }

    /// A broker, its host and a connection from `10.0.0.9:40000`, over a store in `dir`.
    pub(crate) fn broker(dir: &std::path::Path, settings: BrokerSettings) -> (RequestContext, Arc<TestHost>) {
        let mut config = StoreConfig::default();
        config.mapped_file_size_commit_log = 16 << 20;
        config.store_host = settings.store_host();
        config.max_message_size = settings.max_message_size;
        let store = Arc::new(CommitLog::open(dir, config).unwrap());
        let metadata = Arc::new(BrokerMetadata::open(dir, settings.clone(), 1_000).unwrap());
        let host = Arc::new(TestHost {
            store: store.clone(),
            now_ms: AtomicI64::new(1_700_000_000_000),
            advanced_ms: AtomicU64::new(0),
            role: Mutex::new(Some(BrokerRole::AsyncMaster)),
            topics_changed: AtomicU64::new(0),
            refuse: Mutex::new(None),
        });
        let broker = Arc::new(Broker::new(settings, store, metadata, None, host.clone()));
        let connection = Arc::new(Connection::new(
            1,
            "10.0.0.9:40000".parse().unwrap(),
            "127.0.0.1:10911".parse().unwrap(),
            Arc::new(Sent::default()),
        ));
        (RequestContext::new(broker, connection), host)
    }

    /// Dispatches `request` and waits for its answer.
    pub(crate) fn call(ctx: &RequestContext, request: RemotingCommand) -> RemotingCommand {
        futures_lite::future::block_on(crate::dispatch::dispatch(ctx.clone(), request)).expect("an answer")
    }
}
