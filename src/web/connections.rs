//! Who gets a connection of the HTTP listener, so that no one client can
//! hold it: a general pool (`max_connections`) of which one peer may hold
//! at most `max_connections_per_peer`, and a small reserve that only
//! answers `/healthz` and `/readyz` (one request, a short header timeout),
//! for probes that arrive while the general pool is full or from a peer at
//! its bound. A connection that fits neither is closed at once. While the
//! general pool is nearly full, new connections get a short header (and
//! so idle) timeout, so held-open idle connections turn over fast.
//!
//! A peer is an IPv4 address, or an IPv6 /64 (one host gets a whole /64,
//! so counting single IPv6 addresses would bound nothing).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections of the reserve, all peers together.
pub const RESERVE: usize = 16;
/// Connections of the reserve one peer may hold.
pub const RESERVE_PER_PEER: usize = 2;

/// Which pool a connection came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// Served in full; `pressed`: admitted while the pool was nearly full.
    General { pressed: bool },
    /// Answers the health routes only.
    Reserve,
}

/// The pools and what each peer holds of them.
#[derive(Debug)]
pub struct Connections {
    general: Arc<Semaphore>,
    reserve: Arc<Semaphore>,
    peers: Arc<Mutex<HashMap<Peer, Held>>>,
    max_general: usize,
    per_peer: usize,
}

/// What one peer holds, by pool.
#[derive(Debug, Default, Clone, Copy)]
struct Held {
    general: usize,
    reserve: usize,
}

/// A peer as bounds count it (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Peer {
    V4([u8; 4]),
    V6([u8; 8]),
}

impl Peer {
    fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Peer::V4(v4.octets()),
            IpAddr::V6(v6) => {
                let mut net = [0u8; 8];
                net.copy_from_slice(&v6.octets()[..8]);
                Peer::V6(net)
            }
        }
    }
}

/// A connection's place in a pool; dropping it frees the place.
#[derive(Debug)]
pub struct Slot {
    pub pool: Pool,
    peer: Peer,
    peers: Arc<Mutex<HashMap<Peer, Held>>>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = peers.get_mut(&self.peer) {
            match self.pool {
                Pool::General { .. } => held.general = held.general.saturating_sub(1),
                Pool::Reserve => held.reserve = held.reserve.saturating_sub(1),
            }
            if held.general == 0 && held.reserve == 0 {
                peers.remove(&self.peer);
            }
        }
    }
}

impl Connections {
    /// `per_peer` 0: no bound per peer.
    pub fn new(max_connections: usize, per_peer: usize) -> Self {
        let max_general = max_connections.max(1);
        Self {
            general: Arc::new(Semaphore::new(max_general)),
            reserve: Arc::new(Semaphore::new(RESERVE)),
            peers: Arc::new(Mutex::new(HashMap::new())),
            max_general,
            per_peer: if per_peer == 0 { usize::MAX } else { per_peer },
        }
    }

    /// Resolves once either pool has room. Only the accept loop takes
    /// places, so the room is still there when it admits the connection
    /// it accepts next; while both pools are full, new connections wait in
    /// the kernel's backlog.
    pub async fn room(&self) {
        tokio::select! {
            biased;
            permit = self.general.acquire() => drop(permit),
            permit = self.reserve.acquire() => drop(permit),
        }
    }

    /// A place for a connection from `ip`, or `None`: close it.
    pub fn admit(&self, ip: IpAddr) -> Option<Slot> {
        let peer = Peer::of(ip);
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        let held = peers.entry(peer).or_default();
        let general = (held.general < self.per_peer)
            .then(|| self.general.clone().try_acquire_owned().ok())
            .flatten();
        let (pool, permit) = match general {
            Some(permit) => {
                held.general += 1;
                let free = self.general.available_permits();
                let pressed = free < self.max_general / 4;
                (Pool::General { pressed }, permit)
            }
            None => {
                let reserve = (held.reserve < RESERVE_PER_PEER)
                    .then(|| self.reserve.clone().try_acquire_owned().ok())
                    .flatten();
                match reserve {
                    Some(permit) => {
                        held.reserve += 1;
                        (Pool::Reserve, permit)
                    }
                    None => {
                        if held.general == 0 && held.reserve == 0 {
                            peers.remove(&peer);
                        }
                        return None;
                    }
                }
            }
        };
        Some(Slot {
            pool,
            peer,
            peers: self.peers.clone(),
            _permit: permit,
        })
    }

    /// Peers holding a place now, for tests.
    #[cfg(test)]
    fn peers(&self) -> usize {
        self.peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn one_peer_gets_its_bound_then_the_reserve_then_nothing() {
        let connections = Connections::new(100, 3);
        let general: Vec<_> = (0..3)
            .map(|_| connections.admit(ip("10.0.0.1")).expect("a place"))
            .collect();
        assert!(general
            .iter()
            .all(|slot| matches!(slot.pool, Pool::General { .. })));
        let reserve: Vec<_> = (0..RESERVE_PER_PEER)
            .map(|_| connections.admit(ip("10.0.0.1")).expect("a reserve place"))
            .collect();
        assert!(reserve.iter().all(|slot| slot.pool == Pool::Reserve));
        assert!(connections.admit(ip("10.0.0.1")).is_none());
        // Another peer is not held back by the first one's bound.
        let other = connections.admit(ip("10.0.0.2")).expect("a place");
        assert!(matches!(other.pool, Pool::General { pressed: false }));
        // A place given back is the peer's again.
        drop(general);
        assert!(matches!(
            connections.admit(ip("10.0.0.1")).map(|slot| slot.pool),
            Some(Pool::General { .. })
        ));
    }

    #[test]
    fn a_full_pool_leaves_the_reserve_and_presses_the_last_quarter() {
        let connections = Connections::new(8, 0);
        let held: Vec<Slot> = (0..8)
            .map(|i| {
                connections
                    .admit(ip(&format!("10.0.1.{i}")))
                    .expect("a place")
            })
            .collect();
        assert!(matches!(held[0].pool, Pool::General { pressed: false }));
        assert!(matches!(held[7].pool, Pool::General { pressed: true }));
        let probe = connections.admit(ip("10.0.2.1")).expect("the reserve");
        assert_eq!(probe.pool, Pool::Reserve);
    }

    #[test]
    fn an_ipv6_peer_is_its_slash_64_and_places_are_forgotten_when_freed() {
        let connections = Connections::new(100, 1);
        let first = connections.admit(ip("2001:db8::1")).expect("a place");
        let same_net = connections.admit(ip("2001:db8::2")).expect("the reserve");
        assert_eq!(same_net.pool, Pool::Reserve);
        let other_net = connections.admit(ip("2001:db8:0:1::1")).expect("a place");
        assert!(matches!(other_net.pool, Pool::General { .. }));
        let mapped = connections.admit(ip("::ffff:10.0.0.9")).expect("a place");
        assert!(matches!(mapped.pool, Pool::General { .. }));
        assert!(connections
            .admit(ip("10.0.0.9"))
            .is_some_and(|s| s.pool == Pool::Reserve));
        drop((first, same_net, other_net, mapped));
        assert_eq!(connections.peers(), 0);
    }
}
