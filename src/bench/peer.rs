//! The implementations `logship bench` compares: logship itself (a master in this process, a
//! slave as a spawned `logship slave`), Apache RocketMQ's `DefaultMessageStore` through the Java
//! harness (`tests/interop/rocketmq-java/`, class `logship.interop.Bench`), and rocketmq-rust's
//! store through `tests/interop/rocketmq-rust/`.
//!
//! A peer process speaks one protocol: arguments `--role ASYNC_MASTER|SYNC_MASTER|SLAVE --store
//! DIR --segment BYTES --flush ASYNC_FLUSH|SYNC_FLUSH [--ha-port N] [--master HOST:PORT]`; its
//! first stdout line is `{"event":"started","haPort":N,...}`; then one JSON line answers each
//! stdin command: `fill BYTES SIZE`, `bench PRODUCERS COUNT SIZE`, `status`, `wait-idle
//! TIMEOUT_MS` (no slave connected), `watch-connect TIMEOUT_MS` (answers when a slave connects),
//! `watch-slave END TIMEOUT_MS`, `wait-offset END TIMEOUT_MS` (answers when the log holds END),
//! `shutdown` (answers `{"event":"shutdown"}` once the store is closed, then exits). `bench`
//! answers `secs`, `puts` (those that ended `PUT_OK`, the only ones in `p50us` and `p99us`),
//! `failed` (the others) and `firstFailure`.
//!
//! A peer is rebuilt when its sources are newer than its build.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

/// An implementation of RocketMQ's store and HA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impl {
    /// logship.
    Logship,
    /// Apache RocketMQ 5.x (`DefaultHAService`).
    Java5,
    /// Apache RocketMQ 4.9.x (`HAService`).
    Java4,
    /// rocketmq-rust 1.0.0.
    RocketmqRust,
}

impl Impl {
    /// The name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Self::Logship => "logship",
            Self::Java5 => "RocketMQ 5.5.1",
            Self::Java4 => "RocketMQ 4.9.8",
            Self::RocketmqRust => "rocketmq-rust 1.0.0",
        }
    }

    /// The peers `--peer NAME` selects.
    pub fn parse_peer(name: &str) -> anyhow::Result<Vec<Self>> {
        Ok(match name {
            "java" => vec![Self::Java5, Self::Java4],
            "java5" => vec![Self::Java5],
            "java4" => vec![Self::Java4],
            "rocketmq-rust" => vec![Self::RocketmqRust],
            other => bail!("unknown --peer {other:?}: java, java5, java4 or rocketmq-rust"),
        })
    }
}

/// Where the peers' projects live: `LOGSHIP_INTEROP_DIR`, else this checkout's `tests/interop`.
pub(crate) fn interop_dir() -> PathBuf {
    std::env::var_os("LOGSHIP_INTEROP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop"))
}

/// The newest modification time of any file under `paths` (recursively).
fn newest(paths: &[PathBuf]) -> Option<std::time::SystemTime> {
    let mut newest = None;
    let mut todo: Vec<PathBuf> = paths.to_vec();
    while let Some(p) = todo.pop() {
        let Ok(meta) = std::fs::metadata(&p) else { continue };
        if meta.is_dir() {
            todo.extend(std::fs::read_dir(&p).into_iter().flatten().flatten().map(|e| e.path()));
        } else if let Ok(m) = meta.modified() {
            newest = newest.max(Some(m));
        }
    }
    newest
}

/// Whether `built` is missing or older than any of `sources`.
pub(crate) fn stale(built: &Path, sources: &[PathBuf]) -> bool {
    let Ok(at) = std::fs::metadata(built).and_then(|m| m.modified()) else { return true };
    newest(sources).is_some_and(|n| n > at)
}

/// Marks `built` as just built (a build that found nothing to do leaves its time alone).
pub(crate) fn touch(built: &Path) -> anyhow::Result<()> {
    let f = std::fs::File::options()
        .append(true)
        .open(built)
        .with_context(|| format!("opening {}", built.display()))?;
    Ok(f.set_modified(std::time::SystemTime::now())?)
}

pub(crate) fn run_quietly(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let out = cmd.output().with_context(|| format!("cannot run {what}"))?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = text.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect();
        bail!("{what} failed:\n{}", tail.join("\n"));
    }
    Ok(())
}

/// Where the bench's Java programs keep RocketMQ's logs (`user.home`), out of the user's home.
pub(crate) fn java_home() -> PathBuf {
    std::env::temp_dir().join("logship-bench-java-home")
}

/// `java` with the module openings RocketMQ needs on Java 17, `options`, and `user.home` at
/// `home`; the classpath and class come next.
pub(crate) fn java_command(home: &Path, options: &[&str]) -> Command {
    let mut c = Command::new("java");
    c.args([
        "--add-opens=java.base/java.nio=ALL-UNNAMED",
        "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
        "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
        "--add-opens=java.base/java.lang=ALL-UNNAMED",
    ])
    .args(options)
    .arg(format!("-Duser.home={}", home.display()));
    c
}

/// Whether the classpath file `cp` exists and every entry in it still does (in `~/.m2`).
pub(crate) fn built_classpath(cp: &Path) -> bool {
    std::fs::read_to_string(cp).is_ok_and(|c| c.trim().split(':').all(|e| Path::new(e).is_file()))
}

/// The command line that starts a peer of `kind`, building it first if needed.
pub fn peer_command(kind: Impl) -> anyhow::Result<Command> {
    let dir = interop_dir();
    match kind {
        Impl::Logship => {
            let mut c = Command::new(std::env::current_exe()?);
            c.arg("slave");
            Ok(c)
        }
        Impl::Java5 | Impl::Java4 => {
            let (version, profile) =
                if kind == Impl::Java5 { ("5.5.1", "rocketmq-5") } else { ("4.9.8", "rocketmq-4") };
            let project = dir.join("rocketmq-java");
            let out = project.join("target").join(version);
            let (jar, deps) = (out.join("harness.jar"), out.join("classpath.txt"));
            if !built_classpath(&deps) || stale(&jar, &[project.join("src"), project.join("pom.xml")]) {
                eprintln!(
                    "  building the Java harness for RocketMQ {version} (mvn package -P {profile}) ..."
                );
                run_quietly(
                    Command::new("mvn").current_dir(&project).args(["-q", "-B", "package", "-P", profile]),
                    "mvn package",
                )?;
                touch(&jar)?;
            }
            let deps =
                std::fs::read_to_string(&deps).with_context(|| format!("reading {}", deps.display()))?;
            // Each put thread of a DefaultMessageStore holds a direct encoding buffer of
            // maxMessageSize (4 MiB and a little): 256 producers need more than the 1 GiB of
            // direct memory the heap size would allow.
            let mut c = java_command(&java_home(), &["-Xms1g", "-Xmx1g", "-XX:MaxDirectMemorySize=2g"]);
            c.arg("-cp").arg(format!("{}:{}", jar.display(), deps.trim())).arg("logship.interop.Bench");
            Ok(c)
        }
        Impl::RocketmqRust => {
            let project = dir.join("rocketmq-rust");
            let bin = project.join("target/release/rocketmq-rust-peer");
            if stale(&bin, &[project.join("src"), project.join("Cargo.toml"), project.join("Cargo.lock")]) {
                eprintln!(
                    "  building {} (cargo build --release; a cold build takes minutes) ...",
                    project.display()
                );
                run_quietly(
                    Command::new("cargo").current_dir(&project).args(["build", "--release", "--quiet"]),
                    "cargo build of the rocketmq-rust peer",
                )?;
                touch(&bin)?;
            }
            Ok(Command::new(bin))
        }
    }
}

/// How long a peer may take to exit after `shutdown` before the bench kills it.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// A running peer process speaking the protocol above.
pub struct PeerProcess {
    /// Which implementation.
    pub kind: Impl,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    stderr: Arc<Mutex<Vec<String>>>,
    /// The HA port it listens on (masters).
    pub ha_port: u16,
    shutdown_grace: Duration,
}

/// How a peer is started.
#[derive(Clone, Debug)]
pub struct PeerSpec {
    /// `ASYNC_MASTER`, `SYNC_MASTER` or `SLAVE`.
    pub role: &'static str,
    /// Its store directory.
    pub dir: PathBuf,
    /// Commit-log segment size.
    pub segment: u64,
    /// `ASYNC_FLUSH` or `SYNC_FLUSH`.
    pub flush: &'static str,
    /// The master's HA address (slaves).
    pub master: Option<String>,
}

impl PeerProcess {
    /// Starts a Java or rocketmq-rust peer and waits for its `started` line.
    pub fn start(kind: Impl, spec: &PeerSpec) -> anyhow::Result<Self> {
        assert_ne!(kind, Impl::Logship, "logship slaves are `logship slave` processes");
        Self::start_with(kind, peer_command(kind)?, spec)
    }

    /// Starts `cmd` (a program speaking the peer protocol) as a `kind` peer.
    pub fn start_with(kind: Impl, mut cmd: Command, spec: &PeerSpec) -> anyhow::Result<Self> {
        let ha_port = if spec.role == "SLAVE" { 0 } else { free_port()? };
        cmd.args(["--role", spec.role, "--store"])
            .arg(&spec.dir)
            .args(["--segment", &spec.segment.to_string(), "--flush", spec.flush])
            .args(["--ha-port", &ha_port.to_string()]);
        if let Some(m) = &spec.master {
            cmd.args(["--master", m]);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start the {} peer", kind.name()))?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (pipe, sink) = (child.stderr.take().expect("piped"), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
                s.push(line);
                if s.len() > 40 {
                    s.remove(0);
                }
            }
        });
        let (tx, lines) = channel();
        let out = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
            }
        });
        let stdin = child.stdin.take();
        let mut p = Self { kind, child, stdin, lines, stderr, ha_port, shutdown_grace: SHUTDOWN_GRACE };
        let started = p.next(Duration::from_secs(120))?;
        if started["event"] != "started" || started["load"] == false {
            bail!("the {} peer did not start: {started}{}", kind.name(), p.stderr_tail());
        }
        if spec.role != "SLAVE" {
            p.ha_port = started["haPort"].as_u64().and_then(|v| u16::try_from(v).ok()).unwrap_or(ha_port);
        }
        Ok(p)
    }

    /// Its last lines on stderr, after a newline; nothing if it wrote none.
    fn stderr_tail(&self) -> String {
        let lines = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        if lines.is_empty() { String::new() } else { format!("\n{}", lines.join("\n")) }
    }

    fn next(&mut self, timeout: Duration) -> anyhow::Result<Value> {
        match self.lines.recv_timeout(timeout) {
            Ok(v) => Ok(v),
            Err(RecvTimeoutError::Timeout) => {
                bail!("the {} peer did not answer in {timeout:?}{}", self.kind.name(), self.stderr_tail())
            }
            Err(RecvTimeoutError::Disconnected) => {
                bail!("the {} peer exited{}", self.kind.name(), self.stderr_tail())
            }
        }
    }

    /// Sends one command and returns its answer; an `error` answer is an error.
    pub fn command(&mut self, line: &str, timeout: Duration) -> anyhow::Result<Value> {
        let stdin = self.stdin.as_mut().context("the peer's stdin is closed")?;
        writeln!(stdin, "{line}")?;
        stdin.flush()?;
        let v = self.next(timeout)?;
        if v["event"] == "error" {
            bail!("the {} peer failed `{line}`: {}", self.kind.name(), v["message"]);
        }
        Ok(v)
    }

    /// Sends a command without waiting for its answer (read it with [`Self::answer`]).
    pub fn send_line(&mut self, line: &str) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("the peer's stdin is closed")?;
        writeln!(stdin, "{line}")?;
        Ok(stdin.flush()?)
    }

    /// The next answer, as [`Self::command`] reads it.
    pub fn answer(&mut self, timeout: Duration) -> anyhow::Result<Value> {
        let v = self.next(timeout)?;
        if v["event"] == "error" {
            bail!("the {} peer failed: {}", self.kind.name(), v["message"]);
        }
        Ok(v)
    }

    /// Sets how long [`Self::shutdown`] waits for the process to exit before it kills it.
    pub fn set_shutdown_grace(&mut self, grace: Duration) {
        self.shutdown_grace = grace;
    }

    /// Asks the peer to close its store and exit, and waits up to the shutdown grace for that;
    /// then it kills the process. Which of the two happened is the answer: a peer that will not
    /// exit is a finding about the peer, not a reason to lose figures already read.
    pub fn shutdown(mut self) -> anyhow::Result<Ended> {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = writeln!(stdin, "shutdown");
        }
        let deadline = std::time::Instant::now() + self.shutdown_grace;
        let mut closed = false;
        loop {
            // The peer's last line says its store is closed.
            while let Ok(v) = self.lines.try_recv() {
                closed |= v["event"] == "shutdown";
            }
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    bail!(
                        "the {} peer exited with {status} after shutdown{}",
                        self.kind.name(),
                        self.stderr_tail()
                    );
                }
                return Ok(Ended::Exited);
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Ok(Ended::Killed { grace: self.shutdown_grace, store_closed: closed });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl PeerProcess {
    /// Kills the process with SIGKILL (as `kill -9`: no shutdown, the store left as it was) and
    /// reaps it.
    pub fn kill(mut self) -> anyhow::Result<()> {
        self.child.kill().with_context(|| format!("killing the {} peer", self.kind.name()))?;
        self.child.wait()?;
        Ok(())
    }
}

/// How a peer process ended after [`PeerProcess::shutdown`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It closed its store and exited with status 0.
    Exited,
    /// It had not exited `grace` after the shutdown command and was killed; `store_closed`:
    /// it had said its store was closed.
    Killed {
        /// How long it was given.
        grace: Duration,
        /// Whether it had answered that its store was closed.
        store_closed: bool,
    },
}

impl Ended {
    /// What to report about this end, if anything.
    pub fn note(self) -> Option<String> {
        match self {
            Self::Exited => None,
            Self::Killed { grace, store_closed } => Some(format!(
                "did not exit {} s after shutdown ({}); killed after its figures were read",
                grace.as_secs_f64(),
                if store_closed { "its store had closed" } else { "its store had not answered closed" }
            )),
        }
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A free TCP port on loopback.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Spawns a `logship` broker command (`role` names it in the error) logging at WARN, with no
/// stdin or stdout, keeping the last `keep` lines of its stderr.
pub(crate) fn spawn_logship(
    cmd: &mut Command,
    role: &str,
    keep: usize,
) -> anyhow::Result<(std::process::Child, Arc<Mutex<Vec<String>>>)> {
    let mut child = cmd
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start `logship {role}`"))?;
    let stderr = stderr_tail(child.stderr.take().context("stderr is piped")?, keep);
    Ok((child, stderr))
}

/// The last `keep` lines a child writes on `pipe`, kept by a thread until the pipe closes.
pub(crate) fn stderr_tail(pipe: std::process::ChildStderr, keep: usize) -> Arc<Mutex<Vec<String>>> {
    let tail = Arc::new(Mutex::new(Vec::new()));
    let sink = tail.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
            s.push(line);
            if s.len() > keep {
                s.remove(0);
            }
        }
    });
    tail
}

/// A spawned `logship slave` with default config but for the settings given.
pub struct LogshipSlave {
    child: Child,
    /// Its HTTP port (/status).
    pub port: u16,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl LogshipSlave {
    /// Starts `logship slave --store dir --master master` plus `--set` overrides, under the
    /// `wrap` command if one is given.
    pub fn start(dir: &Path, master: &str, sets: &[String], wrap: &[String]) -> anyhow::Result<Self> {
        // Its fast remoting port (`listenPort - 2`) is taken too.
        let port = super::clients::free_broker_port()?;
        let mut cmd = match wrap.split_first() {
            None => peer_command(Impl::Logship)?,
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(std::env::current_exe()?).arg("slave");
                c
            }
        };
        cmd.arg("--store").arg(dir).args(["--listen-port", &port.to_string(), "--master", master]);
        for s in sets {
            cmd.args(["--set", s]);
        }
        let (child, stderr) = spawn_logship(&mut cmd, "slave", 40)?;
        Ok(Self { child, port: port + 2, stderr })
    }

    /// Its last lines on stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr.lock().unwrap_or_else(|e| e.into_inner()).join("\n")
    }

    /// An error naming its exit status and last stderr lines if the process has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("`logship slave` exited with {status}:\n{}", self.stderr_tail());
        }
        Ok(())
    }

    /// The `logship slave` process: the child, or the wrapper's child if the wrapper forked.
    fn slave_pid(&self) -> u32 {
        let own = self.child.id();
        std::fs::read_to_string(format!("/proc/{own}/task/{own}/children"))
            .ok()
            .and_then(|c| c.split_whitespace().next().and_then(|p| p.parse().ok()))
            .unwrap_or(own)
    }

    /// Each thread of the slave: name, user and system CPU seconds, minor page faults.
    pub fn thread_report(&self) -> String {
        let pid = self.slave_pid();
        let mut out = format!("  slave {pid} threads (name: user s, system s, minor faults):");
        let tick = 100.0; // USER_HZ
        for entry in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            let Some((name, rest)) = stat.split_once(") ") else { continue };
            let name = name.split_once(" (").map_or(name, |(_, n)| n);
            let f: Vec<&str> = rest.split_whitespace().collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            // After the name: state is field 0, minflt 7, utime 11, stime 12.
            out.push_str(&format!("\n    {name}: {:.2}, {:.2}, {}", num(11) / tick, num(12) / tick, num(7)));
        }
        out
    }

    /// SIGTERM, then waits for the clean stop; an unclean exit is an error.
    pub fn stop(mut self) -> anyhow::Result<()> {
        let pid = self.slave_pid().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    bail!("`logship slave` exited with {status}:\n{}", self.stderr_tail());
                }
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                bail!("`logship slave` did not stop after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for LogshipSlave {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A peer program in bash: it answers `status` with one slave connected and every `bench
    /// P COUNT S` with one failed put; on `shutdown` it says its store is closed and then, if
    /// `exits` is false, never exits (as the rocketmq-rust peer did).
    pub(crate) fn fake_peer(exits: bool) -> Command {
        let after = if exits { "exit 0" } else { "exec sleep 600" };
        let script = format!(
            r#"echo '{{"event":"started","load":true,"haPort":1,"maxPhyOffset":0}}'
while read -r cmd a b c; do
  case "$cmd" in
    status) echo '{{"event":"status","maxPhyOffset":0,"connections":1,"slaveAck":0}}';;
    bench) echo "{{\"event\":\"bench\",\"secs\":0.5,\"puts\":$((b - 1)),\"failed\":1,\"firstFailure\":\"FLUSH_SLAVE_TIMEOUT\",\"p50us\":100.0,\"p99us\":200.0}}";;
    shutdown) echo '{{"event":"shutdown"}}'; {after};;
  esac
done"#
        );
        let mut c = Command::new("bash");
        c.arg("-c").arg(script).arg("fake-peer");
        c
    }

    pub(crate) fn spec(role: &'static str) -> PeerSpec {
        PeerSpec {
            role,
            dir: std::env::temp_dir(),
            segment: 1 << 20,
            flush: "ASYNC_FLUSH",
            master: (role == "SLAVE").then(|| "127.0.0.1:1".into()),
        }
    }

    /// A peer that will not exit after `shutdown` is killed after the grace period, and the
    /// answer says so (instead of an error that loses the pairing's figures).
    #[test]
    fn a_peer_that_does_not_exit_after_shutdown_is_killed_and_reported() {
        let mut p = PeerProcess::start_with(Impl::RocketmqRust, fake_peer(false), &spec("SLAVE")).unwrap();
        p.set_shutdown_grace(Duration::from_millis(300));
        let pid = p.child.id();
        let ended = p.shutdown().unwrap();
        assert_eq!(ended, Ended::Killed { grace: Duration::from_millis(300), store_closed: true });
        assert!(ended.note().unwrap().contains("killed after its figures were read"), "{ended:?}");
        // Reaped: no such process any more (a zombie would still have a /proc entry).
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "the peer {pid} is still there");
    }

    /// A peer that exits after `shutdown` ends with nothing to report.
    #[test]
    fn a_peer_that_exits_after_shutdown_ends_with_nothing_to_note() {
        let p = PeerProcess::start_with(Impl::RocketmqRust, fake_peer(true), &spec("SYNC_MASTER")).unwrap();
        let ended = p.shutdown().unwrap();
        assert_eq!(ended, Ended::Exited);
        assert_eq!(ended.note(), None);
    }
}
