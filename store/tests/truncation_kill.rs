//! A real kill -9 (SIGKILL of a child process) after each step of a truncation. In its own test
//! binary: a forked child holds the parent's open descriptors, store locks included, until it
//! execs, which would make a parallel test's reopen fail with `Locked`.

mod common;

use std::path::Path;

use common::truncation::{build, check_after_crash};
use common::{Env, config};
use logship_store::TruncateStep;

/// The environment variable that makes [`truncation_child`] run: `<dir>:<cut>:<step index>`.
const CHILD_ENV: &str = "LOGSHIP_TRUNCATION_CHILD";

/// The child process of [`a_real_kill_9_after_each_step_never_brings_the_tail_back`]: opens the
/// store, runs the truncation up to a step, says so, and waits to be killed.
#[test]
#[ignore = "run as a child process by a_real_kill_9_after_each_step_never_brings_the_tail_back"]
fn truncation_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let mut parts = spec.rsplitn(3, ':');
    let step: usize = parts.next().unwrap().parse().unwrap();
    let cut: u64 = parts.next().unwrap().parse().unwrap();
    let dir = parts.next().unwrap();
    let log = Env::default().open(Path::new(dir), config()).unwrap();
    log.truncate_to_crashing_after(cut, TruncateStep::ALL[step]).unwrap();
    println!("STEP-DONE");
    std::thread::sleep(std::time::Duration::from_secs(600));
}

#[test]
fn a_real_kill_9_after_each_step_never_brings_the_tail_back() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    for (index, _) in TruncateStep::ALL.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::default();
        let (puts, cut) = build(dir.path(), &env);
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "truncation_child", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, format!("{}:{cut}:{index}", dir.path().display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let done =
            std::io::BufReader::new(stdout).lines().map_while(Result::ok).any(|l| l.contains("STEP-DONE"));
        // SIGKILL: no destructor, no flush, no clean shutdown.
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(done, "the child did not reach step {index}");
        check_after_crash(dir.path(), &env, &puts, cut);
    }
}
