//! The workload: SYNC puts over HTTP to whichever broker is master, following the 503's master
//! hint, each message body unique (`TAG-wWORKER-SEQ`); every `PUT_OK` (message, broker, epoch,
//! offset) and every failure is recorded with when it was sent and answered.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::group::TOPIC;
use crate::process;

/// One acknowledged put.
#[derive(Clone, Debug, PartialEq)]
pub struct Ack {
    /// The message body (unique in the run).
    pub body: String,
    /// The broker that answered `PUT_OK` (the one it was sent to).
    pub broker: i64,
    /// The `epoch` of the answer (-1 if the answer had none).
    pub epoch: i64,
    /// The commit-log offset of the answer.
    pub offset: u64,
    /// When it was sent, since the workload started.
    pub sent: Duration,
    /// When the answer came.
    pub answered: Duration,
}

/// One put that was not acknowledged (its message may or may not be stored).
#[derive(Clone, Debug)]
pub struct Failure {
    /// The message body.
    pub body: String,
    /// The broker it was sent to.
    pub broker: i64,
    /// When it was sent and answered (or gave up), since the workload started.
    pub sent: Duration,
    pub answered: Duration,
    /// The status (or error) it got.
    pub what: String,
}

#[derive(Default)]
struct Record {
    acks: Vec<Ack>,
    failures: Vec<Failure>,
}

/// A running workload; [`stop`](Self::stop) ends it and returns what it recorded.
pub struct Workload {
    start: Instant,
    stop: Arc<AtomicBool>,
    held: Arc<AtomicBool>,
    in_flight: Arc<AtomicUsize>,
    record: Arc<Mutex<Record>>,
    threads: Vec<JoinHandle<()>>,
}

/// Everything a workload recorded.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub acks: Vec<Ack>,
    pub failures: Vec<Failure>,
}

/// How long a put may take before the worker gives up on it (a failure) and tries the next
/// broker: short, so that a worker stuck on a stopped master does not stretch the measured
/// unavailability window much past the election.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Most puts one worker sends (a bound on the loop besides the stop flag).
const MAX_PUTS_PER_WORKER: u64 = 200_000;

impl Workload {
    /// Starts `workers` threads putting to the brokers `targets` (`(brokerId, "ip:port")`),
    /// each pausing `pause` between puts.
    pub fn start(tag: &str, targets: Vec<(i64, String)>, workers: usize, pause: Duration) -> Self {
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let held = Arc::new(AtomicBool::new(false));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let record = Arc::new(Mutex::new(Record::default()));
        let hint = Arc::new(AtomicUsize::new(0));
        let targets = Arc::new(targets);
        let threads = (0..workers)
            .map(|w| {
                let (stop, held, in_flight, record, hint, targets) = (
                    Arc::clone(&stop),
                    Arc::clone(&held),
                    Arc::clone(&in_flight),
                    Arc::clone(&record),
                    Arc::clone(&hint),
                    Arc::clone(&targets),
                );
                let tag = tag.to_string();
                std::thread::spawn(move || {
                    let agent = process::agent_with(REQUEST_TIMEOUT, None);
                    let mut seq = 0u64;
                    while !stop.load(Ordering::SeqCst) && seq < MAX_PUTS_PER_WORKER {
                        in_flight.fetch_add(1, Ordering::SeqCst);
                        if held.load(Ordering::SeqCst) {
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(10));
                            continue;
                        }
                        seq += 1;
                        let i = hint.load(Ordering::SeqCst) % targets.len();
                        let (broker, addr) = &targets[i];
                        let body = format!("{tag}-w{w}-{seq:07}");
                        let sent = start.elapsed();
                        let url = format!("http://{addr}/topics/{TOPIC}/messages");
                        let reply = agent.post(&url).send(body.as_bytes()).map(process::json_reply);
                        let answered = start.elapsed();
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        let fail = |what: String| Failure {
                            body: body.clone(),
                            broker: *broker,
                            sent,
                            answered,
                            what,
                        };
                        match reply {
                            Ok((200, v)) if v["status"] == "PUT_OK" => {
                                let ack = Ack {
                                    body: body.clone(),
                                    broker: *broker,
                                    epoch: v["epoch"].as_i64().unwrap_or(-1),
                                    offset: v["offset"].as_u64().unwrap_or(u64::MAX),
                                    sent,
                                    answered,
                                };
                                record.lock().unwrap().acks.push(ack);
                                std::thread::sleep(pause);
                            }
                            Ok((code, v)) => {
                                let next = follow(&v, &targets).unwrap_or((i + 1) % targets.len());
                                let _ = hint.compare_exchange(i, next, Ordering::SeqCst, Ordering::SeqCst);
                                record.lock().unwrap().failures.push(fail(format!("{code} {}", v["status"])));
                                std::thread::sleep(Duration::from_millis(20));
                            }
                            Err(e) => {
                                let _ = hint.compare_exchange(
                                    i,
                                    (i + 1) % targets.len(),
                                    Ordering::SeqCst,
                                    Ordering::SeqCst,
                                );
                                record.lock().unwrap().failures.push(fail(e.to_string()));
                                std::thread::sleep(Duration::from_millis(20));
                            }
                        }
                    }
                })
            })
            .collect();
        Self { start, stop, held, in_flight, record, threads }
    }

    /// Holds every worker after its put in flight (`true`), or lets them go on; holding waits
    /// until no put is in flight (bounded by [`REQUEST_TIMEOUT`]).
    pub fn hold(&self, hold: bool) {
        self.held.store(hold, Ordering::SeqCst);
        while hold && self.in_flight.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Time since the workload started (the clock of every [`Ack`]).
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// The acknowledgements so far.
    pub fn acks(&self) -> Vec<Ack> {
        self.record.lock().unwrap().acks.clone()
    }

    /// The highest epoch acknowledged so far (-1: none).
    pub fn max_epoch(&self) -> i64 {
        self.record.lock().unwrap().acks.iter().map(|a| a.epoch).max().unwrap_or(-1)
    }

    /// Waits (at most `patience`) for an ack matching `pred`; the first such ack.
    pub fn wait_for_ack(&self, patience: Duration, pred: impl Fn(&Ack) -> bool) -> Option<Ack> {
        let deadline = Instant::now() + patience;
        loop {
            if let Some(a) =
                self.record.lock().unwrap().acks.iter().filter(|a| pred(a)).min_by_key(|a| a.answered)
            {
                return Some(a.clone());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops every worker (each finishes its put in flight) and returns the record.
    pub fn stop(mut self) -> Outcome {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let record = std::mem::take(&mut *self.record.lock().unwrap());
        Outcome { acks: record.acks, failures: record.failures }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The target index of the master a 503 names, if it names one we know.
fn follow(reply: &Value, targets: &[(i64, String)]) -> Option<usize> {
    let master = &reply["master"];
    let by_addr = master["httpAddress"].as_str().and_then(|a| targets.iter().position(|(_, t)| t == a));
    by_addr.or_else(|| master["brokerId"].as_i64().and_then(|id| targets.iter().position(|(t, _)| *t == id)))
}
