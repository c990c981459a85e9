//! oxicub's side of the table: one runner per workload kind that oxicub implements.
//!
//! Adding an oxicub row is one function here plus one line in `runner`. A runner gets the GPU
//! (its context and stream, the generator, the timer) and the workload; it generates its input
//! on the device with `gpu.gen_f32` / `gpu.gen_u32` (`rotations` identical copies), times its
//! calls with `gpu.time_runs(w.warmup, w.reps, rotations, |r| ..)`, copies the result back and
//! returns the canonical digest (workloads.rs says what is canonical per kind). For example:
//!
//! ```ignore
//! fn topk(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
//!     let Kind::TopK { n, k } = w.kind else { unreachable!() };
//!     let inputs = (0..rotations).map(|_| gpu.gen_f32(n, w.seed)).collect::<Result<Vec<_>>>()?;
//!     let mut out = /* oxicub output buffer of k keys */;
//!     let timing = gpu.time_runs(w.warmup, w.reps, rotations, |r| {
//!         /* oxicub::DeviceTopK on &inputs[r] into &mut out, on gpu.stream */
//!     })?;
//!     let keys = gpu.to_host(&out)?; // sorted descending by the default contract
//!     Ok(Measured { timing, digest: Digest::of_f32(&keys), note: "...".into() })
//! }
//! ```
//! and in `runner`: `Kind::TopK { .. } => Some(topk),`.

use crate::device::{Gpu, Timing};
use crate::err::{Context, Result};
use crate::gen::Digest;
use crate::workloads::{Kind, Workload};

#[path = "oxicub_batched.rs"]
mod batched;
#[path = "oxicub_locality.rs"]
mod locality;
#[path = "oxicub_routing.rs"]
pub mod routing;
#[path = "oxicub_segsort.rs"]
mod segsort;
#[path = "oxicub_sets.rs"]
mod sets;

use oxicub::{determinism, output_ordering, require, topk, Cuda, Environment};

/// What an oxicub runner returns.
pub struct Measured {
    pub timing: Timing,
    /// Digest of the canonical output (gen.rs).
    pub digest: Digest,
    /// Which variant ran (shown under the table).
    pub note: String,
}

pub type Runner = fn(&Gpu, &Workload, usize) -> Result<Measured>;

/// The opt-out variant of a workload (no determinism, unsorted output, sorted inputs promised:
/// the fastest contract), shown in its own column next to the default contract; None where
/// oxicub has none.
pub fn opt_out_runner(w: &Workload) -> Option<Runner> {
    match w.kind {
        Kind::TopK { .. } => Some(topk_opt_out),
        Kind::Batched { .. } => batched::opt_out_runner(w),
        Kind::Set { .. } | Kind::BatchedSet { .. } => sets::opt_out_runner(w),
        _ => None,
    }
}

/// `oxicub::topk::max_keys` with `env`, f32 keys on the device, k from the host; the result is
/// digested sorted descending (canonical), so an unsorted contract is compared as a multiset.
fn topk_with<E: Environment>(
    gpu: &Gpu,
    w: &Workload,
    rotations: usize,
    env: &E,
    note: &str,
) -> Result<Measured> {
    let Kind::TopK { n, k } = w.kind else {
        unreachable!("a top-k runner got {:?}", w.kind)
    };
    let cuda = Cuda::from_stream(gpu.stream.clone()).ctx("oxicub::Cuda on the bench stream")?;
    let inputs = (0..rotations)
        .map(|_| gpu.gen_f32(n, w.seed))
        .collect::<Result<Vec<_>>>()?;
    let mut out = cuda
        .alloc_zeros::<f32>(k as usize)
        .ctx("allocating the output")?;
    let kp = oxicub::k::uniform(k as i64).ctx("k")?;
    let timing = gpu.time_runs(w.warmup, w.reps, rotations, |r| {
        topk::max_keys(&cuda, inputs[r].as_view(), out.as_view_mut(), &kp, env)
            .and_then(oxicub::Outcome::check)
            .ctx("oxicub::topk::max_keys")
    })?;
    let mut keys = gpu.to_host(&out)?;
    keys.sort_unstable_by(|a, b| b.total_cmp(a));
    Ok(Measured {
        timing,
        digest: Digest::of_f32(&keys),
        note: note.into(),
    })
}

fn topk(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
    topk_with(
        gpu,
        w,
        rotations,
        &oxicub::Env::new(),
        "topk::max_keys, default contract (gpu_to_gpu, prefer_smaller_index, stable_sorted)",
    )
}

fn topk_opt_out(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
    topk_with(
        gpu,
        w,
        rotations,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        "opt-out: not_guaranteed + unsorted",
    )
}

/// The oxicub implementation of a workload, or None while oxicub has none ("not implemented").
pub fn runner(w: &Workload) -> Option<Runner> {
    match w.kind {
        Kind::TopK { .. } => Some(topk),
        // One arm per kind as they land.
        Kind::Batched { .. } => batched::runner(w),
        Kind::SegSort { .. } | Kind::SegSortPowerLaw { .. } | Kind::SegSortCarry { .. } => {
            segsort::runner(w)
        }
        Kind::Locality { .. } => locality::runner(w),
        Kind::Set { .. } | Kind::BatchedSet { .. } => sets::runner(w),
        Kind::Route { .. } => routing::runner(w),
    }
}
