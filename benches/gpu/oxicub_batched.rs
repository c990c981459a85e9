//! oxicub's batched top-k rows: `batched_topk::select_keys`, max, segments of one strided
//! buffer. The segment size (or, for ragged rows, its upper bound) and `k` are static
//! (`Static<LEN>`, `Static<K>`), as an MoE router or a sparse-attention indexer with a fixed
//! shape would write them, so the static bounds pick the kernel tiers at compile time; the
//! number of segments is a host value.
//!
//! Keys: f32 (uniform or ascending rows), bf16 (`half::bf16`), or f32 ragged rows, whose
//! lengths are an `i64` per row in device memory (`segment_size::PerSegment` over a
//! `CudaView`; uploaded before timing, as an engine's sequence lengths would already be there).
//!
//! Main row: the default contract (gpu_to_gpu, prefer_smaller_index, stable_sorted). Opt-out
//! column: not_guaranteed + unsorted. Both are digested canonically (each row's k keys sorted
//! descending), so the unsorted output is compared as a multiset per row.

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use half::bf16;

use crate::device::{Gpu, Timing};
use crate::err::{Context, Result};
use crate::gen::Digest;
use crate::oxicub::{Measured, Runner};
use crate::workloads::{keys_then_index_sets, ragged_lens, Kind, Rows, Workload};

use oxicub::batched_topk::{self, Problem};
use oxicub::radix::RadixKey;
use oxicub::{
    determinism, direction, k, num_segments, output_ordering, require, segment_size, Cuda,
    Environment, Outcome,
};

/// The default-contract runner of a batched workload, None for a shape without one.
pub fn runner(w: &Workload) -> Option<Runner> {
    pick(w, false)
}

/// The opt-out runner (not_guaranteed + unsorted) of a batched workload.
pub fn opt_out_runner(w: &Workload) -> Option<Runner> {
    pick(w, true)
}

fn pick(w: &Workload, opt_out: bool) -> Option<Runner> {
    let Kind::Batched { len, k, .. } = w.kind else {
        return None;
    };
    macro_rules! shapes {
        ($(($len:literal, $k:literal)),*) => {
            match (len, k, opt_out) {
                $(
                    ($len, $k, false) => Some(default_contract::<$len, $k> as Runner),
                    ($len, $k, true) => Some(opt_out_contract::<$len, $k> as Runner),
                )*
                _ => None,
            }
        };
    }
    shapes!(
        (64, 6),
        (256, 8),
        (131072, 2048),
        (32768, 2048),
        (1048576, 2048),
        (65536, 512)
    )
}

fn default_contract<const LEN: i64, const K: i64>(
    gpu: &Gpu,
    w: &Workload,
    rotations: usize,
) -> Result<Measured> {
    batched::<LEN, K, _>(
        gpu,
        w,
        rotations,
        &oxicub::Env::new(),
        "default contract (gpu_to_gpu, prefer_smaller_index, stable_sorted)",
    )
}

fn opt_out_contract<const LEN: i64, const K: i64>(
    gpu: &Gpu,
    w: &Workload,
    rotations: usize,
) -> Result<Measured> {
    batched::<LEN, K, _>(
        gpu,
        w,
        rotations,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        "not_guaranteed + unsorted",
    )
}

fn batched<const LEN: i64, const K: i64, E: Environment>(
    gpu: &Gpu,
    w: &Workload,
    rotations: usize,
    env: &E,
    contract: &str,
) -> Result<Measured> {
    let Kind::Batched {
        segments,
        len,
        k,
        rows,
    } = w.kind
    else {
        unreachable!("a batched runner got {:?}", w.kind)
    };
    assert_eq!(
        (len, k),
        (LEN as u64, K as u64),
        "runner picked for another shape"
    );
    let cuda = Cuda::from_stream(gpu.stream.clone()).ctx("oxicub::Cuda on the bench stream")?;
    let count = num_segments::uniform(segments as i64).ctx("num_segments")?;
    let fixed = Problem::strided(
        LEN as usize,
        segment_size::Static::<LEN>::new(),
        k::Static::<K>::new(),
        direction::Max,
        count,
    );
    let note =
        |sizes: &str| format!("batched_topk::select_keys, {sizes}, Static<{K}> k, {contract}");
    let out_len = segments * k;
    match rows {
        Rows::Random | Rows::Ascending => {
            let inputs = (0..rotations)
                .map(|_| match rows {
                    Rows::Ascending => gpu.gen_ramp_f32(segments * len, w.seed, len as u32),
                    _ => gpu.gen_f32(segments * len, w.seed),
                })
                .collect::<Result<Vec<_>>>()?;
            let call = |r: usize, out: CudaViewMut<'_, f32>| {
                batched_topk::select_keys(&cuda, &fixed, inputs[r].as_view(), out, env)
            };
            let run = timed(gpu, &cuda, w, rotations, out_len, call, f32::to_bits)?;
            Ok(measured(run, k, note(&format!("Static<{LEN}> segments"))))
        }
        Rows::Bf16 => {
            let bits = (0..rotations)
                .map(|_| gpu.gen_bf16_bits(segments * len, w.seed))
                .collect::<Result<Vec<_>>>()?;
            let call = |r: usize, out: CudaViewMut<'_, bf16>| {
                batched_topk::select_keys(&cuda, &fixed, as_bf16(&bits[r]), out, env)
            };
            let run = timed(gpu, &cuda, w, rotations, out_len, call, |x| {
                u32::from(x.to_bits())
            })?;
            Ok(measured(
                run,
                k,
                note(&format!("Static<{LEN}> segments of bf16")),
            ))
        }
        Rows::Ties => {
            let inputs = (0..rotations)
                .map(|_| gpu.gen_tie_f32(segments * len, w.seed))
                .collect::<Result<Vec<_>>>()?;
            let mut out = cuda
                .alloc_zeros::<f32>(out_len as usize)
                .ctx("allocating the output")?;
            let mut at = cuda
                .alloc_zeros::<u32>(out_len as usize)
                .ctx("allocating the indices")?;
            let timing = checked_then_timed(gpu, w, rotations, |r| {
                let (out, at) = (out.as_view_mut(), at.as_view_mut());
                batched_topk::select_indices(&cuda, &fixed, inputs[r].as_view(), out, at, env)
            })?;
            let keys = gpu.to_host(&out)?.into_iter().map(f32::to_bits).collect();
            Ok(Measured {
                timing,
                digest: keys_then_index_sets(keys, gpu.to_host(&at)?, k),
                note: format!(
                    "batched_topk::select_indices (u32), Static<{LEN}> segments, Static<{K}> k, \
                     {contract}; digested with the index sets"
                ),
            })
        }
        Rows::Ragged => {
            let lens: Vec<i64> = ragged_lens(w.seed, segments, len, k)
                .into_iter()
                .map(|n| n as i64)
                .collect();
            let sizes = gpu
                .stream
                .clone_htod(&lens)
                .ctx("uploading the row lengths")?;
            let problem = Problem::strided(
                LEN as usize,
                segment_size::PerSegment::<_, 0, LEN>::new(sizes.as_view()),
                k::Static::<K>::new(),
                direction::Max,
                count,
            );
            let inputs = (0..rotations)
                .map(|_| gpu.gen_f32(segments * len, w.seed))
                .collect::<Result<Vec<_>>>()?;
            let call = |r: usize, out: CudaViewMut<'_, f32>| {
                batched_topk::select_keys(&cuda, &problem, inputs[r].as_view(), out, env)
            };
            let run = timed(gpu, &cuda, w, rotations, out_len, call, f32::to_bits)?;
            let sizes = format!("PerSegment<0, {LEN}> sizes (i64 on the device), stride {LEN}");
            Ok(measured(run, k, note(&sizes)))
        }
    }
}

/// bf16 keys viewed from their generated bits.
fn as_bf16(bits: &CudaSlice<u16>) -> CudaView<'_, bf16> {
    // SAFETY: bf16 has the size and alignment of u16 and every bit pattern is a bf16 value.
    match unsafe { bits.transmute::<bf16>(bits.len()) } {
        Some(view) => view,
        None => unreachable!("bf16 and u16 have the same size"),
    }
}

/// Runs `call(rotation)` once with its status checked, then times it over the input copies.
fn checked_then_timed(
    gpu: &Gpu,
    w: &Workload,
    rotations: usize,
    mut call: impl FnMut(usize) -> std::result::Result<Outcome, oxicub::Error>,
) -> Result<Timing> {
    // Checked once outside the timed runs (reading the status waits for the stream).
    call(0)
        .ctx("oxicub::batched_topk")?
        .check()
        .ctx("batched_topk status")?;
    gpu.time_runs(w.warmup, w.reps, rotations, |r| {
        // The status is not read in the timed runs: a caller checks when it synchronises.
        let _unchecked = call(r).ctx("oxicub::batched_topk")?;
        Ok(())
    })
}

/// Times `call(rotation, out)` (checked_then_timed) into one output of `out_len` keys;
/// returns the timing and the output's words.
fn timed<T: RadixKey>(
    gpu: &Gpu,
    cuda: &Cuda,
    w: &Workload,
    rotations: usize,
    out_len: u64,
    mut call: impl FnMut(usize, CudaViewMut<'_, T>) -> std::result::Result<Outcome, oxicub::Error>,
    word: fn(T) -> u32,
) -> Result<(Timing, Vec<u32>)> {
    let mut out = cuda
        .alloc_keys::<T>(out_len as usize)
        .ctx("allocating the output")?;
    let timing = checked_then_timed(gpu, w, rotations, |r| call(r, out.as_view_mut()))?;
    let keys = cuda.download_keys(&out).ctx("copying the result")?;
    Ok((timing, keys.into_iter().map(word).collect()))
}

/// The canonical digest (each row's k keys sorted descending; the keys are non-negative, so
/// their bits order like their values).
fn measured((timing, mut words): (Timing, Vec<u32>), k: u64, note: String) -> Measured {
    for row in words.chunks_mut(k as usize) {
        row.sort_unstable_by(|a, b| b.cmp(a));
    }
    Measured {
        timing,
        digest: Digest::of_words(&words),
        note,
    }
}
