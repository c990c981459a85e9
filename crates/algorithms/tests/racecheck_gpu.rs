//! One small call through every batched top-k tier and the single-problem stages, sized for
//! compute-sanitizer's racecheck (its host-side shadow of every shared-memory access grows with
//! the blocks a launch runs: the full tier tests exhaust a 128 GiB host under it). Each call is
//! compared with the host backend as everywhere; run this binary under
//! `compute-sanitizer --tool racecheck`, which must report no hazard (docs/testing.md,
//! "Sanitizers"). Each test skips without a GPU (fails with OXICUB_REQUIRE_GPU=1).

use oxicub_algorithms::topk;
use oxicub_env::{determinism, output_ordering, require, Env};
use oxicub_params::k;
use oxicub_test::batched_topk::{check_on_gpu, Case};
use oxicub_test::cases::tied_keys;
use oxicub_test::{gpu_or_skip, sample_keys};

/// A segment of each tier: warp (up to 128 keys), block (up to 2048), stream (2049 and more,
/// k up to 2048) and multi-block (k above 2048); random keys, then keys in few tied classes
/// (the tie-break and the exact path of the stream tier), default and opted-out contracts.
#[test]
fn every_batched_tier_once_in_small_launches() {
    let Some(cuda) = gpu_or_skip() else { return };
    let sizes = [100usize, 1500, 2049, 9000, 5000];
    let ks = [8i64, 300, 2048, 64, 2500];
    let dirs = [0u8, 1, 0, 1, 0];
    let total = sizes.iter().sum();
    let random = Case::contiguous(sample_keys::<f32>(total, 61), &sizes, &ks, &dirs);
    let tied = Case::contiguous(tied_keys::<u32>(total, 62), &sizes, &ks, &dirs);
    let opt_out = require!(determinism::NotGuaranteed, output_ordering::Unsorted);
    check_on_gpu(&cuda, &random, &Env::new());
    check_on_gpu(&cuda, &random, &opt_out);
    check_on_gpu(&cuda, &tied, &Env::new());
}

/// Single-problem top-k through the sample, prefilter and rank-sort stages (the fast path
/// needs 65536 keys) and the input-order stages (fewer keys), against the host.
#[test]
fn single_problem_stages_once() {
    let Some(cuda) = gpu_or_skip() else { return };
    let host = oxicub_algorithms::Host::new();
    for (len, kv) in [(70_000usize, 100usize), (5000, 700)] {
        let keys = sample_keys::<f32>(len, 63 + len as u64);
        let device_keys = cuda.upload(&keys).expect("upload");
        let mut out = cuda.upload(&vec![f32::NAN; kv]).expect("poison");
        let kp = k::uniform(kv as i64).expect("k");
        topk::max_keys(
            &cuda,
            device_keys.as_view(),
            out.as_view_mut(),
            &kp,
            &Env::new(),
        )
        .and_then(|outcome| outcome.check())
        .expect("gpu");
        let mut expected = vec![0f32; kv];
        topk::max_keys(&host, &keys[..], &mut expected[..], &kp, &Env::new())
            .and_then(|outcome| outcome.check())
            .expect("host");
        let got = cuda.download(&out.as_view()).expect("download");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&expected), "n = {len}, k = {kv}");
    }
}
