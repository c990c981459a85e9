//! Batched top-k on the GPU against the host backend, segments above the block tier among small
//! ones: one huge segment with a tie at the boundary (the stream tier, and the multi-block tier for
//! a k above the stream tier's cap), and the `TotalItems` guarantee that sizes the multi-block
//! tier's scratch. Each test skips without a GPU (fails with OXICUB_REQUIRE_GPU=1).

use oxicub_env::{determinism, output_ordering, require, tie_break, Env};
use oxicub_test::batched_topk::{check_on_gpu, random_directions, run_on_gpu, run_on_host, Case};
use oxicub_test::{for_every_env, gpu_or_skip, sample_keys, SplitMix64};

#[test]
fn one_huge_segment_among_tiny_ones_with_a_tie_at_the_boundary() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut keys: Vec<u32> = sample_keys(131_072 + 40, 17);
    for key in keys.iter_mut().step_by(3) {
        *key = 1 << 31;
    }
    let sizes = [5, 131_072, 10, 0, 25];
    let case = Case::contiguous(keys, &sizes, &[3, 2048, 10, 4, 30], &[0, 0, 1, 0, 1]);
    for_every_env!(check_on_gpu(&cuda, &case));
    // Unsorted output may exceed the shared-memory sort: k = 5000 of the huge segment.
    let case = Case {
        ks: vec![3, 5000, 10, 4, 30],
        ..case
    };
    check_on_gpu(
        &cuda,
        &case,
        &require!(
            determinism::GpuToGpu,
            tie_break::PreferLargerIndex,
            output_ordering::Unsorted
        ),
    );
    check_on_gpu(
        &cuda,
        &case,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
    );
}

/// Many small segments around one huge one, with the `TotalItems` guarantee: the segments are
/// binned by compaction and the several-blocks tier's scratch holds total / 2049 segments,
/// not one per segment. A guarantee the sizes break is reported like the host reports it.
#[test]
fn total_items_guarantee_sizes_the_scratch_and_is_checked() {
    use oxicub_params::guarantee::TotalItems;
    let Some(cuda) = gpu_or_skip() else { return };
    let mut rng = SplitMix64::new(41);
    let mut sizes: Vec<usize> = (0..3000).map(|_| (rng.next_u64() % 300) as usize).collect();
    sizes[1234] = 200_000;
    sizes[77] = 3000;
    let ks: Vec<i64> = sizes.iter().map(|_| (rng.next_u64() % 40) as i64).collect();
    let d = random_directions(&mut rng, sizes.len());
    let total: usize = sizes.iter().sum();
    let case = Case::contiguous(sample_keys::<f32>(total, 41), &sizes, &ks, &d);
    let exact = TotalItems::<0, { 1 << 40 }>::new()
        .between(0, total as i64)
        .expect("bounds");
    check_on_gpu(&cuda, &case, &Env::new().guarantee(exact));
    check_on_gpu(
        &cuda,
        &case,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted).guarantee(exact),
    );
    let broken = TotalItems::<0, { 1 << 40 }>::new()
        .between(0, total as i64 - 1)
        .expect("bounds");
    let env = Env::new().guarantee(broken);
    let (host, gpu) = (run_on_host(&case, &env), run_on_gpu(&cuda, &case, &env));
    assert_eq!(gpu.outcome, host.outcome);
    let expected = format!("total_items = {total} is outside");
    assert!(
        matches!(&gpu.outcome, Err(e) if e.contains(&expected)),
        "{:?}",
        gpu.outcome
    );
}
