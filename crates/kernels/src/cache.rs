//! Compiled-module cache: in process and on disk.
//!
//! A CUBIN is keyed by the spec (its instantiation), the architecture, the NVRTC version and a
//! hash of the complete generated source, so a change to any of them compiles afresh.
//!
//! On disk, entries live under [`CacheConfig::disk_dir`] (the `OXICUB_CACHE_DIR` environment
//! variable; otherwise `$XDG_CACHE_HOME/oxicub`, otherwise `~/.cache/oxicub`;
//! `OXICUB_CACHE_DIR=off` disables the disk cache). Each entry has a header with a magic tag, a
//! format version, the full key, the payload length and a checksum of key and payload. An entry
//! that is truncated, corrupt, or written for another key is ignored and replaced, never
//! loaded. Entries are written to a temporary file and renamed into place, so concurrent
//! processes never see half an entry. A cache that cannot be written only costs time.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::nvrtc::{compile_cubin, nvrtc_version, Arch};
use crate::{KernelError, KernelSpec};

/// 128-bit FNV-1a: a checksum and a source fingerprint, not a cryptographic hash.
pub(crate) fn fnv1a_128(parts: &[&[u8]]) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013B;
    let mut hash = OFFSET;
    for part in parts {
        for &byte in *part {
            hash ^= u128::from(byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    hash
}

/// Where compiled modules are cached.
///
/// ```
/// use oxicub_kernels::CacheConfig;
///
/// let no_disk = CacheConfig { disk_dir: None };
/// assert!(no_disk.disk_dir.is_none());
/// let from_env = CacheConfig::from_env();
/// println!("{:?}", from_env.disk_dir);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Directory of the disk cache; `None` keeps compiled modules in process only.
    pub disk_dir: Option<PathBuf>,
}

impl CacheConfig {
    /// The environment variable that overrides the disk cache location (`off` disables it).
    pub const ENV_VAR: &'static str = "OXICUB_CACHE_DIR";

    /// Reads `OXICUB_CACHE_DIR`, then `XDG_CACHE_HOME`, then `HOME` (see the module docs).
    pub fn from_env() -> CacheConfig {
        let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let disk_dir = match non_empty(Self::ENV_VAR) {
            Some(dir) if dir == "off" => None,
            Some(dir) => Some(PathBuf::from(dir)),
            None => non_empty("XDG_CACHE_HOME")
                .map(|d| PathBuf::from(d).join("oxicub"))
                .or_else(|| non_empty("HOME").map(|h| PathBuf::from(h).join(".cache/oxicub"))),
        };
        CacheConfig { disk_dir }
    }
}

/// Where a CUBIN came from.
///
/// ```
/// use oxicub_kernels::CubinOrigin;
///
/// let origin = CubinOrigin::Disk;
/// assert_ne!(origin, CubinOrigin::Compiled);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CubinOrigin {
    /// Already compiled in this process.
    Memory,
    /// Read from a valid disk cache entry.
    Disk,
    /// Compiled by NVRTC now.
    Compiled,
}

/// Process-wide cache counters (see [`cache_stats`]).
///
/// ```
/// let before = oxicub_kernels::cache_stats();
/// assert!(oxicub_kernels::cache_stats().compiled >= before.compiled);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// CUBINs found in the in-process cache.
    pub memory_hits: u64,
    /// CUBINs read from valid disk entries.
    pub disk_hits: u64,
    /// Disk entries that were present but rejected (truncated, corrupt, other key).
    pub disk_rejected: u64,
    /// CUBINs compiled by NVRTC.
    pub compiled: u64,
    /// Disk entries that could not be written.
    pub disk_write_failures: u64,
}

static MEMORY_HITS: AtomicU64 = AtomicU64::new(0);
static DISK_HITS: AtomicU64 = AtomicU64::new(0);
static DISK_REJECTED: AtomicU64 = AtomicU64::new(0);
static COMPILED: AtomicU64 = AtomicU64::new(0);
static DISK_WRITE_FAILURES: AtomicU64 = AtomicU64::new(0);

/// A snapshot of the process-wide cache counters.
///
/// ```
/// let stats = oxicub_kernels::cache_stats();
/// println!("{} compiled, {} from disk", stats.compiled, stats.disk_hits);
/// ```
pub fn cache_stats() -> CacheStats {
    CacheStats {
        memory_hits: MEMORY_HITS.load(Ordering::Relaxed),
        disk_hits: DISK_HITS.load(Ordering::Relaxed),
        disk_rejected: DISK_REJECTED.load(Ordering::Relaxed),
        compiled: COMPILED.load(Ordering::Relaxed),
        disk_write_failures: DISK_WRITE_FAILURES.load(Ordering::Relaxed),
    }
}

const MAGIC: &[u8; 8] = b"OXICUBIN";
const FORMAT_VERSION: u32 = 1;
/// magic, version (u32), key length (u32), payload length (u64), checksum (u128).
const HEADER_BYTES: usize = 8 + 4 + 4 + 8 + 16;

/// Serialises one disk entry.
pub(crate) fn encode_entry(key: &str, payload: &[u8]) -> Vec<u8> {
    let mut entry = Vec::with_capacity(HEADER_BYTES + key.len() + payload.len());
    entry.extend_from_slice(MAGIC);
    entry.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    entry.extend_from_slice(&(key.len() as u32).to_le_bytes());
    entry.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    entry.extend_from_slice(&fnv1a_128(&[key.as_bytes(), payload]).to_le_bytes());
    entry.extend_from_slice(key.as_bytes());
    entry.extend_from_slice(payload);
    entry
}

/// Parses one disk entry; `None` unless it is complete, intact and written for `key`.
pub(crate) fn decode_entry(key: &str, entry: &[u8]) -> Option<Vec<u8>> {
    let header = entry.get(..HEADER_BYTES)?;
    let (magic, rest) = header.split_at(8);
    let (version, rest) = rest.split_at(4);
    let (key_len, rest) = rest.split_at(4);
    let (payload_len, checksum) = rest.split_at(8);
    if magic != MAGIC || u32::from_le_bytes(version.try_into().ok()?) != FORMAT_VERSION {
        return None;
    }
    let key_len = usize::try_from(u32::from_le_bytes(key_len.try_into().ok()?)).ok()?;
    let payload_len = usize::try_from(u64::from_le_bytes(payload_len.try_into().ok()?)).ok()?;
    let checksum = u128::from_le_bytes(checksum.try_into().ok()?);
    let body = &entry[HEADER_BYTES..];
    if body.len() != key_len.checked_add(payload_len)? {
        return None;
    }
    let (stored_key, payload) = body.split_at(key_len);
    if stored_key != key.as_bytes() || fnv1a_128(&[stored_key, payload]) != checksum {
        return None;
    }
    Some(payload.to_vec())
}

/// The file of the entry for `key` under `dir`.
pub(crate) fn entry_path(dir: &Path, spec: &KernelSpec, key: &str) -> PathBuf {
    dir.join(format!(
        "{}-{:032x}.cubin",
        spec.family().name(),
        fnv1a_128(&[key.as_bytes()])
    ))
}

fn read_disk(path: &Path, key: &str) -> Option<Vec<u8>> {
    let entry = std::fs::read(path).ok()?;
    let payload = decode_entry(key, &entry);
    if payload.is_none() {
        DISK_REJECTED.fetch_add(1, Ordering::Relaxed);
    }
    payload
}

fn write_disk(path: &Path, key: &str, payload: &[u8]) -> std::io::Result<()> {
    static UNIQUE: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!(
        "tmp.{}.{}",
        std::process::id(),
        UNIQUE.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::File::create(&tmp).and_then(|mut file| {
        file.write_all(&encode_entry(key, payload))?;
        file.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&tmp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

type MemoryCache = Mutex<HashMap<String, Arc<[u8]>>>;

fn memory_cache() -> &'static MemoryCache {
    static CACHE: OnceLock<MemoryCache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The cache key of `spec` compiled for `arch`.
pub(crate) fn cache_key(spec: &KernelSpec, arch: Arch) -> Result<String, KernelError> {
    let (major, minor) = nvrtc_version()?;
    let source_hash = fnv1a_128(&[spec.generated_source().as_bytes()]);
    Ok(format!(
        "{spec} | {arch} | nvrtc {major}.{minor} | source {source_hash:032x}"
    ))
}

/// The CUBIN for `spec` on `arch`: from the in-process cache, else a valid disk entry, else
/// compiled now (and stored in both caches).
///
/// ```no_run
/// use oxicub_kernels::{cached_cubin, Arch, CacheConfig, CountType, KernelSpec, KeyType};
///
/// let spec = KernelSpec::digit_histogram(KeyType::U32, 8, CountType::U64);
/// let (cubin, origin) = cached_cubin(&spec, Arch::SM_90, &CacheConfig::from_env())?;
/// println!("{} bytes, {origin:?}", cubin.len());
/// # Ok::<(), oxicub_kernels::KernelError>(())
/// ```
pub fn cached_cubin(
    spec: &KernelSpec,
    arch: Arch,
    config: &CacheConfig,
) -> Result<(Arc<[u8]>, CubinOrigin), KernelError> {
    spec.validate()?;
    let key = cache_key(spec, arch)?;
    // A poisoned lock only means another thread panicked while inserting; the map is intact.
    let lookup = |key: &str| {
        memory_cache()
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(key)
            .cloned()
    };
    if let Some(cubin) = lookup(&key) {
        MEMORY_HITS.fetch_add(1, Ordering::Relaxed);
        return Ok((cubin, CubinOrigin::Memory));
    }
    let path = config
        .disk_dir
        .as_deref()
        .map(|dir| entry_path(dir, spec, &key));
    let (cubin, origin) = match path.as_deref().and_then(|p| read_disk(p, &key)) {
        Some(cubin) => {
            DISK_HITS.fetch_add(1, Ordering::Relaxed);
            (cubin, CubinOrigin::Disk)
        }
        None => {
            let cubin = compile_cubin(spec, arch)?;
            COMPILED.fetch_add(1, Ordering::Relaxed);
            if let Some(path) = &path {
                if write_disk(path, &key, &cubin).is_err() {
                    DISK_WRITE_FAILURES.fetch_add(1, Ordering::Relaxed);
                }
            }
            (cubin, CubinOrigin::Compiled)
        }
    };
    let cubin: Arc<[u8]> = cubin.into();
    memory_cache()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .entry(key)
        .or_insert_with(|| cubin.clone());
    Ok((cubin, origin))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_round_trip() {
        let entry = encode_entry("key", b"\x7fELF payload");
        assert_eq!(
            decode_entry("key", &entry).as_deref(),
            Some(&b"\x7fELF payload"[..])
        );
    }

    #[test]
    fn every_truncation_is_rejected() {
        let entry = encode_entry("some key", &[7u8; 64]);
        for len in 0..entry.len() {
            assert_eq!(decode_entry("some key", &entry[..len]), None, "len {len}");
        }
    }

    #[test]
    fn corruption_and_wrong_key_are_rejected() {
        let entry = encode_entry("k1", &[1, 2, 3, 4]);
        for i in 0..entry.len() {
            let mut bad = entry.clone();
            bad[i] ^= 0x10;
            assert_eq!(decode_entry("k1", &bad), None, "byte {i}");
        }
        assert_eq!(decode_entry("k2", &entry), None);
        let mut longer = entry.clone();
        longer.push(0);
        assert_eq!(decode_entry("k1", &longer), None);
    }

    #[test]
    fn disk_round_trip_and_overwrite_of_corrupt_entry() {
        let dir = std::env::temp_dir().join(format!("oxicub-cache-test-{}", std::process::id()));
        let path = dir.join("x.cubin");
        write_disk(&path, "k", b"abc").expect("write");
        assert_eq!(read_disk(&path, "k").as_deref(), Some(&b"abc"[..]));
        std::fs::write(&path, b"OXICUBIN garbage").expect("corrupt");
        assert_eq!(read_disk(&path, "k"), None);
        write_disk(&path, "k", b"def").expect("rewrite");
        assert_eq!(read_disk(&path, "k").as_deref(), Some(&b"def"[..]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn fnv_known_value() {
        // FNV-1a 128 of the empty input is the offset basis.
        assert_eq!(fnv1a_128(&[]), 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d);
        assert_ne!(fnv1a_128(&[b"a"]), fnv1a_128(&[b"b"]));
    }
}
