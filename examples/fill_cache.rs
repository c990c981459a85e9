//! Fills oxicub's disk cache of compiled kernels for one GPU architecture, without a GPU: run it
//! when building a container image, so the serving process reads every kernel from disk
//! instead of compiling it with NVRTC on first use (about a second a kernel).
//!
//! ```sh
//! OXICUB_CACHE_DIR=/opt/oxicub-cache cargo run --release --example fill_cache -- sm_90
//! OXICUB_CACHE_DIR=/opt/oxicub-cache cargo run --release --example fill_cache -- sm_90 sets batched_topk
//! ```
//!
//! The first argument is the architecture (`sm_90` for H100 and H200); the others, if any,
//! name the kernel families to fill (every family by default). Needs NVRTC (`libnvrtc.so` of
//! the CUDA version oxicub is built for on `LD_LIBRARY_PATH`), not a driver. The serving
//! process must use the same cache directory, NVRTC and oxicub version: the cache keys hold
//! them. It reads the directory only while its user owns it and nobody else can write it
//! (SECURITY.md).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use oxicub::kernels::{
    cache_stats, cached_cubin, disk_cache_refusal, nvrtc_available, Arch, CacheConfig,
    KernelFamily, KernelSpec,
};

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let arch = args.next().ok_or("usage: fill_cache sm_XY [family ...]")?;
    let arch = parse_arch(&arch)?;
    let wanted: Vec<String> = args.collect();
    let families: Vec<KernelFamily> = KernelFamily::ALL
        .into_iter()
        .filter(|f| wanted.is_empty() || wanted.iter().any(|w| w == f.name()))
        .collect();
    if families.len() < wanted.len() {
        let names: Vec<&str> = KernelFamily::ALL.iter().map(|f| f.name()).collect();
        return Err(format!(
            "unknown family among {wanted:?}; families: {names:?}"
        ));
    }
    nvrtc_available().map_err(|e| e.to_string())?;
    let config = CacheConfig::from_env();
    let Some(dir) = config.disk_dir.clone() else {
        return Err(format!(
            "no disk cache: {} is `off` (or neither it, XDG_CACHE_HOME nor HOME is set)",
            CacheConfig::ENV_VAR
        ));
    };
    let specs: Vec<KernelSpec> = families.iter().flat_map(|f| f.specs()).collect();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    println!(
        "fill_cache: {} kernels of {} families for {arch} into {} ({threads} threads)",
        specs.len(),
        families.len(),
        dir.display()
    );
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while let Some(spec) = specs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if let Err(e) = cached_cubin(spec, arch, &config) {
                        failures
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .push(format!("{spec}: {e}"));
                    }
                }
            });
        }
    });
    let stats = cache_stats();
    println!(
        "fill_cache: {} compiled, {} already on disk, {} disk writes failed, in {:.1} s",
        stats.compiled,
        stats.disk_hits,
        stats.disk_write_failures,
        started.elapsed().as_secs_f64()
    );
    if let Some(why) = disk_cache_refusal() {
        return Err(format!("the disk cache was refused: {why}"));
    }
    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    if !failures.is_empty() || stats.disk_write_failures > 0 {
        return Err(format!(
            "{} kernels failed, {} not written: {failures:?}",
            failures.len(),
            stats.disk_write_failures
        ));
    }
    Ok(())
}

/// `sm_XY` (or `XY`) as an architecture.
fn parse_arch(text: &str) -> Result<Arch, String> {
    let digits = text.strip_prefix("sm_").unwrap_or(text);
    let bad = || format!("not an architecture: {text} (expected sm_XY, e.g. sm_90)");
    if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let (major, minor) = digits.split_at(digits.len() - 1);
    let major: u32 = major.parse().map_err(|_| bad())?;
    let minor: u32 = minor.parse().map_err(|_| bad())?;
    Ok(Arch::from_compute_capability(major, minor))
}
