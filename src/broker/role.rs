//! A controller-mode broker's role ([`Role`]) and the state that serializes its changes
//! ([`Roles`]); the changes themselves are `crate::roles`'.

use logship::status::AssignedRole;
use logship_core::autoswitch::BrokerId;
use logship_core::service::coordinator::LocalRole;

/// The role of a controller-mode broker, with what its HA slave connects to: the
/// [`LocalRole`] the failover rules see, plus the master's HA address, which the rules do not
/// need and the slave service does ([`Role::local`] drops it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// No role yet, or between two roles, or after a failed change.
    None,
    /// Master at `epoch`.
    Master {
        /// The master epoch.
        epoch: i32,
    },
    /// Following `master_broker_id` at `master_address` (its HA port), elected at `epoch`.
    Slave {
        /// The master's HA address.
        master_address: String,
        /// The master's broker id.
        master_broker_id: BrokerId,
        /// The master epoch.
        epoch: i32,
    },
}

impl Role {
    /// The role as the failover rules see it.
    pub fn local(&self) -> LocalRole {
        match self {
            Self::None => LocalRole::None,
            Self::Master { epoch } => LocalRole::Master { epoch: *epoch },
            Self::Slave { master_broker_id, epoch, .. } => {
                LocalRole::Slave { master: *master_broker_id, epoch: *epoch }
            }
        }
    }

    /// The role as `/status` and the role-changing calls show it.
    pub fn status(&self) -> AssignedRole {
        let (role, epoch) = match self {
            Self::None => ("NONE", None),
            Self::Master { epoch } => ("MASTER", Some(*epoch)),
            Self::Slave { epoch, .. } => ("SLAVE", Some(*epoch)),
        };
        let (master_address, master_broker_id) = match self {
            Self::Slave { master_address, master_broker_id, .. } => {
                (Some(master_address.clone()), Some(*master_broker_id))
            }
            _ => (None, None),
        };
        AssignedRole { role: role.into(), epoch, master_address, master_broker_id }
    }
}

/// The role state of a controller-mode broker.
pub struct Roles {
    /// This broker's id (`brokerId`).
    pub broker_id: BrokerId,
    /// Serializes role changes; holds the highest epoch given since start.
    change: tokio::sync::Mutex<i32>,
    /// The role now, for status; its receivers learn of each change (the NameServer
    /// registrations, which register again at once as Java's `registerBrokerWhenRoleChange` does).
    current: tokio::sync::watch::Sender<Role>,
}

impl Roles {
    /// No role yet, for broker `broker_id`.
    pub fn new(broker_id: BrokerId) -> Self {
        Self {
            broker_id,
            change: tokio::sync::Mutex::new(-1),
            current: tokio::sync::watch::channel(Role::None).0,
        }
    }

    /// The role now.
    pub fn current(&self) -> Role {
        self.current.borrow().clone()
    }

    /// A receiver that sees every change of role from now on.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<Role> {
        self.current.subscribe()
    }

    /// Records the role a change gave (its receivers learn of it if it differs).
    pub fn set(&self, role: Role) {
        self.current.send_if_modified(|current| {
            let changed = *current != role;
            *current = role;
            changed
        });
    }

    /// Waits for any role change in progress, then holds changes off until the guard drops: a
    /// role change holds it throughout, broker shutdown to stop changes. The guard holds the
    /// highest epoch given since start.
    pub async fn freeze(&self) -> tokio::sync::MutexGuard<'_, i32> {
        self.change.lock().await
    }
}
