//! The restart fence's marker in the store: `<storePathRootDir>/restartFence`.
//!
//! After a crash a master with `totalReplicas > 1` refuses puts until the replicas it names
//! have reported (one may hold bytes the crash lost). The crash is known from the store's
//! `abort` marker, which a clean stop removes; so a fenced master stopped cleanly would start
//! unfenced, though the replicas it waited for never reported. The fence is therefore written
//! into the store before the master serves, and removed only once it has lifted: a master that
//! finds the marker at start is fenced again, whatever the `abort` marker says.
//!
//! The marker is written whole (a temporary file, fsync, rename, directory fsync) and removed
//! durably (unlink, directory fsync), so a crash at any step leaves either no marker or a whole
//! one. A crash between the fence lifting and the marker's removal only fences the next start
//! again, which lifts as soon as the replicas report.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The marker's file name in the store root.
pub const FILE_NAME: &str = "restartFence";

/// The marker's path in the store rooted at `root`.
pub fn path(root: &Path) -> PathBuf {
    root.join(FILE_NAME)
}

/// Whether a fence was raised and never lifted. An unreadable store root is an error: the
/// broker must not guess.
pub fn pending(root: &Path) -> io::Result<bool> {
    match fs::symlink_metadata(path(root)) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Records, durably, that puts are fenced until `waiting_for` replicas have reported.
pub fn raise(root: &Path, waiting_for: usize) -> io::Result<()> {
    let target = path(root);
    let temporary = root.join(format!("{FILE_NAME}.tmp"));
    let mut file = File::create(&temporary)?;
    writeln!(file, "logship restart fence 1")?;
    writeln!(file, "waitingFor={waiting_for}")?;
    writeln!(
        file,
        "# Puts are refused until {waiting_for} named replica(s) report; removed when the fence lifts."
    )?;
    file.sync_all()?;
    drop(file);
    fs::rename(&temporary, &target)?;
    sync_dir(root)
}

/// Removes the marker durably (nothing to do when there is none).
pub fn lift(root: &Path) -> io::Result<()> {
    match fs::remove_file(path(root)) {
        Ok(()) => sync_dir(root),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_fence_is_pending_until_lifted_and_lifting_twice_is_harmless() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!pending(dir.path()).unwrap());
        raise(dir.path(), 2).unwrap();
        assert!(pending(dir.path()).unwrap());
        let text = fs::read_to_string(path(dir.path())).unwrap();
        assert!(text.starts_with("logship restart fence 1\nwaitingFor=2\n"), "{text}");
        assert!(!dir.path().join("restartFence.tmp").exists(), "the temporary file was renamed");
        raise(dir.path(), 1).unwrap();
        assert!(fs::read_to_string(path(dir.path())).unwrap().contains("waitingFor=1"), "rewritten whole");
        lift(dir.path()).unwrap();
        assert!(!pending(dir.path()).unwrap());
        lift(dir.path()).unwrap();
    }

    #[test]
    fn an_unreadable_store_root_is_an_error_not_a_guess() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        fs::write(&file, b"x").unwrap();
        assert!(pending(&file).is_err(), "a root that is a file cannot say whether a fence is pending");
    }
}
