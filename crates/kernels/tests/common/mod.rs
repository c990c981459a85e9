//! What the kernels crate's integration tests share.

use oxicub_kernels::nvrtc_available;

/// Whether NVRTC is there to compile with: `false` after printing a skip line, a failure
/// instead when `OXICUB_REQUIRE_NVRTC=1` (CI and the GPU machine can never pass by skipping).
pub fn nvrtc_or_skip() -> bool {
    match nvrtc_available() {
        Ok(()) => true,
        Err(e) if std::env::var("OXICUB_REQUIRE_NVRTC").is_ok_and(|v| v == "1") => {
            panic!("OXICUB_REQUIRE_NVRTC=1 but NVRTC is missing: {e}")
        }
        Err(e) => {
            println!("skipped: no NVRTC ({e})");
            false
        }
    }
}
