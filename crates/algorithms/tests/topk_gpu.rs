//! Top-k on the GPU against the host oracle: bit for bit where the contract pins the output
//! (the default, an explicit tie-break with stable order), exactly the contract elsewhere; the
//! seeds' worked example; adversarial inputs; outputs poisoned before each run. Each test
//! skips without a GPU (fails with OXICUB_REQUIRE_GPU=1).

use half::{bf16, f16};
use oxicub_algorithms::radix::{RadixBits, RadixKey};
use oxicub_algorithms::segments::{Outcome, Pending};
use oxicub_algorithms::{topk, AnyBackend, Cuda, Error};
use oxicub_env::{determinism, output_ordering, require, tie_break, Env, Environment};
use oxicub_params::{direction, k, SelectDirection};
use oxicub_test::cases::{poison, POISON_INDEX};
use oxicub_test::oracle::{check_top_k, RefKey};
use oxicub_test::{for_every_env, gpu_or_skip, sample_keys};
/// Extra output slots past k that must stay untouched.
const SLACK: usize = 3;

/// Runs top-k with indices on the GPU (outputs poisoned, SLACK slots longer than k) and on the
/// host, and checks the GPU result.
fn check_gpu<K: RefKey, E: Environment>(
    cuda: &Cuda,
    keys: &[K],
    k: usize,
    dir: SelectDirection,
    env: &E,
) {
    let r = env.resolved();
    let what = format!("{} n={} k={k} {dir} {r:?}", K::KEY_TYPE, keys.len());
    let choice = direction::Choice::<direction::Either>::new(dir).expect("direction");
    let kp = k::uniform(k as i64).expect("k");
    let device_keys = cuda.upload_keys(keys).expect("upload");
    let mut out_keys = cuda
        .upload_keys(&vec![poison::<K>(); k + SLACK])
        .expect("poison");
    let mut out_indices = cuda.upload(&vec![POISON_INDEX; k + SLACK]).expect("poison");
    topk::select_indices(
        cuda,
        &choice,
        device_keys.as_view(),
        out_keys.as_view_mut(),
        out_indices.as_view_mut(),
        &kp,
        env,
    )
    .and_then(Outcome::check)
    .expect(&what);
    let got_keys = cuda.download_keys(&out_keys).expect("download");
    let got_indices = cuda.download(&out_indices.as_view()).expect("download");
    for j in k..k + SLACK {
        assert!(
            got_keys[j].to_bits() == poison::<K>().to_bits(),
            "{what}: key slot {j} past k was written"
        );
        assert_eq!(
            got_indices[j], POISON_INDEX,
            "{what}: index slot {j} past k was written"
        );
    }
    check_top_k(&what, keys, k, dir, r, &got_keys[..k], &got_indices[..k]);
    if r.pins_output() {
        let (host_keys, host_indices) = topk::select_indices_owned::<_, _, _, u64, _, _>(
            &oxicub_algorithms::Host::new(),
            &choice,
            keys,
            &kp,
            env,
        )
        .and_then(Pending::check)
        .expect("host");
        assert_eq!(
            got_indices[..k],
            host_indices[..],
            "{what}: indices differ from the host"
        );
        let bits = |v: &[K]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert!(
            bits(&got_keys[..k]) == bits(&host_keys),
            "{what}: keys differ from the host"
        );
    }
}

fn check_modes<K: RefKey>(cuda: &Cuda, keys: &[K], ks: &[usize]) {
    for &k in ks.iter().filter(|&&k| k <= keys.len()) {
        for dir in [SelectDirection::Max, SelectDirection::Min] {
            check_gpu(cuda, keys, k, dir, &Env::new());
            check_gpu(cuda, keys, k, dir, &require!(tie_break::PreferLargerIndex));
            check_gpu(
                cuda,
                keys,
                k,
                dir,
                &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
            );
            check_gpu(
                cuda,
                keys,
                k,
                dir,
                &require!(determinism::RunToRun, output_ordering::Sorted),
            );
        }
    }
}

#[test]
fn worked_example_every_cell_on_the_gpu() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys = [10i32, 8, 8, 8, 6, 5];
    for_every_env!(check_gpu(&cuda, &keys[..], 3, SelectDirection::Max));
    for_every_env!(check_gpu(&cuda, &keys[..], 3, SelectDirection::Min));
    // The fully pinned cells, literally.
    let run = |env_larger: bool| {
        let device_keys = cuda.upload(&keys).expect("upload");
        let kp = k::Static::<3>::new();
        let result = if env_larger {
            topk::select_indices_owned::<_, _, _, u64, _, _>(
                &cuda,
                &direction::Max,
                device_keys.as_view(),
                &kp,
                &require!(tie_break::PreferLargerIndex),
            )
        } else {
            topk::select_indices_owned::<_, _, _, u64, _, _>(
                &cuda,
                &direction::Max,
                device_keys.as_view(),
                &kp,
                &Env::new(),
            )
        }
        .and_then(Pending::check)
        .expect("example");
        (
            cuda.download_keys(&result.0).expect("keys"),
            cuda.download(&result.1.as_view()).expect("indices"),
        )
    };
    assert_eq!(run(false), (vec![10, 8, 8], vec![0, 1, 2]));
    assert_eq!(run(true), (vec![10, 8, 8], vec![0, 2, 3]));
}

#[test]
fn every_key_type_random_and_tied() {
    let Some(cuda) = gpu_or_skip() else { return };
    let ks = [0, 1, 2, 100, 1000, 4999, 5000];
    macro_rules! each {
        ($($t:ty),*) => {$(
            check_modes::<$t>(&cuda, &sample_keys::<$t>(5000, 1), &ks);
            // Few distinct values: ties at every boundary.
            let tied: Vec<$t> = sample_keys::<$t>(7, 3).into_iter().cycle().take(5000).collect();
            check_modes::<$t>(&cuda, &tied, &ks);
        )*};
    }
    each!(u8, u16, u32, u64, i8, i16, i32, i64, f16, bf16, f32, f64);
}

#[test]
fn lengths_around_tiles_and_large_inputs() {
    let Some(cuda) = gpu_or_skip() else { return };
    for n in [0usize, 1, 31, 255, 256, 257, 100_003] {
        let keys = sample_keys::<f32>(n, n as u64);
        check_modes(&cuda, &keys, &[0, 1, n / 3, n.saturating_sub(1), n]);
    }
    let n = 3_000_017;
    let keys = sample_keys::<u32>(n, 7);
    check_modes(&cuda, &keys, &[1, 2048, n / 2]);
    let n = 10_000_000;
    let mut keys = sample_keys::<f32>(n, 8);
    for key in keys.iter_mut().step_by(5) {
        *key = 0.5; // many ties
    }
    check_gpu(&cuda, &keys, 1000, SelectDirection::Max, &Env::new());
    check_gpu(
        &cuda,
        &keys,
        n / 2,
        SelectDirection::Min,
        &require!(tie_break::PreferLargerIndex),
    );
    check_gpu(
        &cuda,
        &keys,
        64,
        SelectDirection::Max,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
    );
}

/// The fast path (sampled threshold, candidate buffer, rank sort) and each of its fallbacks:
/// ties at the pivot that the rank buffer holds (the tie-break drops the surplus), ties that
/// overflow the rank buffer (the input-order stages with the threshold), and candidates that
/// overflow the candidate buffer (all keys equal: the input-order stages over the input).
#[test]
fn fast_path_ties_and_buffer_overflows() {
    let Some(cuda) = gpu_or_skip() else { return };
    let n = 1 << 20;
    // Uniform in [0, 1) with 24-bit steps, like the benchmark's keys: few ties.
    let base: Vec<f32> = (0..n as u64)
        .map(|i| {
            let mut z = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(21);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    // Random keys: the plain fast path, several k.
    check_modes(&cuda, &base, &[1, 8, 1000, 16384]);
    // `ties` copies of the best key spread over the input: k = 1000 takes some of them.
    for ties in [3000usize, 8000] {
        let mut keys = base.clone();
        for j in 0..ties {
            keys[(j * 524_287 + 11) % n] = 2.0;
            keys[(j * 786_433 + 6) % n] = -1.0; // and as many of the worst, for min
        }
        check_modes(&cuda, &keys, &[1000]);
    }
    // All keys equal: every key reaches the threshold, more than the candidate buffer holds.
    check_modes(&cuda, &vec![0.5f32; 1 << 20], &[1, 1000]);
}

/// `keys` with the sign bit set (`negative`) or cleared, and every key whose radix code is all
/// ones (NaN, or the largest integer) replaced by a small value of that sign.
fn signed_variant<K: RadixKey>(keys: &[K], negative: Option<bool>) -> Vec<K> {
    let bits = <K::Bits as RadixBits>::BITS;
    let ones = u64::MAX >> (64 - bits);
    let sign = 1u64 << (bits - 1);
    keys.iter()
        .enumerate()
        .map(|(i, key)| {
            let raw = key.to_bits().to_u64();
            let (set, clear) = match negative {
                Some(true) => (sign, 0),
                Some(false) => (0, sign),
                None => (0, 0),
            };
            let mut b = (raw & !clear) | set;
            let as_key = |b: u64| K::from_bits(<K::Bits as RadixBits>::from_u64_truncating(b));
            if as_key(b).to_radix().to_u64() == ones {
                b = ((i as u64).wrapping_mul(0x9E37_79B9) & ((sign - 1) >> 2)) | set;
            }
            as_key(b)
        })
        .collect()
}

/// The fast path (at least 2^16 keys) for every key type, max and min: the prefilter tests raw
/// bit patterns against intervals derived from the threshold, one case per piece of the rank
/// order, so each type sees thresholds among NaNs (random bit patterns), among non-negative
/// and among negative keys (the sign forced), with and without NaNs.
#[test]
fn fast_path_every_key_type_and_sign() {
    let Some(cuda) = gpu_or_skip() else { return };
    let n = 1 << 17;
    macro_rules! each {
        ($($t:ty),*) => {$(
            let keys = sample_keys::<$t>(n, 31);
            check_modes::<$t>(&cuda, &keys, &[8, 1000]);
            for negative in [None, Some(true), Some(false)] {
                check_modes::<$t>(&cuda, &signed_variant(&keys, negative), &[8, 1000]);
            }
        )*};
    }
    each!(u8, u16, u32, u64, i8, i16, i32, i64, f16, bf16, f32, f64);
}

#[test]
fn all_equal_nan_and_signed_zeros() {
    let Some(cuda) = gpu_or_skip() else { return };
    check_modes(&cuda, &vec![7u16; 1000], &[0, 1, 10, 999, 1000]);
    check_modes(&cuda, &vec![f32::NAN; 1000], &[1, 10, 1000]);
    let mut keys = vec![
        0.0f32,
        -0.0,
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.0,
        -1.0,
    ];
    keys.push(f32::from_bits(0x7FC0_1234));
    let keys: Vec<f32> = keys.into_iter().cycle().take(700).collect();
    check_modes(&cuda, &keys, &[1, 2, 3, 90, 350, 699, 700]);
    let keys64: Vec<f64> = keys.iter().map(|&v| f64::from(v)).collect();
    check_modes(&cuda, &keys64, &[1, 90, 699]);
}

#[test]
fn pairs_and_deferred_k_on_the_gpu() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys = sample_keys::<i32>(10_000, 11);
    let values: Vec<f64> = (0..keys.len()).map(|i| i as f64 * 0.5).collect();
    let device_keys = cuda.upload(&keys).expect("upload");
    let device_values = cuda.upload(&values).expect("upload");
    let mut out_keys = cuda.upload(&vec![i32::MIN; 600]).expect("poison");
    let mut out_values = cuda.upload(&vec![-1.0f64; 600]).expect("poison");
    topk::max_pairs(
        &cuda,
        device_keys.as_view(),
        device_values.as_view(),
        out_keys.as_view_mut(),
        out_values.as_view_mut(),
        &k::Static::<512>::new(),
        &Env::new(),
    )
    .and_then(Outcome::check)
    .expect("pairs");
    let mut host_keys = vec![0i32; 512];
    let mut host_values = vec![0f64; 512];
    topk::max_pairs(
        &oxicub_algorithms::Host::new(),
        &keys[..],
        &values[..],
        &mut host_keys[..],
        &mut host_values[..],
        &k::Static::<512>::new(),
        &Env::new(),
    )
    .and_then(Outcome::check)
    .expect("host pairs");
    let got_keys = cuda.download(&out_keys.as_view()).expect("download");
    let got_values = cuda.download(&out_values.as_view()).expect("download");
    assert_eq!(got_keys[..512], host_keys[..]);
    assert_eq!(got_values[..512], host_values[..]);
    assert!(got_values[512..].iter().all(|&v| v == -1.0));
}

/// One rule for a deferred `k` on every backend (issue 23, defect 11): it is checked where it
/// is read; outside its bounds it is clamped into them (the outputs are sized by the bounds)
/// and reported by the outcome's check as `Error::Param` naming `k` and the bound it broke
/// (the type's, the caller's runtime bounds, or the environment's guarantee), like a deferred
/// `num_segments`. The GPU (k read on the device) and the host (k read by the host) give the
/// same outputs and the same report; nothing past the clamped k is written.
#[test]
fn a_deferred_k_outside_its_bounds_is_clamped_and_reported() {
    use oxicub_params::guarantee::MaxK;
    use oxicub_params::{BoundOrigin, Bounds, ParamError};
    let Some(cuda) = gpu_or_skip() else { return };
    let keys = sample_keys::<i32>(10_000, 13);
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    let device_keys = cuda.upload(&keys).expect("upload");
    let runtime = Bounds::new(1, 512);
    let guaranteed = Bounds::new(1, 400);
    let cases = [
        // (k, with the MaxK<400> guarantee, written, the bounds broken and their origin)
        (300i64, false, 300usize, None),
        (700, false, 512, Some((runtime, BoundOrigin::Runtime))),
        (0, false, 1, Some((runtime, BoundOrigin::Runtime))),
        (
            5000,
            false,
            512,
            Some((Bounds::new(0, 1024), BoundOrigin::Static)),
        ),
        (
            -1,
            false,
            1,
            Some((Bounds::new(0, 1024), BoundOrigin::Static)),
        ),
        (450, true, 400, Some((guaranteed, BoundOrigin::Guarantee))),
    ];
    for (value, guarantee, written, report) in cases {
        let what = format!("deferred k = {value}, guarantee: {guarantee}");
        let device_k = cuda.upload(&[value]).expect("upload");
        let on_gpu = k::Deferred::<_, 0, 1024>::new(device_k.as_view())
            .with_bounds(1, 512)
            .expect("bounds");
        let on_host = k::Deferred::<_, 0, 1024>::new(&value)
            .with_bounds(1, 512)
            .expect("bounds");
        let mut out = cuda.upload(&vec![i32::MIN; 600]).expect("poison");
        let mut host_out = vec![i32::MIN; 600];
        let host = oxicub_algorithms::Host::new();
        let (gpu, host_result) = if guarantee {
            let env = Env::new().guarantee(MaxK::<400>::new());
            (
                topk::min_keys(
                    &cuda,
                    device_keys.as_view(),
                    out.as_view_mut(),
                    &on_gpu,
                    &env,
                ),
                topk::min_keys(&host, &keys[..], &mut host_out[..], &on_host, &env),
            )
        } else {
            let env = Env::new();
            (
                topk::min_keys(
                    &cuda,
                    device_keys.as_view(),
                    out.as_view_mut(),
                    &on_gpu,
                    &env,
                ),
                topk::min_keys(&host, &keys[..], &mut host_out[..], &on_host, &env),
            )
        };
        let gpu = gpu.expect("the front check passes").check();
        let host_result = host_result.expect("the front check passes").check();
        for result in [&gpu, &host_result] {
            match (report, result) {
                (None, Ok(())) => {}
                (Some((bounds, origin)), Err(Error::Param(e))) => assert_eq!(
                    e,
                    &ParamError::OutOfBounds {
                        param: "k",
                        value,
                        bounds,
                        origin
                    },
                    "{what}"
                ),
                (_, result) => panic!("{what}: {result:?}"),
            }
        }
        let got = cuda.download(&out.as_view()).expect("download");
        assert_eq!(got, host_out, "{what}: GPU and host outputs");
        assert_eq!(got[..written], sorted[..written], "{what}");
        assert!(
            got[written..].iter().all(|&v| v == i32::MIN),
            "{what}: tail"
        );
    }
    // Nothing to write (no keys, or k bounded by [0, 0]): a k outside its bounds is still read
    // on the device and reported.
    let empty = cuda.alloc_zeros::<i32>(1).expect("alloc");
    let device_k = cuda.upload(&[3i64]).expect("upload");
    let mut out = cuda.upload(&[i32::MIN]).expect("poison");
    for (len, bounds) in [(0usize, (0, 2)), (1, (0, 0))] {
        let kp = k::Deferred::<_>::new(device_k.as_view())
            .with_bounds(bounds.0, bounds.1)
            .expect("bounds");
        let keys = empty.slice(..len);
        let result = topk::max_keys(&cuda, keys, out.as_view_mut(), &kp, &Env::new())
            .expect("the front check passes")
            .check();
        let expected = ParamError::OutOfBounds {
            param: "k",
            value: 3,
            bounds: Bounds::new(bounds.0, bounds.1),
            origin: BoundOrigin::Runtime,
        };
        match result {
            Err(Error::Param(e)) => assert_eq!(e, expected, "len {len}"),
            result => panic!("len {len}: {result:?}"),
        }
    }
    assert_eq!(cuda.download(&out.as_view()).expect("download"), [i32::MIN]);
}

#[test]
fn any_backend_matches_the_host() {
    let Some(cuda) = gpu_or_skip() else { return };
    let any = AnyBackend::Cuda(cuda);
    let keys = sample_keys::<bf16>(20_000, 12);
    let (top, at) = topk::select_indices_owned::<_, _, _, u32, _, _>(
        &any,
        &direction::Min,
        &keys[..],
        &k::uniform(777).expect("k"),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("any");
    let (host_top, host_at) = topk::select_indices_owned::<_, _, _, u32, _, _>(
        &oxicub_algorithms::Host::new(),
        &direction::Min,
        &keys[..],
        &k::uniform(777).expect("k"),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host");
    assert_eq!(at, host_at);
    assert!(top
        .iter()
        .zip(&host_top)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    let values: Vec<u32> = (0..keys.len() as u32).collect();
    let (_, v) = topk::select_pairs_owned(
        &any,
        &direction::Max,
        &keys[..],
        &values[..],
        &k::Static::<5>::new(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("pairs");
    let (_, hv) = topk::select_pairs_owned(
        &oxicub_algorithms::Host::new(),
        &direction::Max,
        &keys[..],
        &values[..],
        &k::Static::<5>::new(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("pairs");
    assert_eq!(v, hv);
    let _ = f16::ZERO;
}

#[test]
fn gpu_argument_errors_need_no_launch() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys = cuda.upload(&[1u32, 2, 3]).expect("upload");
    let mut out = cuda.alloc_zeros::<u32>(4).expect("alloc");
    let err = topk::max_keys(
        &cuda,
        keys.as_view(),
        out.as_view_mut(),
        &k::Static::<4>::new(),
        &Env::new(),
    )
    .unwrap_err();
    assert!(matches!(&err, Error::Param(e) if e.param() == "k"), "{err}");
    let mut short = cuda.alloc_zeros::<u32>(1).expect("alloc");
    let err = topk::max_keys(
        &cuda,
        keys.as_view(),
        short.as_view_mut(),
        &k::Static::<2>::new(),
        &Env::new(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::BufferTooSmall { .. }), "{err}");
}

/// i32 indices (what most engines hold) are the u32 indices' values, on the GPU for top-k,
/// batched top-k, segmented sort and a set operation.
#[test]
fn i32_indices_equal_u32_indices() {
    use oxicub_algorithms::segmented_sort;
    use oxicub_algorithms::sets::{self, op};
    use oxicub_params::{num_segments, order, segment_size};
    let Some(cuda) = gpu_or_skip() else { return };
    let any = AnyBackend::Cuda(cuda);
    let keys = sample_keys::<f32>(40_000, 31);
    let (_, wide) = topk::select_indices_owned::<_, _, _, u32, _, _>(
        &any,
        &direction::Max,
        &keys[..],
        &k::uniform(1000).expect("k"),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("u32");
    let (_, narrow) = topk::select_indices_owned::<_, _, _, i32, _, _>(
        &any,
        &direction::Max,
        &keys[..],
        &k::uniform(1000).expect("k"),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("i32");
    assert!(narrow.iter().zip(&wide).all(|(&n, &w)| n as u32 == w));
    // Batched top-k: the top 8 of each of 100 rows of 400 (a MoE router's shape).
    let routed = oxicub_algorithms::batched_topk::Problem::strided(
        400,
        segment_size::Static::<400>::new(),
        k::Static::<8>::new(),
        direction::Max,
        num_segments::uniform(100).expect("rows"),
    );
    let mut top = vec![0f32; 800];
    let (mut expert_u32, mut expert_i32) = (vec![0u32; 800], vec![-1i32; 800]);
    oxicub_algorithms::batched_topk::select_indices(
        &any,
        &routed,
        &keys[..],
        &mut top[..],
        &mut expert_u32[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("u32 rows");
    oxicub_algorithms::batched_topk::select_indices(
        &any,
        &routed,
        &keys[..],
        &mut top[..],
        &mut expert_i32[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("i32 rows");
    assert!(expert_i32
        .iter()
        .zip(&expert_u32)
        .all(|(&n, &w)| n as u32 == w));
    // A segmented sort's positions within rows of 400.
    let rows = segmented_sort::Problem::strided(
        400,
        segment_size::Static::<400>::new(),
        order::Descending,
        num_segments::uniform(100).expect("rows"),
    );
    let mut sorted = vec![0f32; keys.len()];
    let (mut at_u32, mut at_i32) = (vec![0u32; keys.len()], vec![-1i32; keys.len()]);
    segmented_sort::sort_indices(
        &any,
        &rows,
        &keys[..],
        &mut sorted[..],
        &mut at_u32[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("u32 sort");
    segmented_sort::sort_indices(
        &any,
        &rows,
        &keys[..],
        &mut sorted[..],
        &mut at_i32[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("i32 sort");
    assert!(at_i32.iter().zip(&at_u32).all(|(&n, &w)| n as u32 == w));
    // A union's source positions.
    let a = oxicub_test::cases::sorted_keys::<f32>(20_000, 5000, 31, false);
    let b = oxicub_test::cases::sorted_keys::<f32>(20_000, 5000, 32, false);
    let mut out = vec![0f32; keys.len()];
    let (mut from_u32, mut from_i32) = (vec![0u32; keys.len()], vec![-1i32; keys.len()]);
    let n = sets::indices(
        &any,
        op::Union,
        order::Ascending,
        &a[..],
        &b[..],
        &mut out[..],
        &mut from_u32[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("u32 union");
    let m = sets::indices(
        &any,
        op::Union,
        order::Ascending,
        &a[..],
        &b[..],
        &mut out[..],
        &mut from_i32[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("i32 union");
    assert_eq!(n, m);
    assert!(from_i32[..n]
        .iter()
        .zip(&from_u32[..n])
        .all(|(&x, &y)| x as u32 == y));
}

/// `Cuda::warm_up` loads what a call shape launches: after warming a MoE router's shape (256
/// experts, top 8, u32 indices), the call compiles and reads nothing, and a second warm-up
/// finds every kernel loaded.
#[test]
fn warm_up_loads_what_a_call_launches() {
    use oxicub_algorithms::batched_topk;
    use oxicub_params::{num_segments, segment_size};
    let Some(cuda) = gpu_or_skip() else { return };
    let specs = batched_topk::kernel_specs::<f32, segment_size::Static<256>, k::Static<8>, Env>(4);
    let first = cuda.warm_up(specs.clone()).expect("warm-up");
    assert_eq!(
        first.compiled + first.from_disk + first.from_memory,
        specs.len()
    );
    let second = cuda.warm_up(specs.clone()).expect("warm-up");
    assert_eq!(second.from_memory, specs.len());
    let rows = batched_topk::Problem::strided(
        256,
        segment_size::Static::<256>::new(),
        k::Static::<8>::new(),
        direction::Max,
        num_segments::uniform(4096).expect("rows"),
    );
    let scores = sample_keys::<f32>(4096 * 256, 41);
    let device_scores = cuda.upload(&scores).expect("upload");
    let mut top = cuda.alloc_zeros::<f32>(4096 * 8).expect("alloc");
    let mut experts = cuda.alloc_zeros::<u32>(4096 * 8).expect("alloc");
    let before = oxicub_kernels::cache_stats();
    batched_topk::select_indices(
        &cuda,
        &rows,
        device_scores.as_view(),
        top.as_view_mut(),
        experts.as_view_mut(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("route");
    let after = oxicub_kernels::cache_stats();
    assert_eq!(
        after.compiled, before.compiled,
        "the call compiled a kernel"
    );
    assert_eq!(
        after.disk_hits, before.disk_hits,
        "the call read a kernel from disk"
    );
}
