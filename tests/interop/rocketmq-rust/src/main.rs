//! One rocketmq-rust 1.0.0 `LocalFileMessageStore` (no NameServer, no broker) as a master or a
//! slave, driven by `logship bench --peer rocketmq-rust`. It speaks the bench's peer protocol:
//! one command per stdin line, one JSON object per stdout line (see `src/bench/peer.rs`).
//!
//! Arguments: `--role ASYNC_MASTER|SYNC_MASTER|SLAVE --store DIR --segment BYTES
//! --flush ASYNC_FLUSH|SYNC_FLUSH [--ha-port N] [--master HOST:PORT]`.
//!
//! Commands: `fill BYTES SIZE` | `bench PRODUCERS COUNT SIZE` | `status` | `wait-idle TIMEOUT_MS` |
//! `watch-connect TIMEOUT_MS` | `watch-slave END TIMEOUT_MS` | `wait-offset END TIMEOUT_MS` | `shutdown`.
//! `bench` answers `puts` (those that ended `PutOk`, the only ones in the percentiles), `failed`
//! (the others) and `firstFailure`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cheetah_string::CheetahString;
use dashmap::DashMap;
use rocketmq_model::common::broker::broker_role::BrokerRole;
use rocketmq_model::common::config::TopicConfig;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_model::common::message::message_ext_broker_inner::MessageExtBrokerInner;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use rocketmq_store::{
    BrokerReadStore, BrokerReplicationStore, BrokerStorePort, FlushDiskType, HAService,
    LocalFileMessageStore, MessageStoreConfig, MicroBatchPolicy, PutMessageStatus, StorePorts,
    StoreRuntimeConfig,
};
use tokio::io::{AsyncBufReadExt, BufReader};

const TOPIC: &str = "BenchTopic";

fn emit(fields: &[(&str, String)]) {
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    println!("{{{}}}", body.join(","));
}

fn text(s: &str) -> String {
    format!("{s:?}")
}

fn message(size: usize, i: u64) -> MessageExtBrokerInner {
    let mut body = vec![b'x'; size];
    let tag = i.to_be_bytes();
    let n = tag.len().min(size);
    body[..n].copy_from_slice(&tag[..n]);
    let mut m = MessageExtBrokerInner::default();
    m.set_topic(CheetahString::from_static_str(TOPIC));
    m.message_ext_inner.set_queue_id((i % 8) as i32);
    m.set_body(Bytes::from(body));
    m
}

fn local(ports: &StorePorts) -> &LocalFileMessageStore {
    match ports {
        StorePorts::LocalFileStore(s) => s,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e6
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = HashMap::new();
    for pair in args.chunks(2) {
        if let [k, v] = pair {
            opts.insert(k.trim_start_matches("--").to_string(), v.clone());
        }
    }
    let get = |k: &str| opts.get(k).cloned().unwrap_or_else(|| panic!("missing --{k}"));
    let role = match get("role").as_str() {
        "SYNC_MASTER" => BrokerRole::SyncMaster,
        "SLAVE" => BrokerRole::Slave,
        _ => BrokerRole::AsyncMaster,
    };
    let flush = match opts.get("flush").map(String::as_str) {
        Some("SYNC_FLUSH") => FlushDiskType::SyncFlush,
        _ => FlushDiskType::AsyncFlush,
    };
    let config = MessageStoreConfig {
        store_path_root_dir: get("store").into(),
        broker_role: role,
        flush_disk_type: flush,
        mapped_file_size_commit_log: get("segment").parse().expect("--segment"),
        ha_listen_port: opts.get("ha-port").map_or(0, |p| p.parse().expect("--ha-port")),
        ha_master_address: opts.get("master").cloned(),
        // One slave suffices, as for the Java and logship masters in the same bench.
        in_sync_replicas: 2,
        min_in_sync_replicas: 1,
        total_replicas: 2,
        enable_controller_mode: false,
        timer_wheel_enable: false,
        ..MessageStoreConfig::default()
    };
    let mut runtime = StoreRuntimeConfig::default();
    runtime.broker_identity.broker_id = u64::from(role == BrokerRole::Slave);
    let owner = RuntimeOwner::plan(RuntimeConfig::server_default("rocketmq-rust-peer"))
        .expect("runtime configuration")
        .build()
        .expect("runtime");
    let context = owner.root_context().component("bench-store");
    owner.block_on(async move {
        let topics: Arc<DashMap<CheetahString, Arc<TopicConfig>>> = Arc::new(DashMap::new());
        let mut store = LocalFileMessageStore::new(
            Arc::new(config),
            MicroBatchPolicy::disabled(1).expect("policy"),
            Arc::new(runtime),
            topics,
            None,
            false,
            context,
        )
        .expect("create the store")
        .expect("valid timer configuration");
        store.wire_owned_root_dependencies().expect("wire the store");
        store.init().await.expect("init");
        assert!(store.load().await, "load");
        store.start().await.expect("start");
        if let Some(master) = opts.get("master") {
            store.update_ha_master_address(master).await;
        }
        let ha_port = store.get_message_store_config().ha_listen_port;
        let ports = Arc::new(StorePorts::local_file(store));
        emit(&[
            ("event", text("started")),
            ("haPort", ha_port.to_string()),
            ("maxPhyOffset", local(&ports).get_max_phy_offset().to_string()),
        ]);
        let next = Arc::new(AtomicU64::new(0));
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let w: Vec<&str> = line.split_whitespace().collect();
            let num = |i: usize| w.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
            match w.first().copied() {
                Some("fill") => {
                    let (bytes, size) = (num(1) as i64, num(2) as usize);
                    while local(&ports).get_max_phy_offset() < bytes {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let r = ports.put_message_shared(message(size, i)).await;
                        if r.put_message_status() != PutMessageStatus::PutOk {
                            emit(&[
                                ("event", text("error")),
                                ("message", text(&format!("{:?}", r.put_message_status()))),
                            ]);
                            break;
                        }
                    }
                    emit(&[
                        ("event", text("filled")),
                        ("maxPhyOffset", local(&ports).get_max_phy_offset().to_string()),
                    ]);
                }
                Some("bench") => {
                    let (producers, count, size) = (num(1), num(2), num(3) as usize);
                    let end = next.load(Ordering::Relaxed) + count;
                    let failed = Arc::new(AtomicU64::new(0));
                    let start = Instant::now();
                    let mut tasks = Vec::new();
                    for _ in 0..producers {
                        let (ports, next, failed) = (ports.clone(), next.clone(), failed.clone());
                        tasks.push(tokio::spawn(async move {
                            let mut lat = Vec::new();
                            let mut first_failure = None;
                            loop {
                                let i = next.fetch_add(1, Ordering::Relaxed);
                                if i >= end {
                                    return (lat, first_failure);
                                }
                                let t = Instant::now();
                                let r = ports.put_message_shared(message(size, i)).await;
                                let took = t.elapsed();
                                if r.put_message_status() == PutMessageStatus::PutOk {
                                    lat.push(took);
                                } else {
                                    // Counted, and kept out of the latencies.
                                    failed.fetch_add(1, Ordering::Relaxed);
                                    first_failure.get_or_insert(format!("{:?}", r.put_message_status()));
                                }
                            }
                        }));
                    }
                    let mut lat = Vec::new();
                    let mut failure = None;
                    for t in tasks {
                        let (l, f) = t.await.expect("producer");
                        lat.extend(l);
                        failure = failure.or(f);
                    }
                    let secs = start.elapsed().as_secs_f64();
                    lat.sort_unstable();
                    emit(&[
                        ("event", text("bench")),
                        ("secs", secs.to_string()),
                        ("puts", lat.len().to_string()),
                        ("failed", failed.load(Ordering::Relaxed).to_string()),
                        ("firstFailure", text(failure.as_deref().unwrap_or(""))),
                        ("p50us", percentile(&lat, 0.5).to_string()),
                        ("p99us", percentile(&lat, 0.99).to_string()),
                    ]);
                }
                Some("status") => {
                    let s = local(&ports);
                    let ha = s.get_ha_service();
                    emit(&[
                        ("event", text("status")),
                        ("maxPhyOffset", s.get_max_phy_offset().to_string()),
                        (
                            "connections",
                            ha.map_or(0, |h| h.get_connection_count().load(Ordering::Relaxed)).to_string(),
                        ),
                        ("slaveAck", ha.map_or(0, |h| h.get_push_to_slave_max_offset()).to_string()),
                    ]);
                }
                Some("wait-idle") => {
                    // Until no slave is connected (a stopped slave's connection is gone).
                    let deadline = Instant::now() + Duration::from_millis(num(1));
                    let count = || {
                        local(&ports)
                            .get_ha_service()
                            .map_or(0, |h| h.get_connection_count().load(Ordering::Relaxed))
                    };
                    while count() > 0 && Instant::now() < deadline {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    emit(&[("event", text("idle")), ("connections", count().to_string())]);
                }
                Some("watch-connect") => {
                    // Answers as soon as a slave connects: the count rises above the lowest seen.
                    let deadline = Instant::now() + Duration::from_millis(num(1));
                    let count = || {
                        local(&ports)
                            .get_ha_service()
                            .map_or(0, |h| h.get_connection_count().load(Ordering::Relaxed))
                    };
                    let mut low = count();
                    let mut now = low;
                    while now <= low && Instant::now() < deadline {
                        tokio::time::sleep(Duration::from_micros(100)).await;
                        now = count();
                        low = low.min(now);
                    }
                    emit(&[("event", text("connected")), ("connections", count().to_string())]);
                }
                Some("watch-slave") => {
                    // From the first slave connection to the slave's ack of `end`, seen by the master.
                    let (end, deadline) = (num(1) as i64, Instant::now() + Duration::from_millis(num(2)));
                    let s = local(&ports);
                    let ha = s.get_ha_service().expect("a master has an HA service");
                    let mut connected = None;
                    let mut reached = false;
                    while Instant::now() < deadline {
                        if connected.is_none() && ha.get_connection_count().load(Ordering::Relaxed) > 0 {
                            connected = Some(Instant::now());
                        }
                        if connected.is_some() && ha.get_push_to_slave_max_offset() >= end {
                            reached = true;
                            break;
                        }
                        tokio::time::sleep(Duration::from_micros(200)).await;
                    }
                    let secs = connected.map_or(0.0, |c| c.elapsed().as_secs_f64());
                    emit(&[
                        ("event", text("caught-up")),
                        ("reached", reached.to_string()),
                        ("secs", secs.to_string()),
                        ("slaveAck", ha.get_push_to_slave_max_offset().to_string()),
                    ]);
                }
                Some("wait-offset") => {
                    let (end, deadline) = (num(1) as i64, Instant::now() + Duration::from_millis(num(2)));
                    let start = Instant::now();
                    while local(&ports).get_max_phy_offset() < end && Instant::now() < deadline {
                        tokio::time::sleep(Duration::from_micros(200)).await;
                    }
                    let max = local(&ports).get_max_phy_offset();
                    emit(&[
                        ("event", text("reached")),
                        ("reached", (max >= end).to_string()),
                        ("secs", start.elapsed().as_secs_f64().to_string()),
                        ("maxPhyOffset", max.to_string()),
                    ]);
                }
                Some("shutdown") | None => break,
                Some(other) => {
                    emit(&[("event", text("error")), ("message", text(&format!("unknown command {other}")))])
                }
            }
        }
        match Arc::try_unwrap(ports) {
            Ok(mut p) => p.shutdown().await,
            Err(_) => emit(&[("event", text("error")), ("message", text("store still shared at shutdown"))]),
        }
        emit(&[("event", text("shutdown"))]);
    });
    std::process::exit(0);
}
