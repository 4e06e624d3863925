//! The [`Host`] the broker's processors run in: tokio's clock and timers, the HTTP broker's
//! node (its master service) for puts, and the registration task's wake-up.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use logship_broker::{Host, HostFuture, PutOutcome};
use logship_core::BrokerRole;
use logship_store::Message;

use crate::http::{Broker, MasterPut, failover_put_refusal, put_through_master};

/// The binary's host: puts go through the same path as the HTTP API's.
pub struct BinaryHost {
    broker: Arc<Broker>,
    topics_changed: tokio::sync::watch::Sender<u64>,
}

impl BinaryHost {
    /// The host over `broker`; a topic change bumps `topics_changed` (the registration tasks
    /// watch it).
    pub fn new(broker: Arc<Broker>, topics_changed: tokio::sync::watch::Sender<u64>) -> Self {
        Self { broker, topics_changed }
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl Host for BinaryHost {
    fn now_ms(&self) -> i64 {
        now_ms()
    }

    fn now(&self) -> std::time::Instant {
        tokio::time::Instant::now().into_std()
    }

    fn sleep(&self, duration: Duration) -> HostFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }

    fn role(&self) -> Option<BrokerRole> {
        match &self.broker.roles {
            None => Some(self.broker.settings.broker_role),
            Some(roles) => match roles.current() {
                crate::roles::Role::Master { .. } => Some(BrokerRole::SyncMaster),
                crate::roles::Role::Slave { .. } => Some(BrokerRole::Slave),
                crate::roles::Role::None => None,
            },
        }
    }

    fn put(&self, message: Message) -> HostFuture<'_, PutOutcome> {
        Box::pin(async move {
            if let Some(reason) = failover_put_refusal(&self.broker) {
                return PutOutcome::Refused { stored: false, reason };
            }
            match put_through_master(&self.broker, message).await {
                MasterPut::NotMaster(reason) => PutOutcome::Refused { stored: false, reason: reason.into() },
                MasterPut::LeaseLost => PutOutcome::Refused {
                    stored: true,
                    reason: "stored locally but not acknowledged: this broker's lease guard closed".into(),
                },
                MasterPut::Done { result, .. } => PutOutcome::Put(result),
            }
        })
    }

    fn topics_changed(&self) {
        self.topics_changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}
