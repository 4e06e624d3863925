//! Support for this crate's benchmarks: the raw-memcpy baselines they compare the store with.
//! Not a stable API.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use crate::mmap::{MapWriter, MappedFile};

/// A file-backed shared mapping written sequentially with plain copies.
#[derive(Debug)]
pub struct MmapTarget {
    path: PathBuf,
    len: u64,
    prefault: bool,
    writer: MapWriter,
}

impl MmapTarget {
    /// A mapping of `len` bytes with every page faulted in for writing, reused in a ring: the
    /// fastest a mapped log could possibly take bytes.
    pub fn prefaulted(path: &Path, len: u64) -> io::Result<Self> {
        Self::create(path, len, true)
    }

    /// A mapping of fresh (never touched) file pages, replaced by a new file when full: what
    /// writing a new segment costs without preallocation.
    pub fn fresh(path: &Path, len: u64) -> io::Result<Self> {
        Self::create(path, len, false)
    }

    fn create(path: &Path, len: u64, prefault: bool) -> io::Result<Self> {
        let writer = Self::map(path, len, prefault)?;
        Ok(Self { path: path.to_path_buf(), len, prefault, writer })
    }

    fn map(path: &Path, len: u64, prefault: bool) -> io::Result<MapWriter> {
        let _ = std::fs::remove_file(path);
        let file = File::options().read(true).write(true).create(true).truncate(true).open(path)?;
        file.set_len(len)?;
        let (_map, mut writer) = MappedFile::map(file, path.to_path_buf(), None)?;
        if prefault {
            writer.touch_pages(&AtomicBool::new(false));
        }
        Ok(writer)
    }

    /// Copies `data` at the write position; when it does not fit, starts over at the beginning
    /// (pre-faulted) or in a new file (fresh).
    pub fn copy(&mut self, data: &[u8]) -> io::Result<()> {
        if self.writer.remaining() < data.len() {
            if self.prefault {
                self.writer.seek(0);
            } else {
                self.writer = Self::map(&self.path, self.len, false)?;
            }
        }
        self.writer.write(data);
        Ok(())
    }
}
