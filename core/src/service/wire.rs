//! The byte-level halves of a connection that both adapters share: a frame being written with
//! vectored writes, and a read buffer whose reads leave as [`Bytes`] without copying.

use std::io::{self, IoSlice};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};

use crate::log::LogRead;
use crate::service::{FrameHeader, Transmit};

impl Transmit {
    /// The frame to write: the header, and the body read from `log` without copying where the
    /// log allows. A span the log cannot read is an error naming the span; it ends the
    /// connection (the slave reconnects and asks again).
    pub fn resolve<L: LogRead>(&self, log: &L) -> io::Result<Frame> {
        let body = match self.body {
            Some(span) => log.read(span).map_err(|e| io::Error::other(format!("reading {span:?}: {e}")))?,
            None => Bytes::new(),
        };
        Ok(Frame { header: self.header.clone(), body, written: 0 })
    }
}

/// One frame on its way out: the header, then the log bytes, and how much of the two a
/// writer has taken so far. Written with [`poll_write`](Self::poll_write), the one frame
/// writer of both adapters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    header: FrameHeader,
    body: Bytes,
    written: usize,
}

impl Frame {
    /// A frame of `header` and `body`, nothing written yet.
    pub fn new(header: impl Into<FrameHeader>, body: Bytes) -> Self {
        Self { header: header.into(), body, written: 0 }
    }

    /// Header and body length together.
    pub fn total_len(&self) -> usize {
        self.header.len() + self.body.len()
    }

    /// Whether all of it is written (never true for a new frame: a header always goes).
    pub fn is_written(&self) -> bool {
        self.written >= self.total_len()
    }

    /// What is left to write, header part first.
    pub fn unwritten(&self) -> [IoSlice<'_>; 2] {
        let header_len = self.header.len();
        let header = &self.header[self.written.min(header_len)..];
        let body = &self.body[self.written.saturating_sub(header_len).min(self.body.len())..];
        [IoSlice::new(header), IoSlice::new(body)]
    }

    /// Records that a write took `n` more bytes. A write that takes nothing while bytes are
    /// left is [`io::ErrorKind::WriteZero`]: the peer is gone, and waiting would spin.
    pub fn advance(&mut self, n: usize) -> io::Result<()> {
        if n == 0 && !self.is_written() {
            return Err(io::ErrorKind::WriteZero.into());
        }
        self.written = (self.written + n).min(self.total_len());
        Ok(())
    }

    /// Writes what is left through `write` (an adapter's `poll_write_vectored`) until all of it
    /// is out, a write fails, or the writer is not ready. Call again after `Pending`; the
    /// frame remembers what went. The adapter flushes the stream afterwards (a TLS stream may
    /// hold the last record).
    pub fn poll_write<F>(&mut self, cx: &mut Context<'_>, mut write: F) -> Poll<io::Result<()>>
    where
        F: FnMut(&mut Context<'_>, &[IoSlice<'_>]) -> Poll<io::Result<usize>>,
    {
        while !self.is_written() {
            let n = match write(cx, &self.unwritten()) {
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            if let Err(e) = self.advance(n) {
                return Poll::Ready(Err(e));
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// A connection's read buffer: each read lands in the room after the filled bytes and leaves
/// as one [`Bytes`] ([`take`](Self::take)) that shares the allocation, so nothing is copied.
/// The room is refilled to the full size once less than a quarter of it is left.
///
/// Two allocations take turns: a refill reuses the other one once every `Bytes` taken from it
/// is dropped (the receiver usually still holds the last read's tail, a frame not yet whole,
/// so the current one is still shared), and allocates only when both are in use.
#[derive(Debug)]
pub struct ReadBuffer {
    buf: BytesMut,
    /// The allocation of the turn before, kept for reuse.
    other: BytesMut,
    size: usize,
    allocations: u64,
}

impl ReadBuffer {
    /// A buffer that reads up to `size` bytes at a time (at least 1).
    pub fn new(size: usize) -> Self {
        Self { buf: BytesMut::new(), other: BytesMut::new(), size: size.max(1), allocations: 0 }
    }

    /// Room for the next read, zeroed, for a reader that fills a `&mut [u8]`. The bytes it
    /// read are at the start: [`take`](Self::take) them.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.buf.len() < self.size.div_ceil(4) {
            self.buf.clear();
            self.refill();
            self.buf.resize(self.size, 0);
        }
        &mut self.buf
    }

    /// The buffer, empty and with room for the next read in its spare capacity, for a reader
    /// that appends into spare capacity without zeroing it first (tokio's `read_buf`). The
    /// bytes it appended are at the start: [`take`](Self::take) them.
    pub fn unfilled(&mut self) -> &mut BytesMut {
        // Room [`spare`](Self::spare) zeroed is not data: only `take` hands bytes out.
        self.buf.clear();
        if self.buf.capacity() < self.size.div_ceil(4) {
            self.refill();
        }
        &mut self.buf
    }

    /// The `n` bytes the last read put at the start of the room (fewer if `n` is more than the
    /// room).
    pub fn take(&mut self, n: usize) -> Bytes {
        self.buf.split_to(n.min(self.buf.len())).freeze()
    }

    /// How many times a refill had to allocate: the receiver held on to bytes of both
    /// allocations (or it was the first read).
    pub fn allocations(&self) -> u64 {
        self.allocations
    }

    /// Makes the empty `buf` a buffer with room for `size` bytes: the other allocation if
    /// nothing taken from it is alive, else a new one.
    fn refill(&mut self) {
        std::mem::swap(&mut self.buf, &mut self.other);
        if !self.buf.try_reclaim(self.size) {
            self.buf = BytesMut::with_capacity(self.size);
            self.allocations += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read of `n` bytes of `fill` through [`ReadBuffer::unfilled`], as tokio's `read_buf` does.
    fn read(buf: &mut ReadBuffer, n: usize, fill: u8) -> Bytes {
        let room = buf.unfilled();
        assert!(room.capacity() - room.len() >= n, "room for {n} bytes");
        room.extend(std::iter::repeat_n(fill, n));
        buf.take(n)
    }

    #[test]
    fn a_refill_reuses_the_allocation_whose_bytes_were_dropped() {
        let mut buf = ReadBuffer::new(1024);
        // Each read is mostly consumed; the receiver keeps the last bytes (a frame not yet
        // whole) until the next read completes it.
        let mut held = read(&mut buf, 900, 1).slice(800..);
        for round in 0..100u8 {
            let next = read(&mut buf, 900, round);
            assert_eq!(next.len(), 900);
            assert!(next.iter().all(|&b| b == round));
            held = next.slice(800..);
        }
        assert_eq!(held.len(), 100);
        assert_eq!(buf.allocations(), 2, "one allocation per turn, then reuse");
    }

    #[test]
    fn zeroed_room_refills_reuse_too() {
        let mut buf = ReadBuffer::new(1024);
        let mut held = Bytes::new();
        for round in 0..100u8 {
            let room = buf.spare();
            assert_eq!(room.len(), 1024);
            room[..900].fill(round);
            let got = buf.take(900);
            assert!(got.iter().all(|&b| b == round));
            drop(held);
            held = got.slice(800..);
        }
        assert_eq!(buf.allocations(), 2);
    }

    #[test]
    fn many_small_reads_share_one_allocation() {
        let mut buf = ReadBuffer::new(1024);
        let taken: Vec<Bytes> = (0..7).map(|i| read(&mut buf, 100, i)).collect();
        for (i, b) in taken.iter().enumerate() {
            assert!(b.iter().all(|&x| x == i as u8));
        }
        assert_eq!(buf.allocations(), 1);
    }
}
