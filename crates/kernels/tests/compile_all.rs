//! Kernel compile check: every spec of the representative matrix compiles with NVRTC to a
//! CUBIN for sm_90. Needs NVRTC, not a GPU or a driver. Without NVRTC it prints a skip line;
//! with `OXICUB_REQUIRE_NVRTC=1` a missing NVRTC fails the test.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use oxicub_kernels::families::{batched_topk, topk_radix_select};
use oxicub_kernels::{
    compile_cubin, nvrtc_available, nvrtc_version, representative_specs, Arch, KernelError,
    KernelSpec,
};

fn nvrtc_or_skip() -> bool {
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

#[test]
fn every_representative_spec_compiles_for_sm_90() {
    compile_all("representative", representative_specs());
}

#[test]
fn every_topk_radix_select_spec_compiles_for_sm_90() {
    compile_all("topk_radix_select", topk_radix_select::specs());
}

#[test]
fn every_batched_topk_spec_compiles_for_sm_90() {
    compile_all("batched_topk", batched_topk::specs());
}

/// Compiles every spec on a few threads and reports every failure.
fn compile_all(what: &str, specs: Vec<KernelSpec>) {
    if !nvrtc_or_skip() {
        return;
    }
    let next = AtomicUsize::new(0);
    let failures: Mutex<Vec<KernelError>> = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(8);
    let start = std::time::Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while let Some(spec) = specs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    match compile_cubin(spec, Arch::SM_90) {
                        // A CUBIN is an ELF image.
                        Ok(cubin) => assert!(cubin.starts_with(b"\x7fELF"), "{spec}: not an ELF"),
                        Err(e) => failures.lock().expect("no panics while holding").push(e),
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().expect("no panics while holding");
    for failure in &failures {
        eprintln!("{failure}\n");
    }
    let (major, minor) = nvrtc_version().expect("NVRTC loaded above");
    println!(
        "{what}: compiled {} of {} kernel variants for sm_90 with NVRTC {major}.{minor} in {:.1?} ({workers} threads)",
        specs.len() - failures.len(),
        specs.len(),
        start.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} kernel variants failed to compile",
        failures.len()
    );
}
