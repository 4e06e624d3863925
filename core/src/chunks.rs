//! The byte queue under the resumable decoders: received chunks, kept without copying until a
//! frame takes them.

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};

/// Received chunks, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Chunks {
    queue: VecDeque<Bytes>,
    // Invariant: len == the sum of the chunks' lengths; no chunk is empty.
    len: usize,
}

impl Chunks {
    /// Appends a received chunk (an empty one changes nothing).
    pub(crate) fn push(&mut self, data: Bytes) {
        if !data.is_empty() {
            self.len += data.len();
            self.queue.push_back(data);
        }
    }

    /// Bytes held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies the first `dst.len()` bytes into `dst` and keeps them. The caller checked that
    /// at least that many are held.
    pub(crate) fn peek(&self, dst: &mut [u8]) {
        let mut filled = 0;
        for chunk in &self.queue {
            if filled == dst.len() {
                break;
            }
            let n = chunk.len().min(dst.len() - filled);
            dst[filled..filled + n].copy_from_slice(&chunk[..n]);
            filled += n;
        }
        assert_eq!(filled, dst.len(), "peek of more bytes than held");
    }

    /// Moves the first `dst.len()` bytes into `dst`. The caller checked that at least that many
    /// are held.
    pub(crate) fn copy_out(&mut self, dst: &mut [u8]) {
        self.peek(dst);
        self.advance(dst.len());
    }

    /// Takes the first `len` bytes: without copying when one chunk holds them, else copied once.
    /// The caller checked that at least that many are held.
    pub(crate) fn take(&mut self, len: usize) -> Bytes {
        if len == 0 {
            return Bytes::new();
        }
        let front = self.queue.front_mut().expect("take of more bytes than held");
        if front.len() >= len {
            let taken = front.split_to(len);
            if front.is_empty() {
                self.queue.pop_front();
            }
            self.len -= len;
            return taken;
        }
        let mut taken = BytesMut::with_capacity(len);
        while taken.len() < len {
            let front = self.queue.front().expect("take of more bytes than held");
            let n = front.len().min(len - taken.len());
            taken.extend_from_slice(&front[..n]);
            self.advance_front(n);
        }
        taken.freeze()
    }

    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let front = self.queue.front().expect("advance past the bytes held").len().min(n);
            self.advance_front(front);
            n -= front;
        }
    }

    /// Drops `n` bytes of the front chunk, `n` at most its length.
    fn advance_front(&mut self, n: usize) {
        let front = self.queue.front_mut().expect("advance of an empty queue");
        if n == front.len() {
            self.queue.pop_front();
        } else {
            front.advance(n);
        }
        self.len -= n;
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::Chunks;

    fn held(parts: &[&'static [u8]]) -> Chunks {
        let mut chunks = Chunks::default();
        for part in parts {
            chunks.push(Bytes::from_static(part));
        }
        chunks
    }

    #[test]
    fn bytes_across_chunks_come_out_in_order_and_the_count_follows() {
        let mut chunks = held(&[b"ab", b"", b"cde", b"f"]);
        assert_eq!(chunks.len(), 6);
        let mut first = [0u8; 3];
        chunks.peek(&mut first);
        assert_eq!(&first, b"abc");
        assert_eq!(chunks.len(), 6);
        chunks.copy_out(&mut first);
        assert_eq!(&first, b"abc");
        assert_eq!(chunks.take(3), Bytes::from_static(b"def"));
        assert_eq!(chunks.len(), 0);
    }

    #[test]
    fn a_body_inside_one_chunk_is_taken_without_copying() {
        let data = Bytes::from_static(b"header-body");
        let mut chunks = Chunks::default();
        chunks.push(data.clone());
        let mut header = [0u8; 7];
        chunks.copy_out(&mut header);
        let body = chunks.take(4);
        assert_eq!(body.as_ptr(), data[7..].as_ptr());
        assert_eq!(chunks.take(0), Bytes::new());
    }
}
