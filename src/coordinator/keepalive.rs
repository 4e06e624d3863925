//! Keeps one etcd lease alive and feeds the answers into the session's [`LeaseGuard`].
//!
//! Every keep-alive request's send instant is queued; each answer on the stream (etcd answers a
//! stream's requests in order) is matched with the oldest queued instant. Matching an answer
//! with an instant earlier than its own request's only closes the guard sooner, so a lost or
//! reordered answer can never keep it open too long. A stream that errs, ends, or leaves too
//! many requests unanswered is dropped and opened anew (through whichever endpoint answers);
//! meanwhile the guard closes by itself when its time is up. An answer with TTL 0 (etcd no
//! longer has the lease) closes the guard for good and ends the task.
//!
//! [`LeaseGuard`]: logship_core::service::coordinator::LeaseGuard

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper};
use logship_core::time::Instant;

use super::{Clock, Session};

/// The keep-alive task's state.
pub(super) struct KeepAlive {
    pub(super) client: Client,
    pub(super) lease_id: i64,
    /// The TTL etcd granted.
    pub(super) ttl: Duration,
    pub(super) interval: Duration,
    pub(super) timeout: Duration,
    pub(super) clock: Clock,
    pub(super) session: Arc<Mutex<Session>>,
    /// Send instants of the requests not yet answered on the current stream.
    pub(super) sent: VecDeque<Instant>,
}

/// What ended one stream.
enum Ended {
    /// The lease is gone: stop.
    Lost,
    /// The stream failed: open another.
    Broken,
}

impl KeepAlive {
    fn renewed(&self, sent_at: Instant, ttl_secs: i64) {
        let mut session = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        let ttl = Duration::from_secs(ttl_secs.max(0).unsigned_abs()).min(self.ttl);
        session.guard.renewed(sent_at, ttl);
        if session.guard.is_lost() {
            tracing::error!(
                lease = self.lease_id,
                "etcd lease lost: this broker must stop acknowledging as master"
            );
        }
    }

    /// Opens a keep-alive stream; its first request is sent, and answered, by the open.
    async fn open(&mut self) -> Result<(LeaseKeeper, LeaseKeepAliveStream), Ended> {
        let sent_at = (self.clock)();
        let opened =
            tokio::time::timeout(self.timeout, self.client.lease_client().keep_alive(self.lease_id)).await;
        match opened {
            Ok(Ok(pair)) => {
                self.renewed(sent_at, i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX));
                Ok(pair)
            }
            Ok(Err(e)) if e.to_string().contains("lease not found") => {
                self.renewed(sent_at, 0);
                Err(Ended::Lost)
            }
            Ok(Err(e)) => {
                tracing::warn!(lease = self.lease_id, error = %e, "etcd keep-alive stream failed to open");
                Err(Ended::Broken)
            }
            Err(_) => {
                tracing::warn!(lease = self.lease_id, "etcd keep-alive stream did not open in time");
                Err(Ended::Broken)
            }
        }
    }

    /// Renews on one stream until it ends.
    async fn stream(&mut self, keeper: &mut LeaseKeeper, stream: &mut LeaseKeepAliveStream) -> Ended {
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        // Unanswered requests beyond what one TTL spans mean the stream is stuck.
        let max_unanswered = (self.ttl.as_millis() / self.interval.as_millis().max(1)).max(1) as usize;
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if self.sent.len() >= max_unanswered {
                        tracing::warn!(lease = self.lease_id, unanswered = self.sent.len(), "etcd keep-alive stream stuck; reopening");
                        return Ended::Broken;
                    }
                    self.sent.push_back((self.clock)());
                    if keeper.keep_alive().await.is_err() {
                        return Ended::Broken;
                    }
                }
                answer = stream.message() => match answer {
                    Ok(Some(resp)) => {
                        // No queued instant: an answer this loop did not ask for; it proves nothing.
                        if let Some(sent_at) = self.sent.pop_front() {
                            self.renewed(sent_at, resp.ttl());
                        }
                        if resp.ttl() <= 0 {
                            self.renewed((self.clock)(), 0);
                            return Ended::Lost;
                        }
                    }
                    Ok(None) => return Ended::Broken,
                    Err(e) => {
                        tracing::warn!(lease = self.lease_id, error = %e, "etcd keep-alive stream failed");
                        return Ended::Broken;
                    }
                },
            }
        }
    }
}

/// The task: keep the lease alive until it is lost (or the coordinator is dropped).
pub(super) async fn run(mut k: KeepAlive) {
    loop {
        k.sent.clear();
        let ended = match k.open().await {
            Ok((mut keeper, mut stream)) => k.stream(&mut keeper, &mut stream).await,
            Err(ended) => ended,
        };
        match ended {
            Ended::Lost => return,
            Ended::Broken => tokio::time::sleep(k.interval.min(Duration::from_millis(200))).await,
        }
    }
}
