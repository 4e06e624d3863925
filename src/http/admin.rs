//! The admin calls: `POST /ha/changeToMaster`, `/ha/changeToSlave`, `/ha/setSyncStateSet`
//! (controller mode) and `/ha/forgetReplica` (a master).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use logship_store::CommitLog;
use serde::Deserialize;
use serde_json::json;

use super::error;
use crate::broker::{Broker, ReplicationHandle};

/// The most bytes an admin call's body may hold.
const ADMIN_BODY_LIMIT: usize = 4096;

/// Reads an admin call's JSON body as `T`; a typed 400 answer when it is not one.
async fn admin_request<T: serde::de::DeserializeOwned>(broker: &Broker, body: Body) -> Result<T, Response> {
    if broker.settings.http.auth_token.is_none() {
        return Err(error(
            StatusCode::FORBIDDEN,
            "role-changing calls need httpAuthToken (or httpAuthTokenFile): without one anybody who reaches \
             the HTTP port could change this broker's role",
        ));
    }
    if broker.roles.is_none() {
        return Err(error(StatusCode::CONFLICT, crate::roles::RoleError::NotControllerMode.to_string()));
    }
    admin_body(broker, body).await
}

/// Reads an admin call's JSON body as `T`, once its token is checked.
async fn admin_body<T: serde::de::DeserializeOwned>(broker: &Broker, body: Body) -> Result<T, Response> {
    let read =
        tokio::time::timeout(broker.settings.http.body_timeout, axum::body::to_bytes(body, ADMIN_BODY_LIMIT));
    let bytes = match read.await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!("reading the body (at most {ADMIN_BODY_LIMIT} bytes): {e}"),
            ));
        }
        Err(_) => {
            return Err(error(
                StatusCode::REQUEST_TIMEOUT,
                "the body was not complete within httpBodyTimeout",
            ));
        }
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("the body is not the expected JSON: {e}")))
}

/// With automatic failover on, an admin call is refused (409) unless it says
/// `"overrideCoordinator": true`; then the broker leaves automatic failover (its coordinator
/// loop stops and resigns its lease, and puts are no longer checked against a lease) until it
/// restarts, and the call goes ahead.
async fn coordinator_gate(broker: &Broker, override_coordinator: bool) -> Result<(), Response> {
    let Some(c) = broker.coordination() else { return Ok(()) };
    if !override_coordinator {
        return Err(error(
            StatusCode::CONFLICT,
            "automatic failover is on (etcdEndpoints): the etcd coordinator owns this broker's role. To take \
             it over by hand (etcd lost for good), send \"overrideCoordinator\": true: the broker then \
             leaves automatic failover until it restarts",
        ));
    }
    tracing::warn!(
        "overrideCoordinator: an admin call takes this broker's role over; it leaves automatic failover \
         (no lease, no election) until it restarts"
    );
    if !c.detach().await {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the etcd coordinator did not stop in time; retry the call",
        ));
    }
    Ok(())
}

/// The answer to a role change.
fn role_answer(result: Result<crate::roles::Role, crate::roles::RoleError>) -> Response {
    use crate::roles::RoleError;
    match result {
        Ok(role) => Json(serde_json::to_value(role.status()).expect("a role serializes")).into_response(),
        Err(e) => {
            let code = match &e {
                RoleError::Refused(r) if r.is_malformed() => StatusCode::BAD_REQUEST,
                RoleError::NotControllerMode | RoleError::Refused(_) => StatusCode::CONFLICT,
                RoleError::BadRequest(_) | RoleError::OwnHaPort { .. } => StatusCode::BAD_REQUEST,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            error(code, e.to_string())
        }
    }
}

/// `POST /ha/changeToMaster` `{"epoch": E, "syncStateSet": [ids], "syncStateSetEpoch": N}`.
pub async fn change_to_master(State(broker): State<Arc<Broker>>, body: Body) -> Response {
    let request: crate::roles::PromoteRequest = match admin_request(&broker, body).await {
        Ok(request) => request,
        Err(r) => return r,
    };
    if let Err(r) = coordinator_gate(&broker, request.override_coordinator).await {
        return r;
    }
    role_answer(crate::roles::promote(&broker, request).await)
}

/// `POST /ha/changeToSlave` `{"masterAddress": "host:port", "masterBrokerId": M, "epoch": E}`.
pub async fn change_to_slave(State(broker): State<Arc<Broker>>, body: Body) -> Response {
    let request: crate::roles::FollowRequest = match admin_request(&broker, body).await {
        Ok(request) => request,
        Err(r) => return r,
    };
    if let Err(r) = coordinator_gate(&broker, request.override_coordinator).await {
        return r;
    }
    role_answer(crate::roles::follow(&broker, request).await)
}

/// `POST /ha/setSyncStateSet`.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SetSyncStateSetRequest {
    /// The members; the master must be one.
    sync_state_set: std::collections::BTreeSet<logship_core::autoswitch::BrokerId>,
    /// The epoch of the set: the one in force plus one (the set in force given again is
    /// accepted at its own epoch).
    sync_state_set_epoch: i32,
    /// Skip ahead of the next set epoch.
    #[serde(default)]
    force: bool,
    /// With automatic failover on etcd: see [`coordinator_gate`].
    #[serde(default)]
    override_coordinator: bool,
}

/// `POST /ha/setSyncStateSet` `{"syncStateSet": [ids], "syncStateSetEpoch": N}`: a master
/// applies a sync-state-set decided outside, as RocketMQ's controller (or its test harness's
/// `setSyncStateSet`) tells it. 400 for a set without this master, a negative id or epoch, or
/// a broker added that is not connected to this master (as RocketMQ's controller refuses a
/// broker it does not see alive); 409 for a stale epoch, an epoch skipping ahead without
/// `force`, `i32::MAX`, or a broker that is not a controller-mode master.
pub async fn set_sync_state_set(State(broker): State<Arc<Broker>>, body: Body) -> Response {
    use logship_core::service::SyncStateSetError as E;
    let request: SetSyncStateSetRequest = match admin_request(&broker, body).await {
        Ok(request) => request,
        Err(r) => return r,
    };
    if let Err(r) = coordinator_gate(&broker, request.override_coordinator).await {
        return r;
    }
    let ReplicationHandle::Master(master) = broker.node() else {
        return error(
            StatusCode::CONFLICT,
            "this broker is not a master: only a master has a sync-state-set",
        );
    };
    if let Err(r) = check_set_request(&master, &request).await {
        return r;
    }
    match master.set_sync_state_set(request.sync_state_set, request.sync_state_set_epoch).await {
        Ok(s) => Json(json!({
            "syncStateSet": s.sync_state_set,
            "syncStateSetEpoch": s.sync_state_set_epoch,
            "confirmOffset": s.confirm_offset,
        }))
        .into_response(),
        Err(e) => {
            let code = match &e {
                E::MasterNotMember { .. } | E::NegativeBrokerId { .. } | E::NegativeEpoch { .. } => {
                    StatusCode::BAD_REQUEST
                }
                E::StaleEpoch { .. } | E::EpochInUse { .. } | E::NotControllerMode => StatusCode::CONFLICT,
                E::Stopped => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            error(code, e.to_string())
        }
    }
}

/// `POST /ha/forgetReplica` `{"replica": NAME}`: a master stops expecting a replica that went
/// away (it was retired), so that it leaves `absentReplicas`, its series leave the metrics and
/// `replicasExpected` drops by one. Needs `httpAuthToken` (403 without); 404 for a name not
/// remembered, 409 for a replica connected now, one `replicaNames` gives, or a broker that is
/// not a master.
pub async fn forget_replica(State(broker): State<Arc<Broker>>, body: Body) -> Response {
    use crate::metrics::ForgetRefused;
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct ForgetRequest {
        replica: String,
    }
    if broker.settings.http.auth_token.is_none() {
        return error(
            StatusCode::FORBIDDEN,
            "forgetting a replica needs httpAuthToken (or httpAuthTokenFile): without one anybody who \
             reaches the HTTP port could hide an away replica",
        );
    }
    let request: ForgetRequest = match admin_body(&broker, body).await {
        Ok(request) => request,
        Err(r) => return r,
    };
    let ReplicationHandle::Master(master) = broker.node() else {
        return error(StatusCode::CONFLICT, "this broker is not a master: only a master expects replicas");
    };
    let Some(s) = master.status().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "the replication service has stopped");
    };
    let live = broker.metrics.replica_names(&s.slaves);
    match broker.metrics.forget(&request.replica, &live) {
        Ok(()) => {
            tracing::info!(replica = %request.replica, "forgot an away replica: it is no longer expected");
            Json(json!({ "forgotten": request.replica, "replicasExpected": broker.metrics.replicas_expected() }))
                .into_response()
        }
        Err(e @ ForgetRefused::Unknown(_)) => error(StatusCode::NOT_FOUND, e.to_string()),
        Err(e) => error(StatusCode::CONFLICT, e.to_string()),
    }
}

/// What a controller refuses of a set change, checked against the master's state now: an epoch
/// that is `i32::MAX` or, unless forced, skips ahead of the next one; and members added that are
/// not connected to this master (a learner never is a member). Members already in the set may
/// stay while away: removing them is a decision of its own.
async fn check_set_request(
    master: &logship_tokio::MasterHandle<CommitLog>,
    request: &SetSyncStateSetRequest,
) -> Result<(), Response> {
    let epoch = request.sync_state_set_epoch;
    let malformed = epoch < 0 || request.sync_state_set.iter().any(|id| *id < 0);
    if malformed {
        // The master service refuses these with their own typed errors.
        return Ok(());
    }
    if epoch == i32::MAX {
        return Err(error(
            StatusCode::CONFLICT,
            "syncStateSetEpoch 2147483647 is refused, forced or not: no set epoch can follow it, so the \
             set could never change again",
        ));
    }
    let Some(status) = master.status().await else {
        return Err(error(StatusCode::SERVICE_UNAVAILABLE, "the master service has stopped"));
    };
    let Some(auto) = status.autoswitch else {
        return Err(error(StatusCode::CONFLICT, "this master is not in controller mode"));
    };
    let next = auto.sync_state_set_epoch.saturating_add(1);
    if epoch > next && !request.force {
        return Err(error(
            StatusCode::CONFLICT,
            format!(
                "syncStateSetEpoch {epoch}: set epochs advance one at a time, and the set in force is at \
                 epoch {}, so the next is {next}; send \"force\": true to skip ahead",
                auto.sync_state_set_epoch
            ),
        ));
    }
    if !request.sync_state_set.contains(&auto.broker_id) {
        return Ok(()); // refused by the master service: the set must hold the master
    }
    let connected: std::collections::BTreeSet<_> =
        auto.slaves.iter().filter(|l| !l.async_learner).filter_map(|l| l.broker_id).collect();
    let strangers: Vec<String> = request
        .sync_state_set
        .iter()
        .filter(|id| **id != auto.broker_id && !auto.sync_state_set.contains(id) && !connected.contains(id))
        .map(ToString::to_string)
        .collect();
    if !strangers.is_empty() {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!(
                "syncStateSet: broker(s) {} not connected to this master: only a connected replica can join \
                 the sync-state-set",
                strangers.join(", ")
            ),
        ));
    }
    Ok(())
}
