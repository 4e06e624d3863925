//! The etcd coordinator against real etcd processes (started by each test on loopback ports,
//! with temporary data directories): elections, fencing by the lease guard, set changes under
//! the epoch, the record watch, and etcd failing.
//!
//! Skips with a message when `etcd` is not installed, unless `LOGSHIP_REQUIRE_ETCD=1`.

mod etcd_support;
#[path = "support/pki.rs"]
mod pki;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use etcd_support::{EtcdCluster, Proxy, ServerTls, etcd_available};
use logship::coordinator::{Clock, EtcdConfig, EtcdCoordinator, EtcdCredentials, EtcdTls, tokio_clock};
use logship_core::service::coordinator::{
    CampaignOutcome, Coordinator, CoordinatorError, ElectionPolicy, GroupRecord, MemberState, RecordAudit,
    SetChange, SetChangeOutcome, SetChangeRefusal, Versioned, WatchEvent,
};
use logship_core::time::Instant;

/// How long a test waits for something that must happen before it fails (not a measured bound).
const PATIENCE: Duration = Duration::from_secs(60);

fn member(id: i64, epoch: i32, max_offset: u64) -> MemberState {
    MemberState {
        broker_id: id,
        epoch,
        max_offset,
        ha_addr: SocketAddr::from(([127, 0, 0, 1], 10_000 + id as u16)),
        http_addr: SocketAddr::from(([127, 0, 0, 1], 20_000 + id as u16)),
    }
}

async fn connect(endpoints: Vec<String>, id: i64, clock: &Clock) -> EtcdCoordinator {
    let config = EtcdConfig::new(endpoints, "TestCluster", "broker-a", id);
    EtcdCoordinator::connect(config, Arc::clone(clock)).await.expect("connect to etcd")
}

/// Waits until `f` holds, checking every 20 ms; panics after [`PATIENCE`].
async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "gave up waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn elected(outcome: &CampaignOutcome) -> Option<&Versioned<GroupRecord>> {
    match outcome {
        CampaignOutcome::Elected(r) => Some(r),
        _ => None,
    }
}

async fn expand_to(c: &EtcdCoordinator, record: &GroupRecord, set: &[i64]) -> Versioned<GroupRecord> {
    let change = SetChange {
        proposer: c.broker_id(),
        master_epoch: record.master_epoch,
        sync_state_set_epoch: record.sync_state_set_epoch,
        new_set: set.iter().copied().collect(),
    };
    match c.change_sync_state_set(change).await.unwrap() {
        SetChangeOutcome::Applied(r) => r,
        other => panic!("set change refused: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_master_per_election_among_concurrent_contenders_and_no_two_masters_per_epoch() {
    if !etcd_available("one_master_per_election_among_concurrent_contenders_and_no_two_masters_per_epoch") {
        return;
    }
    let etcd = tokio::task::block_in_place(|| EtcdCluster::start(1));
    let clock = tokio_clock();
    let ids: Vec<i64> = (1..=5).collect();
    let mut contenders = Vec::new();
    for &id in &ids {
        contenders.push(Arc::new(connect(etcd.endpoints(), id, &clock).await));
    }
    // Distinct offsets, past 2 GiB apart, rank the brokers: 5 > 4 > ... (as 64-bit integers).
    let offset = |id: i64| (id as u64) << 32;
    let mut masters_by_epoch: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    let mut epoch_of_log = 0;
    for round in 0..4 {
        // Everyone has published before anyone campaigns (a broker publishes its state when it
        // starts and as it goes; a campaign that ran before a better broker published would
        // rightly win, and the ranking would not be what this test checks).
        for c in &contenders {
            c.publish(member(c.broker_id(), epoch_of_log, offset(c.broker_id()))).await.unwrap();
        }
        let tasks: Vec<_> = contenders
            .iter()
            .map(|c| {
                let c = Arc::clone(c);
                let me = member(c.broker_id(), epoch_of_log, offset(c.broker_id()));
                tokio::spawn(async move {
                    (
                        c.broker_id(),
                        c.campaign(me, ElectionPolicy::default(), RecordAudit::new()).await.unwrap(),
                    )
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (id, outcome) = task.await.unwrap();
            if let Some(record) = elected(&outcome) {
                masters_by_epoch.entry(record.value.master_epoch).or_default().insert(id);
                winners.push((id, record.clone()));
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one contender is elected: {winners:?}");
        let (winner, record) = winners.pop().unwrap();
        let best = contenders.iter().map(|c| c.broker_id()).max().unwrap();
        assert_eq!(winner, best, "round {round}: the highest (epoch, offset) wins");
        assert_eq!(record.value.master_epoch, round + 1);
        assert_eq!(record.value.sync_state_set, BTreeSet::from([winner]));
        // A second campaign by anyone now sees a live master.
        let again = contenders[0].campaign(
            member(contenders[0].broker_id(), 0, 0),
            ElectionPolicy::default(),
            RecordAudit::new(),
        );
        assert_eq!(again.await.unwrap(), CampaignOutcome::MasterAlive(winner));
        // The master brings everyone into the set, then leaves: the rest elect among themselves.
        let all: Vec<i64> = contenders.iter().map(|c| c.broker_id()).collect();
        expand_to(contenders.iter().find(|c| c.broker_id() == winner).unwrap(), &record.value, &all).await;
        let pos = contenders.iter().position(|c| c.broker_id() == winner).unwrap();
        contenders.remove(pos).resign().await.unwrap();
        epoch_of_log = record.value.master_epoch;
    }
    for (epoch, masters) in &masters_by_epoch {
        assert_eq!(masters.len(), 1, "epoch {epoch} had masters {masters:?}");
    }
    assert_eq!(masters_by_epoch.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_loss_closes_the_old_masters_guard_before_its_lease_expires() {
    if !etcd_available("lease_loss_closes_the_old_masters_guard_before_its_lease_expires") {
        return;
    }
    let etcd = tokio::task::block_in_place(|| EtcdCluster::start(1));
    let clock = tokio_clock();
    // The old master reaches etcd through a proxy the test can cut.
    let proxy = Proxy::start(etcd.client_addr(0)).await;
    let a = connect(vec![proxy.endpoint()], 1, &clock).await;
    let b = connect(etcd.endpoints(), 2, &clock).await;
    b.publish(member(2, 0, 0)).await.unwrap();
    let record =
        elected(&a.campaign(member(1, 0, 10), ElectionPolicy::default(), RecordAudit::new()).await.unwrap())
            .unwrap()
            .clone();
    let record = expand_to(&a, &record.value, &[1, 2]).await;
    assert!(a.lease().is_open(clock()));

    // Watch the old master's member key: its deletion is the lease expiring in etcd.
    let mut raw = etcd_client::Client::connect(etcd.endpoints(), None).await.unwrap();
    let member_key = a.record_key().replace("/record", "/members/1");
    let mut watch = raw.watch(member_key.as_str(), None).await.unwrap();

    proxy.cut();
    let expired_at = loop {
        let resp = watch.message().await.unwrap().expect("watch open");
        if resp.events().iter().any(|e| e.event_type() == etcd_client::EventType::Delete) {
            break clock();
        }
    };
    // The guard had closed before etcd expired the lease, by the margin at least.
    let snapshot = a.lease();
    assert!(!snapshot.is_open(expired_at), "the old master's guard is still open when its lease expired");
    if let Some(closed_at) = snapshot.open_until {
        assert!(
            closed_at + Duration::from_millis(500) <= expired_at,
            "closed at {closed_at:?}, expired at {expired_at:?}"
        );
    }
    // Now the other member is elected, in the next epoch.
    let outcome = b
        .campaign(member(2, record.value.master_epoch, 10), ElectionPolicy::default(), RecordAudit::new())
        .await
        .unwrap();
    let new = elected(&outcome).expect("broker 2 is elected").clone();
    assert_eq!(new.value.master_epoch, record.value.master_epoch + 1);
    assert!(!a.lease().is_open(clock()));

    // The partition heals: etcd tells the old master its lease is gone; its guard stays closed.
    proxy.heal();
    eventually("the old master learns its lease is lost", || a.lease().lost).await;
    assert!(!a.lease().is_open(clock()));
    assert_eq!(a.publish(member(1, 1, 10)).await, Err(CoordinatorError::LeaseLost));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_change_by_an_old_epoch_or_an_old_master_is_refused() {
    if !etcd_available("set_change_by_an_old_epoch_or_an_old_master_is_refused") {
        return;
    }
    let etcd = tokio::task::block_in_place(|| EtcdCluster::start(1));
    let clock = tokio_clock();
    let a = connect(etcd.endpoints(), 1, &clock).await;
    let b = connect(etcd.endpoints(), 2, &clock).await;
    b.publish(member(2, 0, 0)).await.unwrap();
    let first =
        elected(&a.campaign(member(1, 0, 10), ElectionPolicy::default(), RecordAudit::new()).await.unwrap())
            .unwrap()
            .clone();
    let first = expand_to(&a, &first.value, &[1, 2]).await;
    a.resign().await.unwrap();

    // The old master, back with a new lease, tries to shrink the set to itself in its old
    // epoch: the record still names it, but its mastership went with its old lease.
    let a2 = connect(etcd.endpoints(), 1, &clock).await;
    a2.publish(member(1, 1, 5)).await.unwrap();
    let shrink = SetChange {
        proposer: 1,
        master_epoch: first.value.master_epoch,
        sync_state_set_epoch: first.value.sync_state_set_epoch,
        new_set: BTreeSet::from([1]),
    };
    assert_eq!(
        a2.change_sync_state_set(shrink.clone()).await.unwrap(),
        SetChangeOutcome::Refused(SetChangeRefusal::MastershipLost(1))
    );
    // Broker 2 (offset 10 against broker 1's 5) is elected in the next epoch.
    let second =
        elected(&b.campaign(member(2, 1, 10), ElectionPolicy::default(), RecordAudit::new()).await.unwrap())
            .unwrap()
            .clone();
    assert_eq!(second.value.master_epoch, 2);

    // Now the old master's proposal is refused as not the master's.
    assert_eq!(
        a2.change_sync_state_set(shrink).await.unwrap(),
        SetChangeOutcome::Refused(SetChangeRefusal::NotMaster { proposer: 1, master: 2 })
    );
    // The new master proposing under the old epoch is refused too.
    let stale = SetChange {
        proposer: 2,
        master_epoch: 1,
        sync_state_set_epoch: second.value.sync_state_set_epoch,
        new_set: BTreeSet::from([1, 2]),
    };
    assert_eq!(
        b.change_sync_state_set(stale).await.unwrap(),
        SetChangeOutcome::Refused(SetChangeRefusal::StaleMasterEpoch { proposed: 1, current: 2 })
    );
    // And the record is exactly what the new master's election wrote.
    let view = b.group().await.unwrap();
    assert_eq!(view.record, Some(second));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sees_every_change_of_the_record_in_order() {
    if !etcd_available("a_watch_sees_every_change_of_the_record_in_order") {
        return;
    }
    let etcd = tokio::task::block_in_place(|| EtcdCluster::start(1));
    let clock = tokio_clock();
    let a = connect(etcd.endpoints(), 1, &clock).await;
    let b = connect(etcd.endpoints(), 2, &clock).await;
    let observer = connect(etcd.endpoints(), 9, &clock).await;
    let start = observer.watch().await.unwrap();
    assert_eq!(start.record, None);
    let mut watch = start.watch;

    b.publish(member(2, 0, 0)).await.unwrap();
    let mut written = Vec::new();
    let mut record =
        elected(&a.campaign(member(1, 0, 10), ElectionPolicy::default(), RecordAudit::new()).await.unwrap())
            .unwrap()
            .clone();
    written.push(record.clone());
    // Back-to-back set changes, faster than any polling would see them.
    for i in 0..11 {
        let set: &[i64] = if i % 2 == 0 { &[1, 2] } else { &[1] };
        record = expand_to(&a, &record.value, set).await;
        written.push(record.clone());
    }
    a.resign().await.unwrap();
    let last =
        elected(&b.campaign(member(2, 1, 10), ElectionPolicy::default(), RecordAudit::new()).await.unwrap())
            .unwrap()
            .clone();
    written.push(last);

    let mut seen = Vec::new();
    while seen.len() < written.len() {
        let event = tokio::time::timeout(PATIENCE, watch.next()).await.expect("watch event").unwrap();
        match event {
            WatchEvent::Changed(r) => seen.push(r),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, written);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_one_etcd_node_of_three_keeps_the_guard_and_losing_all_closes_it() {
    if !etcd_available("losing_one_etcd_node_of_three_keeps_the_guard_and_losing_all_closes_it") {
        return;
    }
    let mut etcd = tokio::task::block_in_place(|| EtcdCluster::start(3));
    let clock = tokio_clock();
    let a = connect(etcd.endpoints(), 1, &clock).await;
    let record =
        elected(&a.campaign(member(1, 0, 10), ElectionPolicy::default(), RecordAudit::new()).await.unwrap())
            .unwrap()
            .clone();

    // kill -9 one member: renewals sent after the kill are still answered.
    etcd.kill(0);
    let killed_at: Instant = clock();
    let open_after_kill = Duration::from_secs(3) - Duration::from_millis(500);
    eventually("a renewal sent after one etcd node died is answered", || {
        a.lease().open_until.is_some_and(|until| until > killed_at + open_after_kill)
    })
    .await;
    assert!(!a.lease().lost);

    // All members gone: nothing renews the lease and the guard closes by itself.
    etcd.kill(1);
    etcd.kill(2);
    eventually("the guard closes with etcd down", || !a.lease().is_open(clock())).await;
    assert!(!a.lease().lost, "etcd being down is not the lease being lost");
    let down = a.group().await;
    assert!(
        matches!(down, Err(CoordinatorError::Unavailable(_) | CoordinatorError::Timeout(_))),
        "a read with etcd down fails: {down:?}"
    );

    // etcd returns: the lease was never expired by etcd, renewals resume, and the record is
    // what it was.
    tokio::task::block_in_place(|| {
        for i in 0..3 {
            etcd.restart(i);
        }
        etcd.wait_healthy();
    });
    eventually("the guard reopens once etcd is back", || a.lease().is_open(clock())).await;
    let view = a.group().await.unwrap();
    assert_eq!(view.record, Some(record));
    assert_eq!(view.live.iter().map(|m| m.broker_id).collect::<Vec<_>>(), vec![1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_campaigns_from_disagreeing_views_elect_one_master_per_epoch() {
    if !etcd_available("racing_campaigns_from_disagreeing_views_elect_one_master_per_epoch") {
        return;
    }
    let etcd = tokio::task::block_in_place(|| EtcdCluster::start(1));
    let clock = tokio_clock();
    // Nobody has published before the campaigns start: each contender publishes, then reads,
    // and many see themselves as the best of those published so far. Only the
    // compare-and-swap decides.
    let mut contenders = Vec::new();
    for id in 1..=8 {
        contenders.push(Arc::new(connect(etcd.endpoints(), id, &clock).await));
    }
    let mut masters_by_epoch: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    let mut attempts = 0;
    for round in 0..5 {
        // Started a few milliseconds apart, lowest rank first: the early ones read before the
        // better ones have published, and try their compare-and-swap too.
        let mut by_rank = contenders.clone();
        by_rank.sort_by_key(|c| c.broker_id());
        let mut tasks = Vec::new();
        for c in by_rank {
            let me = member(c.broker_id(), round, (c.broker_id() as u64) << 33);
            tasks.push(tokio::spawn(async move {
                (c.broker_id(), c.campaign(me, ElectionPolicy::default(), RecordAudit::new()).await.unwrap())
            }));
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        let mut winner = None;
        for task in tasks {
            let (id, outcome) = task.await.unwrap();
            if matches!(outcome, CampaignOutcome::Elected(_) | CampaignOutcome::LostRace) {
                attempts += 1;
            }
            if let Some(record) = elected(&outcome) {
                masters_by_epoch.entry(record.value.master_epoch).or_default().insert(id);
                winner = Some((id, record.clone()));
            }
        }
        let (winner, record) = winner.expect("someone is elected");
        let all: Vec<i64> = contenders.iter().map(|c| c.broker_id()).collect();
        let master = contenders.iter().find(|c| c.broker_id() == winner).unwrap();
        expand_to(master, &record.value, &all).await;
        // The master leaves and comes back as a plain member with a new lease.
        let pos = contenders.iter().position(|c| c.broker_id() == winner).unwrap();
        contenders.remove(pos).resign().await.unwrap();
        contenders.push(Arc::new(connect(etcd.endpoints(), winner, &clock).await));
    }
    for (epoch, masters) in &masters_by_epoch {
        assert_eq!(masters.len(), 1, "epoch {epoch} had masters {masters:?}");
    }
    assert_eq!(masters_by_epoch.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
    eprintln!("{attempts} compare-and-swap attempts over 5 elections");
}

/// A CA, an etcd server certificate for 127.0.0.1 it signed, and a client certificate.
fn etcd_tls(ca: &pki::Ca, client_cert_auth: bool) -> (ServerTls, pki::Identity) {
    let server = ca.issue(&["127.0.0.1", "localhost"]);
    let client = ca.issue(&["broker-1.logship.test"]);
    let tls = ServerTls {
        ca_pem: ca.pem(),
        cert_pem: server.cert,
        key_pem: server.key,
        client: (client.cert.clone(), client.key.clone()),
        client_cert_auth,
    };
    (tls, client)
}

/// Connects broker `id` with `tls` and `credentials`; the error as text if it fails (or does
/// not answer in [`PATIENCE`]).
async fn connect_with(
    endpoints: Vec<String>,
    id: i64,
    clock: &Clock,
    tls: Option<EtcdTls>,
    credentials: Option<EtcdCredentials>,
) -> Result<EtcdCoordinator, String> {
    let mut config = EtcdConfig::new(endpoints, "TestCluster", "broker-a", id);
    (config.tls, config.credentials) = (tls, credentials);
    match tokio::time::timeout(PATIENCE, EtcdCoordinator::connect(config, Arc::clone(clock))).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("connect did not finish".into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_requiring_client_certificates_is_reached_only_with_one_from_its_ca() {
    if !etcd_available("an_etcd_requiring_client_certificates_is_reached_only_with_one_from_its_ca") {
        return;
    }
    let ca = pki::Ca::new("etcd test CA");
    let (server, client) = etcd_tls(&ca, true);
    let etcd = tokio::task::block_in_place(|| EtcdCluster::start_tls(1, server));
    let endpoints = etcd.endpoints();
    assert!(endpoints[0].starts_with("https://"), "{endpoints:?}");
    let clock = tokio_clock();
    let identity = Some((client.cert.clone().into_bytes(), client.key.clone().into_bytes()));
    let tls = |ca_pem: String, identity| EtcdTls { ca_pem: ca_pem.into_bytes(), identity, server_name: None };

    // Without a client certificate, or with one from another CA: no session.
    let stranger_ca = pki::Ca::new("stranger CA");
    let stranger = stranger_ca.issue(&["broker-1.logship.test"]);
    for (what, config) in [
        ("no client certificate", tls(ca.pem(), None)),
        (
            "a certificate from another CA",
            tls(ca.pem(), Some((stranger.cert.into_bytes(), stranger.key.into_bytes()))),
        ),
        ("a server CA that did not sign etcd's certificate", tls(stranger_ca.pem(), identity.clone())),
    ] {
        let refused = connect_with(endpoints.clone(), 1, &clock, Some(config), None).await;
        assert!(refused.is_err(), "{what}: connected");
    }
    // Plain HTTP to the TLS port: refused by the settings before any byte goes out.
    let mut config =
        EtcdConfig::new(vec![endpoints[0].replace("https", "http")], "TestCluster", "broker-a", 1);
    config.tls = Some(tls(ca.pem(), identity.clone()));
    assert!(
        EtcdCoordinator::connect(config, Arc::clone(&clock))
            .await
            .unwrap_err()
            .to_string()
            .contains("https://")
    );

    // With the client certificate: elections work as on a plain etcd.
    let a = connect_with(endpoints.clone(), 1, &clock, Some(tls(ca.pem(), identity.clone())), None)
        .await
        .unwrap();
    let b = connect_with(endpoints, 2, &clock, Some(tls(ca.pem(), identity)), None).await.unwrap();
    b.publish(member(2, 0, 0)).await.unwrap();
    let outcome = a.campaign(member(1, 0, 10), ElectionPolicy::default(), RecordAudit::new()).await.unwrap();
    let record = elected(&outcome).expect("broker 1 is elected over TLS").clone();
    assert_eq!(
        b.campaign(member(2, 0, 0), ElectionPolicy::default(), RecordAudit::new()).await.unwrap(),
        CampaignOutcome::MasterAlive(1)
    );
    assert!(a.lease().is_open(clock()));
    expand_to(&a, &record.value, &[1, 2]).await;
}

/// Enables etcd's authentication: a `root` user (which `auth enable` needs) and a `logship`
/// user whose role may read and write `/logship/` only.
async fn enable_etcd_auth(endpoints: &[String]) {
    let raw = etcd_client::Client::connect(endpoints, None).await.unwrap();
    let mut auth = raw.auth_client();
    auth.role_add("root").await.unwrap();
    auth.user_add("root", "root-password-0123", None).await.unwrap();
    auth.user_grant_role("root", "root").await.unwrap();
    auth.role_add("logship").await.unwrap();
    let perm = etcd_client::Permission::read_write("/logship/").with_prefix();
    auth.role_grant_permission("logship", perm).await.unwrap();
    auth.user_add("logship", "logship-password-0123", None).await.unwrap();
    auth.user_grant_role("logship", "logship").await.unwrap();
    auth.auth_enable().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_with_authentication_enabled_is_used_only_with_the_users_password() {
    if !etcd_available("an_etcd_with_authentication_enabled_is_used_only_with_the_users_password") {
        return;
    }
    let etcd = tokio::task::block_in_place(|| EtcdCluster::start(1));
    enable_etcd_auth(&etcd.endpoints()).await;
    let clock = tokio_clock();
    let user = |password: &str| Some(EtcdCredentials { user: "logship".into(), password: password.into() });

    // A wrong password: no session.
    let wrong = connect_with(etcd.endpoints(), 1, &clock, None, user("not-the-password")).await;
    assert!(
        wrong.is_err_and(|e| e.contains("authentication failed") || e.contains("invalid")),
        "a wrong password connected"
    );
    // No credentials: whatever etcd lets it open, it can neither publish nor campaign.
    if let Ok(anonymous) = connect_with(etcd.endpoints(), 1, &clock, None, None).await {
        assert!(anonymous.publish(member(1, 0, 10)).await.is_err(), "an anonymous client wrote a member key");
        assert!(
            anonymous
                .campaign(member(1, 0, 10), ElectionPolicy::default(), RecordAudit::new())
                .await
                .is_err()
        );
    }
    // The user's password: elections work, under the prefix its role may write.
    let a = connect_with(etcd.endpoints(), 1, &clock, None, user("logship-password-0123")).await.unwrap();
    let b = connect_with(etcd.endpoints(), 2, &clock, None, user("logship-password-0123")).await.unwrap();
    b.publish(member(2, 0, 0)).await.unwrap();
    let outcome = a.campaign(member(1, 0, 10), ElectionPolicy::default(), RecordAudit::new()).await.unwrap();
    let record = elected(&outcome).expect("broker 1 is elected with etcd's authentication on").clone();
    expand_to(&a, &record.value, &[1, 2]).await;
    assert_eq!(
        b.campaign(member(2, 0, 0), ElectionPolicy::default(), RecordAudit::new()).await.unwrap(),
        CampaignOutcome::MasterAlive(1)
    );
    assert!(a.lease().is_open(clock()));
    // A session outlives its token: the keep-alive keeps the guard open for several TTLs.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(a.lease().is_open(clock()), "the lease guard closed under etcd's authentication");
    a.publish(member(1, 1, 20)).await.unwrap();
}

/// A mastership key written without a lease (or kept alive by a lease the broker it names does
/// not hold) never expires by itself: once the broker it names is gone, it must count as no
/// master, or the group never fails over after a kill -9.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mastership_key_without_a_live_lease_counts_as_no_master() {
    if !etcd_available("a_mastership_key_without_a_live_lease_counts_as_no_master") {
        return;
    }
    let etcd = tokio::task::block_in_place(|| EtcdCluster::start(1));
    let clock = tokio_clock();
    let a = connect(etcd.endpoints(), 1, &clock).await;
    let b = connect(etcd.endpoints(), 2, &clock).await;
    b.publish(member(2, 0, 0)).await.unwrap();
    let record =
        elected(&a.campaign(member(1, 0, 10), ElectionPolicy::default(), RecordAudit::new()).await.unwrap())
            .unwrap()
            .clone();
    let record = expand_to(&a, &record.value, &[1, 2]).await;
    let master_key = a.record_key().replace("/record", "/master");
    let mut raw = etcd_client::Client::connect(etcd.endpoints(), None).await.unwrap();
    // The mastership key rewritten without a lease: while broker 1 lives it is still broker 1's.
    let value = format!("1 {}", record.value.master_epoch);
    raw.put(master_key.as_str(), value.as_str(), None).await.unwrap();
    // Broker 1 dies (its lease is revoked: kill -9 and the TTL passing).
    raw.lease_revoke(a.lease_id()).await.unwrap();
    let view = b.group().await.unwrap();
    assert!(!view.master_live, "a mastership key with no lease holds no mastership: {view:?}");
    let outcome = b
        .campaign(member(2, record.value.master_epoch, 10), ElectionPolicy::default(), RecordAudit::new())
        .await
        .unwrap();
    let new = elected(&outcome).unwrap_or_else(|| panic!("broker 2 is not elected: {outcome:?}"));
    assert_eq!(new.value.master_id, 2);
    assert_eq!(new.value.master_epoch, record.value.master_epoch + 1);
    let view = b.group().await.unwrap();
    assert!(view.master_live, "broker 2 holds the mastership now: {view:?}");

    // The same with a lease of its own that broker 3 keeps alive: a key naming broker 2 under a
    // lease broker 2 does not hold is no mastership once broker 2 is gone.
    let c = connect(etcd.endpoints(), 3, &clock).await;
    c.publish(member(3, new.value.master_epoch, 10)).await.unwrap();
    let expanded = expand_to(&b, &new.value, &[2, 3]).await;
    let foreign = raw.lease_grant(60, None).await.unwrap().id();
    let value = format!("2 {}", expanded.value.master_epoch);
    let options = etcd_client::PutOptions::new().with_lease(foreign);
    raw.put(master_key.as_str(), value.as_str(), Some(options)).await.unwrap();
    raw.lease_revoke(b.lease_id()).await.unwrap();
    let outcome = c
        .campaign(member(3, expanded.value.master_epoch, 10), ElectionPolicy::default(), RecordAudit::new())
        .await
        .unwrap();
    let third = elected(&outcome).unwrap_or_else(|| panic!("broker 3 is not elected: {outcome:?}"));
    assert_eq!((third.value.master_id, third.value.master_epoch), (3, expanded.value.master_epoch + 1));
}
