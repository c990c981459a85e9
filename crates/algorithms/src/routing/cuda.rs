//! Routing on the GPU: the `routing` kernel family, one launch, nothing allocated and nothing
//! to report from the device.

use cudarc::driver::{CudaView, CudaViewMut};
use oxicub_kernels::families::routing::{route, ExpertId};

use super::{Logit, RouteRequest, RoutingBackend};
use crate::sealed::Token;
use crate::{Cuda, Error, Outcome};

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
