//! RocketMQ's broker roles and flush types: plain settings that both the service layer and the
//! store read, kept in a leaf module so neither depends on the other for them.

/// RocketMQ `brokerRole`: the role a broker is configured with. A classic broker keeps it for
/// life; a controller-mode broker's role now is a
/// [`LocalRole`](crate::service::coordinator::LocalRole), which failover changes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum BrokerRole {
    /// A master whose puts do not wait for slaves.
    #[default]
    AsyncMaster,
    /// A master whose puts wait for slave acknowledgements, per the ack policy.
    SyncMaster,
    /// A slave: replicates from a master and takes no puts.
    Slave,
}

impl BrokerRole {
    /// RocketMQ's spelling, e.g. `SYNC_MASTER`.
    pub fn rocketmq_name(self) -> &'static str {
        match self {
            Self::AsyncMaster => "ASYNC_MASTER",
            Self::SyncMaster => "SYNC_MASTER",
            Self::Slave => "SLAVE",
        }
    }
}

/// RocketMQ `flushDiskType`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlushDiskType {
    /// Flush in the background; puts do not wait for the disk.
    #[default]
    AsyncFlush,
    /// Group commit; puts wait until their bytes are durable.
    SyncFlush,
}

impl FlushDiskType {
    /// RocketMQ's spelling, e.g. `SYNC_FLUSH`.
    pub fn rocketmq_name(self) -> &'static str {
        match self {
            Self::AsyncFlush => "ASYNC_FLUSH",
            Self::SyncFlush => "SYNC_FLUSH",
        }
    }
}
