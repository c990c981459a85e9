//! The front check of each algorithm: every contract between its parameters, its buffers and
//! its environment, in one place, before dispatch.
//!
//! Like CUB's single front function, an algorithm calls exactly one check of this module first.
//! Relations that the types can decide (a static `k` above every segment size the types allow,
//! a parameter contradicting a static guarantee, a value type with padding) are compile errors
//! raised here, at the call site, rather than deep inside dispatch; everything else is checked
//! once at run time and reported as an [`Error`] naming the argument and the
//! bound. What passes is the tightest knowledge about each parameter, which dispatch uses to
//! choose kernels, and a request that only this module can build: the backends and kernels run
//! nothing that has not passed it.
//!
//! The public functions ([`topk`], [`batched_topk`]) return the merged bounds of a call's
//! parameters, for callers that want to see what dispatch will know.

mod batched_topk;
pub(crate) mod segmented_sort;
pub(crate) mod sets;
mod topk;

pub use batched_topk::{batched_topk, BatchedTopKBounds};
pub(crate) use batched_topk::{
    checked_listed as checked_batched_topk_listed, BatchedTopKArgs, BatchedTopKArgsOn,
    BatchedTopKRequest, StaticTiers,
};
pub use segmented_sort::{SortOrdering, SortTieBreak};
pub(crate) use topk::{checked as checked_topk, direction_of, TopKBuffers, TopKRequest};
pub use topk::{topk, TopKBounds};

use oxicub_env::{Environment, Guarantees};
use oxicub_params::role::RoleId;
use oxicub_params::{BoundOrigin, Bounds, Param, ParamError};

use crate::Error;

/// The merged bounds of a segmented call's sizes and count: the part of the contract every
/// segmented algorithm shares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegmentBounds {
    /// The tightest runtime bounds on the segment sizes.
    pub(crate) sizes: Bounds,
    /// The bounds of the number of segments (a deferred count is checked against them).
    pub(crate) num_segments: DeferredBounds,
    /// The bounds the environment's `TotalItems` guarantees put on the sum of the segment sizes
    /// ([`Bounds::COUNTS`] when there is none).
    pub(crate) total_items: Bounds,
}

/// The bounds the environment's guarantees put on a quantity that is not a parameter of the
/// call (`num_items`, `total_items`): [`Bounds::COUNTS`] when there is none.
fn guaranteed_bounds<E: Environment>(
    role: RoleId,
    param: &'static str,
    env: &E,
) -> Result<Bounds, ParamError> {
    let bounds = <E::Guarantees as Guarantees>::STATIC[role as usize]
        .intersect(env.guarantees().runtime(role));
    if bounds.is_empty() {
        return Err(ParamError::ContradictoryGuarantees { param, bounds });
    }
    Ok(bounds)
}

/// The bounds the environment's `TotalItems` guarantees put on the sum of the segment sizes.
pub(crate) fn total_items_bounds<E: Environment>(env: &E) -> Result<Bounds, ParamError> {
    guaranteed_bounds(RoleId::TotalItems, "total_items", env)
}

/// The bounds the environment's `NumItems` guarantees put on the number of keys.
pub(crate) fn num_items_bounds<E: Environment>(env: &E) -> Result<Bounds, ParamError> {
    guaranteed_bounds(RoleId::NumItems, "num_items", env)
}

/// What a value read only while the call runs (a deferred parameter) is checked against: the
/// bounds of its type, the caller's runtime bounds, and those merged with the environment's
/// guarantees. Every backend clamps a value outside `merged` into it (so no buffer sized by
/// the bounds is overrun) and reports it, naming the bound it broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeferredBounds {
    /// The bounds of the parameter's type.
    pub(crate) type_bounds: Bounds,
    /// The caller's runtime bounds (within the type's).
    pub(crate) own: Bounds,
    /// The tightest bounds: the parameter's merged with the environment's guarantees.
    pub(crate) merged: Bounds,
}

impl DeferredBounds {
    /// The bounds of `param`, whose tightest bounds the contract found to be `merged`.
    pub(crate) fn of<P: Param>(param: &P, merged: Bounds) -> DeferredBounds {
        DeferredBounds {
            type_bounds: P::STATIC_BOUNDS,
            own: param.runtime_bounds(),
            merged,
        }
    }

    /// `value` clamped into the merged bounds, and the error to report when it was outside.
    pub(crate) fn resolve(&self, param: &'static str, value: i64) -> (i64, Option<Error>) {
        if self.merged.contains(value) {
            return (value, None);
        }
        let (bounds, origin) = if !self.type_bounds.contains(value) {
            (self.type_bounds, BoundOrigin::Static)
        } else if !self.own.contains(value) {
            (self.own, BoundOrigin::Runtime)
        } else {
            (self.merged, BoundOrigin::Guarantee)
        };
        let error = ParamError::OutOfBounds {
            param,
            value,
            bounds,
            origin,
        };
        let clamped = value.clamp(self.merged.min, self.merged.max);
        (clamped, Some(Error::Param(error)))
    }
}
