//! Routing on the GPU: the `routing` kernel family, one launch, nothing allocated and nothing
//! to report from the device; and on [`AnyBackend`], through copies.

use cudarc::driver::{CudaView, CudaViewMut};
use oxicub_kernels::families::routing::{route, ExpertId};

use super::{Logit, RouteRequest, RoutingBackend};
use crate::sealed::Token;
use crate::{AnyBackend, Cuda, Error, Outcome};

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
}
