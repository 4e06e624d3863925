//! The epoch file of RocketMQ 5's controller mode (`<storePathRootDir>/epochFileCheckpoint`):
//! which leader epoch wrote which part of the commit log.
//!
//! The format is Java's (`CheckpointFile`), text in UTF-8:
//!
//! ```text
//! 2              the number of entries
//! 773307083      crc32 of the entry lines (each with its '\n') & 0x7FFFFFFF
//! 7-7000         epoch-startOffset, one line per entry, oldest first
//! 8-8000
//! ```
//!
//! Differences from Java, each deliberate:
//!
//! - Each file (the main one and its `.bak` copy) is written under a temporary name, fsynced,
//!   renamed over the old one, and its directory fsynced, so a crash leaves the old or the new
//!   list, never a torn one; Java writes in place without fsync.
//! - An empty list is written too (`0\n0\n`); Java skips the write, so a truncation that drops
//!   every epoch comes back after a restart.
//! - Entries are validated on read (epochs strictly increasing, start offsets non-decreasing,
//!   nothing after the last entry): a file that breaks this is refused with a typed error.
//!
//! The main file is written first, then the `.bak`: a crash between the two leaves a new main
//! file, which is read first. A main file that is missing or invalid falls back to the `.bak`;
//! when both are invalid, [`StoreError::EpochFileCorrupt`] names each file and its fault.

use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{IoContext, StoreError};

/// The file name Java uses under `storePathRootDir`.
const EPOCH_FILE_NAME: &str = "epochFileCheckpoint";

/// The largest epoch file read (Java's handshake carries at most 1000 entries, a few dozen
/// bytes each).
const MAX_FILE_LEN: u64 = 1 << 20;

/// One entry of the epoch file: the core's [`EpochEntry`], the leader epoch that started
/// writing at `start_offset`.
pub use logship_core::EpochEntry;

/// Why an epoch list cannot be written or a file's contents are refused.
fn check_entries(entries: &[EpochEntry]) -> Result<(), String> {
    for (i, e) in entries.iter().enumerate() {
        if e.epoch < 0 {
            return Err(format!("entry {i}: epoch {} is negative", e.epoch));
        }
        if e.start_offset > i64::MAX as u64 {
            return Err(format!("entry {i}: start offset {} is above Java's long range", e.start_offset));
        }
        if let Some(prev) = i.checked_sub(1).map(|p| entries[p]) {
            if e.epoch <= prev.epoch {
                return Err(format!("entry {i}: epoch {} does not follow epoch {}", e.epoch, prev.epoch));
            }
            if e.start_offset < prev.start_offset {
                return Err(format!(
                    "entry {i}: epoch {} starts at {}, before epoch {} at {}",
                    e.epoch, e.start_offset, prev.epoch, prev.start_offset
                ));
            }
        }
    }
    Ok(())
}

/// Java's CRC of the entry lines.
fn crc_of(lines: &str) -> u32 {
    crc32fast::hash(lines.as_bytes()) & 0x7FFF_FFFF
}

/// Renders `entries` in Java's format, or says why the list cannot be held.
fn encode(entries: &[EpochEntry]) -> Result<String, String> {
    check_entries(entries)?;
    let lines: String = entries.iter().map(|e| format!("{}-{}\n", e.epoch, e.start_offset)).collect();
    Ok(format!("{}\n{}\n{}", entries.len(), crc_of(&lines), lines))
}

/// Parses an epoch file's bytes, checking the count, the CRC and the order of the entries, or
/// says what is wrong.
fn decode(bytes: &[u8]) -> Result<Vec<EpochEntry>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8 text ({e})"))?;
    if !text.ends_with('\n') {
        return Err("the last line is not terminated (a torn write?)".into());
    }
    let mut lines = text[..text.len() - 1].split('\n');
    let count_line = lines.next().unwrap_or("");
    let count: usize =
        count_line.parse().map_err(|_| format!("line 1 (the entry count) is {count_line:?}, not a count"))?;
    let crc_line = lines.next().ok_or("line 2 (the CRC) is missing")?;
    let crc: u32 = crc_line.parse().map_err(|_| format!("line 2 (the CRC) is {crc_line:?}, not a number"))?;
    let rest: Vec<&str> = lines.collect();
    if rest.len() != count {
        return Err(format!("line 1 says {count} entries, but {} entry lines follow", rest.len()));
    }
    let mut entry_text = String::with_capacity(text.len());
    let mut entries = Vec::with_capacity(count);
    for (i, line) in rest.iter().enumerate() {
        let bad = || format!("line {} is {line:?}, not epoch-startOffset", i + 3);
        let (epoch, start) = line.split_once('-').ok_or_else(bad)?;
        let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(epoch) || !all_digits(start) {
            return Err(bad());
        }
        let epoch: u64 = epoch.parse().map_err(|_| bad())?;
        let epoch = i32::try_from(epoch)
            .map_err(|_| format!("line {}: epoch {epoch} is above Java's int range", i + 3))?;
        let start_offset = start.parse().map_err(|_| bad())?;
        entries.push(EpochEntry { epoch, start_offset });
        entry_text.push_str(line);
        entry_text.push('\n');
    }
    let expected = crc_of(&entry_text);
    if crc != expected {
        return Err(format!("CRC mismatch: line 2 says {crc}, the entries give {expected}"));
    }
    check_entries(&entries)?;
    Ok(entries)
}

/// The epoch file at a path, with its `.bak` copy beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochFile {
    path: PathBuf,
}

impl EpochFile {
    /// The file's name under `storePathRootDir`, as Java names it.
    pub const FILE_NAME: &str = EPOCH_FILE_NAME;

    /// Renders `entries` in Java's format (for tools and fuzzing; [`write`](Self::write) uses it).
    ///
    /// # Errors
    /// A reason when the list breaks the file's order or Java's value ranges.
    pub fn encode(entries: &[EpochEntry]) -> Result<String, String> {
        encode(entries)
    }

    /// Parses an epoch file's bytes, checking the entry count, the CRC and the entries' order.
    ///
    /// # Errors
    /// What is wrong with the bytes, in words.
    pub fn decode(bytes: &[u8]) -> Result<Vec<EpochEntry>, String> {
        decode(bytes)
    }

    /// The epoch file at `path` (Java's `storePathEpochFile`).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The default location, `<root>/epochFileCheckpoint`.
    pub fn in_root(root: impl AsRef<Path>) -> Self {
        Self::new(root.as_ref().join(EPOCH_FILE_NAME))
    }

    /// The main file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `.bak` copy.
    pub fn backup_path(&self) -> PathBuf {
        with_suffix(&self.path, ".bak")
    }

    /// Whether the main file or its `.bak` copy exists (valid or not).
    pub fn exists(&self) -> bool {
        self.path.exists() || self.backup_path().exists()
    }

    /// Reads the list: from the main file, or from the `.bak` copy when the main one is missing
    /// or invalid. Neither file present: an empty list (a store that never had an epoch).
    ///
    /// # Errors
    /// [`StoreError::EpochFileCorrupt`] when no file is valid and at least one exists, naming
    /// each file and what is wrong with it; [`StoreError::Io`] when a file cannot be read.
    pub fn read(&self) -> Result<Vec<EpochEntry>, StoreError> {
        let backup = self.backup_path();
        let main = match read_one(&self.path)? {
            Some(Ok(entries)) => return Ok(entries),
            Some(Err(reason)) => Some(reason),
            None => None,
        };
        match (main, read_one(&backup)?) {
            (None, None) => Ok(Vec::new()),
            (main, Some(Ok(entries))) => {
                if let Some(reason) = main {
                    tracing::warn!(path = %self.path.display(), %reason, "epoch file is invalid; using its .bak copy");
                }
                Ok(entries)
            }
            (main, bak) => Err(StoreError::EpochFileCorrupt {
                path: self.path.clone(),
                reason: main.unwrap_or_else(|| "missing".into()),
                backup,
                backup_reason: match bak {
                    Some(Err(reason)) => reason,
                    _ => "missing".into(),
                },
            }),
        }
    }

    /// Replaces the list, empty or not: the main file, then the `.bak` copy, each written whole
    /// under a temporary name, fsynced, renamed into place and its directory fsynced.
    ///
    /// # Errors
    /// [`StoreError::EpochListInvalid`] for a list that breaks the epoch file's order;
    /// [`StoreError::Io`] when writing fails.
    pub fn write(&self, entries: &[EpochEntry]) -> Result<(), StoreError> {
        let text = encode(entries)
            .map_err(|reason| StoreError::EpochListInvalid { path: self.path.clone(), reason })?;
        write_atomic(&self.path, text.as_bytes())?;
        write_atomic(&self.backup_path(), text.as_bytes())
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// `None` if the file does not exist; `Some(Err(reason))` if it is invalid.
fn read_one(path: &Path) -> Result<Option<Result<Vec<EpochEntry>, String>>, StoreError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(path, e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE_LEN + 1).read_to_end(&mut bytes).at(path)?;
    if bytes.len() as u64 > MAX_FILE_LEN {
        return Ok(Some(Err(format!("larger than {MAX_FILE_LEN} bytes"))));
    }
    Ok(Some(decode(&bytes)))
}

/// Writes `bytes` to `path` whole: temporary file, fsync, rename, fsync of the directory.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = with_suffix(path, ".tmp");
    let mut file = File::options().write(true).create(true).truncate(true).open(&tmp).at(&tmp)?;
    file.write_all(bytes).at(&tmp)?;
    file.sync_all().at(&tmp)?;
    drop(file);
    fs::rename(&tmp, path).at(path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    crate::segment::sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTOR: &str = "2\n773307083\n7-7000\n8-8000\n";

    fn e(epoch: i32, start: u64) -> EpochEntry {
        EpochEntry { epoch, start_offset: start }
    }

    #[test]
    fn java_vector_round_trips_byte_for_byte() {
        assert_eq!(encode(&[e(7, 7000), e(8, 8000)]).unwrap(), VECTOR);
        assert_eq!(decode(VECTOR.as_bytes()).unwrap(), vec![e(7, 7000), e(8, 8000)]);
        let dir = tempfile::tempdir().unwrap();
        let f = EpochFile::in_root(dir.path());
        fs::write(f.path(), VECTOR).unwrap();
        let entries = f.read().unwrap();
        f.write(&entries).unwrap();
        assert_eq!(fs::read(f.path()).unwrap(), VECTOR.as_bytes());
        assert_eq!(fs::read(f.backup_path()).unwrap(), VECTOR.as_bytes());
        // The CRC line drops the top bit, as Java's `& 0x7FFFFFFF` does (crc32("3-0\n") has it set).
        assert_eq!(encode(&[e(3, 0)]).unwrap(), "1\n1289519629\n3-0\n");
    }

    #[test]
    fn empty_list_is_persisted_and_read_back_empty() {
        let dir = tempfile::tempdir().unwrap();
        let f = EpochFile::in_root(dir.path());
        f.write(&[e(1, 0), e(2, 100)]).unwrap();
        f.write(&[]).unwrap();
        assert_eq!(fs::read_to_string(f.path()).unwrap(), "0\n0\n");
        assert_eq!(f.read().unwrap(), vec![]);
    }

    #[test]
    fn no_file_reads_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(EpochFile::in_root(dir.path()).read().unwrap(), vec![]);
    }

    #[test]
    fn corrupt_main_file_falls_back_to_the_backup() {
        let dir = tempfile::tempdir().unwrap();
        let f = EpochFile::in_root(dir.path());
        f.write(&[e(7, 7000), e(8, 8000)]).unwrap();
        fs::write(f.path(), "2\n773307083\n7-7000\n8-8001\n").unwrap();
        assert_eq!(f.read().unwrap(), vec![e(7, 7000), e(8, 8000)]);
        fs::remove_file(f.path()).unwrap();
        assert_eq!(f.read().unwrap(), vec![e(7, 7000), e(8, 8000)]);
    }

    #[test]
    fn both_files_corrupt_is_a_typed_error_naming_each() {
        let dir = tempfile::tempdir().unwrap();
        let f = EpochFile::in_root(dir.path());
        fs::write(f.path(), "2\n773307083\n7-7000\n8-8001\n").unwrap();
        fs::write(f.backup_path(), "2\n773307083\n7-7000\n").unwrap();
        match f.read() {
            Err(StoreError::EpochFileCorrupt { path, reason, backup, backup_reason }) => {
                assert_eq!(path, f.path());
                assert!(reason.contains("CRC mismatch"), "{reason}");
                assert_eq!(backup, f.backup_path());
                assert!(backup_reason.contains("2 entries, but 1"), "{backup_reason}");
            }
            other => panic!("expected EpochFileCorrupt, got {other:?}"),
        }
        // Corrupt main and no backup: an error too, never an empty list.
        fs::remove_file(f.backup_path()).unwrap();
        assert!(matches!(f.read(), Err(StoreError::EpochFileCorrupt { .. })));
    }

    #[test]
    fn malformed_files_are_refused_with_a_reason() {
        let with_crc = |lines: &str| format!("{}\n{}\n{lines}", lines.lines().count(), crc_of(lines));
        let cases = [
            ("".to_string(), "not terminated"),
            ("x\n0\n".to_string(), "line 1"),
            ("0\n".to_string(), "line 2"),
            ("1\n0\n7-70\n8".to_string(), "not terminated"),
            (with_crc("7-7000\n7-8000\n"), "does not follow"),
            (with_crc("7-7000\n8-6000\n"), "before epoch 7"),
            (with_crc("7_7000\n"), "not epoch-startOffset"),
            (with_crc("-7-7000\n"), "not epoch-startOffset"),
            (with_crc("7-+7000\n"), "not epoch-startOffset"),
            (with_crc("3000000000-0\n"), "Java's int"),
            (with_crc("7-99999999999999999999\n"), "not epoch-startOffset"),
            (vec![0xFFu8, b'\n'].into_iter().map(char::from).collect::<String>(), "line 1"),
        ];
        for (text, want) in cases {
            let err = decode(text.as_bytes()).expect_err(&text);
            assert!(err.contains(want), "{text:?}: {err} (wanted {want})");
        }
        assert!(decode(&[0xFF, b'\n']).unwrap_err().contains("UTF-8"));
    }

    #[test]
    fn an_invalid_list_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let f = EpochFile::in_root(dir.path());
        let err = f.write(&[e(2, 0), e(1, 10)]).unwrap_err();
        assert!(matches!(err, StoreError::EpochListInvalid { .. }), "{err}");
        assert!(!f.path().exists());
    }

    #[test]
    fn a_negative_epoch_is_not_written() {
        // The core's entry holds a Java int; Java's epochs are never negative.
        let dir = tempfile::tempdir().unwrap();
        let f = EpochFile::in_root(dir.path());
        let err = f.write(&[e(-1, 0)]).unwrap_err();
        assert!(
            matches!(&err, StoreError::EpochListInvalid { reason, .. } if reason.contains("negative")),
            "{err}"
        );
        assert!(!f.path().exists());
    }

    #[test]
    fn an_epoch_with_no_data_is_kept() {
        // Java's appendEntry drops an epoch starting where the previous one does; the file keeps it.
        let dir = tempfile::tempdir().unwrap();
        let f = EpochFile::in_root(dir.path());
        f.write(&[e(1, 0), e(2, 500), e(3, 500)]).unwrap();
        assert_eq!(f.read().unwrap(), vec![e(1, 0), e(2, 500), e(3, 500)]);
    }

    proptest::proptest! {
        #[test]
        fn any_valid_list_round_trips(steps in proptest::collection::vec((1i32..1000, 0u64..1 << 40), 0..50)) {
            let mut entries = Vec::new();
            let (mut epoch, mut start) = (0i32, 0u64);
            for (de, ds) in steps {
                epoch += de;
                start += ds;
                entries.push(e(epoch, start));
            }
            let text = encode(&entries).unwrap();
            proptest::prop_assert_eq!(decode(text.as_bytes()).unwrap(), entries);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let _ = decode(&bytes);
        }
    }
}
