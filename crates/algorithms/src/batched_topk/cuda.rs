//! Batched top-k on the GPU through the `batched_topk` kernel family, and on
//! [`AnyBackend`](crate::AnyBackend) with a GPU (copies to the device and back).

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut};
use oxicub_env::{OutputOrdering, TieBreak};
use oxicub_kernels::families::batched_topk::{batched_topk, BatchedLayout, BatchedTopKPlan};
use oxicub_kernels::families::{HostOrDevice, SelectedValues};
use oxicub_kernels::segments::{
    SegmentedStatus, VIOLATION_K_ABOVE_SIZE, VIOLATION_OPTION_NOT_COMPILED,
    VIOLATION_PARAM_OUT_OF_BOUNDS,
};
use oxicub_params::SelectDirection;

use super::host::direction_not_compiled;
use crate::backend::{ChoiceValues, Cuda, DeviceValue};
use crate::contract::{BatchedTopKArgs, BatchedTopKRequest};
use crate::radix::RadixKey;
use crate::segments::cuda::{
    host_or_device, launch_bounds, on_device_copies, single_host_or_device, with_selected,
    ChoiceCopy, ParamCopy, SegmentArgsCopy,
};
use crate::segments::{segmented_error, DeviceReport, LayoutArg, Outcome, Violation};
use crate::values::ValuesIn;
use crate::Error;

/// The device's per-segment arguments.
type DeviceArgs<'r> =
    BatchedTopKArgs<&'r CudaView<'r, i64>, &'r CudaView<'r, i32>, &'r CudaView<'r, u8>>;

/// The status of a call on the device, read when the caller checks the outcome.
#[derive(Debug)]
struct DeviceStatus {
    status: SegmentedStatus,
    stream: Arc<CudaStream>,
    request: BatchedTopKRequest,
}

impl DeviceReport for DeviceStatus {
    fn wait(&self) -> Result<(), Error> {
        let report = self.status.decode(&self.stream)?;
        let request = &self.request;
        segmented_error(report, &request.segments, |code| match code {
            VIOLATION_PARAM_OUT_OF_BOUNDS => Some(Violation::OutOfBounds {
                arg: "k",
                bounds: request.k,
            }),
            VIOLATION_OPTION_NOT_COMPILED => Some(direction_not_compiled(request)),
            VIOLATION_K_ABOVE_SIZE => Some(Violation::KAboveSize),
            _ => None,
        })
    }
}

/// The launch plan of a checked call (a listed call then sets its layout).
fn plan<'a, 'b, K>(
    request: &BatchedTopKRequest,
    args: &DeviceArgs<'b>,
) -> BatchedTopKPlan<'a, 'b, K>
where
    'b: 'a,
{
    let layout = match args.segments.layout {
        LayoutArg::Strided(stride) => BatchedLayout::Strided {
            stride,
            sizes: host_or_device(args.segments.sizes),
        },
        LayoutArg::Offsets { begin, end } => BatchedLayout::Offsets { begin, end },
        // run_listed replaces it with the segments' views.
        LayoutArg::Listed => BatchedLayout::Listed { segments: &[] },
    };
    let direction = match args.direction {
        ChoiceValues::Host(SelectDirection::Max) => HostOrDevice::Host(0),
        ChoiceValues::Host(SelectDirection::Min) => HostOrDevice::Host(1),
        ChoiceValues::PerSegment(view) => HostOrDevice::Device(view),
    };
    let segments = &request.segments;
    let ordering = request.requirements.ordering;
    BatchedTopKPlan {
        layout,
        k: host_or_device(args.k),
        direction,
        direction_mask: request.directions,
        num_segments: single_host_or_device(args.segments.num_segments),
        num_segments_bounds: launch_bounds(segments.num_segments.merged),
        size_bounds: launch_bounds(segments.sizes),
        k_bounds: launch_bounds(request.k),
        total_bounds: launch_bounds(segments.total_items),
        out_stride: request.out_stride,
        per_segment_max: request.per_segment_max,
        tiers: request.tiers(),
        warp_items: request.warp_items,
        prefer_larger_index: request.requirements.tie_break == TieBreak::PreferLargerIndex,
        sorted: ordering != OutputOrdering::Unsorted,
        stable: ordering == OutputOrdering::StableSorted,
        reject_k_above_size: request.reject_k_above_size,
        fill: request.fill_bits,
    }
}

/// The launches of a checked call over one keys buffer (`None`: a listed layout's addresses).
fn launch<K: RadixKey, V: DeviceValue>(
    cuda: &Cuda,
    request: &BatchedTopKRequest,
    plan: BatchedTopKPlan<'_, '_, K>,
    keys: Option<&CudaView<'_, K>>,
    out_keys: &mut CudaViewMut<'_, K>,
    values: SelectedValues<'_, '_, V>,
) -> Result<Outcome, Error> {
    let scratch = cuda.scratch()?;
    let status = batched_topk(
        cuda.runtime(),
        cuda.stream(),
        &scratch,
        plan,
        keys,
        out_keys,
        values,
    )?;
    drop(scratch);
    let status = DeviceStatus {
        status,
        stream: cuda.stream().clone(),
        request: *request,
    };
    Ok(Outcome::device((), Box::new(status)))
}

pub(super) fn run<K: RadixKey, V: DeviceValue>(
    cuda: &Cuda,
    request: &BatchedTopKRequest,
    args: DeviceArgs<'_>,
    keys: CudaView<'_, K>,
    values: ValuesIn<CudaView<'_, V>, V>,
    mut out_keys: CudaViewMut<'_, K>,
    out_values: Option<CudaViewMut<'_, V>>,
) -> Result<Outcome, Error> {
    let plan = plan(request, &args);
    with_selected(values, out_values, |values| {
        launch(cuda, request, plan, Some(&keys), &mut out_keys, values)
    })
}

/// The listed layout on the device: the kernels read every segment in its own view (the
/// kernel launcher takes each one's address and length from the view).
pub(super) fn run_listed<K: RadixKey, V: DeviceValue>(
    cuda: &Cuda,
    request: &BatchedTopKRequest,
    args: DeviceArgs<'_>,
    segments: &[CudaView<'_, K>],
    values: ValuesIn<&[CudaView<'_, V>], V>,
    mut out_keys: CudaViewMut<'_, K>,
    out_values: Option<CudaViewMut<'_, V>>,
) -> Result<Outcome, Error> {
    let mut plan = plan(request, &args);
    plan.layout = BatchedLayout::Listed { segments };
    match (values, out_values) {
        (ValuesIn::Copy(values), Some(mut out)) => {
            let values = SelectedValues::Listed {
                values,
                out: &mut out,
            };
            launch::<K, V>(cuda, request, plan, None, &mut out_keys, values)
        }
        (ValuesIn::Index(_), Some(mut out)) => {
            let values = SelectedValues::Index { out: &mut out };
            launch(cuda, request, plan, None, &mut out_keys, values)
        }
        _ => launch(
            cuda,
            request,
            plan,
            None,
            &mut out_keys,
            SelectedValues::<V>::None,
        ),
    }
}

/// [`AnyBackend`](crate::AnyBackend) on a GPU: copies every input (and the current outputs, whose slots past the
/// results must stay as they are) to the device, runs there, copies the outputs back and
/// checks the status (the host had the data, so it waits anyway).
pub(super) fn run_any<K: RadixKey, V: DeviceValue>(
    cuda: &Cuda,
    request: &BatchedTopKRequest,
    args: &BatchedTopKArgs<&[i64], &[i32], &[u8]>,
    keys: &[K],
    values: ValuesIn<&[V], V>,
    out_keys: &mut [K],
    out_values: Option<&mut [V]>,
) -> Result<Outcome, Error> {
    if keys.is_empty() || out_keys.is_empty() {
        // Nothing can be selected (the device allocates no empty buffers): the host runs the
        // per-segment checks, with the same result.
        return Ok(super::host::run(
            request, args, keys, values, out_keys, out_values,
        ));
    }
    let segments = SegmentArgsCopy::upload(cuda, &args.segments)?;
    let k = ParamCopy::upload(cuda, args.k)?;
    let direction = ChoiceCopy::upload(cuda, args.direction)?;
    let (segment_views, k_view, direction_view) = (segments.views(), k.view(), direction.view());
    let device_args = BatchedTopKArgs {
        segments: segments.args(&segment_views),
        k: k_view.as_ref(),
        direction: direction.values(&direction_view),
    };
    on_device_copies(
        cuda,
        keys,
        values,
        out_keys,
        out_values,
        |keys, values, out, out_v| run(cuda, request, device_args, keys, values, out, out_v),
    )
}
