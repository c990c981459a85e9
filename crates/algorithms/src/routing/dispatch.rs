//! After the router, what a MoE dispatch needs: each expert's number of entries and the
//! entries grouped by expert ([`dispatch`]).

use oxicub_kernels::families::routing::ExpertId;
use oxicub_params::{num_segments, role, HostValue, ParamFor};

use super::{Router, RoutingBackend};
use crate::backend::Buffer;
use crate::sealed::Token;
use crate::{Error, Outcome};

/// A dispatch's values, checked, as the backends take them.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct DispatchRequest {
    pub(crate) experts: u32,
    pub(crate) k: u32,
}

impl DispatchRequest {
    /// The error for entry `entry`, whose id `id` names no expert.
    pub(crate) fn invalid_id(&self, entry: u64, id: i64) -> Error {
        let k = u64::from(self.k);
        Error::InvalidArgument {
            arg: "ids",
            reason: format!(
                "entry {entry} (token {}, choice {}) is {id}, not an expert id in 0..{}",
                entry / k,
                entry % k,
                self.experts
            ),
        }
    }
}

/// Groups the entries of a router's `ids` (`tokens * k`, as [`route`](super::route) wrote
/// them with the same `router`) by expert: each expert's number of entries into `out_counts`
/// (`experts` values), and the entries' indices into `out_order` (`ids.len()` values), expert 0's
/// first, each expert's in ascending order. Entry `order[j]` is token `order[j] / k`'s choice
/// number `order[j] % k` (its id and weight are `ids[order[j]]` and `weights[order[j]]`);
/// expert `e`'s entries start at the sum of `counts[..e]` (what a grouped GEMM takes as its
/// offsets). Ids, counts and order are of one type, `u32` or `i32`. The order is stable, so
/// every backend and every run writes the same values.
///
/// On [`Cuda`](crate::Cuda): one launch up to 4096 entries (512 tokens of 8), else three; its
/// scratch (a `u32` per 4096 entries and expert) comes from the backend's workspace when it
/// has one. Every id is checked there: [`Outcome::check`](crate::segments::Pending::check)
/// reports the first that names no expert.
///
/// Errors: ids that are not whole rows of `k` (`ParamError::NotWholeRows`); short outputs
/// ([`Error::BufferTooSmall`]); more entries than an `i32` order indexes
/// ([`Error::TooLarge`]); an id outside `0..experts` ([`Error::InvalidArgument`] naming `ids`,
/// the entry, its token and the id).
///
/// ```
/// use oxicub::routing::{self, scoring, Router};
/// use oxicub::params::{experts, k};
/// use oxicub::{Env, Host};
///
/// let router = Router::new(experts::Static::<4>::new(), k::Static::<2>::new(), scoring::Softmax);
/// let logits = [0.0f32, 1.0, 3.0, 2.0, /**/ 5.0, 0.0, 4.0, 1.0, /**/ 0.0, 0.0, 2.0, 9.0];
/// let (mut ids, mut weights) = ([0i32; 6], [0f32; 6]);
/// let host = Host::new();
/// routing::route(&host, &router, &logits[..], None, &mut ids[..], &mut weights[..], &Env::new())?.check()?;
/// assert_eq!(ids, [2, 3, /**/ 0, 2, /**/ 3, 2]);
///
/// let (mut counts, mut order) = ([0i32; 4], [0i32; 6]);
/// routing::dispatch(&host, &router, &ids[..], &mut counts[..], &mut order[..])?.check()?;
/// assert_eq!(counts, [1, 0, 3, 2]); // expert 2 serves all three tokens
/// assert_eq!(order, [2, /**/ 0, 3, 5, /**/ 1, 4]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn dispatch<B, I, E, G, T, K, S>(
    backend: &B,
    router: &Router<E, G, T, K, S>,
    ids: B::Slice<'_, I>,
    out_counts: B::SliceMut<'_, I>,
    out_order: B::SliceMut<'_, I>,
) -> Result<Outcome, Error>
where
    B: RoutingBackend,
    I: ExpertId,
    E: ParamFor<role::Experts> + HostValue,
    K: ParamFor<role::K> + HostValue,
{
    let values = [router.experts.value(), router.k.value()];
    let max_experts = i64::from(oxicub_kernels::families::routing::MAX_EXPERTS);
    let max_k = i64::from(oxicub_kernels::families::routing::MAX_PER_TOKEN);
    for (arg, value, max) in [("experts", values[0], max_experts), ("k", values[1], max_k)] {
        if !(1..=max).contains(&value) {
            return Err(Error::InvalidArgument {
                arg,
                reason: format!("{value} is outside 1..={max}"),
            });
        }
    }
    // Checked: both are in 1..=1024.
    let [experts, k] = values.map(|v| v as u32);
    num_segments::rows(ids.len(), k as usize)?;
    if ids.len() as u64 > I::MAX_INDEX {
        return Err(Error::TooLarge {
            arg: "ids",
            len: ids.len() as u64,
            max: I::MAX_INDEX,
            reason: "the order holds entry indices of the ids' type",
        });
    }
    for (arg, len, required, required_from) in [
        (
            "out_counts",
            out_counts.len(),
            experts as usize,
            "one count per expert",
        ),
        ("out_order", out_order.len(), ids.len(), "one per id"),
    ] {
        if len < required {
            return Err(Error::BufferTooSmall {
                arg,
                len,
                required,
                required_from,
            });
        }
    }
    let request = DispatchRequest { experts, k };
    backend.dispatch_checked(Token::new(), &request, ids, out_counts, out_order)
}
