//! The disk cache through the public API, in fresh processes: an entry planted in the cache
//! directory (the entry format, the planted payload, a SHA-256 over it where the MAC goes) is
//! not loaded; the real kernel is compiled and replaces it (SECURITY.md, "What an attacker who
//! controls the directory can do"). Needs NVRTC, not a GPU: without NVRTC it prints a skip
//! line; with `OXICUB_REQUIRE_NVRTC=1` a missing NVRTC fails the test.
//!
//! Each lookup runs in a child process (this test binary running `child_lookup`), since the
//! in-process cache would answer a second lookup without reading the disk.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use oxicub_kernels::{
    cache_stats, cached_cubin, Arch, CacheConfig, KernelSpec, KeyType, TransformOp,
};
use sha2::{Digest, Sha256};

mod common;
use common::nvrtc_or_skip;

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

/// Runs `child_lookup` in a fresh process on `dir`: (origin, CUBIN fingerprint, rejected entries).
fn lookup_in_child(dir: &Path) -> (String, String, u64) {
    let output = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "child_lookup",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .output()
        .expect("child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("LOOKUP "))
        .unwrap_or_else(|| panic!("no lookup line in {stdout}"));
    let fields: Vec<&str> = line.split(' ').collect();
    let [origin, cubin, rejected] = fields[..] else {
        panic!("bad lookup line {line}");
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
