//! Segmented sort on the GPU through the `segmented_sort` kernel family, and on
//! [`AnyBackend`] (host, or copies to the device and back).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut};
use oxicub_kernels::families::segmented_sort::{
    segmented_sort, SegmentedSortPlan, SortLayout, SortStatus,
};
use oxicub_kernels::families::{listed_copy, HostOrDevice};
use oxicub_kernels::segments::VIOLATION_OPTION_NOT_COMPILED;
use oxicub_params::SortOrder;

use super::host::{host_slice_forms, order_not_compiled};
use super::{MergePass, MergeStatistics, SegmentedSortBackend};
use crate::backend::{AnyBackend, ChoiceValues, Cuda, DeviceKeys, DeviceValue, DeviceValues};
use crate::contract::segmented_sort::{SortArgs, SortArgsOn, SortRequest};
use crate::radix::RadixKey;
use crate::sealed::Token;
use crate::segments::cuda::{
    host_or_device, launch_bounds, on_device_copies, single_host_or_device, with_selected,
    ChoiceCopy, SegmentArgsCopy,
};
use crate::segments::{segmented_error, DeviceReport, LayoutArg, Pending, SegmentArgs};
use crate::values::ValuesIn;
use crate::Error;

/// The status of a call on the device and its statistics, read when the caller checks.
#[derive(Debug)]
struct DeviceStatus {
    status: SortStatus,
    stream: Arc<CudaStream>,
    request: SortRequest,
}

impl DeviceReport<MergeStatistics> for DeviceStatus {
    fn wait(&self) -> Result<MergeStatistics, Error> {
        let report = self.status.status.decode(&self.stream)?;
        let request = &self.request;
        segmented_error(report, &request.segments, |code| {
            (code == VIOLATION_OPTION_NOT_COMPILED).then(|| order_not_compiled(request))
        })?;
        let (passes, tiles) = self.status.statistics(&self.stream)?;
        let passes = passes
            .into_iter()
            .map(|(merge_tiles, copy_tiles)| MergePass {
                merge_tiles,
                copy_tiles,
            })
            .collect();
        Ok(MergeStatistics { tiles, passes })
    }
}

/// The segments of a listed call gathered into one buffer on the device (and their values,
/// when copied), with the offsets of each.
struct JoinedOnDevice<K: RadixKey, V: DeviceValue> {
    keys: DeviceKeys<K>,
    values: Option<DeviceValues<V>>,
    /// `segments + 1` offsets: segment `i` is `offsets[i] .. offsets[i + 1]`.
    offsets: CudaSlice<i64>,
    segments: usize,
    total: usize,
}

impl<K: RadixKey, V: DeviceValue> JoinedOnDevice<K, V> {
    /// Gathers `segments` (and copied `values`) one after another (the buffers hold at least
    /// one element: the device allocates no empty ones).
    fn gather(
        cuda: &Cuda,
        segments: &[CudaView<'_, K>],
        values: &ValuesIn<&[CudaView<'_, V>], V>,
    ) -> Result<Self, Error> {
        let (runtime, stream) = (cuda.runtime(), cuda.stream());
        let offsets = listed_copy::joined_offsets(segments.iter().map(|s| s.len()));
        let total = offsets.last().copied().unwrap_or(0) as usize;
        let mut keys = cuda.alloc_keys::<K>(total.max(1))?;
        listed_copy::gather(runtime, stream, segments, &mut keys.as_view_mut())?;
        let values = match values {
            ValuesIn::Copy(lists) => {
                let mut copy = cuda.alloc_values::<V>(total.max(1))?;
                listed_copy::gather(runtime, stream, lists, &mut copy.as_view_mut())?;
                Some(copy)
            }
            _ => None,
        };
        let offsets = stream
            .clone_htod(&offsets)
            .map_err(cuda.driver_error("cuMemcpyHtoDAsync"))?;
        Ok(JoinedOnDevice {
            keys,
            values,
            offsets,
            segments: segments.len(),
            total,
        })
    }

    /// The begin and end offsets of the joined segments.
    fn offsets(&self) -> (CudaView<'_, i64>, CudaView<'_, i64>) {
        let all = self.offsets.as_view();
        (all.slice(..self.segments), all.slice(1..))
    }
}

/// A copy of `keys` made on the stream (at least one element: the device allocates no empty
/// buffers; its first `keys.len()` are the copy).
fn keys_copy<K: RadixKey>(cuda: &Cuda, keys: &CudaView<'_, K>) -> Result<DeviceKeys<K>, Error> {
    let mut copy = cuda.alloc_keys::<K>(keys.len().max(1))?;
    let mut all = copy.as_view_mut();
    let mut view = all.slice_mut(..keys.len());
    cuda.stream()
        .memcpy_dtod(keys, &mut view)
        .map_err(cuda.driver_error("cuMemcpyDtoDAsync"))?;
    Ok(copy)
}

/// A copy of `values` made on the stream, as [`keys_copy`].
fn values_copy<V: DeviceValue>(
    cuda: &Cuda,
    values: &CudaView<'_, V>,
) -> Result<DeviceValues<V>, Error> {
    let mut copy = cuda.alloc_values::<V>(values.len().max(1))?;
    let mut all = copy.as_view_mut();
    let mut view = all.slice_mut(..values.len());
    cuda.stream()
        .memcpy_dtod(values, &mut view)
        .map_err(cuda.driver_error("cuMemcpyDtoDAsync"))?;
    Ok(copy)
}

/// A call's arguments with its segments as the offsets `(begin, end)` (a listed call, over its
/// joined buffer).
fn over_offsets<'r>(
    args: SortArgsOn<'r, Cuda>,
    (begin, end): &'r (CudaView<'r, i64>, CudaView<'r, i64>),
) -> SortArgsOn<'r, Cuda> {
    SortArgs {
        segments: SegmentArgs {
            layout: LayoutArg::Offsets { begin, end },
            ..args.segments
        },
        ..args
    }
}

/// The launch plan of a checked call.
fn plan<'a, 'b>(
    request: &SortRequest,
    args: &SortArgs<&'b CudaView<'a, i64>, &'b CudaView<'a, i32>, &'b CudaView<'a, u8>>,
) -> SegmentedSortPlan<'a, 'b> {
    let layout = match args.segments.layout {
        LayoutArg::Strided(stride) => SortLayout::Strided {
            stride,
            sizes: host_or_device(args.segments.sizes),
        },
        LayoutArg::Offsets { begin, end } => SortLayout::Offsets { begin, end },
        LayoutArg::Listed => unreachable!("a listed sort runs on its segments joined"),
    };
    let order = match args.order {
        ChoiceValues::Host(order) => HostOrDevice::Host(order as u32),
        ChoiceValues::PerSegment(view) => HostOrDevice::Device(view),
    };
    let segments = &request.segments;
    SegmentedSortPlan {
        layout,
        order,
        order_mask: request.orders,
        num_segments: single_host_or_device(args.segments.num_segments),
        num_segments_bounds: launch_bounds(segments.num_segments.merged),
        size_bounds: launch_bounds(segments.sizes),
        total_bounds: launch_bounds(segments.total_items),
    }
}

/// The launches of a checked call on the device.
fn run<K: RadixKey, V: DeviceValue>(
    cuda: &Cuda,
    request: &SortRequest,
    args: SortArgsOn<'_, Cuda>,
    keys: CudaView<'_, K>,
    values: ValuesIn<CudaView<'_, V>, V>,
    mut out_keys: CudaViewMut<'_, K>,
    out_values: Option<CudaViewMut<'_, V>>,
) -> Result<Pending<MergeStatistics>, Error> {
    let plan = plan(request, &args);
    let (runtime, stream) = (cuda.runtime(), cuda.stream());
    let scratch = cuda.scratch()?;
    let status = with_selected(values, out_values, |values| {
        segmented_sort(
            runtime,
            stream,
            &scratch,
            plan,
            &keys,
            &mut out_keys,
            values,
        )
    })?;
    let report = DeviceStatus {
        status,
        stream: stream.clone(),
        request: *request,
    };
    Ok(Pending::computed(Box::new(report)))
}

impl SegmentedSortBackend for Cuda {
    fn segmented_sort_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &SortRequest,
        args: SortArgsOn<'_, Self>,
        keys: CudaView<'_, K>,
        values: ValuesIn<CudaView<'_, V>, V>,
        out_keys: CudaViewMut<'_, K>,
        out_values: Option<CudaViewMut<'_, V>>,
    ) -> Result<Pending<MergeStatistics>, Error> {
        run(self, request, args, keys, values, out_keys, out_values)
    }

    fn segmented_sort_in_place_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: &SortRequest,
        args: SortArgsOn<'_, Self>,
        keys: CudaViewMut<'_, K>,
        values: Option<CudaViewMut<'_, V>>,
    ) -> Result<Pending<MergeStatistics>, Error> {
        // The copies live until the launches are queued; they are freed in stream order.
        let input = keys_copy(self, &keys.as_view())?;
        let input_values = values
            .as_ref()
            .map(|values| values_copy(self, &values.as_view()))
            .transpose()?;
        let values_in = match &input_values {
            Some(copy) => ValuesIn::Copy(copy.as_view().slice(..keys.len())),
            None => ValuesIn::None,
        };
        let input_keys = input.as_view().slice(..keys.len());
        self.segmented_sort_checked(token, request, args, input_keys, values_in, keys, values)
    }

    fn segmented_sort_listed_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &SortRequest,
        args: SortArgsOn<'_, Self>,
        segments: &[CudaView<'_, K>],
        values: ValuesIn<&[CudaView<'_, V>], V>,
        out_keys: CudaViewMut<'_, K>,
        out_values: Option<CudaViewMut<'_, V>>,
    ) -> Result<Pending<MergeStatistics>, Error> {
        let joined = JoinedOnDevice::gather(self, segments, &values)?;
        let offsets = joined.offsets();
        let args = over_offsets(args, &offsets);
        let values_in = match (&joined.values, values) {
            (Some(copy), _) => ValuesIn::Copy(copy.as_view().slice(..joined.total)),
            (None, ValuesIn::Index(index)) => ValuesIn::Index(index),
            (None, _) => ValuesIn::None,
        };
        let keys = joined.keys.as_view().slice(..joined.total);
        run(self, request, args, keys, values_in, out_keys, out_values)
    }

    fn segmented_sort_listed_in_place_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &SortRequest,
        args: SortArgsOn<'_, Self>,
        segments: &mut [CudaViewMut<'_, K>],
        values: Option<&mut [CudaViewMut<'_, V>]>,
    ) -> Result<Pending<MergeStatistics>, Error> {
        let (runtime, stream) = (self.runtime(), self.stream());
        let views: Vec<CudaView<'_, K>> = segments.iter().map(|s| s.as_view()).collect();
        let value_views: Option<Vec<CudaView<'_, V>>> = values
            .as_deref()
            .map(|lists| lists.iter().map(|s| s.as_view()).collect());
        let values_in = match &value_views {
            Some(views) => ValuesIn::Copy(&views[..]),
            None => ValuesIn::None,
        };
        let joined = JoinedOnDevice::gather(self, &views, &values_in)?;
        drop(views);
        drop(value_views);
        // The sort's output starts as a copy of its input, so a segment it leaves alone (past
        // a deferred count, or invalid) is written back unchanged.
        let total = joined.total;
        let keys = joined.keys.as_view().slice(..total);
        let mut sorted = keys_copy(self, &keys)?;
        let mut sorted_all = sorted.as_view_mut();
        let sorted_view = sorted_all.slice_mut(..total);
        let mut sorted_values = joined
            .values
            .as_ref()
            .map(|copy| values_copy(self, &copy.as_view().slice(..total)))
            .transpose()?;
        let offsets = joined.offsets();
        let args = over_offsets(args, &offsets);
        let values_in = match &joined.values {
            Some(copy) => ValuesIn::Copy(copy.as_view().slice(..total)),
            None => ValuesIn::None,
        };
        let mut sorted_values_all = sorted_values.as_mut().map(|out| out.as_view_mut());
        let out_values = sorted_values_all.as_mut().map(|all| all.slice_mut(..total));
        let pending = run(
            self,
            request,
            args,
            keys,
            values_in,
            sorted_view,
            out_values,
        )?;
        listed_copy::scatter(runtime, stream, &sorted.as_view().slice(..total), segments)?;
        if let (Some(sorted), Some(lists)) = (&sorted_values, values) {
            listed_copy::scatter(runtime, stream, &sorted.as_view().slice(..total), lists)?;
        }
        Ok(pending)
    }
}

/// On CUDA, [`AnyBackend`] runs on device copies of the inputs and outputs
/// (`segments::cuda::on_device_copies`).
impl SegmentedSortBackend for AnyBackend {
    fn segmented_sort_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: &SortRequest,
        args: SortArgsOn<'_, Self>,
        keys: &[K],
        values: ValuesIn<&[V], V>,
        out_keys: &mut [K],
        out_values: Option<&mut [V]>,
    ) -> Result<Pending<MergeStatistics>, Error> {
        let cuda = match self {
            AnyBackend::Cuda(cuda) if !keys.is_empty() => cuda,
            // No keys: nothing to sort (the device allocates no empty buffers); the host runs
            // the per-segment checks, with the same result.
            _ => {
                let host = crate::Host::new();
                return host.segmented_sort_checked(
                    token, request, args, keys, values, out_keys, out_values,
                );
            }
        };
        let segments = SegmentArgsCopy::upload(cuda, &args.segments)?;
        let order = ChoiceCopy::<SortOrder>::upload(cuda, args.order)?;
        let (segment_views, order_view) = (segments.views(), order.view());
        let device_args = SortArgs {
            segments: segments.args(&segment_views),
            order: order.values(&order_view),
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

    host_slice_forms!();
}
