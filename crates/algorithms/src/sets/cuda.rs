//! Set operations on the GPU through the `sets` kernel family, and on [`AnyBackend`] (host, or
//! copies to the device and back).

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut};
use oxicub_kernels::families::sets::{
    batched_set_operation, set_operation, SetsBatch, SetsPlan, SetsSegments, SetsSideArgs,
    SetsStatus, SetsValues,
};
use oxicub_kernels::segments::SegmentedReport;
use oxicub_params::SortOrder;

use super::host::order_error_at;
use super::{SetOutputs, SetValues, SetsBackend};
use crate::backend::{AnyBackend, Cuda, DeviceValue};
use crate::contract::sets::{
    rename_side, BatchArgs, BatchArgsOn, BatchRequest, InputCheck, SetRequest,
};
use crate::radix::RadixKey;
use crate::sealed::Token;
use crate::segments::cuda::{
    host_or_device, launch_bounds, single_host_or_device, SegmentArgsCopy,
};
use crate::segments::{
    segmented_error, DeviceReport, LayoutArg, Pending, SegmentArgs, SegmentsRequest,
};
use crate::values::ValuesIn;
use crate::Error;

/// The status of a call on the device, read when the caller checks.
#[derive(Debug)]
struct DeviceStatus {
    status: SetsStatus,
    stream: Arc<CudaStream>,
    request: SetRequest,
    /// A batched call's segments: a's (with the number of pairs) and b's.
    batch: Option<(SegmentsRequest, SegmentsRequest)>,
}

impl DeviceReport<usize> for DeviceStatus {
    fn wait(&self) -> Result<usize, Error> {
        let report = self.status.decode(&self.stream)?;
        if let Some((a, b)) = &self.batch {
            // The pairs' checks first, as the host makes them.
            let (on_b, violation) = match report.violation {
                Some((pair, on_b, code, value)) => (on_b, Some((pair, code, value))),
                None => (false, None),
            };
            let segmented = SegmentedReport {
                violation,
                bad_num_segments: report.bad_num_segments,
                bad_total_items: None,
            };
            let side = if on_b { b } else { a };
            segmented_error(segmented, side, |_| None)
                .map_err(|e| rename_side(e, if on_b { "b" } else { "a" }))?;
        }
        let bad = [("a", report.a_out_of_order), ("b", report.b_out_of_order)];
        if let Some((arg, Some((position, repeat)))) = bad.into_iter().find(|(_, b)| b.is_some()) {
            return Err(order_error_at(arg, position, repeat, &self.request));
        }
        Ok(report.count as usize)
    }
}

/// The launch plan of a checked call.
fn plan(request: &SetRequest) -> SetsPlan {
    SetsPlan {
        op: request.op as u32,
        descending: request.order == SortOrder::Descending,
        check: request.check != InputCheck::None,
        strict: request.check == InputCheck::Strict,
        no_duplicates: request.no_duplicates,
        out_len: request.bound,
    }
}

/// `run` over the values of a call as the launcher takes them.
fn with_values<V, R>(
    values: SetValues<'_, '_, Cuda, V>,
    out_values: Option<CudaViewMut<'_, V>>,
    run: impl FnOnce(SetsValues<'_, '_, V>) -> R,
) -> R {
    match (values, out_values) {
        (ValuesIn::Copy((a_values, b_values)), Some(mut out)) => run(SetsValues::Copy {
            a_values: &a_values,
            b_values: &b_values,
            out: &mut out,
        }),
        (ValuesIn::Index(_), Some(mut out)) => run(SetsValues::Index { out: &mut out }),
        _ => run(SetsValues::None),
    }
}

/// One input's segments of a checked batched call, as the launcher takes them.
fn side_args<'a, 'b>(
    request: &SegmentsRequest,
    args: &SegmentArgs<&'b CudaView<'a, i64>, &'b CudaView<'a, i32>>,
) -> SetsSideArgs<'a, 'b> {
    let segments = match args.layout {
        LayoutArg::Strided(stride) => SetsSegments::Strided {
            stride,
            sizes: host_or_device(args.sizes),
        },
        LayoutArg::Offsets { begin, end } => SetsSegments::Offsets { begin, end },
        LayoutArg::Listed => unreachable!("a batch takes strided or offsets layouts (BatchLayout)"),
    };
    SetsSideArgs {
        segments,
        sizes: launch_bounds(request.sizes),
    }
}

impl SetsBackend for Cuda {
    fn set_operation_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &SetRequest,
        a: CudaView<'_, K>,
        b: CudaView<'_, K>,
        values: SetValues<'_, '_, Self, V>,
        outputs: SetOutputs<'_, '_, '_, Self, K, V>,
    ) -> Result<Pending<usize>, Error> {
        let (runtime, stream) = (self.runtime(), self.stream());
        let scratch = self.scratch()?;
        let plan = plan(request);
        let SetOutputs {
            keys: mut out_keys,
            values: out_values,
            mut count,
        } = outputs;
        let count = count.as_mut();
        let status = with_values(values, out_values, |values| {
            set_operation(
                runtime,
                stream,
                &scratch,
                plan,
                &a,
                &b,
                &mut out_keys,
                values,
                count,
            )
        })?;
        let report = DeviceStatus {
            status,
            stream: stream.clone(),
            request: *request,
            batch: None,
        };
        Ok(Pending::computed(Box::new(report)))
    }

    fn batched_set_operation_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &BatchRequest,
        args: BatchArgsOn<'_, Self>,
        a: CudaView<'_, K>,
        b: CudaView<'_, K>,
        values: SetValues<'_, '_, Self, V>,
        outputs: SetOutputs<'_, '_, '_, Self, K, V>,
        mut out_offsets: CudaViewMut<'_, i64>,
    ) -> Result<Pending<usize>, Error> {
        let (runtime, stream) = (self.runtime(), self.stream());
        let scratch = self.scratch()?;
        let plan = plan(&request.set);
        let SetOutputs {
            keys: mut out_keys,
            values: out_values,
            ..
        } = outputs;
        let batch = SetsBatch {
            a: side_args(&request.a, &args.a),
            b: side_args(&request.b, &args.b),
            num_segments: single_host_or_device(args.a.num_segments),
            num_segments_bounds: launch_bounds(request.a.num_segments.merged),
            max_segments: request.a.max_segments,
        };
        let offsets = &mut out_offsets;
        let status = with_values(values, out_values, |values| {
            batched_set_operation(
                runtime,
                stream,
                &scratch,
                plan,
                batch,
                offsets,
                &a,
                &b,
                &mut out_keys,
                values,
            )
        })?;
        let report = DeviceStatus {
            status,
            stream: stream.clone(),
            request: request.set,
            batch: Some((request.a, request.b)),
        };
        Ok(Pending::computed(Box::new(report)))
    }
}

/// On CUDA, [`AnyBackend`] runs on device copies of the inputs and outputs (an empty input:
/// on the host, which gives the same result; the device allocates no empty buffers).
impl SetsBackend for AnyBackend {
    fn set_operation_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: &SetRequest,
        a: &[K],
        b: &[K],
        values: SetValues<'_, '_, Self, V>,
        outputs: SetOutputs<'_, '_, '_, Self, K, V>,
    ) -> Result<Pending<usize>, Error> {
        let cuda = match self {
            AnyBackend::Cuda(cuda) if !a.is_empty() && !b.is_empty() => cuda,
            _ => {
                let host = crate::Host::new();
                return host.set_operation_checked(token, request, a, b, values, outputs.on_host());
            }
        };
        on_device_copies(
            cuda,
            request,
            a,
            b,
            values,
            outputs,
            None,
            |a, b, values, outputs, _| {
                cuda.set_operation_checked(token, request, a, b, values, outputs)
            },
        )
    }

    fn batched_set_operation_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: &BatchRequest,
        args: BatchArgsOn<'_, Self>,
        a: &[K],
        b: &[K],
        values: SetValues<'_, '_, Self, V>,
        outputs: SetOutputs<'_, '_, '_, Self, K, V>,
        out_offsets: &mut [i64],
    ) -> Result<Pending<usize>, Error> {
        let cuda = match self {
            AnyBackend::Cuda(cuda) if !a.is_empty() && !b.is_empty() => cuda,
            _ => {
                let host = crate::Host::new();
                let outputs = outputs.on_host();
                return host.batched_set_operation_checked(
                    token,
                    request,
                    args,
                    a,
                    b,
                    values,
                    outputs,
                    out_offsets,
                );
            }
        };
        let (a_copy, b_copy) = (
            SegmentArgsCopy::upload(cuda, &args.a)?,
            SegmentArgsCopy::upload(cuda, &args.b)?,
        );
        let (a_views, b_views) = (a_copy.views(), b_copy.views());
        let device_args = BatchArgs {
            a: a_copy.args(&a_views),
            b: b_copy.args(&b_views),
        };
        let offsets = Some(out_offsets);
        on_device_copies(
            cuda,
            &request.set,
            a,
            b,
            values,
            outputs,
            offsets,
            |a, b, v, o, offsets| {
                let offsets = offsets.expect("a batched call passes its offsets");
                cuda.batched_set_operation_checked(token, request, device_args, a, b, v, o, offsets)
            },
        )
    }
}

impl<'k, 'v, 'c, K, V> SetOutputs<'k, 'v, 'c, AnyBackend, K, V> {
    /// The same buffers, as the host backend takes them.
    fn on_host(self) -> SetOutputs<'k, 'v, 'c, crate::Host, K, V> {
        SetOutputs {
            keys: self.keys,
            values: self.values,
            count: self.count,
        }
    }
}

/// `run` on device copies of an [`AnyBackend`] call's inputs, values and outputs (and a batched
/// call's offsets), the outputs copied back once the call checks out: the count's keys and
/// values, the offsets and the count buffer.
#[allow(clippy::too_many_arguments)]
fn on_device_copies<K, V, R>(
    cuda: &Cuda,
    request: &SetRequest,
    a: &[K],
    b: &[K],
    values: SetValues<'_, '_, AnyBackend, V>,
    outputs: SetOutputs<'_, '_, '_, AnyBackend, K, V>,
    out_offsets: Option<&mut [i64]>,
    run: R,
) -> Result<Pending<usize>, Error>
where
    K: RadixKey,
    V: DeviceValue,
    R: FnOnce(
        CudaView<'_, K>,
        CudaView<'_, K>,
        SetValues<'_, '_, Cuda, V>,
        SetOutputs<'_, '_, '_, Cuda, K, V>,
        Option<CudaViewMut<'_, i64>>,
    ) -> Result<Pending<usize>, Error>,
{
    let SetOutputs {
        keys: out_keys,
        values: out_values,
        count: out_count,
    } = outputs;
    let bound = (request.bound as usize).max(1);
    let (device_a, device_b) = (cuda.upload_keys(a)?, cuda.upload_keys(b)?);
    let mut device_out = cuda.alloc_keys::<K>(bound)?;
    let device_values = match &values {
        ValuesIn::Copy((a_values, b_values)) => {
            Some((cuda.upload_values(a_values)?, cuda.upload_values(b_values)?))
        }
        _ => None,
    };
    let mut device_out_values = match &out_values {
        Some(_) => Some(cuda.alloc_values::<V>(bound)?),
        None => None,
    };
    let mut device_offsets = match &out_offsets {
        Some(offsets) => Some(cuda.upload(&offsets[..])?),
        None => None,
    };
    let values_in = match (&values, &device_values) {
        (ValuesIn::Copy(_), Some((a_values, b_values))) => {
            ValuesIn::Copy((a_values.as_view(), b_values.as_view()))
        }
        (ValuesIn::Index(index), _) => ValuesIn::Index(*index),
        _ => ValuesIn::None,
    };
    let device_outputs = SetOutputs {
        keys: device_out.as_view_mut(),
        values: device_out_values.as_mut().map(|out| out.as_view_mut()),
        count: None,
    };
    let offsets_view = device_offsets.as_mut().map(|o| o.as_view_mut());
    let result = run(
        device_a.as_view(),
        device_b.as_view(),
        values_in,
        device_outputs,
        offsets_view,
    )?
    .check();
    let count = match result {
        Ok(count) => count,
        Err(error) => return Ok(Pending::ready(0, Some(error))),
    };
    // Only what the call wrote comes back.
    if count > 0 {
        let written = cuda.download(&device_out.bits().slice(..count))?;
        for (out, bits) in out_keys[..count].iter_mut().zip(written) {
            *out = K::from_bits(bits);
        }
    }
    if let (Some(out), Some(device)) = (out_values, &device_out_values) {
        device.download_prefix_into(cuda, &mut out[..count])?;
    }
    if let (Some(out), Some(device)) = (out_offsets, &device_offsets) {
        out.copy_from_slice(&cuda.download(&device.as_view())?);
    }
    if let Some(first) = out_count.and_then(|count| count.first_mut()) {
        *first = count as i64;
    }
    Ok(Pending::ready(count, None))
}
