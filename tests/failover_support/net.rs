//! Network namespaces for a broker group, made by the test itself: one namespace per broker,
//! each joined by a veth pair to a bridge in the test's own namespace. The bridge side holds two
//! addresses of a private /24 that only this test uses: `.1`, where the workload's connections
//! come from, and `.2`, where etcd listens. Broker `i` is `.(10 + i)`.
//!
//! A partition is made with blackhole routes (`ip route add blackhole ADDR/32`) inside the
//! namespaces, on both sides of every cut link: packets towards the other side are dropped, and
//! established connections see nothing more, as on a real cut. Everything is removed on drop.
//!
//! Needs root and `ip` (iproute2); [`Net::available`] probes for both.

use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// Serializes choosing a free /24 among this process's tests.
static CHOOSE: Mutex<()> = Mutex::new(());
static NEXT: AtomicU32 = AtomicU32::new(0);

/// Runs `ip ARGS`; an error with its stderr if it fails.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).stdin(Stdio::null()).output().map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// A broker group's namespaces and bridge.
#[derive(Debug)]
pub struct Net {
    bridge: String,
    /// `10.X.Y`: the /24 of this group.
    prefix: String,
    namespaces: Vec<String>,
    host_veths: Vec<String>,
    /// The blackhole routes in place: (namespace or None for the test's own, address).
    cuts: Mutex<Vec<(Option<String>, IpAddr)>>,
}

impl Net {
    /// Whether namespaces can be made here: root, and a probe namespace can be added and removed.
    pub fn available() -> Result<(), String> {
        let uid = Command::new("id").arg("-u").output().map_err(|e| format!("id: {e}"))?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            return Err("not root: `ip netns add` needs CAP_SYS_ADMIN".into());
        }
        let probe = format!("lsp{}x{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
        ip(&["netns", "add", &probe])?;
        ip(&["netns", "del", &probe])
    }

    /// Makes `n` namespaces on a /24 no interface here uses yet.
    pub fn create(n: usize) -> Result<Self, String> {
        let _guard = CHOOSE.lock().unwrap_or_else(|e| e.into_inner());
        let used = String::from_utf8_lossy(&Command::new("ip").args(["-o", "addr"]).output().unwrap().stdout)
            .into_owned();
        let pid = std::process::id();
        let k = NEXT.fetch_add(1, Ordering::SeqCst);
        let start = pid.wrapping_mul(7).wrapping_add(k * 13);
        let third = (0..250u32)
            .map(|j| (start + j) % 250 + 1)
            .find(|t| !used.contains(&format!("10.213.{t}.")))
            .ok_or("no free 10.213.X.0/24")?;
        let tag = format!("{}{}", pid % 100_000, k % 100);
        let mut net = Self {
            bridge: format!("lsb{tag}"),
            prefix: format!("10.213.{third}"),
            namespaces: Vec::new(),
            host_veths: Vec::new(),
            cuts: Mutex::new(Vec::new()),
        };
        net.build(n, &tag)?;
        Ok(net)
    }

    fn build(&mut self, n: usize, tag: &str) -> Result<(), String> {
        let p = self.prefix.clone();
        ip(&["link", "add", &self.bridge, "type", "bridge"])?;
        ip(&["addr", "add", &format!("{p}.1/24"), "dev", &self.bridge])?;
        ip(&["addr", "add", &format!("{p}.2/24"), "dev", &self.bridge])?;
        ip(&["link", "set", &self.bridge, "up"])?;
        for i in 0..n {
            let ns = format!("ls{tag}n{i}");
            let host = format!("lsv{tag}h{i}");
            ip(&["netns", "add", &ns])?;
            self.namespaces.push(ns.clone());
            ip(&["link", "add", &host, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
            self.host_veths.push(host.clone());
            ip(&["link", "set", &host, "master", &self.bridge])?;
            ip(&["link", "set", &host, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["-n", &ns, "addr", "add", &format!("{p}.{}/24", 10 + i), "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        }
        Ok(())
    }

    /// The address the workload's connections come from (the bridge's first address).
    pub fn client_ip(&self) -> IpAddr {
        self.addr(1)
    }

    /// The address etcd listens on.
    pub fn etcd_ip(&self) -> IpAddr {
        self.addr(2)
    }

    /// Broker `i`'s address, in its namespace.
    pub fn broker_ip(&self, i: usize) -> IpAddr {
        self.addr(10 + i as u8)
    }

    /// Broker `i`'s namespace.
    pub fn namespace(&self, i: usize) -> &str {
        &self.namespaces[i]
    }

    fn addr(&self, last: u8) -> IpAddr {
        let mut parts = self.prefix.split('.').map(|s| s.parse::<u8>().unwrap());
        let (a, b, c) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
        IpAddr::V4(Ipv4Addr::new(a, b, c, last))
    }

    fn blackhole(&self, ns: Option<&str>, to: IpAddr) -> Result<(), String> {
        let dst = format!("{to}/32");
        match ns {
            Some(ns) => ip(&["-n", ns, "route", "add", "blackhole", &dst])?,
            None => ip(&["route", "add", "blackhole", &dst])?,
        }
        self.cuts.lock().unwrap().push((ns.map(str::to_string), to));
        Ok(())
    }

    /// Cuts broker `i` off from every other broker (both directions), from etcd when
    /// `etcd_too`, and from the workload when `client_too`.
    pub fn isolate(&self, i: usize, etcd_too: bool, client_too: bool) -> Result<(), String> {
        let me = self.namespaces[i].clone();
        for j in (0..self.namespaces.len()).filter(|&j| j != i) {
            self.blackhole(Some(&me), self.broker_ip(j))?;
            self.blackhole(Some(&self.namespaces[j].clone()), self.broker_ip(i))?;
        }
        if etcd_too {
            // etcd never opens a connection to a broker: dropping the broker's side is enough.
            self.blackhole(Some(&me), self.etcd_ip())?;
        }
        if client_too {
            self.blackhole(Some(&me), self.client_ip())?;
            self.blackhole(None, self.broker_ip(i))?;
        }
        Ok(())
    }

    /// Removes every cut.
    pub fn heal(&self) {
        let cuts = std::mem::take(&mut *self.cuts.lock().unwrap());
        for (ns, to) in cuts {
            let dst = format!("{to}/32");
            let r = match &ns {
                Some(ns) => ip(&["-n", ns, "route", "del", "blackhole", &dst]),
                None => ip(&["route", "del", "blackhole", &dst]),
            };
            if let Err(e) = r {
                eprintln!("heal: {e}");
            }
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.heal();
        for ns in &self.namespaces {
            let _ = ip(&["netns", "del", ns]);
        }
        for veth in &self.host_veths {
            let _ = ip(&["link", "del", veth]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}
