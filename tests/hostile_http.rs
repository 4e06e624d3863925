//! Issue 14, HTTP and resource side: strangers on the HTTP port, and load shaped to exhaust the
//! broker (descriptors, connections, memory, shutdown). Each test spawns the `logship` binary
//! with small limits of its own (`setrlimit` in the child, small caps in config) and talks to it
//! over real loopback sockets.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

mod process;

use process::{BIN, eventually, log_until, ready_addresses, spawn_logship, wait_exit};
const TOKEN: &str = "s3cret-token-0123456789";

fn agent() -> ureq::Agent {
    process::agent()
}

fn agent_with(tls: Option<&ureq::tls::TlsConfig>) -> ureq::Agent {
    process::agent_with(Duration::from_secs(10), tls)
}

/// Test certificates (ECDSA P-256, valid for a century): a CA, a server certificate for
/// 127.0.0.1 and a client certificate it signed, and a self-signed stranger.
fn tls_file(name: &str) -> String {
    format!("{}/tests/data/tls/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A client trusting the test CA, presenting `client` (`"client"`, `"stranger"`) if given.
fn tls_client(client: Option<&str>) -> ureq::tls::TlsConfig {
    use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig};
    let ca = Certificate::from_pem(&std::fs::read(tls_file("ca.pem")).unwrap()).unwrap();
    let mut b = TlsConfig::builder().root_certs(RootCerts::new_with_certs(&[ca]));
    if let Some(name) = client {
        let cert = Certificate::from_pem(&std::fs::read(tls_file(&format!("{name}.pem"))).unwrap()).unwrap();
        let key = PrivateKey::from_pem(&std::fs::read(tls_file(&format!("{name}.key"))).unwrap()).unwrap();
        b = b.client_cert(Some(ClientCert::new_with_certs(&[cert], key)));
    }
    b.build()
}

/// A broker process.
struct Broker {
    child: Child,
    ip: IpAddr,
    port: u16,
    args: Vec<String>,
    nofile: Option<(u64, u64)>,
    token: Option<String>,
    tls: Option<ureq::tls::TlsConfig>,
    stderr: Arc<Mutex<String>>,
}

/// What a test changes about how the broker starts.
#[derive(Clone, Default)]
struct Start {
    /// `--set` keys.
    sets: Vec<String>,
    /// RLIMIT_NOFILE (soft, hard) for the child.
    nofile: Option<(u64, u64)>,
    /// The address to reach the HTTP port at (default 127.0.0.1).
    ip: Option<IpAddr>,
    /// The bearer token to send.
    token: Option<String>,
    /// Speak HTTPS with this client configuration.
    tls: Option<ureq::tls::TlsConfig>,
}

impl Start {
    fn set(mut self, kv: &str) -> Self {
        self.sets.push(kv.to_string());
        self
    }
}

impl Broker {
    fn master(dir: &Path, start: Start) -> Self {
        // Port 0 for both ports: parallel tests never race for a free port; the broker logs the
        // address it bound.
        let mut args = vec![
            "master".to_string(),
            "--store".into(),
            dir.display().to_string(),
            "--listen-port".into(),
            "0".into(),
            "--ha-listen-port".into(),
            "0".into(),
        ];
        let defaults =
            ["mappedFileSizeCommitLog=1048576", "maxMessageSize=262144", "haSendHeartbeatInterval=200"];
        for kv in defaults.iter().map(|s| s.to_string()).chain(start.sets) {
            args.push("--set".into());
            args.push(kv);
        }
        let (child, stderr) = spawn_logship(&args, start.nofile);
        let ip = start.ip.unwrap_or(IpAddr::from([127, 0, 0, 1]));
        let mut broker = Self {
            child,
            ip,
            port: 0,
            args,
            nofile: start.nofile,
            token: start.token,
            tls: start.tls,
            stderr,
        };
        broker.wait_ready();
        broker
    }

    /// The HTTP port of the "logship ready" line, once it is logged.
    fn bound_port(&self) -> Option<u16> {
        ready_addresses(&self.log()).map(|(http, _)| http.port())
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip, self.port)
    }

    fn url(&self, path: &str) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.addr())
    }

    fn agent(&self) -> ureq::Agent {
        agent_with(self.tls.as_ref())
    }

    fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    fn wait_ready(&mut self) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if let Some(port) = self.bound_port() {
                self.port = port;
                if self.get("/status").0 == 200 {
                    return;
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("broker exited with {status}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("broker on {} did not start:\n{}", self.addr(), self.log());
    }

    fn authorize<B>(&self, r: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(t) => r.header("Authorization", &format!("Bearer {t}")),
            None => r,
        }
    }

    /// GET: status code and JSON body (Null when it is not JSON, 0 when unreachable).
    fn get(&self, path: &str) -> (u16, Value) {
        match self.authorize(self.agent().get(self.url(path))).call() {
            Ok(mut r) => {
                let code = r.status().as_u16();
                let text = r.body_mut().read_to_string().unwrap_or_default();
                (code, serde_json::from_str(&text).unwrap_or(Value::Null))
            }
            Err(_) => (0, Value::Null),
        }
    }

    fn put(&self, topic: &str, query: &str, body: &str) -> (u16, Value) {
        let url = self.url(&format!("/topics/{topic}/messages{query}"));
        match self.authorize(self.agent().post(url)).send(body) {
            Ok(mut r) => {
                let code = r.status().as_u16();
                let text = r.body_mut().read_to_string().unwrap_or_default();
                (code, serde_json::from_str(&text).unwrap_or(Value::Null))
            }
            Err(e) => panic!("put failed: {e}\n{}", self.log()),
        }
    }

    fn restart(&mut self) {
        self.kill();
        let (child, stderr) = spawn_logship(&self.args, self.nofile);
        self.child = child;
        self.stderr = stderr;
        self.wait_ready();
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads what the server sends until it closes the connection; `None` if it was still open
/// after 20 s (a hang detector).
fn read_until_closed(stream: &mut TcpStream) -> Option<String> {
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Some(String::from_utf8_lossy(&got).into_owned()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return None,
            // A reset also means the server closed it.
            Err(_) => return Some(String::from_utf8_lossy(&got).into_owned()),
        }
    }
}

/// The first response head on `stream` within `wait`, if any.
fn read_response_head(stream: &mut TcpStream, wait: Duration) -> Option<String> {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    (!got.is_empty()).then(|| String::from_utf8_lossy(&got).into_owned())
}

/// A POST whose header promises `len` body bytes, of which `sent` are sent; the rest never come.
fn stalled_put(addr: SocketAddr, len: usize, sent: usize) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /topics/Stalled/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Length: {len}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&vec![b'a'; sent]).unwrap();
    s
}

// ---------------------------------------------------------------------------------------------
// Finding 4 (HTTP part): strangers read and write every topic.

#[test]
fn without_the_bearer_token_every_route_answers_401() {
    let dir = tempfile::tempdir().unwrap();
    let token = format!("httpAuthToken={TOKEN}");
    let master =
        Broker::master(dir.path(), Start { token: Some(TOKEN.into()), ..Start::default() }.set(&token));
    assert_eq!(master.put("T", "", "secret").0, 200, "the token holder puts");
    let routes = ["/status", "/metrics", "/topics/T/queues/0/messages?offset=0"];
    for presented in [None, Some("Bearer wrong-token-0123456789"), Some("Basic czNjcmV0"), Some(TOKEN)] {
        fn with<B>(r: ureq::RequestBuilder<B>, presented: Option<&str>) -> ureq::RequestBuilder<B> {
            match presented {
                Some(v) => r.header("Authorization", v),
                None => r,
            }
        }
        for route in routes {
            let r = with(agent().get(master.url(route)), presented).call().unwrap();
            assert_eq!(r.status(), 401, "GET {route} with {presented:?}");
            assert_eq!(r.headers().get("www-authenticate").unwrap(), "Bearer realm=\"logship\"");
        }
        let r = with(agent().post(master.url("/topics/T/messages")), presented).send("forged").unwrap();
        assert_eq!(r.status(), 401, "POST with {presented:?}");
    }
    let (code, read) = master.get("/topics/T/queues/0/messages?offset=0");
    assert_eq!(code, 200);
    let bodies: Vec<_> = read["messages"].as_array().unwrap().iter().map(|m| m["body"].clone()).collect();
    assert_eq!(bodies, ["secret"], "the refused put stored nothing");
    // The status page is static: it loads without the token and then asks /status with it.
    let mut page = agent().get(master.url("/")).call().unwrap();
    assert_eq!(page.status(), 200, "the static status page needs no token");
    let html = page.body_mut().read_to_string().unwrap();
    assert!(html.contains("Authorization") && !html.contains("secret"), "the page holds no data");
}

#[test]
fn a_token_file_works_like_the_token_and_a_short_token_is_refused_without_echoing_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let set = format!("httpAuthTokenFile={}", file.display());
    let master = Broker::master(
        &dir.path().join("m"),
        Start { token: Some(TOKEN.into()), ..Start::default() }.set(&set),
    );
    assert_eq!(master.get("/status").0, 200);
    let anonymous = agent().get(master.url("/status")).call().unwrap();
    assert_eq!(anonymous.status(), 401);
    let out = Command::new(BIN)
        .args([
            "master",
            "--store",
            &dir.path().join("x").display().to_string(),
            "--set",
            "httpAuthToken=short1",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("httpAuthToken") && !err.contains("short1"), "{err}");
}

#[test]
fn with_a_client_ca_only_clients_holding_its_certificates_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(
        dir.path(),
        Start { tls: Some(tls_client(Some("client"))), ..Start::default() }
            .set(&format!("httpTlsCertFile={}", tls_file("server.pem")))
            .set(&format!("httpTlsKeyFile={}", tls_file("server.key")))
            .set(&format!("httpTlsClientCaFile={}", tls_file("ca.pem"))),
    );
    assert_eq!(master.put("T", "", "over mTLS").0, 200);
    let (code, read) = master.get("/topics/T/queues/0/messages?offset=0");
    assert_eq!((code, &read["messages"][0]["body"]), (200, &Value::from("over mTLS")));
    let status = master.url("/status");
    for (who, tls) in
        [("no certificate", tls_client(None)), ("a stranger's certificate", tls_client(Some("stranger")))]
    {
        let r = agent_with(Some(&tls)).get(&status).call();
        assert!(r.is_err(), "{who} was served: {:?}", r.map(|r| r.status()));
    }
    let plain = agent().get(format!("http://{}/status", master.addr())).call();
    assert!(plain.is_err() || plain.is_ok_and(|r| r.status() != 200), "plain HTTP was served");
    // A stranger's handshake that never completes is closed too.
    let mut silent = TcpStream::connect(master.addr()).unwrap();
    assert!(read_until_closed(&mut silent).is_some(), "a silent TLS client kept its connection");
}

#[test]
fn https_without_client_certificates_serves_any_client_that_trusts_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(
        dir.path(),
        Start { tls: Some(tls_client(None)), ..Start::default() }
            .set(&format!("httpTlsCertFile={}", tls_file("server.pem")))
            .set(&format!("httpTlsKeyFile={}", tls_file("server.key")))
            .set("httpHeaderTimeout=1000"),
    );
    assert_eq!(master.put("T", "", "over TLS").0, 200);
    let out = Command::new(BIN)
        .args(["master", "--store", &dir.path().join("x").display().to_string()])
        .args(["--set", &format!("httpTlsCertFile={}", tls_file("server.pem"))])
        .args(["--set", &format!("httpTlsKeyFile={}", tls_file("client.key"))])
        .args(["--listen-port", "0", "--ha-listen-port", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("httpTlsKeyFile") && err.contains("does not match"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Finding 11: a non-loopback brokerIP1 binds 0.0.0.0; no bind-address option.

#[test]
fn listen_address_binds_only_the_named_ip() {
    let dir = tempfile::tempdir().unwrap();
    let ip: IpAddr = "127.0.0.2".parse().unwrap();
    let master =
        Broker::master(dir.path(), Start { ip: Some(ip), ..Start::default() }.set("listenAddress=127.0.0.2"));
    assert_eq!(master.get("/status").0, 200);
    let other =
        TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], master.port)), Duration::from_secs(5));
    assert!(other.is_err(), "127.0.0.1 must not reach a broker bound to 127.0.0.2");
}

#[test]
fn a_non_loopback_broker_ip_is_not_bound_on_every_interface() {
    let dir = tempfile::tempdir().unwrap();
    // 192.0.2.1 (TEST-NET-1) is on no host: the HTTP port may only bind it, which fails loudly.
    let store = dir.path().join("a").display().to_string();
    let (mut child, stderr) = spawn_logship(
        &[
            "master",
            "--store",
            &store,
            "--listen-port",
            "0",
            "--ha-listen-port",
            "0",
            "--set",
            "brokerIP1=192.0.2.1",
            // The HA port on loopback: off it, with no replica named, the broker refuses to
            // start before it binds anything (protected mode).
            "--set",
            "haListenAddress=127.0.0.1",
        ]
        .map(String::from),
        None,
    );
    let status = wait_exit(&mut child);
    let _ = child.kill();
    let _ = child.wait();
    let log = log_until(&stderr, "listenAddress");
    assert!(status.is_some_and(|s| s.code() == Some(2)), "still serving: {log}");
    assert!(log.contains("192.0.2.1"), "{log}");
    // With listenAddress=127.0.0.1 it serves there and on no other address of the host.
    let master = Broker::master(
        &dir.path().join("b"),
        Start::default().set("brokerIP1=192.0.2.1").set("listenAddress=127.0.0.1"),
    );
    assert_eq!(master.put("T", "", "x").0, 200);
    let elsewhere =
        TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 3], master.port)), Duration::from_secs(5));
    assert!(elsewhere.is_err(), "a wildcard bind would answer on 127.0.0.3");
}

// ---------------------------------------------------------------------------------------------
// Finding 6: descriptors run out (consume queues, unbounded queueId, idle HTTP connections).

#[test]
fn a_put_to_a_queue_id_beyond_default_topic_queue_nums_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(dir.path(), Start::default().set("defaultTopicQueueNums=4"));
    assert_eq!(master.put("T", "?queueId=3", "x").0, 200);
    for q in ["4", "1009", "2147483647"] {
        let (code, reply) = master.put("T", &format!("?queueId={q}"), "x");
        assert_eq!(code, 400, "queueId={q}: {reply}");
        let e = reply["error"].as_str().unwrap();
        assert!(e.contains(&format!("queueId {q} is illegal")) && e.contains("defaultTopicQueueNums"), "{e}");
    }
    let (code, _) = master.get("/topics/T/queues/4/messages");
    assert_eq!(code, 400);
    assert!(!dir.path().join("consumequeue/T/4").exists(), "no queue was created for a refused put");
}

#[test]
fn the_soft_open_file_limit_is_raised_to_the_hard_limit() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(dir.path(), Start { nofile: Some((64, 2048)), ..Start::default() });
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", master.child.id())).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap().to_string();
    let numbers: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers, ["2048", "2048"], "{line}");
}

#[test]
fn hundreds_of_consume_queues_fit_in_a_small_descriptor_limit_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    // Soft = hard = 96: the broker cannot raise it. Every (topic, queue) below is a consume
    // queue file; with a descriptor held per file the broker runs out after a few dozen.
    let start = Start { nofile: Some((96, 96)), ..Start::default() }.set("defaultTopicQueueNums=2");
    let mut master = Broker::master(dir.path(), start);
    let topics = 150;
    for t in 0..topics {
        for q in 0..2 {
            let (code, reply) =
                master.put(&format!("Topic{t}"), &format!("?queueId={q}"), &format!("m{t}.{q}"));
            assert_eq!(code, 200, "put {t}/{q}: {reply}\n{}", master.log());
        }
    }
    assert_eq!(master.get("/status").0, 200);
    master.restart();
    for t in [0, topics / 2, topics - 1] {
        let (code, read) = master.get(&format!("/topics/Topic{t}/queues/1/messages?offset=0"));
        assert_eq!(code, 200, "{read}");
        assert_eq!(read["messages"][0]["body"], format!("m{t}.1"));
    }
    assert_eq!(master.put("After", "", "x").0, 200, "{}", master.log());
}

#[test]
fn idle_http_connections_are_closed_and_new_ones_still_served() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(
        dir.path(),
        Start { nofile: Some((256, 256)), ..Start::default() }
            .set("httpMaxConnections=16")
            .set("httpHeaderTimeout=1000"),
    );
    // Three times the connection cap, each sending nothing.
    let mut idle: Vec<TcpStream> = (0..48).map(|_| TcpStream::connect(master.addr()).unwrap()).collect();
    for (i, s) in idle.iter_mut().enumerate() {
        assert!(read_until_closed(s).is_some(), "idle connection {i} was never closed");
    }
    assert_eq!(master.get("/status").0, 200);
    assert_eq!(master.put("T", "", "after the flood").0, 200);
}

#[test]
fn connections_beyond_the_cap_are_answered_503_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // The broker's cap, not a client's: no per-client cap here.
    let master = Broker::master(
        dir.path(),
        Start::default().set("httpMaxConnections=4").set("httpMaxConnectionsPerIp=0"),
    );
    // Hold four connections, each answered once (a slot the readiness probe just left may still
    // be held for a moment: such a connection is answered 503, and is replaced).
    let mut held = Vec::new();
    let start = Instant::now();
    while held.len() < 4 {
        assert!(start.elapsed() < Duration::from_secs(30), "could not hold 4 connections");
        let mut s = TcpStream::connect(master.addr()).unwrap();
        s.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let head = read_response_head(&mut s, Duration::from_secs(10)).unwrap_or_default();
        if head.starts_with("HTTP/1.1 200") {
            held.push(s);
        } else {
            assert!(head.starts_with("HTTP/1.1 503"), "{head}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let mut extra = TcpStream::connect(master.addr()).unwrap();
    let answer = read_until_closed(&mut extra).expect("the extra connection is closed");
    assert!(answer.starts_with("HTTP/1.1 503") && answer.contains("httpMaxConnections"), "{answer}");
    drop(held);
    eventually("a slot to free", || master.get("/status").0 == 200);
}

/// A connection to `to` from the source address `from` (any loopback address will do).
fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(from, 0).into()).unwrap();
    socket.connect(&to.into()).unwrap();
    socket.into()
}

#[test]
fn one_client_ip_cannot_take_every_connection() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(
        dir.path(),
        Start::default().set("httpMaxConnections=64").set("httpMaxConnectionsPerIp=4"),
    );
    let stranger: IpAddr = "127.0.0.9".parse().unwrap();
    // The stranger's first four connections are served.
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut s = connect_from(stranger, master.addr());
        s.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let head = read_response_head(&mut s, Duration::from_secs(10)).unwrap_or_default();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        held.push(s);
    }
    // A fifth, and a flood of idle ones, are refused at once...
    for i in 0..20 {
        let mut s = connect_from(stranger, master.addr());
        let answer = read_until_closed(&mut s).expect("refused at once");
        assert!(answer.starts_with("HTTP/1.1 503"), "connection {i}: {answer}");
    }
    // ...while another client is served.
    let mut other = connect_from("127.0.0.10".parse().unwrap(), master.addr());
    other.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let head = read_response_head(&mut other, Duration::from_secs(10)).unwrap_or_default();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

#[test]
fn a_half_sent_header_is_closed_after_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(dir.path(), Start::default().set("httpHeaderTimeout=500"));
    let mut s = TcpStream::connect(master.addr()).unwrap();
    s.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\n").unwrap();
    assert!(read_until_closed(&mut s).is_some(), "a half-sent header kept its connection");
}

// ---------------------------------------------------------------------------------------------
// Finding 7: memory is unbounded per request.

#[test]
fn one_pull_returns_at_most_max_transfer_bytes_and_count() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(
        dir.path(),
        Start::default()
            .set("maxTransferBytesOnMessageInMemory=250000")
            .set("maxTransferCountOnMessageInMemory=5"),
    );
    let big = "b".repeat(100_000);
    for _ in 0..6 {
        assert_eq!(master.put("Big", "", &big).0, 200);
    }
    for _ in 0..8 {
        assert_eq!(master.put("Small", "", "s").0, 200);
    }
    let (code, read) = master.get("/topics/Big/queues/0/messages?offset=0&max=100");
    assert_eq!(code, 200);
    assert_eq!(read["messages"].as_array().unwrap().len(), 2, "two 100 kB messages fit in 250 kB");
    assert_eq!(read["nextOffset"], 2);
    let (_, read) = master.get("/topics/Small/queues/0/messages?offset=0&max=100");
    assert_eq!(read["messages"].as_array().unwrap().len(), 5, "maxTransferCountOnMessageInMemory");
    assert_eq!(read["nextOffset"], 5);
    // A message above the byte cap still comes, alone, so a consumer always progresses.
    let dir2 = tempfile::tempdir().unwrap();
    let tight = Broker::master(dir2.path(), Start::default().set("maxTransferBytesOnMessageInMemory=1000"));
    for _ in 0..3 {
        assert_eq!(tight.put("Big", "", &big).0, 200);
    }
    let (_, read) = tight.get("/topics/Big/queues/0/messages?offset=1&max=32");
    assert_eq!(read["messages"].as_array().unwrap().len(), 1);
    assert_eq!((&read["status"], &read["nextOffset"]), (&Value::from("FOUND"), &Value::from(2)));
}

#[test]
fn a_stalled_body_is_answered_408_and_closed() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(dir.path(), Start::default().set("httpBodyTimeout=500"));
    let mut s = stalled_put(master.addr(), 100_000, 10);
    let answer = read_until_closed(&mut s).expect("a stalled body kept its connection");
    assert!(answer.starts_with("HTTP/1.1 408") && answer.contains("httpBodyTimeout"), "{answer}");
}

#[test]
fn stalled_bodies_beyond_the_in_flight_budget_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(
        dir.path(),
        // The broker's budget, not a client's: no per-client budget here.
        Start::default()
            .set("maxMessageSize=100000")
            .set("httpMaxInFlightBytes=250000")
            .set("httpMaxInFlightBytesPerIp=0"),
    );
    // Two 100 kB bodies that never finish hold 200 kB of the 250 kB budget.
    let _stalled: Vec<TcpStream> = (0..2).map(|_| stalled_put(master.addr(), 100_000, 1000)).collect();
    // A third one is refused at once (not held), while small puts still go through.
    let mut refused = None;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let mut probe = stalled_put(master.addr(), 100_000, 0);
        refused = read_response_head(&mut probe, Duration::from_secs(2));
        if refused.as_deref().is_some_and(|r| r.starts_with("HTTP/1.1 503")) {
            break;
        }
    }
    assert!(
        refused.as_deref().is_some_and(|r| r.starts_with("HTTP/1.1 503")),
        "{refused:?}\n{}",
        master.log()
    );
    let (code, reply) = master.put("T", "", "small");
    assert_eq!(code, 200, "{reply}");
}

#[test]
fn a_pull_is_refused_before_it_is_built_when_the_in_flight_budget_cannot_hold_it() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(
        dir.path(),
        Start::default()
            .set("maxMessageSize=100000")
            .set("httpMaxInFlightBytes=500000")
            .set("httpMaxInFlightBytesPerIp=0")
            .set("maxTransferBytesOnMessageInMemory=1000000"),
    );
    let big = "p".repeat(90_000);
    for _ in 0..2 {
        assert_eq!(master.put("Big", "", &big).0, 200);
    }
    // Alone, a pull that needs more than the whole budget takes all of it and is served.
    let (code, read) = master.get("/topics/Big/queues/0/messages?offset=0");
    assert_eq!((code, read["messages"].as_array().map(Vec::len)), (200, Some(2)));
    // While a stalled body holds part of the budget, the same pull is refused at once.
    let _stalled = stalled_put(master.addr(), 100_000, 10);
    eventually("the pull to be refused while the body is held", || {
        let (code, reply) = master.get("/topics/Big/queues/0/messages?offset=0");
        code == 503 && reply["error"].as_str().is_some_and(|e| e.contains("httpMaxInFlightBytes"))
    });
    drop(_stalled);
    eventually("the pull to be served again", || {
        master.get("/topics/Big/queues/0/messages?offset=0").0 == 200
    });
}

// ---------------------------------------------------------------------------------------------
// Out-of-range offsets answer RocketMQ's statuses, never a 500.

#[test]
fn out_of_range_offsets_answer_rocketmq_statuses_not_500() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(dir.path(), Start::default());
    for i in 0..3 {
        assert_eq!(master.put("T", "", &format!("m{i}")).0, 200);
    }
    let cases = [
        ("/topics/T/queues/0/messages?offset=1", 200, "FOUND", 3),
        ("/topics/T/queues/0/messages?offset=3", 200, "OFFSET_OVERFLOW_ONE", 3),
        ("/topics/T/queues/0/messages?offset=10", 416, "OFFSET_OVERFLOW_BADLY", 3),
        ("/topics/T/queues/0/messages?offset=18446744073709551615", 416, "OFFSET_OVERFLOW_BADLY", 3),
        ("/topics/T/queues/1/messages?offset=0", 200, "NO_MESSAGE_IN_QUEUE", 0),
        ("/topics/T/queues/1/messages?offset=7", 416, "NO_MESSAGE_IN_QUEUE", 0),
        ("/topics/Nobody/queues/0/messages?offset=5", 416, "NO_MESSAGE_IN_QUEUE", 0),
    ];
    for (path, code, status, next) in cases {
        let (got, reply) = master.get(path);
        assert_eq!((got, reply["status"].as_str()), (code, Some(status)), "{path}: {reply}");
        assert_eq!(reply["nextOffset"], next, "{path}");
    }
}

// ---------------------------------------------------------------------------------------------
// Finding 8: SIGTERM never finishes while a client holds a half-sent header or a stalled body.

#[test]
fn sigterm_closes_a_half_sent_header_and_a_stalled_body_within_the_drain_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut master = Broker::master(
        dir.path(),
        Start::default()
            .set("shutdownDrainTimeout=1000")
            .set("httpHeaderTimeout=600000")
            .set("httpBodyTimeout=600000")
            .set("httpIdleTimeout=600000"),
    );
    assert_eq!(master.put("T", "", "before").0, 200);
    let mut header = TcpStream::connect(master.addr()).unwrap();
    header.write_all(b"POST /topics/T/messages HTTP/1.1\r\nHost: x\r\nContent-Le").unwrap();
    let _body = stalled_put(master.addr(), 100_000, 10);
    // Both connections are accepted (the broker answers a third one) before the signal.
    assert_eq!(master.get("/status").0, 200);
    let status = process::terminate(&mut master.child);
    let log = master.log();
    assert!(status.is_some_and(|s| s.success()), "SIGTERM did not finish: {status:?}\n{log}");
    assert!(log.contains("logship stopped cleanly"), "{log}");
    assert!(!dir.path().join("abort").exists(), "a drained shutdown is clean, not a crash");
}

// ---------------------------------------------------------------------------------------------
// Issue 22, section 4: HTTP.

/// Runs `logship master` with `sets` and expects it to refuse to start: its stderr, once it
/// exited with code 2. Panics if it starts serving instead (a hang detector, not a timer).
fn refused_at_start(dir: &Path, sets: &[String]) -> String {
    let mut args: Vec<String> =
        ["master", "--store", &dir.display().to_string(), "--listen-port", "0", "--ha-listen-port", "0"]
            .map(String::from)
            .to_vec();
    for kv in sets {
        args.extend(["--set".to_string(), kv.clone()]);
    }
    let (mut child, stderr) = spawn_logship(&args, None);
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let log = stderr.lock().unwrap().clone();
            assert_eq!(status.code(), Some(2), "{log}");
            return log;
        }
        let log = stderr.lock().unwrap().clone();
        if log.contains("logship ready") || start.elapsed() > process::EXIT_PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the broker started instead of refusing {sets:?}:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_empty_token_or_a_blank_token_file_is_a_configuration_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let log = refused_at_start(&dir.path().join("a"), &["httpAuthToken=".to_string()]);
    assert!(log.contains("httpAuthToken") && log.contains("empty"), "{log}");
    for (i, blank) in ["", "\n", "  \r\n\t\n"].into_iter().enumerate() {
        let file = dir.path().join(format!("blank-{i}"));
        std::fs::write(&file, blank).unwrap();
        let log = refused_at_start(
            &dir.path().join(format!("b{i}")),
            &[format!("httpAuthTokenFile={}", file.display())],
        );
        assert!(log.contains("httpAuthTokenFile") && log.contains(&file.display().to_string()), "{log}");
        assert!(log.contains("empty"), "{log}");
    }
}

#[test]
fn a_token_file_without_bound_is_refused_naming_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    let log = refused_at_start(dir.path(), &["httpAuthTokenFile=/dev/zero".to_string()]);
    assert!(log.contains("httpAuthTokenFile") && log.contains("64 KiB"), "{log}");
}

/// Sends `GET /status` with one header `X-Big` of `size` bytes; the response head.
fn get_with_header_of(addr: SocketAddr, size: usize) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    let request = format!("GET /status HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "h".repeat(size));
    s.write_all(request.as_bytes()).unwrap();
    read_response_head(&mut s, Duration::from_secs(10)).unwrap_or_default()
}

#[test]
fn a_request_header_above_64_kib_is_refused_with_431_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(dir.path(), Start::default());
    let head = get_with_header_of(master.addr(), 60 << 10);
    assert!(head.starts_with("HTTP/1.1 200"), "a 60 KiB header is served: {head}");
    for size in [65 << 10, 100 << 10, 1 << 20] {
        let mut s = TcpStream::connect(master.addr()).unwrap();
        let request = format!("GET /status HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "h".repeat(size));
        let _ = s.write_all(request.as_bytes());
        let answer = read_until_closed(&mut s).unwrap_or_default();
        assert!(answer.starts_with("HTTP/1.1 431"), "a {size}-byte header: {answer:.200}");
        if size < 1 << 20 {
            assert!(answer.contains("64 KiB"), "the answer says why: {answer}");
        }
    }
    // Many headers adding up to more than 64 KiB are refused the same way.
    let mut s = TcpStream::connect(master.addr()).unwrap();
    let headers: String = (0..90).map(|i| format!("X-H{i}: {}\r\n", "m".repeat(800))).collect();
    s.write_all(format!("GET /status HTTP/1.1\r\nHost: x\r\n{headers}\r\n").as_bytes()).unwrap();
    let head = read_response_head(&mut s, Duration::from_secs(10)).unwrap_or_default();
    assert!(head.starts_with("HTTP/1.1 431"), "{head}");
    assert_eq!(master.get("/status").0, 200);
}

/// A put of `body` from `from` on a new connection: the response head.
fn put_from(from: IpAddr, to: SocketAddr, body: &str) -> String {
    let mut s = connect_from(from, to);
    let request = format!(
        "POST /topics/Legit/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).unwrap();
    read_until_closed(&mut s).unwrap_or_default()
}

#[test]
fn one_client_reopening_connections_leaves_connections_for_the_others_by_default() {
    let dir = tempfile::tempdir().unwrap();
    // Only httpMaxConnections is set: the per-client cap is on by default.
    // Idle connections stay open for the whole test.
    let master = Broker::master(
        dir.path(),
        Start::default()
            .set("httpMaxConnections=100")
            .set("httpHeaderTimeout=120000")
            .set("httpIdleTimeout=240000"),
    );
    let stranger: IpAddr = "127.0.0.9".parse().unwrap();
    // The stranger opens connections and keeps every one it gets, re-opening refused ones.
    let mut held = Vec::new();
    for _ in 0..150 {
        let mut s = connect_from(stranger, master.addr());
        s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => held.push(s),
            _ => {} // answered (refused) or closed: open another
        }
    }
    let legit: IpAddr = "127.0.0.1".parse().unwrap();
    let failed: Vec<String> = (0..30)
        .map(|i| put_from(legit, master.addr(), &format!("legit {i}")))
        .filter(|answer| !answer.starts_with("HTTP/1.1 200"))
        .collect();
    assert!(failed.is_empty(), "{} of 30 legitimate puts failed: {:?}", failed.len(), failed.first());
    // A refused connection is answered 503 with a reason, not reset, even after it sent its
    // request.
    let mut s = connect_from(stranger, master.addr());
    let body = "x".repeat(60_000);
    let request = format!(
        "POST /topics/T/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(request.as_bytes());
    let answer = read_until_closed(&mut s).unwrap_or_default();
    assert!(
        answer.starts_with("HTTP/1.1 503") && answer.contains("httpMaxConnectionsPerIp"),
        "a refused client gets 503 with the reason: {answer:?}"
    );
    drop(held);
}

#[test]
fn a_refused_connection_is_answered_503_even_when_its_request_is_already_sent() {
    let dir = tempfile::tempdir().unwrap();
    let master = Broker::master(
        dir.path(),
        Start::default().set("httpMaxConnections=64").set("httpMaxConnectionsPerIp=2"),
    );
    let client: IpAddr = "127.0.0.7".parse().unwrap();
    // The client's two connections, each answered once and kept open.
    let held: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = connect_from(client, master.addr());
            s.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let head = read_response_head(&mut s, Duration::from_secs(10)).unwrap_or_default();
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            s
        })
        .collect();
    let body = "y".repeat(200_000);
    for i in 0..10 {
        let mut s = connect_from(client, master.addr());
        let request = format!(
            "POST /topics/T/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let _ = s.write_all(request.as_bytes());
        let answer = read_until_closed(&mut s).unwrap_or_default();
        assert!(answer.starts_with("HTTP/1.1 503"), "refusal {i} was not answered 503: {answer:?}");
        assert!(answer.contains("httpMaxConnectionsPerIp"), "{answer}");
    }
    drop(held);
}

#[test]
fn stalled_bodies_from_one_client_leave_the_in_flight_budget_to_the_others() {
    let dir = tempfile::tempdir().unwrap();
    // 8 MiB in flight in all; nothing sets a per-client budget: it is on by default.
    let master = Broker::master(dir.path(), Start::default().set("httpMaxInFlightBytes=8388608"));
    let stranger: IpAddr = "127.0.0.9".parse().unwrap();
    let len = 262_144; // maxMessageSize in these tests
    let stalled: Vec<TcpStream> = (0..32)
        .map(|_| {
            let mut s = connect_from(stranger, master.addr());
            let head =
                format!("POST /topics/Stalled/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n");
            s.write_all(head.as_bytes()).unwrap();
            s.write_all(b"abc").unwrap();
            s
        })
        .collect();
    // Every stalled body has been read as far as it goes (or refused) before the others put.
    std::thread::sleep(Duration::from_millis(500));
    let legit: IpAddr = "127.0.0.1".parse().unwrap();
    let failed: Vec<String> = (0..30)
        .map(|i| put_from(legit, master.addr(), &format!("legit {i}")))
        .filter(|answer| !answer.starts_with("HTTP/1.1 200"))
        .collect();
    assert!(failed.is_empty(), "{} of 30 legitimate puts failed: {:?}", failed.len(), failed.first());
    // The stranger's own next body is refused at once, naming its budget.
    let mut probe = connect_from(stranger, master.addr());
    probe
        .write_all(
            format!("POST /topics/T/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
    let head = read_until_closed(&mut probe).unwrap_or_default();
    assert!(head.starts_with("HTTP/1.1 503") && head.contains("httpMaxInFlightBytesPerIp"), "{head}");
    drop(stalled);
}
