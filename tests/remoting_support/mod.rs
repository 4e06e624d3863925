//! A blocking remoting client for the tests (what a RocketMQ client puts on the wire, built
//! with `logship-remoting`), and a fake NameServer that records what brokers send it.
#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use logship_remoting::header::{CommandHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader};
use logship_remoting::{FrameDecoder, RemotingCommand, RequestCode, ResponseCode};

/// One connection to a broker.
pub struct Client {
    pub stream: TcpStream,
    decoder: FrameDecoder,
    next_opaque: i32,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
        stream.set_nodelay(true).unwrap();
        Self { stream, decoder: FrameDecoder::new(), next_opaque: 100 }
    }

    /// Writes raw bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// The next frame within `limit`; `None` at EOF or on timeout.
    pub fn read_frame(&mut self, limit: Duration) -> Option<RemotingCommand> {
        let deadline = Instant::now() + limit;
        let mut buf = [0u8; 65536];
        loop {
            if let Some(cmd) = self.decoder.decode().expect("the broker sends whole frames") {
                return Some(cmd);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.stream.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => self.decoder.feed(&buf[..n]),
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    return None;
                }
                Err(_) => return None,
            }
        }
    }

    /// Whether the broker closed the connection (EOF within `limit`).
    pub fn closed_within(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            self.stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return true,
            }
        }
        false
    }

    /// Sends `request` with a fresh opaque and waits (10 s) for its answer.
    pub fn call(&mut self, mut request: RemotingCommand) -> RemotingCommand {
        self.next_opaque += 1;
        request.opaque = self.next_opaque;
        self.write(&request.to_bytes().unwrap());
        loop {
            let r = self.read_frame(Duration::from_secs(10)).expect("an answer within 10 s");
            if r.is_response() && r.opaque == request.opaque {
                return r;
            }
        }
    }
}

/// A Java 5.5 client's `SEND_MESSAGE_V2` header.
pub fn v2(topic: &str, queue_id: i32, properties: &str) -> SendMessageRequestHeaderV2 {
    SendMessageRequestHeaderV2 {
        a: "PG".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 4,
        e: queue_id,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some(properties.into()),
        j: Some(0),
        k: Some(false),
        m: Some(false),
        ..Default::default()
    }
}

/// `SEND_MESSAGE_V2` of `body`.
pub fn send_request(topic: &str, queue_id: i32, properties: &str, body: &[u8]) -> RemotingCommand {
    RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)
        .with_version(513)
        .with_header(&v2(topic, queue_id, properties))
        .with_body(body.to_vec())
}

/// The send answer's header.
pub fn sent(r: &RemotingCommand) -> SendMessageResponseHeader {
    SendMessageResponseHeader::from_ext_fields(&r.ext_fields)
        .unwrap_or_else(|e| panic!("not a send answer ({e}): code {} {:?}", r.code, r.remark))
}

/// How a fake NameServer answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameServerMode {
    /// SUCCESS, with `masterAddr`/`haServerAddr` for a registrant whose id is not 0 (the last
    /// id-0 registration's).
    Answer,
    /// Reads and never answers.
    Silent,
    /// Answers with bytes that are not a frame.
    Garbage,
}

/// A fake NameServer: records every command, answers as `mode` says.
pub struct FakeNameServer {
    pub addr: SocketAddr,
    pub received: Arc<Mutex<Vec<(Instant, RemotingCommand)>>>,
    pub mode: Arc<Mutex<NameServerMode>>,
    stop: Arc<AtomicBool>,
}

impl FakeNameServer {
    pub fn start(mode: NameServerMode) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let received: Arc<Mutex<Vec<(Instant, RemotingCommand)>>> = Arc::default();
        let mode = Arc::new(Mutex::new(mode));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, m, st) = (received.clone(), mode.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                let (r, m, st) = (r.clone(), m.clone(), st.clone());
                std::thread::spawn(move || {
                    let mut d = FrameDecoder::new();
                    let mut buf = [0u8; 65536];
                    stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
                    while !st.load(Ordering::SeqCst) {
                        match stream.read(&mut buf) {
                            Ok(0) => return,
                            Ok(n) => d.feed(&buf[..n]),
                            Err(_) => continue,
                        }
                        while let Ok(Some(cmd)) = d.decode() {
                            let answer = match *m.lock().unwrap() {
                                NameServerMode::Silent => None,
                                NameServerMode::Garbage => Some(b"\xff\xff\xff\xffgarbage".to_vec()),
                                NameServerMode::Answer => {
                                    let mut resp = RemotingCommand::response(ResponseCode::SUCCESS)
                                        .with_opaque(cmd.opaque)
                                        .with_version(513);
                                    if cmd.code == RequestCode::REGISTER_BROKER.0
                                        && cmd.ext_fields.get("brokerId").is_some_and(|id| id != "0")
                                    {
                                        let master = r.lock().unwrap().iter().rev().find_map(
                                            |(_, c): &(Instant, RemotingCommand)| {
                                                (c.code == RequestCode::REGISTER_BROKER.0
                                                    && c.ext_fields
                                                        .get("brokerId")
                                                        .is_some_and(|id| id == "0"))
                                                .then(|| {
                                                    (
                                                        c.ext_fields["brokerAddr"].clone(),
                                                        c.ext_fields["haServerAddr"].clone(),
                                                    )
                                                })
                                            },
                                        );
                                        if let Some((addr, ha)) = master {
                                            resp = resp
                                                .with_ext_field("masterAddr", addr)
                                                .with_ext_field("haServerAddr", ha);
                                        }
                                    }
                                    Some(resp.to_bytes().unwrap().to_vec())
                                }
                            };
                            r.lock().unwrap().push((Instant::now(), cmd));
                            if let Some(bytes) = answer {
                                if stream.write_all(&bytes).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        Self { addr, received, mode, stop }
    }

    /// The commands with `code` received so far.
    pub fn received(&self, code: RequestCode) -> Vec<RemotingCommand> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, c)| c.code == code.0)
            .map(|(_, c)| c.clone())
            .collect()
    }
}

impl Drop for FakeNameServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}
