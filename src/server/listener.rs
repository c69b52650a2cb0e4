//! The HTTP accept loop (SPEC §9.1 connection keys): at most
//! `limits.max_connections` connections at once (the others wait in the
//! listen backlog, so file descriptors are never exhausted), a connection
//! that has not sent a whole request head within `header_read_timeout_ms` is
//! closed (slowloris), an idle keep-alive connection is closed after
//! `idle_timeout_ms`, and a graceful shutdown lets requests in flight finish.
//! It serves the router as it is: it never looks at a request's content.
//! The answers hyper writes by itself for requests it cannot parse (400,
//! 414, 431) get the JSON error body of §9.4 like every other error.
//!
//! hyper's own header timer also runs while a keep-alive connection waits
//! for its next request, which would make the idle timeout the header
//! timeout; so both are kept here, from what the connection reads and when
//! its requests start and end.

use axum::body::Body;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// The connection limits of `limits.*`.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time a connection has to send a whole request head.
    pub header_read_timeout: Duration,
    /// Time an idle keep-alive connection is kept.
    pub idle_timeout: Duration,
}

/// Milliseconds since the first call (a process-wide monotonic clock that
/// fits an atomic).
fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    u64::try_from(START.get_or_init(Instant::now).elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// What one connection is doing, shared by its reader, its requests and its
/// watchdog.
#[derive(Debug)]
struct Clock {
    /// Requests whose response has not been sent whole yet.
    busy: AtomicUsize,
    /// When the connection went quiet (accepted, or its last response sent).
    quiet_since: AtomicU64,
    /// When the head being read began (its first byte, or the accept); 0
    /// while no head is being read.
    head_since: AtomicU64,
}

impl Clock {
    fn new() -> Self {
        let now = now_ms().max(1);
        Self {
            busy: AtomicUsize::new(0),
            quiet_since: AtomicU64::new(now),
            // A new connection owes its first head within the header timeout.
            head_since: AtomicU64::new(now),
        }
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
        }
    }

    /// When the connection is to be closed if nothing changes; `None` while
    /// a request is in flight (`request_timeout_ms` bounds those).
    fn deadline(&self, limits: &ConnLimits) -> Option<u64> {
        if self.busy.load(Ordering::Acquire) > 0 {
            return None;
        }
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let head = self.head_since.load(Ordering::Acquire);
        Some(if head != 0 {
            head.saturating_add(ms(limits.header_read_timeout))
        } else {
            self.quiet_since
                .load(Ordering::Acquire)
                .saturating_add(ms(limits.idle_timeout))
        })
    }
}

/// Resolves when the connection has been idle, or slow with its head, for
/// too long.
async fn watchdog(clock: Arc<Clock>, limits: ConnLimits) {
    loop {
        let wait = match clock.deadline(&limits) {
            Some(d) if d <= now_ms() => return,
            Some(d) => Duration::from_millis(d - now_ms()),
            // Busy: look again later (a response can take a while).
            None => limits.header_read_timeout.min(limits.idle_timeout),
        };
        tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
    }
}

/// The socket, noting when bytes arrive, and giving hyper's own error
/// answers the JSON body of SPEC §9.4.
struct Watched {
    inner: TcpStream,
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

/// The §9.4 answer for a request hyper could not parse.
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
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
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
        if let Some((pending, stands_for)) = &mut this.rewrite {
            while !pending.is_empty() {
                match Pin::new(&mut this.inner).poll_write(cx, pending) {
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
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        // Every write goes through `poll_write`, where hyper's own answers
        // are seen whole.
        false
    }
}

/// In a request's extensions: closes the request's connection at once (a
/// stream whose reader stopped reading loses its stream, SPEC §9.1).
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

/// Serves `app` on `listener` until `shutdown` resolves, then stops
/// accepting and waits for the connections' requests in flight (the caller
/// bounds that wait with `shutdown.grace_ms`).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.timer(TokioTimer::new()).header_read_timeout(None);
    tokio::pin!(shutdown);
    loop {
        // A slot first: beyond the cap, connections wait in the backlog.
        let permit = tokio::select! {
            p = Arc::clone(&slots).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
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
        let _ = stream.set_nodelay(true);
        let clock = Arc::new(Clock::new());
        let io = TokioIo::new(Watched {
            inner: stream,
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
        let conn = graceful.watch(http1.serve_connection(io, service));
        tokio::spawn(async move {
            let _permit = permit;
            tokio::select! {
                _ = conn => {}
                // Dropping the connection closes its socket: nothing is in
                // flight on it (the watchdog waits while a request is).
                () = watchdog(clock, limits) => {}
                // A request gave up on its reader.
                () = close.notified() => {}
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
