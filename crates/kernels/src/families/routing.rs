//! Family `routing` (`cuda/routing/`): MoE routers, a warp per token, with the oracle's rounding
//! (docs/design/routing.md, "Kernel"): DeepSeek-V3's grouped sigmoid routing with a correction
//! bias, ungrouped sigmoid, softmax and `sqrt(softplus)` scores, top-k, renormalised and scaled
//! weights.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, SyncOnDrop};

use crate::codegen::{device_constants, kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::families::{at_least, keep};
use crate::radix::{KeyType, RadixKey};
use crate::runtime::LaunchOrder;
use crate::{KernelError, KernelFamily, KernelRuntime, KernelSpec, Tier};

/// Threads per block: four tokens at a time.
const BLOCK_THREADS: u32 = 128;

/// The most experts a router takes: 32 per lane.
pub const MAX_EXPERTS: u32 = 1024;
/// The most groups, top groups and experts chosen per token: one lane each.
pub const MAX_PER_TOKEN: u32 = 32;

device_constants! {
    /// The constants the routing launcher and its kernel share.
    pub(crate) static ROUTING_CONSTANTS;

    /// Flag (`params.flags`): the chosen experts' weights are divided by their sum (when
    /// `k > 1`).
    pub(crate) const ROUTING_RENORMALIZE: u32 = 1;
}

kernel_params! {
    /// Parameters of `routing` (device pointers as `u64`).
    struct RoutingParams {
        /// `tokens * experts` logits (f32, f16 or bf16 bits).
        logits: u64,
        /// `experts` f32 biases added to the scores to choose, or 0 for none.
        bias: u64,
        /// `tokens * k` expert ids (u32).
        ids: u64,
        /// `tokens * k` weights (f32).
        weights: u64,
        tokens: u64,
        experts: u32,
        groups: u32,
        top_groups: u32,
        k: u32,
        /// ROUTING_* flags.
        flags: u32,
        /// The scale, as f32 bits.
        scale_bits: u32,
    }
}

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "routing",
    header: concat!(
        include_str!("../../cuda/core/math.cuh"),
        include_str!("../../cuda/routing/routing.cuh")
    ),
    constants: &[&ROUTING_CONSTANTS],
    params_name: RoutingParams::CXX_NAME,
    params_declaration: RoutingParams::cxx_declaration,
    template_args: &[
        TemplateArg::Key,
        TemplateArg::BlockThreads,
        TemplateArg::Const("PER_LANE"),
        TemplateArg::Const("SCORING"),
    ],
    static_shared_bytes: |_| 0,
};

/// An expert id type the kernels write and read: `u32` or `i32` (the same bits: ids are below
/// [`MAX_EXPERTS`]); a dispatch's counts and entry indices are of the same type.
pub trait ExpertId:
    cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
    + Copy
    + Default
    + Send
    + Sync
    + sealed::Sealed
{
    /// The largest index a value of this type holds (a dispatch's entry indices).
    const MAX_INDEX: u64;

    /// `index` (at most [`MAX_INDEX`](ExpertId::MAX_INDEX)) as this type.
    fn from_index(index: u32) -> Self;

    /// Its bits.
    fn to_bits(self) -> u32;

    /// A value of this type, given its bits (an `i32` may be negative).
    fn id_value(bits: u32) -> i64;
}
impl ExpertId for u32 {
    const MAX_INDEX: u64 = u32::MAX as u64;
    fn from_index(index: u32) -> Self {
        index
    }
    fn to_bits(self) -> u32 {
        self
    }
    fn id_value(bits: u32) -> i64 {
        i64::from(bits)
    }
}
impl ExpertId for i32 {
    const MAX_INDEX: u64 = i32::MAX as u64;
    fn from_index(index: u32) -> Self {
        index as i32
    }
    fn to_bits(self) -> u32 {
        self as u32
    }
    fn id_value(bits: u32) -> i64 {
        i64::from(bits as i32)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for i32 {}
}

/// How a router scores an expert from its logit.
///
/// ```
/// use oxicub::kernels::families::routing::Scoring;
///
/// assert_eq!(Scoring::Softmax.name(), "softmax");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scoring {
    /// `sigmoid(logit)` (DeepSeek-V3, GLM, Kimi).
    Sigmoid = 0,
    /// `softmax` over the token's experts (Mixtral, Qwen).
    Softmax = 1,
    /// `sqrt(softplus(logit))` (DeepSeek-V4).
    SqrtSoftplus = 2,
}

impl Scoring {
    /// Every scoring.
    pub const ALL: [Scoring; 3] = [Scoring::Sigmoid, Scoring::Softmax, Scoring::SqrtSoftplus];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Scoring::Sigmoid => "sigmoid",
            Scoring::Softmax => "softmax",
            Scoring::SqrtSoftplus => "sqrt_softplus",
        }
    }
}

/// The experts each lane of a token's warp holds, consecutive ones, for `experts` experts: the
/// smallest power of two in `1..=32` that covers them with 32 lanes. It also shapes the softmax
/// denominator's sum (each lane's experts, then the lanes pairwise: `oxicub_test::routing`'s
/// `warp_sum`).
///
/// ```
/// use oxicub::kernels::families::routing::experts_per_lane;
///
/// assert_eq!(experts_per_lane(256), 8);
/// assert_eq!(experts_per_lane(384), 16);
/// ```
pub fn experts_per_lane(experts: u32) -> u32 {
    experts.div_ceil(32).max(1).next_power_of_two()
}

impl KernelSpec {
    /// The spec of the `routing` kernel for logits of type `key` (`F32`, `F16` or `BF16`), up
    /// to `32 * per_lane` experts (`per_lane` a power of two up to 32), scored by `scoring`.
    ///
    /// ```
    /// use oxicub::kernels::families::routing::Scoring;
    /// use oxicub::kernels::{KernelSpec, KeyType};
    ///
    /// let spec = KernelSpec::routing(KeyType::BF16, 8, Scoring::Sigmoid);
    /// assert_eq!(spec.to_string(), "oxicub::routing<oxicub::KeyBF16, 128, 8, 0>");
    /// ```
    pub fn routing(key: KeyType, per_lane: u32, scoring: Scoring) -> KernelSpec {
        KernelSpec {
            family: KernelFamily::Routing,
            key,
            value: None,
            direction: None,
            tier: Tier::WarpPerSegment,
            block_threads: BLOCK_THREADS,
            consts: vec![
                ("PER_LANE", i64::from(per_lane)),
                ("SCORING", scoring as i64),
            ],
        }
    }
}

/// Every `routing` spec: the three logit types, every experts-per-lane count, every scoring.
///
/// ```
/// assert_eq!(oxicub::kernels::families::routing::specs().len(), 3 * 6 * 3);
/// ```
pub fn specs() -> Vec<KernelSpec> {
    let mut specs = Vec::new();
    for key in [KeyType::F32, KeyType::F16, KeyType::BF16] {
        for per_lane in [1, 2, 4, 8, 16, 32] {
            for scoring in Scoring::ALL {
                specs.push(KernelSpec::routing(key, per_lane, scoring));
            }
        }
    }
    specs
}

/// A router's configuration, checked by [`RouterConfig::check`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RouterConfig {
    /// Experts per token row (1 to [`MAX_EXPERTS`]).
    pub experts: u32,
    /// Expert groups: divides `experts`, at most [`MAX_PER_TOKEN`]; 1 for none.
    pub groups: u32,
    /// Groups kept per token: 1 to `groups`.
    pub top_groups: u32,
    /// Experts chosen per token: 1 to the experts of the kept groups, at most
    /// [`MAX_PER_TOKEN`].
    pub k: u32,
    /// The scores.
    pub scoring: Scoring,
    /// Whether the chosen experts' weights are divided by their sum (plus `1e-20`) when
    /// `k > 1`.
    pub renormalize: bool,
    /// The factor every weight is multiplied by last.
    pub scale: f32,
}

impl RouterConfig {
    /// Checks the configuration against the kernel's limits and its own consistency.
    ///
    /// ```
    /// use oxicub::kernels::families::routing::{RouterConfig, Scoring};
    ///
    /// let v3 = RouterConfig { experts: 256, groups: 8, top_groups: 4, k: 8, scoring: Scoring::Sigmoid, renormalize: true, scale: 2.5 };
    /// assert!(v3.check().is_ok());
    /// assert!(RouterConfig { groups: 7, ..v3 }.check().is_err()); // 7 does not divide 256
    /// ```
    pub fn check(&self) -> Result<(), KernelError> {
        let values = [self.experts, self.groups, self.top_groups, self.k].map(i64::from);
        match router_violation(values[0], values[1], values[2], values[3]) {
            None => Ok(()),
            Some((arg, reason)) => Err(KernelError::InvalidSpec {
                kernel: "routing".to_owned(),
                reason: format!("{arg}: {reason}"),
            }),
        }
    }
}

/// The first of a router's values (as a caller gives them) outside the kernel's limits or
/// inconsistent with the others, in the order experts, groups, top groups, the groups dividing
/// the experts, k: its name and why. [`RouterConfig::check`] and the public call
/// (`oxicub::routing::route`, which reports it as an invalid argument of that name) share it.
///
/// ```
/// use oxicub::kernels::families::routing::router_violation;
///
/// assert_eq!(router_violation(256, 8, 4, 8), None);
/// assert_eq!(router_violation(64, 4, 1, 17).map(|(arg, _)| arg), Some("k")); // one group holds 16
/// assert_eq!(router_violation(64, 3, 1, 2).map(|(arg, _)| arg), Some("groups"));
/// ```
pub fn router_violation(
    experts: i64,
    groups: i64,
    top_groups: i64,
    k: i64,
) -> Option<(&'static str, String)> {
    let outside = |value: i64, max: i64| {
        (!(1..=max).contains(&value)).then(|| format!("{value} is outside 1..={max}"))
    };
    let (max_experts, max_per_token) = (i64::from(MAX_EXPERTS), i64::from(MAX_PER_TOKEN));
    if let Some(reason) = outside(experts, max_experts) {
        return Some(("experts", reason));
    }
    if let Some(reason) = outside(groups, max_per_token) {
        return Some(("groups", reason));
    }
    if let Some(reason) = outside(top_groups, groups) {
        return Some(("top_groups", reason));
    }
    if experts % groups != 0 {
        return Some((
            "groups",
            format!("{groups} does not divide experts = {experts}"),
        ));
    }
    let eligible = top_groups * (experts / groups);
    outside(k, eligible.min(max_per_token)).map(|reason| ("k", reason))
}

/// Routes every token of `logits` (rows of `config.experts`, `F32`, `F16` or `BF16`): the
/// `config.k` expert ids of each, best first, into `ids`, and their weights into `weights`
/// (`tokens * k` each; ids `u32` or `i32`). `bias` (at least `experts` values) is added to the scores to choose,
/// never to the weights. Asynchronous on `stream`; results equal `oxicub_test::routing::route`
/// bit for bit (ids) and weights within 1 ulp (NaN weights compare as NaN).
///
/// ```no_run
/// use oxicub::kernels::families::routing::{route, RouterConfig, Scoring};
/// use oxicub::kernels::{open_context, KernelRuntime};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let config = RouterConfig { experts: 8, groups: 1, top_groups: 1, k: 2, scoring: Scoring::Softmax, renormalize: true, scale: 1.0 };
/// let logits = stream.clone_htod(&[0f32, 3.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0]).map_err(|e| e.to_string())?;
/// let (mut ids, mut weights) = (stream.alloc_zeros::<u32>(2).map_err(|e| e.to_string())?, stream.alloc_zeros::<f32>(2).map_err(|e| e.to_string())?);
/// route(&runtime, &stream, &config, &logits.as_view(), None, &mut ids.as_view_mut(), &mut weights.as_view_mut())?;
/// assert_eq!(stream.clone_dtoh(&ids).map_err(|e| e.to_string())?, [1, 3]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn route<K: RadixKey, I: ExpertId>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    config: &RouterConfig,
    logits: &CudaView<'_, K>,
    bias: Option<&CudaView<'_, f32>>,
    ids: &mut CudaViewMut<'_, I>,
    weights: &mut CudaViewMut<'_, f32>,
) -> Result<(), KernelError> {
    config.check()?;
    if !matches!(K::KEY_TYPE, KeyType::F32 | KeyType::F16 | KeyType::BF16) {
        return Err(KernelError::InvalidSpec {
            kernel: "routing".to_owned(),
            reason: format!("logits must be f32, f16 or bf16, not {}", K::KEY_TYPE),
        });
    }
    runtime.check_buffer("logits", logits)?;
    runtime.check_buffer("ids", &*ids)?;
    runtime.check_buffer("weights", &*weights)?;
    let experts = u64::from(config.experts);
    let len = logits.len() as u64;
    if len % experts != 0 {
        return Err(KernelError::LengthMismatch {
            buffer: "logits",
            actual: logits.len(),
            expected: (len / experts * experts) as usize,
        });
    }
    let tokens = len / experts;
    let out = tokens * u64::from(config.k);
    at_least("ids", ids.len(), out)?;
    at_least("weights", weights.len(), out)?;
    if let Some(bias) = bias {
        runtime.check_buffer("bias", bias)?;
        at_least("bias", bias.len(), experts)?;
    }
    if tokens == 0 {
        return Ok(());
    }
    let spec = KernelSpec::routing(
        K::KEY_TYPE,
        experts_per_lane(config.experts),
        config.scoring,
    );
    let kernel = runtime.kernel(&spec)?;
    let grid = runtime.grid_blocks(&kernel, tokens * 32, 1);
    let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
    let logits_ptr = keep(&mut guards, logits.device_ptr(stream));
    let bias_ptr = match bias {
        Some(bias) => keep(&mut guards, bias.device_ptr(stream)),
        None => 0,
    };
    let ids_ptr = keep(&mut guards, ids.device_ptr_mut(stream));
    let weights_ptr = keep(&mut guards, weights.device_ptr_mut(stream));
    let params = RoutingParams {
        logits: logits_ptr,
        bias: bias_ptr,
        ids: ids_ptr,
        weights: weights_ptr,
        tokens,
        experts: config.experts,
        groups: config.groups,
        top_groups: config.top_groups,
        k: config.k,
        flags: if config.renormalize {
            ROUTING_RENORMALIZE
        } else {
            0
        },
        scale_bits: config.scale.to_bits(),
    };
    // A programmatic dependent launch (sm_90): the kernel waits for the one before it.
    runtime.launch_with_shared(stream, &kernel, grid, 0, params, LaunchOrder::Programmatic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn experts_per_lane_cover_the_experts() {
        assert_eq!(experts_per_lane(1), 1);
        assert_eq!(experts_per_lane(32), 1);
        assert_eq!(experts_per_lane(33), 2);
        assert_eq!(experts_per_lane(256), 8);
        assert_eq!(experts_per_lane(384), 16);
        assert_eq!(experts_per_lane(1024), 32);
    }

    #[test]
    fn configurations_are_checked() {
        let v3 = RouterConfig {
            experts: 256,
            groups: 8,
            top_groups: 4,
            k: 8,
            scoring: Scoring::Sigmoid,
            renormalize: true,
            scale: 2.5,
        };
        assert!(v3.check().is_ok());
        for bad in [
            RouterConfig { experts: 0, ..v3 },
            RouterConfig {
                experts: 1025,
                ..v3
            },
            RouterConfig { groups: 3, ..v3 },
            RouterConfig {
                groups: 64,
                experts: 1024,
                ..v3
            },
            RouterConfig {
                top_groups: 9,
                ..v3
            },
            RouterConfig {
                top_groups: 0,
                ..v3
            },
            RouterConfig { k: 0, ..v3 },
            RouterConfig { k: 33, ..v3 },
            RouterConfig {
                top_groups: 1,
                k: 33,
                ..v3
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        // k up to the kept groups' experts.
        assert!(RouterConfig {
            top_groups: 1,
            k: 32,
            ..v3
        }
        .check()
        .is_ok());
    }
}
