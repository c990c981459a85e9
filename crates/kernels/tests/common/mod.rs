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

/// Whether a CUDA device is there to run on: `false` after printing a skip line, a failure
/// instead when `OXICUB_REQUIRE_GPU=1` (the GPU machine can never pass by skipping).
#[allow(dead_code)] // Only the test binaries that run kernels use it.
pub fn gpu_or_skip() -> bool {
    let why = match oxicub_kernels::device_count() {
        Ok(0) => "the driver found no device".to_owned(),
        Ok(_) => return true,
        Err(e) => e.to_string(),
    };
    if gpu_required() {
        panic!("OXICUB_REQUIRE_GPU=1 but no GPU is usable: {why}");
    }
    println!("skipped: no GPU ({why})");
    false
}

/// Whether `OXICUB_REQUIRE_GPU=1`: a GPU test must run, never skip (for want of NVRTC either).
#[allow(dead_code)] // Only the test binaries that run kernels use it.
pub fn gpu_required() -> bool {
    std::env::var("OXICUB_REQUIRE_GPU").is_ok_and(|v| v == "1")
}
