//! Platforms without `openat` and Unix permissions: no disk cache (the checks of SECURITY.md,
//! "What is checked on every read", need both), so every lookup records why.

use std::convert::Infallible;
use std::io;
use std::path::Path;

use super::Lookup;

/// Never constructed: [`CacheDir::open`] always refuses.
pub(crate) struct CacheDir(Infallible);

impl CacheDir {
    /// Refuses: the disk cache needs a Unix platform.
    pub(crate) fn open(path: &Path) -> Result<CacheDir, String> {
        Err(format!(
            "cache directory {} not used: the disk cache needs a Unix platform",
            path.display()
        ))
    }

    /// Unreachable: no `CacheDir` exists.
    pub(crate) fn read_entry(&self, _name: &str, _key: &str) -> Lookup {
        match self.0 {}
    }

    /// Unreachable: no `CacheDir` exists.
    pub(crate) fn write_entry(&self, _name: &str, _key: &str, _payload: &[u8]) -> io::Result<()> {
        match self.0 {}
    }
}
