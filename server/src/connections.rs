//! Accepting connections, with bounds a client cannot wear down.
//!
//! A server that waits on its clients forever can be held by them: sockets that never send
//! a request, send half a header, hold an idle keep-alive or an HTTP/2 preface with
//! nothing after it each keep a descriptor, until `accept` fails with "Too many open files"
//! and `/healthz` stops answering. So every connection here is bounded:
//!
//! - **Headers** of an HTTP/1 request must arrive within `header_read_timeout`
//!   (hyper's timer, which also runs while a keep-alive connection waits for its next
//!   request).
//! - **Idle**: a connection with no request in flight for `idle_timeout` is closed
//!   gracefully (HTTP/1 keep-alive, an HTTP/2 connection without streams, a TCP connection
//!   that never sent a byte). A request counts as in flight until its answer's body has
//!   been sent, so an SSE stream, a long turn or an MCP stream stays open as long as it
//!   lasts. HTTP/2 connections are also pinged, so a peer that vanished mid-stream is
//!   noticed.
//! - **Stalled readers**: a write that cannot proceed for `idle_timeout` (a client that
//!   stopped reading its SSE stream) ends the connection.
//! - **Count**: at most `max_connections` are open. A connection that arrives at the cap
//!   takes the place of the one that has been idle longest (nothing in flight): under a
//!   flood of idle sockets, a real request (`/healthz`, a turn) still gets in at once.
//!   With every connection busy, it waits for one to end (the rest wait in the kernel's
//!   backlog), so `accept` never fails for want of descriptors. The default is sized from
//!   the descriptor limit, which roost first raises to its hard limit
//!   ([`raise_descriptor_limit`]), leaving room for the store, runtimes and files (and the
//!   one connection accepted past the cap while it waits).

use std::{
    convert::Infallible,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use axum::{Router, body::Body, extract::ConnectInfo};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::conn::auto::Builder,
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{Notify, Semaphore},
    time::{Instant, Sleep},
};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;
use tracing::{debug, warn};

/// How connections are bounded (see the module doc).
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// An HTTP/1 request's headers must arrive within this (`--header-read-timeout-secs`).
    pub header_read_timeout: Duration,
    /// A connection with nothing in flight this long is closed, and so is one whose writes
    /// are stuck this long (`--idle-timeout-secs`).
    pub idle_timeout: Duration,
    /// Most connections open at once per listener (`--max-connections`); `None`: sized
    /// from the descriptor limit at start.
    pub max_connections: Option<usize>,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(60),
            max_connections: None,
        }
    }
}

/// How often an HTTP/2 connection is pinged, and how long the answer may take.
const H2_PING: Duration = Duration::from_secs(20);
/// How long an idle connection may take to close gracefully before it is dropped.
const IDLE_CLOSE: Duration = Duration::from_secs(2);

/// Raises the soft limit on open descriptors to the hard limit (a plain `ulimit -n` is
/// often 1,024 while the hard limit is far higher); the soft limit now in force.
pub fn raise_descriptor_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    let current = limit.current.unwrap_or(u64::MAX);
    if limit.current != limit.maximum {
        limit.current = limit.maximum;
        match setrlimit(Resource::Nofile, limit) {
            Ok(()) => return limit.maximum.unwrap_or(u64::MAX),
            Err(err) => warn!(error = %err, "could not raise the open-file limit to its hard limit"),
        }
    }
    current
}

/// The default connection cap for a descriptor limit: what is left after a reserve for
/// the store's pool, runtimes' pipes, files and outgoing calls (a quarter of the limit,
/// at least 64 and at most 1,024 descriptors).
pub fn default_max_connections(descriptor_limit: u64) -> usize {
    let limit = usize::try_from(descriptor_limit).unwrap_or(usize::MAX).min(1 << 22);
    let reserve = (limit / 4).clamp(64, 1024);
    limit.saturating_sub(reserve).max(16)
}

/// Serves `app` on `listener` within `limits` until `shutdown`; then lets open requests
/// finish for at most `grace` and closes what is left.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
    grace: Duration,
) {
    let cap = limits.max_connections.unwrap_or_else(|| default_max_connections(raise_descriptor_limit()));
    let permits = Arc::new(Semaphore::new(cap));
    // `closing`: finish what is in flight; `closed`: the grace period is over.
    let (closing, closed) = (CancellationToken::new(), CancellationToken::new());
    let builder = builder(&limits);
    let open = OpenConnections::default();
    let mut accept_errors = 0u32;
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of descriptors, or a connection reset before it was accepted:
                    // back off a moment rather than spin, and say so now and then.
                    accept_errors += 1;
                    if accept_errors.is_power_of_two() {
                        warn!(error = %err, count = accept_errors, "accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // At the cap: the connection idle longest makes room; with none idle, wait for one
        // to end (meanwhile new ones wait in the backlog).
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                open.evict_idlest();
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    permit = permits.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                }
            }
        };
        if let Err(err) = stream.set_nodelay(true) {
            debug!(error = %err, "could not set TCP_NODELAY");
        }
        let (activity, evicted) = open.add();
        let ends = Ends { idle: limits.idle_timeout, closing: closing.clone(), closed: closed.clone(), evicted };
        let (app, builder, open) = (app.clone(), builder.clone(), open.clone());
        tokio::spawn(async move {
            let id = activity.id;
            serve_connection(stream, peer, app, builder, activity, ends).await;
            open.remove(id);
            drop(permit);
        });
    }
    // Stop: open connections finish what they are doing (graceful), then are closed.
    closing.cancel();
    let all = u32::try_from(cap).unwrap_or(u32::MAX);
    if tokio::time::timeout(grace, permits.acquire_many(all)).await.is_err() {
        warn!(?grace, "grace period over; closing open connections");
        closed.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(1), permits.acquire_many(all)).await;
    }
}

/// What ends a connection besides its peer.
struct Ends {
    /// Nothing in flight this long.
    idle: Duration,
    /// roost is stopping: finish what is in flight.
    closing: CancellationToken,
    /// The grace period is over: close now.
    closed: CancellationToken,
    /// Its place was given to a new connection (it was the one idle longest): close now.
    evicted: CancellationToken,
}

/// An open connection: its activity, and what closes it when it is evicted.
type OpenConnection = (Arc<Activity>, CancellationToken);

/// The open connections of a listener, to pick the one idle longest when at the cap.
#[derive(Clone, Default)]
struct OpenConnections {
    next_id: Arc<AtomicUsize>,
    by_id: Arc<Mutex<std::collections::HashMap<usize, OpenConnection>>>,
}

impl OpenConnections {
    /// Registers a new connection: its activity, and what closes it when evicted.
    fn add(&self) -> (Arc<Activity>, CancellationToken) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new(id));
        let evicted = CancellationToken::new();
        self.by_id.lock().unwrap_or_else(|p| p.into_inner()).insert(id, (activity.clone(), evicted.clone()));
        (activity, evicted)
    }

    fn remove(&self, id: usize) {
        self.by_id.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
    }

    /// Closes the connection with nothing in flight for the longest time, if there is one.
    fn evict_idlest(&self) {
        let by_id = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        let idlest = by_id
            .values()
            .filter(|(activity, evicted)| activity.in_flight.load(Ordering::Acquire) == 0 && !evicted.is_cancelled())
            .min_by_key(|(activity, _)| activity.idle_since());
        if let Some((_, evicted)) = idlest {
            debug!("at the connection cap: closing the connection idle longest");
            evicted.cancel();
        }
    }
}

fn builder(limits: &ConnectionLimits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(H2_PING)
        .keep_alive_timeout(H2_PING)
        // CONNECT for HTTP/2 WebSockets, as axum's own server enables it.
        .enable_connect_protocol();
    builder
}

/// One connection, until it ends, idles out or roost stops.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    builder: Builder<TokioExecutor>,
    activity: Arc<Activity>,
    ends: Ends,
) {
    let service = {
        let activity = activity.clone();
        tower::service_fn(move |mut request: http::Request<Incoming>| {
            let in_flight = InFlight::start(&activity);
            request.extensions_mut().insert(ConnectInfo(peer));
            let app = app.clone();
            async move {
                let response = app.oneshot(request.map(Body::new)).await?;
                Ok::<_, Infallible>(response.map(|body| Body::new(Tracked { body, _in_flight: in_flight })))
            }
        })
    };
    let io = TokioIo::new(StallGuard::new(stream, ends.idle));
    let connection = builder.serve_connection_with_upgrades(io, TowerToHyperService::new(service));
    tokio::pin!(connection);
    let mut ending = false;
    // An idle connection asked to close gracefully gets this long to do it: an HTTP/2
    // handshake the peer never finishes would otherwise wait for it forever.
    let idle_close = tokio::time::sleep(Duration::MAX);
    tokio::pin!(idle_close);
    let mut closing_idle = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(err) = result {
                    debug!(%peer, error = %err, "connection ended with an error");
                }
                return;
            }
            () = ends.closed.cancelled() => return,
            () = ends.evicted.cancelled() => return,
            () = &mut idle_close, if closing_idle => return,
            () = ends.closing.cancelled(), if !ending => {
                ending = true;
                connection.as_mut().graceful_shutdown();
            }
            () = activity.idle_for(ends.idle), if !ending => {
                debug!(%peer, "closing an idle connection");
                ending = true;
                closing_idle = true;
                idle_close.as_mut().reset(Instant::now() + IDLE_CLOSE);
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Requests in flight on one connection, and since when it has had none.
struct Activity {
    id: usize,
    in_flight: AtomicUsize,
    idle_since: Mutex<Instant>,
    changed: Notify,
}

impl Activity {
    fn new(id: usize) -> Self {
        Self { id, in_flight: AtomicUsize::new(0), idle_since: Mutex::new(Instant::now()), changed: Notify::new() }
    }

    fn idle_since(&self) -> Instant {
        *self.idle_since.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves once the connection has had nothing in flight for `timeout`.
    async fn idle_for(&self, timeout: Duration) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.in_flight.load(Ordering::Acquire) == 0 {
                let deadline = self.idle_since() + timeout;
                if Instant::now() >= deadline {
                    return;
                }
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => {}
                    () = changed => {}
                }
            } else {
                changed.await;
            }
        }
    }
}

/// One request in flight, until its answer's body is done (or dropped).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        Self(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.0.idle_since.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
            self.0.changed.notify_waiters();
        }
    }
}

/// An answer's body that keeps its request in flight until it is sent.
struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A socket whose writes may not stay blocked longer than `limit` (a peer that stopped
/// reading).
struct StallGuard {
    inner: TcpStream,
    limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl StallGuard {
    fn new(inner: TcpStream, limit: Duration) -> Self {
        Self { inner, limit, stalled: None }
    }

    /// Passes a write's outcome on; a write pending past the limit becomes an error.
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let limit = self.limit;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the peer stopped reading"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for StallGuard {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for StallGuard {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_room_for_everything_else() {
        assert_eq!(default_max_connections(256), 192);
        assert_eq!(default_max_connections(1024), 768);
        assert_eq!(default_max_connections(1 << 20), (1 << 20) - 1024);
        assert_eq!(default_max_connections(u64::MAX), (1 << 22) - 1024);
        assert_eq!(default_max_connections(20), 16);
    }

    #[tokio::test]
    async fn a_connection_is_idle_only_with_nothing_in_flight() {
        let activity = Arc::new(Activity::new(0));
        let request = InFlight::start(&activity);
        let idle = activity.idle_for(Duration::from_millis(50));
        tokio::pin!(idle);
        assert!(tokio::time::timeout(Duration::from_millis(300), idle.as_mut()).await.is_err(), "in flight: not idle");
        drop(request);
        let started = Instant::now();
        idle.await;
        assert!(started.elapsed() >= Duration::from_millis(50), "idle for the whole timeout after the request");
    }
}
