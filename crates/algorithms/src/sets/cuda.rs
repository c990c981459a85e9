//! Set operations on the GPU through the `sets` kernel family, and on [`AnyBackend`] (host, or
//! copies to the device and back).

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView};
use oxicub_kernels::families::sets::{set_operation, SetsPlan, SetsStatus, SetsValues};
use oxicub_params::SortOrder;

use super::host::order_error_at;
use super::{SetOutputs, SetValues, SetsBackend};
use crate::backend::{zeroed, AnyBackend, Cuda, DeviceValue};
use crate::contract::sets::{InputCheck, SetRequest};
use crate::radix::RadixKey;
use crate::sealed::Token;
use crate::segments::{DeviceReport, Pending};
use crate::values::ValuesIn;
use crate::Error;

/// The status of a call on the device, read when the caller checks.
#[derive(Debug)]
struct DeviceStatus {
    status: SetsStatus,
    stream: Arc<CudaStream>,
    request: SetRequest,
}

impl DeviceReport<usize> for DeviceStatus {
    fn wait(self: Box<Self>) -> Result<usize, Error> {
        let report = self.status.decode(&self.stream)?;
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
        let plan = plan(request);
        let SetOutputs {
            keys: mut out_keys,
            values: out_values,
            mut count,
        } = outputs;
        let count = count.as_mut();
        let status = match (values, out_values) {
            (ValuesIn::Copy((a_values, b_values)), Some(mut out)) => {
                let values = SetsValues::Copy {
                    a_values: &a_values,
                    b_values: &b_values,
                    out: &mut out,
                };
                set_operation(runtime, stream, plan, &a, &b, &mut out_keys, values, count)?
            }
            (ValuesIn::Index(_), Some(mut out)) => {
                let values = SetsValues::Index { out: &mut out };
                set_operation(runtime, stream, plan, &a, &b, &mut out_keys, values, count)?
            }
            _ => {
                let values = SetsValues::<V>::None;
                set_operation(runtime, stream, plan, &a, &b, &mut out_keys, values, count)?
            }
        };
        let report = DeviceStatus {
            status,
            stream: stream.clone(),
            request: *request,
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
                let outputs = SetOutputs {
                    keys: outputs.keys,
                    values: outputs.values,
                    count: outputs.count,
                };
                let host = crate::Host::new();
                return host.set_operation_checked(token, request, a, b, values, outputs);
            }
        };
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
        let result = cuda
            .set_operation_checked(
                token,
                request,
                device_a.as_view(),
                device_b.as_view(),
                values_in,
                device_outputs,
            )?
            .check();
        let count = match result {
            Ok(count) => count,
            Err(error) => return Ok(Pending::ready(0, Some(error))),
        };
        let written = cuda.download_keys(&device_out)?;
        out_keys[..count].copy_from_slice(&written[..count]);
        if let (Some(out), Some(device)) = (out_values, &device_out_values) {
            let mut all = vec![zeroed::<V>(); bound];
            device.download_into(cuda, &mut all)?;
            out[..count].copy_from_slice(&all[..count]);
        }
        if let Some(first) = out_count.and_then(|count| count.first_mut()) {
            *first = count as i64;
        }
        Ok(Pending::ready(count, None))
    }
}
