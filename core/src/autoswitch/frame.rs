//! The AutoSwitch wire format (RocketMQ 5 controller mode). Every integer is big-endian; the
//! first field of every frame is the sender's `HAConnectionState` ordinal.
//!
//! ```text
//! A  slave → master  handshake  [i32 state=1][i16 syncFromLastFile][i16 asyncLearner][i64 brokerId]
//! B  slave → master  report     [i32 state=2][i64 maxOffset]
//! C  master → slave  handshake  [i32 state=1][i32 bodySize=12·N][i64 maxOffset][i32 lastEpoch]
//!                               N × [i32 epoch][i64 startOffset]
//! D  master → slave  transfer   [i32 state=2][i32 bodySize][i64 offset][i32 epoch][i64 epochStart]
//!                               [i64 confirmOffset] body      (bodySize 0 = heartbeat)
//! ```
//!
//! Both decoders are resumable: the stream may be cut at any byte, they never panic, and an
//! error is sticky and names what was wrong.

use crate::chunks::Chunks;

use bytes::Bytes;

use crate::log::EpochEntry;
use crate::log::Offset;

/// `HAConnectionState.HANDSHAKE.ordinal()`.
pub const STATE_HANDSHAKE: i32 = 1;
/// `HAConnectionState.TRANSFER.ordinal()`.
pub const STATE_TRANSFER: i32 = 2;
/// Length of frame A, the slave's handshake.
pub const HANDSHAKE_REQUEST_LEN: usize = 16;
/// Length of frame B, the slave's report.
pub const REPORT_LEN: usize = 12;
/// Length of frame C's header, before the epoch entries.
pub const HANDSHAKE_REPLY_HEADER_LEN: usize = 20;
/// Length of frame D's header, before the body.
pub const TRANSFER_HEADER_LEN: usize = 36;
/// Length of one epoch entry in frame C.
pub const EPOCH_ENTRY_LEN: usize = 12;
/// The most epoch entries frame C can carry: a Java master's handshake buffer holds 1000.
pub const MAX_HANDSHAKE_EPOCHS: usize = 1000;

/// A malformed AutoSwitch frame.
#[derive(thiserror::Error, Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FrameError {
    /// The state field is neither HANDSHAKE (1) nor TRANSFER (2).
    #[error("frame carries unknown connection state {state}")]
    UnknownState {
        /// The state as sent.
        state: i32,
    },
    /// A header declared a negative body size.
    #[error("frame declares a negative body size ({size})")]
    NegativeSize {
        /// The size as sent.
        size: i32,
    },
    /// A handshake reply's body is not a whole number of 12-byte epoch entries.
    #[error("handshake reply body of {size} bytes is not a multiple of 12")]
    EpochListNotMultiple {
        /// The size as sent.
        size: u32,
    },
    /// A handshake reply carries more epoch entries than a Java peer can hold.
    #[error("handshake reply carries {count} epochs, more than the limit of 1000")]
    TooManyEpochs {
        /// Entries declared.
        count: u32,
    },
    /// A transfer body is larger than this side accepts.
    #[error("transfer body of {len} bytes exceeds the limit of {max} bytes")]
    BodyTooLarge {
        /// The size as sent.
        len: u32,
        /// The configured limit.
        max: u32,
    },
    /// An offset field is negative (Java's `-1` "none" is allowed only where Java sends it).
    #[error("{field} is negative ({value})")]
    NegativeOffset {
        /// Which field.
        field: &'static str,
        /// The value as sent.
        value: i64,
    },
    /// A transfer's offset plus its body size passes `i64::MAX`.
    #[error("transfer at offset {offset} with {len} body bytes ends beyond i64::MAX")]
    EndOverflows {
        /// The frame's offset.
        offset: Offset,
        /// The body size.
        len: u32,
    },
    /// An epoch number is negative.
    #[error("{field} is negative ({value})")]
    NegativeEpoch {
        /// Which field.
        field: &'static str,
        /// The value as sent.
        value: i32,
    },
}

fn offset_field(field: &'static str, value: i64) -> Result<Offset, FrameError> {
    u64::try_from(value).map_err(|_| FrameError::NegativeOffset { field, value })
}

/// Java's `-1` sentinel ("none yet") or a real offset.
fn optional_offset_field(field: &'static str, value: i64) -> Result<Option<Offset>, FrameError> {
    if value == -1 { Ok(None) } else { offset_field(field, value).map(Some) }
}

fn epoch_field(field: &'static str, value: i32) -> Result<i32, FrameError> {
    if value < 0 { Err(FrameError::NegativeEpoch { field, value }) } else { Ok(value) }
}

fn be_i16(b: &[u8]) -> i16 {
    i16::from_be_bytes([b[0], b[1]])
}
fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be_i64(b: &[u8]) -> i64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    i64::from_be_bytes(w)
}

/// Frame A: the slave's handshake.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct HandshakeRequest {
    /// `isSyncFromLastFile`: an empty slave wants only the master's last segment.
    pub sync_from_last_file: bool,
    /// `isAsyncLearner`: the slave replicates but never joins the sync-state-set.
    pub async_learner: bool,
    /// The slave's self-declared broker id.
    pub broker_id: i64,
}

impl HandshakeRequest {
    /// The 16 wire bytes; send them in one write (a Java master decides after 12 bytes).
    pub fn encode(&self) -> [u8; HANDSHAKE_REQUEST_LEN] {
        let mut out = [0u8; HANDSHAKE_REQUEST_LEN];
        out[..4].copy_from_slice(&STATE_HANDSHAKE.to_be_bytes());
        out[4..6].copy_from_slice(&i16::from(self.sync_from_last_file).to_be_bytes());
        out[6..8].copy_from_slice(&i16::from(self.async_learner).to_be_bytes());
        out[8..].copy_from_slice(&self.broker_id.to_be_bytes());
        out
    }
}

/// The 12 wire bytes of frame B, a report acknowledging every byte before `offset`.
///
/// # Panics
/// If `offset` exceeds `i64::MAX` (no log is that long).
pub fn encode_report(offset: Offset) -> [u8; REPORT_LEN] {
    let offset = i64::try_from(offset).expect("offsets fit in Java's long");
    let mut out = [0u8; REPORT_LEN];
    out[..4].copy_from_slice(&STATE_TRANSFER.to_be_bytes());
    out[4..].copy_from_slice(&offset.to_be_bytes());
    out
}

/// A frame from a slave.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SlaveFrame {
    /// Frame A.
    Handshake(HandshakeRequest),
    /// Frame B: the slave holds every byte before this offset.
    Report(Offset),
}

impl SlaveFrame {
    /// The wire bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Self::Handshake(h) => h.encode().to_vec(),
            Self::Report(o) => encode_report(*o).to_vec(),
        }
    }
}

/// Resumable decoder of the slave-to-master stream (frames A and B).
#[derive(Debug, Default, Clone)]
pub struct SlaveFrameDecoder {
    partial: [u8; HANDSHAKE_REQUEST_LEN],
    len: usize,
    error: Option<FrameError>,
}

impl SlaveFrameDecoder {
    /// A decoder at a frame boundary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes the next whole frame, consuming bytes from the front of `data`. Returns `None`
    /// once `data` is used up (a partial frame is kept). After an error, every call returns it.
    pub fn decode(&mut self, data: &mut &[u8]) -> Option<Result<SlaveFrame, FrameError>> {
        if let Some(e) = self.error {
            return Some(Err(e));
        }
        if self.len < 4 {
            let n = (4 - self.len).min(data.len());
            self.fill(data, n);
            if self.len < 4 {
                return None;
            }
        }
        let state = be_i32(&self.partial[..4]);
        let need = match state {
            STATE_HANDSHAKE => HANDSHAKE_REQUEST_LEN,
            STATE_TRANSFER => REPORT_LEN,
            _ => {
                let e = FrameError::UnknownState { state };
                self.error = Some(e);
                return Some(Err(e));
            }
        };
        let n = (need - self.len).min(data.len());
        self.fill(data, n);
        if self.len < need {
            return None;
        }
        self.len = 0;
        let raw = &self.partial[..need];
        let frame = if state == STATE_HANDSHAKE {
            Ok(SlaveFrame::Handshake(HandshakeRequest {
                sync_from_last_file: be_i16(&raw[4..6]) == 1,
                async_learner: be_i16(&raw[6..8]) == 1,
                broker_id: be_i64(&raw[8..16]),
            }))
        } else {
            offset_field("report offset", be_i64(&raw[4..12])).map(SlaveFrame::Report)
        };
        if let Err(e) = frame {
            self.error = Some(e);
        }
        Some(frame)
    }

    /// Bytes of an incomplete frame held back.
    pub fn pending(&self) -> usize {
        self.len
    }

    fn fill(&mut self, data: &mut &[u8], n: usize) {
        self.partial[self.len..self.len + n].copy_from_slice(&data[..n]);
        self.len += n;
        *data = &data[n..];
    }
}

/// Frame C: the master's handshake reply.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HandshakeReply {
    /// The master's max physical offset (its log end).
    pub max_offset: Offset,
    /// The master's last epoch (`-1` when its epoch cache is empty).
    pub last_epoch: i32,
    /// The master's epoch entries, oldest first.
    pub entries: Vec<EpochEntry>,
}

impl HandshakeReply {
    /// The wire bytes.
    ///
    /// # Panics
    /// If there are more than [`MAX_HANDSHAKE_EPOCHS`] entries or an offset exceeds `i64::MAX`.
    pub fn encode(&self) -> Vec<u8> {
        assert!(self.entries.len() <= MAX_HANDSHAKE_EPOCHS, "a Java slave reads at most 1000 epochs");
        let mut out = Vec::with_capacity(HANDSHAKE_REPLY_HEADER_LEN + EPOCH_ENTRY_LEN * self.entries.len());
        out.extend_from_slice(&STATE_HANDSHAKE.to_be_bytes());
        out.extend_from_slice(&((self.entries.len() * EPOCH_ENTRY_LEN) as i32).to_be_bytes());
        out.extend_from_slice(&wire_offset(self.max_offset).to_be_bytes());
        out.extend_from_slice(&self.last_epoch.to_be_bytes());
        for e in &self.entries {
            out.extend_from_slice(&e.epoch.to_be_bytes());
            out.extend_from_slice(&wire_offset(e.start_offset).to_be_bytes());
        }
        out
    }
}

fn wire_offset(o: Offset) -> i64 {
    i64::try_from(o).expect("offsets fit in Java's long")
}

/// Frame D's header.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TransferHeader {
    /// Body length; 0 for a heartbeat.
    pub body_len: u32,
    /// Offset of the first body byte, or the master's next transfer offset for a heartbeat;
    /// `None` for Java's `-1`, sent in heartbeats by a master that has nothing to stream yet.
    pub offset: Option<Offset>,
    /// The epoch the body belongs to.
    pub epoch: i32,
    /// Where that epoch starts.
    pub epoch_start: Offset,
    /// The master's confirmOffset; `None` for Java's `-1`.
    pub confirm_offset: Option<Offset>,
}

impl TransferHeader {
    /// Whether this frame carries no body.
    pub fn is_heartbeat(&self) -> bool {
        self.body_len == 0
    }

    /// The 36 wire bytes.
    pub fn encode(&self) -> [u8; TRANSFER_HEADER_LEN] {
        let opt = |o: Option<Offset>| o.map_or(-1, wire_offset);
        let mut out = [0u8; TRANSFER_HEADER_LEN];
        out[..4].copy_from_slice(&STATE_TRANSFER.to_be_bytes());
        out[4..8].copy_from_slice(&(self.body_len as i32).to_be_bytes());
        out[8..16].copy_from_slice(&opt(self.offset).to_be_bytes());
        out[16..20].copy_from_slice(&self.epoch.to_be_bytes());
        out[20..28].copy_from_slice(&wire_offset(self.epoch_start).to_be_bytes());
        out[28..36].copy_from_slice(&opt(self.confirm_offset).to_be_bytes());
        out
    }
}

/// The header of a master frame, visible before its body arrives.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MasterHeader {
    /// Frame C's header: the body holds `epochs` entries.
    Handshake {
        /// The master's max offset.
        max_offset: Offset,
        /// The master's last epoch.
        last_epoch: i32,
        /// Entries in the body.
        epochs: u32,
    },
    /// Frame D's header.
    Transfer(TransferHeader),
}

impl MasterHeader {
    fn body_len(&self) -> usize {
        match self {
            Self::Handshake { epochs, .. } => *epochs as usize * EPOCH_ENTRY_LEN,
            Self::Transfer(h) => h.body_len as usize,
        }
    }
}

/// A complete master frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MasterFrame {
    /// Frame C.
    Handshake(HandshakeReply),
    /// Frame D, with its raw commit-log bytes (empty for a heartbeat).
    Transfer {
        /// The header.
        header: TransferHeader,
        /// The body.
        body: Bytes,
    },
}

impl MasterFrame {
    /// The wire bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Self::Handshake(h) => h.encode(),
            Self::Transfer { header, body } => {
                let mut v = header.encode().to_vec();
                v.extend_from_slice(body);
                v
            }
        }
    }
}

/// Resumable decoder of the master-to-slave stream (frames C and D).
///
/// Read a header as soon as it is in with [`peek_header`](Self::peek_header) and whole frames
/// with [`decode`](Self::decode). A body inside one received chunk is returned without copying.
#[derive(Debug)]
pub struct MasterFrameDecoder {
    max_body: u32,
    chunks: Chunks,
    header: Option<MasterHeader>,
    error: Option<FrameError>,
}

impl MasterFrameDecoder {
    /// A decoder that refuses transfer bodies larger than `max_body`.
    pub fn new(max_body: u32) -> Self {
        Self { max_body, chunks: Chunks::default(), header: None, error: None }
    }

    /// Adds received bytes.
    pub fn extend(&mut self, data: Bytes) {
        self.chunks.push(data);
    }

    /// Bytes received and not yet returned in a frame.
    pub fn buffered(&self) -> usize {
        self.chunks.len() + self.header.map_or(0, |h| header_len(&h))
    }

    /// The next frame's header once it is in; `Ok(None)` means more bytes are needed. Errors
    /// are sticky.
    pub fn peek_header(&mut self) -> Result<Option<MasterHeader>, FrameError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.header.is_none() && self.chunks.len() >= 4 {
            let mut state = [0u8; 4];
            self.chunks.peek(&mut state);
            let state = i32::from_be_bytes(state);
            let need = match state {
                STATE_HANDSHAKE => HANDSHAKE_REPLY_HEADER_LEN,
                STATE_TRANSFER => TRANSFER_HEADER_LEN,
                _ => return Err(self.fail(FrameError::UnknownState { state })),
            };
            if self.chunks.len() < need {
                return Ok(None);
            }
            let mut raw = [0u8; TRANSFER_HEADER_LEN];
            self.chunks.copy_out(&mut raw[..need]);
            match parse_master_header(&raw[..need], self.max_body) {
                Ok(h) => self.header = Some(h),
                Err(e) => return Err(self.fail(e)),
            }
        }
        Ok(self.header)
    }

    /// The next complete frame; `Ok(None)` means more bytes are needed.
    pub fn decode(&mut self) -> Result<Option<MasterFrame>, FrameError> {
        let Some(header) = self.peek_header()? else { return Ok(None) };
        let len = header.body_len();
        if self.chunks.len() < len {
            return Ok(None);
        }
        self.header = None;
        let body = self.chunks.take(len);
        Ok(Some(match header {
            MasterHeader::Transfer(header) => MasterFrame::Transfer { header, body },
            MasterHeader::Handshake { max_offset, last_epoch, .. } => {
                let mut entries = Vec::with_capacity(len / EPOCH_ENTRY_LEN);
                for raw in body.chunks_exact(EPOCH_ENTRY_LEN) {
                    let epoch = match epoch_field("epoch entry", be_i32(&raw[..4])) {
                        Ok(e) => e,
                        Err(e) => return Err(self.fail(e)),
                    };
                    let start_offset = match offset_field("epoch start offset", be_i64(&raw[4..])) {
                        Ok(o) => o,
                        Err(e) => return Err(self.fail(e)),
                    };
                    entries.push(EpochEntry { epoch, start_offset });
                }
                MasterFrame::Handshake(HandshakeReply { max_offset, last_epoch, entries })
            }
        }))
    }

    fn fail(&mut self, e: FrameError) -> FrameError {
        self.error = Some(e);
        e
    }
}

fn header_len(h: &MasterHeader) -> usize {
    match h {
        MasterHeader::Handshake { .. } => HANDSHAKE_REPLY_HEADER_LEN,
        MasterHeader::Transfer(_) => TRANSFER_HEADER_LEN,
    }
}

fn parse_master_header(raw: &[u8], max_body: u32) -> Result<MasterHeader, FrameError> {
    let state = be_i32(&raw[..4]);
    let size = be_i32(&raw[4..8]);
    let size = u32::try_from(size).map_err(|_| FrameError::NegativeSize { size })?;
    if state == STATE_HANDSHAKE {
        if size % EPOCH_ENTRY_LEN as u32 != 0 {
            return Err(FrameError::EpochListNotMultiple { size });
        }
        let epochs = size / EPOCH_ENTRY_LEN as u32;
        if epochs as usize > MAX_HANDSHAKE_EPOCHS {
            return Err(FrameError::TooManyEpochs { count: epochs });
        }
        let max_offset = offset_field("master max offset", be_i64(&raw[8..16]))?;
        let last_epoch = be_i32(&raw[16..20]);
        if last_epoch < -1 {
            return Err(FrameError::NegativeEpoch { field: "last epoch", value: last_epoch });
        }
        return Ok(MasterHeader::Handshake { max_offset, last_epoch, epochs });
    }
    if size > max_body {
        return Err(FrameError::BodyTooLarge { len: size, max: max_body });
    }
    let offset = be_i64(&raw[8..16]);
    let offset = if size == 0 {
        optional_offset_field("transfer offset", offset)?
    } else {
        Some(offset_field("transfer offset", offset)?)
    };
    let header = TransferHeader {
        body_len: size,
        offset,
        epoch: epoch_field("transfer epoch", be_i32(&raw[16..20]))?,
        epoch_start: offset_field("epoch start offset", be_i64(&raw[20..28]))?,
        confirm_offset: optional_offset_field("confirm offset", be_i64(&raw[28..36]))?,
    };
    if let Some(o) = header.offset {
        if o.checked_add(u64::from(size)).is_none_or(|end| end > i64::MAX as u64) {
            return Err(FrameError::EndOverflows { offset: o, len: size });
        }
    }
    Ok(MasterHeader::Transfer(header))
}
