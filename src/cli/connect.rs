//! Where a client finds its daemon: the Unix socket of a data directory
//! (or `--socket`), or TCP at `--addr` with a token given or read from
//! `<data-dir>/token`; and what a failure's hint says about that place.

use std::path::PathBuf;

use super::failure::{CliError, Kind, Place, Reporter, TokenOrigin};
use super::Cli;
use crate::client::{self, Clients, Target, TlsOptions};
use crate::daemon::{SOCKET_FILE, TOKEN_FILE};

impl Cli {
    fn socket(&self) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(|| self.data_dir().join(SOCKET_FILE))
    }

    /// Where a TCP client's token comes from: given, else the named data
    /// directory's token file (the daemon on this host wrote it there).
    fn token_origin(&self) -> TokenOrigin {
        if self.token.is_some() {
            return TokenOrigin::Given;
        }
        match &self.data_dir {
            Some(dir) => {
                let path = dir.join(TOKEN_FILE);
                if path.exists() {
                    TokenOrigin::File(path)
                } else {
                    TokenOrigin::Missing(Some(path))
                }
            }
            None => TokenOrigin::Missing(None),
        }
    }

    /// Where this client looks for its daemon, for a failure's hint.
    pub fn reporter(&self) -> Reporter {
        let place = match &self.addr {
            Some(addr) => Place::Tcp {
                addr: addr.clone(),
                token: self.token_origin(),
            },
            None => Place::Unix {
                data_dir: self.data_dir.clone(),
                named: self.socket.is_some(),
            },
        };
        Reporter {
            json: self.json,
            place,
        }
    }

    pub(super) async fn connect(&self) -> anyhow::Result<Clients> {
        client::connect_in(&self.target()?, self.namespace.as_deref()).await
    }

    pub(super) fn target(&self) -> anyhow::Result<Target> {
        let Some(addr) = &self.addr else {
            return Ok(Target::Unix(self.socket()));
        };
        let url = client::tcp_url(addr)?;
        let token = match self.token_origin() {
            TokenOrigin::Given => self.token.clone(),
            TokenOrigin::File(path) => Some(read_token(&path)?),
            TokenOrigin::Missing(_) => None,
        };
        let https = url.to_ascii_lowercase().starts_with("https://");
        if !https && (self.ca.is_some() || self.client_cert.is_some()) {
            return Err(CliError::new(
                Kind::Invalid,
                format!(
                    "--ca and --client-cert are for a daemon serving TLS: give --addr https://{}",
                    url.trim_start_matches("http://")
                ),
            )
            .into());
        }
        let tls = TlsOptions {
            ca: self.ca.clone(),
            identity: self.client_cert.clone(),
        };
        Ok(Target::Tcp { url, token, tls })
    }
}

/// The token in a token file, bounded: a real one is 64 bytes.
fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(4096).read_to_string(&mut text))
        .map_err(|err| {
            let kind = match err.kind() {
                std::io::ErrorKind::PermissionDenied => Kind::Denied,
                _ => Kind::Failed,
            };
            CliError::new(
                kind,
                format!("cannot read the token file {}: {err}", path.display()),
            )
        })?;
    Ok(text.trim().to_owned())
}
