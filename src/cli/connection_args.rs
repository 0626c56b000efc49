//! `serve` flags for the daemon's connections: caps, timeouts, keepalive
//! and HTTP/2 limits and windows (see `daemon::listen`), each with its
//! default.

use std::time::Duration;

use clap::Args;

use crate::daemon::ConnectionLimits;

#[derive(Debug, Args)]
pub struct ConnectionArgs {
    /// TCP connections open at once; more wait until one closes.
    #[arg(long, default_value_t = ConnectionLimits::default().max_tcp)]
    pub max_connections: usize,
    /// Unix socket connections open at once, counted apart from TCP so TCP
    /// clients cannot lock the socket out.
    #[arg(long, default_value_t = ConnectionLimits::default().max_unix)]
    pub max_unix_connections: usize,
    /// Seconds a TCP connection has to complete an authenticated request
    /// (HTTP/2 handshake included) before it is closed.
    #[arg(long, default_value_t = ConnectionLimits::default().auth_timeout.as_secs())]
    pub auth_timeout: u64,
    /// Seconds an authenticated TCP connection with no call open stays
    /// before it is closed.
    #[arg(long, default_value_t = ConnectionLimits::default().idle_timeout.as_secs())]
    pub idle_timeout: u64,
    /// Seconds between HTTP/2 keepalive pings on every connection.
    #[arg(long, default_value_t = ConnectionLimits::default().keepalive_interval.as_secs())]
    pub keepalive_interval: u64,
    /// Seconds a keepalive ping may go unanswered before the connection is
    /// dropped.
    #[arg(long, default_value_t = ConnectionLimits::default().keepalive_timeout.as_secs())]
    pub keepalive_timeout: u64,
    /// Calls (HTTP/2 streams) one connection may have open at once.
    #[arg(long, default_value_t = ConnectionLimits::default().max_streams)]
    pub max_streams_per_connection: u32,
    /// Bytes of headers one request may send.
    #[arg(long, default_value_t = ConnectionLimits::default().max_header_bytes)]
    pub max_header_bytes: u32,
    /// Bytes a client may send on one call before the daemon acknowledges
    /// them (the HTTP/2 stream window).
    #[arg(long, default_value_t = ConnectionLimits::default().stream_window)]
    pub http2_stream_window: u32,
    /// Bytes a client may send on one connection, all calls together,
    /// before the daemon acknowledges them.
    #[arg(long, default_value_t = ConnectionLimits::default().connection_window)]
    pub http2_connection_window: u32,
    /// Grow the HTTP/2 windows to the measured bandwidth-delay product
    /// (for clients far away sending large requests).
    #[arg(long, default_value_t = ConnectionLimits::default().adaptive_window)]
    pub http2_adaptive_window: bool,
}

/// The longest any connection timeout or interval may be: a week. Far
/// beyond any useful setting, and far below where adding it to the clock
/// would overflow (which would panic the daemon).
const MAX_TIMEOUT_S: u64 = 7 * 24 * 3600;

/// The largest HTTP/2 flow-control window (RFC 9113, 6.9.1).
const MAX_WINDOW: u32 = (1 << 31) - 1;

/// The smallest: the protocol's initial window, so the daemon never grants
/// less than a peer may assume before it reads the daemon's settings.
const MIN_WINDOW: u32 = 65_535;

impl ConnectionArgs {
    /// The connection flags, refusing values that would stop the daemon
    /// from serving at all.
    pub fn limits(&self) -> anyhow::Result<ConnectionLimits> {
        for (flag, value) in [
            ("--max-connections", self.max_connections as u64),
            ("--max-unix-connections", self.max_unix_connections as u64),
            ("--auth-timeout", self.auth_timeout),
            ("--idle-timeout", self.idle_timeout),
            ("--keepalive-interval", self.keepalive_interval),
            ("--keepalive-timeout", self.keepalive_timeout),
            (
                "--max-streams-per-connection",
                u64::from(self.max_streams_per_connection),
            ),
            ("--max-header-bytes", u64::from(self.max_header_bytes)),
        ] {
            anyhow::ensure!(value > 0, "{flag} must be at least 1");
        }
        for (flag, value) in [
            ("--auth-timeout", self.auth_timeout),
            ("--idle-timeout", self.idle_timeout),
            ("--keepalive-interval", self.keepalive_interval),
            ("--keepalive-timeout", self.keepalive_timeout),
        ] {
            anyhow::ensure!(
                value <= MAX_TIMEOUT_S,
                "{flag} must be at most {MAX_TIMEOUT_S} seconds (a week)"
            );
        }
        for (flag, value) in [
            ("--http2-stream-window", self.http2_stream_window),
            ("--http2-connection-window", self.http2_connection_window),
        ] {
            anyhow::ensure!(
                (MIN_WINDOW..=MAX_WINDOW).contains(&value),
                "{flag} must be between {MIN_WINDOW} and {MAX_WINDOW} bytes"
            );
        }
        Ok(ConnectionLimits {
            max_tcp: self.max_connections,
            max_unix: self.max_unix_connections,
            auth_timeout: Duration::from_secs(self.auth_timeout),
            idle_timeout: Duration::from_secs(self.idle_timeout),
            keepalive_interval: Duration::from_secs(self.keepalive_interval),
            keepalive_timeout: Duration::from_secs(self.keepalive_timeout),
            max_streams: self.max_streams_per_connection,
            max_header_bytes: self.max_header_bytes,
            stream_window: self.http2_stream_window,
            connection_window: self.http2_connection_window,
            adaptive_window: self.http2_adaptive_window,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        connections: ConnectionArgs,
    }

    fn limits(args: &[&str]) -> anyhow::Result<ConnectionLimits> {
        let flags = Flags::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .expect("flags parse");
        flags.connections.limits()
    }

    #[test]
    fn the_defaults_are_accepted() {
        limits(&[]).expect("defaults");
    }

    #[test]
    fn a_timeout_past_a_week_is_refused_rather_than_overflowing_the_clock() {
        for flag in [
            "--auth-timeout",
            "--idle-timeout",
            "--keepalive-interval",
            "--keepalive-timeout",
        ] {
            let huge = u64::MAX.to_string();
            let err = limits(&[flag, &huge]).expect_err("refused").to_string();
            assert!(err.contains(flag) && err.contains("at most"), "{err}");
            limits(&[flag, &MAX_TIMEOUT_S.to_string()]).expect("a week is fine");
        }
    }
}
