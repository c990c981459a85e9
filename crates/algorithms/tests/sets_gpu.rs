//! Set operations on the GPU against the host backend, bit for bit: the seed's two
//! demonstrations, every operation for several key types in both orders with keys, pairs and
//! source positions (outputs poisoned first, so a write past the count is caught), inputs that
//! stress the Balanced Path (long runs of one key across many tiles, all keys equal), the
//! no-duplicates partition, and every order error reported as the host reports it.

use oxicub_algorithms::sets::{self, op, SetOperation};
use oxicub_algorithms::{AnyBackend, Cuda, Host, Pending};
use oxicub_env::{Env, Environment};
use oxicub_params::{guarantee, order, SortOrder};
use oxicub_test::cases::{poison, sorted_keys};
use oxicub_test::oracle::RefKey;
use oxicub_test::seed_sets::*;
use oxicub_test::{gpu_or_skip, SplitMix64};

/// One call's results: the checked count (or the error's text), the keys' bits, the positions.
type Result3 = (Result<usize, String>, Vec<u64>, Vec<u64>);

fn bits<K: RefKey>(keys: &[K]) -> Vec<u64> {
    keys.iter()
        .map(|k| oxicub_algorithms::radix::RadixBits::to_u64(k.to_bits()))
        .collect()
}

/// `sets::indices` of `operation` on the host.
fn on_host<K: RefKey, Op: SetOperation, E: Environment>(
    operation: Op,
    order: SortOrder,
    a: &[K],
    b: &[K],
    env: &E,
) -> Result3
where
    E::Ordering: oxicub_algorithms::contract::SortOrdering,
    E::TieBreak: oxicub_algorithms::contract::SortTieBreak,
{
    let bound = operation.bound(a.len() as u64, b.len() as u64) as usize;
    let (mut keys, mut from) = (vec![poison::<K>(); bound], vec![u64::MAX; bound]);
    let count = sets::indices(
        &Host::new(),
        operation,
        order::Choice::<order::Either>::new(order).expect("order"),
        a,
        b,
        &mut keys[..],
        &mut from[..],
        env,
    )
    .expect("the front check passes")
    .check()
    .map_err(|e| e.to_string());
    (count, bits(&keys), from)
}

/// The same call on the GPU, every buffer in device memory (an empty input: a view of none of
/// one element).
fn on_gpu<K: RefKey, Op: SetOperation, E: Environment>(
    cuda: &Cuda,
    operation: Op,
    order: SortOrder,
    a: &[K],
    b: &[K],
    env: &E,
) -> Result3
where
    E::Ordering: oxicub_algorithms::contract::SortOrdering,
    E::TieBreak: oxicub_algorithms::contract::SortTieBreak,
{
    let bound = operation.bound(a.len() as u64, b.len() as u64) as usize;
    let filler = [poison::<K>()];
    let one = |v: &[K]| {
        cuda.upload_keys(if v.is_empty() { &filler[..] } else { v })
            .expect("upload")
    };
    let (device_a, device_b) = (one(a), one(b));
    let mut keys = cuda
        .upload_keys(&vec![poison::<K>(); bound.max(1)])
        .expect("poison");
    let mut from = cuda.upload(&vec![u64::MAX; bound.max(1)]).expect("poison");
    let count = sets::indices(
        cuda,
        operation,
        order::Choice::<order::Either>::new(order).expect("order"),
        device_a.as_view().slice(..a.len()),
        device_b.as_view().slice(..b.len()),
        keys.as_view_mut(),
        from.as_view_mut(),
        env,
    )
    .expect("the front check passes")
    .check()
    .map_err(|e| e.to_string());
    let keys = cuda.download_keys(&keys).expect("download");
    let from = cuda.download(&from.as_view()).expect("download");
    (count, bits(&keys[..bound]), from[..bound].to_vec())
}

/// Every operation on both backends, compared whole (the poisoned tail included).
fn same_all<K: RefKey, E: Environment>(
    what: &str,
    cuda: &Cuda,
    order: SortOrder,
    a: &[K],
    b: &[K],
    env: &E,
) where
    E::Ordering: oxicub_algorithms::contract::SortOrdering,
    E::TieBreak: oxicub_algorithms::contract::SortTieBreak,
{
    fn one<K: RefKey, Op: SetOperation, E: Environment>(
        what: &str,
        cuda: &Cuda,
        operation: Op,
        order: SortOrder,
        a: &[K],
        b: &[K],
        env: &E,
    ) where
        E::Ordering: oxicub_algorithms::contract::SortOrdering,
        E::TieBreak: oxicub_algorithms::contract::SortTieBreak,
    {
        let host = on_host(operation, order, a, b, env);
        let gpu = on_gpu(cuda, operation, order, a, b, env);
        assert_eq!(gpu.0, host.0, "{what} {}: the count", Op::NAME);
        if let Some(j) = (0..host.1.len()).find(|&j| gpu.1[j] != host.1[j] || gpu.2[j] != host.2[j])
        {
            panic!(
                "{what} {}: output {j} of {}: gpu ({:#x}, {}) host ({:#x}, {})",
                Op::NAME,
                host.1.len(),
                gpu.1[j],
                gpu.2[j],
                host.1[j],
                host.2[j]
            );
        }
    }
    one(what, cuda, op::Intersection, order, a, b, env);
    one(what, cuda, op::Union, order, a, b, env);
    one(what, cuda, op::Difference, order, a, b, env);
    one(what, cuda, op::SymmetricDifference, order, a, b, env);
    one(what, cuda, op::Merge, order, a, b, env);
}

#[test]
fn seed_demonstrations_on_the_gpu() {
    let Some(cuda) = gpu_or_skip() else { return };
    let (count, keys, _) = on_gpu(
        &cuda,
        op::Intersection,
        SortOrder::Ascending,
        &SETS_KEYS_A,
        &SETS_KEYS_B,
        &Env::new(),
    );
    assert_eq!(keys[..count.expect("count")], bits(&SETS_KEYS_INTERSECTION));
    let (count, keys, _) = on_gpu(
        &cuda,
        op::SymmetricDifference,
        SortOrder::Ascending,
        &SETS_KEYS_A,
        &SETS_KEYS_B,
        &Env::new(),
    );
    assert_eq!(
        keys[..count.expect("count")],
        bits(&SETS_KEYS_SYMMETRIC_DIFFERENCE)
    );
    // Pairs: A's values 0..99, B's 100..199, through the pairs form.
    let a_values: Vec<i32> = (0..100).collect();
    let b_values: Vec<i32> = (100..200).collect();
    let (device_a, device_b) = (
        cuda.upload_keys(&SETS_PAIRS_A).expect("up"),
        cuda.upload_keys(&SETS_PAIRS_B).expect("up"),
    );
    let (device_av, device_bv) = (
        cuda.upload(&a_values).expect("up"),
        cuda.upload(&b_values).expect("up"),
    );
    let mut keys = cuda.upload_keys(&[0i32; 200]).expect("out");
    let mut values = cuda.upload(&[0i32; 200]).expect("out");
    let n = sets::pairs(
        &cuda,
        op::Intersection,
        order::Ascending,
        device_a.as_view(),
        device_av.as_view(),
        device_b.as_view(),
        device_bv.as_view(),
        keys.as_view_mut(),
        values.as_view_mut(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("intersection pairs");
    assert_eq!(
        cuda.download_keys(&keys).expect("down")[..n],
        SETS_PAIRS_INTERSECTION_KEYS
    );
    assert_eq!(
        cuda.download(&values.as_view()).expect("down")[..n],
        SETS_PAIRS_INTERSECTION_INDICES
    );
    let n = sets::pairs(
        &cuda,
        op::SymmetricDifference,
        order::Ascending,
        device_a.as_view(),
        device_av.as_view(),
        device_b.as_view(),
        device_bv.as_view(),
        keys.as_view_mut(),
        values.as_view_mut(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("symmetric difference pairs");
    assert_eq!(
        cuda.download_keys(&keys).expect("down")[..n],
        SETS_PAIRS_SYMMETRIC_DIFFERENCE_KEYS
    );
    assert_eq!(
        cuda.download(&values.as_view()).expect("down")[..n],
        SETS_PAIRS_SYMMETRIC_DIFFERENCE_INDICES
    );
}

#[test]
fn every_operation_and_key_type_equals_the_host() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey>(cuda: &Cuda, seed: u64) {
        for order in [SortOrder::Ascending, SortOrder::Descending] {
            let d = order == SortOrder::Descending;
            // Around one tile (128 or 256 threads x 11 or 15 slots), many tiles, few and many
            // distinct keys.
            for (m, n, distinct) in [
                (1, 1, 1),
                (700, 709, 50),
                (1408, 1, 3),
                (1920, 1, 3),
                (1919, 2, 5),
                (3840, 1, 2),
                (5000, 3000, 7),
                (40_000, 60_000, 100_000),
                (100_000, 100_000, 30),
            ] {
                let a: Vec<K> = sorted_keys(m, distinct, seed, d);
                let b: Vec<K> = sorted_keys(n, distinct, seed + 7, d);
                same_all(
                    &format!("{} {order:?} {m}x{n}/{distinct}", K::KEY_TYPE),
                    cuda,
                    order,
                    &a,
                    &b,
                    &Env::new(),
                );
            }
        }
    }
    for seed in 0..2 {
        each::<u8>(&cuda, seed);
        each::<i16>(&cuda, seed);
        each::<u32>(&cuda, seed);
        each::<i32>(&cuda, seed);
        each::<u64>(&cuda, seed);
        each::<half::f16>(&cuda, seed);
        each::<f32>(&cuda, seed);
        each::<f64>(&cuda, seed);
    }
}

#[test]
fn long_runs_empty_inputs_and_special_keys() {
    let Some(cuda) = gpu_or_skip() else { return };
    let asc = SortOrder::Ascending;
    // One key 10^6 times against 999,999 and 3 of it: runs across hundreds of tiles.
    let many = vec![7i32; 1_000_000];
    let fewer = vec![7i32; 999_999];
    same_all("all equal", &cuda, asc, &many, &fewer, &Env::new());
    same_all(
        "all equal, b short",
        &cuda,
        asc,
        &many,
        &[7, 7, 7],
        &Env::new(),
    );
    // Runs of every length among distinct keys.
    let mut rng = SplitMix64::new(3);
    let mut runs = |n: usize| {
        let mut v = Vec::new();
        let mut key = 0u32;
        while v.len() < n {
            let run = 1 + (rng.next_u64() % 3000) as usize;
            v.extend(std::iter::repeat_n(key, run.min(n - v.len())));
            key += 1 + (rng.next_u64() % 2) as u32;
        }
        v
    };
    let (a, b) = (runs(300_000), runs(250_000));
    same_all("runs", &cuda, asc, &a, &b, &Env::new());
    // A == B, disjoint, interleaved, one side empty.
    same_all("a == b", &cuda, asc, &a, &a, &Env::new());
    let low: Vec<u32> = (0..50_000).collect();
    let high: Vec<u32> = (50_000..90_000).collect();
    same_all("disjoint", &cuda, asc, &low, &high, &Env::new());
    same_all("disjoint, b first", &cuda, asc, &high, &low, &Env::new());
    let even: Vec<u32> = (0..60_000).map(|i| 2 * i).collect();
    let odd: Vec<u32> = (0..60_000).map(|i| 2 * i + 1).collect();
    same_all("interleaved", &cuda, asc, &even, &odd, &Env::new());
    same_all("a empty", &cuda, asc, &[], &odd, &Env::new());
    same_all("b empty", &cuda, asc, &even, &[], &Env::new());
    same_all::<u32, _>("both empty", &cuda, asc, &[], &[], &Env::new());
    // NaN (every payload one key) and the signed zeros.
    let specials = [
        f32::NEG_INFINITY,
        -0.0,
        -0.0,
        0.0,
        1.0,
        f32::INFINITY,
        f32::NAN,
        f32::from_bits(0x7fc0_0001),
    ];
    let a: Vec<f32> = specials
        .iter()
        .flat_map(|&k| std::iter::repeat_n(k, 900))
        .collect();
    let b: Vec<f32> = specials
        .iter()
        .rev()
        .skip(1)
        .rev()
        .flat_map(|&k| std::iter::repeat_n(k, 700))
        .collect();
    same_all("specials", &cuda, asc, &a, &b, &Env::new());
    let (mut ad, mut bd) = (a.clone(), b.clone());
    ad.reverse();
    bd.reverse();
    same_all(
        "specials descending",
        &cuda,
        SortOrder::Descending,
        &ad,
        &bd,
        &Env::new(),
    );
}

#[test]
fn no_duplicates_partition_and_any_backend() {
    let Some(cuda) = gpu_or_skip() else { return };
    let promised = Env::new().guarantee(guarantee::NoDuplicateKeys::new());
    let mut rng = SplitMix64::new(11);
    let mut distinct = |n: usize| {
        let mut v: Vec<u64> = (0..n).map(|_| rng.next_u64() % 1_000_000).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let (a, b) = (distinct(200_000), distinct(150_000));
    same_all(
        "no duplicates",
        &cuda,
        SortOrder::Ascending,
        &a,
        &b,
        &promised,
    );
    // AnyBackend: copies to the device and back, the same result.
    let any = AnyBackend::Cuda(cuda.clone());
    let (mut out, mut values) = (vec![0u64; a.len() + b.len()], vec![0u16; a.len() + b.len()]);
    let (av, bv): (Vec<u16>, Vec<u16>) = (
        (0..a.len()).map(|i| i as u16).collect(),
        (0..b.len()).map(|i| i as u16 ^ 0x8000).collect(),
    );
    let n = sets::pairs(
        &any,
        op::Union,
        order::Ascending,
        &a[..],
        &av[..],
        &b[..],
        &bv[..],
        &mut out[..],
        &mut values[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("any");
    let (mut host_out, mut host_values) =
        (vec![0u64; a.len() + b.len()], vec![0u16; a.len() + b.len()]);
    let host_n = sets::pairs(
        &Host::new(),
        op::Union,
        order::Ascending,
        &a[..],
        &av[..],
        &b[..],
        &bv[..],
        &mut host_out[..],
        &mut host_values[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host");
    assert_eq!(
        (n, &out[..n], &values[..n]),
        (host_n, &host_out[..n], &host_values[..n])
    );
}

#[test]
fn inputs_out_of_order_are_reported_like_the_host() {
    let Some(cuda) = gpu_or_skip() else { return };
    let asc = SortOrder::Ascending;
    let sorted: Vec<i32> = (0..100_000).map(|i| i / 2).collect();
    // A break inside a tile, at a seam far in, in b only, and everywhere (reversed: the
    // partitions come out of order).
    let mut inside = sorted.clone();
    inside.swap(50_001, 50_010);
    let mut late_b = sorted.clone();
    late_b[99_000] = -5;
    let reversed: Vec<i32> = sorted.iter().rev().copied().collect();
    for (what, a, b) in [
        ("inside a tile", &inside, &sorted),
        ("late in b", &sorted, &late_b),
        ("reversed a", &reversed, &sorted),
        ("both bad", &late_b, &inside),
    ] {
        for which in 0..2 {
            let (host, gpu) = if which == 0 {
                (
                    on_host(op::Union, asc, a, b, &Env::new()),
                    on_gpu(&cuda, op::Union, asc, a, b, &Env::new()),
                )
            } else {
                (
                    on_host(op::Intersection, asc, a, b, &Env::new()),
                    on_gpu(&cuda, op::Intersection, asc, a, b, &Env::new()),
                )
            };
            assert!(host.0.is_err(), "{what}: the host reports it");
            assert_eq!(gpu.0, host.0, "{what}: the same error");
        }
    }
    // A repeated key under NoDuplicateKeys, and SortedInputs trusting an unsorted input (no
    // error; the outputs stay inside their buffers).
    let promised = Env::new().guarantee(guarantee::NoDuplicateKeys::new());
    let distinct: Vec<i32> = (0..20_000).collect();
    assert_eq!(
        on_gpu(&cuda, op::Merge, asc, &sorted, &distinct, &promised).0,
        on_host(op::Merge, asc, &sorted, &distinct, &promised).0
    );
    let trusted = Env::new().guarantee(guarantee::SortedInputs::new());
    let (count, _, _) = on_gpu(&cuda, op::Union, asc, &reversed, &sorted, &trusted);
    assert!(count.expect("no check") <= 200_000);
}

#[test]
fn the_count_is_left_on_the_device() {
    let Some(cuda) = gpu_or_skip() else { return };
    let a: Vec<u32> = sorted_keys(300_000, 40_000, 5, false);
    let b: Vec<u32> = sorted_keys(200_000, 40_000, 6, false);
    let (device_a, device_b) = (
        cuda.upload_keys(&a).expect("up"),
        cuda.upload_keys(&b).expect("up"),
    );
    let mut host_out = vec![0u32; a.len() + b.len()];
    let mut host_count = [-1i64];
    let expected = sets::keys_with_count(
        &Host::new(),
        op::Union,
        order::Ascending,
        &a[..],
        &b[..],
        &mut host_out[..],
        &mut host_count[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host");
    assert_eq!(host_count[0], expected as i64);
    let mut out = cuda
        .upload_keys(&vec![poison::<u32>(); a.len() + b.len()])
        .expect("out");
    let mut values = cuda
        .upload(&vec![u64::MAX; a.len() + b.len()])
        .expect("out");
    let mut count = cuda.upload(&[-1i64]).expect("count");
    let pending = sets::indices_with_count(
        &cuda,
        op::Union,
        order::Ascending,
        device_a.as_view(),
        device_b.as_view(),
        out.as_view_mut(),
        values.as_view_mut(),
        count.as_view_mut(),
        &Env::new(),
    )
    .expect("front check");
    // Read in stream order, before the pending result is checked.
    assert_eq!(
        cuda.download(&count.as_view()).expect("down"),
        [expected as i64]
    );
    assert_eq!(pending.check().expect("sorted"), expected);
    assert_eq!(
        cuda.download_keys(&out).expect("down")[..expected],
        host_out[..expected]
    );
    // No input: the count is written all the same (pairs form, 2-byte values).
    let empty = cuda.upload_keys(&[0u32]).expect("up");
    let empty_values = cuda.upload(&[0u16]).expect("up");
    let mut out_values = cuda.upload(&[0u16]).expect("up");
    let mut count = cuda.upload(&[-1i64]).expect("count");
    let n = sets::pairs_with_count(
        &cuda,
        op::Merge,
        order::Ascending,
        empty.as_view().slice(..0),
        empty_values.as_view().slice(..0),
        empty.as_view().slice(..0),
        empty_values.as_view().slice(..0),
        out.as_view_mut(),
        out_values.as_view_mut(),
        count.as_view_mut(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("empty");
    assert_eq!(
        (n, cuda.download(&count.as_view()).expect("down")),
        (0, vec![0])
    );
    // AnyBackend writes the host's count.
    let mut any_count = [-1i64];
    let n = sets::keys_with_count(
        &AnyBackend::Cuda(cuda.clone()),
        op::Intersection,
        order::Ascending,
        &a[..],
        &b[..],
        &mut host_out[..],
        &mut any_count[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("any");
    assert_eq!(any_count[0], n as i64);
}
