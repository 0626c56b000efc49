//! systemd's readiness protocol (`sd_notify`), written out here because it
//! is one datagram: when the service manager sets `NOTIFY_SOCKET`, the
//! daemon sends `READY=1` once its gRPC socket answers and `STOPPING=1`
//! when its shutdown begins. A unit of `Type=notify` (packaging/) is
//! started only when the daemon can be used, and its stop is seen as one.
//!
//! The socket is a path, or an abstract name written with a leading `@`.
//! Sending never blocks the daemon nor fails it: a service manager that
//! is gone costs a warning.

use std::ffi::OsString;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::PathBuf;

/// Where readiness is reported, if anywhere.
#[derive(Debug, Clone, Default)]
pub struct Notifier {
    /// The socket `NOTIFY_SOCKET` named; `None` when not run by a service
    /// manager that asks.
    target: Option<Target>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Path(PathBuf),
    /// Linux's abstract namespace: the name without its `@`.
    Abstract(Vec<u8>),
}

impl Notifier {
    /// Reports to the socket in `NOTIFY_SOCKET`, or nowhere without it.
    pub fn from_env() -> Self {
        Self::to(std::env::var_os("NOTIFY_SOCKET"))
    }

    fn to(socket: Option<OsString>) -> Self {
        let target = socket.and_then(|socket| {
            let bytes = socket.as_bytes();
            match bytes.split_first() {
                None => None,
                Some((b'@', name)) => Some(Target::Abstract(name.to_vec())),
                Some(_) => Some(Target::Path(PathBuf::from(socket))),
            }
        });
        Self { target }
    }

    /// Sends `state` (newline-separated `KEY=VALUE` assignments, as
    /// `READY=1\nSTATUS=serving`) to the service manager, if one listens.
    pub fn send(&self, state: &str) {
        let Some(target) = &self.target else { return };
        let sent = UnixDatagram::unbound().and_then(|socket| {
            // A full queue at the manager must not stall a shutdown.
            socket.set_nonblocking(true)?;
            match target {
                Target::Path(path) => socket.send_to(state.as_bytes(), path),
                Target::Abstract(name) => {
                    let addr = SocketAddr::from_abstract_name(name)?;
                    socket.send_to_addr(state.as_bytes(), &addr)
                }
            }
        });
        if let Err(err) = sent {
            tracing::warn!(error = %err, state, "cannot notify the service manager");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_at_names_an_abstract_socket() {
        let parse = |s: &str| Notifier::to(Some(s.into())).target;
        assert_eq!(
            parse("@holarchy/notify"),
            Some(Target::Abstract(b"holarchy/notify".to_vec()))
        );
        assert_eq!(
            parse("/run/systemd/notify"),
            Some(Target::Path("/run/systemd/notify".into()))
        );
        assert_eq!(parse(""), None);
        assert_eq!(Notifier::to(None).target, None);
    }

    #[test]
    fn sends_one_datagram_to_a_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).expect("binds");
        Notifier::to(Some(path.into_os_string())).send("READY=1");
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).expect("receives");
        assert_eq!(&buf[..n], b"READY=1");
    }
}
