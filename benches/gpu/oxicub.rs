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
use crate::err::Result;
use crate::gen::Digest;
use crate::workloads::{Kind, Workload};

/// What an oxicub runner returns.
pub struct Measured {
    pub timing: Timing,
    /// Digest of the canonical output (gen.rs).
    pub digest: Digest,
    /// Which variant ran (shown under the table).
    pub note: String,
}

pub type Runner = fn(&Gpu, &Workload, usize) -> Result<Measured>;

/// The oxicub implementation of a workload, or None while oxicub has none ("not implemented").
pub fn runner(w: &Workload) -> Option<Runner> {
    match w.kind {
        // No algorithm is wired in yet: the kernel runtime is being written. One arm per kind as
        // they land, e.g. `Kind::TopK { .. } => Some(topk),`.
        Kind::TopK { .. }
        | Kind::Batched { .. }
        | Kind::SegSort { .. }
        | Kind::SegSortPowerLaw { .. }
        | Kind::Set { .. } => None,
    }
}
