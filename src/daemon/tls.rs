//! TLS on the daemon's TCP listeners (gRPC and HTTP): the certificate
//! chain and key read from PEM files, and, when a client CA is given,
//! client certificates required and checked against it.
//!
//! The files are read again on SIGHUP: a handshake after the reload gets
//! the new certificate, connections already open keep theirs, and a
//! reload that fails (a file half-written, a key that does not match)
//! keeps the old settings and says why. Each listener takes its settings
//! for every handshake from one swappable pointer, so nothing is locked.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::signal::unix::SignalKind;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::Connected;
use tracing::{info, warn};

/// A PEM file holds at most this much: a chain of a few certificates is
/// a few kilobytes, and anything far larger is not what was meant.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// Where the daemon's TLS material lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first (PEM).
    pub cert: PathBuf,
    /// The leaf's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// Require client certificates issued by this CA (PEM), when set.
    pub client_ca: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{} is larger than {MAX_PEM_BYTES} bytes: is it the right file?", path.display())]
    TooLarge { path: PathBuf },
    #[error("{} holds no PEM certificate", path.display())]
    NoCertificate { path: PathBuf },
    #[error("{} holds no PEM private key ({why})", path.display())]
    NoKey { path: PathBuf, why: String },
    #[error("{} is not PEM that TLS can read: {why}", path.display())]
    Pem { path: PathBuf, why: String },
    #[error("the certificate and key cannot serve TLS: {0}")]
    Config(String),
}

/// Which protocol a listener speaks inside TLS, offered by ALPN.
#[derive(Debug, Clone, Copy)]
pub enum Alpn {
    /// gRPC: HTTP/2 only.
    H2,
    /// Webhooks and the console: HTTP/1.1.
    Http1,
}

impl Alpn {
    fn protocols(self) -> Vec<Vec<u8>> {
        match self {
            Alpn::H2 => vec![b"h2".to_vec()],
            Alpn::Http1 => vec![b"http/1.1".to_vec()],
        }
    }
}

/// The TLS settings of the daemon's listeners, reloadable.
#[derive(Debug)]
pub struct Tls {
    files: TlsFiles,
    grpc: ArcSwap<ServerConfig>,
    http: ArcSwap<ServerConfig>,
}

impl Tls {
    /// Reads the files; refuses a start whose TLS would not work.
    pub fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let (grpc, http) = configs(&files)?;
        Ok(Self {
            files,
            grpc: ArcSwap::from_pointee(grpc),
            http: ArcSwap::from_pointee(http),
        })
    }

    /// Reads the files again; on failure the settings in use stay.
    pub fn reload(&self) -> Result<(), TlsError> {
        let (grpc, http) = configs(&self.files)?;
        self.grpc.store(Arc::new(grpc));
        self.http.store(Arc::new(http));
        Ok(())
    }

    /// Whether clients must show a certificate.
    pub fn requires_client_certificates(&self) -> bool {
        self.files.client_ca.is_some()
    }

    /// An acceptor with the settings in use now, for one handshake.
    pub fn acceptor(&self, alpn: Alpn) -> TlsAcceptor {
        let config = match alpn {
            Alpn::H2 => self.grpc.load_full(),
            Alpn::Http1 => self.http.load_full(),
        };
        TlsAcceptor::from(config)
    }
}

fn configs(files: &TlsFiles) -> Result<(ServerConfig, ServerConfig), TlsError> {
    let chain = certificates(&files.cert)?;
    let key = private_key(&files.key)?;
    let verifier = match &files.client_ca {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates(path)? {
                roots.add(cert).map_err(|err| TlsError::Pem {
                    path: path.clone(),
                    why: err.to_string(),
                })?;
            }
            Some(
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                    .build()
                    .map_err(|err| TlsError::Config(format!("client CA: {err}")))?,
            )
        }
        None => None,
    };
    let build = |alpn: Alpn| -> Result<ServerConfig, TlsError> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|err| TlsError::Config(err.to_string()))?;
        let builder = match &verifier {
            Some(verifier) => builder.with_client_cert_verifier(verifier.clone()),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|err| TlsError::Config(err.to_string()))?;
        config.alpn_protocols = alpn.protocols();
        Ok(config)
    };
    Ok((build(Alpn::H2)?, build(Alpn::Http1)?))
}

/// ring, named rather than taken from the process default: the daemon
/// must not depend on which crypto provider another crate installed.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A PEM file's bytes, bounded.
fn read_pem(path: &Path) -> Result<Vec<u8>, TlsError> {
    use std::io::Read as _;
    let read = |source| TlsError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read)?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(TlsError::TooLarge {
            path: path.to_owned(),
        });
    }
    Ok(bytes)
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_pem(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| TlsError::Pem {
            path: path.to_owned(),
            why: err.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read_pem(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|err| TlsError::NoKey {
        path: path.to_owned(),
        why: err.to_string(),
    })
}

/// A TLS connection on one of the daemon's guarded TCP sockets: requests
/// on it find the same connection handle as on a plain one.
pub struct Secured<IO>(pub TlsStream<IO>);

impl<IO> std::fmt::Debug for Secured<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secured")
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for Secured<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Secured<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<IO: Connected> Connected for Secured<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.0.get_ref().0.connect_info()
    }
}

/// Reads the files again at every SIGHUP, and never returns (the daemon
/// drops it at exit). Without TLS it only waits, leaving SIGHUP as it is.
pub async fn reload_on_hangup(tls: Option<Arc<Tls>>, oidc: Option<Arc<crate::access::oidc::Oidc>>) {
    if tls.is_none() && oidc.is_none() {
        return std::future::pending().await;
    }
    let mut hangups = match tokio::signal::unix::signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(err) => {
            warn!(error = %err, "cannot take SIGHUP: the TLS files and OIDC keys are read at start only");
            return std::future::pending().await;
        }
    };
    while hangups.recv().await.is_some() {
        match tls.as_ref().map(|tls| tls.reload()) {
            Some(Ok(())) => info!(
                "SIGHUP: the TLS certificate and key were read again; new connections get them"
            ),
            Some(Err(err)) => warn!(
                error = %err,
                "SIGHUP: the TLS files could not be read again; the ones in use stay"
            ),
            None => {}
        }
        match oidc.as_ref().map(|oidc| oidc.reload()) {
            Some(Ok(keys)) => info!(keys, "SIGHUP: the OIDC issuer's keys were read again"),
            Some(Err(err)) => warn!(
                error = %err,
                "SIGHUP: the OIDC keys could not be read again; the ones in use stay"
            ),
            None => {}
        }
    }
    std::future::pending().await
}

/// An HTTP connection, plain or under TLS.
pub enum MaybeTls {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl std::fmt::Debug for MaybeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MaybeTls::Plain(_) => "MaybeTls::Plain",
            MaybeTls::Tls(_) => "MaybeTls::Tls",
        })
    }
}

impl AsyncRead for MaybeTls {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(io) => Pin::new(io).poll_read(cx, buf),
            MaybeTls::Tls(io) => Pin::new(io.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for MaybeTls {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(io) => Pin::new(io).poll_write(cx, buf),
            MaybeTls::Tls(io) => Pin::new(io.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(io) => Pin::new(io).poll_flush(cx),
            MaybeTls::Tls(io) => Pin::new(io.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(io) => Pin::new(io).poll_shutdown(cx),
            MaybeTls::Tls(io) => Pin::new(io.as_mut()).poll_shutdown(cx),
        }
    }
}
