//! The `roost` binary under load a client can cause on purpose: many password checks at
//! once, and many slow or idle connections. Each test runs the real binary and looks at
//! the process from outside (its memory in `/proc`, whether `/healthz` still answers).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::{
    io::{BufRead, BufReader},
    net::{IpAddr, Ipv4Addr},
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::Value;

/// A roost child, killed when dropped (a failed test leaves no server behind).
struct Roost(Child);

impl Drop for Roost {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Roost {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

/// A running `roost serve`: the child (killed when dropped), its address, and the log
/// lines that say `accept` failed.
struct Served {
    roost: Roost,
    addr: String,
    accept_failures: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// `roost serve` on an ephemeral port with `extra` flags, started by `sh` after
/// `ulimit -Sn {soft}` when a soft descriptor limit is given (the hard limit stays).
fn serve_with(data_dir: &std::path::Path, soft: Option<u64>, extra: &[&str]) -> Served {
    let ulimit = soft.map_or_else(String::new, |soft| format!("ulimit -Sn {soft} && "));
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("{ulimit}exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_roost"))
        .env_remove("ROOST_DATABASE_URL")
        .env_remove("ROOST_ADDR")
        .env("RUST_LOG", "info")
        .args(["serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--update-index-url", ""])
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let accept_failures = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = accept_failures.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("accept failed") || line.contains("Too many open files") {
                seen.lock().unwrap().push(line.clone());
            }
            if let Ok(event) = serde_json::from_str::<Value>(&line)
                && event["fields"]["message"] == "listening"
            {
                let _ = tx.send(event["fields"]["addr"].as_str().unwrap_or_default().to_owned());
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(30)).expect("roost listens");
    Served { roost: Roost(child), addr, accept_failures }
}

/// `roost serve` with `extra` flags: the child and its address.
fn serve(data_dir: &std::path::Path, extra: &[&str]) -> (Roost, String) {
    let served = serve_with(data_dir, None, extra);
    (served.roost, served.addr)
}

/// The highest resident memory (MiB) a process reaches while it is watched.
struct PeakRss {
    peak: std::sync::Arc<std::sync::Mutex<f64>>,
    sampler: tokio::task::JoinHandle<()>,
}

impl PeakRss {
    /// Samples process `pid` every 20 ms from now on.
    fn watch(pid: u32) -> Self {
        let peak = std::sync::Arc::new(std::sync::Mutex::new(rss_mib(pid)));
        let seen = peak.clone();
        let sampler = tokio::spawn(async move {
            loop {
                let now = rss_mib(pid);
                {
                    let mut peak = seen.lock().unwrap();
                    *peak = peak.max(now);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Self { peak, sampler }
    }

    /// Stops watching: the peak.
    fn stop(self) -> f64 {
        self.sampler.abort();
        *self.peak.lock().unwrap()
    }
}

/// The resident memory of process `pid`, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024.0
}

/// One sign-in attempt from loopback address `from` (any of 127.0.0.0/8): the status.
async fn sign_in(addr: &str, from: Ipv4Addr, email: &str, password: &str) -> u16 {
    let client = reqwest::Client::builder()
        .local_address(IpAddr::V4(from))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let csrf = "0123456789abcdef0123456789abcdef";
    client
        .post(format!("http://{addr}/login"))
        .header("cookie", format!("roost_csrf={csrf}"))
        .form(&[("email", email), ("password", password), ("csrf", csrf)])
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A hundred sign-ins at once, each from its own address (so the brake lets every one
/// reach argon2): the hashing bound keeps roost's memory where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_sign_ins_leave_memory_where_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let (child, addr) = serve(dir.path(), &["--signup", "open"]);
    // Warm up: the decoy hash, the hashing buffers, the page templates.
    for n in 0..4 {
        assert_eq!(sign_in(&addr, Ipv4Addr::new(127, 0, 1, n), "warm@example.com", "not the password").await, 401);
    }
    let idle = rss_mib(child.id());
    let watch = PeakRss::watch(child.id());
    let attempts = (0..100u8).map(|n| {
        let addr = addr.clone();
        tokio::spawn(async move {
            sign_in(&addr, Ipv4Addr::new(127, 0, 2, n + 1), &format!("user{n}@example.com"), "wrong password!").await
        })
    });
    let statuses: Vec<u16> = futures::future::join_all(attempts).await.into_iter().map(Result::unwrap).collect();
    let peak = watch.stop();
    let after = rss_mib(child.id());
    eprintln!("RSS: idle {idle:.1} MiB, peak {peak:.1} MiB, after {after:.1} MiB; statuses {statuses:?}");
    assert!(statuses.iter().all(|s| *s == 401 || *s == 429), "{statuses:?}");
    assert!(statuses.iter().filter(|s| **s == 401).count() >= 50, "most waited for a worker: {statuses:?}");
    assert!(after - idle < 150.0, "RSS grew from {idle:.1} to {after:.1} MiB");
    assert!(peak - idle < 150.0, "RSS peaked at {peak:.1} MiB from {idle:.1}");
    drop(child);
}

/// The soft and hard "Max open files" of process `pid`.
fn open_file_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let mut fields = line["Max open files".len()..].split_whitespace();
    (fields.next().unwrap().to_owned(), fields.next().unwrap().to_owned())
}

/// `/healthz` over a new connection, within `within`.
async fn healthz(addr: &str, within: Duration) -> u16 {
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).timeout(within).build().unwrap();
    client.get(format!("http://{addr}/healthz")).send().await.unwrap().status().as_u16()
}

/// Whether the server has closed `socket` (a read sees the end, perhaps after a last frame
/// such as HTTP/2's GOAWAY).
async fn closed_by_server(socket: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt as _;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(2), socket.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

/// A thousand sockets that hold a connection without using it (silent, half a header, an
/// idle keep-alive, an HTTP/2 preface): `/healthz` answers all along, and each is closed
/// after its timeout, while a stream that is being read stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_connections_are_closed_and_healthz_answers() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    // This test opens a thousand sockets itself.
    let mut own = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    own.current = own.maximum;
    rustix::process::setrlimit(rustix::process::Resource::Nofile, own).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let flags = ["--header-read-timeout-secs", "2", "--idle-timeout-secs", "4"];
    let Served { roost: child, addr, accept_failures } = serve_with(dir.path(), Some(256), &flags);
    let (soft, hard) = open_file_limits(child.id());
    assert_eq!(soft, hard, "roost raised its open-file limit to the hard limit");

    let mut sockets = Vec::new();
    for n in 0..1000 {
        let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
        match n % 4 {
            0 => {} // silent
            1 => socket.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").await.unwrap(),
            2 => {
                socket.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
                let mut answer = [0u8; 512];
                let read = socket.read(&mut answer).await.unwrap();
                assert!(answer[..read].starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&answer[..read]));
            }
            _ => socket.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap(),
        }
        sockets.push(socket);
        if n % 250 == 249 {
            assert_eq!(healthz(&addr, Duration::from_secs(2)).await, 200, "with {} slow sockets open", n + 1);
        }
    }
    let http = reqwest::Client::new();
    let mut stream = http.get(format!("http://{addr}/api/brain-stream")).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    for _ in 0..5 {
        assert_eq!(healthz(&addr, Duration::from_secs(2)).await, 200, "with 1,000 slow sockets open");
    }

    tokio::time::sleep(Duration::from_secs(6)).await;
    let mut still_open = [0; 4];
    for (n, socket) in sockets.iter_mut().enumerate() {
        if !closed_by_server(socket).await {
            still_open[n % 4] += 1;
        }
    }
    assert_eq!(still_open, [0; 4], "every slow or idle socket was closed (silent, half a header, keep-alive, h2)");
    // The stream has nothing to say, but is being read: it stays.
    assert!(tokio::time::timeout(Duration::from_millis(500), stream.chunk()).await.is_err(), "the SSE stream is open");
    drop(child);

    // At the connection cap (as under a low descriptor limit), an arriving connection takes
    // the place of the one idle longest: behind 300 silent sockets and a cap of 100,
    // /healthz is answered at once, accept never runs out, and the oldest sockets are the
    // ones closed.
    assert_eq!(*accept_failures.lock().unwrap(), Vec::<String>::new());
    let capped = [&flags[..], &["--max-connections", "100"]].concat();
    let Served { roost: child, addr, accept_failures } = serve_with(dir.path(), Some(256), &capped);
    let mut sockets = Vec::new();
    for _ in 0..300 {
        sockets.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    let started = std::time::Instant::now();
    assert_eq!(healthz(&addr, Duration::from_secs(2)).await, 200);
    eprintln!("/healthz behind 300 silent sockets and a cap of 100: {:?}", started.elapsed());
    assert!(closed_by_server(&mut sockets[0]).await, "the oldest idle socket made room");
    assert_eq!(*accept_failures.lock().unwrap(), Vec::<String>::new(), "the cap kept accept from failing");
    drop(child);
}

/// An OTLP traces request of about `mib` MiB made of tiny attributes (what costs the most
/// to decode per byte), spans of trace `trace`.
fn tiny_attribute_spans(mib: usize, trace: u8) -> Vec<u8> {
    use opentelemetry_proto::tonic::{
        collector::trace::v1::ExportTraceServiceRequest,
        common::v1::{AnyValue, KeyValue, any_value::Value as Any},
        trace::v1::{ResourceSpans, ScopeSpans, Span},
    };
    use prost::Message as _;
    let attributes: Vec<KeyValue> = (0..128)
        .map(|n| KeyValue {
            key: format!("k{n}"),
            value: Some(AnyValue { value: Some(Any::StringValue("v".into())) }),
            ..Default::default()
        })
        .collect();
    let one = Span { attributes, trace_id: vec![trace; 16], ..Default::default() }.encoded_len();
    let now =
        u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()).unwrap();
    let spans: Vec<Span> = (0..(mib * 1024 * 1024 / one) as u64)
        .map(|n| Span {
            trace_id: vec![trace; 16],
            span_id: (n + 1).to_be_bytes().to_vec(),
            name: "s".into(),
            start_time_unix_nano: now,
            end_time_unix_nano: now + 1,
            attributes: (0..128)
                .map(|k| KeyValue {
                    key: format!("k{k}"),
                    value: Some(AnyValue { value: Some(Any::StringValue("v".into())) }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// Eight 30 MB exports of tiny attributes at once (947 MiB of RSS before; 2.1 GiB with no
/// budget and today's allocator): the ingest budget decodes what fits (one such export at
/// a time by default), tells the rest to come back (429, Retry-After), and every export is
/// stored in the end. Measured: about 400 MiB over idle at the peak.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_large_exports_stay_within_the_ingest_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (child, addr) = serve(dir.path(), &[]);
    let bodies: Vec<Vec<u8>> = (0..8).map(|n| tiny_attribute_spans(30, n + 1)).collect();
    let idle = rss_mib(child.id());
    let watch = PeakRss::watch(child.id());
    let started = std::time::Instant::now();
    let exports = bodies.into_iter().map(|body| {
        let addr = addr.clone();
        tokio::spawn(async move {
            let client = reqwest::Client::builder().timeout(Duration::from_secs(300)).build().unwrap();
            let mut refusals = 0;
            loop {
                let answer = client
                    .post(format!("http://{addr}/v1/traces"))
                    .header("content-type", "application/x-protobuf")
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                match answer.status().as_u16() {
                    200 => return refusals,
                    429 => {
                        assert_eq!(answer.headers()["retry-after"], "1");
                        refusals += 1;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    other => panic!("export answered {other}"),
                }
            }
        })
    });
    let refusals: Vec<u32> = futures::future::join_all(exports).await.into_iter().map(Result::unwrap).collect();
    let peak = watch.stop();
    eprintln!(
        "8 × 30 MB exports: RSS idle {idle:.1} MiB, peak {peak:.1} MiB; 429s per export {refusals:?}; all stored in {:?}",
        started.elapsed()
    );
    assert!(refusals.iter().sum::<u32>() > 0, "some waited for room");
    assert!(peak - idle < 550.0, "RSS peaked {:.1} MiB over idle", peak - idle);
}
