//! The front check of each algorithm: every contract between its parameters and its environment,
//! in one place, before dispatch.
//!
//! Like CUB's single front function, an algorithm calls exactly one function of this module
//! first. Relations that the types can decide (a static `k` above every segment size the types
//! allow, a parameter contradicting a static guarantee) are compile errors raised here, at the
//! call site, rather than deep inside dispatch; everything else is checked once at run time and
//! reported as a [`ParamError`] naming the parameter. What passes is the tightest knowledge about
//! each parameter, which dispatch uses to choose kernels.

use core::marker::PhantomData;
use oxicub_env::{merged_bounds, merged_static_bounds, Environment, Guarantees, Resolved};
use oxicub_params::role::{self, Role};
use oxicub_params::{
    Bounds, DiscreteParamFor, Param, ParamError, ParamFor, SelectDirection, SingleValue,
};

/// What is known about a single-problem top-k call once its contract holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TopKBounds {
    /// The tightest static bounds on `k` (type and static guarantees).
    pub k_static: Bounds,
    /// The tightest runtime bounds on `k`.
    pub k: Bounds,
    /// The number of items.
    pub num_items: i64,
    /// The requirements, defaults applied.
    pub requirements: Resolved,
}

/// Checks a single-problem top-k call: `k` is one value (static, uniform or deferred), and it
/// agrees with the environment's guarantees. `k > num_items` and `k = 0` are not contract
/// violations: they have documented results in the algorithm.
///
/// ```
/// use oxicub_algorithms::contract;
/// use oxicub_env::Env;
/// use oxicub_params::{guarantee::MaxK, k, Bounds};
///
/// let env = Env::new().guarantee(MaxK::<1024>::new());
/// let checked = contract::topk(1 << 20, &k::Static::<8>::new(), &env)?;
/// assert_eq!(checked.k, Bounds::exactly(8));
/// assert!(checked.requirements.pins_output());
/// # Ok::<(), oxicub_params::ParamError>(())
/// ```
pub fn topk<K, E>(num_items: i64, k: &K, env: &E) -> Result<TopKBounds, ParamError>
where
    K: ParamFor<role::K> + SingleValue,
    E: Environment,
{
    if num_items < 0 {
        return Err(ParamError::OutOfBounds {
            param: role::NumItems::NAME,
            value: num_items,
            bounds: Bounds::COUNTS,
            origin: oxicub_params::BoundOrigin::Static,
        });
    }
    Ok(TopKBounds {
        k_static: merged_static_bounds::<K, E::Guarantees>(),
        k: merged_bounds(k, env.guarantees())?,
        num_items,
        requirements: env.resolved(),
    })
}

/// What is known about a batched top-k call once its contract holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BatchedTopKBounds {
    /// The tightest static bounds on the segment sizes.
    pub segment_sizes_static: Bounds,
    /// The tightest static bounds on `k`.
    pub k_static: Bounds,
    /// The tightest runtime bounds on the segment sizes.
    pub segment_sizes: Bounds,
    /// The tightest runtime bounds on `k`.
    pub k: Bounds,
    /// The tightest runtime bounds on the number of segments.
    pub num_segments: Bounds,
    /// The select directions that can occur (one bit per [`SelectDirection`]).
    pub directions: u32,
    /// The bounds the environment's `TotalItems` guarantees put on the sum of the segment
    /// sizes ([`Bounds::COUNTS`] when there is none).
    pub total_items: Bounds,
    /// The requirements, defaults applied.
    pub requirements: Resolved,
}

/// The static part of the batched top-k contract, evaluated in `const` context.
struct BatchedTopKStatic<S, K, G>(PhantomData<(S, K, G)>);

impl<S: Param, K: Param, G: Guarantees> BatchedTopKStatic<S, K, G> {
    /// Every segment size the types allow is below every `k` the types allow: no segment could
    /// ever hold `k` items, which is a mistake in the types, not a data condition.
    const CHECKED: () = {
        let sizes = merged_static_bounds::<S, G>();
        let k = merged_static_bounds::<K, G>();
        assert!(
            k.min <= sizes.max,
            "oxicub: the static bounds of `k` start above the largest segment size the types \
             allow, so no segment can ever hold k items: lower k's bound or raise the \
             segment-size bound (type or `MaxSegmentSize` guarantee)"
        );
    };
}

/// Checks a batched top-k call: segment sizes, `k` and directions may each be static, uniform or
/// per segment; the number of segments is one value (host or deferred); static bounds are
/// consistent with each other and with the environment's guarantees.
///
/// ```
/// use oxicub_algorithms::contract;
/// use oxicub_env::{require, determinism, output_ordering};
/// use oxicub_params::{direction, k, num_segments, segment_size, Bounds};
///
/// // MoE routing: 16384 tokens x 256 experts, top-8.
/// let env = require!(determinism::NotGuaranteed, output_ordering::Unsorted);
/// let checked = contract::batched_topk(
///     &segment_size::Static::<256>::new(),
///     &k::Static::<8>::new(),
///     &direction::Max,
///     &num_segments::uniform(16_384)?,
///     &env,
/// )?;
/// assert_eq!((checked.k_static, checked.segment_sizes), (Bounds::exactly(8), Bounds::exactly(256)));
/// # Ok::<(), oxicub_params::ParamError>(())
/// ```
pub fn batched_topk<S, K, Dir, N, E>(
    segment_sizes: &S,
    k: &K,
    direction: &Dir,
    num_segments: &N,
    env: &E,
) -> Result<BatchedTopKBounds, ParamError>
where
    S: ParamFor<role::SegmentSize>,
    K: ParamFor<role::K>,
    Dir: DiscreteParamFor<SelectDirection>,
    N: ParamFor<role::NumSegments> + SingleValue,
    E: Environment,
{
    let () = BatchedTopKStatic::<S, K, E::Guarantees>::CHECKED;
    let _ = direction;
    let guarantees = env.guarantees();
    let total_role = role::RoleId::TotalItems;
    let total_items = <E::Guarantees as Guarantees>::STATIC[total_role as usize]
        .intersect(guarantees.runtime(total_role));
    if total_items.is_empty() {
        return Err(ParamError::ContradictoryGuarantees {
            param: "total_items",
            bounds: total_items,
        });
    }
    Ok(BatchedTopKBounds {
        segment_sizes_static: merged_static_bounds::<S, E::Guarantees>(),
        k_static: merged_static_bounds::<K, E::Guarantees>(),
        segment_sizes: merged_bounds(segment_sizes, guarantees)?,
        k: merged_bounds(k, guarantees)?,
        num_segments: merged_bounds(num_segments, guarantees)?,
        directions: Dir::OPTIONS,
        total_items,
        requirements: env.resolved(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxicub_env::{require, Env};
    use oxicub_params::guarantee::{MaxNumSegments, MaxSegmentSize};
    use oxicub_params::{direction, k, num_segments, segment_size};

    #[test]
    fn batched_topk_merges_every_source_of_knowledge() {
        let env = Env::new()
            .guarantee(MaxSegmentSize::<131_072>::new())
            .guarantee(MaxNumSegments::<1024>::new());
        let sizes = segment_size::PerSegment::<(), 1>::new(())
            .with_bounds(1, 200_000)
            .unwrap();
        let checked = batched_topk(
            &sizes,
            &k::Uniform::<1, 4096>::new(2048).unwrap(),
            &direction::Choice::<direction::Either>::new(SelectDirection::Min).unwrap(),
            &num_segments::uniform(64).unwrap(),
            &env,
        )
        .unwrap();
        assert_eq!(checked.segment_sizes_static, Bounds::new(1, 131_072));
        assert_eq!(checked.segment_sizes, Bounds::new(1, 131_072));
        assert_eq!(checked.k, Bounds::exactly(2048));
        assert_eq!(checked.num_segments, Bounds::exactly(64));
        assert_eq!(checked.directions, 0b11);
    }

    #[test]
    fn too_many_segments_for_the_guarantee_is_an_error_naming_num_segments() {
        let env = require!().guarantee(MaxNumSegments::<1024>::new());
        let err = batched_topk(
            &segment_size::Static::<64>::new(),
            &k::Static::<6>::new(),
            &direction::Max,
            &num_segments::uniform(4096).unwrap(),
            &env,
        )
        .unwrap_err();
        assert_eq!(err.param(), "num_segments");
        assert_eq!(
            err.to_string(),
            "num_segments = 4096 is outside the environment's guarantee [0, 1024]"
        );
    }

    #[test]
    fn negative_num_items_is_rejected() {
        let err = topk(-1, &k::Static::<1>::new(), &Env::new()).unwrap_err();
        assert_eq!(err.param(), "num_items");
    }
}
