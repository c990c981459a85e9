//! The disk entry format: a header, the full cache key and the CUBIN, authenticated with
//! HMAC-SHA-256 under the cache directory's secret (SECURITY.md, "What is checked on every
//! read").

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"OXICUBIN";
/// Version 2 authenticates entries with HMAC-SHA-256 and keys them with the compile options,
/// the NVRTC library and the crate version; entries of version 1 (an FNV checksum) are ignored.
pub(crate) const FORMAT_VERSION: u32 = 2;
/// The largest entry file that is read: the largest CUBIN is a few hundred KiB, so a file this
/// large is not an entry, and reading it would only cost memory.
pub(crate) const MAX_ENTRY_BYTES: u64 = 16 << 20;
/// Length of the directory's secret, the HMAC key.
pub(crate) const SECRET_BYTES: usize = 32;
const MAC_BYTES: usize = 32;
/// The authenticated part of the header: magic, version (u32), key length (u32), payload
/// length (u64). The MAC follows it.
const FIELDS_BYTES: usize = 8 + 4 + 4 + 8;
const HEADER_BYTES: usize = FIELDS_BYTES + MAC_BYTES;

/// The HMAC key of one cache directory (SECURITY.md, "Entries are authenticated").
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(pub(crate) [u8; SECRET_BYTES]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// SHA-256 of `data`, in lower-case hex.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The HMAC over the header fields, the key and the payload (the lengths in the fields make
/// the concatenation unambiguous).
fn entry_mac(secret: &Secret, fields: &[u8], key: &[u8], payload: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&secret.0)
        .expect("HMAC takes keys of any length");
    mac.update(fields);
    mac.update(key);
    mac.update(payload);
    mac
}

/// Serialises one disk entry.
pub(crate) fn encode_entry(secret: &Secret, key: &str, payload: &[u8]) -> Vec<u8> {
    let mut entry = Vec::with_capacity(HEADER_BYTES + key.len() + payload.len());
    entry.extend_from_slice(MAGIC);
    entry.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    entry.extend_from_slice(&(key.len() as u32).to_le_bytes());
    entry.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let mac = entry_mac(secret, &entry, key.as_bytes(), payload).finalize();
    entry.extend_from_slice(&mac.into_bytes());
    entry.extend_from_slice(key.as_bytes());
    entry.extend_from_slice(payload);
    entry
}

/// Parses one disk entry; `None` unless it is complete, written for `key`, and its MAC verifies
/// under `secret` (compared in constant time).
pub(crate) fn decode_entry(secret: &Secret, key: &str, entry: &[u8]) -> Option<Vec<u8>> {
    let header = entry.get(..HEADER_BYTES)?;
    let (fields, mac) = header.split_at(FIELDS_BYTES);
    let (magic, rest) = fields.split_at(8);
    let (version, rest) = rest.split_at(4);
    let (key_len, payload_len) = rest.split_at(4);
    if magic != MAGIC || u32::from_le_bytes(version.try_into().ok()?) != FORMAT_VERSION {
        return None;
    }
    let key_len = usize::try_from(u32::from_le_bytes(key_len.try_into().ok()?)).ok()?;
    let payload_len = usize::try_from(u64::from_le_bytes(payload_len.try_into().ok()?)).ok()?;
    let body = &entry[HEADER_BYTES..];
    if body.len() != key_len.checked_add(payload_len)? {
        return None;
    }
    let (stored_key, payload) = body.split_at(key_len);
    if stored_key != key.as_bytes() {
        return None;
    }
    entry_mac(secret, fields, stored_key, payload)
        .verify_slice(mac)
        .ok()?;
    Some(payload.to_vec())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const SECRET: Secret = Secret([7; SECRET_BYTES]);

    /// What someone who knows the format and the key, but not the directory's secret, can
    /// compute over a payload of their choice: an entry of the right layout whose MAC field
    /// holds the plain SHA-256 of what the real MAC covers.
    pub(crate) fn forged_entry(key: &str, payload: &[u8]) -> Vec<u8> {
        let mut entry = encode_entry(&Secret([0; SECRET_BYTES]), key, payload);
        let mut digest = Sha256::new();
        digest.update(&entry[..FIELDS_BYTES]);
        digest.update(key.as_bytes());
        digest.update(payload);
        entry[FIELDS_BYTES..HEADER_BYTES].copy_from_slice(&digest.finalize());
        entry
    }

    #[test]
    fn entry_round_trip() {
        let entry = encode_entry(&SECRET, "key", b"\x7fELF payload");
        assert_eq!(
            decode_entry(&SECRET, "key", &entry).as_deref(),
            Some(&b"\x7fELF payload"[..])
        );
    }

    #[test]
    fn every_truncation_is_rejected() {
        let entry = encode_entry(&SECRET, "some key", &[7u8; 64]);
        for len in 0..entry.len() {
            assert_eq!(
                decode_entry(&SECRET, "some key", &entry[..len]),
                None,
                "len {len}"
            );
        }
    }

    #[test]
    fn corruption_wrong_key_and_wrong_secret_are_rejected() {
        let entry = encode_entry(&SECRET, "k1", &[1, 2, 3, 4]);
        for i in 0..entry.len() {
            let mut bad = entry.clone();
            bad[i] ^= 0x10;
            assert_eq!(decode_entry(&SECRET, "k1", &bad), None, "byte {i}");
        }
        assert_eq!(decode_entry(&SECRET, "k2", &entry), None);
        let mut longer = entry.clone();
        longer.push(0);
        assert_eq!(decode_entry(&SECRET, "k1", &longer), None);
        let other_secret = Secret([8; SECRET_BYTES]);
        assert_eq!(decode_entry(&other_secret, "k1", &entry), None);
    }

    /// A checksum anyone can compute does not authenticate: a forged entry with the plain
    /// SHA-256 (or any value computed without the secret) in the MAC field is rejected.
    #[test]
    fn forged_digest_is_rejected() {
        let forged = forged_entry("k", &[0x41; 64]);
        assert_eq!(decode_entry(&SECRET, "k", &forged), None);
        // The forgery differs from a real entry only in the MAC field.
        let real = encode_entry(&SECRET, "k", &[0x41; 64]);
        assert_eq!(real.len(), forged.len());
        assert_eq!(real[..FIELDS_BYTES], forged[..FIELDS_BYTES]);
        assert_eq!(real[HEADER_BYTES..], forged[HEADER_BYTES..]);
    }

    /// An entry of another format version is ignored even where its MAC verifies.
    #[test]
    fn entries_of_other_versions_are_rejected() {
        let mut entry = encode_entry(&SECRET, "k", b"payload");
        entry[8..12].copy_from_slice(&1u32.to_le_bytes());
        let mac = entry_mac(&SECRET, &entry[..FIELDS_BYTES], b"k", b"payload").finalize();
        entry[FIELDS_BYTES..HEADER_BYTES].copy_from_slice(&mac.into_bytes());
        assert_eq!(decode_entry(&SECRET, "k", &entry), None);
    }

    #[test]
    fn sha256_known_value() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
