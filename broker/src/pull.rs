//! `PULL_MESSAGE` (11) and `LITE_PULL_MESSAGE` (361): Java's `PullMessageProcessor` (and 5.x's
//! `DefaultPullMessageResultHandler`).
//!
//! # Order of the checks, and their answers
//!
//! 1. the broker's permission is not readable: `NO_PERMISSION` (5.x `forbiddenType` 1);
//! 2. 5.x: a lite pull with `litePullMessageEnable` off: `NO_PERMISSION`;
//! 3. the group's config cannot be found or created: `SUBSCRIPTION_GROUP_NOT_EXIST`;
//! 4. the group may not consume: `NO_PERMISSION` (2);
//! 5. the topic is unknown: `TOPIC_NOT_EXIST`; not readable: `NO_PERMISSION` (3);
//! 6. the queue id is outside `[0, readQueueNums)`: `SYSTEM_ERROR` (4.9) / `INVALID_PARAMETER` (5.x);
//! 7. with the subscription flag, the header's expression is the filter (an expression that is
//!    not TAG is `SYSTEM_ERROR`, as a Java broker without `enablePropertyFilter` answers);
//!    without it, the group's heartbeat registration: none `SUBSCRIPTION_NOT_EXIST`; a
//!    broadcasting group not allowed to: `NO_PERMISSION` (4); 5.x forbidden to read the topic:
//!    `NO_PERMISSION` (5); no subscription to the topic: `SUBSCRIPTION_NOT_EXIST`; an older
//!    `subVersion` than the pull's: `SUBSCRIPTION_NOT_LATEST`;
//! 8. the read ([`CommitLog::get_message`](logship_store::CommitLog::get_message)), its status
//!    mapped as Java maps it, the remark the status name, and the header's
//!    `suggestWhichBrokerId`, `nextBeginOffset`, `minOffset` and `maxOffset` always present (5.x
//!    adds `topicSysFlag` and `groupSysFlag`). `SUCCESS` carries the stored records as they are
//!    in the commit log ([`PullResponse::messages`], zero-copy spans).
//!
//! After the read, on a first execution with the commit-offset flag, the pull's
//! `commitOffset` is committed (4.9: not on a slave). A `PULL_NOT_FOUND` of a first execution
//! with the suspend flag becomes a [`HeldPull`] (see [`pull_hold`](crate::pull_hold)).
//!
//! # Where logship differs on purpose
//!
//! - A slave serves pulls as a 4.9 slave does (5.x answers `SYSTEM_BUSY` on a slave without
//!   `slaveReadEnable`), and holds them like a master instead of 5.x's immediate
//!   `PULL_RETRY_IMMEDIATELY` to a slave's consumers (as 5.x's `composeResponseHeader` reads):
//!   consumers keep reading from a slave while their master is away, without spinning. (A
//!   5.5.0 slave with `slaveReadEnable` answered a pull at the queue's end without the suspend
//!   flag `PULL_NOT_FOUND`, as logship does: `tests/real_clients_java_broker.rs`.)
//! - A slave's warning for a pull at an offset out of range is logged once per group, topic and
//!   queue per 10 s ([`SlaveOffsetWarnings`]); Java logs each.
//! - A pull is held at most [`ConsumeSettings::max_pull_hold`](crate::consume::ConsumeSettings), and
//!   answered at its deadline, not at the next 5 s tick.
//! - 4.9's `OFFSET_MOVED_EVENT` messages are not written (5.x does not write them either).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use logship_remoting::header::{PullMessageRequestHeader, PullMessageResponseHeader};
use logship_remoting::{EncodeError, RemotingCommand, RequestCode, ResponseCode};
use logship_store::{GetMessageStatus, QueryLine, TagFilter};

use crate::clients::{PullRegistration, is_tag_type};
use crate::consume::{ClientConnection, ConsumeContext, Effects, Now, ServingRole, answer, bad_header};
use crate::names::{self, perm};
use crate::pull_hold::{HeldPull, HoldRefused};
use crate::settings::RocketmqLine;

/// `PullSysFlag` bits.
pub mod sys_flag {
    /// Commit the pull's `commitOffset`.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// Hold the pull if nothing is found.
    pub const SUSPEND: i32 = 0x1 << 1;
    /// The header carries the subscription.
    pub const SUBSCRIPTION: i32 = 0x1 << 2;
    /// A class filter (legacy).
    pub const CLASS_FILTER: i32 = 0x1 << 3;
    /// A lite pull consumer's pull.
    pub const LITE_PULL: i32 = 0x1 << 4;
}

/// 5.x's `ForbiddenType`.
pub mod forbidden_type {
    /// The broker is not readable.
    pub const BROKER: i32 = 1;
    /// The group may not consume.
    pub const GROUP: i32 = 2;
    /// The topic is not readable.
    pub const TOPIC: i32 = 3;
    /// The group may not consume by broadcast.
    pub const BROADCASTING_DISABLE: i32 = 4;
    /// The group is forbidden to read the topic.
    pub const SUBSCRIPTION: i32 = 5;
}

/// `PermName.INDEX_PERM_READ`: the bit of the forbidden table that forbids reading.
const INDEX_PERM_READ: u32 = 2;

/// The window in which a slave logs an out-of-range pull of one queue at most once.
pub const SLAVE_OFFSET_WARNING_WINDOW: Duration = Duration::from_secs(10);

/// Queues whose out-of-range warnings are tracked at most; beyond, new queues share one entry.
const SLAVE_OFFSET_WARNING_QUEUES: usize = 4096;

/// Rate limit of a slave's "offset out of range; not corrected" warning: a consumer told
/// `PULL_RETRY_IMMEDIATELY` pulls again at once, so without a limit the line comes as often as
/// it pulls (once about 120 a second). Each `(group, topic, queue)` is logged at most once per
/// [`SLAVE_OFFSET_WARNING_WINDOW`], the line counting the warnings left out since.
#[derive(Debug, Default)]
pub struct SlaveOffsetWarnings {
    queues: Mutex<HashMap<(String, String, i32), Window>>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    logged_at: Instant,
    suppressed: u64,
}

impl SlaveOffsetWarnings {
    /// Whether to log the warning for `(group, topic, queue_id)` at `now`: `Some(left out
    /// since the last line)` to log it, `None` to leave it out (and count it).
    pub fn admit(&self, group: &str, topic: &str, queue_id: i32, now: Instant) -> Option<u64> {
        let mut queues = self.queues.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut key = (group.to_string(), topic.to_string(), queue_id);
        if !queues.contains_key(&key) && queues.len() >= SLAVE_OFFSET_WARNING_QUEUES {
            queues.retain(|_, w| now.saturating_duration_since(w.logged_at) < SLAVE_OFFSET_WARNING_WINDOW);
            if queues.len() >= SLAVE_OFFSET_WARNING_QUEUES {
                // Every tracked queue warned within the window: the rest share one entry.
                key = (String::new(), String::new(), -1);
            }
        }
        match queues.get_mut(&key) {
            Some(w) if now.saturating_duration_since(w.logged_at) < SLAVE_OFFSET_WARNING_WINDOW => {
                w.suppressed += 1;
                None
            }
            Some(w) => {
                let suppressed = w.suppressed;
                *w = Window { logged_at: now, suppressed: 0 };
                Some(suppressed)
            }
            None => {
                queues.insert(key, Window { logged_at: now, suppressed: 0 });
                Some(0)
            }
        }
    }
}

/// Whether a pull runs for the first time or is re-run after being held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    /// Arrived from the client: may be held and commits the offset.
    First,
    /// Woken from the hold table: answers whatever it finds, neither holds nor commits.
    Rerun,
}

/// A pull's answer: the command (header and remark) and, for `SUCCESS`, the stored messages
/// to send as its body without copying them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullResponse {
    /// The response, without a body.
    pub command: RemotingCommand,
    /// The body: each message's stored bytes, in queue order.
    pub messages: Vec<Bytes>,
}

impl PullResponse {
    fn plain(command: RemotingCommand) -> Self {
        Self { command, messages: Vec::new() }
    }

    /// The body's length.
    pub fn body_len(&self) -> usize {
        self.messages.iter().map(Bytes::len).sum()
    }

    /// Appends the frame's head (length, header) to `dst`, counting the messages, which the
    /// caller writes after it as they are (a vectored write).
    pub fn encode_head(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        self.command.encode_head_for_body(dst, self.body_len())
    }

    /// The response with the messages copied into its body, for a writer that wants one
    /// buffer.
    pub fn into_command(self) -> RemotingCommand {
        let Self { mut command, messages } = self;
        if !messages.is_empty() {
            let mut body = BytesMut::with_capacity(messages.iter().map(Bytes::len).sum());
            for m in &messages {
                body.extend_from_slice(m);
            }
            command.body = body.freeze();
        }
        command
    }
}

/// What to do with a pull.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum PullOutcome {
    /// Send this answer (on the request's connection, unless the request is one-way).
    Respond(PullResponse),
    /// Hold the pull ([`PullHoldTable::hold`](crate::pull_hold::PullHoldTable::hold)).
    Hold(Box<HeldPull>),
}

/// A pull's outcome and side effects.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct PullReply {
    /// The outcome.
    pub outcome: PullOutcome,
    /// The side effects (a group created by the pull).
    pub effects: Effects,
}

/// The answer to a pull the hold table refused: `SYSTEM_BUSY`, naming the bound (clients
/// back off and pull again, as from 5.x's flow control).
pub fn hold_refused(refused: &HoldRefused) -> PullResponse {
    PullResponse::plain(answer(
        &refused.pull.request,
        ResponseCode::SYSTEM_BUSY,
        format!("[PULL_HOLD_FULL]system busy, start flow control for a while: {}", refused.reason),
    ))
}

struct Early {
    code: ResponseCode,
    remark: String,
    forbidden: Option<i32>,
}

fn early(code: ResponseCode, remark: impl Into<String>) -> Early {
    Early { code, remark: remark.into(), forbidden: None }
}

fn forbidden(kind: i32, remark: impl Into<String>) -> Early {
    Early { code: ResponseCode::NO_PERMISSION, remark: remark.into(), forbidden: Some(kind) }
}

/// Runs a pull (see the [module docs](self)).
pub(crate) fn process_pull(
    ctx: &ConsumeContext<'_>,
    conn: &ClientConnection,
    request: &RemotingCommand,
    execution: Execution,
    now: Now,
) -> PullReply {
    let mut effects = Effects::default();
    let outcome = match run(ctx, conn, request, execution, now, &mut effects) {
        Ok(outcome) => outcome,
        Err(e) => {
            let mut response = answer(request, e.code, e.remark);
            if let (Some(kind), RocketmqLine::V5) = (e.forbidden, ctx.settings.line) {
                response.ext_fields.insert("forbiddenType".into(), kind.to_string());
            }
            PullOutcome::Respond(PullResponse::plain(response))
        }
    };
    PullReply { outcome, effects }
}

fn run(
    ctx: &ConsumeContext<'_>,
    conn: &ClientConnection,
    request: &RemotingCommand,
    execution: Execution,
    now: Now,
    effects: &mut Effects,
) -> Result<PullOutcome, Early> {
    let s = ctx.settings;
    let v5 = s.line == RocketmqLine::V5;
    let header: PullMessageRequestHeader = match request.decode_header() {
        Ok(h) => h,
        Err(e) => return Ok(PullOutcome::Respond(PullResponse::plain(bad_header(request, &e)))),
    };
    let group = header.consumer_group.as_str();
    let topic = header.topic.as_str();
    if !perm::is_readable(s.broker_permission) {
        return Err(forbidden(
            forbidden_type::BROKER,
            format!("the broker[{}] pulling message is forbidden", s.broker_ip1),
        ));
    }
    if v5 && request.request_code() == RequestCode::LITE_PULL_MESSAGE && !s.lite_pull_message_enable {
        return Err(forbidden(
            forbidden_type::BROKER,
            format!("the broker[{}] for lite pull consumer is forbidden", s.broker_ip1),
        ));
    }
    let Some((group_config, created)) =
        ctx.metadata.groups.find_subscription_group_config(group, now.wall_ms)
    else {
        return Err(early(
            ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
            format!("subscription group [{group}] does not exist, {}", s.faq_suffix()),
        ));
    };
    effects.groups_created |= created;
    if !group_config.consume_enable {
        return Err(forbidden(forbidden_type::GROUP, format!("subscription group no permission, {group}")));
    }
    let flags = header.sys_flag;
    let has = |bit: i32| flags & bit != 0;
    let Some(topic_config) = ctx.metadata.topics.select(topic) else {
        tracing::warn!(topic, group, addr = %conn.remote_addr, "pull of an unknown topic");
        return Err(early(
            ResponseCode::TOPIC_NOT_EXIST,
            format!("topic[{topic}] not exist, apply first please! {}", s.faq_suffix()),
        ));
    };
    if !perm::is_readable(topic_config.perm) {
        return Err(forbidden(
            forbidden_type::TOPIC,
            format!("the topic[{topic}] pulling message is forbidden"),
        ));
    }
    let queue_id = header.queue_id;
    if queue_id < 0 || queue_id >= topic_config.read_queue_nums {
        let text = format!(
            "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] consumer:[{}]",
            topic_config.read_queue_nums,
            conn.java_remote_address()
        );
        tracing::warn!(%text, "pull of an illegal queue");
        return Err(early(s.invalid_parameter_code(), text));
    }
    let not_supported = |kind: &str| {
        early(
            ResponseCode::SYSTEM_ERROR,
            format!("The broker does not support consumer to filter message by {kind}"),
        )
    };
    let filter = if has(sys_flag::SUBSCRIPTION) {
        let kind = header.expression_type.as_deref();
        if !is_tag_type(kind) {
            return Err(not_supported(kind.unwrap_or_default()));
        }
        TagFilter::parse(header.subscription.as_deref().unwrap_or(""))
    } else {
        let faq = s.faq_suffix();
        match ctx.clients.pull_registration(group, topic) {
            PullRegistration::NoGroup => {
                tracing::warn!(group, "pull from a group that sent no heartbeat here");
                return Err(early(
                    ResponseCode::SUBSCRIPTION_NOT_EXIST,
                    format!("the consumer's group info not exist{faq}"),
                ));
            }
            PullRegistration::Group { broadcasting, subscription } => {
                if broadcasting && !group_config.consume_broadcast_enable {
                    return Err(forbidden(
                        forbidden_type::BROADCASTING_DISABLE,
                        format!("the consumer group[{group}] can not consume by broadcast way"),
                    ));
                }
                if v5 && ctx.metadata.groups.forbidden(group, topic) & (1 << INDEX_PERM_READ) != 0 {
                    return Err(forbidden(
                        forbidden_type::SUBSCRIPTION,
                        format!("the consumer group[{group}] is forbidden for topic[{topic}]"),
                    ));
                }
                let Some(sub) = subscription else {
                    tracing::warn!(group, topic, "pull of a topic the group does not subscribe");
                    return Err(early(
                        ResponseCode::SUBSCRIPTION_NOT_EXIST,
                        format!("the consumer's subscription not exist{faq}"),
                    ));
                };
                if sub.data.sub_version < header.sub_version {
                    tracing::warn!(group, topic, "pull with a newer subscription than the heartbeat's");
                    return Err(early(
                        ResponseCode::SUBSCRIPTION_NOT_LATEST,
                        "the consumer's subscription not latest",
                    ));
                }
                if !sub.is_tag_type() {
                    return Err(not_supported(sub.data.expression_type.as_deref().unwrap_or_default()));
                }
                sub.filter
            }
        }
    };

    let slave = ctx.role == ServingRole::Slave;
    let mut options = s.get_message.clone();
    options.line = match s.line {
        RocketmqLine::V4_9 => QueryLine::V4_9,
        _ => QueryLine::V5,
    };
    options.correct_next_offset = !slave || s.offset_check_in_slave;
    let max_msg_nums = u32::try_from(header.max_msg_nums).unwrap_or(0);
    let result =
        match ctx.store.get_message(topic, queue_id, header.queue_offset, max_msg_nums, &filter, &options) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(topic, queue_id, error = %e, "pull read failed");
                return Err(early(ResponseCode::SYSTEM_ERROR, "store getMessage return null"));
            }
        };

    let mut code = match result.status {
        GetMessageStatus::Found => ResponseCode::SUCCESS,
        GetMessageStatus::MessageWasRemoving | GetMessageStatus::NoMatchedMessage => {
            ResponseCode::PULL_RETRY_IMMEDIATELY
        }
        GetMessageStatus::NoMatchedLogicQueue | GetMessageStatus::NoMessageInQueue => {
            if header.queue_offset != 0 {
                ResponseCode::PULL_OFFSET_MOVED
            } else {
                ResponseCode::PULL_NOT_FOUND
            }
        }
        GetMessageStatus::OffsetFoundNull | GetMessageStatus::OffsetOverflowOne => {
            ResponseCode::PULL_NOT_FOUND
        }
        GetMessageStatus::OffsetOverflowBadly | GetMessageStatus::OffsetTooSmall => {
            ResponseCode::PULL_OFFSET_MOVED
        }
        _ => ResponseCode::PULL_NOT_FOUND,
    };
    let mut suggest = if s.slave_read_enable {
        if result.suggest_pulling_from_slave {
            group_config.which_broker_when_consume_slowly
        } else {
            group_config.broker_id
        }
    } else {
        names::MASTER_ID
    };
    if code == ResponseCode::PULL_OFFSET_MOVED {
        if slave && !s.offset_check_in_slave {
            // A slave does not correct offsets: the consumer retries, from its master.
            suggest = group_config.broker_id;
            code = ResponseCode::PULL_RETRY_IMMEDIATELY;
            // A consumer retries at once, so this comes as often as it pulls: once per queue
            // and window, with how many were left out since.
            if let Some(suppressed) = ctx.slave_offset_warnings.admit(group, topic, queue_id, now.instant) {
                tracing::warn!(
                    topic,
                    queue_id,
                    group,
                    offset = header.queue_offset,
                    suppressed,
                    "offset out of range on a slave; not corrected"
                );
            }
        } else {
            tracing::warn!(
                topic,
                queue_id,
                group,
                offset = header.queue_offset,
                next = result.next_begin_offset,
                status = result.status.as_str(),
                "pull offset corrected"
            );
        }
    }

    if execution == Execution::First && has(sys_flag::COMMIT_OFFSET) && (v5 || !slave) {
        ctx.metadata.offsets.commit_offset(group, topic, queue_id, header.commit_offset, now.wall_ms);
    }

    if code == ResponseCode::PULL_NOT_FOUND && execution == Execution::First && has(sys_flag::SUSPEND) {
        let hold_ms =
            if s.long_polling_enable { header.suspend_timeout_millis } else { s.short_polling_time_mills };
        let hold = Duration::from_millis(u64::try_from(hold_ms).unwrap_or(0)).min(s.max_pull_hold);
        return Ok(PullOutcome::Hold(Box::new(HeldPull {
            connection: conn.id,
            request: request.clone(),
            topic: topic.to_string(),
            queue_id,
            offset: header.queue_offset,
            filter,
            deadline: now.instant + hold,
        })));
    }

    let mut response_header = PullMessageResponseHeader::new(
        suggest,
        result.next_begin_offset,
        result.min_offset,
        result.max_offset,
    );
    if v5 {
        response_header.topic_sys_flag = Some(topic_config.topic_sys_flag);
        response_header.group_sys_flag = Some(group_config.group_sys_flag);
    }
    let command = RemotingCommand::response_to(request, code)
        .with_remark(result.status.as_str())
        .with_header(&response_header);
    let messages = if code == ResponseCode::SUCCESS {
        result.messages.into_iter().map(|m| m.bytes).collect()
    } else {
        Vec::new()
    };
    Ok(PullOutcome::Respond(PullResponse { command, messages }))
}
