//! MoE routing as one call: the routers of current models (DeepSeek-V3's grouped `noaux_tc`,
//! biased sigmoid without groups, softmax, `sqrt(softplus)`), from a token's logits to its
//! experts and their weights, fused.
//!
//! A [`Router`] holds the configuration as parameter types: `Static` where the model fixes a
//! value (a configuration that can never work is a compile error), `Uniform` where it is read
//! at run time (checked at the call). [`route`] writes each token's `k` expert ids, best first,
//! and their weights; [`dispatch`] then groups the tokens by expert (each expert's count and
//! the token order a MoE dispatch needs next). The routes equal the oracle written from the
//! model code step by step (`oxicub_test::routing`) bit for bit for the ids and within 1 ulp
//! for the weights, on every backend: the scores use oxicub's deterministic functions (`oxicub::kernels::math`), and the
//! sums are taken in a fixed order (docs/design/routing.md).
//!
//! Ties go to the smaller expert id (and group), as the environment's default tie-break says;
//! NaN logits rank above every number (under softmax a NaN logit makes every score of its token
//! NaN: its ids are then the first `k`).
//!
//! ```
//! use oxicub::routing::{self, scoring, Router};
//! use oxicub::params::{experts, groups, k, top_groups};
//! use oxicub::{Env, Host};
//!
//! // DeepSeek-V3's router: 256 experts in 8 groups, the best 4 groups, top 8, renormalised,
//! // times 2.5; the correction bias chooses but does not weight.
//! let router = Router::grouped(
//!     experts::Static::<256>::new(),
//!     groups::Static::<8>::new(),
//!     top_groups::Static::<4>::new(),
//!     k::Static::<8>::new(),
//!     scoring::Sigmoid,
//! )
//! .renormalize()
//! .scale(2.5);
//! let logits: Vec<f32> = (0..2 * 256).map(|i| ((i * 37) % 101) as f32 / 25.0 - 2.0).collect();
//! let bias = vec![0.01f32; 256];
//! let (mut ids, mut weights) = ([0u32; 16], [0f32; 16]);
//! routing::route(&Host::new(), &router, &logits[..], Some(&bias[..]), &mut ids[..], &mut weights[..], &Env::new())?
//!     .check()?;
//! assert!((weights[..8].iter().sum::<f32>() - 2.5).abs() < 1e-5);
//! # Ok::<(), oxicub::Error>(())
//! ```

mod cuda;
mod dispatch;
mod host;

pub use dispatch::{dispatch, DispatchRequest};

use std::marker::PhantomData;

use oxicub_env::{tie_break, Environment};
use oxicub_kernels::families::routing::{router_violation, ExpertId, RouterConfig, Scoring};
use oxicub_params::{num_segments, role, HostValue, Param, ParamFor};

use crate::backend::{Backend, Buffer};
use crate::radix::RadixKey;
use crate::sealed::{Sealed, Token};
use crate::{Error, Outcome};

/// How a router scores its experts, as types: [`scoring::Sigmoid`], [`scoring::Softmax`],
/// [`scoring::SqrtSoftplus`].
pub mod scoring {
    use super::{Scoring, Sealed};

    /// A router's scores.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a router's scoring",
        note = "pass `scoring::Sigmoid`, `scoring::Softmax` or `scoring::SqrtSoftplus` from \
                `oxicub::routing::scoring`"
    )]
    pub trait ScoringFn: Sealed + Copy {
        /// The scoring, as the kernel numbers it.
        const SCORING: Scoring;
    }

    macro_rules! scorings {
        ($($(#[$doc:meta])* $ty:ident;)*) => {$(
            $(#[$doc])*
            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
            pub struct $ty;
            impl Sealed for $ty {}
            impl ScoringFn for $ty {
                const SCORING: Scoring = Scoring::$ty;
            }
        )*};
    }

    scorings! {
        /// `sigmoid(logit)` (DeepSeek-V3, GLM, Kimi).
        Sigmoid;
        /// `softmax` over the token's experts (Mixtral, Qwen).
        Softmax;
        /// `sqrt(softplus(logit))` (DeepSeek-V4 style).
        SqrtSoftplus;
    }
}

use scoring::ScoringFn;

/// A logit type a router reads: `f32`, `half::f16` or `half::bf16`.
#[diagnostic::on_unimplemented(
    message = "a router reads f32, f16 or bf16 logits, not `{Self}`",
    note = "convert the logits to f32, half::f16 or half::bf16"
)]
pub trait Logit: RadixKey + logit::Sealed {
    /// The logit as an exact `f32`.
    #[doc(hidden)]
    fn to_f32(self) -> f32;
}

/// Seals [`Logit`] (its own seal: the crate's seals other contracts).
mod logit {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

impl Logit for f32 {
    fn to_f32(self) -> f32 {
        self
    }
}
impl Logit for half::f16 {
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
}
impl Logit for half::bf16 {
    fn to_f32(self) -> f32 {
        half::bf16::to_f32(self)
    }
}

/// The tie-breaks a router keeps: ties go to the smaller expert id and group.
#[diagnostic::on_unimplemented(
    message = "a router resolves ties to the smaller expert id: the tie-break `{Self}` \
               contradicts it",
    label = "the environment requires it",
    note = "remove the tie-break, or require `tie_break::PreferSmallerIndex`"
)]
pub trait RoutingTieBreak: Sealed {}
impl RoutingTieBreak for tie_break::Unspecified {}
impl RoutingTieBreak for tie_break::PreferSmallerIndex {}

/// A router's configuration: its experts, groups, kept groups, `k` and scores as parameter types
/// (`Static` or `Uniform` from `oxicub::params::{experts, groups, top_groups, k}`), whether the
/// weights are renormalised, and their scale.
///
/// ```
/// use oxicub::routing::{scoring, Router};
/// use oxicub::params::{experts, k};
///
/// // Mixtral: softmax, top 2 of 8, renormalised.
/// let mixtral = Router::new(experts::Static::<8>::new(), k::Static::<2>::new(), scoring::Softmax).renormalize();
/// # let _ = mixtral;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Router<E, G, T, K, S> {
    experts: E,
    groups: G,
    top_groups: T,
    k: K,
    scoring: S,
    renormalize: bool,
    scale: f32,
}

impl<E, K, S>
    Router<E, oxicub_params::groups::Static<1>, oxicub_params::top_groups::Static<1>, K, S>
{
    /// A router without groups: the `k` best of `experts` by `scoring`; weights not
    /// renormalised, scale 1.
    pub fn new(experts: E, k: K, scoring: S) -> Self {
        Router::grouped(
            experts,
            oxicub_params::groups::Static::new(),
            oxicub_params::top_groups::Static::new(),
            k,
            scoring,
        )
    }
}

impl<E, G, T, K, S> Router<E, G, T, K, S> {
    /// A router whose `experts` form `groups` equal groups (in order), of which the
    /// `top_groups` best per token are kept (a group's score: the sum of its two best biased
    /// scores when the call has a bias, as DeepSeek-V3's `noaux_tc`; its best score without
    /// one, as DeepSeek-V2's `group_limited_greedy`); the `k` best of the kept experts are
    /// chosen.
    pub fn grouped(experts: E, groups: G, top_groups: T, k: K, scoring: S) -> Self {
        Router {
            experts,
            groups,
            top_groups,
            k,
            scoring,
            renormalize: false,
            scale: 1.0,
        }
    }

    /// The chosen experts' weights divided by their sum (plus `1e-20`), when `k > 1`
    /// (`norm_topk_prob`, as DeepSeek's code applies it: a top-1 weight stays the score, where
    /// Qwen's code would make it 1).
    pub fn renormalize(mut self) -> Self {
        self.renormalize = true;
        self
    }

    /// Every weight multiplied by `scale` last (`routed_scaling_factor`).
    pub fn scale(mut self, scale: f32) -> Self {
        self.scale = scale;
        self
    }
}

/// DeepSeek-V3's router as its configuration fixes it: 256 experts in 8 groups, the best 4
/// groups kept, top 8, sigmoid scores (`topk_method = noaux_tc`).
pub type DeepSeekV3 = Router<
    oxicub_params::experts::Static<256>,
    oxicub_params::groups::Static<8>,
    oxicub_params::top_groups::Static<4>,
    oxicub_params::k::Static<8>,
    scoring::Sigmoid,
>;

impl DeepSeekV3 {
    /// DeepSeek-V3's router: 256 experts in 8 groups, the best 4 groups kept, top 8, sigmoid
    /// scores, weights renormalised (`norm_topk_prob`) and times 2.5
    /// (`routed_scaling_factor`); the call's bias is its `e_score_correction_bias`.
    ///
    /// ```
    /// use oxicub::routing::{self, DeepSeekV3};
    /// use oxicub::{Env, Host};
    ///
    /// let logits = vec![0.25f32; 2 * 256]; // 2 tokens, all equal: the smallest ids
    /// let (mut ids, mut weights) = ([0u32; 16], [0f32; 16]);
    /// routing::route(&Host::new(), &DeepSeekV3::deepseek_v3(), &logits[..], Some(&[0.0f32; 256][..]), &mut ids[..], &mut weights[..], &Env::new())?.check()?;
    /// assert_eq!(ids[..8], [0, 1, 2, 3, 4, 5, 6, 7]);
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn deepseek_v3() -> DeepSeekV3 {
        Router::grouped(
            oxicub_params::experts::Static::new(),
            oxicub_params::groups::Static::new(),
            oxicub_params::top_groups::Static::new(),
            oxicub_params::k::Static::new(),
            scoring::Sigmoid,
        )
        .renormalize()
        .scale(2.5)
    }
}

/// The static part of a router's contract, evaluated in `const` context: a configuration the
/// types allow no valid value of is a compile error.
struct RouterStatic<E, G, T, K>(PhantomData<(E, G, T, K)>);

impl<E: Param, G: Param, T: Param, K: Param> RouterStatic<E, G, T, K> {
    const CHECKED: () = {
        let max_experts = oxicub_kernels::families::routing::MAX_EXPERTS as i64;
        let max_per_token = oxicub_kernels::families::routing::MAX_PER_TOKEN as i64;
        assert!(
            E::STATIC_MAX >= 1 && E::STATIC_MIN <= max_experts,
            "oxicub: a router takes 1 to 1024 experts: the bounds of `experts` allow none"
        );
        assert!(
            G::STATIC_MAX >= 1 && G::STATIC_MIN <= max_per_token,
            "oxicub: a router takes 1 to 32 groups: the bounds of `groups` allow none"
        );
        assert!(
            T::STATIC_MAX >= 1 && T::STATIC_MIN <= G::STATIC_MAX,
            "oxicub: `top_groups` must be 1 to `groups`: their bounds allow no such value"
        );
        assert!(
            K::STATIC_MAX >= 1 && K::STATIC_MIN <= max_per_token,
            "oxicub: a router chooses 1 to 32 experts per token: the bounds of `k` allow none"
        );
        assert!(
            !(E::STATIC_MIN == E::STATIC_MAX
                && G::STATIC_MIN == G::STATIC_MAX
                && G::STATIC_MIN > 0
                && E::STATIC_MIN % G::STATIC_MIN != 0),
            "oxicub: the static `groups` does not divide the static `experts`, so the groups \
             cannot be equal: choose a divisor (DeepSeek-V3: 8 groups of 32 of 256 experts)"
        );
        assert!(
            G::STATIC_MIN < 1
                || K::STATIC_MIN <= T::STATIC_MAX.saturating_mul(E::STATIC_MAX / G::STATIC_MIN),
            "oxicub: the static bounds of `k` start above the experts the kept groups can hold \
             (top_groups x experts / groups): lower `k` or keep more groups"
        );
    };
}

/// A checked router: its values, as the backends take them.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct RouteRequest {
    pub(crate) config: RouterConfig,
    pub(crate) tokens: u64,
}

/// A backend that routes and dispatches: [`Host`](crate::Host), [`Cuda`](crate::Cuda) and
/// [`AnyBackend`](crate::AnyBackend).
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not route",
    note = "routing runs on `Host`, `Cuda` and `AnyBackend`"
)]
pub trait RoutingBackend: Backend {
    /// A route after the front check (only [`route`] builds a request).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn route_checked<L: Logit, I: ExpertId>(
        &self,
        token: Token,
        request: &RouteRequest,
        logits: Self::Slice<'_, L>,
        bias: Option<Self::Slice<'_, f32>>,
        ids: Self::SliceMut<'_, I>,
        weights: Self::SliceMut<'_, f32>,
    ) -> Result<Outcome, Error>;

    /// A dispatch after the front check (only [`dispatch`] builds a request).
    #[doc(hidden)]
    fn dispatch_checked<I: ExpertId>(
        &self,
        token: Token,
        request: &DispatchRequest,
        ids: Self::Slice<'_, I>,
        counts: Self::SliceMut<'_, I>,
        order: Self::SliceMut<'_, I>,
    ) -> Result<Outcome, Error>;
}

/// Routes every token of `logits` (rows of the router's `experts`; `f32`, `f16` or `bf16`):
/// each token's `k` expert ids, best first, into `out_ids` (`u32` or `i32`), and their weights
/// into `out_weights` (`tokens * k` each, `tokens = logits.len() / experts`). `bias` (at least
/// `experts` values) is added to the scores to choose the experts and groups, never to the
/// weights (DeepSeek-V3's `e_score_correction_bias`).
///
/// Step by step: scores; biased scores; with groups, each group's score is the sum of its two
/// best biased scores (its best score when there is no bias), the `top_groups` best groups are
/// kept and every other expert is excluded
/// (as `-inf`: biased scores can be negative); the `k` best biased scores give the ids; the
/// weights are the unbiased scores of those experts, renormalised if asked (and `k > 1`), then
/// scaled. On [`Cuda`](crate::Cuda) one kernel, a warp per token, with nothing to report from
/// the device (the outcome is ready) and nothing allocated (graph-capturable).
///
/// Errors: a logits length that is not whole rows (`ParamError::NotWholeRows`), a value outside
/// the kernel's limits or inconsistent (`groups` not dividing `experts`, `top_groups` above
/// `groups`, `k` above the kept experts), short outputs or bias ([`Error::BufferTooSmall`]).
#[allow(clippy::too_many_arguments)]
pub fn route<B, L, I, E, G, T, K, S, En>(
    backend: &B,
    router: &Router<E, G, T, K, S>,
    logits: B::Slice<'_, L>,
    bias: Option<B::Slice<'_, f32>>,
    out_ids: B::SliceMut<'_, I>,
    out_weights: B::SliceMut<'_, f32>,
    env: &En,
) -> Result<Outcome, Error>
where
    B: RoutingBackend,
    L: Logit,
    I: ExpertId,
    E: ParamFor<role::Experts> + HostValue,
    G: ParamFor<role::Groups> + HostValue,
    T: ParamFor<role::TopGroups> + HostValue,
    K: ParamFor<role::K> + HostValue,
    S: ScoringFn,
    En: Environment,
    En::TieBreak: RoutingTieBreak,
{
    let () = RouterStatic::<E, G, T, K>::CHECKED;
    let _ = (env, router.scoring);
    let values = [
        router.experts.value(),
        router.groups.value(),
        router.top_groups.value(),
        router.k.value(),
    ];
    if let Some((arg, reason)) = router_violation(values[0], values[1], values[2], values[3]) {
        return Err(Error::InvalidArgument { arg, reason });
    }
    // Checked: each value is in 1..=1024.
    let [experts, groups, top_groups, k] = values.map(|v| v as u32);
    let tokens = num_segments::rows(logits.len(), experts as usize)?.get() as u64;
    if let Some(bias) = &bias {
        if bias.len() < experts as usize {
            return Err(Error::BufferTooSmall {
                arg: "bias",
                len: bias.len(),
                required: experts as usize,
                required_from: "one bias per expert",
            });
        }
    }
    let out = (tokens * u64::from(k)) as usize;
    for (arg, len) in [
        ("out_ids", out_ids.len()),
        ("out_weights", out_weights.len()),
    ] {
        if len < out {
            return Err(Error::BufferTooSmall {
                arg,
                len,
                required: out,
                required_from: "tokens x k",
            });
        }
    }
    let request = RouteRequest {
        config: RouterConfig {
            experts,
            groups,
            top_groups,
            k,
            scoring: S::SCORING,
            renormalize: router.renormalize,
            scale: router.scale,
        },
        tokens,
    };
    backend.route_checked(Token::new(), &request, logits, bias, out_ids, out_weights)
}
