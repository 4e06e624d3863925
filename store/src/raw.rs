//! A bare memory-mapped file, for baselines: the benchmarks compare the store and replication
//! with a plain `memcpy` into a mapping, measured in the same run. It uses the store's mapping
//! code, so it needs no `unsafe` of its own.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;

use crate::mmap::{MapWriter, MappedFile, PAGE_SIZE};

/// A file of fixed length, mapped read-write, filled front to back.
#[derive(Debug)]
pub struct RawMap {
    writer: MapWriter,
}

impl RawMap {
    /// Creates (or truncates) `path` to `len` bytes and maps it. With `prefault`, every page is
    /// touched first, so later writes take no page faults.
    pub fn create(path: &Path, len: usize, prefault: bool) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
        file.set_len(len as u64)?;
        let (_, mut writer) = MappedFile::map(file, path.to_path_buf())?;
        if prefault {
            let mut at = 0;
            while at < len {
                writer.seek(at);
                writer.reserve(1)[0] = 0;
                at += PAGE_SIZE;
            }
            writer.seek(0);
        }
        Ok(Self { writer })
    }

    /// The mapping's length.
    pub fn len(&self) -> usize {
        self.writer.remaining() + self.writer.pos()
    }

    /// Whether the mapping is empty (never: empty files cannot be mapped).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes written so far.
    pub fn written(&self) -> usize {
        self.writer.pos()
    }

    /// The next `len` bytes, to fill (for example straight from a socket); then call
    /// [`advance`](Self::advance).
    pub fn reserve(&mut self, len: usize) -> io::Result<&mut [u8]> {
        if len > self.writer.remaining() {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "write past the end of the mapping"));
        }
        Ok(self.writer.reserve(len))
    }

    /// Moves past `len` bytes filled through [`reserve`](Self::reserve).
    pub fn advance(&mut self, len: usize) -> io::Result<()> {
        if len > self.writer.remaining() {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "advance past the end of the mapping"));
        }
        self.writer.advance(len);
        Ok(())
    }

    /// Copies `data` at the write position.
    pub fn write(&mut self, data: &[u8]) -> io::Result<()> {
        self.reserve(data.len())?.copy_from_slice(data);
        self.advance(data.len())
    }
}
