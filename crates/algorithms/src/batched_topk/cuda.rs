//! Batched top-k on the GPU through the `batched_topk` kernel family, and on [`AnyBackend`]
//! with a GPU (copies to the device and back).

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, SyncOnDrop};
use oxicub_env::{OutputOrdering, TieBreak};
use oxicub_kernels::families::batched_topk::{
    batched_topk, BatchedLayout, BatchedStatus, BatchedTiers, BatchedTopKPlan, PerSegmentOr,
};
use oxicub_kernels::families::SelectedValues;
use oxicub_params::SelectDirection;

use super::listed::element_address;
use super::{num_segments_error, total_items_error};
use super::{Args, CountArg, DirectionArg, LayoutArg, NumSegmentsArg};
use super::{Outcome, Request, Violation};
use crate::backend::{AnyBackend, Cuda};
use crate::radix::RadixKey;
use crate::topk::ValuesIn;
use crate::Error;

/// The status of a call on the device, read when the caller checks the outcome.
#[derive(Debug)]
pub(super) struct DeviceStatus {
    status: BatchedStatus,
    stream: Arc<CudaStream>,
    request: Request,
}

impl DeviceStatus {
    /// Waits for the stream and turns the status words into the call's error, if any.
    pub(super) fn check(self) -> Result<(), Error> {
        let report = self.status.decode(&self.stream)?;
        if let Some(value) = report.bad_num_segments {
            return Err(num_segments_error(&self.request, value));
        }
        if let Some(total) = report.bad_total_items {
            let total = total.min(i64::MAX as u64) as i64;
            return Err(total_items_error(self.request.total_items, total).into());
        }
        match report.violation {
            None => Ok(()),
            Some((segment, code, value)) => match Violation::from_code(code) {
                Some(violation) => Err(violation.error(&self.request, segment, value)),
                None => Err(Error::InvalidArgument {
                    arg: "segments",
                    reason: format!("segment {segment}: unknown violation code {code}"),
                }),
            },
        }
    }
}

/// The tiers and launch plan of a checked call.
fn plan<'a, 'b>(request: &Request, args: &Args<'b, Cuda>) -> BatchedTopKPlan<'a, 'b>
where
    'b: 'a,
{
    let uniform_or = |arg: &CountArg<&'b CudaView<'b, i64>>| match *arg {
        CountArg::Host(v) => PerSegmentOr::Uniform(v),
        CountArg::PerSegment(view) => PerSegmentOr::PerSegment(view),
        CountArg::BoundsOnly => PerSegmentOr::Uniform(0),
    };
    let layout = match args.layout {
        LayoutArg::Strided(stride) => BatchedLayout::Strided {
            stride,
            sizes: uniform_or(&args.sizes),
        },
        LayoutArg::Offsets { begin, end } => BatchedLayout::Offsets { begin, end },
        LayoutArg::Listed => unreachable!("run_listed passes the uploaded addresses as offsets"),
    };
    let direction = match args.direction {
        DirectionArg::Host(SelectDirection::Max) => PerSegmentOr::Uniform(0),
        DirectionArg::Host(SelectDirection::Min) => PerSegmentOr::Uniform(1),
        DirectionArg::PerSegment(view) => PerSegmentOr::PerSegment(view),
    };
    let num_segments = match args.num_segments {
        NumSegmentsArg::Host(n) => PerSegmentOr::Uniform(n),
        NumSegmentsArg::Deferred(view) => PerSegmentOr::PerSegment(view),
    };
    let bounds = |b: oxicub_params::Bounds| (b.min.max(0) as u64, b.max.max(0) as u64);
    let ordering = request.requirements.ordering;
    BatchedTopKPlan {
        layout,
        k: uniform_or(&args.k),
        direction,
        direction_mask: request.directions,
        num_segments,
        num_segments_bounds: bounds(request.num_segments),
        size_bounds: bounds(request.sizes),
        k_bounds: bounds(request.k),
        total_bounds: (
            request.total_items.min.max(0) as u64,
            request.total_items.max.max(0) as u64,
        ),
        out_stride: request.out_stride,
        per_segment_max: request.per_segment_max,
        tiers: request.tiers(),
        warp_items: request.warp_items,
        prefer_larger_index: request.requirements.tie_break == TieBreak::PreferLargerIndex,
        sorted: ordering != OutputOrdering::Unsorted,
        stable: ordering == OutputOrdering::StableSorted,
    }
}

impl Request {
    /// The tiers this call runs: those its static bounds allow (decided at compile time), less
    /// those its runtime bounds exclude.
    pub(super) fn tiers(&self) -> BatchedTiers {
        let largest = (self.sizes.max.max(0) as u64).min(self.num_keys) as i64;
        let runtime = BatchedTiers::for_bounds((self.sizes.min, largest), (self.k.min, self.k.max));
        self.static_tiers.and(runtime)
    }
}

pub(super) fn run<K: RadixKey, V: Copy + Send + Sync + 'static>(
    cuda: &Cuda,
    request: &Request,
    args: Args<'_, Cuda>,
    keys: CudaView<'_, K>,
    values: ValuesIn<CudaView<'_, V>, V>,
    mut out_keys: CudaViewMut<'_, K>,
    out_values: Option<CudaViewMut<'_, V>>,
) -> Result<Outcome, Error> {
    let plan = plan(request, &args);
    let (runtime, stream) = (cuda.runtime(), cuda.stream());
    let status = match (values, out_values) {
        (ValuesIn::Copy(values), Some(mut out)) => {
            let values = SelectedValues::Copy {
                values: &values,
                out: &mut out,
            };
            batched_topk(runtime, stream, plan, Some(&keys), &mut out_keys, values)?
        }
        (ValuesIn::Index(_), Some(mut out)) => {
            let values = SelectedValues::Index { out: &mut out };
            batched_topk(runtime, stream, plan, Some(&keys), &mut out_keys, values)?
        }
        _ => {
            let values = SelectedValues::<V>::None;
            batched_topk(runtime, stream, plan, Some(&keys), &mut out_keys, values)?
        }
    };
    Ok(device_outcome(cuda, request, status))
}

fn device_outcome(cuda: &Cuda, request: &Request, status: BatchedStatus) -> Outcome {
    Outcome::device(DeviceStatus {
        status,
        stream: cuda.stream().clone(),
        request: *request,
    })
}

/// The device element addresses (address / size of `T`) of the views, as begin and end
/// offsets from a base of 0, uploaded; the guards keep the views marked in use until dropped.
fn element_ranges<'v, T>(
    cuda: &'v Cuda,
    arg: &'static str,
    views: &'v [CudaView<'_, T>],
    guards: &mut Vec<SyncOnDrop<'v>>,
) -> Result<(CudaSlice<i64>, CudaSlice<i64>), Error> {
    let (mut begin, mut end) = (Vec::with_capacity(views.len()), Vec::new());
    for (i, view) in views.iter().enumerate() {
        let (address, guard) = view.device_ptr(cuda.stream());
        guards.push(guard);
        let Some(first) = element_address::<T>(address) else {
            return Err(Error::InvalidArgument {
                arg,
                reason: format!("segment {i} is not aligned to its element type"),
            });
        };
        begin.push(first);
        end.push(first + view.len() as i64);
    }
    Ok((upload_ints(cuda, &begin)?, upload_ints(cuda, &end)?))
}

/// The listed layout on the device: the kernels read every segment at its own address (one
/// begin/end element address per segment, uploaded with the call).
pub(super) fn run_listed<K: RadixKey, V: Copy + Send + Sync + 'static>(
    cuda: &Cuda,
    request: &Request,
    args: Args<'_, Cuda>,
    segments: &[CudaView<'_, K>],
    values: ValuesIn<&[CudaView<'_, V>], V>,
    mut out_keys: CudaViewMut<'_, K>,
    out_values: Option<CudaViewMut<'_, V>>,
) -> Result<Outcome, Error> {
    let mut guards = Vec::new();
    let (begin, end) = element_ranges(cuda, "segments", segments, &mut guards)?;
    let (begin, end) = (begin.as_view(), end.as_view());
    let offsets = Args::<Cuda> {
        layout: LayoutArg::Offsets {
            begin: &begin,
            end: &end,
        },
        ..args
    };
    let mut plan = plan(request, &offsets);
    plan.layout = BatchedLayout::Listed {
        begin: &begin,
        end: &end,
        max_size: segments.iter().map(|s| s.len() as u64).max().unwrap_or(0),
    };
    let (runtime, stream) = (cuda.runtime(), cuda.stream());
    let status = match (values, out_values) {
        (ValuesIn::Copy(lists), Some(mut out)) => {
            let addresses: Vec<u64> = lists
                .iter()
                .map(|view| {
                    let (address, guard) = view.device_ptr(stream);
                    guards.push(guard);
                    address
                })
                .collect();
            let addresses = cuda.upload(&addresses)?;
            let values = SelectedValues::Listed {
                value_addresses: &addresses.as_view(),
                out: &mut out,
            };
            batched_topk::<K, V>(runtime, stream, plan, None, &mut out_keys, values)?
        }
        (ValuesIn::Index(_), Some(mut out)) => {
            let values = SelectedValues::Index { out: &mut out };
            batched_topk(runtime, stream, plan, None, &mut out_keys, values)?
        }
        _ => {
            let values = SelectedValues::<V>::None;
            batched_topk(runtime, stream, plan, None, &mut out_keys, values)?
        }
    };
    drop(guards);
    Ok(device_outcome(cuda, request, status))
}

/// Values of any 4- or 8-byte `Copy` type on the device, as 32-bit words.
struct Words<V> {
    words: CudaSlice<u32>,
    len: usize,
    value: PhantomData<V>,
}

impl<V: Copy> Words<V> {
    fn upload(cuda: &Cuda, values: &[V]) -> Result<Words<V>, Error> {
        let bytes = std::mem::size_of_val(values);
        let mut words = vec![0u32; bytes.div_ceil(4).max(1)];
        // SAFETY: `words` has at least `bytes` bytes; the regions do not overlap; `V` is
        // `Copy`, so copying its bytes is a valid bitwise copy.
        unsafe {
            std::ptr::copy_nonoverlapping(
                values.as_ptr().cast::<u8>(),
                words.as_mut_ptr().cast::<u8>(),
                bytes,
            );
        }
        Ok(Words {
            words: cuda.upload(&words)?,
            len: values.len(),
            value: PhantomData,
        })
    }

    fn view(&self) -> CudaView<'_, V> {
        // SAFETY: the words hold `len` values of `V` (bit copies of valid values), the
        // allocation has at least `len * size_of::<V>()` bytes and is 256-byte aligned.
        match unsafe { self.words.transmute::<V>(self.len) } {
            Some(view) => view,
            None => unreachable!("the allocation holds len values"),
        }
    }

    fn view_mut(&mut self) -> CudaViewMut<'_, V> {
        let len = self.len;
        // SAFETY: as in `view`; the kernels write bit copies of valid `V`s.
        match unsafe { self.words.transmute_mut::<V>(len) } {
            Some(view) => view,
            None => unreachable!("the allocation holds len values"),
        }
    }

    fn download_into(&self, cuda: &Cuda, out: &mut [V]) -> Result<(), Error> {
        let words = cuda.download(&self.words.as_view())?;
        let bytes = std::mem::size_of_val(out).min(words.len() * 4);
        // SAFETY: `bytes` is at most the size of both buffers; the words were uploaded from
        // `out` (same length) and hold bit copies of valid `V`s written by the kernels.
        unsafe {
            std::ptr::copy_nonoverlapping(
                words.as_ptr().cast::<u8>(),
                out.as_mut_ptr().cast::<u8>(),
                bytes,
            );
        }
        Ok(())
    }
}

fn upload_ints(cuda: &Cuda, values: &[i64]) -> Result<CudaSlice<i64>, Error> {
    if values.is_empty() {
        return cuda.alloc_zeros::<i64>(1);
    }
    cuda.upload(values)
}

/// [`AnyBackend`] on a GPU: copies every input (and the current outputs, whose slots past the
/// results must stay as they are) to the device, runs there, copies the outputs back and
/// checks the status (the host had the data, so it waits anyway).
pub(super) fn run_any<K: RadixKey, V: Copy + Send + Sync + 'static>(
    cuda: &Cuda,
    request: &Request,
    args: &Args<'_, AnyBackend>,
    keys: &[K],
    values: ValuesIn<&[V], V>,
    out_keys: &mut [K],
    out_values: Option<&mut [V]>,
) -> Result<Outcome, Error> {
    if keys.is_empty() || out_keys.is_empty() {
        // Nothing can be selected (the device allocates no empty buffers): the host runs the
        // per-segment checks, with the same result.
        let args = Args::<crate::backend::Host> {
            layout: args.layout,
            sizes: args.sizes,
            k: args.k,
            direction: args.direction,
            num_segments: args.num_segments,
        };
        return Ok(super::host::run(
            request, &args, keys, values, out_keys, out_values,
        ));
    }
    let device_keys = cuda.upload_keys(keys)?;
    let mut device_out_keys = cuda.upload_keys(out_keys)?;
    let device_values = match &values {
        ValuesIn::Copy(values) => Some(Words::upload(cuda, values)?),
        _ => None,
    };
    let mut device_out_values = match &out_values {
        Some(out) => Some(Words::upload(cuda, out)?),
        None => None,
    };
    let ints = |arg: &CountArg<&[i64]>| match arg {
        CountArg::PerSegment(v) => upload_ints(cuda, v).map(Some),
        _ => Ok(None),
    };
    let sizes = ints(&args.sizes)?;
    let ks = ints(&args.k)?;
    let (begin, end) = match args.layout {
        LayoutArg::Offsets { begin, end } => (
            Some(upload_ints(cuda, begin)?),
            Some(upload_ints(cuda, end)?),
        ),
        LayoutArg::Strided(_) | LayoutArg::Listed => (None, None),
    };
    let directions = match args.direction {
        DirectionArg::PerSegment([]) => Some(cuda.alloc_zeros::<u8>(1)?),
        DirectionArg::PerSegment(d) => Some(cuda.upload(d)?),
        DirectionArg::Host(_) => None,
    };
    let count = match args.num_segments {
        NumSegmentsArg::Deferred(&n) => Some(cuda.upload(&[n])?),
        NumSegmentsArg::Host(_) => None,
    };
    let (sizes_v, ks_v) = (
        sizes.as_ref().map(|s| s.as_view()),
        ks.as_ref().map(|s| s.as_view()),
    );
    let (begin_v, end_v) = (
        begin.as_ref().map(|s| s.as_view()),
        end.as_ref().map(|s| s.as_view()),
    );
    let directions_v = directions.as_ref().map(|s| s.as_view());
    let count_v = count.as_ref().map(|s| s.as_view());
    let device_args = Args::<Cuda> {
        layout: match (args.layout, &begin_v, &end_v) {
            (LayoutArg::Offsets { .. }, Some(b), Some(e)) => {
                LayoutArg::Offsets { begin: b, end: e }
            }
            (layout, _, _) => match layout {
                LayoutArg::Strided(stride) => LayoutArg::Strided(stride),
                LayoutArg::Offsets { .. } => unreachable!("offsets uploaded above"),
                LayoutArg::Listed => unreachable!("listed segments are joined before the upload"),
            },
        },
        sizes: match (args.sizes, &sizes_v) {
            (CountArg::PerSegment(_), Some(v)) => CountArg::PerSegment(v),
            (CountArg::Host(n), _) => CountArg::Host(n),
            _ => CountArg::BoundsOnly,
        },
        k: match (args.k, &ks_v) {
            (CountArg::PerSegment(_), Some(v)) => CountArg::PerSegment(v),
            (CountArg::Host(n), _) => CountArg::Host(n),
            _ => CountArg::BoundsOnly,
        },
        direction: match (args.direction, &directions_v) {
            (DirectionArg::PerSegment(_), Some(v)) => DirectionArg::PerSegment(v),
            (DirectionArg::Host(d), _) => DirectionArg::Host(d),
            (DirectionArg::PerSegment(_), None) => unreachable!("directions uploaded above"),
        },
        num_segments: match (args.num_segments, &count_v) {
            (NumSegmentsArg::Deferred(_), Some(v)) => NumSegmentsArg::Deferred(v),
            (NumSegmentsArg::Host(n), _) => NumSegmentsArg::Host(n),
            (NumSegmentsArg::Deferred(_), None) => unreachable!("count uploaded above"),
        },
    };
    let device_in = match (&values, &device_values) {
        (ValuesIn::Copy(_), Some(v)) => ValuesIn::Copy(v.view()),
        (ValuesIn::Index(index), _) => ValuesIn::Index(*index),
        _ => ValuesIn::None,
    };
    let outcome = run(
        cuda,
        request,
        device_args,
        device_keys.as_view(),
        device_in,
        device_out_keys.as_view_mut(),
        device_out_values.as_mut().map(Words::view_mut),
    )?;
    let result = outcome.check();
    let top = cuda.download_keys(&device_out_keys)?;
    out_keys.copy_from_slice(&top);
    if let (Some(out), Some(device)) = (out_values, &device_out_values) {
        device.download_into(cuda, out)?;
    }
    Ok(Outcome::ready(result.err()))
}
