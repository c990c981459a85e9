//! The disk cache through the public API, in fresh processes: an entry planted in the cache
//! directory (the entry format, the planted payload, a SHA-256 over it where the MAC goes) is
//! not loaded; the real kernel is compiled and replaces it (SECURITY.md, "What an attacker who
//! controls the directory can do"). Needs NVRTC, not a GPU: without NVRTC it prints a skip
//! line; with `OXICUB_REQUIRE_NVRTC=1` a missing NVRTC fails the test. One test also runs the
//! kernels on the GPU: without a GPU it prints a skip line; with `OXICUB_REQUIRE_GPU=1` a
//! missing GPU, or NVRTC, fails it.
//!
//! Each lookup runs in a child process (this test binary running `child_lookup`, or
//! `child_run` on the GPU), since the in-process cache would answer a second lookup without
//! reading the disk.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use oxicub_kernels::radix::RadixKey;
use oxicub_kernels::{
    cache_stats, cached_cubin, inverse_transform_keys, open_context, transform_keys, Arch,
    CacheConfig, KernelRuntime, KernelSpec, KeyType, TransformOp,
};
use sha2::{Digest, Sha256};

mod common;
use common::{gpu_or_skip, gpu_required, nvrtc_or_skip};

/// The child's cache directory; the child test fails without it.
const CHILD_DIR: &str = "OXICUB_CACHE_PLANTING_CHILD_DIR";

/// A fingerprint of a CUBIN, the same in every process (SipHash with fixed keys).
fn fingerprint(bytes: &[u8]) -> String {
    use std::hash::{DefaultHasher, Hasher};
    let mut hasher = DefaultHasher::new();
    hasher.write(bytes);
    format!("{:016x}-{}", hasher.finish(), bytes.len())
}

/// One lookup in the directory named by `CHILD_DIR`, reported on stdout as
/// `LOOKUP <origin> <fingerprint of the CUBIN> <entries rejected>` (on a line of its own: the test
/// harness prints the test's name before it).
#[test]
#[ignore = "run in a child process by the other tests of this file"]
fn child_lookup() {
    let dir = std::env::var_os(CHILD_DIR).expect("run by the other tests of this file");
    let config = CacheConfig {
        disk_dir: Some(PathBuf::from(dir)),
    };
    let spec = KernelSpec::transform_keys(KeyType::U32, TransformOp::Encode);
    let (cubin, origin) = cached_cubin(&spec, Arch::SM_90, &config).expect("cubin");
    println!(
        "\nLOOKUP {origin:?} {} {}",
        fingerprint(&cubin),
        cache_stats().disk_rejected
    );
}

/// Runs the ignored test `test` of this binary in a fresh process with `CHILD_DIR` (and each
/// variable of `env`) set to `dir`, and returns the fields of its line starting with `prefix`.
fn report_from_child(test: &str, prefix: &str, dir: &Path, env: &[&str]) -> Vec<String> {
    let mut command = Command::new(std::env::current_exe().expect("test binary"));
    command
        .args([
            test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir);
    for name in env {
        command.env(name, dir);
    }
    let output = command.output().expect("child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix}line in {stdout}"));
    line.split(' ').map(str::to_owned).collect()
}

/// Runs `child_lookup` in a fresh process on `dir`: (origin, CUBIN fingerprint, rejected entries).
fn lookup_in_child(dir: &Path) -> (String, String, u64) {
    let fields = report_from_child("child_lookup", "LOOKUP ", dir, &[]);
    let [origin, cubin, rejected] = &fields[..] else {
        panic!("bad lookup line {fields:?}");
    };
    (
        origin.to_owned(),
        cubin.to_owned(),
        rejected.parse().expect("count"),
    )
}

/// Replaces the payload of the entry at `path` with `payload` (same length) and puts the
/// SHA-256 of the authenticated fields, key and payload where the MAC goes: all that someone
/// who knows the format and the key, but not the directory's secret, can compute.
fn plant(path: &Path, payload_byte: u8) -> Vec<u8> {
    // Layout: magic (8), version (4), key length (4), payload length (8), MAC (32), key,
    // payload.
    const FIELDS: usize = 24;
    const HEADER: usize = FIELDS + 32;
    let mut entry = std::fs::read(path).expect("entry");
    let key_len = u32::from_le_bytes(entry[12..16].try_into().expect("4 bytes")) as usize;
    let payload_at = HEADER + key_len;
    entry[payload_at..].fill(payload_byte);
    let mut digest = Sha256::new();
    digest.update(&entry[..FIELDS]);
    digest.update(&entry[HEADER..]);
    entry[FIELDS..HEADER].copy_from_slice(&digest.finalize());
    // Planted as the user would write it: a regular file of theirs, mode 0600.
    std::fs::remove_file(path).expect("remove");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| std::io::Write::write_all(&mut file, &entry))
        .expect("plant");
    entry[payload_at..].to_vec()
}

/// A new directory (mode 0700) under the temporary directory for one test, removed on drop
/// (also when the test fails).
struct FreshDir(PathBuf);

impl FreshDir {
    fn new(test: &str) -> FreshDir {
        let dir = std::env::temp_dir().join(format!("oxicub-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .expect("cache dir");
        FreshDir(dir)
    }
}

impl std::ops::Deref for FreshDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for FreshDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for FreshDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `.cubin` files in `dir`.
fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "cubin"))
        .collect()
}

/// Compiles the child's kernel into `dir` and checks that a fresh process then loads it from
/// disk (so that what the caller does to the entry next is what makes a difference): the real
/// CUBIN's fingerprint and the entry's path.
fn compiled_entry(dir: &Path) -> (String, PathBuf) {
    let (origin, real, _) = lookup_in_child(dir);
    assert_eq!(origin, "Compiled");
    assert_eq!(lookup_in_child(dir), ("Disk".to_owned(), real.clone(), 0));
    let [entry] = &entries(dir)[..] else {
        panic!("expected one entry in {}", dir.display());
    };
    (real, entry.clone())
}

#[test]
fn a_planted_entry_is_not_loaded() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = FreshDir::new("planted");
    let (real, entry) = compiled_entry(&dir);
    let planted = plant(&entry, 0x41);
    let planted_fingerprint = fingerprint(&planted);
    let (origin, cubin, rejected) = lookup_in_child(&dir);
    assert_ne!(cubin, planted_fingerprint, "the planted payload was loaded");
    assert_eq!(
        (origin.as_str(), cubin.as_str(), rejected),
        ("Compiled", real.as_str(), 1)
    );
    // The planted entry was replaced by the real one.
    assert_eq!(lookup_in_child(&dir), ("Disk".to_owned(), real, 0));
}

/// A valid entry reachable only through a symbolic link is not read, and the link is replaced.
#[test]
fn a_symlinked_entry_is_not_loaded() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = FreshDir::new("symlinked");
    let (real, entry) = compiled_entry(&dir);
    let target = dir.join("elsewhere");
    std::fs::rename(&entry, &target).expect("move");
    std::os::unix::fs::symlink(&target, &entry).expect("symlink");
    let (origin, cubin, rejected) = lookup_in_child(&dir);
    assert_eq!(
        (origin.as_str(), cubin.as_str(), rejected),
        ("Compiled", real.as_str(), 1)
    );
    assert!(!std::fs::symlink_metadata(&entry)
        .expect("entry")
        .is_symlink());
}

/// A directory others can write (a shared or pre-created one) is not used: nothing is read
/// from it or written to it.
#[test]
fn a_directory_others_can_write_is_not_used() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = FreshDir::new("shared");
    let (real, _) = compiled_entry(&dir);
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .expect("chmod");
    assert_eq!(lookup_in_child(&dir), ("Compiled".to_owned(), real, 0));
    let shared = FreshDir::new("shared-new");
    std::fs::set_permissions(
        &shared,
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .expect("chmod");
    assert_eq!(lookup_in_child(&shared).0, "Compiled");
    assert_eq!(std::fs::read_dir(&shared).expect("list").count(), 0);
}

/// The keys `child_run` transforms: the f32 edge values, then pseudo-random bit patterns
/// (every class of float, across many blocks of the grid-stride kernel).
fn gpu_keys() -> Vec<f32> {
    let mut keys = vec![
        f32::NEG_INFINITY,
        f32::MIN,
        -1.5,
        -f32::MIN_POSITIVE / 2.0,
        -0.0,
        0.0,
        f32::MIN_POSITIVE / 2.0,
        1.0,
        f32::MAX,
        f32::INFINITY,
        f32::NAN,
        -f32::NAN,
    ];
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    keys.extend((0..100_000).map(|_| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        f32::from_bits((state >> 32) as u32)
    }));
    keys
}

/// Poison for the outputs of `child_run`: a slot the kernels leave unwritten keeps it.
const POISON: u32 = 0xA5A5_A5A5;

/// [`fingerprint`] of 32-bit words.
fn words_fingerprint(words: &[u32]) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    fingerprint(&bytes)
}

/// What one `child_run` reported: where each kernel's CUBIN came from, the fingerprints of
/// the radix codes and of the keys decoded from them, and the entries rejected.
#[derive(Debug, PartialEq, Eq)]
struct GpuRun {
    origins: (String, String),
    codes: String,
    decoded: String,
    rejected: u64,
}

/// The [`GpuRun`] of correct kernels (computed on the host) whose CUBINs came from `origin`,
/// with `rejected` entries rejected.
fn expected_run(origin: &str, rejected: u64) -> GpuRun {
    let keys = gpu_keys();
    let codes: Vec<u32> = keys.iter().map(|&key| key.to_radix()).collect();
    let decoded: Vec<u32> = codes
        .iter()
        .map(|&code| f32::from_radix(code).to_bits())
        .collect();
    GpuRun {
        origins: (origin.to_owned(), origin.to_owned()),
        codes: words_fingerprint(&codes),
        decoded: words_fingerprint(&decoded),
        rejected,
    }
}

/// On the GPU, with the disk cache in the directory named by `CHILD_DIR` (through
/// `OXICUB_CACHE_DIR`, as a user sets it): the radix codes of [`gpu_keys`] and the keys
/// decoded from them, into poisoned outputs, reported on stdout as `RUN <encode's origin>
/// <decode's origin> <codes' fingerprint> <decoded keys' fingerprint> <entries rejected>`.
#[test]
#[ignore = "run in a child process by the other tests of this file"]
fn child_run() {
    let dir = std::env::var_os(CHILD_DIR).expect("run by the other tests of this file");
    assert_eq!(CacheConfig::from_env().disk_dir, Some(PathBuf::from(dir)));
    let runtime = KernelRuntime::new(open_context(0).expect("a GPU")).expect("runtime");
    let origin = |op| {
        let spec = KernelSpec::transform_keys(KeyType::F32, op);
        runtime.kernel(&spec).expect("kernel").origin()
    };
    let (encode, decode) = (origin(TransformOp::Encode), origin(TransformOp::Decode));
    let stream = runtime.context().new_stream().expect("stream");
    let keys = gpu_keys();
    let device_keys = stream.clone_htod(&keys).expect("upload");
    let mut codes = stream
        .clone_htod(&vec![POISON; keys.len()])
        .expect("poison");
    let mut decoded = stream
        .clone_htod(&vec![f32::from_bits(POISON); keys.len()])
        .expect("poison");
    transform_keys(
        &runtime,
        &stream,
        &device_keys.as_view(),
        &mut codes.as_view_mut(),
    )
    .expect("transform");
    inverse_transform_keys(
        &runtime,
        &stream,
        &codes.as_view(),
        &mut decoded.as_view_mut(),
    )
    .expect("inverse transform");
    let codes = stream.clone_dtoh(&codes).expect("download");
    let decoded: Vec<u32> = stream
        .clone_dtoh(&decoded)
        .expect("download")
        .iter()
        .map(|key| key.to_bits())
        .collect();
    println!(
        "\nRUN {encode:?} {decode:?} {} {} {}",
        words_fingerprint(&codes),
        words_fingerprint(&decoded),
        cache_stats().disk_rejected
    );
}

/// Runs `child_run` in a fresh process on `dir`.
fn run_in_child(dir: &Path) -> GpuRun {
    let fields = report_from_child("child_run", "RUN ", dir, &[CacheConfig::ENV_VAR]);
    let [encode, decode, codes, decoded, rejected] = &fields[..] else {
        panic!("bad run line {fields:?}");
    };
    GpuRun {
        origins: (encode.to_owned(), decode.to_owned()),
        codes: codes.to_owned(),
        decoded: decoded.to_owned(),
        rejected: rejected.parse().expect("count"),
    }
}

/// A planted entry is never run on the GPU: with every entry of a directory whose CUBINs a
/// fresh process had loaded from disk and run (the transform and its inverse) replaced by a
/// planted one (valid format, a MAC computed without the directory's secret), a fresh process
/// rejects each, compiles the real kernels and runs them, and their outputs are the host's;
/// the next process loads the rewritten entries from disk and gets the same outputs.
#[test]
fn a_planted_entry_is_not_run_on_the_gpu() {
    if !gpu_or_skip() {
        return;
    }
    if !nvrtc_or_skip() {
        assert!(!gpu_required(), "OXICUB_REQUIRE_GPU=1 but NVRTC is missing");
        return;
    }
    let dir = FreshDir::new("planted-gpu");
    assert_eq!(run_in_child(&dir), expected_run("Compiled", 0));
    assert_eq!(run_in_child(&dir), expected_run("Disk", 0));
    let planted = entries(&dir);
    assert_eq!(planted.len(), 2, "one entry per kernel");
    for entry in &planted {
        plant(entry, 0x41);
    }
    assert_eq!(run_in_child(&dir), expected_run("Compiled", 2));
    assert_eq!(run_in_child(&dir), expected_run("Disk", 0));
}
