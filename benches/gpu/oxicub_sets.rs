//! oxicub's set operation and merge rows: `sets::keys` of two sorted u32 inputs (the stream's keys under
//! the row's mask, sorted on the device by `locality_sort` before timing), default contract,
//! every call checked (the count read back: what a caller of a set operation waits for, as
//! thrust's callers do).

use crate::device::Gpu;
use crate::err::{Context, Result};
use crate::gen::Digest;
use crate::oxicub::{Measured, Runner};
use crate::workloads::{Kind, SetOp, Workload};

use oxicub::contract::{SortOrdering, SortTieBreak};
use oxicub::sets::{self, op};
use oxicub::{guarantee, locality_sort, order, Cuda, Env, Environment, Pending};

/// The runner of a set operation workload.
pub fn runner(w: &Workload) -> Option<Runner> {
    match w.kind {
        Kind::Set { .. } => Some(set_operation),
        _ => None,
    }
}

/// The opt-out runner of a set operation workload: sorted inputs promised, no order check.
pub fn opt_out_runner(w: &Workload) -> Option<Runner> {
    match w.kind {
        Kind::Set { .. } => Some(set_operation_sorted_inputs),
        _ => None,
    }
}

/// `n` keys of stream `seed` under `mask`, sorted ascending on the device.
fn sorted_input(
    gpu: &Gpu,
    cuda: &Cuda,
    n: u64,
    seed: u64,
    mask: u32,
) -> Result<cudarc::driver::CudaSlice<u32>> {
    let keys = gpu.gen_u32(n, seed, mask)?;
    let mut sorted = cuda
        .alloc_zeros::<u32>(n.max(1) as usize)
        .ctx("allocating a sorted input")?;
    locality_sort::sort_keys(
        cuda,
        &order::Ascending,
        keys.as_view(),
        sorted.as_view_mut(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .ctx("sorting an input with oxicub::locality_sort")?;
    Ok(sorted)
}

fn set_operation(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
    run_with(
        gpu,
        w,
        rotations,
        &Env::new(),
        "sets::keys, u32 ascending, default contract (inputs checked for order), the count \
         read back each call",
    )
}

fn set_operation_sorted_inputs(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
    let env = Env::new().guarantee(guarantee::SortedInputs::new());
    run_with(
        gpu,
        w,
        rotations,
        &env,
        "opt-out: guarantee::SortedInputs (no order check), the count read back each call",
    )
}

fn run_with<E>(gpu: &Gpu, w: &Workload, rotations: usize, env: &E, note: &str) -> Result<Measured>
where
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let Kind::Set { op: which, n, mask } = w.kind else {
        unreachable!("a set operation runner got {:?}", w.kind)
    };
    let cuda = Cuda::from_stream(gpu.stream.clone()).ctx("oxicub::Cuda on the bench stream")?;
    let a = sorted_input(gpu, &cuda, n, w.seed, mask)?;
    let b = sorted_input(gpu, &cuda, n, w.seed + 1, mask)?;
    let mut out = cuda
        .alloc_zeros::<u32>((2 * n).max(1) as usize)
        .ctx("allocating the output")?;
    let run = |out: &mut cudarc::driver::CudaSlice<u32>| -> Result<usize> {
        let (a, b, out) = (a.as_view(), b.as_view(), out.as_view_mut());
        let asc = order::Ascending;
        match which {
            SetOp::Intersection => sets::keys(&cuda, op::Intersection, asc, a, b, out, env),
            SetOp::Union => sets::keys(&cuda, op::Union, asc, a, b, out, env),
            SetOp::Difference => sets::keys(&cuda, op::Difference, asc, a, b, out, env),
            SetOp::SymmetricDifference => {
                sets::keys(&cuda, op::SymmetricDifference, asc, a, b, out, env)
            }
            SetOp::Merge => sets::keys(&cuda, op::Merge, asc, a, b, out, env),
        }
        .and_then(Pending::check)
        .ctx("oxicub::sets::keys")
    };
    let timing = gpu.time_runs(w.warmup, w.reps, rotations, |_| run(&mut out).map(drop))?;
    let count = run(&mut out)?;
    let words: Vec<u32> = gpu.to_host(&out)?[..count].to_vec();
    Ok(Measured {
        timing,
        digest: Digest::of_words(&words),
        note: note.into(),
    })
}
