//! Batched top-k on the GPU against the host backend, the stream tier
//! (`docs/design/batched_topk.md`, "Stream tier"): segments of 2049 ..= its cap keys with min(k,
//! size) <= 2048 (BatchedTiers::stream_max_size), filtered by chunks against a sampled threshold,
//! then selected by a block per segment (buckets, or the exact radix select over the candidates or
//! over every key); larger k or larger segments go to the multi-block tier in the same call. The
//! clustered launch is in `batched_topk_gpu_cluster.rs`. Each test skips without a GPU (fails with
//! OXICUB_REQUIRE_GPU=1).

use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::{AnyBackend, Cuda, Host};
use oxicub_env::{determinism, output_ordering, require, tie_break, Env, Environment};
use oxicub_params::{direction, k, num_segments, segment_size, SelectDirection};
use oxicub_test::batched_topk::{check_on_gpu, random_directions, sample_miss_row, Case};
use oxicub_test::cases::{ar1_scores, crowded_rows, poison, tied_keys, unit_scores, F32_SPECIALS};
use oxicub_test::oracle::{check_top_k, RefKey};
use oxicub_test::{every_key_type, for_every_env, gpu_or_skip, sample_keys, SplitMix64};

/// Sparse attention: top-2048 of 131072 scores per query (the stream tier).
#[test]
fn sparse_attention_shape() {
    let Some(cuda) = gpu_or_skip() else { return };
    let queries = 8usize;
    let scores: Vec<half::bf16> = sample_keys(queries * 131_072, 22);
    let problem = Problem::strided(
        131_072,
        segment_size::Static::<131_072>::new(),
        k::Static::<2048>::new(),
        direction::Max,
        num_segments::uniform(queries as i64).expect("n"),
    );
    let run = |backend: &AnyBackend| {
        let (mut top, mut at) = (
            vec![half::bf16::ZERO; queries * 2048],
            vec![0i64; queries * 2048],
        );
        batched_topk::select_indices(
            backend,
            &problem,
            &scores[..],
            &mut top[..],
            &mut at[..],
            &Env::new(),
        )
        .expect("call")
        .check()
        .expect("valid");
        at
    };
    assert_eq!(
        run(&AnyBackend::Cuda(cuda)),
        run(&AnyBackend::Host(Host::new()))
    );
}

#[test]
fn stream_tier_every_requirement_combination() {
    let Some(cuda) = gpu_or_skip() else { return };
    let case = Case::stream(sample_keys::<f32>, 40);
    for_every_env!(check_on_gpu(&cuda, &case));
    let ties = Case::stream(tied_keys::<i32>, 41);
    for_every_env!(check_on_gpu(&cuda, &ties));
}

#[test]
fn stream_tier_every_key_type() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey>(cuda: &Cuda, seed: u64) {
        let case = Case::stream(sample_keys::<K>, seed);
        check_on_gpu(cuda, &case, &Env::new());
        check_on_gpu(cuda, &case, &require!(tie_break::PreferLargerIndex));
        check_on_gpu(
            cuda,
            &case,
            &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        );
        check_on_gpu(cuda, &case, &require!(output_ordering::Sorted));
        let ties = Case::stream(tied_keys::<K>, seed + 100);
        check_on_gpu(cuda, &ties, &Env::new());
        check_on_gpu(
            cuda,
            &ties,
            &require!(tie_break::PreferLargerIndex, output_ordering::Unsorted),
        );
    }
    every_key_type!(each, &cuda, 42);
}

#[test]
fn stream_tier_all_equal_nan_signed_zeros_and_a_tie_at_the_kth_key() {
    let Some(cuda) = gpu_or_skip() else { return };
    let equal = Case::stream(|n, _| vec![7u32; n], 54);
    for_every_env!(check_on_gpu(&cuda, &equal));
    let specials = F32_SPECIALS;
    let special = Case::stream(
        |n, _| specials.iter().copied().cycle().take(n).collect(),
        55,
    );
    for_every_env!(check_on_gpu(&cuda, &special));
    // Distinct keys except one value repeated around the k-th position: the boundary digit
    // resolves to a single key with more copies than slots left.
    let tie = Case::stream(
        |n, s| {
            let mut keys: Vec<f64> = sample_keys(n, s);
            for (i, key) in keys.iter_mut().enumerate() {
                if i % 5 == 0 {
                    *key = 0.5;
                }
            }
            keys
        },
        56,
    );
    for_every_env!(check_on_gpu(&cuda, &tie));
    // Scores in [0, 1) and one NaN per 1000: the candidates' ranks span the whole range, so
    // the buckets degenerate and the exact select over the candidates decides.
    let outlier = Case::stream(
        |n, s| {
            let mut keys = unit_scores(n, s, 24);
            for key in keys.iter_mut().step_by(1000) {
                *key = f32::NAN;
            }
            keys
        },
        61,
    );
    for_every_env!(check_on_gpu(&cuda, &outlier));
}

/// A sample that misses while NaNs fill the candidates past k. The keys that every sample of
/// a 131072-key segment reads (sample_miss_row) are its 8192 best numbers, so only a few m
/// keys reach the threshold, and one other key in 32 is a NaN (of either sign: every NaN
/// ranks above +inf). For min (segment 1) the NaNs rank last, below the threshold, yet the
/// f32 / f64 filter's float compare passes them: the candidates hold more than k keys without
/// holding the k best, and must not be taken for them. For max (segment 0) the NaNs are the k
/// best and reach any threshold: the candidates hold them.
#[test]
fn stream_tier_sample_miss_with_nans_below_the_threshold() {
    let Some(cuda) = gpu_or_skip() else { return };
    const SIZE: usize = 131_072;
    let dirs = [0u8, 1];
    let keys: Vec<f64> = dirs
        .iter()
        .zip(70u64..)
        .flat_map(|(&dir, seed)| sample_miss_row(dir, seed))
        .collect();
    let narrow: Vec<f32> = keys
        .iter()
        .map(|&k| match (k.is_nan(), k.is_sign_negative()) {
            (true, true) => -f32::NAN,
            (true, false) => f32::NAN,
            _ => k as f32,
        })
        .collect();
    let case = Case::contiguous(keys, &[SIZE, SIZE], &[2048, 2048], &dirs);
    for_every_env!(check_on_gpu(&cuda, &case));
    let case = Case::contiguous(narrow, &[SIZE, SIZE], &[2048, 2048], &dirs);
    for_every_env!(check_on_gpu(&cuda, &case));
}

/// Smooth scores (an AR(1) series with coefficient 0.99: neighbouring keys correlated), where
/// the candidates crowd into a few of a segment's regions: the fullest region holds several
/// times its even share, which the regions' slots (four times the share) must take.
#[test]
fn stream_tier_smooth_scores() {
    let Some(cuda) = gpu_or_skip() else { return };
    const SIZE: usize = 131_072;
    let keys = ar1_scores(&mut SplitMix64::new(73), 3 * SIZE, 0.99);
    let case = Case::contiguous(keys, &[SIZE, SIZE, SIZE], &[2048, 2048, 1000], &[0, 1, 0]);
    for_every_env!(check_on_gpu(&cuda, &case));
}

/// Inputs whose best keys crowd into a few filter regions: ascending and descending rows (the
/// k best in the last or first few thousand keys), an AR(1) series with coefficient 0.999,
/// one hot window of 3000 keys and five of 600, and an ascending row whose size is not a
/// multiple of the chunk. The filter spreads a quarter of each segment's slots by where the
/// sample's best keys lie; every region's slots must stay apart from its neighbours', in both
/// directions (the min direction takes the other end of the sorted rows).
#[test]
fn stream_tier_sorted_and_clustered_scores() {
    let Some(cuda) = gpu_or_skip() else { return };
    let [ascending, descending, smooth, one_window, five_windows] = crowded_rows(74);
    let short: Vec<f32> = (0..100_000).map(|j| j as f32).collect();
    let rows = [
        &ascending,
        &descending,
        &ascending,
        &smooth,
        &smooth,
        &one_window,
        &five_windows,
        &short,
    ];
    let sizes: Vec<usize> = rows.iter().map(|r| r.len()).collect();
    let keys: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    let ks = [2048, 2048, 2048, 2048, 1500, 2048, 2048, 2048];
    let case = Case::contiguous(keys, &sizes, &ks, &[1, 1, 0, 1, 0, 1, 1, 1]);
    for_every_env!(check_on_gpu(&cuda, &case));
}

/// Scores as a sparse-attention indexer produces them, where the buckets decide: distinct
/// (24 bits) and with a few dozen copies of each value (12 bits: ties at the k-th key).
#[test]
fn stream_tier_buckets_with_and_without_ties() {
    let Some(cuda) = gpu_or_skip() else { return };
    let distinct = Case::stream(|n, s| unit_scores(n, s, 24), 62);
    for_every_env!(check_on_gpu(&cuda, &distinct));
    let tied = Case::stream(|n, s| unit_scores(n, s, 12), 63);
    for_every_env!(check_on_gpu(&cuda, &tied));
}

/// More chunks than the filter has resident blocks (2 per SM: 264 on 132 SMs), so its blocks
/// stride over several chunks each (a path no call with fewer chunks than one wave reaches):
/// segments of one chunk whose k draws a sample or does not (k close to the size: about every
/// key is a candidate), in random order, so a block meets both kinds in both orders. 1-, 2-, 4-
/// and 8-byte keys, and keys with heavy ties (the exact paths). A wrong threshold or slot split
/// costs speed, not correctness (the final checks the candidates), so this pins the results of
/// the grid-stride path, not the clearing between its work items.
#[test]
fn stream_tier_grid_stride_over_sampled_and_unsampled_segments() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn case<K: RefKey>(keys_for: impl Fn(usize, u64) -> Vec<K>, seed: u64) -> Case<K> {
        let mut rng = SplitMix64::new(seed);
        let count = 700;
        // (size, k): a small k (sampled), k = 2048 of a segment barely larger (no sample:
        // about every key is a candidate), k = 2048 of a larger one (sampled). Sizes are
        // multiples of 16 keys, so every segment starts 16-byte aligned and streams as
        // vectors through the batch stage.
        let (sizes, ks): (Vec<usize>, Vec<i64>) = (0..count)
            .map(|_| {
                let size = 2064 + 16 * (rng.next_u64() % 875) as usize;
                match rng.next_u64() % 3 {
                    0 => (size, 1 + (rng.next_u64() % 300) as i64),
                    1 => (2064 + 16 * (rng.next_u64() % 3) as usize, 2048),
                    _ => (size, 2048),
                }
            })
            .unzip();
        let total = sizes.iter().sum();
        let d = random_directions(&mut rng, count);
        Case::contiguous(keys_for(total, seed), &sizes, &ks, &d)
    }
    let f32s = case(sample_keys::<f32>, 70);
    for_every_env!(check_on_gpu(&cuda, &f32s));
    let f64s = case(sample_keys::<f64>, 71);
    check_on_gpu(&cuda, &f64s, &Env::new());
    check_on_gpu(
        &cuda,
        &f64s,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
    );
    let ties = case(tied_keys::<i32>, 72);
    check_on_gpu(&cuda, &ties, &Env::new());
    check_on_gpu(&cuda, &ties, &require!(tie_break::PreferLargerIndex));
    // 1- and 2-byte keys: 16 and 8 keys a vector, 2 and 4 vectors a lane's batch.
    check_on_gpu(&cuda, &case(sample_keys::<u8>, 73), &Env::new());
    check_on_gpu(&cuda, &case(sample_keys::<half::f16>, 74), &Env::new());
}

/// Segments above the stream tier's cap for their key width go to the multi-block tier in
/// the same call: 8-byte keys above 131072 items, 4-byte keys above 262144.
#[test]
fn stream_tier_routes_by_size_and_k_in_one_call() {
    let Some(cuda) = gpu_or_skip() else { return };
    let sizes = [131_072usize, 131_073, 3000, 200, 2049];
    let ks = [2048i64, 2048, 2048, 20, 100];
    let keys: Vec<u64> = sample_keys(sizes.iter().sum(), 57);
    let case = Case::contiguous(keys, &sizes, &ks, &[0, 1, 0, 1, 1]);
    for_every_env!(check_on_gpu(&cuda, &case));
    let sizes = [262_144usize, 262_145, 4000];
    let keys: Vec<f32> = sample_keys(sizes.iter().sum(), 58);
    let case = Case::contiguous(keys, &sizes, &[2048, 2048, 2048], &[1, 0, 0]);
    check_on_gpu(&cuda, &case, &Env::new());
    check_on_gpu(&cuda, &case, &require!(tie_break::PreferLargerIndex));
    check_on_gpu(
        &cuda,
        &case,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
    );
}

/// Keys only and pairs with 4- and 8-byte values through the stream tier, against the host:
/// the values carried are the items' global positions, so each output's source is checked.
#[test]
fn stream_tier_keys_and_pairs() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey, V>(cuda: &Cuda, case: &Case<K>, env: &impl Environment, value: fn(u64) -> V)
    where
        V: oxicub_algorithms::DeviceValue + PartialEq + std::fmt::Debug + Default,
        V: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + Into<u64>,
    {
        let n = case.ks.len();
        let stride = case.stride();
        let sizes = || {
            segment_size::PerSegment::<(), 0, { 1 << 40 }>::new(())
                .with_bounds(0, case.max_size())
                .expect("bounds")
        };
        let values: Vec<V> = (0..case.keys.len() as u64).map(value).collect();
        // Host.
        let problem = Problem::offsets(
            &case.begin[..],
            &case.end[..],
            sizes(),
            k::PerSegment::<_, 0, { 1 << 40 }>::new(&case.ks[..])
                .with_bounds(0, case.max_k())
                .expect("bounds"),
            direction::PerSegment::<_>::new(&case.dirs[..]),
            num_segments::uniform(n as i64).expect("n"),
        );
        let poison_value = value(u64::from(u32::MAX));
        let (mut host_keys, mut host_values) = (
            vec![poison::<K>(); n * stride],
            vec![poison_value; n * stride],
        );
        batched_topk::select_pairs(
            &Host::new(),
            &problem,
            &case.keys[..],
            &values[..],
            &mut host_keys[..],
            &mut host_values[..],
            env,
        )
        .expect("host call")
        .check()
        .expect("valid");
        let mut host_only = vec![poison::<K>(); n * stride];
        batched_topk::select_keys(
            &Host::new(),
            &problem,
            &case.keys[..],
            &mut host_only[..],
            env,
        )
        .expect("host call")
        .check()
        .expect("valid");
        // GPU.
        let begin = cuda.upload(&case.begin).expect("upload");
        let end = cuda.upload(&case.end).expect("upload");
        let ks = cuda.upload(&case.ks).expect("upload");
        let dirs = cuda.upload(&case.dirs).expect("upload");
        let device_keys = cuda.upload_keys(&case.keys).expect("upload");
        let device_values = cuda.upload(&values).expect("upload");
        let problem = Problem::offsets(
            begin.as_view(),
            end.as_view(),
            sizes(),
            k::PerSegment::<_, 0, { 1 << 40 }>::new(ks.as_view())
                .with_bounds(0, case.max_k())
                .expect("bounds"),
            direction::PerSegment::<_>::new(dirs.as_view()),
            num_segments::uniform(n as i64).expect("n"),
        );
        let mut out_keys = cuda
            .upload_keys(&vec![poison::<K>(); n * stride])
            .expect("poison");
        let mut out_values = cuda
            .upload(&vec![poison_value; n * stride])
            .expect("poison");
        batched_topk::select_pairs(
            cuda,
            &problem,
            device_keys.as_view(),
            device_values.as_view(),
            out_keys.as_view_mut(),
            out_values.as_view_mut(),
            env,
        )
        .expect("gpu call")
        .check()
        .expect("valid");
        let gpu_keys = cuda.download_keys(&out_keys).expect("download");
        let gpu_values = cuda.download(&out_values.as_view()).expect("download");
        let mut only = cuda
            .upload_keys(&vec![poison::<K>(); n * stride])
            .expect("poison");
        batched_topk::select_keys(
            cuda,
            &problem,
            device_keys.as_view(),
            only.as_view_mut(),
            env,
        )
        .expect("gpu call")
        .check()
        .expect("valid");
        let gpu_only = cuda.download_keys(&only).expect("download");
        let r = env.resolved();
        let bits = |v: &[K]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for i in 0..n {
            let (b, e) = (case.begin[i] as usize, case.end[i] as usize);
            let written = (case.ks[i] as usize).min(e - b);
            let at = i * stride..i * stride + written;
            let what = format!(
                "{} pairs of {} bytes, segment {i} k={} {r:?}",
                K::KEY_TYPE,
                std::mem::size_of::<V>(),
                case.ks[i]
            );
            let indices: Vec<u64> = gpu_values[at.clone()]
                .iter()
                .map(|&v| v.into().wrapping_sub(b as u64))
                .collect();
            let dir = if case.dirs[i] == 0 {
                SelectDirection::Max
            } else {
                SelectDirection::Min
            };
            check_top_k(
                &what,
                &case.keys[b..e],
                written,
                dir,
                r,
                &gpu_keys[at.clone()],
                &indices,
            );
            assert!(
                gpu_values[at.end..(i + 1) * stride]
                    .iter()
                    .all(|&v| v == poison_value),
                "{what}: a slot past the results was written"
            );
            if r.pins_output() {
                assert_eq!(
                    gpu_values[at.clone()],
                    host_values[at.clone()],
                    "{what}: values"
                );
                assert_eq!(
                    bits(&gpu_only[at.clone()]),
                    bits(&host_only[at.clone()]),
                    "{what}: keys only"
                );
            }
        }
    }
    let case = Case::stream(sample_keys::<f32>, 59);
    let ties = Case::stream(tied_keys::<u64>, 60);
    let to_u32 = |x: u64| x as u32;
    let to_u64 = |x: u64| x;
    each(&cuda, &case, &Env::new(), to_u32);
    each(&cuda, &case, &Env::new(), to_u64);
    each(
        &cuda,
        &case,
        &require!(tie_break::PreferLargerIndex),
        to_u64,
    );
    each(&cuda, &ties, &Env::new(), to_u32);
    each(
        &cuda,
        &ties,
        &require!(tie_break::PreferLargerIndex, output_ordering::Unsorted),
        to_u64,
    );
    each(
        &cuda,
        &ties,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        to_u32,
    );
}
