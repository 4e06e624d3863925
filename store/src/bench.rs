//! Support for this crate's benchmarks: the raw-memcpy baseline they compare the store with.
//! Not a stable API.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use crate::mmap::{MapWriter, MappedFile};

/// A file-backed shared mapping with every page faulted in, written sequentially with plain
/// copies (wrapping around at the end): the fastest a mapped log could possibly take bytes.
#[derive(Debug)]
pub struct MmapTarget {
    writer: MapWriter,
}

impl MmapTarget {
    /// Creates `path` with `len` bytes, maps it and faults in every page for writing.
    pub fn create(path: &Path, len: u64) -> io::Result<Self> {
        let file = File::options().read(true).write(true).create(true).truncate(true).open(path)?;
        file.set_len(len)?;
        let (_map, mut writer) = MappedFile::map(file, path.to_path_buf(), None)?;
        writer.touch_pages(&AtomicBool::new(false));
        Ok(Self { writer })
    }

    /// Copies `data` at the write position (back at the start when it would not fit).
    pub fn copy(&mut self, data: &[u8]) {
        if self.writer.remaining() < data.len() {
            self.writer.seek(0);
        }
        self.writer.write(data);
    }
}
