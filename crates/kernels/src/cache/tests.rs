//! The lookup of `cached_compile`: keys, remembered failures, and (on Unix) what a planted,
//! copied or refused disk entry does. Each test passes a fresh memo where a fresh process
//! would start with an empty one, and a counting compiler in place of NVRTC.

use std::cell::Cell;

use super::*;

fn parts() -> KeyParts<'static> {
    const OPTIONS: &[String] = &[];
    KeyParts {
        kernel: "transform_keys<oxicub::KeyU32, Encode>",
        family: "transform_keys",
        arch: Arch::SM_90,
        source: "extern \"C\" __global__ void k() {}",
        nvrtc: "13.0; /lib/libnvrtc.so.13 (109338064 bytes, modified 1.0)",
        options: OPTIONS,
        crate_version: "0.1.0",
    }
}

fn fresh_memo() -> Memo {
    Mutex::new(HashMap::new())
}

/// A compiler that returns `result` and counts its calls.
fn counting(
    calls: &Cell<u32>,
    result: Result<Vec<u8>, KernelError>,
) -> impl FnOnce() -> Result<Vec<u8>, KernelError> + '_ {
    move || {
        calls.set(calls.get() + 1);
        result
    }
}

const REAL: &[u8] = b"\x7fELF the real kernel";

#[test]
fn the_key_changes_with_every_part() {
    let base = parts();
    assert_eq!(CacheKey::new(&base), CacheKey::new(&parts()));
    let options = ["--gpu-architecture=sm_90".to_owned()];
    let other_options = ["--gpu-architecture=sm_90".to_owned(), "-G".to_owned()];
    let variants = [
        KeyParts {
            kernel: "transform_keys<oxicub::KeyU64, Encode>",
            ..base
        },
        KeyParts {
            arch: Arch::from_compute_capability(8, 0),
            ..base
        },
        KeyParts {
            source: "extern \"C\" __global__ void k() { }",
            ..base
        },
        KeyParts {
            nvrtc: "13.0; /lib/libnvrtc.so.13 (109338065 bytes, modified 1.0)",
            ..base
        },
        KeyParts {
            options: &options,
            ..base
        },
        KeyParts {
            options: &other_options,
            ..base
        },
        KeyParts {
            crate_version: "0.1.1",
            ..base
        },
    ];
    let mut keys = vec![CacheKey::new(&base)];
    for variant in &variants {
        let key = CacheKey::new(variant);
        for other in &keys {
            assert_ne!(key.text, other.text, "{variant:?}");
            assert_ne!(key.file_name, other.file_name, "{variant:?}");
        }
        keys.push(key);
    }
    assert!(keys[0].file_name.starts_with("transform_keys-"));
    assert!(keys[0].file_name.ends_with(".cubin"));
}

/// The key `cached_cubin` uses names the options it compiles with, the NVRTC library and this
/// crate's version.
#[test]
fn a_spec_key_names_the_options_nvrtc_and_the_crate_version() {
    if !crate::nvrtc::tests::nvrtc_or_skip() {
        return;
    }
    let spec = KernelSpec::transform_keys(crate::KeyType::U32, crate::TransformOp::Encode);
    let source = spec.generated_source();
    let options = compile_options(Arch::SM_90);
    let key = spec_key(&spec, Arch::SM_90, &source, &options).expect("key");
    for option in &options {
        assert!(key.text.contains(option.as_str()), "{option}: {}", key.text);
    }
    assert!(key.text.contains(&nvrtc_identity().expect("nvrtc")));
    assert!(key
        .text
        .contains(&format!("oxicub-kernels {}", env!("CARGO_PKG_VERSION"))));
    assert!(key.text.contains(&sha256_hex(source.as_bytes())));
    let fewer_options = &options[..options.len() - 1];
    let other = spec_key(&spec, Arch::SM_90, &source, fewer_options).expect("key");
    assert_ne!(other.file_name, key.file_name);
}

fn compile_error() -> KernelError {
    KernelError::Compile {
        kernel: "k".into(),
        arch: "sm_90".into(),
        log: "error: identifier \"undeclared_name\" is undefined".into(),
        generated_source: "source".into(),
        saved_source: None,
    }
}

/// A second lookup of a source NVRTC rejected returns the same error without compiling.
#[test]
fn a_compile_failure_is_remembered() {
    let key = CacheKey::new(&KeyParts {
        source: "failure is remembered",
        ..parts()
    });
    let memo = fresh_memo();
    let config = CacheConfig { disk_dir: None };
    let calls = Cell::new(0);
    let first = cached_compile(&key, &config, &memo, counting(&calls, Err(compile_error())));
    let second = cached_compile(&key, &config, &memo, counting(&calls, Ok(REAL.to_vec())));
    assert_eq!(calls.get(), 1, "the second lookup compiled again");
    let (first, second) = (first.expect_err("failed"), second.expect_err("remembered"));
    assert_eq!(first.to_string(), second.to_string());
    assert!(matches!(second, KernelError::Compile { .. }));
}

/// A failure that may pass (here, NVRTC missing) is not remembered.
#[test]
fn other_failures_are_not_remembered() {
    let key = CacheKey::new(&KeyParts {
        source: "other failures",
        ..parts()
    });
    let memo = fresh_memo();
    let config = CacheConfig { disk_dir: None };
    let calls = Cell::new(0);
    let missing = KernelError::NvrtcUnavailable {
        tried: "libnvrtc.so".into(),
    };
    assert!(cached_compile(&key, &config, &memo, counting(&calls, Err(missing))).is_err());
    let (cubin, origin) =
        cached_compile(&key, &config, &memo, counting(&calls, Ok(REAL.to_vec()))).expect("ok");
    assert_eq!(
        (calls.get(), &cubin[..], origin),
        (2, REAL, CubinOrigin::Compiled)
    );
}

#[cfg(unix)]
mod disk {
    use super::*;
    use crate::cache::disk::tests::TempDir;
    use crate::cache::disk::SECRET_FILE;
    use crate::cache::entry::tests::forged_entry;
    use std::os::unix::fs::PermissionsExt;

    /// A lookup as in a fresh process: returns the origin and the CUBIN.
    fn lookup(key: &CacheKey, dir: &std::path::Path) -> (CubinOrigin, Vec<u8>) {
        let config = CacheConfig {
            disk_dir: Some(dir.to_owned()),
        };
        let calls = Cell::new(0);
        let (cubin, origin) = cached_compile(
            key,
            &config,
            &fresh_memo(),
            counting(&calls, Ok(REAL.to_vec())),
        )
        .expect("lookup");
        assert_eq!(calls.get(), u32::from(origin == CubinOrigin::Compiled));
        (origin, cubin.to_vec())
    }

    /// The demonstration: an entry planted in the cache directory, in the entry format
    /// with a checksum computed over the planted payload, used to be loaded and run. Now it is
    /// rejected, the real kernel is compiled, and the planted file is replaced.
    #[test]
    fn a_planted_entry_is_not_loaded() {
        let root = TempDir::new("planted");
        let key = CacheKey::new(&KeyParts {
            source: "planted",
            ..parts()
        });
        assert_eq!(
            lookup(&key, &root.0),
            (CubinOrigin::Compiled, REAL.to_vec())
        );
        // Control: a valid entry is loaded from disk in a fresh process.
        assert_eq!(lookup(&key, &root.0), (CubinOrigin::Disk, REAL.to_vec()));
        let entry = root.0.join(&key.file_name);
        let planted = vec![0x41; REAL.len()];
        std::fs::write(&entry, forged_entry(&key.text, &planted)).expect("plant");
        let rejected_before = cache_stats().disk_rejected;
        assert_eq!(
            lookup(&key, &root.0),
            (CubinOrigin::Compiled, REAL.to_vec())
        );
        assert!(cache_stats().disk_rejected > rejected_before);
        assert_eq!(lookup(&key, &root.0), (CubinOrigin::Disk, REAL.to_vec()));
    }

    /// An entry is authenticated under its directory's secret: an entry for the same key that
    /// is valid in another cache directory (here with another payload) does not verify when
    /// copied into this one.
    #[test]
    fn an_entry_copied_from_another_directory_is_not_loaded() {
        let (mine, theirs) = (TempDir::new("copy-mine"), TempDir::new("copy-theirs"));
        let key = CacheKey::new(&KeyParts {
            source: "copied",
            ..parts()
        });
        let config = CacheConfig {
            disk_dir: Some(theirs.0.clone()),
        };
        let calls = Cell::new(0);
        let planted = vec![0x41; REAL.len()];
        cached_compile(
            &key,
            &config,
            &fresh_memo(),
            counting(&calls, Ok(planted.clone())),
        )
        .expect("their compile");
        assert_eq!(
            lookup(&key, &mine.0),
            (CubinOrigin::Compiled, REAL.to_vec())
        );
        std::fs::copy(theirs.0.join(&key.file_name), mine.0.join(&key.file_name)).expect("copy");
        assert_eq!(
            lookup(&key, &mine.0),
            (CubinOrigin::Compiled, REAL.to_vec())
        );
        // Control: in its own directory the entry is valid.
        assert_eq!(lookup(&key, &theirs.0), (CubinOrigin::Disk, planted));
    }

    /// A valid entry reachable only through a symbolic link is not read.
    #[test]
    fn a_symlinked_entry_is_not_loaded() {
        let root = TempDir::new("symlinked");
        let key = CacheKey::new(&KeyParts {
            source: "symlinked",
            ..parts()
        });
        assert_eq!(lookup(&key, &root.0).0, CubinOrigin::Compiled);
        let entry = root.0.join(&key.file_name);
        let target = root.0.join("elsewhere");
        std::fs::rename(&entry, &target).expect("move");
        std::os::unix::fs::symlink(&target, &entry).expect("symlink");
        assert_eq!(lookup(&key, &root.0).0, CubinOrigin::Compiled);
        assert!(!std::fs::symlink_metadata(&entry)
            .expect("entry")
            .is_symlink());
    }

    /// A directory others can write is not used: nothing is read from or written to it.
    #[test]
    fn a_directory_others_can_write_is_refused() {
        let root = TempDir::new("refused");
        let key = CacheKey::new(&KeyParts {
            source: "refused",
            ..parts()
        });
        std::fs::set_permissions(&root.0, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let refused_before = cache_stats().disk_refused;
        assert_eq!(lookup(&key, &root.0).0, CubinOrigin::Compiled);
        assert_eq!(lookup(&key, &root.0).0, CubinOrigin::Compiled);
        assert_eq!(std::fs::read_dir(&root.0).expect("list").count(), 0);
        assert!(cache_stats().disk_refused >= refused_before + 2);
        assert!(disk_cache_refusal().is_some());
    }

    /// The default directory is created 0700, its entries 0600.
    #[test]
    fn a_new_directory_is_private() {
        let root = TempDir::new("private");
        let dir = root.0.join("oxicub");
        let key = CacheKey::new(&KeyParts {
            source: "private",
            ..parts()
        });
        assert_eq!(lookup(&key, &dir).0, CubinOrigin::Compiled);
        let mode = |path: &std::path::Path| {
            std::fs::metadata(path)
                .expect("metadata")
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(&key.file_name)), 0o600);
        assert_eq!(mode(&dir.join(SECRET_FILE)), 0o600);
    }
}
