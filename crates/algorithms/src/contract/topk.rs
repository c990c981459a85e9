//! The contract of single-problem top-k.

use oxicub_env::{merged_bounds, merged_static_bounds, Environment, Resolved};
use oxicub_params::role::{self, Role};
use oxicub_params::{
    BoundOrigin, Bounds, DiscreteParam, Param, ParamError, ParamFor, SelectDirection, SingleValue,
};

use super::{num_items_bounds, DeferredBounds};
use crate::backend::{Backend, ValuesOn};
use crate::Error;

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
/// and `num_items` agree with the environment's guarantees (`MaxK`, `MaxNumItems`, ...).
/// `k > num_items` and `k = 0` are not contract violations: they have documented results in
/// the algorithm.
///
/// ```
/// use oxicub::contract;
/// use oxicub::env::Env;
/// use oxicub::params::{guarantee::MaxK, k, Bounds};
///
/// let env = Env::new().guarantee(MaxK::<1024>::new());
/// let checked = contract::topk(1 << 20, &k::Static::<8>::new(), &env)?;
/// assert_eq!(checked.k, Bounds::exactly(8));
/// assert!(checked.requirements.pins_output());
/// # Ok::<(), oxicub::params::ParamError>(())
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
    let guaranteed = num_items_bounds(env)?;
    if !guaranteed.contains(num_items) {
        return Err(ParamError::OutOfBounds {
            param: role::NumItems::NAME,
            value: num_items,
            bounds: guaranteed,
            origin: oxicub_params::BoundOrigin::Guarantee,
        });
    }
    Ok(TopKBounds {
        k_static: merged_static_bounds::<K, E::Guarantees>(),
        k: merged_bounds(k, env.guarantees())?,
        num_items,
        requirements: env.resolved(),
    })
}

/// One checked top-k call, as the backends receive it. Only [`checked`] builds one.
#[derive(Clone, Copy, Debug)]
pub struct TopKRequest {
    /// Max or min.
    pub(crate) direction: SelectDirection,
    /// The requirements, defaults applied.
    pub(crate) requirements: Resolved,
    /// `keys.len()`.
    pub(crate) num_items: u64,
    /// The bounds of `k` (a deferred `k` is checked against them; `merged`: the tightest).
    pub(crate) k: DeferredBounds,
    /// The most items the call may write: `min(k.merged.max, num_items)`.
    pub(crate) max_written: u64,
}

/// The buffers of a top-k call, by length.
pub(crate) struct TopKBuffers<'a> {
    /// `keys.len()`.
    pub(crate) keys: usize,
    /// `values.len()`, for pairs.
    pub(crate) values: Option<usize>,
    /// The most items the index type holds, for source indices (`SourceIndex::MAX_ITEMS`).
    pub(crate) index_limit: Option<u64>,
    /// The output buffers the call writes (none for the `*_owned` functions).
    pub(crate) outputs: &'a [(&'static str, usize)],
}

/// The front check of every single-problem top-k entry point: [`topk`], then `k` against
/// `num_items`, the values' and outputs' lengths. Returns the request.
pub(crate) fn checked<B, Kp, E>(
    buffers: TopKBuffers<'_>,
    k: &Kp,
    env: &E,
    direction: SelectDirection,
) -> Result<TopKRequest, Error>
where
    B: Backend + ?Sized,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    let num_items = buffers.keys;
    let n = Error::item_count(num_items)?;
    let checked = topk(n, k, env)?;
    let not_above_n = |value: i64| {
        if value > n {
            Err(ParamError::OutOfBounds {
                param: <Kp as Param>::NAME,
                value,
                bounds: Bounds::new(0, n),
                origin: BoundOrigin::Runtime,
            })
        } else {
            Ok(())
        }
    };
    match k.host_value() {
        Some(value) => not_above_n(value)?,
        None => not_above_n(checked.k.min)?,
    }
    let request = TopKRequest {
        direction,
        requirements: checked.requirements,
        num_items: num_items as u64,
        k: DeferredBounds::of(k, checked.k),
        max_written: (checked.k.max as u64).min(num_items as u64),
    };
    if let Some(max) = buffers.index_limit {
        if request.num_items > max {
            return Err(Error::TooLarge {
                arg: "keys",
                len: request.num_items,
                max,
                reason: "the index type cannot hold every source index; use u64 or i64 indices",
            });
        }
    }
    if let Some(values) = buffers.values {
        Error::check_len("values", values, num_items, "keys.len()")?;
    }
    for &(arg, len) in buffers.outputs {
        if (len as u64) < request.max_written {
            return Err(Error::BufferTooSmall {
                arg,
                len,
                required: request.max_written as usize,
                required_from: "min(k, keys.len())",
            });
        }
    }
    crate::segments::check_deferred("k", &k.values())?;
    Ok(request)
}

/// The one direction of a single-problem call, known on the host.
pub(crate) fn direction_of<Dir: DiscreteParam<Option = SelectDirection>>(
    direction: &Dir,
) -> Result<SelectDirection, Error> {
    direction.host_value().ok_or(Error::InvalidArgument {
        arg: "direction",
        reason: "single-problem top-k takes one direction known on the host \
                 (direction::Max, direction::Min or direction::Choice)"
            .to_owned(),
    })
}
