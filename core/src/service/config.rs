//! Service configuration: what a master or slave service runs with, checked at start.

use std::net::SocketAddr;
use std::time::Duration;

use crate::BrokerRole;
use crate::config::{CoreConfigError, MasterConfig, SlaveConfig};
pub use crate::log::DEFAULT_SYNC_FLUSH_TIMEOUT;
use crate::log::MessageLog;
use crate::service::Admission;
use crate::service::controller::{MasterControllerConfig, SlaveControllerConfig};
use crate::service::tls::SlaveTls;

/// RocketMQ `slaveTimeout`: how long a SYNC_MASTER put waits for slaves.
pub const DEFAULT_SLAVE_TIMEOUT: Duration = Duration::from_secs(3);
/// RocketMQ's slave connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Configuration of a master service (the protocol core plus the put path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterServiceConfig {
    /// The protocol core.
    pub core: MasterConfig,
    /// `AsyncMaster` or `SyncMaster`. Whether and how long a put waits for the disk is the
    /// log's setting ([`MessageLog::flush_settings`]), not the service's.
    pub role: BrokerRole,
    /// How long a SYNC_MASTER put waits for slaves (`slaveTimeout`).
    pub slave_timeout: Duration,
    /// Refuse puts until this many distinct trusted replicas have reported (0: take puts at
    /// once). Set it to the number of slaves after a crash recovery: a slave may hold bytes
    /// the master lost, and the master must not append over that offset before it has heard
    /// from every slave. Only replicas named exactly lift it: an address entry of the
    /// allow-list (`admission.allow`; a network entry never counts), a TLS replica name
    /// (`admission.tls`), or in protected mode (neither configured) a loopback replica while it
    /// is connected; a fence more replicas must lift than are named is refused
    /// ([`Admission::check_restart_fence`]).
    pub restart_fence: usize,
    /// Which connections are admitted as replicas and which are trusted.
    pub admission: Admission,
    /// Controller mode (RocketMQ `enableControllerMode=true`): run the AutoSwitch protocol for
    /// this master epoch instead of the classic one. `None`: the classic protocol. Needs a log
    /// that keeps epochs ([`LogRead::epoch_log`](crate::LogRead::epoch_log)).
    pub controller: Option<MasterControllerConfig>,
}

impl Default for MasterServiceConfig {
    fn default() -> Self {
        Self {
            core: MasterConfig::default(),
            role: BrokerRole::default(),
            slave_timeout: DEFAULT_SLAVE_TIMEOUT,
            restart_fence: 0,
            admission: Admission::default(),
            controller: None,
        }
    }
}

impl MasterServiceConfig {
    /// Checks every field, naming the first that cannot work.
    pub fn validate(&self) -> Result<(), CoreConfigError> {
        self.core.validate()?;
        self.admission.validate()?;
        if let Some(controller) = &self.controller {
            controller.validate()?;
            if self.restart_fence > 0 {
                return Err(CoreConfigError::Invalid {
                    field: "restart_fence",
                    value: self.restart_fence.to_string(),
                    reason: "has no meaning in controller mode: slaves truncate a divergent tail themselves",
                });
            }
        }
        self.admission.check_restart_fence(self.restart_fence)?;
        if self.role == BrokerRole::Slave {
            return Err(CoreConfigError::Invalid {
                field: "role",
                value: "SLAVE".into(),
                reason: "a master service needs ASYNC_MASTER or SYNC_MASTER",
            });
        }
        if self.slave_timeout.is_zero() {
            return Err(CoreConfigError::Invalid {
                field: "slave_timeout",
                value: format!("{:?}", self.slave_timeout),
                reason: "must be longer than zero",
            });
        }
        Ok(())
    }

    /// The defaults, with the segment size `log` owns taken from it
    /// ([`segment_size`](crate::LogRead::segment_size)). Flushing needs nothing here: the
    /// service follows the log's [`flush_settings`](MessageLog::flush_settings). Set those
    /// once, on the log (`StoreConfig`), and start from this:
    /// `MasterServiceConfig { role: BrokerRole::SyncMaster, ..MasterServiceConfig::for_log(&*log) }`.
    pub fn for_log<L: MessageLog>(log: &L) -> Self {
        let mut config = Self::default();
        config.core.mapped_file_size_commit_log = log.segment_size();
        config
    }

    /// [`validate`](Self::validate), then checks the setting this service shares with `log`,
    /// whose own is the authority: a `core.mapped_file_size_commit_log` other than the log's
    /// [`segment_size`](crate::LogRead::segment_size) unless it is left at the default (the
    /// driver always cuts frames at the log's segments). [`for_log`](Self::for_log) builds a
    /// configuration that agrees.
    pub fn validate_with<L: MessageLog>(&self, log: &L) -> Result<(), StartError> {
        self.validate()?;
        let segment = self.core.mapped_file_size_commit_log;
        if segment != crate::DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG && segment != log.segment_size() {
            return Err(StartError::DisagreesWithLog {
                setting: "mappedFileSizeCommitLog",
                service: segment.to_string(),
                log: log.segment_size().to_string(),
            });
        }
        Ok(())
    }
}

/// Configuration of a slave service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlaveServiceConfig {
    /// The protocol core.
    pub core: SlaveConfig,
    /// The master's HA address, `host:port` (`haMasterAddress`).
    pub master_address: String,
    /// How long one connection attempt may take (with TLS, the handshake too).
    pub connect_timeout: Duration,
    /// TLS to the master (`haTlsEnable`); `None`: the classic plain link.
    pub tls: Option<SlaveTls>,
    /// Controller mode (RocketMQ `enableControllerMode=true`): follow the master with the
    /// AutoSwitch protocol as the controller's `changeToSlave` says. `None`: the classic
    /// protocol. Needs a log that keeps epochs ([`LogRead::epoch_log`](crate::LogRead::epoch_log)).
    pub controller: Option<SlaveControllerConfig>,
}

impl SlaveServiceConfig {
    /// A slave of the master at `master_address`, with defaults otherwise.
    pub fn new(master_address: impl Into<String>) -> Self {
        Self {
            core: SlaveConfig::default(),
            master_address: master_address.into(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            tls: None,
            controller: None,
        }
    }

    /// Checks every field, naming the first that cannot work.
    pub fn validate(&self) -> Result<(), CoreConfigError> {
        self.core.validate()?;
        if let Some(controller) = &self.controller {
            controller.validate()?;
            controller.core_config(self).validate()?;
        }
        // RocketMQ ignores addresses shorter than 6 characters (HA_ADDRESS_MIN_LENGTH).
        if self.master_address.len() < 6 || !self.master_address.contains(':') {
            return Err(CoreConfigError::Invalid {
                field: "master_address",
                value: format!("{:?}", self.master_address),
                reason: "must be host:port",
            });
        }
        if self.connect_timeout.is_zero() {
            return Err(CoreConfigError::Invalid {
                field: "connect_timeout",
                value: format!("{:?}", self.connect_timeout),
                reason: "must be longer than zero",
            });
        }
        Ok(())
    }
}

/// Why a service could not start.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration cannot work.
    #[error("invalid configuration: {0}")]
    Config(#[from] CoreConfigError),
    /// A setting the service shares with its log differs from the log's, which is the
    /// authority.
    #[error("{setting} is {service} in the service configuration but {log} in its log; they must agree")]
    DisagreesWithLog {
        /// The setting's RocketMQ key, e.g. `mappedFileSizeCommitLog`.
        setting: &'static str,
        /// The service configuration's value.
        service: String,
        /// The log's value.
        log: String,
    },
    /// Controller mode over a log that keeps no epochs ([`LogRead::epoch_log`](crate::LogRead::epoch_log) is `None`).
    #[error("controller mode needs a log that keeps an epoch list and a confirm offset; this log keeps none")]
    NoEpochLog,
    /// Controller mode over a log whose epoch list the protocol cannot hold (out of order, or
    /// a negative epoch).
    #[error("the log's epoch list is invalid: {reason}")]
    InvalidEpochList {
        /// What is wrong with it.
        reason: String,
    },
    /// Controller mode at an epoch below the log's last one: a newer master wrote this log.
    #[error("cannot become master at epoch {epoch}: the log's last epoch is {last}")]
    EpochBehind {
        /// The configured master epoch.
        epoch: i32,
        /// The log's last epoch.
        last: i32,
    },
    /// The log could not record the master epoch, or holds an invalid epoch list.
    #[error("cannot record master epoch {epoch} in the log: {reason}")]
    EpochLog {
        /// The configured master epoch.
        epoch: i32,
        /// The log's error.
        reason: String,
    },
    /// The HA listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}
