//! The schedule service's timer: on a master, delivers due delayed messages (retries
//! included) back into their topics through the host's put path, so that they replicate like
//! any send (the sans-IO service is [`logship_broker::schedule::ScheduleService`]).

use std::sync::Arc;
use std::time::Duration;

use logship_broker::Broker;
use logship_broker::PutOutcome;
use logship_broker::schedule::{DeliveryOutcome, ScheduleService};
use logship_core::PutStatus;
use tokio::sync::watch;

use super::host::now_ms;

/// The longest the timer sleeps: how soon it notices a change of role.
const MAX_WAIT_MS: i64 = 1000;

/// Runs until `stopped`: the service runs while the broker is a master, and starts again
/// from the persisted delay offsets when it becomes one.
pub async fn run(broker: Arc<Broker>, mut stopped: watch::Receiver<bool>) {
    let mut service: Option<ScheduleService> = None;
    loop {
        if broker.is_slave() {
            service = None;
        } else if service.is_none() {
            service = Some(ScheduleService::start(&broker.metadata.delays, &broker.store, now_ms()));
        }
        let wait_ms = match service.as_mut() {
            Some(s) => {
                deliver(&broker, s).await;
                s.next_deadline().map_or(MAX_WAIT_MS, |at| (at - now_ms()).clamp(0, MAX_WAIT_MS))
            }
            None => MAX_WAIT_MS,
        };
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(wait_ms as u64)) => {}
            () = super::until_stopped(&mut stopped) => break,
        }
    }
}

async fn deliver(broker: &Broker, service: &mut ScheduleService) {
    let deliveries = service.poll(now_ms(), &broker.store, &broker.metadata.delays);
    for delivery in deliveries {
        let mut outcome = DeliveryOutcome::All;
        for (stored, due) in delivery.messages.iter().enumerate() {
            let status = match broker.host.put(due.message.clone()).await {
                PutOutcome::Put(r) => r.status,
                _ => PutStatus::ServiceNotAvailable,
            };
            // Replication statuses mean the message is in the log: it is delivered.
            let in_log = matches!(
                status,
                PutStatus::PutOk
                    | PutStatus::FlushDiskTimeout
                    | PutStatus::FlushSlaveTimeout
                    | PutStatus::SlaveNotAvailable
            );
            if !in_log {
                outcome = DeliveryOutcome::Stopped { stored, status };
                break;
            }
        }
        service.delivered(&delivery, outcome, now_ms(), &broker.metadata.delays);
    }
}
