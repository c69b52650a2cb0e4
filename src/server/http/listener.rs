//! The HTTP accept loop ([§9.1](docs/configuration.md#s9-1) connection keys): at most
//! `limits.max_connections` connections at once, a connection that has not
//! sent a whole request head within `header_read_timeout_ms` is closed
//! (slowloris), an idle keep-alive connection is closed after
//! `idle_timeout_ms`, a response the client does not read for
//! `write_timeout_ms` is dropped with its connection, and a graceful
//! shutdown lets requests in flight finish. It serves the router as it is:
//! it never looks at a request's content. The answers hyper writes by itself
//! for requests it cannot parse (400, 414, 431) get the JSON error body of
//! [§9.4](docs/http-api.md#s9-4) like every other error.
//!
//! A connection hyper ends itself (its last answer written) is closed with
//! a lingering close, so an answer sent before the request body was read
//! (a 413) is not lost to a reset.
//!
//! At the connection cap, a new connection makes room: the open connection
//! with no request in progress (idle keep-alive, or still sending a request
//! head) that has been so the longest is closed, as nginx reuses its idle
//! connections. Only when every open connection has a request in progress
//! does the new one wait (in the listen backlog: file descriptors are never
//! exhausted). So no number of idle or slow sockets keeps a well-formed
//! request or a probe out.
//!
//! hyper's own header timer also runs while a keep-alive connection waits
//! for its next request, which would make the idle timeout the header
//! timeout; so both are kept here, from what the connection reads and when
//! its requests start and end.

use axum::body::Body;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// The connection limits of `limits.*`.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time a connection has to send a whole request head.
    pub header_read_timeout: Duration,
    /// Time an idle keep-alive connection is kept.
    pub idle_timeout: Duration,
    /// Time a response may wait for the client to read any of it.
    pub write_timeout: Duration,
}

/// How often a connection with a request in progress is looked at (for a
/// write that stopped moving).
const BUSY_CHECK: Duration = Duration::from_millis(500);

/// Milliseconds since the first call (a process-wide monotonic clock that
/// fits an atomic).
fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    u64::try_from(START.get_or_init(Instant::now).elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// What one connection is doing, shared by its reader, its requests, its
/// watchdog and the accept loop (which may close it to make room).
#[derive(Debug)]
struct Clock {
    /// Requests whose response has not been sent whole yet.
    busy: AtomicUsize,
    /// When the connection went quiet (accepted, or its last response sent).
    quiet_since: AtomicU64,
    /// When the head being read began (its first byte, or the accept); 0
    /// while no head is being read.
    head_since: AtomicU64,
    /// When a write last found the socket full and nothing has been written
    /// since; 0 while writes go through.
    write_blocked_since: AtomicU64,
    /// Chosen to be closed to make room for a new connection.
    evicting: AtomicBool,
    /// Wakes the connection's task when it is chosen.
    evict: Notify,
    /// hyper ended the connection itself (its last answer written): the
    /// socket is closed with a lingering close.
    ended_well: AtomicBool,
    /// The registry's wake-up: a request ended (the connection may now be
    /// closed to make room).
    changed: Arc<Notify>,
}

impl Clock {
    fn new(changed: Arc<Notify>) -> Self {
        let now = now_ms().max(1);
        Self {
            busy: AtomicUsize::new(0),
            quiet_since: AtomicU64::new(now),
            // A new connection owes its first head within the header timeout.
            head_since: AtomicU64::new(now),
            write_blocked_since: AtomicU64::new(0),
            evicting: AtomicBool::new(false),
            evict: Notify::new(),
            ended_well: AtomicBool::new(false),
            changed,
        }
    }

    fn write_blocked(&self) {
        let _ = self.write_blocked_since.compare_exchange(
            0,
            now_ms().max(1),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    fn write_moved(&self) {
        self.write_blocked_since.store(0, Ordering::Release);
    }

    /// Since when the connection has held no request in progress (its
    /// place in the eviction order: the oldest goes first); `None` while a
    /// request is in progress.
    fn idle_since(&self) -> Option<u64> {
        // An answer still being written is a request in progress (its
        // client is slow: the write timeout judges it, not the cap).
        if self.busy.load(Ordering::Acquire) > 0
            || self.write_blocked_since.load(Ordering::Acquire) != 0
        {
            return None;
        }
        Some(match self.head_since.load(Ordering::Acquire) {
            0 => self.quiet_since.load(Ordering::Acquire),
            head => head,
        })
    }

    fn read_some(&self) {
        if self.busy.load(Ordering::Acquire) == 0 && self.head_since.load(Ordering::Acquire) == 0 {
            self.head_since.store(now_ms().max(1), Ordering::Release);
        }
    }

    fn request_started(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.head_since.store(0, Ordering::Release);
    }

    fn request_ended(&self) {
        if self.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.quiet_since.store(now_ms(), Ordering::Release);
            self.changed.notify_one();
        }
    }

    /// When the connection is to be closed if nothing changes; `None` while
    /// a request is in flight and its answer is not stuck on the client
    /// (`request_timeout_ms` bounds the work).
    fn deadline(&self, limits: &ConnLimits) -> Option<u64> {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        // hyper may hold the end of an answer after its body is done (and
        // the request counted as ended): a stuck write counts either way.
        let stuck = match self.write_blocked_since.load(Ordering::Acquire) {
            0 => None,
            since => Some(since.saturating_add(ms(limits.write_timeout))),
        };
        if self.busy.load(Ordering::Acquire) > 0 {
            return stuck;
        }
        let head = self.head_since.load(Ordering::Acquire);
        let quiet = if head != 0 {
            head.saturating_add(ms(limits.header_read_timeout))
        } else {
            self.quiet_since
                .load(Ordering::Acquire)
                .saturating_add(ms(limits.idle_timeout))
        };
        Some(stuck.map_or(quiet, |s| s.min(quiet)))
    }
}

/// Resolves when the connection has been idle, or slow with its head, for
/// too long.
async fn watchdog(clock: Arc<Clock>, limits: ConnLimits) {
    loop {
        let wait = match clock.deadline(&limits) {
            Some(d) if d <= now_ms() => return,
            Some(d) => Duration::from_millis(d - now_ms()),
            // Busy: look again later (a response can take a while, and its
            // write may stop moving).
            None => limits
                .header_read_timeout
                .min(limits.idle_timeout)
                .min(limits.write_timeout)
                .min(BUSY_CHECK),
        };
        tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
    }
}

/// The socket, noting when bytes arrive and when writes stop moving, and
/// giving hyper's own error answers the JSON body of [§9.4](docs/http-api.md#s9-4).
struct Watched {
    /// Taken only when the wrapper is dropped (see [`linger`]).
    inner: Option<TcpStream>,
    clock: Arc<Clock>,
    /// Our answer in place of hyper's, still to be written, and the length
    /// of hyper's buffer it stands for.
    rewrite: Option<(Vec<u8>, usize)>,
}

/// The status of an answer hyper wrote by itself for a request it could not
/// parse (400, 414 or 431, an empty body, no request in flight), if `buf`
/// is one.
fn hyper_error_status(buf: &[u8]) -> Option<u16> {
    let rest = buf
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| buf.strip_prefix(b"HTTP/1.0 "))?;
    let status: u16 = std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok()?;
    let head = std::str::from_utf8(buf).ok()?.to_ascii_lowercase();
    (matches!(status, 400 | 414 | 431)
        && head.ends_with("\r\n\r\n")
        && head.contains("\r\ncontent-length: 0\r\n"))
    .then_some(status)
}

/// The [§9.4](docs/http-api.md#s9-4) answer for a request hyper could not parse.
fn json_error_answer(status: u16) -> Vec<u8> {
    let (reason, message) = match status {
        414 => ("URI Too Long", "the request target is over the size limit"),
        431 => (
            "Request Header Fields Too Large",
            "the request head is over the size limit",
        ),
        _ => ("Bad Request", "the request is not valid HTTP/1.1"),
    };
    let body = serde_json::json!({"error": "InvalidRequestError", "message": message}).to_string();
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let Some(sock) = self.inner.as_mut() else {
            return Poll::Ready(Err(std::io::ErrorKind::NotConnected.into()));
        };
        let r = Pin::new(sock).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.clock.read_some();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        // Bytes written while no request is in flight are hyper's own.
        if self.rewrite.is_none() && self.clock.busy.load(Ordering::Acquire) == 0 {
            if let Some(status) = hyper_error_status(buf) {
                self.rewrite = Some((json_error_answer(status), buf.len()));
            }
        }
        let this = &mut *self;
        let Some(sock) = this.inner.as_mut() else {
            return Poll::Ready(Err(std::io::ErrorKind::NotConnected.into()));
        };
        if let Some((pending, stands_for)) = &mut this.rewrite {
            while !pending.is_empty() {
                match Pin::new(&mut *sock).poll_write(cx, pending) {
                    Poll::Ready(Ok(0)) => {
                        return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()))
                    }
                    Poll::Ready(Ok(n)) => {
                        pending.drain(..n);
                    }
                    other => return other,
                }
            }
            let n = *stands_for;
            if n > 0 {
                *stands_for = 0;
                return Poll::Ready(Ok(n.min(buf.len())));
            }
        }
        let r = Pin::new(sock).poll_write(cx, buf);
        match r {
            // The client's window is full: the write timeout runs from now.
            Poll::Pending => this.clock.write_blocked(),
            Poll::Ready(_) => this.clock.write_moved(),
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.inner.as_mut() {
            Some(sock) => Pin::new(sock).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.inner.as_mut() {
            Some(sock) => Pin::new(sock).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn is_write_vectored(&self) -> bool {
        // Every write goes through `poll_write`, where hyper's own answers
        // are seen whole.
        false
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if self.clock.ended_well.load(Ordering::Acquire) {
            if let Some(sock) = self.inner.take() {
                linger(sock);
            }
        }
    }
}

/// Most sockets in a lingering close at once; beyond, a socket is closed
/// at once.
const MAX_LINGERING: usize = 256;
/// Longest a lingering close reads.
const LINGER_FOR: Duration = Duration::from_secs(2);
/// Most bytes a lingering close reads (and throws away).
const LINGER_BYTES: usize = 8 << 20;

/// Closes `sock` as nginx's `lingering_close` does: the write side first
/// (the answer is out), then what the client still sends is read and
/// thrown away for a short while, and only then the socket closed. A
/// socket closed with unread bytes is reset, and the reset makes the client
/// lose the answer it has not read yet: the 413 of a body refused before it
/// was read would reach the client as a broken pipe. Bounded in time,
/// bytes and sockets; outside the connection's slot, as the connection is
/// over.
fn linger(sock: TcpStream) {
    static LINGERING: AtomicUsize = AtomicUsize::new(0);
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if LINGERING.fetch_add(1, Ordering::AcqRel) >= MAX_LINGERING {
        LINGERING.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    rt.spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut sock = sock;
        let _ = tokio::time::timeout(LINGER_FOR, async {
            let _ = sock.shutdown().await;
            let mut buf = vec![0u8; 64 << 10];
            let mut read = 0usize;
            while read < LINGER_BYTES {
                match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
        })
        .await;
        drop(sock);
        LINGERING.fetch_sub(1, Ordering::AcqRel);
    });
}

/// In a request's extensions: closes the request's connection at once (a
/// stream whose reader stopped reading loses its stream, [§9.1](docs/configuration.md#s9-1)).
#[derive(Debug, Clone)]
pub struct CloseConnection(Arc<tokio::sync::Notify>);

impl CloseConnection {
    /// Closes the connection: its task drops it, which closes the socket.
    pub fn close(&self) {
        self.0.notify_one();
    }
}

/// Ends a request when its response body is dropped (sent whole, or the
/// connection went away).
struct Ended(Arc<Clock>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

/// The open connections, for making room at the cap.
#[derive(Debug, Default)]
struct Registry {
    conns: Mutex<HashMap<u64, Arc<Clock>>>,
    /// A request ended or a connection closed.
    changed: Arc<Notify>,
}

impl Registry {
    fn conns(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Clock>>> {
        // A poisoned lock only means a panic elsewhere; the map stays valid.
        self.conns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Asks the connection with no request in progress that has been so
    /// the longest to close, unless one already asked is about to. Returns
    /// whether a connection is closing.
    fn evict_oldest_idle(&self) -> bool {
        let conns = self.conns();
        let closing = conns
            .values()
            .any(|c| c.evicting.load(Ordering::Acquire) && c.idle_since().is_some());
        if closing {
            return true;
        }
        let oldest = conns
            .values()
            .filter(|c| !c.evicting.load(Ordering::Acquire))
            .filter_map(|c| c.idle_since().map(|since| (since, c)))
            .min_by_key(|(since, _)| *since);
        match oldest {
            Some((_, c)) => {
                c.evicting.store(true, Ordering::Release);
                c.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Removes a connection from the registry when its task ends.
struct Registered {
    registry: Arc<Registry>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.conns().remove(&self.id);
        self.registry.changed.notify_one();
    }
}

/// A slot for a connection just accepted: a free one, else one made by
/// closing the longest-idle connection; while every connection has a
/// request in progress, it waits for one to end.
async fn make_room(registry: &Registry, slots: &Arc<Semaphore>) -> Option<OwnedSemaphorePermit> {
    loop {
        if let Ok(p) = Arc::clone(slots).try_acquire_owned() {
            return Some(p);
        }
        registry.evict_oldest_idle();
        tokio::select! {
            p = Arc::clone(slots).acquire_owned() => return p.ok(),
            () = registry.changed.notified() => {}
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then stops
/// accepting and waits for the connections' requests in flight (the caller
/// bounds that wait with `shutdown.grace_ms`).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let max = limits.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max));
    let registry = Arc::new(Registry::default());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.timer(TokioTimer::new()).header_read_timeout(None);
    let mut next_id: u64 = 0;
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // EMFILE and friends: wait for connections to close
                    // rather than spin.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // At the cap, room is made before the next accept: at most one
        // connection waits here, the others in the listen backlog.
        let permit = tokio::select! {
            p = make_room(&registry, &slots) => match p {
                Some(p) => p,
                None => break,
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let clock = Arc::new(Clock::new(Arc::clone(&registry.changed)));
        next_id = next_id.wrapping_add(1);
        registry.conns().insert(next_id, Arc::clone(&clock));
        let registered = Registered {
            registry: Arc::clone(&registry),
            id: next_id,
        };
        let io = TokioIo::new(Watched {
            inner: Some(stream),
            clock: Arc::clone(&clock),
            rewrite: None,
        });
        let service_clock = Arc::clone(&clock);
        let app = app.clone();
        let close = Arc::new(tokio::sync::Notify::new());
        let closer = CloseConnection(Arc::clone(&close));
        let service =
            hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                service_clock.request_started();
                req.extensions_mut().insert(closer.clone());
                let ended = Ended(Arc::clone(&service_clock));
                let app = app.clone();
                async move {
                    let resp = tower::ServiceExt::oneshot(app, req.map(Body::new)).await?;
                    let (parts, body) = resp.into_parts();
                    let body = http_body_util::BodyExt::map_frame(body, move |frame| {
                        let _held = &ended;
                        frame
                    });
                    Ok::<_, std::convert::Infallible>(axum::response::Response::from_parts(
                        parts,
                        Body::new(body),
                    ))
                }
            });
        let conn = http1.serve_connection(io, service);
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _registered = registered;
            tokio::pin!(conn);
            let mut finishing = false;
            loop {
                tokio::select! {
                    _ = conn.as_mut() => {
                        clock.ended_well.store(true, Ordering::Release);
                        break;
                    }
                    // Dropping the connection closes its socket: nothing is
                    // in flight on it, or its answer is stuck on the client.
                    () = watchdog(Arc::clone(&clock), limits) => break,
                    // A request gave up on its reader.
                    () = close.notified() => break,
                    () = clock.evict.notified(), if !finishing => {
                        if clock.busy.load(Ordering::Acquire) == 0 {
                            break;
                        }
                        // A request arrived meanwhile: it is answered, then
                        // the connection closes.
                        conn.as_mut().graceful_shutdown();
                        finishing = true;
                    }
                    r = stop.wait_for(|s| *s), if !finishing => {
                        if r.is_err() || clock.busy.load(Ordering::Acquire) == 0 {
                            break;
                        }
                        conn.as_mut().graceful_shutdown();
                        finishing = true;
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Every connection's task holds a slot until it ends.
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
}
