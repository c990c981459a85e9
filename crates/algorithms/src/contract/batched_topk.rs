//! The contract of batched top-k: the segmented problem's checks, then `k`, the directions,
//! the outputs and the kernel tiers the static bounds allow.

use core::marker::PhantomData;

use oxicub_env::{merged_bounds, merged_static_bounds, Environment, Guarantees, Resolved};
use oxicub_kernels::families::batched_topk::{BatchedTiers, WARP_MAX_SIZE};
use oxicub_params::role;
use oxicub_params::{
    Bounds, DiscreteParam, DiscreteParamFor, Param, ParamError, ParamFor, SelectDirection,
    SingleValue,
};

use super::{total_items_bounds, DeferredBounds, SegmentBounds};
use crate::backend::{
    Backend, Buffer, ChoiceValues, ChoicesOn, ParamValues, PerSegmentOn, ValuesOn,
};
use crate::batched_topk::{Problem, ProblemOn};
use crate::sealed::{Sealed, Token};

impl<L, S, K, D, N> Sealed for Problem<L, S, K, D, N> {}
use crate::segments::{self, check_per_segment, Layout, Listed, SegmentArgs, SegmentsRequest};
use crate::Error;

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
/// use oxicub::contract;
/// use oxicub::env::{require, determinism, output_ordering};
/// use oxicub::params::{direction, k, num_segments, segment_size, Bounds};
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
/// # Ok::<(), oxicub::params::ParamError>(())
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
    let total_items = total_items_bounds(env)?;
    let guarantees = env.guarantees();
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

/// The kernels a call may need, from the static bounds of its parameter types alone: a
/// constant, so what the types exclude is never compiled.
pub(crate) struct StaticTiers<S, K, G>(PhantomData<(S, K, G)>);

impl<S: Param, K: Param, G: Guarantees> StaticTiers<S, K, G> {
    pub(crate) const SIZES: Bounds = merged_static_bounds::<S, G>();
    pub(crate) const K: Bounds = merged_static_bounds::<K, G>();
    pub(crate) const TIERS: BatchedTiers = BatchedTiers::for_bounds(
        (Self::SIZES.min, Self::SIZES.max),
        (Self::K.min, Self::K.max),
    );
    pub(crate) const WARP_ITEMS: u32 =
        BatchedTiers::warp_items(if Self::SIZES.max < WARP_MAX_SIZE {
            Self::SIZES.max
        } else {
            WARP_MAX_SIZE
        });
}

/// One checked batched top-k call, as the backends receive it. Only the front check
/// ([`ProblemOn::checked`]) builds one.
#[derive(Clone, Copy, Debug)]
pub struct BatchedTopKRequest {
    /// The segments.
    pub(crate) segments: SegmentsRequest,
    /// The requirements, defaults applied.
    pub(crate) requirements: Resolved,
    /// The tightest bounds of `k`.
    pub(crate) k: Bounds,
    /// The directions that may occur (one bit per [`SelectDirection`]).
    pub(crate) directions: u32,
    /// The most items one segment may write.
    pub(crate) per_segment_max: u64,
    /// Distance between consecutive segments' outputs.
    pub(crate) out_stride: u64,
    /// The tiers the static bounds allow (a constant of the parameter types).
    pub(crate) static_tiers: BatchedTiers,
    /// Keys per lane of the warp tier (a constant of the parameter types).
    pub(crate) warp_items: u32,
    /// A segment whose `k` is above its size is invalid, not clamped.
    pub(crate) reject_k_above_size: bool,
    /// The problem's fill of the slots past each segment's results.
    pub(crate) fill: Option<crate::batched_topk::FillPastK>,
    /// That fill for the call's key and index types (set by the entry point).
    pub(crate) fill_bits: Option<oxicub_kernels::families::batched_topk::BatchedFill>,
}

impl BatchedTopKRequest {
    /// The output length the call needs: `(n - 1) * out_stride + per_segment_max`.
    pub(crate) fn out_len(&self) -> u64 {
        match self.segments.max_segments.checked_sub(1) {
            Some(last) if self.per_segment_max > 0 => last
                .saturating_mul(self.out_stride)
                .saturating_add(self.per_segment_max),
            _ => 0,
        }
    }

    /// The tiers this call runs: those its static bounds allow (decided at compile time), less
    /// those its runtime bounds exclude.
    pub(crate) fn tiers(&self) -> BatchedTiers {
        let sizes = self.segments.sizes;
        let largest = (sizes.max.max(0) as u64).min(self.segments.num_keys) as i64;
        let runtime = BatchedTiers::for_bounds((sizes.min, largest), (self.k.min, self.k.max));
        self.static_tiers.and(runtime)
    }
}

/// Every per-segment argument of one call; `I`, `N` and `J` are the backend's buffers of
/// `i64`s, of `i32`s and of bytes.
#[derive(Clone, Copy, Debug)]
pub struct BatchedTopKArgs<I, N, J> {
    /// The layout, sizes and number of segments.
    pub(crate) segments: SegmentArgs<I, N>,
    /// `k`.
    pub(crate) k: ParamValues<I, N>,
    /// The directions.
    pub(crate) direction: ChoiceValues<J, SelectDirection>,
}

/// [`BatchedTopKArgs`] as backend `B` reads them.
pub type BatchedTopKArgsOn<'r, B> = BatchedTopKArgs<
    <B as Backend>::Values<'r, i64>,
    <B as Backend>::Values<'r, i32>,
    <B as Backend>::Values<'r, u8>,
>;

impl<B, L, S, Kp, D, N> ProblemOn<B> for Problem<L, S, Kp, D, N>
where
    B: Backend + ?Sized,
    L: Layout<B>,
    S: ParamFor<role::SegmentSize> + PerSegmentOn<B>,
    Kp: ParamFor<role::K> + PerSegmentOn<B>,
    D: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection> + ChoicesOn<B>,
    N: ParamFor<role::NumSegments> + SingleValue + ValuesOn<B>,
{
    /// The front check of every batched top-k entry point: [`batched_topk`]'s contract, the
    /// segments, `k` and the directions' buffers, and each output's length against what the
    /// call may write. `num_keys` is `keys.len()` (listed: the slices' total).
    fn checked<E: Environment>(
        &self,
        _: Token,
        num_keys: usize,
        env: &E,
        outputs: &[(&'static str, usize)],
    ) -> Result<(BatchedTopKRequest, BatchedTopKArgsOn<'_, B>), Error> {
        let problem = self;
        let bounds = batched_topk(
            &problem.segments.sizes,
            &problem.k,
            &problem.direction,
            &problem.segments.num_segments,
            env,
        )?;
        let segment_bounds = SegmentBounds {
            sizes: bounds.segment_sizes,
            num_segments: DeferredBounds::of(&problem.segments.num_segments, bounds.num_segments),
            total_items: bounds.total_items,
        };
        let (segments, segment_args) =
            segments::check(&problem.segments, segment_bounds, num_keys)?;
        let args = BatchedTopKArgs {
            segments: segment_args,
            k: problem.k.values(),
            direction: problem.direction.choices(),
        };
        // The most items one segment can hold, then write.
        let mut per_segment_max = segments.largest.min(bounds.k.max as u64);
        if let ParamValues::Host(k) = args.k {
            per_segment_max = per_segment_max.min(k as u64);
        }
        let out_stride = match problem.out_stride {
            None => per_segment_max,
            Some(stride) if stride >= per_segment_max => stride,
            Some(stride) => {
                return Err(Error::InvalidArgument {
                    arg: "out_stride",
                    reason: format!(
                        "{stride} is smaller than the most one segment can write \
                         ({per_segment_max})"
                    ),
                })
            }
        };
        segments::check_buffers(&segments, &args.segments)?;
        if let Some(len) = args.k.per_segment_len() {
            check_per_segment("k", len, &segments)?;
        }
        if let ChoiceValues::PerSegment(directions) = args.direction {
            check_per_segment("direction", directions.len(), &segments)?;
        }
        let request = BatchedTopKRequest {
            segments,
            requirements: bounds.requirements,
            k: bounds.k,
            directions: bounds.directions,
            per_segment_max,
            out_stride,
            static_tiers: StaticTiers::<S, Kp, E::Guarantees>::TIERS,
            warp_items: StaticTiers::<S, Kp, E::Guarantees>::WARP_ITEMS,
            reject_k_above_size: problem.reject_k_above_size,
            fill: problem.fill,
            fill_bits: None,
        };
        let required = request.out_len();
        for &(arg, len) in outputs {
            if (len as u64) < required {
                return Err(Error::BufferTooSmall {
                    arg,
                    len,
                    required: required.min(usize::MAX as u64) as usize,
                    required_from: "(num_segments - 1) * out_stride + min(k, segment size)",
                });
            }
        }
        segments::check_deferred("num_segments", &args.segments.num_segments)?;
        Ok((request, args))
    }
}

/// [`ProblemOn::checked`] for a listed layout: the slices' lengths as the keys', then the
/// list's length.
pub(crate) fn checked_listed<'p, B, S, Kp, D, N, E>(
    problem: &'p Problem<Listed, S, Kp, D, N>,
    segments: &[impl Buffer],
    env: &E,
    outputs: &[(&'static str, usize)],
) -> Result<(BatchedTopKRequest, BatchedTopKArgsOn<'p, B>), Error>
where
    B: Backend + ?Sized,
    Problem<Listed, S, Kp, D, N>: ProblemOn<B>,
    E: Environment,
{
    // As the offsets layout over the slices joined: the total bounds every segment.
    let total = segments::listed::joined_len(segments);
    let (request, args) = problem.checked(Token::new(), total, env, outputs)?;
    check_per_segment("segments", segments.len(), &request.segments)?;
    Ok((request, args))
}
