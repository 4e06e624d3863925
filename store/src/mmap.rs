//! Memory maps and the few raw OS calls the store needs.
//!
//! This is the only module of the crate with `unsafe` code. Every block carries a `// SAFETY:`
//! argument; the arguments rest on the discipline below.
//!
//! # The mapping discipline
//!
//! A [`MappedFile`] maps one fixed-size file, once per process. Its bytes are split at
//! `published`:
//!
//! - `[0, published)` is immutable. Anyone may hold `&[u8]` views (and [`MappedSpan`]s, which
//!   become zero-copy `Bytes`) over it.
//! - `[published, len)` belongs to the file's single [`MapWriter`]. Only the writer touches it,
//!   and only through `&mut self`, so no view of it can exist while it is written.
//!
//! `published` only grows. The writer stores it with `Release` after writing the bytes below it;
//! readers load it with `Acquire` before creating a view. A reader therefore never sees a byte
//! that is being written, and never holds a view over bytes that will change.
//!
//! The store holds an exclusive lock on its directory ([`try_lock_exclusive`]), so no other
//! well-behaved process writes these files while they are mapped. (A foreign process writing or
//! truncating a mapped file would break any mmap-based store; this is the usual mmap caveat.)
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use memmap2::{MmapOptions, MmapRaw};

/// The page size used for flush alignment and page touching (RocketMQ's `OS_PAGE_SIZE`).
pub(crate) const PAGE_SIZE: usize = 4096;

/// A page of zeros to compare against.
static ZERO_PAGE: [u8; PAGE_SIZE] = [0; PAGE_SIZE];

/// Whether every byte of `bytes` is zero. Compares a page at a time against a zero page (a
/// `memcmp`), which is many times faster than a byte loop, above all in a debug build: recovery
/// checks up to two segments of zeros this way after a crash.
pub(crate) fn all_zero(bytes: &[u8]) -> bool {
    let mut pages = bytes.chunks_exact(PAGE_SIZE);
    pages.all(|p| p == ZERO_PAGE) && {
        let rest = pages.remainder();
        rest == &ZERO_PAGE[..rest.len()]
    }
}

/// A fixed-size file mapped read-write, shared by one [`MapWriter`] and any number of readers.
pub(crate) struct MappedFile {
    map: MmapRaw,
    published: AtomicUsize,
    path: PathBuf,
    // The store's directory lock, held for as long as this mapping lives (see `map`).
    _lock: Option<Arc<File>>,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &self.path)
            .field("len", &self.len())
            .field("published", &self.published())
            .finish()
    }
}

impl MappedFile {
    /// Maps the whole of `file` and returns the shared handle plus its only writer.
    ///
    /// The caller maps each file at most once per process (the store enforces it: one
    /// `MappedFile` per segment or consume-queue file). A mapping whose views can outlive the
    /// store (commit-log segments, through spans) takes the store's directory `lock` along, so
    /// the store cannot be reopened, and its files rewritten through a second mapping, while any
    /// view of the old one is alive.
    pub(crate) fn map(
        file: File,
        path: PathBuf,
        lock: Option<Arc<File>>,
    ) -> io::Result<(Arc<Self>, MapWriter)> {
        let map = MmapOptions::new().map_raw(&file)?;
        if map.len() == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot map an empty file"));
        }
        // The mapping outlives the descriptor: close it, so open files cost no descriptor (a
        // broker with thousands of consume queues stays far below RLIMIT_NOFILE).
        drop(file);
        let shared = Arc::new(Self { map, published: AtomicUsize::new(0), path, _lock: lock });
        let writer =
            MapWriter { file: Arc::clone(&shared), pos: 0, reserved: 0, fd: None, staged: Vec::new() };
        Ok((shared, writer))
    }

    /// [`map`](Self::map), but the writer keeps the descriptor and its [`append`](MapWriter::append)
    /// writes through it (`pwrite`) instead of copying into the mapping. For commit-log
    /// segments: a store into a page of the mapping that is not in the page cache yet faults,
    /// and the fault reads the file around it (`read_ahead_kb`, often megabytes), zero-filling
    /// every page of that window while the writer waits; a write through the descriptor puts
    /// whole pages into the page cache without reading or zeroing them.
    pub(crate) fn map_written_through(
        file: File,
        path: PathBuf,
        lock: Option<Arc<File>>,
    ) -> io::Result<(Arc<Self>, MapWriter)> {
        let fd = file.try_clone()?;
        let (shared, mut writer) = Self::map(file, path, lock)?;
        writer.fd = Some(fd);
        Ok((shared, writer))
    }

    /// Length of the mapping (the file size).
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The mapped file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reserves the file's blocks from `from` (rounded down to a page) to its end; see
    /// [`reserve`].
    pub(crate) fn reserve_from(&self, from: usize) -> io::Result<()> {
        let start = (from / PAGE_SIZE * PAGE_SIZE).min(self.len());
        self.reserve_range(start, self.len())
    }

    /// Reserves the blocks of `[from, to)`. The file is opened again by its path for this (the
    /// mapping does not need a descriptor), which is rare: once per segment at most, and once
    /// per 64 KiB of a consume-queue file.
    fn reserve_range(&self, from: usize, to: usize) -> io::Result<()> {
        if to <= from {
            return Ok(());
        }
        let file = File::options().write(true).open(&self.path)?;
        reserve(&file, from as u64, (to - from) as u64)
    }

    /// End of the immutable prefix.
    pub(crate) fn published(&self) -> usize {
        self.published.load(Ordering::Acquire)
    }

    /// A view of `range` if it lies inside the published prefix.
    pub(crate) fn read(&self, range: Range<usize>) -> Option<&[u8]> {
        if range.start > range.end || range.end > self.published() {
            return None;
        }
        // SAFETY: `range` lies inside the mapping (published <= len) and inside the published
        // prefix, which the discipline above keeps immutable for the life of the mapping. The
        // mapping lives as long as `self`, which the returned borrow is tied to.
        Some(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(range.start), range.len()) })
    }

    /// An owned view of `range` (inside the published prefix) that keeps the mapping alive.
    pub(crate) fn span(self: &Arc<Self>, range: Range<usize>) -> Option<MappedSpan> {
        if range.start > range.end || range.end > self.published() {
            return None;
        }
        Some(MappedSpan { file: Arc::clone(self), start: range.start, len: range.len() })
    }

    /// Writes `range` back to the file and waits for it (msync `MS_SYNC`), page-aligned.
    pub(crate) fn flush(&self, range: Range<usize>) -> io::Result<()> {
        let end = range.end.min(self.len());
        let start = range.start / PAGE_SIZE * PAGE_SIZE;
        if end <= start {
            return Ok(());
        }
        self.map.flush_range(start, end - start)
    }
}

/// A zero-copy view of published bytes of a [`MappedFile`]; it keeps the mapping alive, even after
/// the file is deleted. Turned into `bytes::Bytes` with `Bytes::from_owner`.
pub(crate) struct MappedSpan {
    file: Arc<MappedFile>,
    start: usize,
    len: usize,
}

impl AsRef<[u8]> for MappedSpan {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `MappedFile::span` only builds a span inside the published prefix, which never
        // changes; `self.file` keeps the mapping alive for as long as this span exists.
        unsafe { std::slice::from_raw_parts(self.file.map.as_ptr().add(self.start), self.len) }
    }
}

/// The single writer of a [`MappedFile`]: it owns the unpublished suffix `[published, len)`.
///
/// `pos` is the write position; `pos >= published` always holds.
pub(crate) struct MapWriter {
    file: Arc<MappedFile>,
    pos: usize,
    /// Blocks before this offset are known to be reserved ([`reserve_ahead`](Self::reserve_ahead)).
    reserved: usize,
    /// The file's descriptor, when appends are written through it
    /// ([`MappedFile::map_written_through`]).
    fd: Option<File>,
    /// The bytes of a staged append ([`stage`](Self::stage)).
    staged: Vec<u8>,
}

impl std::fmt::Debug for MapWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MapWriter").field("file", &self.file).field("pos", &self.pos).finish()
    }
}

impl MapWriter {
    /// The file this writer writes.
    pub(crate) fn file(&self) -> &Arc<MappedFile> {
        &self.file
    }

    /// The write position.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Records that the whole file's blocks are reserved (it was created reserved).
    pub(crate) fn mark_reserved(&mut self) {
        self.reserved = self.file.len();
    }

    /// Makes sure the blocks of the next `len` bytes are reserved, reserving `step` bytes (or
    /// to the end of the file) at a time, so that a file written a little at a time (a
    /// consume-queue file) holds only the space it uses, yet is never written in a hole.
    pub(crate) fn reserve_ahead(&mut self, len: usize, step: usize) -> io::Result<()> {
        let need = self.pos + len;
        if need <= self.reserved {
            return Ok(());
        }
        let from = self.reserved.max(self.pos) / PAGE_SIZE * PAGE_SIZE;
        let to = need.max(from + step).div_ceil(PAGE_SIZE).saturating_mul(PAGE_SIZE).min(self.file.len());
        self.file.reserve_range(from, to)?;
        self.reserved = to;
        Ok(())
    }

    /// Bytes left after the write position.
    pub(crate) fn remaining(&self) -> usize {
        self.file.len() - self.pos
    }

    /// Moves the write position inside the unpublished suffix.
    ///
    /// # Panics
    /// If `pos` is below the published prefix or beyond the file: a broken store invariant.
    pub(crate) fn seek(&mut self, pos: usize) {
        assert!(
            pos >= self.file.published.load(Ordering::Relaxed) && pos <= self.file.len(),
            "seek to {pos} outside the unpublished suffix of {}",
            self.file.path.display()
        );
        self.pos = pos;
    }

    /// The `len` bytes at the write position, for the caller to fill; does not advance.
    ///
    /// # Panics
    /// If the bytes do not fit in the file: callers check [`remaining`](Self::remaining) first.
    pub(crate) fn reserve(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.remaining(), "write of {len} bytes past the end of {}", self.file.path.display());
        // SAFETY: `[pos, pos + len)` is inside the mapping (checked above) and inside the
        // unpublished suffix (`pos >= published`), which no reader views and which only this
        // writer touches; `&mut self` makes this the only live reference to it.
        unsafe { std::slice::from_raw_parts_mut(self.file.map.as_mut_ptr().add(self.pos), len) }
    }

    /// Advances the write position by `len` bytes (already filled through `reserve`).
    pub(crate) fn advance(&mut self, len: usize) {
        assert!(len <= self.remaining(), "advance past the end of {}", self.file.path.display());
        self.pos += len;
    }

    /// Writes `data` at the write position and advances: through the descriptor when the
    /// writer has one ([`MappedFile::map_written_through`]), else by copying into the mapping.
    /// On an error the position stays and nothing is published.
    pub(crate) fn append(&mut self, data: &[u8]) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let Some(fd) = &self.fd else {
            self.write(data);
            return Ok(());
        };
        assert!(
            data.len() <= self.remaining(),
            "write of {} bytes past the end of {}",
            data.len(),
            self.file.path.display()
        );
        fd.write_all_at(data, self.pos as u64)?;
        self.pos += data.len();
        Ok(())
    }

    /// Room for the next `len` bytes, for the caller to fill and then
    /// [`append_staged`](Self::append_staged): a buffer when appends go through the descriptor,
    /// else the mapping itself ([`reserve`](Self::reserve)).
    pub(crate) fn stage(&mut self, len: usize) -> &mut [u8] {
        if self.fd.is_none() {
            return self.reserve(len);
        }
        self.staged.clear();
        self.staged.resize(len, 0);
        &mut self.staged
    }

    /// Appends the `len` bytes filled through [`stage`](Self::stage), as [`append`](Self::append).
    pub(crate) fn append_staged(&mut self, len: usize) -> io::Result<()> {
        if self.fd.is_none() {
            self.advance(len);
            return Ok(());
        }
        let staged = std::mem::take(&mut self.staged);
        let result = self.append(&staged[..len]);
        self.staged = staged;
        result
    }

    /// Copies `data` at the write position and advances.
    pub(crate) fn write(&mut self, data: &[u8]) {
        self.reserve(data.len()).copy_from_slice(data);
        self.pos += data.len();
    }

    /// Makes everything before the write position readable (and immutable).
    pub(crate) fn publish(&mut self) {
        self.file.published.store(self.pos, Ordering::Release);
    }

    /// Makes everything before `upto` readable (and immutable); bytes written between `upto`
    /// and the write position stay the writer's.
    ///
    /// # Panics
    /// If `upto` is below the published prefix or beyond the write position.
    pub(crate) fn publish_upto(&mut self, upto: usize) {
        assert!(
            upto >= self.file.published.load(Ordering::Relaxed) && upto <= self.pos,
            "publishing {upto} outside the written suffix of {}",
            self.file.path.display()
        );
        self.file.published.store(upto, Ordering::Release);
    }

    /// The whole mapping, for the writer's own inspection (recovery scans, zero checks).
    pub(crate) fn peek(&self) -> &[u8] {
        // SAFETY: the mapping is `len` bytes long and lives as long as `self.file`. Only this
        // writer ever mutates the mapping, and it needs `&mut self` to do so, which cannot
        // coexist with the `&self` borrow this view is tied to; other views are read-only.
        unsafe { std::slice::from_raw_parts(self.file.map.as_ptr(), self.file.len()) }
    }

    /// Zeroes every page-sized chunk of `range` that is not already zero; returns the number of
    /// bytes written. Reading first keeps clean pages clean.
    ///
    /// # Panics
    /// If `range` reaches below the published prefix or beyond the file.
    pub(crate) fn zero(&mut self, range: Range<usize>) -> usize {
        assert!(
            range.start >= self.file.published.load(Ordering::Relaxed) && range.end <= self.file.len(),
            "zeroing outside the unpublished suffix of {}",
            self.file.path.display()
        );
        let mut zeroed = 0;
        let mut at = range.start;
        while at < range.end {
            let chunk_end = ((at / PAGE_SIZE + 1) * PAGE_SIZE).min(range.end);
            let dirty = !all_zero(&self.peek()[at..chunk_end]);
            if dirty {
                // SAFETY: `[at, chunk_end)` is inside the mapping and the unpublished suffix
                // (asserted above), which only this writer touches, through `&mut self`.
                unsafe { std::ptr::write_bytes(self.file.map.as_mut_ptr().add(at), 0, chunk_end - at) };
                zeroed += chunk_end - at;
            }
            at = chunk_end;
        }
        zeroed
    }

    /// Brings every page from the write position to the end into the page cache and maps it,
    /// without dirtying it: the kernel zeroes the pages here, off the write path, and the later
    /// writes only take a cheap write-protect fault. Reading (not writing) matters: writing zeros
    /// would leave a segment's worth of dirty pages for the kernel to write back, and writers
    /// would stall behind that writeback. Stops early when `stop` is set.
    pub(crate) fn touch_pages(&mut self, stop: &AtomicBool) {
        /// Populate in steps of this many bytes, checking `stop` between them.
        const STEP: usize = 16 << 20;
        let base = self.file.map.as_ptr();
        let mut at = self.pos / PAGE_SIZE * PAGE_SIZE;
        while at < self.file.len() {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let len = STEP.min(self.file.len() - at);
            // SAFETY: `[at, at + len)` lies inside the mapping and starts on a page boundary;
            // MADV_POPULATE_READ only faults pages in for reading and changes no byte.
            let rc =
                unsafe { libc::madvise(base.add(at) as *mut libc::c_void, len, libc::MADV_POPULATE_READ) };
            if rc != 0 {
                // Older kernels (before 5.14): read one byte per page instead.
                let mut page = at;
                while page < at + len {
                    // SAFETY: `page` is inside the mapping; a volatile read of one byte faults the
                    // page in. Only this writer (holding `&mut self`) writes this suffix, so the
                    // byte is not being written concurrently.
                    let _ = unsafe { std::ptr::read_volatile(base.add(page)) };
                    page += PAGE_SIZE;
                }
            }
            at += len;
        }
    }
}

/// Takes an exclusive, non-blocking lock on `file` (an open-file-description lock on Linux, which
/// also conflicts with the POSIX record lock a Java broker takes on its `lock` file; `flock`
/// elsewhere). Returns `Ok(false)` if someone else holds it.
pub(crate) fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let rc = {
        // SAFETY: `flock` is a plain C struct for which all-zero bytes is a valid value.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = libc::F_WRLCK as libc::c_short;
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        lock.l_start = 0;
        lock.l_len = 0; // the whole file
        lock.l_pid = 0; // required by F_OFD_SETLK
        // SAFETY: the descriptor is valid for the duration of the call (borrowed from `file`)
        // and `lock` is a valid, initialised `flock` that outlives the call.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &lock as *const libc::flock) }
    };
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    // SAFETY: the descriptor is valid for the duration of the call (borrowed from `file`).
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(code) if code == libc::EAGAIN || code == libc::EACCES || code == libc::EWOULDBLOCK => Ok(false),
        _ => Err(err),
    }
}

/// The used fraction of the file system holding `path`, computed like RocketMQ's
/// `UtilAll.getDiskPartitionSpaceUsedPercent`: `used / (used + available to unprivileged users)`.
pub(crate) fn disk_used_ratio(path: &Path) -> io::Result<f64> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    let mut stat = MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a valid NUL-terminated string and `stat` points to writable memory of
    // the right type; both outlive the call.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `statvfs` returned 0, so it initialised the whole struct.
    let stat = unsafe { stat.assume_init() };
    let frsize = stat.f_frsize as f64;
    let total = stat.f_blocks as f64 * frsize;
    let free = stat.f_bfree as f64 * frsize;
    let avail = stat.f_bavail as f64 * frsize;
    let used = total - free;
    let entire = used + avail;
    if entire <= 0.0 {
        return Ok(0.0);
    }
    Ok(used / entire)
}

/// Reserves the blocks of `[offset, offset + len)` of `file` (`posix_fallocate`), so that later
/// writes through a mapping cannot fail for lack of space. (A write into a hole of a sparse
/// mapped file that the file system cannot back raises SIGBUS; a reservation fails cleanly with
/// `ENOSPC` instead.) Ranges already allocated cost only the system call. File systems without
/// native support get glibc's emulation, which writes one byte per block.
pub(crate) fn reserve(file: &File, offset: u64, len: u64) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let (Ok(off), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "range too large to reserve"));
    };
    loop {
        // SAFETY: the descriptor is valid for the duration of the call (borrowed from `file`);
        // `posix_fallocate` takes only integers and changes no mapped byte (it allocates blocks,
        // reading as zeros, for holes only).
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), off, len) };
        match rc {
            0 => return Ok(()),
            libc::EINTR => continue,
            code => return Err(io::Error::from_raw_os_error(code)),
        }
    }
}

/// Bytes available to unprivileged users on the file system holding `path` (`statvfs`).
pub(crate) fn available_bytes(path: &Path) -> io::Result<u64> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    let mut stat = MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a valid NUL-terminated string and `stat` points to writable memory of
    // the right type; both outlive the call.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `statvfs` returned 0, so it initialised the whole struct.
    let stat = unsafe { stat.assume_init() };
    #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
    Ok((stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64))
}

/// The local hour of day (0..=23) of a Unix time in milliseconds, or `None` if the C library
/// cannot convert it.
pub(crate) fn local_hour(epoch_millis: i64) -> Option<u32> {
    let secs = epoch_millis.div_euclid(1000) as libc::time_t;
    let mut tm = MaybeUninit::<libc::tm>::uninit();
    // SAFETY: both pointers are valid for the call; `localtime_r` is the re-entrant variant and
    // writes only into `tm`.
    let result = unsafe { libc::localtime_r(&secs, tm.as_mut_ptr()) };
    if result.is_null() {
        return None;
    }
    // SAFETY: `localtime_r` returned non-null, so it initialised `tm`.
    let tm = unsafe { tm.assume_init() };
    u32::try_from(tm.tm_hour).ok()
}

/// The local date and time of a Unix time in milliseconds: `(year, month 1..=12, day, hour,
/// minute, second)`, or `None` if the C library cannot convert it.
pub(crate) fn local_time(epoch_millis: i64) -> Option<(i32, u32, u32, u32, u32, u32)> {
    let secs = epoch_millis.div_euclid(1000) as libc::time_t;
    let mut tm = MaybeUninit::<libc::tm>::uninit();
    // SAFETY: both pointers are valid for the call; `localtime_r` is the re-entrant variant and
    // writes only into `tm`.
    let result = unsafe { libc::localtime_r(&secs, tm.as_mut_ptr()) };
    if result.is_null() {
        return None;
    }
    // SAFETY: `localtime_r` returned non-null, so it initialised `tm`.
    let tm = unsafe { tm.assume_init() };
    let u = |v: libc::c_int| u32::try_from(v).ok();
    Some((tm.tm_year + 1900, u(tm.tm_mon + 1)?, u(tm.tm_mday)?, u(tm.tm_hour)?, u(tm.tm_min)?, u(tm.tm_sec)?))
}

/// Lowers the calling thread's scheduling priority to the minimum (nice 19), for background
/// work that must not take CPU from the write and replication paths (segment preallocation).
/// Best effort: a failure is returned and may be ignored.
pub(crate) fn lower_current_thread_priority() -> io::Result<()> {
    // SAFETY: `gettid` takes no arguments and cannot fail; `setpriority` only reads its integer
    // arguments. On Linux, PRIO_PROCESS with a thread id changes that one thread's nice value.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(len: u64) -> (tempfile::TempDir, PathBuf, File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = File::options().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        file.set_len(len).unwrap();
        (dir, path, file)
    }

    #[test]
    fn reads_see_only_published_bytes() {
        let (_dir, path, file) = temp_file(8192);
        let (map, mut writer) = MappedFile::map(file, path, None).unwrap();
        writer.write(b"hello");
        assert!(map.read(0..5).is_none(), "unpublished bytes are not readable");
        writer.publish();
        assert_eq!(map.read(0..5).unwrap(), b"hello");
        assert!(map.read(0..6).is_none());
        let span = map.span(1..4).unwrap();
        assert_eq!(span.as_ref(), b"ell");
    }

    #[test]
    fn all_zero_finds_a_non_zero_byte_anywhere() {
        assert!(all_zero(&[]));
        for len in [1, 7, PAGE_SIZE - 1, PAGE_SIZE, PAGE_SIZE + 1, 3 * PAGE_SIZE + 100] {
            let mut bytes = vec![0u8; len];
            assert!(all_zero(&bytes), "len {len}");
            for at in [0, len / 2, len.saturating_sub(PAGE_SIZE), len - 1] {
                bytes[at] = 0x80;
                assert!(!all_zero(&bytes), "len {len}, non-zero at {at}");
                bytes[at] = 0;
            }
        }
    }

    #[test]
    fn zero_only_rewrites_dirty_pages_and_touch_keeps_contents() {
        let (_dir, path, file) = temp_file(3 * PAGE_SIZE as u64);
        let (_map, mut writer) = MappedFile::map(file, path, None).unwrap();
        writer.seek(PAGE_SIZE + 10);
        writer.write(b"xyz");
        writer.touch_pages(&AtomicBool::new(false));
        assert_eq!(&writer.peek()[PAGE_SIZE + 10..PAGE_SIZE + 13], b"xyz");
        writer.seek(0);
        assert_eq!(writer.zero(0..3 * PAGE_SIZE), PAGE_SIZE);
        assert!(writer.peek().iter().all(|&b| b == 0));
    }

    #[test]
    #[should_panic(expected = "outside the unpublished suffix")]
    fn seeking_into_published_bytes_is_a_bug() {
        let (_dir, path, file) = temp_file(4096);
        let (_map, mut writer) = MappedFile::map(file, path, None).unwrap();
        writer.write(b"abc");
        writer.publish();
        writer.seek(1);
    }

    /// Minor page faults of the calling thread so far.
    fn thread_minor_faults() -> i64 {
        let mut usage = MaybeUninit::<libc::rusage>::uninit();
        // SAFETY: the pointer is valid for writes of one `rusage`; RUSAGE_THREAD fills it for
        // the calling thread.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) };
        assert_eq!(rc, 0);
        // SAFETY: `getrusage` returned 0, so it initialised `usage`.
        unsafe { usage.assume_init() }.ru_minflt
    }

    /// A store into a page of the mapping that is not in the page cache faults, and the fault
    /// zero-fills the whole read-ahead window around it while the writer waits (the stalls of
    /// tens of milliseconds every few MiB of a new segment). Appends through a written-through
    /// writer take no page fault.
    #[test]
    fn appending_to_a_new_written_through_file_takes_no_page_faults() {
        let len = 16 << 20;
        let (_dir, path, file) = temp_file(len as u64);
        reserve(&file, 0, len as u64).unwrap();
        let (map, mut writer) = MappedFile::map_written_through(file, path, None).unwrap();
        let record = vec![7u8; 1000];
        let before = thread_minor_faults();
        while writer.remaining() >= 2 * record.len() {
            writer.append(&record).unwrap();
            writer.stage(record.len()).copy_from_slice(&record);
            writer.append_staged(record.len()).unwrap();
        }
        let faults = thread_minor_faults() - before;
        assert!(faults < 4, "{faults} page faults appending {len} bytes");
        writer.publish();
        let written = writer.pos();
        assert!(map.read(0..written).unwrap().iter().all(|&b| b == 7), "the mapping shows what was appended");
    }

    #[test]
    fn a_second_lock_on_the_same_file_fails() {
        let (_dir, path, file) = temp_file(1);
        assert!(try_lock_exclusive(&file).unwrap());
        let again = File::options().read(true).write(true).open(&path).unwrap();
        assert!(!try_lock_exclusive(&again).unwrap());
        drop(file);
        assert!(try_lock_exclusive(&again).unwrap());
    }

    #[test]
    fn disk_ratio_and_local_hour_are_sane() {
        let ratio = disk_used_ratio(Path::new("/")).unwrap();
        assert!((0.0..=1.0).contains(&ratio));
        assert!(local_hour(0).unwrap() < 24);
    }
}
