//! Connections open at once from one peer address (`--max-connections-per-peer`), so that one
//! machine cannot take every slot under the global cap (`--max-connections`) and lock out the
//! others. Peers are IP addresses: a client's many ports are one peer.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Open connections by peer, under a cap.
pub(super) struct Peers {
    cap: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection counted against its peer while it lives.
pub(super) struct PeerSlot {
    peers: Arc<Peers>,
    ip: IpAddr,
}

impl Peers {
    /// At most `cap` connections a peer (at least 1).
    pub(super) fn new(cap: usize) -> Arc<Peers> {
        Arc::new(Peers {
            cap: cap.max(1),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for one more connection from `ip`, or `None` when it has its cap open.
    pub(super) fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<PeerSlot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(ip).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            peers: self.clone(),
            ip,
        })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self
            .peers
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            // No entry for a peer with nothing open: the map stays as small as the open peers.
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_at_its_cap_is_refused_others_are_not_and_a_closed_slot_comes_back() {
        let peers = Peers::new(2);
        let (one, two): (IpAddr, IpAddr) =
            ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let a = peers.admit(one).unwrap();
        let _b = peers.admit(one).unwrap();
        assert!(peers.admit(one).is_none());
        let _c = peers.admit(two).unwrap();
        drop(a);
        assert!(peers.admit(one).is_some());
        drop(_c);
        assert!(!peers.open.lock().unwrap().contains_key(&two));
    }
}
