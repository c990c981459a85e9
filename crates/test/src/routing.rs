//! The MoE routing oracle: each router of issue 27 written step by step from its published model
//! code, one token at a time, sequentially. It fixes what the library's router must return bit
//! for bit (expert ids) or within 1 ulp (weights), so it also fixes the two things the model code
//! leaves to its framework:
//!
//! * **Transcendentals**: the scores use `oxicub::kernels::math` (deterministic, the same bits on
//!   the host and the GPU), not the platform's `exp`.
//! * **Sums of many terms** (the softmax denominator): the shape of one warp's reduction, which
//!   the kernel can follow exactly: lane `j` of 32 adds its `p` consecutive values
//!   `e[j * p], e[j * p + 1], ...` in order (`p`, the power of two that spreads them over the
//!   32 lanes: `oxicub::kernels::families::routing::experts_per_lane`), then the 32 partial
//!   sums are added pairwise, lanes `j` and `j + 16`, then `j` and `j + 8`, down to one
//!   ([`warp_sum`]).
//!
//! Ranking follows oxicub's contract: larger first, NaN above every number, ties to the smaller
//! index (expert or group).
//!
//! ```
//! use oxicub_test::routing::{route, Router, Scoring};
//!
//! // Two tokens, four experts, top 2 by softmax, renormalised.
//! let router = Router::softmax(4, 2);
//! let logits = [0.0f32, 2.0, 1.0, 2.0, /**/ -1.0, 0.5, 3.0, 0.0];
//! let (ids, weights) = route(&router, &logits, None);
//! assert_eq!(ids, [1, 3, 2, 1]); // the tie at 2.0: the smaller id first
//! assert!((weights[0] - 0.5).abs() < 1e-6 && (weights[2] + weights[3] - 1.0).abs() < 1e-6);
//! ```

/// How a router scores an expert from its logit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scoring {
    /// `sigmoid(logit)` (DeepSeek-V3, GLM, Kimi).
    Sigmoid,
    /// `softmax` over the token's experts (Mixtral, Qwen).
    Softmax,
    /// `sqrt(softplus(logit))` (DeepSeek-V4).
    SqrtSoftplus,
}

/// A router's configuration, as the model's config file gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Router {
    /// Routed experts per token row.
    pub experts: usize,
    /// Expert groups (`n_group`); 1 for no grouping.
    pub groups: usize,
    /// Groups kept per token (`topk_group`).
    pub top_groups: usize,
    /// Experts chosen per token (`num_experts_per_tok`).
    pub k: usize,
    /// The scores.
    pub scoring: Scoring,
    /// Whether the chosen experts' weights are divided by their sum (`norm_topk_prob`).
    pub renormalize: bool,
    /// The factor every weight is multiplied by last (`routed_scaling_factor`).
    pub scale: f32,
}

impl Router {
    /// DeepSeek-V3's router (`topk_method = noaux_tc`): 256 experts in 8 groups, the best 4
    /// groups kept, top 8, sigmoid scores, renormalised, times 2.5.
    pub fn deepseek_v3() -> Router {
        Router {
            experts: 256,
            groups: 8,
            top_groups: 4,
            k: 8,
            scoring: Scoring::Sigmoid,
            renormalize: true,
            scale: 2.5,
        }
    }

    /// Softmax routing (Mixtral, Qwen): top `k` of `experts`, renormalised, no groups.
    pub fn softmax(experts: usize, k: usize) -> Router {
        Router {
            experts,
            groups: 1,
            top_groups: 1,
            k,
            scoring: Scoring::Softmax,
            renormalize: true,
            scale: 1.0,
        }
    }
}

/// Router logits of `tokens` rows of `experts`, uniform in [-6, 6), or rounded to multiples of
/// `quantum` when it is positive (tie-heavy).
pub fn logits(tokens: usize, experts: usize, seed: u64, quantum: f32) -> Vec<f32> {
    let mut rng = crate::SplitMix64::new(seed);
    (0..tokens * experts)
        .map(|_| {
            let v = (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 12.0 - 6.0;
            if quantum > 0.0 {
                (v / quantum).round() * quantum
            } else {
                v
            }
        })
        .collect()
}

/// A correction bias per expert, in [offset, offset + 0.2).
pub fn bias(experts: usize, seed: u64, offset: f32) -> Vec<f32> {
    let mut rng = crate::SplitMix64::new(seed);
    (0..experts)
        .map(|_| (rng.next_u64() % 1000) as f32 / 5000.0 + offset)
        .collect()
}

/// A logit type the routers read (`f32`, `half::bf16`, `half::f16`), made from and read as
/// `f32` (exactly, for values the type holds).
pub trait LogitValue: Copy {
    /// The nearest value of this type.
    fn from_f32(v: f32) -> Self;
    /// The value as `f32` (exact).
    fn to_f32(self) -> f32;
}

impl LogitValue for f32 {
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl LogitValue for half::bf16 {
    fn from_f32(v: f32) -> Self {
        half::bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        half::bf16::to_f32(self)
    }
}

impl LogitValue for half::f16 {
    fn from_f32(v: f32) -> Self {
        half::f16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
}

/// `values` as logits of type `L`, and those logits' exact `f32` values (what the oracle routes).
pub fn typed_logits<L: LogitValue>(values: &[f32]) -> (Vec<L>, Vec<f32>) {
    let typed: Vec<L> = values.iter().map(|&v| L::from_f32(v)).collect();
    let exact = typed.iter().map(|&v| v.to_f32()).collect();
    (typed, exact)
}

/// Asserts a routing (`k` ids and weights per token) equals `want`: the ids exactly (the first
/// differing token reported whole), the weights within 1 ulp (NaN as NaN).
pub fn assert_same_routing(what: &str, k: usize, got: (&[u32], &[f32]), want: (&[u32], &[f32])) {
    assert_eq!(got.0.len(), want.0.len(), "{what}: ids");
    if let Some(at) = (0..got.0.len()).find(|&i| got.0[i] != want.0[i]) {
        let token = at / k;
        panic!(
            "{what}: token {token}: ids {:?}, expected {:?}",
            &got.0[token * k..][..k],
            &want.0[token * k..][..k]
        );
    }
    for (i, (&g, &w)) in got.1.iter().zip(want.1).enumerate() {
        let close = (g.is_nan() && w.is_nan()) || g.to_bits().abs_diff(w.to_bits()) <= 1;
        assert!(close, "{what}: weight {i}: {g:e}, expected {w:e}");
    }
}

/// The sum of `values` in the shape of one warp's reduction (module docs).
pub fn warp_sum(values: &[f32]) -> f32 {
    let per_lane = oxicub_kernels::families::routing::experts_per_lane(values.len() as u32);
    let mut lanes = [0f32; 32];
    for (i, &v) in values.iter().enumerate() {
        lanes[i / per_lane as usize] += v;
    }
    let mut width = 16;
    while width > 0 {
        for j in 0..width {
            lanes[j] += lanes[j + width];
        }
        width /= 2;
    }
    lanes[0]
}

/// The first `n` indices of `values` by descending value (NaN above every number), ties to the
/// smaller index.
fn top_indices(values: &[f32], n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| rank(values[b]).cmp(&rank(values[a])).then(a.cmp(&b)));
    order.truncate(n);
    order
}

/// oxicub's key order of an `f32` as an unsigned rank: NaN (any) above `+inf`, `-0.0` below
/// `+0.0`.
fn rank(v: f32) -> u32 {
    let bits = if v.is_nan() { f32::NAN } else { v }.to_bits();
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    }
}

/// One token's scores, from its logits.
fn scores(router: &Router, logits: &[f32]) -> Vec<f32> {
    use oxicub_kernels::math::{exp, sigmoid, softplus};
    match router.scoring {
        Scoring::Sigmoid => logits.iter().map(|&l| sigmoid(l)).collect(),
        Scoring::SqrtSoftplus => logits.iter().map(|&l| softplus(l).sqrt()).collect(),
        Scoring::Softmax => {
            let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = logits.iter().map(|&l| exp(l - max)).collect();
            let sum = warp_sum(&e);
            e.iter().map(|&v| v / sum).collect()
        }
    }
}

/// Routes every token (rows of `router.experts` logits): the `k` expert ids of each, best
/// first, and their weights. `bias` (one per expert) is added to the scores to choose, never to
/// the weights (DeepSeek-V3's `e_score_correction_bias`).
///
/// Step by step, as the published code does: scores; biased scores for choosing; with groups,
/// each group's score is the sum of its two best biased scores (the best plus the second) when
/// there is a bias (DeepSeek-V3's `noaux_tc`), its best score when there is none (DeepSeek-V2's
/// `group_limited_greedy`, V3's `model.py` without a bias), the `top_groups` best groups are kept and every other expert's biased score becomes `-inf` (not
/// 0: biased scores can be negative); the `k` best biased scores give the ids; the weights are
/// the unbiased scores of those experts, divided by their sum plus `1e-20` (summed in the order
/// chosen) when `renormalize` and `k > 1`, then multiplied by `scale`.
pub fn route(router: &Router, logits: &[f32], bias: Option<&[f32]>) -> (Vec<u32>, Vec<f32>) {
    let (e, k) = (router.experts, router.k);
    assert!(e > 0 && logits.len() % e == 0, "whole rows of experts");
    assert!(
        router.groups > 0 && e % router.groups == 0,
        "groups divide the experts"
    );
    assert!(router.top_groups <= router.groups);
    assert!(
        k <= router.top_groups * (e / router.groups),
        "k within the kept experts"
    );
    assert!(bias.is_none_or(|b| b.len() >= e), "a bias per expert");
    let (mut ids, mut weights) = (Vec::new(), Vec::new());
    for row in logits.chunks(e) {
        let s = scores(router, row);
        let mut c: Vec<f32> = match bias {
            Some(bias) => s.iter().zip(bias).map(|(&s, &b)| s + b).collect(),
            None => s.clone(),
        };
        if router.groups > 1 {
            let size = e / router.groups;
            // With a bias (noaux_tc), the sum of the two best; without, the best alone (V2's
            // group_limited_greedy, V3's model.py when it has no bias).
            let counted = if bias.is_some() { 2 } else { 1 };
            let group_scores: Vec<f32> = c
                .chunks(size)
                .map(|group| {
                    let best = top_indices(group, counted);
                    best.iter().map(|&i| group[i]).fold(0.0, |sum, v| sum + v)
                })
                .collect();
            let kept = top_indices(&group_scores, router.top_groups);
            for (g, group) in c.chunks_mut(size).enumerate() {
                if !kept.contains(&g) {
                    group.iter_mut().for_each(|v| *v = f32::NEG_INFINITY);
                }
            }
        }
        let chosen = top_indices(&c, k);
        let mut w: Vec<f32> = chosen.iter().map(|&i| s[i]).collect();
        if router.renormalize && k > 1 {
            let denominator = w.iter().fold(0.0f32, |sum, &v| sum + v) + 1e-20;
            w.iter_mut().for_each(|v| *v /= denominator);
        }
        w.iter_mut().for_each(|v| *v *= router.scale);
        ids.extend(chosen.iter().map(|&i| i as u32));
        weights.extend(w);
    }
    (ids, weights)
}

/// What a MoE dispatch needs after the router, from its `ids` (`tokens * k` of them, each
/// below `experts`): each expert's number of entries, and the entry indices grouped by expert
/// (expert 0's first), each expert's ascending, as a stable sort by id would order them.
///
/// ```
/// use oxicub_test::routing::dispatch;
///
/// let (counts, order) = dispatch(4, &[2, 0, 2, 3, 0, 2]);
/// assert_eq!(counts, [2, 0, 3, 1]);
/// assert_eq!(order, [1, 4, 0, 2, 5, 3]);
/// ```
pub fn dispatch(experts: usize, ids: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let mut counts = vec![0u32; experts];
    for &id in ids {
        counts[id as usize] += 1;
    }
    let mut order: Vec<u32> = (0..ids.len() as u32).collect();
    order.sort_by_key(|&entry| ids[entry as usize]);
    (counts, order)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sixteen experts in four groups of four, two groups kept, top 3, sigmoid, scale 2.
    fn small() -> Router {
        Router {
            experts: 16,
            groups: 4,
            top_groups: 2,
            k: 3,
            scoring: Scoring::Sigmoid,
            renormalize: true,
            scale: 2.0,
        }
    }

    #[test]
    fn groups_are_ranked_by_their_two_best_biased_scores() {
        // With a bias: group 0 holds the single best expert (id 1) but a weak second; groups 2
        // and 3 have two good experts each and win, so expert 1 is excluded.
        let logits = [
            -4.0, 6.0, -4.0, -4.0, /**/ 0.0, 0.0, 0.0, 0.0, /**/ 3.0, 2.5, -1.0, -1.0,
            /**/ 2.0, 2.9, -1.0, -1.0,
        ];
        let (ids, weights) = route(&small(), &logits, Some(&[0.0; 16]));
        assert_eq!(ids, [8, 13, 9]);
        // Without a bias a group's score is its best: group 0 (expert 1) is kept with group 2.
        let (ids, _) = route(&small(), &logits, None);
        assert_eq!(ids, [1, 8, 9]);
        let s = |x: f64| 1.0 / (1.0 + (-x).exp());
        let sum = s(3.0) + s(2.9) + s(2.5);
        for (w, x) in weights.iter().zip([3.0, 2.9, 2.5]) {
            assert!((*w as f64 - 2.0 * s(x) / sum).abs() < 1e-6);
        }
    }

    #[test]
    fn a_negative_bias_excludes_as_minus_infinity_and_never_weights() {
        // Every biased score is negative; the excluded groups must stay out even though a
        // masked 0 would beat them. The bias chooses but the weights are the unbiased scores.
        let logits = [0.0f32; 16];
        let mut bias = [-5.0f32; 16];
        bias[4] = -1.0; // group 1: -1 + 0.5 and -5 + 0.5
        bias[5] = -1.0;
        bias[12] = -2.0; // group 3
        bias[13] = -2.0;
        let (ids, weights) = route(&small(), &logits, Some(&bias));
        assert_eq!(ids, [4, 5, 12]);
        assert!(weights.iter().all(|&w| (w - 2.0 / 3.0).abs() < 1e-6));
    }

    #[test]
    fn ties_go_to_the_smaller_id_and_group() {
        let (ids, _) = route(&small(), &[1.0f32; 16], None);
        assert_eq!(ids, [0, 1, 2]);
        let (ids, _) = route(&Router::softmax(8, 4), &[0.5f32; 8], None);
        assert_eq!(ids, [0, 1, 2, 3]);
    }

    #[test]
    fn deepseek_v3_weights_sum_to_the_scale() {
        let mut rng = crate::SplitMix64::new(5);
        let logits: Vec<f32> = (0..7 * 256)
            .map(|_| (rng.next_u64() % 2000) as f32 / 250.0 - 4.0)
            .collect();
        let bias: Vec<f32> = (0..256).map(|i| (i % 7) as f32 * 0.01).collect();
        let (ids, weights) = route(&Router::deepseek_v3(), &logits, Some(&bias));
        assert_eq!(ids.len(), 7 * 8);
        for (token, w) in weights.chunks(8).enumerate() {
            assert!((w.iter().sum::<f32>() - 2.5).abs() < 1e-5, "token {token}");
            let chosen = &ids[token * 8..token * 8 + 8];
            let groups: std::collections::BTreeSet<u32> = chosen.iter().map(|&i| i / 32).collect();
            assert!(groups.len() <= 4, "token {token}: experts from {groups:?}");
        }
        let (none, _) = route(&Router::deepseek_v3(), &[], Some(&bias));
        assert!(none.is_empty());
    }

    #[test]
    fn sqrt_softplus_scores_rank_as_their_logits_without_bias() {
        // Top 6 of 384, no groups: the scores are monotone in the logits, so the ids are the
        // six largest distinct logits; the weights are the unbiased scores, renormalised.
        let router = Router {
            experts: 384,
            groups: 1,
            top_groups: 1,
            k: 6,
            scoring: Scoring::SqrtSoftplus,
            renormalize: true,
            scale: 1.0,
        };
        let logits: Vec<f32> = (0..384)
            .map(|i| ((i * 97) % 384) as f32 / 64.0 - 3.0)
            .collect();
        let (ids, weights) = route(&router, &logits, None);
        let mut by_logit: Vec<u32> = (0..384).collect();
        by_logit.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
        assert_eq!(ids, by_logit[..6]);
        let score = |x: f32| ((x as f64).exp().ln_1p()).sqrt();
        let sum: f64 = ids.iter().map(|&i| score(logits[i as usize])).sum();
        for (&i, &w) in ids.iter().zip(&weights) {
            assert!((w as f64 - score(logits[i as usize]) / sum).abs() < 1e-6);
        }
    }

    #[test]
    fn the_warp_sum_adds_in_its_fixed_shape() {
        let values: Vec<f32> = (0..100).map(|i| i as f32).collect();
        assert_eq!(warp_sum(&values), 4950.0);
        assert_eq!(warp_sum(&[]), 0.0);
        // The shape, not the sequential order: 36 values, two a lane; lane 0 adds 2^24 and 1
        // (the 1 rounds away), lanes 1 and 17 (values 2 and 34) add up to 2 before meeting
        // lane 0, so their 2 survives.
        let mut v = vec![0.0f32; 36];
        v[0] = 16_777_216.0;
        v[1] = 1.0;
        v[2] = 1.0;
        v[34] = 1.0;
        assert_eq!(warp_sum(&v), 16_777_218.0);
        assert_eq!(v.iter().fold(0.0f32, |s, &x| s + x), 16_777_216.0);
    }
}
