//! Real etcd for tests: a cluster of `etcd` processes on loopback ports with temporary data
//! directories, started and stopped by the test; and a TCP proxy that can cut a client off.
//!
//! Tests skip (with a message) when `etcd` is not installed, unless `LOGSHIP_REQUIRE_ETCD=1`.
#![allow(dead_code, unreachable_pub)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Whether the tests may run: `etcd` is on PATH. Without it, panics under
/// `LOGSHIP_REQUIRE_ETCD=1` and otherwise prints why the test skips.
pub fn etcd_available(test: &str) -> bool {
    let found =
        Command::new("etcd").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !found {
        assert!(
            std::env::var("LOGSHIP_REQUIRE_ETCD").as_deref() != Ok("1"),
            "LOGSHIP_REQUIRE_ETCD=1 but `etcd` is not installed (Debian: apt-get install etcd-server)"
        );
        eprintln!("skipping {test}: `etcd` is not installed (Debian: apt-get install etcd-server)");
    }
    found
}

fn free_port() -> u16 {
    free_port_on(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

fn free_port_on(ip: IpAddr) -> u16 {
    TcpListener::bind((ip, 0)).unwrap().local_addr().unwrap().port()
}

struct Node {
    name: String,
    host: IpAddr,
    client_port: u16,
    peer_port: u16,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// TLS on etcd's client port: its certificate and key (PEM), the CA that signed it and the
/// clients' certificates, and whether a client must present one (`--client-cert-auth`).
#[derive(Clone)]
pub struct ServerTls {
    /// The CA's certificate, PEM.
    pub ca_pem: String,
    /// etcd's certificate (for 127.0.0.1), PEM.
    pub cert_pem: String,
    /// Its key, PEM.
    pub key_pem: String,
    /// A client certificate and key the CA signed, PEM, for the health checks.
    pub client: (String, String),
    /// Clients must present a certificate the CA signed.
    pub client_cert_auth: bool,
}

/// A cluster of etcd processes; killed and removed when dropped.
pub struct EtcdCluster {
    nodes: Vec<Node>,
    initial_cluster: String,
    token: String,
    tls: Option<(ServerTls, [PathBuf; 3])>,
    _dir: tempfile::TempDir,
}

impl EtcdCluster {
    /// Starts `n` members and waits until every one reports healthy.
    pub fn start(n: usize) -> Self {
        Self::start_on(n, IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    /// Starts `n` members listening on `host` (a local address: loopback, or the host side of
    /// a test's own network namespaces) and waits until every one reports healthy.
    pub fn start_on(n: usize, host: IpAddr) -> Self {
        Self::start_with(n, host, None)
    }

    /// Starts `n` members on loopback whose client ports speak TLS only (`https://`).
    pub fn start_tls(n: usize, tls: ServerTls) -> Self {
        Self::start_with(n, IpAddr::V4(Ipv4Addr::LOCALHOST), Some(tls))
    }

    fn start_with(n: usize, host: IpAddr, tls: Option<ServerTls>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tls = tls.map(|t| {
            let files = ["ca.pem", "etcd.pem", "etcd.key"].map(|f| dir.path().join(f));
            for (path, pem) in files.iter().zip([&t.ca_pem, &t.cert_pem, &t.key_pem]) {
                std::fs::write(path, pem).unwrap();
            }
            (t, files)
        });
        let nodes: Vec<Node> = (0..n)
            .map(|i| Node {
                name: format!("n{i}"),
                host,
                client_port: free_port_on(host),
                peer_port: free_port_on(host),
                data_dir: dir.path().join(format!("n{i}.etcd")),
                log: dir.path().join(format!("n{i}.log")),
                child: None,
            })
            .collect();
        let initial_cluster = nodes
            .iter()
            .map(|n| format!("{}=http://{}:{}", n.name, n.host, n.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let token = format!("logship-test-{}-{}", std::process::id(), nodes[0].client_port);
        let mut cluster = Self { nodes, initial_cluster, token, tls, _dir: dir };
        for i in 0..n {
            cluster.spawn(i);
        }
        cluster.wait_healthy();
        cluster
    }

    /// `http` or, with TLS, `https`.
    fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    fn spawn(&mut self, i: usize) {
        let node = &self.nodes[i];
        let client = format!("{}://{}:{}", self.scheme(), node.host, node.client_port);
        let peer = format!("http://{}:{}", node.host, node.peer_port);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&node.log).unwrap();
        let child = Command::new("etcd")
            .args(["--name", &node.name, "--data-dir"])
            .arg(&node.data_dir)
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster, "--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", &self.token])
            .args(["--listen-metrics-urls", ""])
            .args(self.tls_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn etcd");
        self.nodes[i].child = Some(child);
    }

    fn tls_args(&self) -> Vec<String> {
        let Some((tls, [ca, cert, key])) = &self.tls else { return Vec::new() };
        let mut args = vec![
            "--cert-file".to_string(),
            cert.display().to_string(),
            "--key-file".to_string(),
            key.display().to_string(),
            "--trusted-ca-file".to_string(),
            ca.display().to_string(),
        ];
        if tls.client_cert_auth {
            args.push("--client-cert-auth".to_string());
        }
        args
    }

    /// Every member's client URL.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| format!("{}://{}:{}", self.scheme(), n.host, n.client_port)).collect()
    }

    /// An HTTP client for the members' `/health`: trusting the test CA and presenting the
    /// client certificate when the cluster speaks TLS.
    fn health_agent(&self) -> ureq::Agent {
        let mut config = ureq::Agent::config_builder().timeout_global(Some(Duration::from_millis(500)));
        if let Some((tls, _)) = &self.tls {
            use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig};
            let ca = Certificate::from_pem(tls.ca_pem.as_bytes()).unwrap().to_owned();
            let cert = Certificate::from_pem(tls.client.0.as_bytes()).unwrap().to_owned();
            let key = PrivateKey::from_pem(tls.client.1.as_bytes()).unwrap().to_owned();
            let tls = TlsConfig::builder()
                .root_certs(RootCerts::new_with_certs(&[ca]))
                .client_cert(Some(ClientCert::new_with_certs(&[cert], key)))
                .build();
            config = config.tls_config(tls);
        }
        config.build().into()
    }

    /// Member `i`'s client address.
    pub fn client_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.nodes[i].host, self.nodes[i].client_port)
    }

    /// kill -9 member `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its data directory (then [`wait_healthy`](Self::wait_healthy)).
    pub fn restart(&mut self, i: usize) {
        assert!(self.nodes[i].child.is_none(), "member {i} is running");
        self.spawn(i);
    }

    /// How many members the cluster has.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether member `i` runs (it was not killed, or was restarted since).
    pub fn is_running(&self, i: usize) -> bool {
        self.nodes[i].child.is_some()
    }

    /// Sends `SIGSTOP` (`stop`) or `SIGCONT` to member `i`: it is away, its connections open.
    pub fn pause(&mut self, i: usize, stop: bool) {
        if let Some(child) = &self.nodes[i].child {
            let sig = if stop { "-STOP" } else { "-CONT" };
            let _ = Command::new("kill").args([sig, &child.id().to_string()]).status();
        }
    }

    /// Every member's log so far, for a failure message.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("--- etcd {}:\n{}", n.name, std::fs::read_to_string(&n.log).unwrap_or_default()))
            .collect()
    }

    /// Waits (bounded) until every running member answers `/health` with a leader.
    pub fn wait_healthy(&mut self) {
        let agent = self.health_agent();
        let scheme = self.scheme();
        for _ in 0..600 {
            let healthy = self.nodes.iter_mut().filter(|n| n.child.is_some()).all(|n| {
                if let Some(status) = n.child.as_mut().unwrap().try_wait().unwrap() {
                    let log = std::fs::read_to_string(&n.log).unwrap_or_default();
                    panic!("etcd {} exited with {status}:\n{log}", n.name);
                }
                let url = format!("{scheme}://{}:{}/health", n.host, n.client_port);
                agent
                    .get(&url)
                    .call()
                    .ok()
                    .and_then(|mut r| r.body_mut().read_to_string().ok())
                    .is_some_and(|body| body.contains("\"true\""))
            });
            if healthy {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let logs: Vec<String> =
            self.nodes.iter().map(|n| std::fs::read_to_string(&n.log).unwrap_or_default()).collect();
        panic!("etcd did not become healthy within 60 s:\n{}", logs.join("\n---\n"));
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}

/// A TCP proxy to one address that can stop forwarding (a partition: connections stay open,
/// nothing gets through) and resume.
pub struct Proxy {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a loopback port and forwards every connection to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cut);
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = tokio::net::TcpStream::connect(target).await else { continue };
                let (ri, wi) = inbound.into_split();
                let (ro, wo) = outbound.into_split();
                tokio::spawn(pipe(ri, wo, Arc::clone(&flag)));
                tokio::spawn(pipe(ro, wi, Arc::clone(&flag)));
            }
        });
        Self { addr, cut, task }
    }

    /// The URL clients use.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops forwarding in both directions.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// Resumes forwarding (held bytes go through, as after a healed partition).
    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        while cut.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while cut.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
