//! Ids the drivers choose and the protocol core keys its state by.

/// A connection id, chosen by the master driver (a counter or a slab key).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

/// A replication-wait id, chosen by the master driver.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WaitId(pub u64);
