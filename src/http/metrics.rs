//! `GET /metrics`: Prometheus text (or OpenMetrics, as `Accept` asks).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};

use super::status::status_of;
use crate::broker::Broker;

pub async fn metrics(State(broker): State<Arc<Broker>>, headers: HeaderMap) -> Response {
    // Refresh the replication gauges from the live status.
    let _ = status_of(&broker).await;
    let (content_type, body) =
        broker.metrics.respond(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}
