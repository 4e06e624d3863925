//! The tracing spans a service's tasks run in. The service layer records into them by field
//! name (the slave driver opens a `link` span per connection), so their names and fields are
//! declared here, beside the code that records them, and the adapters only enter them.

use std::net::SocketAddr;

use tracing::{Span, info_span};

use crate::ConnId;

/// The span of a master service's core task.
pub fn master_span(listen: SocketAddr) -> Span {
    info_span!("ha_master", listen = %listen)
}

/// The span of one connection a master accepted.
pub fn master_conn_span(conn: ConnId, peer: SocketAddr) -> Span {
    info_span!("ha_conn", role = "master", conn = conn.0, peer = %peer)
}

/// The span of a slave service's task: its connection cycle to `master_address`. Each
/// connection runs in a `link` span inside it (opened by
/// [`SlaveDriver::connected`](super::SlaveDriver::connected)).
pub fn slave_span(master_address: &str) -> Span {
    info_span!("ha_conn", role = "slave", peer = %master_address)
}

/// The span of a slave's `n`-th connection (1 for the first), inside [`slave_span`]: a new one
/// per connection, so that a flapping link repeats no field.
pub(super) fn slave_link_span(n: u64) -> Span {
    info_span!("link", conn = n)
}
