//! Accepting connections, bounded: each listener has its own cap on open
//! connections (so TCP clients can never starve the Unix socket), a TCP
//! connection that has not made an authenticated request by its deadline is
//! closed, and an authenticated one with no open stream is closed after an
//! idle timeout. tonic's `Server` covers keepalive, streams per connection
//! and header sizes; it has no cap, no authentication deadline and no idle
//! timeout, so those are here.
//!
//! How the pieces meet: every accepted socket is wrapped in a [`Guarded`]
//! IO that holds the cap's permit and a timer. tonic hands the wrapper's
//! [`Conn`] (its `ConnectInfo`) to every request on the connection as an
//! extension; the auth interceptor marks it authenticated, and
//! [`TrackStreamsLayer`] counts the streams open on it. The timer reads
//! both, and when it expires the wrapper reports end-of-file, so hyper
//! drops the connection and its descriptor.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::Connected;
use tower::{Layer, Service};
use tracing::{debug, warn};

/// Bounds on the daemon's connections; every field is a `serve` flag.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// TCP connections open at once; more wait in the kernel's backlog.
    pub max_tcp: usize,
    /// Unix socket connections open at once, counted apart from TCP.
    pub max_unix: usize,
    /// A TCP connection must complete an authenticated request (HTTP/2
    /// handshake included) within this, or it is closed.
    pub auth_timeout: Duration,
    /// An authenticated TCP connection with no open stream is closed after
    /// this long.
    pub idle_timeout: Duration,
    /// HTTP/2 PING interval on every connection; a peer that does not
    /// answer within `keepalive_timeout` is dropped.
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
    /// Concurrent streams (calls) one connection may open.
    pub max_streams: u32,
    /// Largest header block a request may send, in bytes.
    pub max_header_bytes: u32,
    /// HTTP/2 flow-control windows the daemon grants its peers, in bytes:
    /// how much a client may send on one call, and on the whole connection,
    /// before the daemon acknowledges it. See `server` for the choice.
    pub stream_window: u32,
    pub connection_window: u32,
    /// Let hyper grow the windows to the measured bandwidth-delay product
    /// (it sends its own pings to measure it).
    pub adaptive_window: bool,
}

/// The HTTP/2 defaults (pings, streams, windows) were chosen by
/// measurement: none of the alternatives moved a latency or the creation
/// rate beyond noise, over TCP or the Unix socket; the figures and reasons
/// are in docs/benchmarks.md, "HTTP/2 settings, chosen by measurement".
impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_tcp: 1024,
            max_unix: 256,
            auth_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            max_streams: 256,
            max_header_bytes: 16 * 1024,
            stream_window: 1024 * 1024,
            connection_window: 1024 * 1024,
            adaptive_window: false,
        }
    }
}

impl ConnectionLimits {
    /// A tonic server builder with the HTTP/2-level bounds set.
    pub fn server(&self) -> tonic::transport::Server {
        tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(self.keepalive_interval))
            .http2_keepalive_timeout(Some(self.keepalive_timeout))
            .max_concurrent_streams(self.max_streams)
            .http2_max_header_list_size(self.max_header_bytes)
            .initial_stream_window_size(self.stream_window)
            .initial_connection_window_size(self.connection_window)
            .http2_adaptive_window(Some(self.adaptive_window))
    }
}

/// What a connection and the requests on it share.
#[derive(Debug)]
struct ConnState {
    opened: Instant,
    authenticated: AtomicBool,
    open_streams: AtomicUsize,
    /// Milliseconds after `opened` at which the last stream ended (or 0).
    last_stream_end_ms: AtomicU64,
    peer: Peer,
    /// The subject of the client certificate the TLS handshake verified.
    certificate: std::sync::OnceLock<String>,
}

/// Who is at the other end of a connection, as the socket says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Tcp(std::net::SocketAddr),
    /// A Unix socket peer's user id, when the kernel gave one.
    Unix {
        uid: Option<u32>,
    },
}

/// A handle on one connection, found in the extensions of every request
/// made on it.
#[derive(Debug, Clone)]
pub struct Conn(Arc<ConnState>);

impl Conn {
    fn new(authenticated: bool, peer: Peer) -> Self {
        Conn(Arc::new(ConnState {
            opened: Instant::now(),
            authenticated: AtomicBool::new(authenticated),
            open_streams: AtomicUsize::new(0),
            last_stream_end_ms: AtomicU64::new(0),
            peer,
            certificate: std::sync::OnceLock::new(),
        }))
    }

    pub fn peer(&self) -> Peer {
        self.0.peer
    }

    /// The client certificate's subject, if the connection showed one.
    pub fn certificate(&self) -> Option<&str> {
        self.0.certificate.get().map(String::as_str)
    }

    /// Called by the auth check when a request carried the right token:
    /// the connection's authentication deadline no longer applies.
    pub fn authenticate(&self) {
        self.0.authenticated.store(true, Ordering::Release);
    }

    fn stream_opened(&self) -> StreamGuard {
        self.0.open_streams.fetch_add(1, Ordering::AcqRel);
        StreamGuard(self.clone())
    }
}

/// One open stream; dropping it (the response body ended or was dropped)
/// counts the stream closed.
#[derive(Debug)]
struct StreamGuard(Conn);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let state = &self.0 .0;
        let ms = state.opened.elapsed().as_millis() as u64;
        state.last_stream_end_ms.store(ms, Ordering::Release);
        state.open_streams.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The deadlines one listener applies to its connections.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    auth: Option<Duration>,
    idle: Option<Duration>,
}

/// An accepted connection: its cap permit, its deadlines and its state.
#[derive(Debug)]
pub struct Guarded<IO> {
    io: IO,
    conn: Conn,
    timeouts: Timeouts,
    /// Made on first use; a connection with no deadline never has one.
    timer: Option<Pin<Box<Sleep>>>,
    expired: bool,
    _permit: OwnedSemaphorePermit,
}

impl<IO> Guarded<IO> {
    fn new(io: IO, peer: Peer, permit: OwnedSemaphorePermit, timeouts: Timeouts) -> Self {
        Guarded {
            io,
            conn: Conn::new(timeouts.auth.is_none(), peer),
            timeouts,
            timer: None,
            expired: false,
            _permit: permit,
        }
    }

    /// When the connection is to be closed, as things stand; `None` when no
    /// deadline applies now (authenticated, with streams open or no idle
    /// timeout).
    fn close_at(&self) -> Option<Instant> {
        let state = &self.conn.0;
        if !state.authenticated.load(Ordering::Acquire) {
            return self.timeouts.auth.map(|t| state.opened + t);
        }
        let idle = self.timeouts.idle?;
        if state.open_streams.load(Ordering::Acquire) > 0 {
            return None;
        }
        let since = Duration::from_millis(state.last_stream_end_ms.load(Ordering::Acquire));
        Some(state.opened + since + idle)
    }

    /// Whether the connection's deadline has passed. Otherwise arms the
    /// timer so this task is woken to look again: at the deadline, or, while
    /// streams are open, one idle timeout from now (a stream ending does not
    /// wake the connection, so it rechecks).
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> bool {
        if self.expired {
            return true;
        }
        loop {
            let now = Instant::now();
            let wake_at = match (self.close_at(), self.timeouts.idle) {
                (Some(at), _) if at <= now => {
                    self.expired = true;
                    let authenticated = self.conn.0.authenticated.load(Ordering::Acquire);
                    debug!(authenticated, "closing a connection at its deadline");
                    return true;
                }
                (Some(at), _) => at,
                (None, Some(idle)) => match &self.timer {
                    Some(timer) if timer.deadline() > now => timer.deadline(),
                    _ => now + idle,
                },
                (None, None) => return false,
            };
            let timer = self
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(wake_at)));
            if timer.deadline() != wake_at {
                timer.as_mut().reset(wake_at);
            }
            if timer.as_mut().poll(cx).is_pending() {
                return false;
            }
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Guarded<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.poll_expired(cx) {
            // End of file: hyper ends the connection and drops the socket.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Guarded<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.poll_expired(cx) {
            return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.poll_expired(cx) {
            return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
        }
        Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<IO> Connected for Guarded<IO> {
    type ConnectInfo = Conn;

    fn connect_info(&self) -> Conn {
        self.conn.clone()
    }
}

/// A listener whose sockets can be guarded.
trait Accept: Send + 'static {
    type Io: Send + 'static;
    fn accept_one(&self) -> impl Future<Output = io::Result<(Self::Io, Peer)>> + Send;
}

/// TCP keepalive on accepted connections: after a minute of silence the
/// kernel probes every 10 s and drops the connection after 3 unanswered
/// probes. The HTTP/2 pings find a dead peer sooner while hyper polls the
/// connection; this also frees a socket (and its cap permit) whose peer
/// vanished while nothing read it, and keeps NAT and firewall state alive
/// under a watch that sends nothing for hours.
const TCP_KEEPALIVE: socket2::TcpKeepalive = socket2::TcpKeepalive::new()
    .with_time(Duration::from_secs(60))
    .with_interval(Duration::from_secs(10))
    .with_retries(3);

/// Socket options of an accepted TCP connection. tonic's own `tcp_nodelay`
/// and `tcp_keepalive` apply only to listeners tonic binds itself, and the
/// daemon serves its own stream of accepted sockets, so they are set here.
fn tune_tcp(stream: &TcpStream) -> io::Result<()> {
    // A response is written as several small HTTP/2 frames (headers, data,
    // trailers); with Nagle's algorithm on, the later ones wait for the
    // client's delayed acknowledgement of the first.
    stream.set_nodelay(true)?;
    socket2::SockRef::from(stream).set_tcp_keepalive(&TCP_KEEPALIVE)
}

impl Accept for TcpListener {
    type Io = TcpStream;
    async fn accept_one(&self) -> io::Result<(TcpStream, Peer)> {
        let (stream, peer) = self.accept().await?;
        // The options only make the connection faster and tidier: one that
        // cannot take them (its peer already gone) is still served, and the
        // accept loop does not back off for it.
        if let Err(err) = tune_tcp(&stream) {
            debug!(%peer, error = %err, "cannot set TCP options on a connection");
        }
        Ok((stream, Peer::Tcp(peer)))
    }
}

impl Accept for UnixListener {
    type Io = UnixStream;
    /// Skips connections from the daemon's own descendants: agents'
    /// programs run as the daemon's user, so the socket's mode does not
    /// keep them out, and Landlock does not cover connecting to a socket
    /// by path. The socket is for operators.
    async fn accept_one(&self) -> io::Result<(UnixStream, Peer)> {
        loop {
            let (stream, _) = self.accept().await?;
            let cred = stream.peer_cred().ok();
            let pid = cred.and_then(|cred| cred.pid());
            if holarchy_actors::sandbox::is_operator_peer(pid) {
                let uid = cred.map(|cred| cred.uid());
                return Ok((stream, Peer::Unix { uid }));
            }
            // Logged at 1, 2, 4, 8... refusals: a program knocking in a
            // loop must not flood the log.
            let refused = REFUSED_PEERS.fetch_add(1, Ordering::Relaxed) + 1;
            if refused.is_power_of_two() {
                warn!(
                    pid,
                    refused, "refused a local connection from an agent's program"
                );
            }
        }
    }
}

/// Unix socket connections refused because they came from agents'
/// programs (or from peers that could not be told apart from them).
static REFUSED_PEERS: AtomicU64 = AtomicU64::new(0);

/// How long to wait before accepting again after an error such as EMFILE,
/// so a full descriptor table does not spin the accept loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepted connections, at most `cap` open at once: at the cap, the next
/// accept waits for a connection to close (the kernel's backlog holds new
/// ones meanwhile).
fn guarded<L: Accept>(
    listener: L,
    cap: usize,
    timeouts: Timeouts,
    what: &'static str,
) -> impl Stream<Item = io::Result<Guarded<L::Io>>> {
    let permits = Arc::new(Semaphore::new(cap));
    futures::stream::unfold((listener, permits), move |(listener, permits)| async move {
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                warn!(
                    listener = what,
                    cap, "connection cap reached; new connections wait"
                );
                // The semaphore is never closed, so this only waits.
                permits.clone().acquire_owned().await.ok()?
            }
        };
        let accepted = match listener.accept_one().await {
            Ok((io, peer)) => Ok(Guarded::new(io, peer, permit, timeouts)),
            Err(err) => {
                warn!(listener = what, error = %err, "accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                Err(err)
            }
        };
        Some((accepted, (listener, permits)))
    })
}

/// TCP connections under the TCP cap, with the authentication deadline and
/// the idle timeout.
pub fn tcp(
    listener: TcpListener,
    limits: &ConnectionLimits,
) -> impl Stream<Item = io::Result<Guarded<TcpStream>>> {
    let timeouts = Timeouts {
        auth: Some(limits.auth_timeout),
        idle: Some(limits.idle_timeout),
    };
    guarded(listener, limits.max_tcp, timeouts, "tcp")
}

/// TLS over the guarded TCP connections: the handshakes run beside one
/// another (at most `cap` at once, the TCP cap), each bounded by its
/// connection's authentication deadline, which the socket's reads obey.
/// A failed handshake closes its connection, logged at debug level: a
/// scanner must not fill the log.
pub fn tls<S>(
    connections: S,
    tls: Arc<super::tls::Tls>,
    cap: usize,
) -> impl Stream<Item = io::Result<super::tls::Secured<Guarded<TcpStream>>>>
where
    S: Stream<Item = io::Result<Guarded<TcpStream>>>,
{
    connections
        .map(move |accepted| {
            let acceptor = tls.acceptor(super::tls::Alpn::H2);
            async move { acceptor.accept(accepted?).await }
        })
        .buffer_unordered(cap.max(1))
        .filter_map(|handshake| async move {
            match handshake {
                Ok(secured) => {
                    let (io, session) = secured.get_ref();
                    let subject = session
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .and_then(|leaf| super::certificate::subject(leaf));
                    if let Some(subject) = subject {
                        let _ = io.conn.0.certificate.set(subject);
                    }
                    Some(Ok(super::tls::Secured(secured)))
                }
                Err(err) => {
                    debug!(error = %err, "a TLS handshake failed");
                    None
                }
            }
        })
}

/// Unix socket connections under their own cap. The socket's 0600 mode is
/// their authentication, and local clients (the CLI's `--follow`) may sit
/// idle, so no deadline applies.
pub fn unix(
    listener: UnixListener,
    limits: &ConnectionLimits,
) -> impl Stream<Item = io::Result<Guarded<UnixStream>>> {
    let timeouts = Timeouts {
        auth: None,
        idle: None,
    };
    guarded(listener, limits.max_unix, timeouts, "unix")
}

/// Counts each request as an open stream of its connection until its
/// response body ends, so the idle timeout spares connections that are
/// busy (a `--follow` watch may send nothing for hours).
#[derive(Debug, Clone, Copy, Default)]
pub struct TrackStreamsLayer;

impl<S> Layer<S> for TrackStreamsLayer {
    type Service = TrackStreams<S>;

    fn layer(&self, inner: S) -> TrackStreams<S> {
        TrackStreams { inner }
    }
}

#[derive(Debug, Clone)]
pub struct TrackStreams<S> {
    inner: S,
}

type HttpRequest = tonic::codegen::http::Request<tonic::body::Body>;
type HttpResponse = tonic::codegen::http::Response<tonic::body::Body>;

impl<S> Service<HttpRequest> for TrackStreams<S>
where
    S: Service<HttpRequest, Response = HttpResponse>,
    S::Future: Send + 'static,
{
    type Response = HttpResponse;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: HttpRequest) -> Self::Future {
        let guard = request.extensions().get::<Conn>().map(Conn::stream_opened);
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| {
                tonic::body::Body::new(Tracked {
                    body,
                    _guard: guard,
                })
            }))
        })
    }
}

/// A response body that holds its stream open until it ends or is dropped.
#[derive(Debug)]
struct Tracked {
    body: tonic::body::Body,
    _guard: Option<StreamGuard>,
}

impl http_body::Body for Tracked {
    type Data = tonic::codegen::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use super::*;

    fn guarded_io(auth: Option<Duration>, idle: Option<Duration>) -> Guarded<()> {
        let permit = Arc::new(Semaphore::new(1))
            .try_acquire_owned()
            .expect("a free permit");
        Guarded::new(
            (),
            Peer::Unix { uid: None },
            permit,
            Timeouts { auth, idle },
        )
    }

    fn expired(io: &mut Guarded<()>) -> bool {
        io.poll_expired(&mut Context::from_waker(Waker::noop()))
    }

    const AUTH: Duration = Duration::from_secs(10);
    const IDLE: Duration = Duration::from_secs(300);

    #[tokio::test]
    async fn an_unauthenticated_connection_closes_at_its_auth_deadline() {
        let mut io = guarded_io(Some(AUTH), Some(IDLE));
        let opened = io.conn.0.opened;
        assert_eq!(io.close_at(), Some(opened + AUTH));
        assert!(!expired(&mut io));
        let mut late = guarded_io(Some(Duration::ZERO), Some(IDLE));
        assert!(expired(&mut late));
        assert!(expired(&mut late), "stays expired");
    }

    #[tokio::test]
    async fn authenticating_lifts_the_deadline_and_open_streams_hold_off_idleness() {
        let mut io = guarded_io(Some(AUTH), Some(IDLE));
        let opened = io.conn.0.opened;
        io.conn.authenticate();
        assert_eq!(io.close_at(), Some(opened + IDLE));
        let first = io.conn.stream_opened();
        let second = io.conn.stream_opened();
        assert_eq!(io.close_at(), None, "busy connections stay");
        assert!(!expired(&mut io));
        assert!(io.timer.is_some(), "a busy connection rechecks later");
        drop(first);
        assert_eq!(io.close_at(), None);
        drop(second);
        let closes = io.close_at().expect("idle again");
        assert!(closes >= opened + IDLE);

        let mut idle = guarded_io(Some(AUTH), Some(Duration::ZERO));
        idle.conn.authenticate();
        assert!(expired(&mut idle), "idle connections go");
    }

    #[tokio::test]
    async fn a_connection_without_deadlines_never_expires() {
        let mut io = guarded_io(None, None);
        assert_eq!(io.close_at(), None);
        assert!(!expired(&mut io));
        assert!(io.timer.is_none());
    }
}
