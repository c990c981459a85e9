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

/// Long rows of a direct call, split into chunks for the stream tier and their candidates
/// selected again (docs/design/batched_topk.md, "Long rows"), against the host in every
/// requirement combination (bit for bit where the contract pins the output): [1 x 2^20] and
/// [4 x 2^20] f32 rows, k = 2048, 1024 and 512, both directions; rows of 64 values, so that the
/// k-th key's ties fill whole chunks and the tie-break decides between chunks; all-equal rows;
/// NaN, -0.0 and +0.0 among random keys; f64 rows and u8 rows (4 Mi keys: the 1-byte cap is
/// 1 Mi). Each call makes the split's two clustered launches (the multi-block tier makes none).
#[test]
fn long_rows_split_into_chunks_for_the_stream_tier() {
    use oxicub_algorithms::Cuda;
    use oxicub_env::Environment;
    use oxicub_kernels::families::batched_topk::clustered_launches;
    use oxicub_params::SelectDirection::{Max, Min};
    use oxicub_test::batched_topk::{check_strided, StridedShape};
    use oxicub_test::cases::F32_SPECIALS;
    use oxicub_test::oracle::RefKey;
    let Some(cuda) = gpu_or_skip() else { return };
    fn split<K: RefKey, E: Environment>(cuda: &Cuda, keys: &[K], shape: StridedShape, env: &E) {
        let before = clustered_launches();
        check_strided(cuda, keys, shape, env);
        assert!(
            clustered_launches() >= before + 2,
            "{} {shape:?}: not split",
            K::KEY_TYPE
        );
    }
    const L: usize = 1 << 20;
    let rows = |n: usize, k: usize, dir| StridedShape::rows(n, L, L, k, dir);
    let random: Vec<f32> = sample_keys(4 * L, 120);
    for dir in [Max, Min] {
        for_every_env!(split(&cuda, &random, rows(1, 2048, dir)));
    }
    split(&cuda, &random, rows(4, 2048, Min), &Env::new());
    split(&cuda, &random, rows(1, 1024, Max), &Env::new());
    split(&cuda, &random, rows(1, 512, Max), &Env::new());
    let values: Vec<f32> = (0..4 * L as u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as f32)
        .collect();
    for_every_env!(split(&cuda, &values, rows(4, 2048, Max)));
    split(&cuda, &values, rows(1, 700, Min), &Env::new());
    let equal = vec![1.5f32; L];
    split(&cuda, &equal, rows(1, 2048, Max), &Env::new());
    split(
        &cuda,
        &equal,
        rows(1, 2048, Max),
        &require!(tie_break::PreferLargerIndex),
    );
    let mut specials = random.clone();
    for (i, key) in specials.iter_mut().enumerate().step_by(97) {
        *key = F32_SPECIALS[i % F32_SPECIALS.len()];
    }
    for dir in [Max, Min] {
        split(&cuda, &specials, rows(2, 2048, dir), &Env::new());
        split(
            &cuda,
            &specials,
            rows(2, 2048, dir),
            &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        );
    }
    let wide: Vec<f64> = sample_keys(L, 121);
    split(&cuda, &wide, rows(1, 2048, Max), &Env::new());
    let bytes: Vec<u8> = sample_keys(4 * L, 122);
    let shape = StridedShape::rows(1, 4 * L, 4 * L, 2048, Min);
    split(&cuda, &bytes, shape, &Env::new());
}

/// The split with each output kind: keys only, `u32` indices, and copied `u32` and `u64`
/// values (each the key's position, scrambled), against the host bit for bit.
#[test]
fn long_rows_split_with_keys_indices_and_values() {
    use oxicub_algorithms::batched_topk::{self, Problem};
    use oxicub_algorithms::Host;
    use oxicub_kernels::families::batched_topk::clustered_launches;
    use oxicub_params::{direction, k, num_segments, segment_size};
    use oxicub_test::cases::poison;
    let Some(cuda) = gpu_or_skip() else { return };
    const L: usize = 1 << 20;
    const K: usize = 2048;
    let keys: Vec<f32> = (0..2 * L as u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as f32)
        .collect();
    let problem = Problem::strided(
        L,
        segment_size::Static::<{ L as i64 }>::new(),
        k::Static::<{ K as i64 }>::new(),
        direction::Max,
        num_segments::uniform(2).expect("n"),
    );
    let env = Env::new();
    let device_keys = cuda.upload(&keys).expect("upload");
    // The GPU's keys equal the host's bit for bit.
    let keys_match = |out: &cudarc::driver::CudaSlice<f32>, host: &[f32], what: &str| {
        let bits = |keys: &[f32]| keys.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let got = cuda.download(&out.as_view()).expect("download");
        assert_eq!(bits(&got), bits(host), "{what}: keys differ from the host");
    };
    let split = |f: &mut dyn FnMut()| {
        let before = clustered_launches();
        f();
        assert!(clustered_launches() >= before + 2, "not split");
    };
    // Keys only.
    let mut host = vec![poison::<f32>(); 2 * K];
    batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut host[..], &env)
        .and_then(|o| o.check())
        .expect("host");
    let mut out = cuda.upload(&vec![poison::<f32>(); 2 * K]).expect("upload");
    split(&mut || {
        batched_topk::select_keys(
            &cuda,
            &problem,
            device_keys.as_view(),
            out.as_view_mut(),
            &env,
        )
        .and_then(|o| o.check())
        .expect("GPU");
    });
    keys_match(&out, &host, "keys only");
    // u32 indices.
    let (mut host_keys, mut host_indices) = (vec![poison::<f32>(); 2 * K], vec![u32::MAX; 2 * K]);
    batched_topk::select_indices(
        &Host::new(),
        &problem,
        &keys[..],
        &mut host_keys[..],
        &mut host_indices[..],
        &env,
    )
    .and_then(|o| o.check())
    .expect("host");
    let mut out_keys = cuda.upload(&vec![poison::<f32>(); 2 * K]).expect("upload");
    let mut out_indices = cuda.upload(&vec![u32::MAX; 2 * K]).expect("upload");
    split(&mut || {
        batched_topk::select_indices(
            &cuda,
            &problem,
            device_keys.as_view(),
            out_keys.as_view_mut(),
            out_indices.as_view_mut(),
            &env,
        )
        .and_then(|o| o.check())
        .expect("GPU");
    });
    assert_eq!(
        cuda.download(&out_indices.as_view()).expect("download"),
        host_indices
    );
    keys_match(&out_keys, &host_keys, "u32 indices");
    // Copied values, 4 and 8 bytes.
    macro_rules! pairs {
        ($value:expr) => {{
            let value = $value;
            let values: Vec<_> = (0..keys.len() as u64).map(value).collect();
            let poison_value = value(u64::MAX);
            let (mut host_keys, mut host_values) =
                (vec![poison::<f32>(); 2 * K], vec![poison_value; 2 * K]);
            batched_topk::select_pairs(
                &Host::new(),
                &problem,
                &keys[..],
                &values[..],
                &mut host_keys[..],
                &mut host_values[..],
                &env,
            )
            .and_then(|o| o.check())
            .expect("host");
            let device_values = cuda.upload(&values).expect("upload");
            let mut out_keys = cuda.upload(&vec![poison::<f32>(); 2 * K]).expect("upload");
            let mut out_values = cuda.upload(&vec![poison_value; 2 * K]).expect("upload");
            split(&mut || {
                batched_topk::select_pairs(
                    &cuda,
                    &problem,
                    device_keys.as_view(),
                    device_values.as_view(),
                    out_keys.as_view_mut(),
                    out_values.as_view_mut(),
                    &env,
                )
                .and_then(|o| o.check())
                .expect("GPU");
            });
            assert_eq!(
                cuda.download(&out_values.as_view()).expect("download"),
                host_values
            );
            keys_match(&out_keys, &host_keys, "pairs");
        }};
    }
    pairs!(|i: u64| (i as u32) ^ 0x5A5A_5A5A);
    pairs!(|i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
}
