//! Fixed-size files named by their 20-digit start offset (commit-log segments and consume-queue
//! files), and the table of mapped commit-log segments.

use std::collections::VecDeque;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::error::{IoContext, StoreError};
use crate::mmap::{MapWriter, MappedFile};

/// The file name for a file starting at `start` (RocketMQ `UtilAll.offset2FileName`).
pub(crate) fn file_name(start: u64) -> String {
    format!("{start:020}")
}

/// The start offset a file name encodes, if it is exactly 20 digits.
pub(crate) fn parse_file_name(name: &str) -> Option<u64> {
    (name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit())).then(|| name.parse().ok()).flatten()
}

/// Fsyncs a directory, so that creations, renames and deletions in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

/// Lists the files of `dir` that are named by a start offset, sorted, after checking that each
/// has `file_size` bytes, starts at a multiple of it, and that none is missing in between.
/// Leftover `*.tmp` files from an interrupted creation are deleted; other names are ignored.
pub(crate) fn list_files(
    dir: &Path,
    file_size: u64,
    field: &'static str,
) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut files = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(StoreError::io(dir, e)),
    };
    let mut removed_tmp = false;
    for entry in entries {
        let entry = entry.at(dir)?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".tmp") && parse_file_name(name.trim_end_matches(".tmp")).is_some() {
            tracing::warn!(path = %path.display(), "removing a file left by an interrupted creation");
            fs::remove_file(&path).at(&path)?;
            removed_tmp = true;
            continue;
        }
        let Some(start) = parse_file_name(&name) else {
            tracing::debug!(path = %path.display(), "ignoring a file that is not named by an offset");
            continue;
        };
        let actual = entry.metadata().at(&path)?.len();
        if actual != file_size {
            return Err(StoreError::FileSizeMismatch { path, field, expected: file_size, actual });
        }
        if start % file_size != 0 {
            return Err(StoreError::MisalignedFile { path, start, file_size });
        }
        files.push((start, path));
    }
    if removed_tmp {
        sync_dir(dir)?;
    }
    files.sort();
    for pair in files.windows(2) {
        let expected = pair[0].0 + file_size;
        if pair[1].0 != expected {
            return Err(StoreError::FileGap { dir: dir.to_path_buf(), expected, found: pair[1].1.clone() });
        }
    }
    Ok(files)
}

/// Creates the zero-filled file for `start` in `dir` and maps it. The file is created under a
/// temporary name, sized, then renamed, so a crash never leaves a file of the wrong size under a
/// real name. With `sync`, the directory is fsynced so the new name is durable; otherwise the
/// caller syncs it before relying on the file's durability.
pub(crate) fn create_file(
    dir: &Path,
    start: u64,
    size: u64,
    sync: bool,
    lock: Option<&Arc<File>>,
) -> Result<(Arc<MappedFile>, MapWriter), StoreError> {
    create(dir, start, size, sync, lock, true)
}

/// [`create_file`] without reserving the file's blocks: its writer reserves them as it goes
/// ([`MapWriter::reserve_ahead`]). For consume-queue files, which are written an entry at a time
/// and would otherwise hold their full size on disk from the start.
pub(crate) fn create_sparse_file(
    dir: &Path,
    start: u64,
    size: u64,
    sync: bool,
    lock: Option<&Arc<File>>,
) -> Result<(Arc<MappedFile>, MapWriter), StoreError> {
    create(dir, start, size, sync, lock, false)
}

fn create(
    dir: &Path,
    start: u64,
    size: u64,
    sync: bool,
    lock: Option<&Arc<File>>,
    reserve: bool,
) -> Result<(Arc<MappedFile>, MapWriter), StoreError> {
    let path = dir.join(file_name(start));
    if path.exists() {
        return Err(StoreError::io(
            &path,
            std::io::Error::new(std::io::ErrorKind::AlreadyExists, "file already exists"),
        ));
    }
    let tmp = dir.join(format!("{}.tmp", file_name(start)));
    let file = File::options().read(true).write(true).create(true).truncate(true).open(&tmp).at(&tmp)?;
    file.set_len(size).at(&tmp)?;
    // Reserve every block before any write through the mapping, so a full disk is an error here
    // and never a SIGBUS in a writer.
    if reserve {
        if let Err(e) = crate::mmap::reserve(&file, 0, size) {
            drop(file);
            let _ = fs::remove_file(&tmp);
            return Err(reserve_error(&path, size, e));
        }
    }
    fs::rename(&tmp, &path).at(&path)?;
    if sync {
        sync_dir(dir)?;
    }
    let (map, mut writer) = map_file(file, path.clone(), lock).at(&path)?;
    if reserve {
        writer.mark_reserved();
    }
    Ok((map, writer))
}

/// Maps `file`. Commit-log segments (the mappings that take the store's `lock`) are written
/// through their descriptor ([`MappedFile::map_written_through`]: a write fault into a new page
/// zero-fills the whole read-ahead window around it); consume-queue files, written 20 bytes at
/// a time, through the mapping.
fn map_file(
    file: File,
    path: PathBuf,
    lock: Option<&Arc<File>>,
) -> std::io::Result<(Arc<MappedFile>, MapWriter)> {
    match lock {
        Some(lock) => MappedFile::map_written_through(file, path, Some(Arc::clone(lock))),
        None => MappedFile::map(file, path, None),
    }
}

/// Replaces the file for `start` in `dir` by a copy of its first `keep` bytes, zero-filled to
/// `size`, and maps the copy; its writer is positioned (and everything before it published) at
/// `keep`. The copy is made under a temporary name (an in-kernel copy), fsynced and renamed over
/// the old file, and the directory fsynced, so a crash leaves the old file or the new one.
///
/// The old file is never written: published bytes stay immutable for every view of its mapping
/// that is still alive (spans handed out before a truncation keep reading the old bytes).
pub(crate) fn replace_with_prefix(
    dir: &Path,
    start: u64,
    keep: u64,
    size: u64,
    reserve: bool,
    lock: Option<&Arc<File>>,
) -> Result<(Arc<MappedFile>, MapWriter), StoreError> {
    let path = dir.join(file_name(start));
    let tmp = dir.join(format!("{}.tmp", file_name(start)));
    let src = File::open(&path).at(&path)?;
    let mut dst = File::options().read(true).write(true).create(true).truncate(true).open(&tmp).at(&tmp)?;
    let copied = std::io::copy(&mut std::io::Read::take(&src, keep), &mut dst).at(&tmp)?;
    if copied != keep {
        let e = std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("copied {copied} of {keep} bytes"),
        );
        return Err(StoreError::io(&path, e));
    }
    dst.set_len(size).at(&tmp)?;
    if reserve {
        if let Err(e) = crate::mmap::reserve(&dst, 0, size) {
            drop(dst);
            let _ = fs::remove_file(&tmp);
            return Err(reserve_error(&path, size, e));
        }
    }
    dst.sync_all().at(&tmp)?;
    fs::rename(&tmp, &path).at(&path)?;
    sync_dir(dir)?;
    let (map, mut writer) = map_file(dst, path.clone(), lock).at(&path)?;
    if reserve {
        writer.mark_reserved();
    }
    writer.seek(keep as usize);
    writer.publish();
    Ok((map, writer))
}

/// Reserves the blocks of the next `len` bytes of `writer`'s file (see
/// [`MapWriter::reserve_ahead`]), as a [`StoreError::DiskFull`] when the disk is full.
pub(crate) fn reserve_ahead(writer: &mut MapWriter, len: usize) -> Result<(), StoreError> {
    /// Consume-queue files reserve 64 KiB (3,276 entries) at a time.
    const STEP: usize = 64 * 1024;
    writer.reserve_ahead(len, STEP).map_err(|e| reserve_error(writer.file().path(), STEP.max(len) as u64, e))
}

/// The error for a failed reservation of `needed` bytes for `path`: [`StoreError::DiskFull`] when
/// the file system is out of space.
pub(crate) fn reserve_error(path: &Path, needed: u64, e: std::io::Error) -> StoreError {
    if e.raw_os_error() == Some(libc::ENOSPC) || e.raw_os_error() == Some(libc::EDQUOT) {
        let dir = path.parent().unwrap_or(path);
        let available = crate::mmap::available_bytes(dir).unwrap_or(0);
        StoreError::DiskFull { path: path.to_path_buf(), needed, available }
    } else {
        StoreError::io(path, e)
    }
}

/// Opens and maps an existing file (see [`MappedFile::map`] for `lock`). Nothing is reserved:
/// a writer of it reserves ahead of itself ([`reserve_ahead`]; commit-log recovery reserves the
/// active segment).
pub(crate) fn open_file(
    path: &Path,
    lock: Option<&Arc<File>>,
) -> Result<(Arc<MappedFile>, MapWriter), StoreError> {
    let file = File::options().read(true).write(true).open(path).at(path)?;
    map_file(file, path.to_path_buf(), lock).at(path)
}

/// The segment being written.
#[derive(Debug)]
pub(crate) struct ActiveSegment {
    pub(crate) base: u64,
    pub(crate) writer: MapWriter,
    /// Whether the blocks from the write position to the segment end are reserved (a write into
    /// an unreserved hole on a full disk would raise SIGBUS).
    pub(crate) reserved: bool,
}

/// The published log as the commit log and its worker threads share it: the segments, the
/// bounds and progress offsets, and the flag that stops the threads. Each worker gets this (and
/// its own state), never the commit log itself.
#[derive(Debug)]
pub(crate) struct LogView {
    /// The size of every segment.
    pub(crate) segment_size: u64,
    /// The mapped segments.
    pub(crate) segments: RwLock<SegmentTable>,
    /// One past the last published byte (Release on write, Acquire on read).
    pub(crate) end: AtomicU64,
    /// The oldest offset held.
    pub(crate) min: AtomicU64,
    /// One past the last durable byte.
    pub(crate) flushed: AtomicU64,
    /// Mirror of the dispatcher's progress, for lock-free reads.
    pub(crate) dispatched: AtomicU64,
    /// Tells the background threads to stop.
    pub(crate) stop: AtomicBool,
}

impl LogView {
    /// `[min, max)`.
    pub(crate) fn bounds(&self) -> logship_core::LogBounds {
        let max = self.end.load(Ordering::Acquire);
        logship_core::LogBounds { min: self.min.load(Ordering::Acquire).min(max), max }
    }
}

/// One mapped commit-log segment.
#[derive(Debug)]
pub(crate) struct Segment {
    /// The offset of its first byte.
    pub(crate) base: u64,
    /// The mapping.
    pub(crate) map: Arc<MappedFile>,
}

impl Segment {
    pub(crate) fn path(&self) -> &Path {
        self.map.path()
    }
}

/// The mapped segments, oldest first, contiguous.
#[derive(Debug)]
pub(crate) struct SegmentTable {
    size: u64,
    segs: VecDeque<Arc<Segment>>,
}

impl SegmentTable {
    pub(crate) fn new(size: u64) -> Self {
        Self { size, segs: VecDeque::new() }
    }

    /// The segment holding `offset`.
    pub(crate) fn find(&self, offset: u64) -> Option<&Arc<Segment>> {
        let first = self.segs.front()?.base;
        if offset < first {
            return None;
        }
        self.segs.get(((offset - first) / self.size) as usize)
    }

    pub(crate) fn first(&self) -> Option<&Arc<Segment>> {
        self.segs.front()
    }

    pub(crate) fn push(&mut self, seg: Arc<Segment>) {
        debug_assert!(
            self.segs.back().is_none_or(|l| l.base + self.size == seg.base),
            "segments must be contiguous"
        );
        self.segs.push_back(seg);
    }

    pub(crate) fn pop_first(&mut self) -> Option<Arc<Segment>> {
        self.segs.pop_front()
    }

    /// Removes the newest segment.
    pub(crate) fn pop_last(&mut self) -> Option<Arc<Segment>> {
        self.segs.pop_back()
    }

    /// The newest segment.
    pub(crate) fn last(&self) -> Option<&Arc<Segment>> {
        self.segs.back()
    }

    pub(crate) fn len(&self) -> usize {
        self.segs.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Segment>> {
        self.segs.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_twenty_digit_offsets() {
        assert_eq!(file_name(1_073_741_824), "00000000001073741824");
        assert_eq!(parse_file_name("00000000001073741824"), Some(1 << 30));
        assert_eq!(parse_file_name("0000000000107374182"), None);
        assert_eq!(parse_file_name("0000000000107374182x"), None);
    }

    #[test]
    fn listing_checks_size_alignment_and_gaps() {
        let dir = tempfile::tempdir().unwrap();
        let mk = |start: u64, len: u64| {
            File::create(dir.path().join(file_name(start))).unwrap().set_len(len).unwrap()
        };
        mk(0, 4096);
        mk(4096, 4096);
        File::create(dir.path().join("00000000000000008192.tmp")).unwrap();
        File::create(dir.path().join("README")).unwrap();
        let files = list_files(dir.path(), 4096, "f").unwrap();
        assert_eq!(files.iter().map(|f| f.0).collect::<Vec<_>>(), vec![0, 4096]);
        assert!(!dir.path().join("00000000000000008192.tmp").exists());

        mk(12288, 4096);
        assert!(matches!(list_files(dir.path(), 4096, "f"), Err(StoreError::FileGap { expected: 8192, .. })));
        mk(8192, 100);
        let e = list_files(dir.path(), 4096, "f").unwrap_err();
        assert!(matches!(e, StoreError::FileSizeMismatch { expected: 4096, actual: 100, .. }), "{e}");
    }
}
