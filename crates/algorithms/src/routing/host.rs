//! Routing on the host: the kernel's steps on the CPU (docs/design/routing.md, "Kernel"), a
//! token per rayon task. The oracle (`oxicub_test::routing`) ranks by sorting instead; both
//! round every step alike.

use oxicub_kernels::families::routing::{
    experts_per_lane, ExpertId, RouterConfig, Scoring, MAX_EXPERTS,
};
use oxicub_kernels::math::{exp, sigmoid, softplus};
use rayon::prelude::*;

use super::{DispatchRequest, Logit, RouteRequest, RoutingBackend};
use crate::radix::RadixKey;
use crate::sealed::Token;
use crate::{Error, Host, Outcome};

impl RoutingBackend for Host {
    fn route_checked<L: Logit, I: ExpertId>(
        &self,
        _: Token,
        request: &RouteRequest,
        logits: &[L],
        bias: Option<&[f32]>,
        ids: &mut [I],
        weights: &mut [f32],
    ) -> Result<Outcome, Error> {
        let config = &request.config;
        let (experts, k) = (config.experts as usize, config.k as usize);
        let out = request.tokens as usize * k;
        logits
            .par_chunks(experts)
            .zip(ids[..out].par_chunks_mut(k))
            .zip(weights[..out].par_chunks_mut(k))
            .for_each(|((row, ids), weights)| route_token(config, row, bias, ids, weights));
        Ok(Outcome::ready((), None))
    }

    fn dispatch_checked<I: ExpertId>(
        &self,
        _: Token,
        request: &DispatchRequest,
        ids: &[I],
        counts: &mut [I],
        order: &mut [I],
    ) -> Result<Outcome, Error> {
        let experts = request.experts as usize;
        let mut starts = vec![0u32; experts + 1];
        for (entry, id) in ids.iter().enumerate() {
            let bits = id.to_bits();
            if bits >= request.experts {
                return Err(request.invalid_id(entry as u64, I::id_value(bits)));
            }
            starts[bits as usize + 1] += 1;
        }
        for (count, e) in counts.iter_mut().zip(1..=experts) {
            *count = I::from_index(starts[e]);
            starts[e] += starts[e - 1];
        }
        // A counting sort: each expert's entries in ascending order from its start.
        for (entry, id) in ids.iter().enumerate() {
            let at = &mut starts[id.to_bits() as usize];
            order[*at as usize] = I::from_index(entry as u32);
            *at += 1;
        }
        Ok(Outcome::ready((), None))
    }
}

/// The rank of a score in oxicub's order (NaN above `+inf`); 0 is "no expert".
fn rank(v: f32) -> u32 {
    v.to_radix()
}

/// The best `(rank, index)` among `candidates`: the larger rank, then the smaller index.
fn arg_max(candidates: impl Iterator<Item = (u32, usize)>) -> (u32, usize) {
    candidates.fold((0, usize::MAX), |best, (r, i)| {
        if r > best.0 || (r == best.0 && i < best.1) {
            (r, i)
        } else {
            best
        }
    })
}

/// The scores of one token's logits, into `s`.
fn scores<L: Logit>(scoring: Scoring, row: &[L], s: &mut [f32]) {
    match scoring {
        Scoring::Sigmoid => s
            .iter_mut()
            .zip(row)
            .for_each(|(s, &l)| *s = sigmoid(l.to_f32())),
        Scoring::SqrtSoftplus => s
            .iter_mut()
            .zip(row)
            .for_each(|(s, &l)| *s = softplus(l.to_f32()).sqrt()),
        Scoring::Softmax => {
            let max = row
                .iter()
                .fold(f32::NEG_INFINITY, |m, &l| m.max(l.to_f32()));
            // The kernel's sum: each lane's experts in order, then lanes j and j + 16, j and
            // j + 8, ... (the oracle's warp_sum).
            let per_lane = experts_per_lane(row.len() as u32) as usize;
            let mut lanes = [0f32; 32];
            for (i, (s, &l)) in s.iter_mut().zip(row).enumerate() {
                *s = exp(l.to_f32() - max);
                lanes[i / per_lane] += *s;
            }
            let mut width = 16;
            while width > 0 {
                for j in 0..width {
                    lanes[j] += lanes[j + width];
                }
                width /= 2;
            }
            s.iter_mut().for_each(|s| *s /= lanes[0]);
        }
    }
}

/// Routes one token (`row` of `config.experts` logits) into its `k` ids and weights.
fn route_token<L: Logit, I: ExpertId>(
    config: &RouterConfig,
    row: &[L],
    bias: Option<&[f32]>,
    ids: &mut [I],
    weights: &mut [f32],
) {
    let experts = config.experts as usize;
    let mut s = [0f32; MAX_EXPERTS as usize];
    let mut c = [0f32; MAX_EXPERTS as usize];
    let mut ranks = [0u32; MAX_EXPERTS as usize];
    let (s, c, ranks) = (&mut s[..experts], &mut c[..experts], &mut ranks[..experts]);
    scores(config.scoring, row, s);
    for e in 0..experts {
        c[e] = match bias {
            Some(bias) => s[e] + bias[e],
            None => s[e],
        };
        ranks[e] = rank(c[e]);
    }
    if config.groups > 1 {
        let size = experts / config.groups as usize;
        let mut group_ranks = [0u32; 32];
        for (g, group_rank) in group_ranks[..config.groups as usize].iter_mut().enumerate() {
            let members = g * size..(g + 1) * size;
            let (_, best) = arg_max(members.clone().map(|e| (ranks[e], e)));
            let mut score = 0.0 + c[best];
            if size > 1 && bias.is_some() {
                let (_, second) = arg_max(members.filter(|&e| e != best).map(|e| (ranks[e], e)));
                score += c[second];
            }
            *group_rank = rank(score);
        }
        let mut kept = 0u32;
        for _ in 0..config.top_groups {
            let open = (0..config.groups as usize).filter(|&g| kept >> g & 1 == 0);
            let (_, g) = arg_max(open.map(|g| (group_ranks[g], g)));
            kept |= 1 << g;
        }
        for e in 0..experts {
            if kept >> (e / size) & 1 == 0 {
                c[e] = f32::NEG_INFINITY;
                ranks[e] = rank(f32::NEG_INFINITY);
            }
        }
    }
    let mut sum = 0f32;
    for (id, weight) in ids.iter_mut().zip(weights.iter_mut()) {
        let (_, best) = arg_max(ranks.iter().enumerate().map(|(e, &r)| (r, e)));
        ranks[best] = 0;
        *id = I::from_index(best as u32);
        *weight = s[best];
        sum += s[best];
    }
    let renormalize = config.renormalize && config.k > 1;
    for weight in weights.iter_mut() {
        let w = if renormalize {
            *weight / (sum + 1e-20)
        } else {
            *weight
        };
        *weight = w * config.scale;
    }
}
