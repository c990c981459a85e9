//! Top-k on the GPU through the `topk_radix_select` kernel family, and on [`AnyBackend`]
//! (host, or copies to and from the GPU).

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut};
use oxicub_env::{Determinism, OutputOrdering, TieBreak};
use oxicub_kernels::families::topk_radix_select::{topk_radix_select, TopKPlan, TopKStatus};
use oxicub_kernels::families::HostOrDevice;
use oxicub_kernels::Direction;
use oxicub_params::SelectDirection;

use super::host::{owned_len, padded, resolve_k};
use super::TopKBackend;
use crate::backend::{AnyBackend, Cuda, DeviceKeys, DeviceValue, DeviceValues, ParamValues};
use crate::contract::DeferredBounds;
use crate::contract::TopKRequest;
use crate::radix::RadixKey;
use crate::sealed::Token;
use crate::segments::cuda::with_selected;
use crate::segments::{DeviceReport, Outcome, Pending};
use crate::values::ValuesIn;
use crate::Error;

/// The report of a call with a deferred `k`, read when the caller checks the outcome.
#[derive(Debug)]
struct DeviceStatus {
    status: TopKStatus,
    stream: Arc<CudaStream>,
    k: DeferredBounds,
}

impl DeviceReport for DeviceStatus {
    fn wait(&self) -> Result<(), Error> {
        match self.status.decode(&self.stream)? {
            None => Ok(()),
            Some(value) => self.k.resolve("k", value).1.map_or(Ok(()), Err),
        }
    }
}

fn plan<'a>(
    request: &TopKRequest,
    k: ParamValues<&'a CudaView<'a, i64>, &'a CudaView<'a, i32>>,
) -> TopKPlan<'a> {
    let k = match k {
        ParamValues::Host(value) => HostOrDevice::Host(value as u64),
        ParamValues::Deferred(value) => HostOrDevice::Device(value),
        ParamValues::PerSegment(_) | ParamValues::PerSegment32(_) | ParamValues::BoundsOnly => {
            unreachable!("a single-problem k is one value (`SingleValue`)")
        }
    };
    TopKPlan {
        direction: match request.direction {
            SelectDirection::Max => Direction::Descending,
            SelectDirection::Min => Direction::Ascending,
        },
        prefer_larger_index: request.requirements.tie_break == TieBreak::PreferLargerIndex,
        deterministic: request.requirements.determinism != Determinism::NotGuaranteed,
        // One item (or none) is already sorted.
        sorted: request.requirements.ordering != OutputOrdering::Unsorted
            && !matches!(k, HostOrDevice::Host(0 | 1)),
        k,
        k_bounds: (request.k.merged.min as u64, request.k.merged.max as u64),
        max_written: request.max_written,
    }
}

impl TopKBackend for Cuda {
    type OwnedKeys<K: RadixKey> = DeviceKeys<K>;
    type OwnedValues<V: DeviceValue> = DeviceValues<V>;

    #[allow(clippy::too_many_arguments)]
    fn topk_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: TopKRequest,
        k: ParamValues<&CudaView<'_, i64>, &CudaView<'_, i32>>,
        keys: CudaView<'_, K>,
        values: ValuesIn<CudaView<'_, V>, V>,
        mut out_keys: CudaViewMut<'_, K>,
        out_values: Option<CudaViewMut<'_, V>>,
    ) -> Result<Outcome, Error> {
        let plan = plan(&request, k);
        let (runtime, stream) = (self.runtime(), self.stream());
        let scratch = self.scratch()?;
        let status = with_selected(values, out_values, |values| {
            topk_radix_select(
                runtime,
                stream,
                &scratch,
                plan,
                &keys,
                &mut out_keys,
                values,
            )
        })?;
        if status.is_empty() {
            return Ok(Outcome::ready((), None));
        }
        let report = DeviceStatus {
            status,
            stream: stream.clone(),
            k: request.k,
        };
        Ok(Outcome::device((), Box::new(report)))
    }

    fn topk_owned_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: TopKRequest,
        k: ParamValues<&CudaView<'_, i64>, &CudaView<'_, i32>>,
        keys: CudaView<'_, K>,
        values: ValuesIn<CudaView<'_, V>, V>,
    ) -> Result<Pending<(DeviceKeys<K>, Option<DeviceValues<V>>)>, Error> {
        let len = owned_len(&request, k);
        let mut out_keys = self.alloc_keys::<K>(len)?;
        let mut out_values = match values {
            ValuesIn::None => None,
            ValuesIn::Copy(_) | ValuesIn::Index(_) => Some(self.alloc_values::<V>(len)?),
        };
        let out_view = out_values.as_mut().map(DeviceValues::as_view_mut);
        let outcome = self.topk_checked(
            token,
            request,
            k,
            keys,
            values,
            out_keys.as_view_mut(),
            out_view,
        )?;
        Ok(outcome.map(|()| (out_keys, out_values)))
    }
}

/// On CUDA, [`AnyBackend`] copies the inputs to the device, runs there and copies the results
/// back (waiting for them).
impl TopKBackend for AnyBackend {
    type OwnedKeys<K: RadixKey> = Vec<K>;
    type OwnedValues<V: DeviceValue> = Vec<V>;

    #[allow(clippy::too_many_arguments)]
    fn topk_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: TopKRequest,
        k: ParamValues<&[i64], &[i32]>,
        keys: &[K],
        values: ValuesIn<&[V], V>,
        out_keys: &mut [K],
        out_values: Option<&mut [V]>,
    ) -> Result<Outcome, Error> {
        match self {
            AnyBackend::Host(host) => {
                host.topk_checked(token, request, k, keys, values, out_keys, out_values)
            }
            AnyBackend::Cuda(cuda) => {
                // The k items alone: the slots past them stay as they are.
                let selected = selected_on(cuda, token, request, k, keys, values)?;
                Ok(selected.map(|(top_keys, top_values)| {
                    out_keys[..top_keys.len()].copy_from_slice(&top_keys);
                    if let (Some(out), Some(top)) = (out_values, top_values) {
                        out[..top.len()].copy_from_slice(&top);
                    }
                }))
            }
        }
    }

    fn topk_owned_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: TopKRequest,
        k: ParamValues<&[i64], &[i32]>,
        keys: &[K],
        values: ValuesIn<&[V], V>,
    ) -> Result<Pending<(Vec<K>, Option<Vec<V>>)>, Error> {
        let cuda = match self {
            AnyBackend::Host(host) => {
                return host.topk_owned_checked(token, request, k, keys, values)
            }
            AnyBackend::Cuda(cuda) => cuda,
        };
        let len = owned_len(&request, k);
        let selected = selected_on(cuda, token, request, k, keys, values)?;
        Ok(selected.map(|(top_keys, top_values)| padded(len, top_keys, top_values)))
    }
}

/// The selected items of a call on [`AnyBackend`]'s GPU, `min(k, keys.len())` of them: the
/// inputs copied to the device, the results copied back (waiting for them). A deferred k in
/// host memory is read (and checked) here: the host knows it.
#[allow(clippy::type_complexity)]
fn selected_on<K: RadixKey, V: DeviceValue>(
    cuda: &Cuda,
    token: Token,
    request: TopKRequest,
    k: ParamValues<&[i64], &[i32]>,
    keys: &[K],
    values: ValuesIn<&[V], V>,
) -> Result<Pending<(Vec<K>, Option<Vec<V>>)>, Error> {
    let (count, error) = resolve_k(&request, k);
    let device_keys = cuda.upload_keys(keys)?;
    let device_values = match &values {
        ValuesIn::Copy(values) => Some(cuda.upload_values(values)?),
        _ => None,
    };
    let device_in = match (&values, &device_values) {
        (ValuesIn::Copy(_), Some(v)) => ValuesIn::Copy(v.as_view()),
        (ValuesIn::Index(index), _) => ValuesIn::Index(*index),
        _ => ValuesIn::None,
    };
    // A host k has nothing to report on the device.
    let (top_keys, top_values) = cuda
        .topk_owned_checked(
            token,
            request,
            ParamValues::Host(count as i64),
            device_keys.as_view(),
            device_in,
        )?
        .check()?;
    let top_keys = cuda.download_keys(&top_keys)?;
    let top_values = match top_values {
        Some(top) => Some(top.download(cuda)?),
        None => None,
    };
    Ok(Pending::ready((top_keys, top_values), error))
}
