//! Trust between workers: everything they exchange over NATS is authenticated with the cluster's
//! secret (`--cluster-secret-file`, or `WASMRPC_CLUSTER_SECRET`), so a client that reaches NATS
//! without it cannot run a call as any tenant, answer in a worker's place, or plant a worker,
//! a registration or a tenant directory in the shared buckets.
//!
//! - Messages (calls and their replies) carry `Wasmrpc-Time` (milliseconds since the epoch),
//!   `Wasmrpc-Digest` (the sha256 of the body, wherever it travels: inline or through the payload
//!   store) and `Wasmrpc-Signature`, an HMAC-SHA256 over the subject and every header that means
//!   something ([`SIGNED`]). A message is accepted within [`TRUST_WINDOW`] of its time, by the
//!   receiver's clock; its headers are checked before its body is fetched.
//! - Key-value entries are sealed: `wasmrpc-sig1 <ms> <hex mac>\n` before the value, the MAC over
//!   the bucket, the key, the time and the value, so an entry cannot be moved to another key.
//!
//! Without a secret (allowed only when NATS is on this machine, see `Cluster::join`), nothing is
//! signed and everything is accepted, as before. What fails is ignored or refused, never run, and
//! logged at warn at most once a second per kind ([`Refusals`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::HeaderMap;
use bytes::Bytes;
use ring::hmac;
use sha2::{Digest as _, Sha256};

/// How far a message's time may be from the receiver's clock: it bounds a replay of a captured
/// message, and must exceed the workers' clock skew (keep them in step with NTP).
pub const TRUST_WINDOW: Duration = Duration::from_secs(30);
/// The most signatures of calls remembered (those of the last [`TRUST_WINDOW`]) to refuse a
/// replay: past it, older ones are forgotten first, and a call is still checked for everything
/// else. 40 bytes each: 10 MiB at most.
pub const MAX_REMEMBERED_CALLS: usize = 1 << 18;
/// The shortest secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 16;

/// The header with a message's time.
pub const TIME: &str = "Wasmrpc-Time";
/// The header with the sha256 (hex) of a message's body.
pub const DIGEST: &str = "Wasmrpc-Digest";
/// The header with a message's HMAC.
pub const SIGNATURE: &str = "Wasmrpc-Signature";
/// The header with a message's random nonce: two calls alike in every other way (the same
/// arguments to the same worker in the same millisecond, from two workers) are still two calls,
/// not one and its replay.
pub const NONCE: &str = "Wasmrpc-Nonce";
/// The headers a signature covers, in order (absent ones count as absent). Every header a worker
/// acts on is here.
const SIGNED: &[&str] = &[
    "Wasmrpc-Tenant",
    "Wasmrpc-Method",
    "Wasmrpc-Version",
    "Wasmrpc-Timeout-Ms",
    "Wasmrpc-Limits",
    "Wasmrpc-Object",
    "Wasmrpc-Code",
    "Wasmrpc-Message",
    "Wasmrpc-Worker",
    DIGEST,
    TIME,
    NONCE,
];
/// What a sealed key-value entry begins with.
const SEAL: &[u8] = b"wasmrpc-sig1 ";

/// The cluster's secret. Its `Debug` never shows it.
#[derive(Clone)]
pub struct ClusterSecret(Arc<Vec<u8>>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(***)")
    }
}

impl ClusterSecret {
    /// A secret from its text (surrounding whitespace dropped); `from` names where it came from
    /// in an error, which never shows the value.
    ///
    /// # Errors
    /// It is shorter than [`MIN_SECRET_BYTES`].
    pub fn new(text: &str, from: &str) -> Result<ClusterSecret, String> {
        let text = text.trim();
        if text.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "the cluster secret in {from} is too short: give at least {MIN_SECRET_BYTES} \
                 bytes, the same on every worker (e.g. `head -c 32 /dev/urandom | base64 > \
                 cluster.secret`)"
            ));
        }
        Ok(ClusterSecret(Arc::new(text.as_bytes().to_vec())))
    }
}

/// Why a message or an entry was not trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untrusted {
    /// It carries no signature (a client without the secret, or a worker without one).
    Unsigned,
    /// Its signature does not match (another secret, or a forgery).
    BadSignature,
    /// Its time is outside [`TRUST_WINDOW`] (a replay, or a clock out of step).
    Stale,
    /// Its body is not the one its signed digest names.
    BadBody,
    /// The same call was received before (a replay).
    Replayed,
}

impl std::fmt::Display for Untrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Untrusted::Unsigned => "not signed with the cluster's secret",
            Untrusted::BadSignature => {
                "its signature does not match the cluster's secret (another secret, or forged)"
            }
            Untrusted::Stale => "its time is outside the trust window (replayed, or clocks apart)",
            Untrusted::BadBody => "its body does not match its signed digest",
            Untrusted::Replayed => "the same call was received before (replayed)",
        })
    }
}

/// How this worker signs and checks: with the cluster's key, or (no secret) not at all.
#[derive(Clone, Debug)]
pub struct Trust {
    key: Option<hmac::Key>,
    refusals: Arc<Refusals>,
    /// The signatures of the calls received within the window, and when they were received.
    seen: Arc<std::sync::Mutex<Seen>>,
}

/// Signatures seen, oldest first, for [`Trust::check_once`].
#[derive(Debug, Default)]
struct Seen {
    set: std::collections::HashSet<[u8; 32]>,
    order: std::collections::VecDeque<([u8; 32], u64)>,
}

/// Milliseconds since the Unix epoch (0 if the clock is before it): the one clock of the
/// cluster's signatures, entries and rate buckets.
pub fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(u64::MAX)
}

/// Appends `part` to a MAC's input, its length first, so parts cannot run into each other.
fn part(input: &mut Vec<u8>, part: Option<&[u8]>) {
    match part {
        Some(p) => {
            input.extend_from_slice(&u64::try_from(p.len()).unwrap_or(u64::MAX).to_be_bytes());
            input.extend_from_slice(p);
        }
        None => input.extend_from_slice(&u64::MAX.to_be_bytes()),
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(async_nats::HeaderValue::as_str)
}

impl Trust {
    /// Trust by `secret`, or, without one, trust everything.
    pub fn new(secret: Option<&ClusterSecret>) -> Trust {
        Trust {
            key: secret.map(|s| hmac::Key::new(hmac::HMAC_SHA256, &s.0)),
            refusals: Arc::new(Refusals::default()),
            seen: Arc::new(std::sync::Mutex::new(Seen::default())),
        }
    }

    /// Whether messages and entries are authenticated (a secret was given).
    pub fn enforced(&self) -> bool {
        self.key.is_some()
    }

    fn message_input(subject: &str, headers: &HeaderMap) -> Vec<u8> {
        let mut input = b"wasmrpc message v1".to_vec();
        part(&mut input, Some(subject.as_bytes()));
        for name in SIGNED {
            part(&mut input, header(headers, name).map(str::as_bytes));
        }
        input
    }

    /// Sign a message to `subject` whose body is `body` (before it is moved to the payload
    /// store: the digest covers it wherever it travels). Call once every other header is set.
    pub fn sign(&self, subject: &str, headers: &mut HeaderMap, body: &[u8]) {
        let Some(key) = &self.key else { return };
        headers.insert(DIGEST, hex::encode(Sha256::digest(body)).as_str());
        headers.insert(TIME, now_ms().to_string().as_str());
        headers.insert(NONCE, hex::encode(super::rand_id()).as_str());
        let tag = hmac::sign(key, &Self::message_input(subject, headers));
        headers.insert(SIGNATURE, hex::encode(tag.as_ref()).as_str());
    }

    /// Check a message's headers (received on `subject`): before its body is fetched.
    ///
    /// # Errors
    /// Why it is not to be trusted.
    pub fn check(&self, subject: &str, headers: Option<&HeaderMap>) -> Result<(), Untrusted> {
        let Some(key) = &self.key else { return Ok(()) };
        let headers = headers.ok_or(Untrusted::Unsigned)?;
        let signature = header(headers, SIGNATURE)
            .and_then(|s| hex::decode(s).ok())
            .ok_or(Untrusted::Unsigned)?;
        hmac::verify(key, &Self::message_input(subject, headers), &signature)
            .map_err(|_| Untrusted::BadSignature)?;
        let at: u64 = header(headers, TIME)
            .and_then(|t| t.parse().ok())
            .ok_or(Untrusted::Unsigned)?;
        if now_ms().abs_diff(at) > u64::try_from(TRUST_WINDOW.as_millis()).unwrap_or(u64::MAX) {
            return Err(Untrusted::Stale);
        }
        Ok(())
    }

    /// [`Trust::check`] for a call, which is also refused when the same call (its signature)
    /// came before within the window: a captured call replayed is not run twice.
    ///
    /// # Errors
    /// Why it is not to be trusted.
    pub fn check_once(&self, subject: &str, headers: Option<&HeaderMap>) -> Result<(), Untrusted> {
        self.check(subject, headers)?;
        let Some(signature) = headers
            .and_then(|h| header(h, SIGNATURE))
            .and_then(|s| <[u8; 32]>::try_from(hex::decode(s).ok()?).ok())
        else {
            // No secret: nothing signed, nothing to remember.
            return Ok(());
        };
        let now = now_ms();
        let window = u64::try_from(TRUST_WINDOW.as_millis()).unwrap_or(u64::MAX);
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A message older than the window is refused as stale: what was seen before it, too.
        // The window counts both ways (clocks apart), hence twice.
        while let Some(&(old, at)) = seen.order.front() {
            if now.saturating_sub(at) <= 2 * window && seen.order.len() < MAX_REMEMBERED_CALLS {
                break;
            }
            seen.order.pop_front();
            seen.set.remove(&old);
        }
        if !seen.set.insert(signature) {
            return Err(Untrusted::Replayed);
        }
        seen.order.push_back((signature, now));
        Ok(())
    }

    /// Check that `body` is the one a checked message's headers name.
    ///
    /// # Errors
    /// [`Untrusted::BadBody`].
    pub fn check_body(&self, headers: Option<&HeaderMap>, body: &[u8]) -> Result<(), Untrusted> {
        if self.key.is_none() {
            return Ok(());
        }
        let want = headers.and_then(|h| header(h, DIGEST));
        if want == Some(hex::encode(Sha256::digest(body)).as_str()) {
            Ok(())
        } else {
            Err(Untrusted::BadBody)
        }
    }

    fn entry_input(bucket: &str, key: &str, at: u64, value: &[u8]) -> Vec<u8> {
        let mut input = b"wasmrpc entry v1".to_vec();
        part(&mut input, Some(bucket.as_bytes()));
        part(&mut input, Some(key.as_bytes()));
        part(&mut input, Some(&at.to_be_bytes()));
        part(&mut input, Some(value));
        input
    }

    /// `value` sealed for `key` of `bucket` (as it is, without a secret).
    pub fn seal(&self, bucket: &str, key: &str, value: &[u8]) -> Bytes {
        self.seal_at(bucket, key, value, now_ms())
    }

    /// `value` sealed for `key` of `bucket` as of `at` (milliseconds since the epoch).
    pub fn seal_at(&self, bucket: &str, key: &str, value: &[u8], at: u64) -> Bytes {
        let Some(k) = &self.key else {
            return Bytes::copy_from_slice(value);
        };
        let tag = hmac::sign(k, &Self::entry_input(bucket, key, at, value));
        let mut sealed = SEAL.to_vec();
        sealed.extend_from_slice(format!("{at} {}\n", hex::encode(tag.as_ref())).as_bytes());
        sealed.extend_from_slice(value);
        Bytes::from(sealed)
    }

    /// The value of an entry read from `key` of `bucket`, and when it was sealed (0 without a
    /// secret), if it is this cluster's. Without a secret a seal is dropped unchecked.
    ///
    /// # Errors
    /// Why the entry is not to be trusted.
    pub fn open<'a>(
        &self,
        bucket: &str,
        key: &str,
        entry: &'a [u8],
    ) -> Result<(&'a [u8], u64), Untrusted> {
        let sealed = entry.strip_prefix(SEAL).and_then(|rest| {
            let line = rest.iter().position(|&b| b == b'\n')?;
            let (head, value) = (std::str::from_utf8(&rest[..line]).ok()?, &rest[line + 1..]);
            let (at, tag) = head.split_once(' ')?;
            Some((at.parse::<u64>().ok()?, hex::decode(tag).ok()?, value))
        });
        match (&self.key, sealed) {
            (None, Some((_, _, value))) => Ok((value, 0)),
            (None, None) => Ok((entry, 0)),
            (Some(_), None) => Err(Untrusted::Unsigned),
            (Some(k), Some((at, tag, value))) => {
                hmac::verify(k, &Self::entry_input(bucket, key, at, value), &tag)
                    .map_err(|_| Untrusted::BadSignature)?;
                Ok((value, at))
            }
        }
    }

    /// Whether an entry sealed at `at` (milliseconds) is recent: within [`TRUST_WINDOW`] of
    /// now. Always, without a secret.
    pub fn fresh(&self, at: u64) -> bool {
        self.key.is_none()
            || now_ms().abs_diff(at) <= u64::try_from(TRUST_WINDOW.as_millis()).unwrap_or(u64::MAX)
    }

    /// Log that `what` was refused because `why`, at warn, at most once a second per `what`
    /// (a flood of forgeries must not fill the log); the skipped ones are counted in the next.
    pub fn refused(&self, what: Refused, why: Untrusted) {
        self.refusals.note(what, why);
    }
}

/// What was refused, for the log.
#[derive(Debug, Clone, Copy)]
pub enum Refused {
    /// A call received on this worker's subject.
    Call,
    /// A reply to a call this worker sent.
    Reply,
    /// An entry of a shared bucket.
    Entry(&'static str),
}

/// The last time each kind of refusal was logged, and how many were not since.
#[derive(Debug, Default)]
pub struct Refusals {
    /// Per kind (call, reply, entry): milliseconds of the last warning, and skipped since.
    last: [AtomicU64; 3],
    skipped: [AtomicU64; 3],
}

impl Refusals {
    fn note(&self, what: Refused, why: Untrusted) {
        let slot = match what {
            Refused::Call => 0,
            Refused::Reply => 1,
            Refused::Entry(_) => 2,
        };
        let now = now_ms();
        let last = self.last[slot].load(Ordering::Relaxed);
        if now.saturating_sub(last) < 1000
            || self.last[slot]
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            self.skipped[slot].fetch_add(1, Ordering::Relaxed);
            return;
        }
        let skipped = self.skipped[slot].swap(0, Ordering::Relaxed);
        match what {
            Refused::Call => tracing::warn!(
                reason = %why, skipped,
                "refused a call from NATS: not from a worker of this cluster (every worker \
                 needs the same --cluster-secret-file); it was not run"
            ),
            Refused::Reply => tracing::warn!(
                reason = %why, skipped,
                "ignored a reply from NATS: not from a worker of this cluster (every worker \
                 needs the same --cluster-secret-file)"
            ),
            Refused::Entry(bucket) => tracing::warn!(
                bucket, reason = %why, skipped,
                "ignored an entry of a cluster bucket: not written by a worker of this cluster \
                 (every worker needs the same --cluster-secret-file)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trust(secret: &str) -> Trust {
        Trust::new(Some(&ClusterSecret::new(secret, "a test").unwrap()))
    }

    #[test]
    fn a_signed_message_checks_and_any_change_does_not() {
        let t = trust("0123456789abcdef-secret");
        let mut h = HeaderMap::new();
        h.insert("Wasmrpc-Tenant", "a");
        t.sign("wasmrpc.call.w1", &mut h, b"body");
        assert_eq!(t.check("wasmrpc.call.w1", Some(&h)), Ok(()));
        assert_eq!(t.check_body(Some(&h), b"body"), Ok(()));
        assert_eq!(t.check_body(Some(&h), b"other"), Err(Untrusted::BadBody));
        assert_eq!(
            t.check("wasmrpc.call.w2", Some(&h)),
            Err(Untrusted::BadSignature)
        );
        let other = trust("another-secret-of-16-bytes");
        assert_eq!(
            other.check("wasmrpc.call.w1", Some(&h)),
            Err(Untrusted::BadSignature)
        );
        h.insert("Wasmrpc-Tenant", "b");
        assert_eq!(
            t.check("wasmrpc.call.w1", Some(&h)),
            Err(Untrusted::BadSignature)
        );
        assert_eq!(
            t.check("wasmrpc.call.w1", Some(&HeaderMap::new())),
            Err(Untrusted::Unsigned)
        );
        assert_eq!(t.check("wasmrpc.call.w1", None), Err(Untrusted::Unsigned));
    }

    #[test]
    fn two_calls_alike_are_two_calls() {
        let t = trust("0123456789abcdef-secret");
        let (mut one, mut two) = (HeaderMap::new(), HeaderMap::new());
        t.sign("s", &mut one, b"body");
        t.sign("s", &mut two, b"body");
        assert_eq!(t.check_once("s", Some(&one)), Ok(()));
        assert_eq!(t.check_once("s", Some(&two)), Ok(()));
    }

    #[test]
    fn a_call_is_taken_once() {
        let t = trust("0123456789abcdef-secret");
        let mut h = HeaderMap::new();
        t.sign("s", &mut h, b"body");
        assert_eq!(t.check_once("s", Some(&h)), Ok(()));
        assert_eq!(t.check_once("s", Some(&h)), Err(Untrusted::Replayed));
        let mut again = HeaderMap::new();
        again.insert("Wasmrpc-Tenant", "a");
        t.sign("s", &mut again, b"body");
        assert_eq!(t.check_once("s", Some(&again)), Ok(()));
    }

    #[test]
    fn a_sealed_entry_opens_only_under_its_key_and_secret() {
        let t = trust("0123456789abcdef-secret");
        let sealed = t.seal("b", "k", b"{\"x\":1}");
        assert_eq!(t.open("b", "k", &sealed).unwrap().0, b"{\"x\":1}");
        assert_eq!(t.open("b", "k2", &sealed), Err(Untrusted::BadSignature));
        assert_eq!(t.open("b", "k", b"{\"x\":1}"), Err(Untrusted::Unsigned));
        let open = Trust::new(None);
        assert_eq!(open.open("b", "k", &sealed).unwrap().0, b"{\"x\":1}");
        assert!(ClusterSecret::new("short", "x").is_err());
        assert_eq!(
            format!("{:?}", ClusterSecret::new("0123456789abcdef", "x").unwrap()),
            "ClusterSecret(***)"
        );
    }
}
