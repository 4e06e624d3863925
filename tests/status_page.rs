//! The status page at `/` in a real headless browser (Debian's `chromium`), driven over the
//! DevTools protocol on `--remote-debugging-pipe`: it renders the broker's state, and, left
//! open, shows a replica going out of sync when that slave is stopped. Skips, saying so, when
//! chromium is not installed (CI installs it).

mod process;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use base64::Engine;
use process::{Broker, eventually, have};
use serde_json::{Value, json};

/// A headless chromium and one page, spoken to over the DevTools pipe.
struct Browser {
    child: Child,
    to: ChildStdin,
    from: Receiver<Value>,
    next_id: u64,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn open(url: &str) -> Self {
        let profile = tempfile::tempdir().unwrap();
        // chromium reads the protocol from fd 3 and writes it to fd 4: the shell moves this
        // process's pipes there.
        let command = format!(
            "exec chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
             --disable-background-networking --disable-component-update --disable-sync \
             --user-data-dir='{}' --window-size=1100,640 --remote-debugging-pipe about:blank \
             3<&0 4>&1 0</dev/null 1>/dev/null 2>/dev/null",
            profile.path().display()
        );
        let mut child = Command::new("sh")
            .args(["-c", &command])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let to = child.stdin.take().unwrap();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let (tx, from) = channel();
        std::thread::spawn(move || {
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                message.pop();
                if let Ok(v) = serde_json::from_slice::<Value>(&message) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
                message.clear();
            }
        });
        let mut browser = Self { child, to, from, next_id: 0, session: String::new(), _profile: profile };
        let target = browser.call(None, "Target.createTarget", json!({ "url": url }));
        let target_id = target["targetId"].as_str().unwrap().to_string();
        let attached =
            browser.call(None, "Target.attachToTarget", json!({ "targetId": target_id, "flatten": true }));
        browser.session = attached["sessionId"].as_str().unwrap().to_string();
        browser
    }

    /// Sends one command and waits for its answer; events in between are dropped.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            message["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        self.to.flush().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let reply = self.from.recv_timeout(left).unwrap_or_else(|_| panic!("no answer to {method}"));
            if reply["id"] == json!(id) {
                assert!(reply.get("error").is_none(), "{method} failed: {reply}");
                return reply["result"].clone();
            }
        }
    }

    /// Evaluates a JavaScript expression in the page; its JSON value.
    fn eval(&mut self, expression: &str) -> Value {
        let session = self.session.clone();
        let r = self.call(
            Some(&session),
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true }),
        );
        r["result"]["value"].clone()
    }

    /// A PNG of the page.
    fn screenshot(&mut self) -> Vec<u8> {
        let session = self.session.clone();
        let r = self.call(Some(&session), "Page.captureScreenshot", json!({ "format": "png" }));
        base64::engine::general_purpose::STANDARD.decode(r["data"].as_str().unwrap()).unwrap()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `data-*` state of one replica's row, or `None` if it has no row.
fn row(browser: &mut Browser, name: &str) -> Option<Value> {
    let v = browser.eval(&format!(
        "(() => {{ const r = document.querySelector('[data-replica=\"{name}\"]'); \
         return r ? {{ inSync: r.dataset.inSync, samplesIn: Number(r.dataset.samplesInSync), \
         samplesOut: Number(r.dataset.samplesOutOfSync), text: r.innerText, \
         charts: r.querySelectorAll('svg polyline').length }} : null }})()"
    ));
    (!v.is_null()).then_some(v)
}

fn save(png: &[u8], name: &str) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(name);
    std::fs::write(&path, png).unwrap();
    println!("screenshot: {}", path.display());
}

#[test]
fn status_page_renders_and_shows_a_stopped_replica_going_out_of_sync() {
    if !have("chromium", "status_page_renders_and_shows_a_stopped_replica_going_out_of_sync") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (master, mut slave) = Broker::pair(
        dir.path(),
        &[
            "--role",
            "SYNC_MASTER",
            "--set",
            "totalReplicas=2",
            "--set",
            "haReplicaAllowList=127.0.0.1",
            "--set",
            "replicaNames=broker-a-s1@127.0.0.1",
        ],
    );
    eventually("the slave to be in sync", || {
        master.status_doc().master().is_some_and(|m| m.slaves.len() == 1 && m.slaves[0].in_sync)
    });
    for i in 0..20 {
        assert_eq!(master.put(&format!("message {i}")), 200);
    }

    let mut browser = Browser::open(&master.url("/?every=200"));
    eventually("the page to show the slave in sync", || {
        row(&mut browser, "broker-a-s1")
            .is_some_and(|r| r["inSync"] == "true" && r["samplesIn"].as_u64() >= Some(2))
    });
    assert_eq!(browser.eval("document.body.dataset.role"), "SYNC_MASTER");
    assert_eq!(browser.eval("document.getElementById('fence').dataset.fenced"), "false");
    let max_offset = master.status_doc().max_offset;
    let cards = browser.eval("document.getElementById('cards').innerText").as_str().unwrap().to_string();
    assert!(cards.contains(&max_offset.to_string()), "max offset {max_offset} not shown: {cards}");
    let r = row(&mut browser, "broker-a-s1").unwrap();
    assert_eq!(r["charts"], 1, "one lag chart per replica: {r}");
    save(&browser.screenshot(), "status-page-in-sync.png");

    slave.kill9();
    // Puts the slave now misses (stored on the master, answered SLAVE_NOT_AVAILABLE): its lag grows.
    for i in 0..20 {
        master.put(&format!("missed {i}"));
    }
    eventually("the same page to show the replica out of sync", || {
        row(&mut browser, "broker-a-s1").is_some_and(|r| r["inSync"] == "false")
    });
    let r = row(&mut browser, "broker-a-s1").unwrap();
    assert!(r["samplesIn"].as_u64() >= Some(2), "its history keeps the in-sync samples: {r}");
    assert!(r["text"].as_str().unwrap().contains("not connected"), "{r}");
    let cards = browser.eval("document.getElementById('cards').innerText").as_str().unwrap().to_string();
    assert!(cards.contains("1 of 2"), "replicas in sync: {cards}");
    save(&browser.screenshot(), "status-page-out-of-sync.png");
}

/// With two slaves and no `totalReplicas`, a slave stopped with SIGTERM stays on the page as
/// away, the card reads `3 of 3` then `2 of 3` (never more in sync than expected), and
/// under-replication is coloured, on the card and the banner.
#[test]
fn status_page_keeps_a_stopped_slave_away_and_colours_under_replication() {
    if !have("chromium", "status_page_keeps_a_stopped_slave_away_and_colours_under_replication") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start("master", &dir.path().join("m"), process::free_port_pair(), &[]);
    let slave = |name: &str| {
        Broker::start(
            "slave",
            &dir.path().join(name),
            process::free_port_pair(),
            &["--master", &master.ha_addr()],
        )
    };
    let _s1 = slave("s1");
    let mut s2 = slave("s2");
    eventually("both slaves to be in sync", || {
        master
            .status_doc()
            .master()
            .is_some_and(|m| m.slaves.len() == 2 && m.slaves.iter().all(|r| r.in_sync))
    });

    let mut browser = Browser::open(&master.url("/?every=200"));
    let card = REPLICAS_CARD;
    eventually("the page to show 3 of 3", || {
        browser.eval(card)["text"].as_str().is_some_and(|t| t.contains("3 of 3"))
    });
    let healthy = browser.eval(card);
    assert_eq!(healthy["under"], "false", "{healthy}");
    assert_eq!(browser.eval("document.getElementById('fence').className"), "fence none");

    s2.terminate();
    eventually("the page to show 2 of 3", || {
        browser.eval(card)["text"].as_str().is_some_and(|t| t.contains("2 of 3"))
    });
    let under = browser.eval(card);
    assert_eq!(under["under"], "true", "{under}");
    assert_ne!(under["colour"], healthy["colour"], "under-replication is coloured: {under} vs {healthy}");
    assert_eq!(browser.eval("document.getElementById('fence').className"), "fence warn", "not all green");
    let banner = browser.eval("document.getElementById('fence').innerText");
    assert!(banner.as_str().unwrap().contains("under-replicated"), "{banner}");
    let rows =
        browser.eval("[...document.querySelectorAll('[data-replica]')].map(r => r.innerText).join('|')");
    assert!(rows.as_str().unwrap().contains("not connected"), "{rows}");
    save(&browser.screenshot(), "status-page-under-replicated.png");
}

/// The replicas card's text, whether it is marked under-replicated, and its value's colour.
const REPLICAS_CARD: &str = "(() => { const c = document.querySelector('[data-card=\"replicas\"]'); \
    return c ? { text: c.innerText, under: c.dataset.underReplicated, \
    colour: getComputedStyle(c.querySelector('.value')).color } : null })()";

/// With `totalReplicas=3` and one slave, the card reads `2 of 3`: it is marked and coloured as
/// under-replicated, and the banner is not all green (it once showed `2 of 3` in plain black
/// under a green banner).
#[test]
fn status_page_colours_two_of_three_total_replicas_as_under_replicated() {
    if !have("chromium", "status_page_colours_two_of_three_total_replicas_as_under_replicated") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start(
        "master",
        &dir.path().join("m"),
        process::free_port_pair(),
        &["--set", "totalReplicas=3"],
    );
    let _slave = Broker::start(
        "slave",
        &dir.path().join("s"),
        process::free_port_pair(),
        &["--master", &master.ha_addr()],
    );
    eventually("the slave to be in sync", || {
        master
            .status_doc()
            .master()
            .is_some_and(|m| m.slaves.len() == 1 && m.slaves.iter().all(|r| r.in_sync))
    });
    let mut browser = Browser::open(&master.url("/?every=200"));
    eventually("the page to show 2 of 3", || {
        browser.eval(REPLICAS_CARD)["text"].as_str().is_some_and(|t| t.contains("2 of 3"))
    });
    let under = browser.eval(REPLICAS_CARD);
    assert_eq!(under["under"], "true", "{under}");
    assert_ne!(under["colour"], "rgb(0, 0, 0)", "2 of 3 in plain black: {under}");
    assert_eq!(browser.eval("document.getElementById('fence').className"), "fence warn", "not all green");
}

const TOKEN: &str = "status-page-token-0123456789";

/// The page opened at `/#token=…` on a broker with `httpAuthToken` keeps the token for the tab,
/// drops it from the address and renders (the page once shadowed `window.history`, so that
/// every refresh threw `history.replaceState is not a function`).
#[test]
fn status_page_opened_with_a_token_in_the_address_renders() {
    if !have("chromium", "status_page_opened_with_a_token_in_the_address_renders") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let token = format!("httpAuthToken={TOKEN}");
    let master =
        Broker::start("master", &dir.path().join("m"), process::free_port_pair(), &["--set", &token]);
    let mut browser = Browser::open(&master.url(&format!("/?every=200#token={TOKEN}")));
    let state = "({ role: document.body.dataset.role || null, hash: location.hash, \
                 error: document.getElementById('error').hidden ? null : document.getElementById('error').innerText, \
                 token: sessionStorage.getItem('logshipToken') })";
    // Two refreshes at least: the first reads the token from the address, the next from the tab.
    std::thread::sleep(std::time::Duration::from_millis(600));
    eventually("the page to render or fail", || {
        let s = browser.eval(state);
        s["role"].is_string() || s["error"].is_string()
    });
    let s = browser.eval(state);
    assert_eq!(s["error"], Value::Null, "no error: {s}");
    assert_eq!(s["role"], "ASYNC_MASTER", "{s}");
    assert_eq!(s["hash"], "", "the token leaves the address: {s}");
    assert_eq!(s["token"], TOKEN, "{s}");
}

/// A slave that cannot store what its master sends (its mappedFileSizeCommitLog differs) shows
/// the cause on its page, as `/status` and `logship status` give it.
#[test]
fn status_page_of_a_slave_gives_the_cause_it_cannot_replicate() {
    if !have("chromium", "status_page_of_a_slave_gives_the_cause_it_cannot_replicate") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::start("master", &dir.path().join("m"), process::free_port_pair(), &[]);
    let slave = Broker::start(
        "slave",
        &dir.path().join("s"),
        process::free_port_pair(),
        &["--master", &master.ha_addr(), "--set", "mappedFileSizeCommitLog=2097152"],
    );
    let body = vec![b'y'; 64 * 1024];
    for _ in 0..20 {
        assert_eq!(master.post("/topics/OpsTopic/messages", &body).0, 200);
    }
    let mut browser = Browser::open(&slave.url("/?every=200"));
    eventually("the slave's page to give the cause", || {
        browser
            .eval("document.getElementById('fence').innerText")
            .as_str()
            .is_some_and(|t| t.contains("set mappedFileSizeCommitLog=1048576"))
    });
    assert_eq!(browser.eval("document.getElementById('fence').className"), "fence active");
}
