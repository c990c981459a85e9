//! oxicub's segmented sort rows: `segmented_sort::sort_keys` ascending, default contract
//! (stable_sorted), f32 keys on the device; uniform rows as the strided layout, power-law
//! lengths as offsets.

use crate::device::Gpu;
use crate::err::{Context, Result};
use crate::gen::{self, Digest};
use crate::oxicub::{Measured, Runner};
use crate::workloads::{Kind, Workload};

use oxicub::segmented_sort::{self, Problem};
use oxicub::{num_segments, order, segment_size, Cuda, Env};

/// The runner of a segmented sort workload.
pub fn runner(w: &Workload) -> Option<Runner> {
    match w.kind {
        Kind::SegSort { .. } => Some(uniform_rows),
        Kind::SegSortPowerLaw { .. } => Some(power_law),
        _ => None,
    }
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
    let problem = Problem::strided(
        len as usize,
        segment_size::uniform(len as i64).ctx("len")?,
        order::Ascending,
        num_segments::uniform(segments as i64).ctx("segments")?,
    );
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
