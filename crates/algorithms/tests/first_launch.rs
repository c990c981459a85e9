//! Time to first launch with a cold and a warm disk cache. Ignored by default (it measures,
//! it asserts nothing about time); run on a GPU machine with a fresh cache directory, twice:
//!
//! ```text
//! d=$(mktemp -d)
//! OXICUB_CACHE_DIR=$d <test binary first_launch> --ignored --nocapture   # cold: compiles
//! OXICUB_CACHE_DIR=$d <test binary first_launch> --ignored --nocapture   # warm: disk hits
//! ```

use std::time::Instant;

use oxicub_algorithms::radix::{self, RadixDigit};
use oxicub_algorithms::Cuda;
use oxicub_kernels::cache_stats;

#[test]
#[ignore = "measurement: run by hand on a GPU machine (see the file's docs)"]
fn time_to_first_launch() {
    let Some(_) = oxicub_test::gpu_or_skip() else {
        return;
    };
    let dir = std::env::var("OXICUB_CACHE_DIR").unwrap_or_else(|_| "<default>".to_owned());
    let start = Instant::now();
    let cuda = Cuda::new(0).expect("cuda");
    let t_context = start.elapsed();
    let keys = cuda
        .upload(&(0..1_000_000u32).collect::<Vec<_>>())
        .expect("upload");
    let mut codes = cuda.alloc_zeros::<u32>(1_000_000).expect("alloc");
    let mut histogram = cuda.alloc_zeros::<u64>(256).expect("alloc");
    let digit = RadixDigit::byte(1).expect("byte");

    let mut launch_both = || {
        let t = Instant::now();
        radix::transform_keys(&cuda, keys.as_view(), codes.as_view_mut()).expect("transform");
        oxicub_algorithms::Backend::synchronize(&cuda).expect("sync");
        let transform = t.elapsed();
        let t = Instant::now();
        radix::digit_histogram(&cuda, keys.as_view(), digit, histogram.as_view_mut())
            .expect("histogram");
        oxicub_algorithms::Backend::synchronize(&cuda).expect("sync");
        (transform, t.elapsed())
    };
    let (first_transform, first_histogram) = launch_both();
    let (second_transform, second_histogram) = launch_both();
    let stats = cache_stats();
    let state = if stats.compiled > 0 {
        "COLD (compiled)"
    } else {
        "WARM (from disk)"
    };
    println!("first-launch timing on {cuda}, cache dir {dir}: {state}");
    println!("  context + stream + device facts: {t_context:>10.2?}");
    println!("  transform_keys  first launch:    {first_transform:>10.2?}   second: {second_transform:>10.2?}");
    println!("  digit_histogram first launch:    {first_histogram:>10.2?}   second: {second_histogram:>10.2?}");
    println!(
        "  cache: {} compiled, {} disk hits, {} disk entries rejected, {} disk write failures, {} memory hits",
        stats.compiled, stats.disk_hits, stats.disk_rejected, stats.disk_write_failures, stats.memory_hits
    );
}
