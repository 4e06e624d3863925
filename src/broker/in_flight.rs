//! `httpMaxInFlightBytes` and `httpMaxInFlightBytesPerIp`: the bytes of request and response
//! bodies the HTTP API holds in memory at once.

use std::net::IpAddr;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget of request and response body bytes held at once: `httpMaxInFlightBytes` in
/// all, and `httpMaxInFlightBytesPerIp` per client IP, so that one client's stalled bodies
/// cannot take the budget every other client needs.
pub struct InFlight {
    permits: Arc<Semaphore>,
    total: u64,
    /// The per-client budget (0: none).
    per_client: u64,
    clients: Arc<std::sync::Mutex<std::collections::HashMap<IpAddr, u64>>>,
}

/// Why a reservation was refused.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Busy {
    /// The broker's whole budget is in use.
    Broker,
    /// This client's share is in use.
    Client,
}

/// Bytes held against the budget, given back on drop: the broker's permits and the client's
/// share.
pub struct Held {
    _share: Option<ClientShare>,
    _permit: OwnedSemaphorePermit,
}

/// A client's bytes in the per-client ledger, given back on drop.
struct ClientShare {
    ip: IpAddr,
    bytes: u64,
    clients: Arc<std::sync::Mutex<std::collections::HashMap<IpAddr, u64>>>,
}

impl Drop for ClientShare {
    fn drop(&mut self) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = clients.get_mut(&self.ip) {
            *held = held.saturating_sub(self.bytes);
            if *held == 0 {
                clients.remove(&self.ip);
            }
        }
    }
}

impl InFlight {
    /// A budget of `total` bytes, at most `per_client` of them (0: no limit) per client IP.
    pub fn new(total: u64, per_client: u64) -> Self {
        let total = total.min(Semaphore::MAX_PERMITS as u64);
        Self {
            permits: Arc::new(Semaphore::new(total as usize)),
            total,
            per_client: per_client.min(total),
            clients: Arc::default(),
        }
    }

    /// Reserves `bytes` for `client` now, or says which budget is full. A reservation takes at
    /// most the whole budget and the client's whole share, so that one request larger than
    /// either still runs, alone.
    pub fn try_reserve(&self, client: IpAddr, bytes: u64) -> Result<Held, Busy> {
        let mut bytes = bytes.min(self.total);
        let share = if self.per_client > 0 {
            bytes = bytes.min(self.per_client);
            let ip = client.to_canonical();
            let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
            let held = clients.entry(ip).or_default();
            if *held + bytes > self.per_client {
                if *held == 0 {
                    clients.remove(&ip);
                }
                return Err(Busy::Client);
            }
            *held += bytes;
            Some(ClientShare { ip, bytes, clients: Arc::clone(&self.clients) })
        } else {
            None
        };
        let n = u32::try_from(bytes).unwrap_or(u32::MAX);
        // On failure the share is dropped, and so given back.
        let permit = Arc::clone(&self.permits).try_acquire_many_owned(n).map_err(|_| Busy::Broker)?;
        Ok(Held { _share: share, _permit: permit })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_in_flight_budget_refuses_what_it_cannot_hold_and_caps_one_reservation() {
        let ip = IpAddr::from([127, 0, 0, 1]);
        let budget = InFlight::new(100, 0);
        let a = budget.try_reserve(ip, 60).expect("fits");
        assert_eq!(budget.try_reserve(ip, 60).err(), Some(Busy::Broker));
        drop(a);
        let whole = budget.try_reserve(ip, 1 << 40).expect("a reservation above the budget takes all of it");
        assert!(budget.try_reserve(ip, 1).is_err());
        drop(whole);
        assert!(budget.try_reserve(ip, 100).is_ok());
    }

    #[test]
    fn one_client_holds_at_most_its_share_of_the_in_flight_budget() {
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let budget = InFlight::new(100, 30);
        let first = budget.try_reserve(a, 20).expect("fits the share");
        assert_eq!(budget.try_reserve(a, 20).err(), Some(Busy::Client), "beyond a's share");
        let other = budget.try_reserve(b, 25).expect("b has its own share");
        drop((other, first));
        let whole = budget.try_reserve(a, 1 << 40).expect("one request larger than the share runs alone");
        assert_eq!(budget.try_reserve(a, 1).err(), Some(Busy::Client));
        assert!(budget.try_reserve(b, 30).is_ok(), "b is not held back by a");
        drop(whole);
        assert!(budget.clients.lock().unwrap().is_empty(), "every share was given back");
        // The same client over IPv4 and IPv4-mapped IPv6 is one client.
        let mapped = IpAddr::from(std::net::Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        let _held = budget.try_reserve(a, 30).unwrap();
        assert_eq!(budget.try_reserve(mapped, 1).err(), Some(Busy::Client));
    }
}
