//! The egress proxy: a hosted agent's only way out to the network, and the operator's rules
//! for it.
//!
//! An agent's sandbox has an empty network namespace, so nothing in it reaches anything by
//! itself. roost runs one proxy per agent on a Unix socket, which a relay in the sandbox
//! offers on 127.0.0.1 as `HTTP_PROXY`/`HTTPS_PROXY`: every connection the agent makes passes
//! here, so this is where confinement holds.
//!
//! - **Names are judged by what they resolve to.** Unless the operator allowed a name
//!   explicitly, every address it resolves to (not just the first) must be public: a name
//!   pointing at loopback, a private network or the cloud metadata service is refused. roost
//!   then connects to the addresses it checked and never resolves again, so a name cannot
//!   change its answer between the check and the connection (DNS rebinding).
//! - **One event per connection**, refused or not, reported when it ends: the dashboard
//!   shows what an agent talked to, how much it sent and received, and what it was refused.
//!   A connection that never named a host (garbage, a timeout) is answered and closed with
//!   no event: there is nothing to show.
//! - **Small on purpose.** `CONNECT` tunnels carry HTTPS and anything else over TCP; plain
//!   `http://` requests in absolute form are forwarded one per client connection (the
//!   request goes out with `Connection: close`). Anything else gets a short error.
//! - **Bounded.** The request head must arrive within 30 s and fit in 64 KiB; resolving and
//!   connecting give up after 10 s; every connection, open tunnels included, ends when the
//!   proxy is stopped.

use std::{
    io,
    net::{IpAddr, SocketAddr},
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use http::StatusCode;
use tokio::{
    io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf},
    net::{TcpStream, UnixListener, UnixStream},
    task::JoinSet,
    time::timeout,
};
use tokio_util::sync::CancellationToken;
use tracing::warn;

pub use policy::EgressPolicy;
use policy::{dns_name, parse_port, split_host_port};

mod policy;

/// How long a client has to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest request head read.
const MAX_HEAD: usize = 64 * 1024;
/// How long resolving a name, and connecting to one address, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an error answer may take to deliver before the connection is dropped.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// Request headers that concern only the hop to this proxy.
const HOP_HEADERS: [&str; 4] = ["connection", "proxy-connection", "proxy-authorization", "keep-alive"];

/// One connection an agent made (or tried) through the proxy.
#[derive(Debug, Clone)]
pub struct EgressEvent {
    /// The host as the agent asked for it (a name, lowercase, or an IP literal).
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// `CONNECT`, `GET`, ...
    pub method: String,
    /// What roost connected to, if it did.
    pub address: Option<SocketAddr>,
    /// Why it was refused, if it was (e.g. `169.254.169.254 is a link-local address`).
    pub refused: Option<String>,
    /// Agent to destination: the payload after the proxy handshake; for plain HTTP the
    /// forwarded request, body included.
    pub bytes_sent: u64,
    /// Destination to agent.
    pub bytes_received: u64,
    /// When the connection was accepted.
    pub started_unix_ns: i64,
    /// How long it lasted.
    pub duration: Duration,
}

/// Serves the proxy on `listener` until `stop` is cancelled; calls `on_event` once per
/// connection attempt, when it ends (refused ones at once). In-flight tunnels are closed
/// when `stop` fires; returns once every connection has ended and been reported.
pub async fn serve(
    listener: UnixListener,
    policy: Arc<EgressPolicy>,
    on_event: Arc<dyn Fn(EgressEvent) + Send + Sync>,
    stop: CancellationToken,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            Some(ended) = connections.join_next() => report_failure(ended),
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    let (policy, on_event, stop) = (policy.clone(), on_event.clone(), stop.clone());
                    connections.spawn(async move {
                        if let Some(event) = proxy(client, &policy, &stop).await {
                            on_event(event);
                        }
                    });
                }
                Err(err) => {
                    // Out of descriptors, most likely: back off rather than spin.
                    warn!(error = %err, "egress proxy accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    while let Some(ended) = connections.join_next().await {
        report_failure(ended);
    }
}

fn report_failure(ended: Result<(), tokio::task::JoinError>) {
    if let Err(err) = ended {
        warn!(error = %err, "egress proxy connection task failed");
    }
}

/// Why a connection is answered with an error instead of being served.
struct Refusal {
    status: StatusCode,
    reason: String,
}

fn refuse(status: StatusCode, reason: impl Into<String>) -> Refusal {
    Refusal { status, reason: reason.into() }
}

/// Serves one client connection; its event, if it named a destination.
async fn proxy(mut client: UnixStream, policy: &EgressPolicy, stop: &CancellationToken) -> Option<EgressEvent> {
    let started = Instant::now();
    let started_unix_ns =
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    let (request, early) = match read_request(&mut client, stop).await {
        Ok(read) => read,
        Err(refusal) => {
            if let Some(refusal) = refusal {
                answer(&mut client, &refusal, stop).await;
            }
            return None;
        }
    };
    let mut event = EgressEvent {
        host: request.host.clone(),
        port: request.port,
        method: request.method.clone(),
        address: None,
        refused: None,
        bytes_sent: 0,
        bytes_received: 0,
        started_unix_ns,
        duration: Duration::ZERO,
    };
    let opened = tokio::select! {
        () = stop.cancelled() => Err(refuse(StatusCode::SERVICE_UNAVAILABLE, "the proxy is stopping")),
        opened = open(&request, policy) => opened,
    };
    match opened {
        Err(refusal) => {
            answer(&mut client, &refusal, stop).await;
            event.refused = Some(refusal.reason);
        }
        Ok((upstream, address)) => {
            event.address = Some(address);
            let greeting: &[u8] =
                if request.head.is_empty() { b"HTTP/1.1 200 Connection Established\r\n\r\n" } else { b"" };
            let mut first = request.head;
            first.extend_from_slice(&early);
            (event.bytes_sent, event.bytes_received) = relay(client, upstream, greeting, &first, stop).await;
        }
    }
    event.duration = started.elapsed();
    Some(event)
}

/// Checks the destination, resolves it and connects to an address that passed.
async fn open(request: &Request, policy: &EgressPolicy) -> Result<(TcpStream, SocketAddr), Refusal> {
    let (host, port) = (request.host.as_str(), request.port);
    let allowed = policy.check_name(host, port).map_err(|reason| refuse(StatusCode::FORBIDDEN, reason))?;
    let addresses = match timeout(CONNECT_TIMEOUT, tokio::net::lookup_host((host, port))).await {
        Ok(Ok(found)) => found.collect::<Vec<_>>(),
        Ok(Err(err)) => return Err(refuse(StatusCode::BAD_GATEWAY, format!("cannot resolve {host}: {err}"))),
        Err(_) => return Err(refuse(StatusCode::BAD_GATEWAY, format!("cannot resolve {host}: timed out"))),
    };
    if addresses.is_empty() {
        return Err(refuse(StatusCode::BAD_GATEWAY, format!("cannot resolve {host}: no addresses")));
    }
    policy.check_addresses(host, allowed, &addresses).map_err(|reason| refuse(StatusCode::FORBIDDEN, reason))?;
    let mut last_error = String::new();
    for &address in &addresses {
        match timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => {
                // Best effort: tunnels carry interactive protocols (TLS handshakes).
                let _ = stream.set_nodelay(true);
                return Ok((stream, address));
            }
            Ok(Err(err)) => last_error = format!("{address}: {err}"),
            Err(_) => last_error = format!("{address}: timed out"),
        }
    }
    Err(refuse(StatusCode::BAD_GATEWAY, format!("cannot connect: {last_error}")))
}

/// Copies bytes both ways until both sides are done or the proxy stops, after sending
/// `greeting` to the client and `first` to the destination; (sent, received), the greeting
/// not counted.
async fn relay(
    client: UnixStream,
    upstream: TcpStream,
    greeting: &[u8],
    first: &[u8],
    stop: &CancellationToken,
) -> (u64, u64) {
    let (mut client, mut upstream) = (Counted { inner: client, written: 0 }, Counted { inner: upstream, written: 0 });
    let copy = async {
        client.inner.write_all(greeting).await?;
        upstream.write_all(first).await?;
        tokio::io::copy_bidirectional(&mut client, &mut upstream).await
    };
    tokio::select! {
        () = stop.cancelled() => {}
        _ = copy => {}
    }
    (upstream.written, client.written)
}

/// Answers with `refusal` as a one-line plain-text error and closes; what the client still
/// sends is read and dropped for up to 2 s first, since closing a socket with unread data
/// makes the client's read fail instead of ending cleanly.
async fn answer(client: &mut UnixStream, refusal: &Refusal, stop: &CancellationToken) {
    let body = format!("roost egress proxy: {}\n", refusal.reason);
    let status = refusal.status;
    let response = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len(),
    );
    let deliver = async {
        client.write_all(response.as_bytes()).await?;
        client.shutdown().await?;
        let mut sink = [0u8; 4096];
        while client.read(&mut sink).await? > 0 {}
        io::Result::Ok(())
    };
    // The answer goes out even when stopping; only the draining is cut short.
    tokio::select! {
        biased;
        _ = timeout(ANSWER_TIMEOUT, deliver) => {}
        () = stop.cancelled() => {}
    }
}

/// A stream that counts the bytes written to it.
struct Counted<S> {
    inner: S,
    written: u64,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            this.written += n as u64;
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// What the agent asked for.
struct Request {
    method: String,
    host: String,
    port: u16,
    /// The request head to send on in origin form; empty for `CONNECT`.
    head: Vec<u8>,
}

/// How reading a request head ended.
enum Head {
    /// It ends at this offset, blank line included.
    End(usize),
    /// The client left.
    Closed,
    TooLarge,
    /// It does not start like an HTTP request (a TLS hello, say): no use waiting for more.
    NotHttp,
}

/// Reads and parses the request head; with it, whatever the client sent after it. `None`:
/// the client left or the proxy is stopping, nothing to answer.
async fn read_request(
    client: &mut UnixStream,
    stop: &CancellationToken,
) -> Result<(Request, Vec<u8>), Option<Refusal>> {
    let mut buf = Vec::with_capacity(1024);
    let read = async {
        loop {
            let searched = buf.len().saturating_sub(3);
            if client.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                return Head::Closed;
            }
            if let Some(end) = buf.get(searched..).and_then(|tail| tail.windows(4).position(|w| w == b"\r\n\r\n")) {
                return Head::End(searched + end + 4);
            }
            if !buf.first().is_some_and(u8::is_ascii_alphabetic) {
                return Head::NotHttp;
            }
            if buf.len() > MAX_HEAD {
                return Head::TooLarge;
            }
        }
    };
    let head = tokio::select! {
        () = stop.cancelled() => return Err(None),
        head = timeout(HEAD_TIMEOUT, read) => head,
    };
    let too_large = || refuse(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "the request head is over 64 KiB");
    match head {
        Err(_) => Err(Some(refuse(StatusCode::REQUEST_TIMEOUT, "no request within 30 s"))),
        Ok(Head::Closed) => Err(None),
        Ok(Head::TooLarge) => Err(Some(too_large())),
        Ok(Head::NotHttp) => Err(Some(refuse(StatusCode::BAD_REQUEST, "not an HTTP request"))),
        Ok(Head::End(end)) if end > MAX_HEAD => Err(Some(too_large())),
        Ok(Head::End(end)) => {
            let early = buf.split_off(end);
            let request = parse_request(buf.get(..end - 4).unwrap_or_default()).map_err(Some)?;
            Ok((request, early))
        }
    }
}

/// Parses a request head (without its blank line) into a destination and, for plain HTTP,
/// the head rewritten to origin form.
fn parse_request(head: &[u8]) -> Result<Request, Refusal> {
    let bad = |why: &str| refuse(StatusCode::BAD_REQUEST, why);
    let mut lines = head.split(|&b| b == b'\n').map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let line = lines.next().and_then(|line| std::str::from_utf8(line).ok()).unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("malformed request line"));
    };
    if method.is_empty() || !method.bytes().all(is_token) || !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(bad("malformed request line"));
    }
    if method == "CONNECT" {
        let (host, port) = authority(target, None).ok_or_else(|| bad("CONNECT needs host:port"))?;
        return Ok(Request { method: method.to_owned(), host, port, head: Vec::new() });
    }
    let scheme = target.get(..7).filter(|s| s.eq_ignore_ascii_case("http://"));
    let Some(rest) = scheme.and_then(|_| target.get(7..)) else {
        return Err(bad(if target.starts_with('/') {
            "not a proxy request: use an absolute http:// URL or CONNECT"
        } else {
            "only http:// URLs are forwarded; use CONNECT for anything else"
        }));
    };
    let (authority_text, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let (host, port) = authority(authority_text, Some(80)).ok_or_else(|| bad("malformed URL"))?;
    let path = path.split('#').next().unwrap_or_default();
    let slash = if path.starts_with('/') { "" } else { "/" };
    let mut out = format!("{method} {slash}{path} {version}\r\n").into_bytes();
    for line in lines {
        let colon = line.iter().position(|&b| b == b':').unwrap_or(0);
        let name = line.get(..colon).unwrap_or_default();
        if name.is_empty() || !name.iter().copied().all(is_token) {
            return Err(bad("malformed header"));
        }
        if !HOP_HEADERS.iter().any(|hop| name.eq_ignore_ascii_case(hop.as_bytes())) {
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Request { method: method.to_owned(), host, port, head: out })
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The host (a lowercase name or an IP literal) and port of a request's authority.
fn authority(text: &str, default_port: Option<u16>) -> Option<(String, u16)> {
    let text = text.rsplit_once('@').map_or(text, |(_, host)| host);
    let (host, port) = split_host_port(text)?;
    if !text.starts_with('[') && host.contains(':') {
        return None; // an IPv6 address in a URL needs brackets
    }
    let port = match port {
        Some(port) => parse_port(port)?,
        None => default_port?,
    };
    let host = match host.parse::<IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => dns_name(host)?,
    };
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use tokio::{net::TcpListener, sync::mpsc, task::JoinHandle};

    use super::*;

    fn policy(allow: &[&str], deny: &[&str], default_allow: bool) -> EgressPolicy {
        let owned = |list: &[&str]| list.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
        EgressPolicy::new(&owned(allow), &owned(deny), default_allow).unwrap()
    }

    /// The real proxy on a Unix socket, reporting events into a channel.
    struct Proxy {
        path: std::path::PathBuf,
        events: mpsc::UnboundedReceiver<EgressEvent>,
        stop: CancellationToken,
        served: JoinHandle<()>,
        _dir: tempfile::TempDir,
    }

    impl Proxy {
        fn start(policy: EgressPolicy) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("egress.sock");
            let listener = UnixListener::bind(&path).unwrap();
            let (sender, events) = mpsc::unbounded_channel();
            let stop = CancellationToken::new();
            let on_event = Arc::new(move |event| drop(sender.send(event)));
            let served = tokio::spawn(serve(listener, Arc::new(policy), on_event, stop.clone()));
            Self { path, events, stop, served, _dir: dir }
        }

        /// Connects and sends `request`.
        async fn send(&self, request: &[u8]) -> UnixStream {
            let mut client = UnixStream::connect(&self.path).await.unwrap();
            client.write_all(request).await.unwrap();
            client
        }

        async fn event(&mut self) -> EgressEvent {
            timeout(Duration::from_secs(5), self.events.recv()).await.unwrap().unwrap()
        }
    }

    /// Everything until the peer closes (a reset after the data counts as closing).
    async fn read_all(stream: &mut (impl AsyncRead + Unpin)) -> String {
        let mut out = Vec::new();
        let _ = timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await.unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    async fn read_head(stream: &mut UnixStream) -> String {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            head.push(stream.read_u8().await.unwrap());
        }
        String::from_utf8(head).unwrap()
    }

    /// A TCP echo server on 127.0.0.1.
    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = stream.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        address
    }

    fn connect_request(address: impl std::fmt::Display) -> Vec<u8> {
        format!("CONNECT {address} HTTP/1.1\r\nHost: {address}\r\n\r\n").into_bytes()
    }

    #[tokio::test]
    async fn loopback_and_private_destinations_are_refused() {
        let echo = echo_server().await;
        let mut proxy = Proxy::start(EgressPolicy::default());
        for (target, reason) in [
            (echo.to_string(), "127.0.0.1 is a loopback address"),
            ("169.254.169.254:80".to_owned(), "169.254.169.254 is a link-local address"),
            ("10.0.0.1:443".to_owned(), "10.0.0.1 is a private address"),
            ("localhost:80".to_owned(), "localhost is a loopback name"),
        ] {
            let answer = read_all(&mut proxy.send(&connect_request(&target)).await).await;
            assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
            assert!(answer.ends_with(&format!("\r\n\r\nroost egress proxy: {reason}\n")), "{answer}");
            let event = proxy.event().await;
            assert_eq!(
                (event.method.as_str(), event.refused.as_deref(), event.address),
                ("CONNECT", Some(reason), None)
            );
        }
    }

    #[tokio::test]
    async fn an_allowed_tunnel_carries_and_counts_bytes() {
        let echo = echo_server().await;
        let mut proxy = Proxy::start(policy(&[&echo.to_string()], &[], true));
        let mut client = proxy.send(&connect_request(echo)).await;
        assert_eq!(read_head(&mut client).await, "HTTP/1.1 200 Connection Established\r\n\r\n");
        client.write_all(b"hello").await.unwrap();
        let mut back = [0u8; 5];
        client.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"hello");
        client.write_all(b", world").await.unwrap();
        client.shutdown().await.unwrap();
        assert_eq!(read_all(&mut client).await, ", world");
        let event = proxy.event().await;
        assert_eq!((event.host.as_str(), event.port, event.address), ("127.0.0.1", echo.port(), Some(echo)));
        assert_eq!((event.refused, event.bytes_sent, event.bytes_received), (None, 12, 12));
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_bad_gateway() {
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
        let mut proxy = Proxy::start(policy(&[&closed.to_string()], &[], true));
        let answer = read_all(&mut proxy.send(&connect_request(closed)).await).await;
        assert!(answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{answer}");
        assert!(proxy.event().await.refused.unwrap().starts_with("cannot connect: 127.0.0.1:"));
    }

    #[tokio::test]
    async fn plain_http_is_forwarded_in_origin_form() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = listener.local_addr().unwrap();
        const RESPONSE: &str = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
        let seen = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\nbody") {
                head.push(stream.read_u8().await.unwrap());
            }
            stream.write_all(RESPONSE.as_bytes()).await.unwrap();
            String::from_utf8(head).unwrap()
        });
        let mut proxy = Proxy::start(policy(&[&origin.to_string()], &[], false));
        let request = format!(
            "POST http://{origin}/x?y=1 HTTP/1.1\r\nHost: {origin}\r\nProxy-Authorization: Basic Zm9v\r\n\
             Proxy-Connection: keep-alive\r\nContent-Length: 4\r\n\r\nbody"
        );
        let answer = read_all(&mut proxy.send(request.as_bytes()).await).await;
        assert_eq!(answer, RESPONSE);
        let seen = seen.await.unwrap();
        let expected =
            format!("POST /x?y=1 HTTP/1.1\r\nHost: {origin}\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody");
        assert_eq!(seen, expected);
        let event = proxy.event().await;
        assert_eq!((event.method.as_str(), event.address, event.refused), ("POST", Some(origin), None));
        assert_eq!((event.bytes_sent, event.bytes_received), (expected.len() as u64, RESPONSE.len() as u64));
    }

    #[tokio::test]
    async fn garbage_is_answered_with_400_and_no_event() {
        let mut proxy = Proxy::start(EgressPolicy::default());
        for garbage in [&b"hello there\r\n\r\n"[..], b"\x16\x03\x01\x02\x00", b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n"] {
            let answer = read_all(&mut proxy.send(garbage).await).await;
            assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
        }
        let mut huge = b"GET http://example.com/ HTTP/1.1\r\n".to_vec();
        huge.resize(MAX_HEAD + 100, b'a');
        let answer = read_all(&mut proxy.send(&huge).await).await;
        assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
        proxy.stop.cancel();
        proxy.served.await.unwrap();
        assert!(proxy.events.try_recv().is_err());
    }

    #[tokio::test]
    async fn stopping_closes_open_tunnels() {
        let echo = echo_server().await;
        let mut proxy = Proxy::start(policy(&[&echo.to_string()], &[], true));
        let mut client = proxy.send(&connect_request(echo)).await;
        read_head(&mut client).await;
        client.write_all(b"ping").await.unwrap();
        let mut back = [0u8; 4];
        client.read_exact(&mut back).await.unwrap();
        proxy.stop.cancel();
        assert_eq!(read_all(&mut client).await, "");
        timeout(Duration::from_secs(5), &mut proxy.served).await.unwrap().unwrap();
        let event = proxy.event().await;
        assert_eq!((event.bytes_sent, event.bytes_received, event.refused), (4, 4, None));
    }
}
