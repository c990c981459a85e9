//! oxicub's set operation and merge rows: `sets::keys` of two sorted u32 inputs (the stream's keys under
//! the row's mask, sorted on the device by `locality_sort` before timing), default contract,
//! every call checked (the count read back: what a caller of a set operation waits for, as
//! thrust's callers do). The batched rows: `sets::batched_keys` over int64 offsets on the
//! device, each segment sorted by `segmented_sort` before timing, digested as the keys then the
//! output offsets (workloads.rs: `cpu_reference`).

use crate::device::Gpu;
use crate::err::{Context, Result};
use crate::gen::Digest;
use crate::oxicub::{Measured, Runner};
use crate::workloads::{self, Kind, SetOp, Workload};

use oxicub::contract::{SortOrdering, SortTieBreak};
use oxicub::segmented_sort::{self, Problem};
use oxicub::segments::Offsets;
use oxicub::sets::{self, op};
use oxicub::{
    guarantee, locality_sort, num_segments, order, segment_size, Cuda, Env, Environment, Pending,
};

use cudarc::driver::CudaSlice;

/// The runner of a set operation workload.
pub fn runner(w: &Workload) -> Option<Runner> {
    match w.kind {
        Kind::Set { .. } => Some(set_operation),
        Kind::BatchedSet { .. } => Some(batched_set_operation),
        _ => None,
    }
}

/// The opt-out runner of a set operation workload: sorted inputs promised, no order check.
pub fn opt_out_runner(w: &Workload) -> Option<Runner> {
    match w.kind {
        Kind::Set { .. } => Some(set_operation_sorted_inputs),
        Kind::BatchedSet { .. } => Some(batched_set_operation_sorted_inputs),
        _ => None,
    }
}

/// `n` keys of stream `seed` under `mask`, sorted ascending on the device.
fn sorted_input(gpu: &Gpu, cuda: &Cuda, n: u64, seed: u64, mask: u32) -> Result<CudaSlice<u32>> {
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
    let run = |out: &mut CudaSlice<u32>| -> Result<usize> {
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

/// One input of a batched set operation: its int64 offsets (pairs + 1, segment i is
/// [offsets[i], offsets[i + 1])) and `rotations` copies of its keys.
struct BatchSide {
    offsets: CudaSlice<i64>,
    keys: Vec<CudaSlice<u32>>,
}

/// The keys of stream `seed` under `mask` over the segments `off`, each segment sorted ascending
/// on the device by `segmented_sort::sort_keys`, `rotations` times.
fn batch_side(
    gpu: &Gpu,
    cuda: &Cuda,
    off: &[u64],
    seed: u64,
    mask: u32,
    rotations: usize,
) -> Result<BatchSide> {
    let pairs = off.len() - 1;
    let n = off[pairs];
    let host: Vec<i64> = off.iter().map(|&o| o as i64).collect();
    let offsets = cuda.upload(&host).ctx("uploading the offsets")?;
    let problem = Problem::offsets(
        offsets.slice(..pairs),
        offsets.slice(1..),
        segment_size::PerSegment::<()>::new(()),
        order::Ascending,
        num_segments::uniform(pairs as i64).ctx("pairs")?,
    );
    let keys = (0..rotations)
        .map(|_| {
            let keys = gpu.gen_u32(n, seed, mask)?;
            let mut sorted = cuda
                .alloc_zeros::<u32>(n as usize)
                .ctx("allocating a sorted input")?;
            segmented_sort::sort_keys(
                cuda,
                &problem,
                keys.as_view(),
                sorted.as_view_mut(),
                &Env::new(),
            )
            .and_then(Pending::check)
            .ctx("sorting the segments with oxicub::segmented_sort")?;
            Ok(sorted)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(BatchSide { offsets, keys })
}

fn batched_set_operation(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
    batched_run_with(
        gpu,
        w,
        rotations,
        &Env::new(),
        "sets::batched_keys, u32 ascending, int64 offsets on the device, default contract \
         (segments checked for order), the count read back each call",
    )
}

fn batched_set_operation_sorted_inputs(
    gpu: &Gpu,
    w: &Workload,
    rotations: usize,
) -> Result<Measured> {
    let env = Env::new().guarantee(guarantee::SortedInputs::new());
    batched_run_with(
        gpu,
        w,
        rotations,
        &env,
        "opt-out: guarantee::SortedInputs (no order check), the count read back each call",
    )
}

fn batched_run_with<E>(
    gpu: &Gpu,
    w: &Workload,
    rotations: usize,
    env: &E,
    note: &str,
) -> Result<Measured>
where
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let Kind::BatchedSet {
        op: which,
        pairs,
        max_exp,
        mask,
    } = w.kind
    else {
        unreachable!("a batched set operation runner got {:?}", w.kind)
    };
    let cuda = Cuda::from_stream(gpu.stream.clone()).ctx("oxicub::Cuda on the bench stream")?;
    let [a_off, b_off] = workloads::batched_set_offsets(w.seed, pairs, max_exp);
    let a = batch_side(gpu, &cuda, &a_off, w.seed + 2, mask, rotations)?;
    let b = batch_side(gpu, &cuda, &b_off, w.seed + 3, mask, rotations)?;
    let p = pairs as usize;
    let batch = sets::Batch::new(
        Offsets::new(a.offsets.slice(..p), a.offsets.slice(1..)),
        segment_size::PerSegment::<()>::new(()),
        Offsets::new(b.offsets.slice(..p), b.offsets.slice(1..)),
        segment_size::PerSegment::<()>::new(()),
        num_segments::uniform(pairs as i64).ctx("pairs")?,
    );
    // a + b keys: every operation's bound (intersection needs only the smaller)
    let mut out = cuda
        .alloc_zeros::<u32>((a_off[p] + b_off[p]) as usize)
        .ctx("allocating the output")?;
    let mut out_offsets = cuda
        .alloc_zeros::<i64>(p + 1)
        .ctx("allocating the output offsets")?;
    let run = |r: usize, out: &mut CudaSlice<u32>, at: &mut CudaSlice<i64>| -> Result<usize> {
        let (a, b) = (a.keys[r].as_view(), b.keys[r].as_view());
        let (out, at) = (out.as_view_mut(), at.as_view_mut());
        let asc = order::Ascending;
        match which {
            SetOp::Intersection => {
                sets::batched_keys(&cuda, op::Intersection, asc, &batch, a, b, out, at, env)
            }
            SetOp::Union => sets::batched_keys(&cuda, op::Union, asc, &batch, a, b, out, at, env),
            SetOp::Difference => {
                sets::batched_keys(&cuda, op::Difference, asc, &batch, a, b, out, at, env)
            }
            SetOp::SymmetricDifference => sets::batched_keys(
                &cuda,
                op::SymmetricDifference,
                asc,
                &batch,
                a,
                b,
                out,
                at,
                env,
            ),
            SetOp::Merge => sets::batched_keys(&cuda, op::Merge, asc, &batch, a, b, out, at, env),
        }
        .and_then(Pending::check)
        .ctx("oxicub::sets::batched_keys")
    };
    let timing = gpu.time_runs(w.warmup, w.reps, rotations, |r| {
        run(r, &mut out, &mut out_offsets).map(drop)
    })?;
    let count = run(0, &mut out, &mut out_offsets)?;
    let keys: Vec<u32> = gpu.to_host(&out)?[..count].to_vec();
    let offsets = gpu.to_host(&out_offsets)?;
    Ok(Measured {
        timing,
        digest: Digest::of_words(&keys).add(Digest::of_i64_at(count as u64, &offsets)),
        note: note.into(),
    })
}
