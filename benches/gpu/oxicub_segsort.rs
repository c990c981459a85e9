//! oxicub's segmented sort rows: `segmented_sort::sort_keys` ascending, default contract
//! (stable_sorted), f32 keys on the device; uniform rows as the strided layout, power-law
//! lengths as offsets. The rows with values: `segmented_sort::sort_pairs` (u32 values, value i =
//! i, the key's global position) and `segmented_sort::sort_indices` (int64 index within the
//! row), strided rows, default contract; digested as the keys then the values (gen.rs:
//! `Digest`).

use crate::device::Gpu;
use crate::err::{Context, Result};
use crate::gen::{self, Digest};
use crate::oxicub::{Measured, Runner};
use crate::workloads::{Carry, Kind, Workload};

use oxicub::segmented_sort::{self, Problem};
use oxicub::{num_segments, order, segment_size, Cuda, Env};

/// The runner of a segmented sort workload.
pub fn runner(w: &Workload) -> Option<Runner> {
    match w.kind {
        Kind::SegSort { .. } => Some(uniform_rows),
        Kind::SegSortPowerLaw { .. } => Some(power_law),
        Kind::SegSortCarry {
            carry: Carry::Values,
            ..
        } => Some(pairs_rows),
        Kind::SegSortCarry {
            carry: Carry::Indices,
            ..
        } => Some(argsort_rows),
        _ => None,
    }
}

/// `segments` rows of `len` keys each, ascending: the strided problem of every uniform row.
fn ascending_rows(segments: u64, len: u64) -> Result<impl segmented_sort::ProblemOn<Cuda>> {
    Ok(Problem::strided(
        len as usize,
        segment_size::uniform(len as i64).ctx("len")?,
        order::Ascending,
        num_segments::uniform(segments as i64).ctx("segments")?,
    ))
}

/// Times `sort` over `rotations` copies of `n` generated keys into one output, and digests it.
fn timed(
    gpu: &Gpu,
    w: &Workload,
    rotations: usize,
    n: u64,
    note: &str,
    sort: impl Fn(
        &Cuda,
        &cudarc::driver::CudaSlice<f32>,
        &mut cudarc::driver::CudaSlice<f32>,
    ) -> Result<()>,
) -> Result<Measured> {
    let cuda = Cuda::from_stream(gpu.stream.clone()).ctx("oxicub::Cuda on the bench stream")?;
    let inputs = (0..rotations)
        .map(|_| gpu.gen_f32(n, w.seed))
        .collect::<Result<Vec<_>>>()?;
    let mut out = cuda
        .alloc_zeros::<f32>(n.max(1) as usize)
        .ctx("allocating the output")?;
    let timing = gpu.time_runs(w.warmup, w.reps, rotations, |r| {
        sort(&cuda, &inputs[r], &mut out)
    })?;
    let keys = gpu.to_host(&out)?;
    Ok(Measured {
        timing,
        digest: Digest::of_f32(&keys[..n as usize]),
        note: note.into(),
    })
}

fn uniform_rows(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
    let Kind::SegSort { segments, len } = w.kind else {
        unreachable!("a segmented sort runner got {:?}", w.kind)
    };
    let problem = ascending_rows(segments, len)?;
    let note = "segmented_sort::sort_keys, strided rows, default contract (stable_sorted)";
    timed(
        gpu,
        w,
        rotations,
        segments * len,
        note,
        |cuda, input, out| {
            segmented_sort::sort_keys(
                cuda,
                &problem,
                input.as_view(),
                out.as_view_mut(),
                &Env::new(),
            )
            .and_then(oxicub::Pending::check)
            .map(drop)
            .ctx("oxicub::segmented_sort::sort_keys")
        },
    )
}

fn power_law(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
    let Kind::SegSortPowerLaw { segments, max_exp } = w.kind else {
        unreachable!("a segmented sort runner got {:?}", w.kind)
    };
    let off = gen::powerlaw_offsets(w.seed, segments, max_exp);
    let n = *off.last().unwrap_or(&0);
    let begin: Vec<i64> = off[..off.len() - 1].iter().map(|&o| o as i64).collect();
    let end: Vec<i64> = off[1..].iter().map(|&o| o as i64).collect();
    let cuda = Cuda::from_stream(gpu.stream.clone()).ctx("oxicub::Cuda on the bench stream")?;
    let (device_begin, device_end) = (
        cuda.upload(&begin).ctx("offsets")?,
        cuda.upload(&end).ctx("offsets")?,
    );
    let problem = Problem::offsets(
        device_begin.as_view(),
        device_end.as_view(),
        segment_size::PerSegment::<()>::new(()),
        order::Ascending,
        num_segments::uniform(segments as i64).ctx("segments")?,
    );
    let note = "segmented_sort::sort_keys, offsets on the device, default contract (stable_sorted)";
    timed(gpu, w, rotations, n, note, |cuda, input, out| {
        segmented_sort::sort_keys(
            cuda,
            &problem,
            input.as_view(),
            out.as_view_mut(),
            &Env::new(),
        )
        .and_then(oxicub::Pending::check)
        .map(drop)
        .ctx("oxicub::segmented_sort::sort_keys")
    })
}

/// Sort pairs of uniform rows: f32 keys with u32 values, value i = i (the global position, so the
/// values out are the permutation the sort applied).
fn pairs_rows(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
    let Kind::SegSortCarry {
        segments,
        len,
        carry: Carry::Values,
    } = w.kind
    else {
        unreachable!("a segmented sort pairs runner got {:?}", w.kind)
    };
    let n = segments * len;
    let problem = ascending_rows(segments, len)?;
    let cuda = Cuda::from_stream(gpu.stream.clone()).ctx("oxicub::Cuda on the bench stream")?;
    let keys = (0..rotations)
        .map(|_| gpu.gen_f32(n, w.seed))
        .collect::<Result<Vec<_>>>()?;
    let positions: Vec<u32> = (0..n).map(|i| i as u32).collect();
    let values = (0..rotations)
        .map(|_| cuda.upload(&positions).ctx("uploading the values"))
        .collect::<Result<Vec<_>>>()?;
    drop(positions);
    let mut out_keys = cuda
        .alloc_zeros::<f32>(n as usize)
        .ctx("allocating the output keys")?;
    let mut out_values = cuda
        .alloc_zeros::<u32>(n as usize)
        .ctx("allocating the output values")?;
    let timing = gpu.time_runs(w.warmup, w.reps, rotations, |r| {
        segmented_sort::sort_pairs(
            &cuda,
            &problem,
            keys[r].as_view(),
            values[r].as_view(),
            out_keys.as_view_mut(),
            out_values.as_view_mut(),
            &Env::new(),
        )
        .and_then(oxicub::Pending::check)
        .map(drop)
        .ctx("oxicub::segmented_sort::sort_pairs")
    })?;
    let (k, v) = (gpu.to_host(&out_keys)?, gpu.to_host(&out_values)?);
    Ok(Measured {
        timing,
        digest: Digest::of_f32(&k).add(Digest::of_words_at(n, &v)),
        note: "segmented_sort::sort_pairs, u32 values, strided rows, default contract \
               (stable_sorted)"
            .into(),
    })
}

/// Argsort of uniform rows: f32 keys, each sorted key's int64 index within its row.
fn argsort_rows(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
    let Kind::SegSortCarry {
        segments,
        len,
        carry: Carry::Indices,
    } = w.kind
    else {
        unreachable!("a segmented argsort runner got {:?}", w.kind)
    };
    let n = segments * len;
    let problem = ascending_rows(segments, len)?;
    let cuda = Cuda::from_stream(gpu.stream.clone()).ctx("oxicub::Cuda on the bench stream")?;
    let keys = (0..rotations)
        .map(|_| gpu.gen_f32(n, w.seed))
        .collect::<Result<Vec<_>>>()?;
    let mut out_keys = cuda
        .alloc_zeros::<f32>(n as usize)
        .ctx("allocating the output keys")?;
    let mut out_indices = cuda
        .alloc_zeros::<i64>(n as usize)
        .ctx("allocating the output indices")?;
    let timing = gpu.time_runs(w.warmup, w.reps, rotations, |r| {
        segmented_sort::sort_indices(
            &cuda,
            &problem,
            keys[r].as_view(),
            out_keys.as_view_mut(),
            out_indices.as_view_mut(),
            &Env::new(),
        )
        .and_then(oxicub::Pending::check)
        .map(drop)
        .ctx("oxicub::segmented_sort::sort_indices")
    })?;
    let (k, idx) = (gpu.to_host(&out_keys)?, gpu.to_host(&out_indices)?);
    Ok(Measured {
        timing,
        digest: Digest::of_f32(&k).add(Digest::of_i64_at(n, &idx)),
        note: "segmented_sort::sort_indices, i64 indices within the row, strided rows, default \
               contract (stable_sorted)"
            .into(),
    })
}
