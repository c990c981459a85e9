//! oxicub's batched top-k rows: `batched_topk::select_keys` on f32 keys, max, uniform segments
//! of one strided buffer. The segment size and `k` are static (`Static<LEN>`, `Static<K>`), as an
//! MoE router or a sparse-attention indexer with a fixed shape would write them, so the static
//! bounds pick the kernel tier at compile time; the number of segments is a host value.
//!
//! Main row: the default contract (gpu_to_gpu, prefer_smaller_index, stable_sorted). Opt-out
//! column: not_guaranteed + unsorted. Both are digested canonically (each row's k keys sorted
//! descending), so the unsorted output is compared as a multiset per row.

use crate::device::Gpu;
use crate::err::{Context, Result};
use crate::gen::Digest;
use crate::oxicub::{Measured, Runner};
use crate::workloads::{Kind, Rows, Workload};

use oxicub::batched_topk::{self, Problem};
use oxicub::{
    determinism, direction, k, num_segments, output_ordering, require, segment_size, Cuda,
    Environment,
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
        (1048576, 2048)
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
        format!(
            "batched_topk::select_keys, Static<{LEN}> segments, Static<{K}> k, default contract \
             (gpu_to_gpu, prefer_smaller_index, stable_sorted)"
        ),
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
        format!("batched_topk::select_keys, Static<{LEN}>, Static<{K}>, not_guaranteed + unsorted"),
    )
}

fn batched<const LEN: i64, const K: i64, E: Environment>(
    gpu: &Gpu,
    w: &Workload,
    rotations: usize,
    env: &E,
    note: String,
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
    let inputs = (0..rotations)
        .map(|_| match rows {
            Rows::Random => gpu.gen_f32(segments * len, w.seed),
            Rows::Ascending => gpu.gen_ramp_f32(segments * len, w.seed, len as u32),
        })
        .collect::<Result<Vec<_>>>()?;
    let mut out = cuda
        .alloc_zeros::<f32>((segments * k) as usize)
        .ctx("allocating the output")?;
    let problem = Problem::strided(
        LEN as usize,
        segment_size::Static::<LEN>::new(),
        k::Static::<K>::new(),
        direction::Max,
        num_segments::uniform(segments as i64).ctx("num_segments")?,
    );
    let call = |r: usize, out: &mut cudarc::driver::CudaSlice<f32>| {
        batched_topk::select_keys(&cuda, &problem, inputs[r].as_view(), out.as_view_mut(), env)
            .ctx("oxicub::batched_topk::select_keys")
    };
    // Checked once outside the timed runs (reading the status waits for the stream).
    call(0, &mut out)?.check().ctx("batched_topk status")?;
    let timing = gpu.time_runs(w.warmup, w.reps, rotations, |r| {
        // The status is not read in the timed runs: a caller checks when it synchronises.
        let _unchecked = call(r, &mut out)?;
        Ok(())
    })?;
    let keys = gpu.to_host(&out)?;
    let mut words: Vec<u32> = keys.iter().map(|x| x.to_bits()).collect();
    for row in words.chunks_mut(k as usize) {
        row.sort_unstable_by(|a, b| b.cmp(a));
    }
    Ok(Measured {
        timing,
        digest: Digest::of_words(&words),
        note,
    })
}
