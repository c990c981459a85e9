//! Routing on the GPU: the `routing` kernel family, one launch, nothing allocated and nothing
//! to report from the device; the dispatch by the `routing_dispatch` family, its ids checked
//! there; and both on [`AnyBackend`], through copies.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut};
use oxicub_kernels::families::routing::{route, ExpertId};
use oxicub_kernels::families::routing_dispatch::{dispatch, DispatchStatus};

use super::{DispatchRequest, Logit, RouteRequest, RoutingBackend};
use crate::sealed::Token;
use crate::segments::DeviceReport;
use crate::{AnyBackend, Cuda, Error, Outcome};

/// A dispatch's status on the device: the first entry whose id names no expert.
#[derive(Debug)]
struct DispatchReport {
    status: DispatchStatus,
    stream: Arc<CudaStream>,
    request: DispatchRequest,
}

impl DeviceReport for DispatchReport {
    fn wait(&self) -> Result<(), Error> {
        match self.status.decode(&self.stream)? {
            None => Ok(()),
            Some(invalid) => Err(self.request.invalid_id(invalid.entry, invalid.id)),
        }
    }
}

impl RoutingBackend for Cuda {
    fn route_checked<L: Logit, I: ExpertId>(
        &self,
        _: Token,
        request: &RouteRequest,
        logits: CudaView<'_, L>,
        bias: Option<CudaView<'_, f32>>,
        mut ids: CudaViewMut<'_, I>,
        mut weights: CudaViewMut<'_, f32>,
    ) -> Result<Outcome, Error> {
        self.refuse_tracked_capture()?;
        route(
            self.runtime(),
            self.stream(),
            &request.config,
            &logits,
            bias.as_ref(),
            &mut ids,
            &mut weights,
        )?;
        Ok(Outcome::ready((), None))
    }

    fn dispatch_checked<I: ExpertId>(
        &self,
        _: Token,
        request: &DispatchRequest,
        ids: CudaView<'_, I>,
        mut counts: CudaViewMut<'_, I>,
        mut order: CudaViewMut<'_, I>,
    ) -> Result<Outcome, Error> {
        let scratch = self.scratch()?;
        let status = dispatch(
            self.runtime(),
            self.stream(),
            &scratch,
            request.experts,
            &ids,
            &mut counts,
            &mut order,
        )?;
        drop(scratch);
        Ok(Outcome::device(
            (),
            Box::new(DispatchReport {
                status,
                stream: self.stream().clone(),
                request: *request,
            }),
        ))
    }
}

/// On CUDA, [`AnyBackend`] copies the logits and the bias to the device, routes there and
/// copies the ids and weights back (waiting for them).
impl RoutingBackend for AnyBackend {
    fn route_checked<L: Logit, I: ExpertId>(
        &self,
        token: Token,
        request: &RouteRequest,
        logits: &[L],
        bias: Option<&[f32]>,
        ids: &mut [I],
        weights: &mut [f32],
    ) -> Result<Outcome, Error> {
        let cuda = match self {
            AnyBackend::Host(host) => {
                return host.route_checked(token, request, logits, bias, ids, weights)
            }
            AnyBackend::Cuda(cuda) => cuda,
        };
        let out = request.tokens as usize * request.config.k as usize;
        if out == 0 {
            return Ok(Outcome::ready((), None));
        }
        let device_logits = cuda.upload_keys(logits)?;
        let device_bias = bias.map(|bias| cuda.upload(bias)).transpose()?;
        let mut device_ids = cuda.alloc_zeros::<I>(out)?;
        let mut device_weights = cuda.alloc_zeros::<f32>(out)?;
        cuda.route_checked(
            token,
            request,
            device_logits.as_view(),
            device_bias.as_ref().map(|bias| bias.as_view()),
            device_ids.as_view_mut(),
            device_weights.as_view_mut(),
        )?
        .check()?;
        ids[..out].copy_from_slice(&cuda.download(&device_ids.as_view())?);
        weights[..out].copy_from_slice(&cuda.download(&device_weights.as_view())?);
        Ok(Outcome::ready((), None))
    }

    /// On CUDA, copies the ids to the device, dispatches there and copies the counts and the
    /// order back (waiting for them).
    fn dispatch_checked<I: ExpertId>(
        &self,
        token: Token,
        request: &DispatchRequest,
        ids: &[I],
        counts: &mut [I],
        order: &mut [I],
    ) -> Result<Outcome, Error> {
        let cuda = match self {
            AnyBackend::Host(host) => {
                return host.dispatch_checked(token, request, ids, counts, order)
            }
            AnyBackend::Cuda(cuda) => cuda,
        };
        let experts = request.experts as usize;
        // The device allocates no empty buffers: one element stands for none.
        let device_ids = if ids.is_empty() {
            cuda.alloc_zeros::<I>(1)?
        } else {
            cuda.upload(ids)?
        };
        let mut device_counts = cuda.alloc_zeros::<I>(experts)?;
        let mut device_order = cuda.alloc_zeros::<I>(ids.len().max(1))?;
        cuda.dispatch_checked(
            token,
            request,
            device_ids.slice(..ids.len()),
            device_counts.as_view_mut(),
            device_order.slice_mut(..ids.len()),
        )?
        .check()?;
        counts[..experts].copy_from_slice(&cuda.download(&device_counts.as_view())?);
        order[..ids.len()].copy_from_slice(&cuda.download(&device_order.slice(..ids.len()))?);
        Ok(Outcome::ready((), None))
    }
}
