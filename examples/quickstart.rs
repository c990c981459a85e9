//! Quickstart: the parameter and requirement types at work, then a real top-k on the GPU if one is
//! present, else on the host backend. Runs on any machine.
//!
//! `cargo run --release --example quickstart`

use oxicub::env::Environment;
use oxicub::guarantee::{MaxK, MaxSegmentSize};
use oxicub::{
    contract, determinism, direction, k, num_segments, output_ordering, require, segment_size,
    tie_break, topk, AnyBackend, Env, Error, Param, Requirements,
};

/// Top-3 of the seeds' worked example `10 8 8 8 6 5`, printed as `key@index`.
fn worked_example<E: Environment>(backend: &AnyBackend, env: &E) -> Result<String, Error> {
    let keys = [10i32, 8, 8, 8, 6, 5];
    let (mut top, mut at) = ([0i32; 3], [0u32; 3]);
    topk::max_indices(
        backend,
        &keys[..],
        &mut top[..],
        &mut at[..],
        &k::Static::<3>::new(),
        env,
    )?
    .check()?;
    let shown: Vec<String> = top
        .iter()
        .zip(at)
        .map(|(k, i)| format!("{k}@{i}"))
        .collect();
    Ok(format!("[{}]", shown.join(", ")))
}

fn main() -> Result<(), Error> {
    // 1. What the caller knows about each parameter is a type.
    //    MoE routing: 256 experts per token (static), top-8 (static), 16384 tokens (runtime).
    let experts = segment_size::Static::<256>::new();
    let top = k::Static::<8>::new();
    let tokens = num_segments::uniform(16_384)?;
    println!(
        "k is {:?} with static bounds {}; dispatch can drop every large-k kernel: {}",
        <k::Static<8> as Param>::KIND,
        <k::Static<8> as Param>::STATIC_BOUNDS,
        <k::Static<8> as Param>::STATIC_MAX <= 8,
    );

    // 2. What the caller requires of the result is a type too. Nothing required means the
    //    committed contract: gpu_to_gpu, prefer_smaller_index, stable_sorted.
    println!("default contract: {:?}", Env::new().resolved());
    let fast = require!(determinism::NotGuaranteed, output_ordering::Unsorted);
    println!("opt-out:          {:?}", fast.resolved());
    let pinned = require!(determinism::RunToRun, tie_break::PreferLargerIndex);
    println!("pinned set:       {:?}", pinned.resolved());

    // 3. One front check per algorithm merges everything known, including guarantees given
    //    through the environment, and hands dispatch the tightest bounds.
    let checked = contract::batched_topk(&experts, &top, &direction::Max, &tokens, &fast)?;
    println!(
        "batched top-k: k {} over segments of {} x {} segments, directions mask {:#b}",
        checked.k, checked.segment_sizes, checked.num_segments, checked.directions
    );

    // Sparse attention: k is a runtime value bounded by a guarantee from the environment.
    let env = require!(output_ordering::Sorted)
        .guarantee(MaxK::<2048>::new())
        .guarantee(MaxSegmentSize::<131_072>::new());
    let scores = segment_size::Uniform::<1>::new(131_072)?;
    let top_2048 = k::Uniform::<1, 4096>::new(2048)?;
    let checked = contract::batched_topk(
        &scores,
        &top_2048,
        &direction::Max,
        &num_segments::uniform(64)?,
        &env,
    )?;
    println!(
        "sparse attention: k statically in {} after the guarantee, segments in {}",
        checked.k_static, checked.segment_sizes_static
    );

    // 4. Bad values are typed errors that name the parameter and the bound.
    match k::Uniform::<1, 4096>::new(5000) {
        Err(e) => println!("rejected: {e}"),
        Ok(_) => unreachable!("5000 is outside 1..=4096"),
    }
    match env.bounds_of(&k::Uniform::<1, 4096>::new(3000)?) {
        Err(e) => println!("rejected: {e}"),
        Ok(_) => unreachable!("the environment guarantees k <= 2048"),
    }

    // 5. Run it: top-3 of the seeds' worked example, on the GPU when there is one.
    let (backend, note) = AnyBackend::auto_explained();
    println!("{note}");
    println!(
        "default contract:            {}",
        worked_example(&backend, &Env::new())?
    );
    let larger = require!(determinism::RunToRun, tie_break::PreferLargerIndex);
    println!(
        "prefer_larger_index:         {}",
        worked_example(&backend, &larger)?
    );
    let fast = require!(determinism::NotGuaranteed, output_ordering::Unsorted);
    println!(
        "not_guaranteed, unsorted:    {}",
        worked_example(&backend, &fast)?
    );
    Ok(())
}
