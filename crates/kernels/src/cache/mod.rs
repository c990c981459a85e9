//! Compiled-module cache: in process and on disk.
//!
//! A CUBIN is keyed by everything that decides it ([`CacheKey`]): the spec (its
//! instantiation), the architecture, the SHA-256 of the complete generated source, the NVRTC
//! version and library files, the exact compile options and this crate's version.
//!
//! On disk, entries live under [`CacheConfig::disk_dir`] (the `OXICUB_CACHE_DIR` environment
//! variable; otherwise `$XDG_CACHE_HOME/oxicub`, otherwise `~/.cache/oxicub`;
//! `OXICUB_CACHE_DIR=off` disables the disk cache). SECURITY.md says what the disk cache
//! trusts: in short, the directory is created 0700 and used only when this user owns it and
//! nobody else can write it; entries are regular files of the user's, read without following
//! symbolic links and up to a size limit, and authenticated with HMAC-SHA-256 under a secret
//! kept in the directory. An entry that is truncated, corrupt, forged or written for another
//! key is ignored and replaced, never loaded. Entries are written to a temporary file of a
//! random name and renamed into place, so concurrent processes never see half an entry. A
//! cache that cannot be used only costs time; [`disk_cache_refusal`] says why a directory was
//! not used.
//!
//! In process, successes and compile failures are both remembered: a spec that NVRTC rejected
//! returns the same error again without compiling.

mod entry;

#[cfg(unix)]
mod disk;
#[cfg(not(unix))]
#[path = "no_disk.rs"]
mod disk;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::nvrtc::{compile_options, compile_source, nvrtc_identity, Arch};
use crate::{KernelError, KernelSpec};
use disk::CacheDir;
use entry::sha256_hex;

/// Where compiled modules are cached.
///
/// ```
/// use oxicub::kernels::CacheConfig;
///
/// let no_disk = CacheConfig { disk_dir: None };
/// assert!(no_disk.disk_dir.is_none());
/// let from_env = CacheConfig::from_env();
/// println!("{:?}", from_env.disk_dir);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Directory of the disk cache; `None` keeps compiled modules in process only. It is
    /// created (mode 0700) where missing, and used only while this user owns it and its group
    /// and others cannot write it (SECURITY.md).
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
/// use oxicub::kernels::CubinOrigin;
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
/// let before = oxicub::kernels::cache_stats();
/// assert!(oxicub::kernels::cache_stats().compiled >= before.compiled);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// CUBINs found in the in-process cache.
    pub memory_hits: u64,
    /// CUBINs read from valid disk entries.
    pub disk_hits: u64,
    /// Disk entries that were present but rejected (not a regular file of this user's, too
    /// large, truncated, corrupt, not authentic, other key).
    pub disk_rejected: u64,
    /// CUBINs compiled by NVRTC.
    pub compiled: u64,
    /// Disk entries that could not be written.
    pub disk_write_failures: u64,
    /// Lookups that found the disk cache directory unusable (not this user's, writable by
    /// others, not creatable) and went without it; [`disk_cache_refusal`] says why.
    pub disk_refused: u64,
    /// Compiles that NVRTC rejected (each is remembered in process).
    pub compile_failures: u64,
    /// Lookups answered with a remembered compile failure, without compiling.
    pub failure_hits: u64,
}

static MEMORY_HITS: AtomicU64 = AtomicU64::new(0);
static DISK_HITS: AtomicU64 = AtomicU64::new(0);
static DISK_REJECTED: AtomicU64 = AtomicU64::new(0);
static COMPILED: AtomicU64 = AtomicU64::new(0);
static DISK_WRITE_FAILURES: AtomicU64 = AtomicU64::new(0);
static DISK_REFUSED: AtomicU64 = AtomicU64::new(0);
static COMPILE_FAILURES: AtomicU64 = AtomicU64::new(0);
static FAILURE_HITS: AtomicU64 = AtomicU64::new(0);

/// A snapshot of the process-wide cache counters.
///
/// ```
/// let stats = oxicub::kernels::cache_stats();
/// println!("{} compiled, {} from disk", stats.compiled, stats.disk_hits);
/// ```
pub fn cache_stats() -> CacheStats {
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    CacheStats {
        memory_hits: load(&MEMORY_HITS),
        disk_hits: load(&DISK_HITS),
        disk_rejected: load(&DISK_REJECTED),
        compiled: load(&COMPILED),
        disk_write_failures: load(&DISK_WRITE_FAILURES),
        disk_refused: load(&DISK_REFUSED),
        compile_failures: load(&COMPILE_FAILURES),
        failure_hits: load(&FAILURE_HITS),
    }
}

fn last_refusal() -> &'static Mutex<Option<String>> {
    static REFUSAL: OnceLock<Mutex<Option<String>>> = OnceLock::new();
    REFUSAL.get_or_init(|| Mutex::new(None))
}

/// Why the disk cache directory was last not used in this process (it is not this user's,
/// others can write it, it cannot be created), or `None` if it never was refused. Each
/// refusal also counts in [`CacheStats::disk_refused`]; the compiled modules are then kept in
/// process only.
///
/// ```
/// if let Some(why) = oxicub::kernels::disk_cache_refusal() {
///     eprintln!("kernel disk cache not used: {why}");
/// }
/// ```
pub fn disk_cache_refusal() -> Option<String> {
    lock(last_refusal()).clone()
}

/// A poisoned lock only means another thread panicked while inserting; the data is intact.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `bytes` random bytes in hex (temporary file names, where they must not be guessable).
pub(crate) fn random_hex(bytes: usize) -> std::io::Result<String> {
    let mut random = vec![0u8; bytes];
    getrandom::fill(&mut random).map_err(std::io::Error::other)?;
    Ok(random.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// What a disk lookup found.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) enum Lookup {
    /// No entry of that name.
    Missing,
    /// A file that is not a valid entry for the key (why).
    Rejected(String),
    /// The entry's CUBIN.
    Found(Vec<u8>),
}

/// Everything that decides a CUBIN.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyParts<'a> {
    /// The spec's `Display` (its instantiation).
    pub(crate) kernel: &'a str,
    /// The family's name, the prefix of the entry's file name.
    pub(crate) family: &'a str,
    pub(crate) arch: Arch,
    /// The complete generated source (hashed with SHA-256).
    pub(crate) source: &'a str,
    /// [`nvrtc_identity`]: the version and the library files.
    pub(crate) nvrtc: &'a str,
    /// The exact NVRTC options.
    pub(crate) options: &'a [String],
    /// This crate's version: the code around the kernels (launch parameters, constants) may
    /// change without changing a source the key hashes.
    pub(crate) crate_version: &'a str,
}

/// The cache key of one compile and the file name of its disk entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CacheKey {
    /// Stored in the entry and compared in full on every read.
    text: String,
    /// `<family>-<SHA-256 of text>.cubin`.
    file_name: String,
}

impl CacheKey {
    pub(crate) fn new(parts: &KeyParts<'_>) -> CacheKey {
        let text = format!(
            "format {}\nkernel {}\narch {}\nsource sha256 {}\nnvrtc {}\noptions {:?}\noxicub-kernels {}",
            entry::FORMAT_VERSION,
            parts.kernel,
            parts.arch,
            sha256_hex(parts.source.as_bytes()),
            parts.nvrtc,
            parts.options,
            parts.crate_version,
        );
        let file_name = format!("{}-{}.cubin", parts.family, sha256_hex(text.as_bytes()));
        CacheKey { text, file_name }
    }
}

/// Compiled modules and compile failures of this process, by key text.
type Memo = Mutex<HashMap<String, Result<Arc<[u8]>, KernelError>>>;

fn process_memo() -> &'static Memo {
    static MEMO: OnceLock<Memo> = OnceLock::new();
    MEMO.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The CUBIN for `spec` on `arch`: from the in-process cache, else a valid disk entry, else
/// compiled now (and stored in both caches). A compile error is remembered in process: the
/// same spec on the same architecture returns it again without compiling.
///
/// ```no_run
/// use oxicub::kernels::{cached_cubin, Arch, CacheConfig, CountType, KernelSpec, KeyType};
///
/// let spec = KernelSpec::digit_histogram(KeyType::U32, 8, CountType::U64);
/// let (cubin, origin) = cached_cubin(&spec, Arch::SM_90, &CacheConfig::from_env())?;
/// println!("{} bytes, {origin:?}", cubin.len());
/// # Ok::<(), oxicub::kernels::KernelError>(())
/// ```
pub fn cached_cubin(
    spec: &KernelSpec,
    arch: Arch,
    config: &CacheConfig,
) -> Result<(Arc<[u8]>, CubinOrigin), KernelError> {
    spec.validate()?;
    let source = spec.generated_source();
    let options = compile_options(arch);
    let key = spec_key(spec, arch, &source, &options)?;
    let started = std::time::Instant::now();
    let found = cached_compile(&key, config, process_memo(), || {
        compile_source(
            &spec.to_string(),
            &spec.entry_name(),
            source,
            arch,
            &options,
        )
    })?;
    // A compile is the cold start a caller may want to see (and move to a warm-up); a disk
    // read is the cache doing its work.
    let millis = started.elapsed().as_secs_f64() * 1e3;
    match found.1 {
        CubinOrigin::Compiled => {
            tracing::info!(kernel = %spec, %arch, millis, "oxicub: compiled a kernel with NVRTC")
        }
        CubinOrigin::Disk => {
            tracing::debug!(kernel = %spec, %arch, millis, "oxicub: read a kernel from the disk cache")
        }
        CubinOrigin::Memory => {}
    }
    Ok(found)
}

/// The key of `spec` compiled from `source` (its generated source) for `arch` with NVRTC
/// `options`, by the NVRTC in use, in this crate's version.
fn spec_key(
    spec: &KernelSpec,
    arch: Arch,
    source: &str,
    options: &[String],
) -> Result<CacheKey, KernelError> {
    Ok(CacheKey::new(&KeyParts {
        kernel: &spec.to_string(),
        family: spec.family().name(),
        arch,
        source,
        nvrtc: &nvrtc_identity()?,
        options,
        crate_version: env!("CARGO_PKG_VERSION"),
    }))
}

/// [`cached_cubin`]'s lookup, with the memo and the compiler as arguments (tests pass a
/// fresh memo for a fresh process and count the compiles).
fn cached_compile(
    key: &CacheKey,
    config: &CacheConfig,
    memo: &Memo,
    compile: impl FnOnce() -> Result<Vec<u8>, KernelError>,
) -> Result<(Arc<[u8]>, CubinOrigin), KernelError> {
    let remembered = lock(memo).get(&key.text).cloned();
    match remembered {
        Some(Ok(cubin)) => {
            MEMORY_HITS.fetch_add(1, Ordering::Relaxed);
            return Ok((cubin, CubinOrigin::Memory));
        }
        Some(Err(error)) => {
            FAILURE_HITS.fetch_add(1, Ordering::Relaxed);
            return Err(error);
        }
        None => {}
    }
    let dir = config.disk_dir.as_deref().and_then(|path| {
        CacheDir::open(path)
            .map_err(|why| {
                DISK_REFUSED.fetch_add(1, Ordering::Relaxed);
                *lock(last_refusal()) = Some(why);
            })
            .ok()
    });
    let from_disk = dir
        .as_ref()
        .and_then(|dir| match dir.read_entry(&key.file_name, &key.text) {
            Lookup::Found(cubin) => Some(cubin),
            Lookup::Missing => None,
            Lookup::Rejected(_) => {
                DISK_REJECTED.fetch_add(1, Ordering::Relaxed);
                None
            }
        });
    let (cubin, origin) = match from_disk {
        Some(cubin) => {
            DISK_HITS.fetch_add(1, Ordering::Relaxed);
            (cubin, CubinOrigin::Disk)
        }
        None => match compile() {
            Ok(cubin) => {
                COMPILED.fetch_add(1, Ordering::Relaxed);
                if let Some(dir) = &dir {
                    if dir.write_entry(&key.file_name, &key.text, &cubin).is_err() {
                        DISK_WRITE_FAILURES.fetch_add(1, Ordering::Relaxed);
                    }
                }
                (cubin, CubinOrigin::Compiled)
            }
            Err(error) => {
                // NVRTC's verdict on a source is final for the key (which names the source,
                // the options and the library); any other failure (a missing library, an NVRTC
                // call that failed) may pass and is not remembered.
                if matches!(error, KernelError::Compile { .. }) {
                    COMPILE_FAILURES.fetch_add(1, Ordering::Relaxed);
                    lock(memo)
                        .entry(key.text.clone())
                        .or_insert_with(|| Err(error.clone()));
                }
                return Err(error);
            }
        },
    };
    let cubin: Arc<[u8]> = cubin.into();
    lock(memo)
        .entry(key.text.clone())
        .or_insert_with(|| Ok(cubin.clone()));
    Ok((cubin, origin))
}

#[cfg(test)]
mod tests;
