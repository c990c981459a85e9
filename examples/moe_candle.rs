//! A Mixture-of-Experts layer on candle tensors, routed by oxicub: gate logits, softmax, the
//! top 4 of 16 experts per token (`oxicub::candle::batched_topk`, reading the probabilities in
//! place), renormalised weights, each expert's tokens gathered, transformed and added back.
//! The routing is checked against candle's own full sort of each row.
//!
//! `cargo run --release --features candle --example moe_candle` (CPU tensors);
//! with `--no-default-features --features candle-cuda` the tensors live on GPU 0 (the router
//! reads them in place on candle's stream), unless `--cpu` is passed.

use candle_core::{DType, Device, Tensor, D};
use oxicub::params::SelectDirection;

const TOKENS: usize = 64;
const HIDDEN: usize = 128;
const EXPERTS: usize = 16;
const TOP: usize = 4;

/// Deterministic values in [-1, 1) (a small LCG: the example needs no random crate).
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let on_gpu = cfg!(feature = "candle-cuda") && !std::env::args().any(|a| a == "--cpu");
    let device = if on_gpu {
        Device::new_cuda(0)?
    } else {
        Device::Cpu
    };
    let x = Tensor::from_vec(values(TOKENS * HIDDEN, 1), (TOKENS, HIDDEN), &device)?;
    let gate = Tensor::from_vec(values(HIDDEN * EXPERTS, 2), (HIDDEN, EXPERTS), &device)?;
    let experts = Tensor::from_vec(
        values(EXPERTS * HIDDEN * HIDDEN, 3),
        (EXPERTS, HIDDEN, HIDDEN),
        &device,
    )?;

    // Router: softmax over the experts, then the top 4 of each token's row.
    let logits = x.matmul(&gate)?;
    let shifted = logits
        .broadcast_sub(&logits.max_keepdim(D::Minus1)?)?
        .exp()?;
    let probs = shifted.broadcast_div(&shifted.sum_keepdim(D::Minus1)?)?;
    let (weights, chosen) = oxicub::candle::batched_topk::<u32>(&probs, TOP, SelectDirection::Max)?;
    let weights = weights.broadcast_div(&weights.sum_keepdim(D::Minus1)?)?;

    // The same routing from candle's full sort of each row (no ties among these logits).
    let by_sort = probs.arg_sort_last_dim(false)?.narrow(D::Minus1, 0, TOP)?;
    assert_eq!(
        chosen.to_vec2::<u32>()?,
        by_sort.to_vec2::<u32>()?,
        "oxicub's routing differs from candle's sort"
    );

    // Dispatch: each expert transforms the tokens routed to it, weighted, added back in place.
    let chosen_rows = chosen.to_vec2::<u32>()?;
    let weight_rows = weights.to_vec2::<f32>()?;
    let mut out = Tensor::zeros((TOKENS, HIDDEN), DType::F32, &device)?;
    let mut load = [0usize; EXPERTS];
    for (expert, load) in load.iter_mut().enumerate() {
        let (tokens, token_weights): (Vec<u32>, Vec<f32>) = chosen_rows
            .iter()
            .zip(&weight_rows)
            .enumerate()
            .filter_map(|(t, (row, w))| {
                let slot = row.iter().position(|&e| e as usize == expert)?;
                Some((t as u32, w[slot]))
            })
            .unzip();
        *load = tokens.len();
        if tokens.is_empty() {
            continue;
        }
        let count = tokens.len();
        let tokens = Tensor::from_vec(tokens, count, &device)?;
        let token_weights = Tensor::from_vec(token_weights, (count, 1), &device)?;
        let transformed = x
            .index_select(&tokens, 0)?
            .matmul(&experts.get(expert)?)?
            .broadcast_mul(&token_weights)?;
        out = out.index_add(&tokens, &transformed, 0)?;
    }

    assert_eq!(load.iter().sum::<usize>(), TOKENS * TOP);
    let norm = out.sqr()?.sum_all()?.sqrt()?.to_scalar::<f32>()?;
    let on = if on_gpu { "CUDA" } else { "CPU" };
    println!(
        "{TOKENS} tokens routed to the top {TOP} of {EXPERTS} experts (oxicub on candle, {on})"
    );
    println!("tokens per expert: {load:?}");
    println!("layer output: {:?}, norm {norm:.3}", out.dims());
    Ok(())
}
