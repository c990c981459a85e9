//! The disk cache directory, used through one descriptor that was checked when it was opened
//! (SECURITY.md, "Where the cache lives" and "What is checked on every read"): every file is
//! opened relative to that descriptor, so renaming or replacing the directory's path after the
//! check changes nothing.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use super::entry::{decode_entry, encode_entry, Secret, MAX_ENTRY_BYTES, SECRET_BYTES};
use super::{random_hex, Lookup};

/// The file of the directory's secret, the HMAC key of its entries.
pub(crate) const SECRET_FILE: &str = "entry-secret";

/// Permission bits that may not be set on the directory or an entry: group or others could
/// replace what the cache loads.
const NOT_WRITABLE_BY_OTHERS: Mode = Mode::WGRP.union(Mode::WOTH);
/// Permission bits that may not be set on the secret: group or others could read it.
const PRIVATE_TO_OWNER: Mode = Mode::RWXG.union(Mode::RWXO);

/// An open cache directory, owned by the user and writable by nobody else, with its secret.
pub(crate) struct CacheDir {
    fd: OwnedFd,
    path: PathBuf,
    uid: u32,
    secret: Secret,
}

impl CacheDir {
    /// Opens the directory at `path` (creating it, mode 0700, where missing), checks that this
    /// process's effective user owns it and that neither its group nor others can write it,
    /// and reads its secret (creating it where missing or unusable). `Err` says why the
    /// directory is not used.
    pub(crate) fn open(path: &Path) -> Result<CacheDir, String> {
        CacheDir::open_for(path, rustix::process::geteuid().as_raw())
    }

    /// [`CacheDir::open`] for the user `uid` (tests pass another user's).
    pub(crate) fn open_for(path: &Path, uid: u32) -> Result<CacheDir, String> {
        let shown = path.display();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(|e| format!("cache directory {shown} cannot be created: {e}"))?;
        // Following a symbolic link here is harmless: what is checked is the directory the
        // descriptor refers to, and every later access goes through the descriptor.
        let fd = rfs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("cache directory {shown} cannot be opened: {e}"))?;
        let stat = rfs::fstat(&fd).map_err(|e| format!("cache directory {shown}: {e}"))?;
        check_stat(&stat, FileType::Directory, uid, NOT_WRITABLE_BY_OTHERS)
            .map_err(|why| format!("cache directory {shown} {why}"))?;
        let secret = load_secret(&fd, uid).map_err(|why| format!("{shown}/{SECRET_FILE} {why}"))?;
        Ok(CacheDir {
            fd,
            path: path.to_owned(),
            uid,
            secret,
        })
    }

    /// The entry `name` if it is a valid entry for `key`.
    pub(crate) fn read_entry(&self, name: &str, key: &str) -> Lookup {
        let shown = self.path.display();
        match read_private(
            &self.fd,
            name,
            self.uid,
            NOT_WRITABLE_BY_OTHERS,
            MAX_ENTRY_BYTES,
        ) {
            Err(ReadError::Missing) => Lookup::Missing,
            Err(ReadError::Rejected(why)) => Lookup::Rejected(format!("{shown}/{name} {why}")),
            Ok(bytes) => match decode_entry(&self.secret, key, &bytes) {
                Some(cubin) => Lookup::Found(cubin),
                None => Lookup::Rejected(format!(
                    "{shown}/{name} is not an authentic entry for this key"
                )),
            },
        }
    }

    /// Writes the entry `name` for `key`: through a new file of a random name, renamed over
    /// whatever `name` was (a rejected entry, a symbolic link: the link itself is replaced).
    pub(crate) fn write_entry(&self, name: &str, key: &str, payload: &[u8]) -> io::Result<()> {
        install(
            &self.fd,
            name,
            &encode_entry(&self.secret, key, payload),
            Placement::Replace,
        )
    }
}

/// Why a file was not read.
#[derive(Debug, PartialEq, Eq)]
enum ReadError {
    /// There is no file of that name.
    Missing,
    /// The file is not one the cache may read (the reason).
    Rejected(String),
}

/// Checks that `stat` is a `kind` owned by `uid` with none of the `forbidden` permission bits.
fn check_stat(stat: &Stat, kind: FileType, uid: u32, forbidden: Mode) -> Result<(), String> {
    let file_type = FileType::from_raw_mode(stat.st_mode);
    if file_type != kind {
        return Err(format!("is a {file_type:?}, not a {kind:?}"));
    }
    if stat.st_uid != uid {
        return Err(format!(
            "is owned by uid {}, not by this user (uid {uid})",
            stat.st_uid
        ));
    }
    let mode = Mode::from_raw_mode(stat.st_mode);
    if mode.intersects(forbidden) {
        return Err(format!(
            "has mode {:04o}, which gives its group or others access it may not have",
            mode.bits()
        ));
    }
    Ok(())
}

/// Reads the file `name` in `dir`, never through a symbolic link, only if it is a regular
/// file owned by `uid` with none of the `forbidden` bits, and of at most `max_len` bytes.
fn read_private(
    dir: impl AsFd,
    name: &str,
    uid: u32,
    forbidden: Mode,
    max_len: u64,
) -> Result<Vec<u8>, ReadError> {
    // O_NONBLOCK: opening a FIFO planted under the name must not wait for a writer.
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = match rfs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Err(ReadError::Missing),
        Err(Errno::LOOP) => return Err(ReadError::Rejected("is a symbolic link".to_owned())),
        Err(e) => return Err(ReadError::Rejected(format!("cannot be opened: {e}"))),
    };
    let rejected = ReadError::Rejected;
    let stat = rfs::fstat(&fd).map_err(|e| rejected(format!("cannot be examined: {e}")))?;
    check_stat(&stat, FileType::RegularFile, uid, forbidden).map_err(rejected)?;
    let too_large = |len: u64| rejected(format!("has {len} bytes, more than the {max_len} read"));
    let len = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
    if len > max_len {
        return Err(too_large(len));
    }
    // The file may grow after the check: never read more than one byte past the limit.
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    File::from(fd)
        .take(max_len + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| rejected(format!("cannot be read: {e}")))?;
    if bytes.len() as u64 > max_len {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// How [`install`] puts a file in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placement {
    /// Over whatever has the name.
    Replace,
    /// Only where nothing has the name yet (a concurrent writer's file stays).
    KeepExisting,
}

/// Creates a new file of a random name in `dir`: exclusively (an existing file or symbolic
/// link of that name makes it fail), mode 0600.
fn create_temp(dir: impl AsFd) -> io::Result<(String, File)> {
    let name = format!(".tmp-{}", random_hex(16)?);
    let fd = create_exclusive(dir, &name)?;
    Ok((name, File::from(fd)))
}

/// Opens `name` in `dir` for writing only if nothing has that name yet, mode 0600.
fn create_exclusive(dir: impl AsFd, name: &str) -> io::Result<OwnedFd> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rfs::openat(dir, name, flags, Mode::RUSR | Mode::WUSR)?)
}

/// Writes `contents` to `name` in `dir` through a temporary file, so that no reader ever sees
/// part of it.
fn install(dir: &OwnedFd, name: &str, contents: &[u8], placement: Placement) -> io::Result<()> {
    let (temp, mut file) = create_temp(dir)?;
    let written = file.write_all(contents).and_then(|()| file.sync_all());
    let placed = written.and_then(|()| match placement {
        Placement::Replace => Ok(rfs::renameat(dir, &temp, dir, name)?),
        Placement::KeepExisting => match rfs::linkat(dir, &temp, dir, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::EXIST) => Ok(()),
            Err(e) => Err(e.into()),
        },
    });
    if placed.is_err() || placement == Placement::KeepExisting {
        let _ = rfs::unlinkat(dir, &temp, AtFlags::empty());
    }
    placed
}

/// The directory's secret: read, or created where missing (by whichever process comes first)
/// or unusable (replaced: the entries written under the old one are then recompiled).
fn load_secret(dir: &OwnedFd, uid: u32) -> Result<Secret, String> {
    let read = || -> Result<Secret, ReadError> {
        let bytes = read_private(dir, SECRET_FILE, uid, PRIVATE_TO_OWNER, SECRET_BYTES as u64)?;
        let secret: [u8; SECRET_BYTES] = bytes.try_into().map_err(|bytes: Vec<u8>| {
            ReadError::Rejected(format!("has {} bytes, not {SECRET_BYTES}", bytes.len()))
        })?;
        Ok(Secret(secret))
    };
    let placement = match read() {
        Ok(secret) => return Ok(secret),
        Err(ReadError::Missing) => Placement::KeepExisting,
        Err(ReadError::Rejected(_)) => Placement::Replace,
    };
    let mut fresh = [0u8; SECRET_BYTES];
    getrandom::fill(&mut fresh).map_err(|e| format!("cannot be generated: {e}"))?;
    install(dir, SECRET_FILE, &fresh, placement).map_err(|e| format!("cannot be written: {e}"))?;
    read().map_err(|e| match e {
        ReadError::Missing => "is missing after it was written".to_owned(),
        ReadError::Rejected(why) => why,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, OpenOptionsExt, PermissionsExt};

    /// A fresh directory under the temporary directory, removed on drop.
    pub(crate) struct TempDir(pub(crate) PathBuf);

    impl TempDir {
        pub(crate) fn new(name: &str) -> TempDir {
            let path = std::env::temp_dir().join(format!(
                "oxicub-{name}-{}-{}",
                std::process::id(),
                random_hex(8).expect("random")
            ));
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&path)
                .expect("create");
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn mode_of(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn creates_the_directory_0700_and_the_secret_0600() {
        let root = TempDir::new("create");
        let dir = root.0.join("a/b");
        let cache = CacheDir::open(&dir).expect("open");
        assert_eq!(mode_of(&dir), 0o700);
        assert_eq!(mode_of(&dir.join(SECRET_FILE)), 0o600);
        cache.write_entry("x.cubin", "k", b"abc").expect("write");
        assert_eq!(mode_of(&dir.join("x.cubin")), 0o600);
        // Only the secret and the entry: the temporary file was renamed into place.
        assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 2);
        // A second opening reads the same secret.
        let again = CacheDir::open(&dir).expect("reopen");
        assert_eq!(again.secret, cache.secret);
        assert_eq!(
            again.read_entry("x.cubin", "k"),
            Lookup::Found(b"abc".to_vec())
        );
    }

    #[test]
    fn a_directory_writable_by_others_is_refused() {
        let root = TempDir::new("mode");
        for mode in [0o777, 0o770, 0o1777, 0o702] {
            std::fs::set_permissions(&root.0, std::fs::Permissions::from_mode(mode))
                .expect("chmod");
            let refused = CacheDir::open(&root.0).err().expect("refused");
            assert!(refused.contains("group or others"), "{mode:o}: {refused}");
        }
        // Nothing was written into the refused directory.
        assert_eq!(std::fs::read_dir(&root.0).expect("list").count(), 0);
        std::fs::set_permissions(&root.0, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert!(
            CacheDir::open(&root.0).is_ok(),
            "readable by others is allowed"
        );
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        let root = TempDir::new("owner");
        let me = rustix::process::geteuid().as_raw();
        let refused = CacheDir::open_for(&root.0, me.wrapping_add(1))
            .err()
            .expect("refused");
        assert!(refused.contains("owned by uid"), "{refused}");
        assert_eq!(std::fs::read_dir(&root.0).expect("list").count(), 0);
    }

    #[test]
    fn a_path_that_is_not_a_directory_is_refused() {
        let root = TempDir::new("file");
        let file = root.0.join("f");
        std::fs::write(&file, b"").expect("write");
        assert!(CacheDir::open(&file).is_err());
    }

    #[test]
    fn an_unusable_secret_is_replaced() {
        let root = TempDir::new("secret");
        let first = CacheDir::open(&root.0).expect("open").secret;
        let secret_path = root.0.join(SECRET_FILE);
        std::fs::set_permissions(&secret_path, std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        let second = CacheDir::open(&root.0).expect("reopen").secret;
        assert_ne!(first, second, "a secret others could read is not used");
        assert_eq!(mode_of(&secret_path), 0o600);
        std::fs::write(&secret_path, b"short").expect("truncate");
        std::fs::set_permissions(&secret_path, std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
        let third = CacheDir::open(&root.0).expect("reopen").secret;
        assert_ne!(third, second);
    }

    #[test]
    fn an_entry_owned_by_another_user_or_writable_by_others_is_rejected() {
        let root = TempDir::new("entry-owner");
        let cache = CacheDir::open(&root.0).expect("open");
        cache.write_entry("x.cubin", "k", b"abc").expect("write");
        let other_user = CacheDir {
            uid: cache.uid.wrapping_add(1),
            ..CacheDir::open(&root.0).expect("open")
        };
        assert!(matches!(
            other_user.read_entry("x.cubin", "k"),
            Lookup::Rejected(why) if why.contains("owned by uid")
        ));
        std::fs::set_permissions(
            root.0.join("x.cubin"),
            std::fs::Permissions::from_mode(0o666),
        )
        .expect("chmod");
        assert!(matches!(
            cache.read_entry("x.cubin", "k"),
            Lookup::Rejected(why) if why.contains("group or others")
        ));
    }

    #[test]
    fn a_symlinked_entry_is_not_followed() {
        let root = TempDir::new("symlink");
        let cache = CacheDir::open(&root.0).expect("open");
        // A valid entry, reachable only through a symbolic link.
        cache.write_entry("real.cubin", "k", b"abc").expect("write");
        symlink(root.0.join("real.cubin"), root.0.join("x.cubin")).expect("symlink");
        assert!(matches!(
            cache.read_entry("x.cubin", "k"),
            Lookup::Rejected(why) if why.contains("symbolic link")
        ));
        // Writing the entry replaces the link, not its target.
        cache.write_entry("x.cubin", "k", b"def").expect("write");
        assert!(!std::fs::symlink_metadata(root.0.join("x.cubin"))
            .expect("metadata")
            .file_type()
            .is_symlink());
        assert_eq!(
            cache.read_entry("real.cubin", "k"),
            Lookup::Found(b"abc".to_vec())
        );
        assert_eq!(
            cache.read_entry("x.cubin", "k"),
            Lookup::Found(b"def".to_vec())
        );
    }

    /// A file planted at a temporary file's name (a symbolic link to a file of the user's) makes
    /// the creation fail instead of writing through the link.
    #[test]
    fn a_temporary_path_is_never_followed() {
        let root = TempDir::new("temp");
        let victim = root.0.join("victim");
        std::fs::write(&victim, b"precious").expect("write");
        symlink(&victim, root.0.join(".tmp-planted")).expect("symlink");
        let dir =
            rfs::open(&root.0, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).expect("open");
        let err = create_exclusive(&dir, ".tmp-planted").expect_err("must not follow");
        assert_eq!(err.raw_os_error(), Some(Errno::EXIST.raw_os_error()));
        assert_eq!(std::fs::read(&victim).expect("read"), b"precious");
        // Temporary names are random: two differ.
        let (a, _) = create_temp(&dir).expect("temp");
        let (b, _) = create_temp(&dir).expect("temp");
        assert_ne!(a, b);
        assert_eq!(a.len(), ".tmp-".len() + 32);
    }

    #[test]
    fn an_oversized_entry_is_not_read() {
        let root = TempDir::new("oversized");
        let cache = CacheDir::open(&root.0).expect("open");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(root.0.join("x.cubin"))
            .expect("create");
        // Sparse: no disk space is used.
        file.set_len(MAX_ENTRY_BYTES + 1).expect("set_len");
        assert!(matches!(
            cache.read_entry("x.cubin", "k"),
            Lookup::Rejected(why) if why.contains("more than")
        ));
    }

    #[test]
    fn a_missing_entry_is_missing() {
        let root = TempDir::new("missing");
        let cache = CacheDir::open(&root.0).expect("open");
        assert_eq!(cache.read_entry("x.cubin", "k"), Lookup::Missing);
    }
}
