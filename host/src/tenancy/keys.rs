//! API keys: how they are made, what they look like, and how they are checked.
//!
//! A tenant key is `wrpc_<key id>_<secret>`: a public id (8 random bytes, hex) that names the key
//! in listings and revocations, and a secret of 32 random bytes (base64url). Only the secret's
//! sha256 is stored: with 256 bits of entropy a fast hash is enough, and comparing it takes the
//! same time whether or not the key exists.

use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq;

/// The prefix every wasmrpc key starts with (so a leaked key is easy to recognise and scan for).
pub const PREFIX: &str = "wrpc_";

/// Random bytes in a key's id.
const ID_BYTES: usize = 8;
/// Random bytes in a key's secret.
const SECRET_BYTES: usize = 32;

/// A new key, as shown once to whoever created it.
#[derive(Debug, Clone)]
pub struct NewKey {
    /// The whole key, to send as `Authorization: Bearer <key>`.
    pub key: String,
    /// Its public id.
    pub key_id: String,
    /// What is stored: the sha256 of its secret.
    pub hash: KeyHash,
}

/// The sha256 of a key's secret.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyHash(pub [u8; 32]);

impl std::fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyHash(..)")
    }
}

impl KeyHash {
    /// The hash of `secret`.
    pub fn of(secret: &str) -> KeyHash {
        KeyHash(Sha256::digest(secret.as_bytes()).into())
    }

    /// Whether `self` and `other` are equal, in time that does not depend on where they differ.
    pub fn matches(&self, other: &KeyHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }

    /// As stored: 64 hex digits.
    pub fn to_hex(self) -> String {
        hex::encode(self.0)
    }

    /// From its stored form.
    ///
    /// # Errors
    /// Text that is not 64 hex digits.
    pub fn from_hex(text: &str) -> Result<KeyHash, String> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(text, &mut out).map_err(|e| format!("bad key hash: {e}"))?;
        Ok(KeyHash(out))
    }
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    // The OS's generator does not fail on a working system; a server that cannot get
    // randomness must not hand out keys at all.
    getrandom::fill(&mut bytes).expect("the operating system's random number generator failed");
    bytes
}

fn encode_secret(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A new random tenant key.
pub fn new_tenant_key() -> NewKey {
    let key_id = hex::encode(random::<ID_BYTES>());
    let secret = encode_secret(&random::<SECRET_BYTES>());
    NewKey {
        key: format!("{PREFIX}{key_id}_{secret}"),
        hash: KeyHash::of(&secret),
        key_id,
    }
}

/// A new random admin key (it has no id: there is one admin key).
pub fn new_admin_key() -> String {
    format!("{PREFIX}admin_{}", encode_secret(&random::<SECRET_BYTES>()))
}

/// A tenant key taken apart: its id and the hash of its secret. `None` when the text does not
/// have a key's shape (the caller answers it exactly as an unknown key).
pub fn parse_tenant_key(key: &str) -> Option<(&str, KeyHash)> {
    let rest = key.strip_prefix(PREFIX)?;
    let (key_id, secret) = rest.split_once('_')?;
    let well_formed = key_id.len() == ID_BYTES * 2
        && key_id.bytes().all(|b| b.is_ascii_hexdigit())
        && !secret.is_empty();
    well_formed.then(|| (key_id, KeyHash::of(secret)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_key_parses_back_to_its_id_and_hash() {
        let new = new_tenant_key();
        assert!(new.key.starts_with(PREFIX));
        let (id, hash) = parse_tenant_key(&new.key).expect("well formed");
        assert_eq!(id, new.key_id);
        assert!(hash.matches(&new.hash));
        // 16 hex digits of id, 43 base64url characters of secret.
        assert_eq!(new.key.len(), PREFIX.len() + 16 + 1 + 43);
    }

    #[test]
    fn keys_are_random() {
        let (a, b) = (new_tenant_key(), new_tenant_key());
        assert_ne!(a.key, b.key);
        assert_ne!(a.key_id, b.key_id);
        assert_ne!(new_admin_key(), new_admin_key());
    }

    #[test]
    fn anything_else_is_not_a_key() {
        for text in [
            "",
            "wrpc_",
            "wrpc_0123456789abcdef",
            "wrpc_0123456789abcdef_",
            "wrpc_0123_secret",
            "wrpc_0123456789abcdeg_secret",
            "Bearer wrpc_0123456789abcdef_secret",
            "sk-0123456789abcdef_secret",
        ] {
            assert!(parse_tenant_key(text).is_none(), "{text:?}");
        }
    }

    #[test]
    fn a_wrong_secret_does_not_match() {
        let new = new_tenant_key();
        let forged = format!("{PREFIX}{}_{}", new.key_id, "A".repeat(43));
        let (_, hash) = parse_tenant_key(&forged).unwrap();
        assert!(!hash.matches(&new.hash));
        assert_eq!(KeyHash::from_hex(&new.hash.to_hex()).unwrap(), new.hash);
        assert_eq!(format!("{:?}", new.hash), "KeyHash(..)");
    }
}
