//! oxicub's locality sort rows: `locality_sort::sort_keys` ascending on int32 keys, default
//! contract (stable_sorted), keys on the device. One untimed call first: its merge-pass
//! statistics (the seed's table) go to the log, prefixed by the row, and their totals to the note.

use crate::device::Gpu;
use crate::err::{Context, Result};
use crate::gen::Digest;
use crate::oxicub::{Measured, Runner};
use crate::workloads::{Kind, LocalityKeys, Workload};

use oxicub::{locality_sort, order, Cuda, Env};

/// The runner of a locality sort workload.
pub fn runner(w: &Workload) -> Option<Runner> {
    match w.kind {
        Kind::Locality { .. } => Some(locality),
        _ => None,
    }
}

fn locality(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
    let Kind::Locality { n, keys } = w.kind else {
        unreachable!("a locality sort runner got {:?}", w.kind)
    };
    let cuda = Cuda::from_stream(gpu.stream.clone()).ctx("oxicub::Cuda on the bench stream")?;
    let inputs = (0..rotations)
        .map(|_| match keys {
            LocalityKeys::Near { range } => gpu.gen_near_i32(n, w.seed, range),
            LocalityKeys::Random => gpu.gen_i32(n, w.seed),
        })
        .collect::<Result<Vec<_>>>()?;
    let mut out = cuda
        .alloc_zeros::<i32>(n.max(1) as usize)
        .ctx("allocating the output")?;
    let sort = |r: usize, out: &mut cudarc::driver::CudaSlice<i32>| {
        locality_sort::sort_keys(
            &cuda,
            &order::Ascending,
            inputs[r].as_view(),
            out.as_view_mut(),
            &Env::new(),
        )
        .and_then(oxicub::Pending::check)
        .ctx("oxicub::locality_sort::sort_keys")
    };
    // Once, outside the timed runs: the merge passes' statistics.
    let stats = sort(0, &mut out)?;
    eprintln!(
        "bench-gpu: {}: oxicub::locality_sort::sort_keys merge passes ({} tiles):",
        w.id, stats.tiles
    );
    for line in stats.to_string().lines() {
        eprintln!("bench-gpu: {}: {line}", w.id);
    }
    let total = stats.total();
    let visits = stats.tiles * stats.passes.len() as u64;
    // As the segmented sort rows: each timed call is checked (the caller's synchronisation).
    let timing = gpu.time_runs(w.warmup, w.reps, rotations, |r| sort(r, &mut out).map(drop))?;
    let words: Vec<u32> = gpu.to_host(&out)?[..n as usize]
        .iter()
        .map(|&k| k as u32)
        .collect();
    Ok(Measured {
        timing,
        digest: Digest::of_words(&words),
        note: format!(
            "locality_sort::sort_keys, i32 ascending, default contract (stable_sorted); \
             {} merge passes over {} tiles: {} tile visits merged, {} copied of {visits}",
            stats.passes.len(),
            stats.tiles,
            total.merge_tiles,
            total.copy_tiles,
        ),
    })
}
