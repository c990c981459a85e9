//! Segmented sort on the GPU against the host backend, bit for bit (stable_sorted pins every
//! output bit): the seed's demonstrations, random segments of every key type with gaps and
//! per-segment orders, one huge segment among many tiny ones, adversarial keys, strided rows,
//! bad per-segment values reported like the host, and `AnyBackend`. Outputs are poisoned before
//! each run. Each test skips without a GPU (fails with OXICUB_REQUIRE_GPU=1).

use oxicub_algorithms::radix::RadixBits;
use oxicub_algorithms::segmented_sort::{self, Problem};
use oxicub_algorithms::segments::offsets_from_head_indices;
use oxicub_algorithms::{locality_sort, AnyBackend, Cuda, Error, Host, Pending};
use oxicub_env::Env;
use oxicub_params::{num_segments, order, segment_size};
use oxicub_test::cases::{poison, tied_keys};
use oxicub_test::oracle::RefKey;
use oxicub_test::seed_sort::*;
use oxicub_test::{gpu_or_skip, sample_keys, SplitMix64};

/// One call's results: the checked outcome (as a string, to compare errors), the keys' bits and
/// the indices.
type Sorted = (Result<(), String>, Vec<u64>, Vec<u64>);

fn bits<K: RefKey>(keys: &[K]) -> Vec<u64> {
    keys.iter().map(|k| k.to_bits().to_u64()).collect()
}

/// `sort_indices` over offsets `begin`/`end` with per-segment order bytes and a deferred count
/// of `count` (bounded by `begin.len()`), on the host.
fn on_host<K: RefKey>(keys: &[K], begin: &[i64], end: &[i64], orders: &[u8], count: i64) -> Sorted {
    on_host_bounded(keys, begin, end, orders, count, i64::MAX)
}

/// [`on_host`] with the segment sizes bounded by `bound`.
fn on_host_bounded<K: RefKey>(
    keys: &[K],
    begin: &[i64],
    end: &[i64],
    orders: &[u8],
    count: i64,
    bound: i64,
) -> Sorted {
    let problem = Problem::offsets(
        begin,
        end,
        segment_size::PerSegment::<()>::new(())
            .with_bounds(0, bound)
            .expect("bounds"),
        order::PerSegment::<_>::new(orders),
        num_segments::Deferred::<_>::new(&count)
            .with_bounds(0, begin.len() as i64)
            .expect("bounds"),
    );
    let (mut out, mut at) = (vec![poison::<K>(); keys.len()], vec![u64::MAX; keys.len()]);
    let outcome = segmented_sort::sort_indices(
        &Host::new(),
        &problem,
        keys,
        &mut out[..],
        &mut at[..],
        &Env::new(),
    )
    .expect("the front check passes")
    .check()
    .map(drop)
    .map_err(|e| e.to_string());
    (outcome, bits(&out), at)
}

/// The same call on the GPU, every argument in device memory.
fn on_gpu<K: RefKey>(
    cuda: &Cuda,
    keys: &[K],
    begin: &[i64],
    end: &[i64],
    orders: &[u8],
    count: i64,
) -> Sorted {
    on_gpu_bounded(cuda, keys, begin, end, orders, count, i64::MAX)
}

/// [`on_gpu`] with the segment sizes bounded by `bound` (up to a tile: a block per segment).
fn on_gpu_bounded<K: RefKey>(
    cuda: &Cuda,
    keys: &[K],
    begin: &[i64],
    end: &[i64],
    orders: &[u8],
    count: i64,
    bound: i64,
) -> Sorted {
    let one = |v: &[i64]| {
        cuda.upload(if v.is_empty() { &[0i64][..] } else { v })
            .expect("upload")
    };
    let (device_begin, device_end) = (one(begin), one(end));
    let device_orders = cuda
        .upload(if orders.is_empty() {
            &[0u8][..]
        } else {
            orders
        })
        .expect("upload");
    let device_count = cuda.upload(&[count]).expect("upload");
    let problem = Problem::offsets(
        device_begin.slice(..begin.len()),
        device_end.slice(..end.len()),
        segment_size::PerSegment::<()>::new(())
            .with_bounds(0, bound)
            .expect("bounds"),
        order::PerSegment::<_>::new(device_orders.slice(..orders.len())),
        num_segments::Deferred::<_>::new(device_count.as_view())
            .with_bounds(0, begin.len() as i64)
            .expect("bounds"),
    );
    let device_keys = cuda.upload_keys(keys).expect("upload");
    let mut out = cuda
        .upload_keys(&vec![poison::<K>(); keys.len()])
        .expect("poison");
    let mut at = cuda.upload(&vec![u64::MAX; keys.len()]).expect("poison");
    let outcome = segmented_sort::sort_indices(
        cuda,
        &problem,
        device_keys.as_view(),
        out.as_view_mut(),
        at.as_view_mut(),
        &Env::new(),
    )
    .expect("the front check passes")
    .check()
    .map(drop)
    .map_err(|e| e.to_string());
    let out = cuda.download_keys(&out).expect("download");
    let at = cuda.download(&at.as_view()).expect("download");
    (outcome, bits(&out), at)
}

/// Runs both and compares them exactly.
fn same<K: RefKey>(
    what: &str,
    cuda: &Cuda,
    keys: &[K],
    begin: &[i64],
    end: &[i64],
    orders: &[u8],
    count: i64,
) {
    let host = on_host(keys, begin, end, orders, count);
    let gpu = on_gpu(cuda, keys, begin, end, orders, count);
    assert_eq!(gpu.0, host.0, "{what}: the outcome");
    if let Some(j) = (0..keys.len()).find(|&j| gpu.1[j] != host.1[j] || gpu.2[j] != host.2[j]) {
        panic!(
            "{what}: position {j} of {}: gpu ({:#x}, {}) host ({:#x}, {})",
            keys.len(),
            gpu.1[j],
            gpu.2[j],
            host.1[j],
            host.2[j]
        );
    }
}

/// Random segments: empty ones, single keys, short and long ones (up to `longest`), with gaps,
/// random orders.
fn random_segments(
    rng: &mut SplitMix64,
    segments: usize,
    longest: u64,
) -> (Vec<i64>, Vec<i64>, Vec<u8>, usize) {
    let (mut begin, mut end, mut orders) = (vec![], vec![], vec![]);
    let mut at = 0i64;
    for _ in 0..segments {
        at += (rng.next_u64() % 3) as i64;
        let size = match rng.next_u64() % 6 {
            0 => 0,
            1 => 1,
            2 => rng.next_u64() % longest.max(1),
            _ => rng.next_u64() % 40,
        } as i64;
        begin.push(at);
        end.push(at + size);
        orders.push((rng.next_u64() % 2) as u8);
        at += size;
    }
    (begin, end, orders, at as usize + 1)
}

#[test]
fn seed_demonstrations_on_the_gpu() {
    let Some(cuda) = gpu_or_skip() else { return };
    let (begin, end) = offsets_from_head_indices(&HEADS, 100).expect("heads");
    let ascending = vec![0u8; begin.len()];
    let count = begin.len() as i64;
    for (input, sorted) in [
        (SEGSORT_KEYS_INPUT, SEGSORT_KEYS_SORTED),
        (SEGSORT_PAIRS_INPUT, SEGSORT_PAIRS_SORTED),
    ] {
        let (outcome, keys, _) = on_gpu(&cuda, &input, &begin, &end, &ascending, count);
        assert_eq!(outcome, Ok(()));
        assert_eq!(keys, bits(&sorted));
    }
    let (_, _, at) = on_gpu(&cuda, &SEGSORT_PAIRS_INPUT, &begin, &end, &ascending, count);
    let global: Vec<i32> = at
        .iter()
        .enumerate()
        .map(|(j, &a)| {
            let seg = begin
                .iter()
                .rposition(|&b| b <= j as i64)
                .expect("a segment");
            (begin[seg] + a as i64) as i32
        })
        .collect();
    assert_eq!(global, SEGSORT_PAIRS_INDICES);
    for (input, sorted, indices) in [
        (LOCALITY_KEYS_INPUT, LOCALITY_KEYS_SORTED, None),
        (
            LOCALITY_PAIRS_INPUT,
            LOCALITY_PAIRS_SORTED,
            Some(LOCALITY_PAIRS_INDICES),
        ),
    ] {
        let positions: Vec<i32> = (0..100).collect();
        let (keys, values) = locality_on(&AnyBackend::Cuda(cuda.clone()), &input, &positions);
        assert_eq!(keys, sorted);
        if let Some(indices) = indices {
            assert_eq!(values, indices);
        }
    }
}

/// `locality_sort::sort_pairs` ascending on `backend`.
fn locality_on<K: RefKey, V: oxicub_algorithms::DeviceValue + Default>(
    backend: &AnyBackend,
    keys: &[K],
    values: &[V],
) -> (Vec<K>, Vec<V>) {
    let mut out = vec![poison::<K>(); keys.len()];
    let mut out_values = vec![V::default(); keys.len()];
    locality_sort::sort_pairs(
        backend,
        &order::Ascending,
        keys,
        values,
        &mut out[..],
        &mut out_values[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("locality sort");
    (out, out_values)
}

/// Keys near their places (`i + rand(0, 25)` and `i + rand(0, 1000)`, the seed's and the
/// issue's inputs), random keys and descending keys, 2^22 of each, through locality sort: the
/// GPU's passes leave most tiles where they are and give the host's result bit for bit.
#[test]
fn locality_sort_near_sorted_and_random_keys() {
    let Some(cuda) = gpu_or_skip() else { return };
    let n = 1usize << 22;
    let mut rng = SplitMix64::new(12);
    let positions: Vec<u32> = (0..n as u32).collect();
    let mut near = |spread: u64| -> Vec<i32> {
        (0..n)
            .map(|i| i as i32 + (rng.next_u64() % spread) as i32)
            .collect()
    };
    let inputs = [
        ("i + rand(0, 25)", near(25)),
        ("i + rand(0, 1000)", near(1000)),
        ("random", sample_keys::<i32>(n, 13)),
        ("descending", (0..n as i32).rev().collect()),
    ];
    for (what, keys) in inputs {
        let gpu = locality_on(&AnyBackend::Cuda(cuda.clone()), &keys, &positions);
        let host = locality_on(&AnyBackend::Host(Host::new()), &keys, &positions);
        assert!(gpu == host, "{what}: the GPU differs from the host");
    }
}

#[test]
fn random_segments_every_key_type() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey>(cuda: &Cuda, seed: u64) {
        let mut rng = SplitMix64::new(seed);
        let (begin, end, orders, len) = random_segments(&mut rng, 300, 5000);
        let keys: Vec<K> = sample_keys(len, seed);
        let what = format!("{} seed {seed}", K::KEY_TYPE);
        same(
            &what,
            cuda,
            &keys,
            &begin,
            &end,
            &orders,
            begin.len() as i64,
        );
        let ties: Vec<K> = tied_keys(len, seed + 1);
        same(
            &format!("{what} ties"),
            cuda,
            &ties,
            &begin,
            &end,
            &orders,
            begin.len() as i64,
        );
    }
    for seed in 0..2 {
        each::<u8>(&cuda, seed);
        each::<i8>(&cuda, seed);
        each::<u16>(&cuda, seed);
        each::<i16>(&cuda, seed);
        each::<u32>(&cuda, seed);
        each::<i32>(&cuda, seed);
        each::<u64>(&cuda, seed);
        each::<i64>(&cuda, seed);
        each::<half::f16>(&cuda, seed);
        each::<half::bf16>(&cuda, seed);
        each::<f32>(&cuda, seed);
        each::<f64>(&cuda, seed);
    }
}

/// One segment of 2^20 keys among 100,000 tiny ones; already sorted and reverse-sorted input;
/// all-equal keys; NaN, infinities and signed zeros.
#[test]
fn one_huge_segment_among_tiny_ones_and_adversarial_keys() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut rng = SplitMix64::new(7);
    let (mut begin, mut end, mut orders) = (vec![], vec![], vec![]);
    let mut at = 0i64;
    for i in 0..100_000 {
        let size = if i == 50_000 {
            1 << 20
        } else {
            (rng.next_u64() % 8) as i64
        };
        begin.push(at);
        end.push(at + size);
        orders.push((rng.next_u64() % 2) as u8);
        at += size;
    }
    let len = at as usize;
    let n = begin.len() as i64;
    let keys: Vec<f32> = sample_keys(len, 8);
    same("huge among tiny", &cuda, &keys, &begin, &end, &orders, n);
    let ascending: Vec<u32> = (0..len as u32).collect();
    same(
        "already sorted",
        &cuda,
        &ascending,
        &begin,
        &end,
        &orders,
        n,
    );
    let descending: Vec<u32> = (0..len as u32).rev().collect();
    same(
        "reverse sorted",
        &cuda,
        &descending,
        &begin,
        &end,
        &orders,
        n,
    );
    let equal = vec![3i16; len];
    same("all equal", &cuda, &equal, &begin, &end, &orders, n);
    let specials = [
        f64::NAN,
        -0.0,
        0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.0,
        -1.0,
        f64::from_bits(0x7ff0_0000_0000_0001),
    ];
    let odd: Vec<f64> = (0..len)
        .map(|i| specials[(i * 7 + i / 3) % specials.len()])
        .collect();
    same("specials", &cuda, &odd, &begin, &end, &orders, n);
}

/// The scale: one segment of 2^24 keys among two million tiny ones (0 to 7 keys), with
/// indices and keys only, random and tied keys, per-segment orders.
#[test]
fn a_segment_of_2_pow_24_among_two_million_tiny_ones() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut rng = SplitMix64::new(2424);
    let (mut begin, mut end, mut orders) = (vec![], vec![], vec![]);
    let mut at = 0i64;
    for i in 0..2_000_000 {
        let size = if i == 1_234_567 {
            1 << 24
        } else {
            (rng.next_u64() % 8) as i64
        };
        begin.push(at);
        end.push(at + size);
        orders.push((rng.next_u64() % 2) as u8);
        at += size;
    }
    let len = at as usize;
    let n = begin.len() as i64;
    let keys: Vec<f32> = sample_keys(len, 24);
    same("2^24 among tiny", &cuda, &keys, &begin, &end, &orders, n);
    let ties: Vec<f32> = tied_keys(len, 25);
    same_keys(
        "2^24 among tiny, keys only",
        &cuda,
        &ties,
        &begin,
        &end,
        &orders,
    );
}

/// Long segments of every length around the register path's chunk (4096 keys) and its merge
/// passes: a partial last chunk, segments that finish after one, two or five passes, among
/// short ones of every class, in both orders; random, tied and NaN-heavy keys, narrow keys.
#[test]
fn long_segments_around_every_chunk_and_pass_boundary() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut rng = SplitMix64::new(41);
    let lengths = [
        4095i64, 4096, 4097, 8191, 8192, 8193, 12289, 16384, 20000, 65537, 131072, 2, 3, 33, 511,
        1025, 2049,
    ];
    let (mut begin, mut end, mut orders) = (vec![], vec![], vec![]);
    let mut at = 0i64;
    for round in 0..3 {
        for &length in &lengths {
            let size = if round == 2 {
                (rng.next_u64() % 70_000) as i64
            } else {
                length
            };
            at += (rng.next_u64() % 2) as i64;
            begin.push(at);
            end.push(at + size);
            orders.push((rng.next_u64() % 2) as u8);
            at += size;
        }
    }
    let len = at as usize;
    let n = begin.len() as i64;
    let keys: Vec<f32> = sample_keys(len, 42);
    same("long f32", &cuda, &keys, &begin, &end, &orders, n);
    let ties: Vec<f32> = tied_keys(len, 43);
    same("long f32 ties", &cuda, &ties, &begin, &end, &orders, n);
    let nans: Vec<f32> = (0..len)
        .map(|i| match i % 5 {
            0 => f32::NAN,
            1 => -f32::NAN,
            2 => -0.0,
            3 => 0.0,
            _ => keys[i],
        })
        .collect();
    same("long NaN", &cuda, &nans, &begin, &end, &orders, n);
    let narrow: Vec<u8> = sample_keys(len, 44);
    same("long u8", &cuda, &narrow, &begin, &end, &orders, n);
    let halves: Vec<half::bf16> = tied_keys(len, 45);
    same("long bf16 ties", &cuda, &halves, &begin, &end, &orders, n);
}

/// The in-place forms on device buffers equal the host's: a long segment (merge passes) among
/// short ones, keys and pairs, and the locality sort.
#[test]
fn in_place_sorts_on_the_device_equal_the_host() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut rng = SplitMix64::new(90);
    let (mut begin, mut end) = (vec![], vec![]);
    let mut at = 0i64;
    for i in 0..400 {
        at += (rng.next_u64() % 2) as i64;
        let size = if i == 200 {
            50_000
        } else {
            (rng.next_u64() % 700) as i64
        };
        begin.push(at);
        end.push(at + size);
        at += size;
    }
    let keys: Vec<f32> = tied_keys(at as usize + 3, 91);
    let values: Vec<u64> = (0..keys.len() as u64).map(|v| v * 3).collect();
    let problem = Problem::offsets(
        &begin[..],
        &end[..],
        segment_size::PerSegment::<()>::new(()),
        order::Ascending,
        num_segments::uniform(begin.len() as i64).expect("count"),
    );
    let (mut host_keys, mut host_values) = (keys.clone(), values.clone());
    segmented_sort::sort_pairs_in_place(
        &Host::new(),
        &problem,
        &mut host_keys[..],
        &mut host_values[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host");
    let (device_begin, device_end) = (
        cuda.upload(&begin).expect("upload"),
        cuda.upload(&end).expect("upload"),
    );
    let device_problem = Problem::offsets(
        device_begin.as_view(),
        device_end.as_view(),
        segment_size::PerSegment::<()>::new(()),
        order::Ascending,
        num_segments::uniform(begin.len() as i64).expect("count"),
    );
    let mut device_keys = cuda.upload_keys(&keys).expect("upload");
    let mut device_values = cuda.upload(&values).expect("upload");
    segmented_sort::sort_pairs_in_place(
        &cuda,
        &device_problem,
        device_keys.as_view_mut(),
        device_values.as_view_mut(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("device");
    assert_eq!(
        bits(&cuda.download_keys(&device_keys).expect("download")),
        bits(&host_keys),
        "keys"
    );
    assert_eq!(
        cuda.download(&device_values.as_view()).expect("download"),
        host_values,
        "values"
    );
    let mut whole = cuda.upload_keys(&keys).expect("upload");
    locality_sort::sort_keys_in_place(&cuda, &order::Descending, whole.as_view_mut(), &Env::new())
        .and_then(Pending::check)
        .expect("locality");
    let mut expected = keys.clone();
    locality_sort::sort_keys_in_place(
        &Host::new(),
        &order::Descending,
        &mut expected[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host locality");
    assert_eq!(
        bits(&cuda.download_keys(&whole).expect("download")),
        bits(&expected),
        "locality"
    );
}

/// `sort_keys` (keys only: the register path sorts bare ranks unless a NaN is in the tile) on
/// the host and on the GPU over the same offsets and per-segment orders, compared bit for bit,
/// and over strided rows of one size (the classes skipped).
fn same_keys<K: RefKey>(
    what: &str,
    cuda: &Cuda,
    keys: &[K],
    begin: &[i64],
    end: &[i64],
    orders: &[u8],
) {
    let count = || num_segments::uniform(begin.len() as i64).expect("count");
    let sizes = || segment_size::PerSegment::<()>::new(());
    let mut host = vec![poison::<K>(); keys.len()];
    segmented_sort::sort_keys(
        &Host::new(),
        &Problem::offsets(
            begin,
            end,
            sizes(),
            order::PerSegment::<_>::new(orders),
            count(),
        ),
        keys,
        &mut host[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host");
    let (device_begin, device_end) = (
        cuda.upload(begin).expect("up"),
        cuda.upload(end).expect("up"),
    );
    let device_orders = cuda.upload(orders).expect("up");
    let device_keys = cuda.upload_keys(keys).expect("upload");
    let mut out = cuda
        .upload_keys(&vec![poison::<K>(); keys.len()])
        .expect("poison");
    segmented_sort::sort_keys(
        cuda,
        &Problem::offsets(
            device_begin.as_view(),
            device_end.as_view(),
            sizes(),
            order::PerSegment::<_>::new(device_orders.as_view()),
            count(),
        ),
        device_keys.as_view(),
        out.as_view_mut(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("gpu");
    let gpu = bits(&cuda.download_keys(&out).expect("download"));
    let host = bits(&host);
    if let Some(j) = (0..keys.len()).find(|&j| gpu[j] != host[j]) {
        panic!(
            "{what}: position {j}: gpu {:#x} host {:#x}",
            gpu[j], host[j]
        );
    }
}

/// Keys-only sorts of every key type: random segments of every short class and a few long
/// ones, both orders, random keys, tied keys, and NaN in some tiles only (the tiles with a NaN
/// take the entries with indices, the others bare ranks); strided rows of one size.
#[test]
fn keys_only_sorts_every_key_type() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey>(cuda: &Cuda, seed: u64) {
        let mut rng = SplitMix64::new(seed);
        let (begin, end, orders, len) = random_segments(&mut rng, 600, 9000);
        let what = format!("{} seed {seed}", K::KEY_TYPE);
        same_keys(
            &what,
            cuda,
            &sample_keys::<K>(len, seed),
            &begin,
            &end,
            &orders,
        );
        same_keys(
            &format!("{what} ties"),
            cuda,
            &tied_keys::<K>(len, seed + 1),
            &begin,
            &end,
            &orders,
        );
        // Long segments (chunks and merge passes over bare ranks, or indexed entries when a
        // float NaN is among them).
        let (begin, end, orders, len) = random_segments(&mut rng, 40, 70_000);
        same_keys(
            &format!("{what} long"),
            cuda,
            &sample_keys::<K>(len, seed + 2),
            &begin,
            &end,
            &orders,
        );
        same_keys(
            &format!("{what} long ties"),
            cuda,
            &tied_keys::<K>(len, seed + 3),
            &begin,
            &end,
            &orders,
        );
    }
    for seed in 0..2 {
        each::<u8>(&cuda, seed);
        each::<i16>(&cuda, seed);
        each::<u32>(&cuda, seed);
        each::<i32>(&cuda, seed);
        each::<half::f16>(&cuda, seed);
        each::<half::bf16>(&cuda, seed);
        each::<f32>(&cuda, seed);
        each::<u64>(&cuda, seed);
    }
    // NaN (either sign, any payload) in a few segments only.
    let mut rng = SplitMix64::new(5);
    let (begin, end, orders, len) = random_segments(&mut rng, 600, 3000);
    let mut keys: Vec<f32> = sample_keys(len, 6);
    for (i, key) in keys.iter_mut().enumerate().take(len / 2) {
        if i % 97 == 0 {
            *key = f32::from_bits(0x7fc0_0000 | (i as u32 & 0xff));
        } else if i % 89 == 0 {
            *key = f32::from_bits(0xffc0_0001 + i as u32 % 7);
        }
    }
    same_keys("f32 some NaN", &cuda, &keys, &begin, &end, &orders);
    // One NaN in one long segment: every long segment takes the indexed entries.
    let mut rng = SplitMix64::new(7);
    let (begin, end, orders, len) = random_segments(&mut rng, 40, 70_000);
    let mut keys: Vec<f32> = sample_keys(len, 8);
    keys[len / 2] = f32::from_bits(0xffc0_1234);
    keys[len / 2 + 1] = f32::from_bits(0x7fc0_0042);
    same_keys("f32 long, two NaN", &cuda, &keys, &begin, &end, &orders);
    // Strided rows of one size: every span, ascending.
    for (rows, cols) in [
        (3000usize, 1usize),
        (999, 7),
        (300, 64),
        (64, 1000),
        (8, 4096),
        (5, 5000),
        (3, 16384),
    ] {
        let keys: Vec<f32> = sample_keys(rows * cols, cols as u64);
        let problem = Problem::strided(
            cols,
            segment_size::uniform(cols as i64).expect("cols"),
            order::Ascending,
            num_segments::uniform(rows as i64).expect("rows"),
        );
        let mut host = vec![0f32; keys.len()];
        segmented_sort::sort_keys(
            &Host::new(),
            &problem,
            &keys[..],
            &mut host[..],
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("host");
        let device_keys = cuda.upload(&keys).expect("upload");
        let mut out = cuda.upload(&vec![f32::NAN; keys.len()]).expect("poison");
        segmented_sort::sort_keys(
            &cuda,
            &problem,
            device_keys.as_view(),
            out.as_view_mut(),
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("gpu");
        assert_eq!(
            bits(&cuda.download(&out.as_view()).expect("download")),
            bits(&host),
            "[{rows}x{cols}]"
        );
    }
}

/// Rows of a matrix, descending (torch.sort(x, descending=True, stable=True) over the last
/// dimension), with per-row sizes and pairs.
#[test]
fn strided_rows_pairs_and_any_backend() {
    let Some(cuda) = gpu_or_skip() else { return };
    let (rows, cols) = (700usize, 3000usize);
    let keys: Vec<half::bf16> = sample_keys(rows * cols, 9);
    let values: Vec<u16> = (0..(rows * cols) as u32).map(|v| v as u16).collect();
    let mut rng = SplitMix64::new(10);
    let sizes: Vec<i64> = (0..rows)
        .map(|_| (rng.next_u64() % (cols as u64 + 1)) as i64)
        .collect();
    let problem = Problem::strided(
        cols,
        segment_size::PerSegment::<_, 0, 3000>::new(&sizes[..]),
        order::Descending,
        num_segments::uniform(rows as i64).expect("rows"),
    );
    let what = "bf16 rows of 3000, u16 values";
    same_pairs_on_any_backend(what, cuda.clone(), &problem, &keys, &values, 0xbeef);
    // The sizes held as i32, on the device (the kernels widen them as they read).
    let sizes32: Vec<i32> = sizes.iter().map(|&s| s as i32).collect();
    let problem = Problem::strided(
        cols,
        segment_size::PerSegment::<_, 0, 3000>::new(&sizes32[..]),
        order::Descending,
        num_segments::uniform(rows as i64).expect("rows"),
    );
    let what = "bf16 rows of 3000, i32 sizes";
    same_pairs_on_any_backend(what, cuda, &problem, &keys, &values, 0xbeef);
}

/// `sort_pairs` of `problem` through `AnyBackend` on the GPU and on the host, the outputs
/// poisoned (`value_poison` for the values), compared bit for bit.
fn same_pairs_on_any_backend<K, V, P>(
    what: &str,
    cuda: Cuda,
    problem: &P,
    keys: &[K],
    values: &[V],
    value_poison: V,
) where
    K: RefKey,
    V: oxicub_algorithms::DeviceValue + PartialEq + std::fmt::Debug,
    P: segmented_sort::ProblemOn<AnyBackend>,
{
    let run = |backend: &AnyBackend| {
        let mut out = vec![poison::<K>(); keys.len()];
        let mut out_values = vec![value_poison; keys.len()];
        segmented_sort::sort_pairs(
            backend,
            problem,
            keys,
            values,
            &mut out[..],
            &mut out_values[..],
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("sort");
        (bits(&out), out_values)
    };
    let gpu = run(&AnyBackend::Cuda(cuda));
    assert!(
        gpu == run(&AnyBackend::Host(Host::new())),
        "{what}: AnyBackend on the GPU differs from the host"
    );
}

/// Bad per-segment values are reported as the host reports them (and write what the host
/// writes): offsets out of order or overlapping (nothing written), past the keys, an order
/// byte outside the set, a deferred count outside its bounds.
#[test]
fn bad_per_segment_values_are_reported_like_the_host() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys: Vec<i32> = sample_keys(5000, 11);
    type Case<'a> = (&'a [i64], &'a [i64], &'a [u8], i64);
    let cases: [Case<'_>; 6] = [
        (&[0, 100, 50], &[100, 200, 300], &[0, 1, 0], 3),
        (&[0, 300, 400], &[100, 200, 500], &[0, 1, 0], 3),
        (&[0, 100, 4000], &[100, 200, 6000], &[0, 1, 0], 3),
        (&[0, 100, 200], &[100, 200, 300], &[0, 7, 1], 3),
        (&[0, 100, 200], &[100, 200, 300], &[1, 1, 0], 4),
        (&[0, 100, 200], &[100, 200, 300], &[1, 1, 0], -1),
    ];
    for (i, (begin, end, orders, count)) in cases.into_iter().enumerate() {
        same(
            &format!("case {i}"),
            &cuda,
            &keys,
            begin,
            end,
            orders,
            count,
        );
    }
    let host = on_host(&keys, &[0, 100, 50], &[100, 200, 300], &[0, 1, 0], 3);
    assert!(
        host.0.as_ref().is_err_and(|e| e.contains("offsets")),
        "{:?}",
        host.0
    );
    // A segment invalid by its size must not hide that the next one begins below its end: the
    // valid segments around it overlap (short ones here, long ones in 70000 keys), and nothing
    // is written, on either backend.
    let many: Vec<f32> = sample_keys(70_000, 12);
    for (keys_len, valid, bound) in [(5000i64, 3000i64, 2500i64), (70_000, 50_000, 20_000)] {
        let begin: Vec<i64> = [valid, 0].repeat(6);
        let end: Vec<i64> = [keys_len, valid].repeat(6);
        let orders = vec![0u8; begin.len()];
        let input = &many[..keys_len as usize];
        let host = on_host_bounded(input, &begin, &end, &orders, 12, bound);
        let gpu = on_gpu_bounded(&cuda, input, &begin, &end, &orders, 12, bound);
        assert_eq!(
            gpu, host,
            "overlap behind an invalid segment, {keys_len} keys"
        );
        assert!(host.0.is_err(), "{:?}", host.0);
        assert!(
            host.2.iter().all(|&at| at == u64::MAX),
            "nothing is written"
        );
    }
    // Outputs shorter than the keys are refused before anything runs.
    let device_keys = cuda.upload(&keys).expect("upload");
    let mut short = cuda.alloc_zeros::<i32>(10).expect("alloc");
    let problem = Problem::strided(
        5000,
        segment_size::Static::<5000>::new(),
        order::Ascending,
        num_segments::uniform(1).expect("n"),
    );
    let err = segmented_sort::sort_keys(
        &cuda,
        &problem,
        device_keys.as_view(),
        short.as_view_mut(),
        &Env::new(),
    )
    .expect_err("short output");
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                arg: "out_keys",
                ..
            }
        ),
        "{err}"
    );
}

/// The merge-pass statistics (the seed's verbose report): one segment of 2^18 keys is 16 chunks
/// of 16384 (the wide kernel's tile), joined by 4 passes. Keys already in order never merge: each chunk's source interval
/// is its own, so the first pass copies every chunk into the other buffer, the next two leave
/// them alone, and the last copies them to the outputs; random keys merge every chunk in every
/// pass. Rows of 1024 are short segments, sorted whole in registers: no merge pass, whatever
/// their size bound, nor on the host.
#[test]
fn merge_statistics_count_the_tiles_each_pass_moves() {
    use oxicub_algorithms::segmented_sort::{MergePass, MergeStatistics};
    let Some(cuda) = gpu_or_skip() else { return };
    let n = 1usize << 18;
    let gpu = AnyBackend::Cuda(cuda);
    let stats_of = |problem_rows: bool, keys: &[u32]| -> MergeStatistics {
        let mut out = vec![0u32; n];
        if problem_rows {
            // Rows of 1024 as offsets whose sizes are not bounded by a tile.
            let begin: Vec<i64> = (0..256).map(|r| r * 1024).collect();
            let end: Vec<i64> = (1..=256).map(|r| r * 1024).collect();
            let rows = Problem::offsets(
                &begin[..],
                &end[..],
                segment_size::PerSegment::<()>::new(()),
                order::Ascending,
                num_segments::uniform(256).expect("rows"),
            );
            segmented_sort::sort_keys(&gpu, &rows, keys, &mut out[..], &Env::new())
        } else {
            locality_sort::sort_keys(&gpu, &order::Ascending, keys, &mut out[..], &Env::new())
        }
        .and_then(Pending::check)
        .expect("sort")
    };
    let pass = |merge_tiles, copy_tiles| MergePass {
        merge_tiles,
        copy_tiles,
    };
    let random: Vec<u32> = sample_keys(n, 14);
    assert_eq!(
        stats_of(true, &random),
        MergeStatistics::default(),
        "rows of 1024"
    );
    // 2^18 keys: 64 parts of 4096 (a merge pass's tile), chunks of 16384 (the wide kernel's
    // BLOCK) merged in 4 passes.
    let sorted: Vec<u32> = (0..n as u32).collect();
    assert_eq!(
        stats_of(false, &sorted),
        MergeStatistics {
            tiles: 64,
            passes: vec![pass(0, 64), pass(0, 0), pass(0, 0), pass(0, 64)]
        },
        "keys in order"
    );
    let merged = stats_of(false, &random);
    assert_eq!(
        merged,
        MergeStatistics {
            tiles: 64,
            passes: vec![pass(64, 0); 4]
        },
        "random keys"
    );
    let table = merged.to_string();
    assert!(
        table.contains("pass  3:        64 (100.00%)           0 (  0.00%)"),
        "{table}"
    );
    assert!(
        table.contains("total  :       256 (400.00%)           0 (  0.00%)"),
        "{table}"
    );
    // Rows whose bound fits a tile: a block each, no merge pass.
    let mut out = vec![0u32; n];
    let small = Problem::strided(
        1024,
        segment_size::Static::<1024>::new(),
        order::Ascending,
        num_segments::uniform(64).expect("rows"),
    );
    let direct = segmented_sort::sort_keys(&gpu, &small, &random[..], &mut out[..], &Env::new())
        .and_then(Pending::check)
        .expect("rows");
    assert_eq!(direct, MergeStatistics::default());
    // The host backend runs no merge pass.
    let host = locality_sort::sort_keys(
        &Host::new(),
        &order::Ascending,
        &random[..],
        &mut out[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host");
    assert_eq!(host, MergeStatistics::default());
}

/// Segments whose size bound fits a tile (1024) are sorted a block each and written in place:
/// random segments with gaps, every key type, pairs of every value width through AnyBackend,
/// and the bad values (a size above the bound, overlapping offsets, an order byte) reported
/// and written as the host does.
#[test]
fn segments_of_one_tile_take_a_block_each() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey>(cuda: &Cuda, seed: u64) {
        let mut rng = SplitMix64::new(seed);
        let (begin, end, orders, len) = random_segments(&mut rng, 3000, 1025);
        let keys: Vec<K> = sample_keys(len, seed);
        let n = begin.len() as i64;
        let what = format!("{} seed {seed}", K::KEY_TYPE);
        let host = on_host_bounded(&keys, &begin, &end, &orders, n, 1024);
        let gpu = on_gpu_bounded(cuda, &keys, &begin, &end, &orders, n, 1024);
        assert_eq!(gpu.0, host.0, "{what}: the outcome");
        assert!(gpu.1 == host.1 && gpu.2 == host.2, "{what}: the outputs");
    }
    for seed in 20..22 {
        each::<u8>(&cuda, seed);
        each::<i16>(&cuda, seed);
        each::<u32>(&cuda, seed);
        each::<i64>(&cuda, seed);
        each::<half::f16>(&cuda, seed);
        each::<f32>(&cuda, seed);
        each::<f64>(&cuda, seed);
    }
    // A segment above the bound (1025 keys) is reported and skipped; overlapping offsets
    // write nothing; an order byte outside the set is reported.
    let keys: Vec<u32> = sample_keys(5000, 23);
    for (begin, end, orders) in [
        (
            &[0i64, 1100, 3000][..],
            &[1000i64, 2125, 3500][..],
            &[0u8, 1, 0][..],
        ),
        (&[0, 900, 3000], &[1000, 1500, 3500], &[0, 1, 0]),
        (&[0, 1000, 3000], &[1000, 1500, 3500], &[0, 9, 0]),
    ] {
        let host = on_host_bounded(&keys, begin, end, orders, 3, 1024);
        let gpu = on_gpu_bounded(&cuda, &keys, begin, end, orders, 3, 1024);
        assert_eq!(gpu.0, host.0, "{begin:?}: the outcome");
        assert!(host.0.is_err(), "{begin:?}: a violation");
        assert!(gpu.1 == host.1 && gpu.2 == host.2, "{begin:?}: the outputs");
    }
    // Pairs of every value width, rows of 1000 with per-row sizes, through AnyBackend.
    fn pairs<V: oxicub_algorithms::DeviceValue + Default + PartialEq + std::fmt::Debug>(
        cuda: &Cuda,
        value: impl Fn(usize) -> V,
    ) {
        let (rows, cols) = (300usize, 1000usize);
        let keys: Vec<i32> = sample_keys(rows * cols, 24);
        let values: Vec<V> = (0..rows * cols).map(value).collect();
        let sizes: Vec<i64> = (0..rows as i64).map(|r| (r * 37) % 1001).collect();
        let problem = Problem::strided(
            cols,
            segment_size::PerSegment::<_, 0, 1000>::new(&sizes[..]),
            order::Descending,
            num_segments::uniform(rows as i64).expect("rows"),
        );
        let what = format!("pairs of {} bytes", std::mem::size_of::<V>());
        same_pairs_on_any_backend(&what, cuda.clone(), &problem, &keys, &values, V::default());
    }
    pairs::<u8>(&cuda, |i| i as u8);
    pairs::<u16>(&cuda, |i| i as u16);
    pairs::<f32>(&cuda, |i| i as f32);
    pairs::<u64>(&cuda, |i| i as u64 * 3);
}

/// Listed segments, each its own device allocation (empty ones, single keys, one longer than the
/// wide tile, NaN and ties among the keys): pairs and indices into a joined output and pairs in
/// place, over a count below the list's length, equal the host bit for bit (outputs poisoned);
/// a slice above the size bound is reported like the host.
#[test]
fn listed_segments_equal_the_host() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut rng = SplitMix64::new(2424);
    let sizes: Vec<usize> = (0..300)
        .map(|i| match (i, rng.next_u64() % 5) {
            (150, _) => 70_000,
            (_, 0) => 0,
            (_, 1) => 1,
            (_, 2) => (rng.next_u64() % 5000) as usize,
            _ => (rng.next_u64() % 64) as usize,
        })
        .collect();
    let lists: Vec<Vec<f32>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| tied_keys(n, 500 + i as u64))
        .collect();
    let values: Vec<Vec<u16>> = lists
        .iter()
        .enumerate()
        .map(|(i, l)| (0..l.len()).map(|j| (i * 7 + j) as u16).collect())
        .collect();
    let total: usize = sizes.iter().sum();
    let count = sizes.len() as i64 - 3;
    let problem = Problem::listed(
        segment_size::PerSegment::<()>::new(()),
        order::Descending,
        num_segments::uniform(count).expect("count"),
    );
    let host_keys: Vec<&[f32]> = lists.iter().map(|l| &l[..]).collect();
    let host_values: Vec<&[u16]> = values.iter().map(|l| &l[..]).collect();
    let (mut want, mut want_values) = (vec![poison::<f32>(); total], vec![0xA5A5u16; total]);
    segmented_sort::sort_pairs_listed(
        &Host::new(),
        &problem,
        &host_keys,
        &host_values,
        &mut want[..],
        &mut want_values[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host");
    // Each list in its own allocation (an empty one: a view of none of one element's).
    let device_keys: Vec<_> = lists
        .iter()
        .map(|l| {
            cuda.upload_keys(if l.is_empty() { &[0f32][..] } else { l })
                .expect("upload")
        })
        .collect();
    let device_values: Vec<_> = values
        .iter()
        .map(|l| {
            cuda.upload(if l.is_empty() { &[0u16][..] } else { l })
                .expect("upload")
        })
        .collect();
    let key_views: Vec<_> = device_keys
        .iter()
        .zip(&sizes)
        .map(|(d, &n)| d.as_view().slice(..n))
        .collect();
    let value_views: Vec<_> = device_values
        .iter()
        .zip(&sizes)
        .map(|(d, &n)| d.slice(..n))
        .collect();
    let mut out = cuda
        .upload_keys(&vec![poison::<f32>(); total])
        .expect("poison");
    let mut out_values = cuda.upload(&vec![0xA5A5u16; total]).expect("poison");
    segmented_sort::sort_pairs_listed(
        &cuda,
        &problem,
        &key_views,
        &value_views,
        out.as_view_mut(),
        out_values.as_view_mut(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("device pairs");
    assert_eq!(
        bits(&cuda.download_keys(&out).expect("download")),
        bits(&want),
        "keys"
    );
    assert_eq!(
        cuda.download(&out_values.as_view()).expect("download"),
        want_values,
        "values"
    );

    let mut want_at = vec![u64::MAX; total];
    segmented_sort::sort_indices_listed(
        &Host::new(),
        &problem,
        &host_keys,
        &mut want[..],
        &mut want_at[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host indices");
    let mut at = cuda.upload(&vec![u64::MAX; total]).expect("poison");
    segmented_sort::sort_indices_listed(
        &cuda,
        &problem,
        &key_views,
        out.as_view_mut(),
        at.as_view_mut(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("device indices");
    assert_eq!(
        cuda.download(&at.as_view()).expect("download"),
        want_at,
        "indices"
    );
    drop((key_views, value_views));

    // In place, each allocation sorted where it lies.
    let (mut host_lists, mut host_vals) = (lists.clone(), values.clone());
    {
        let mut keys: Vec<&mut [f32]> = host_lists.iter_mut().map(|l| &mut l[..]).collect();
        let mut vals: Vec<&mut [u16]> = host_vals.iter_mut().map(|l| &mut l[..]).collect();
        segmented_sort::sort_pairs_listed_in_place(
            &Host::new(),
            &problem,
            &mut keys,
            &mut vals,
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("host in place");
    }
    let mut device_keys = device_keys;
    let mut device_values = device_values;
    {
        let mut whole: Vec<_> = device_keys.iter_mut().map(|d| d.as_view_mut()).collect();
        let mut keys: Vec<_> = whole
            .iter_mut()
            .zip(&sizes)
            .map(|(d, &n)| d.slice_mut(..n))
            .collect();
        let mut vals: Vec<_> = device_values
            .iter_mut()
            .zip(&sizes)
            .map(|(d, &n)| d.slice_mut(..n))
            .collect();
        segmented_sort::sort_pairs_listed_in_place(
            &cuda,
            &problem,
            &mut keys,
            &mut vals,
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("device in place");
    }
    for (i, &n) in sizes.iter().enumerate() {
        let keys = cuda.download_keys(&device_keys[i]).expect("download");
        let vals = cuda
            .download(&device_values[i].as_view())
            .expect("download");
        assert_eq!(bits(&keys[..n]), bits(&host_lists[i]), "list {i}: keys");
        assert_eq!(vals[..n], host_vals[i][..], "list {i}: values");
    }

    // A slice above the size bound: the same error as the host's, the others sorted.
    let bounded = Problem::listed(
        segment_size::PerSegment::<()>::new(())
            .with_bounds(0, 4096)
            .expect("bounds"),
        order::Ascending,
        num_segments::uniform(count).expect("count"),
    );
    let key_views: Vec<_> = device_keys
        .iter()
        .zip(&sizes)
        .map(|(d, &n)| d.as_view().slice(..n))
        .collect();
    let mut host_out = vec![0f32; total];
    let host = segmented_sort::sort_keys_listed(
        &Host::new(),
        &bounded,
        &host_keys,
        &mut host_out[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .map(drop)
    .map_err(|e| e.to_string());
    let gpu = segmented_sort::sort_keys_listed(
        &cuda,
        &bounded,
        &key_views,
        out.as_view_mut(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .map(drop)
    .map_err(|e| e.to_string());
    assert!(host.is_err(), "the 70000-key slice breaks the bound");
    assert_eq!(gpu, host);
}

/// Under `output_ordering::Sorted` (equal keys in any order): the keys equal the host's stable
/// sort bit for bit, and every value (the key's source position) names a position of its own
/// segment holding that key, each position once.
#[test]
fn unstable_sorted_keys_equal_and_values_belong_to_their_keys() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey>(cuda: &Cuda, seed: u64) {
        let mut rng = SplitMix64::new(seed);
        let (begin, end, _, len) = random_segments(&mut rng, 400, 20_000);
        let keys: Vec<K> = tied_keys(len, seed);
        let positions: Vec<u32> = (0..len as u32).collect();
        let (mut want, mut want_at) = (vec![poison::<K>(); len], vec![0u32; len]);
        let sizes = segment_size::PerSegment::<()>::new(());
        let count = num_segments::uniform(begin.len() as i64).expect("count");
        let problem = Problem::offsets(&begin[..], &end[..], sizes, order::Descending, count);
        segmented_sort::sort_pairs(
            &Host::new(),
            &problem,
            &keys[..],
            &positions[..],
            &mut want[..],
            &mut want_at[..],
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("host");
        let (device_begin, device_end) = (
            cuda.upload(&begin).expect("up"),
            cuda.upload(&end).expect("up"),
        );
        let device_problem = Problem::offsets(
            device_begin.as_view(),
            device_end.as_view(),
            sizes,
            order::Descending,
            count,
        );
        let device_keys = cuda.upload_keys(&keys).expect("upload");
        let device_positions = cuda.upload(&positions).expect("upload");
        let mut out = cuda.upload_keys(&vec![poison::<K>(); len]).expect("poison");
        let mut at = cuda.upload(&vec![u32::MAX; len]).expect("poison");
        let env = oxicub_env::require!(oxicub_env::output_ordering::Sorted);
        segmented_sort::sort_pairs(
            cuda,
            &device_problem,
            device_keys.as_view(),
            device_positions.as_view(),
            out.as_view_mut(),
            at.as_view_mut(),
            &env,
        )
        .and_then(Pending::check)
        .expect("device");
        let out = cuda.download_keys(&out).expect("download");
        let at = cuda.download(&at.as_view()).expect("download");
        assert_eq!(bits(&out), bits(&want), "{} seed {seed}: keys", K::KEY_TYPE);
        let mut seen = vec![false; len];
        for (s, (&b, &e)) in begin.iter().zip(&end).enumerate() {
            for j in b as usize..e as usize {
                let from = at[j] as usize;
                assert!(
                    (b as usize..e as usize).contains(&from) && !seen[from],
                    "segment {s}: value {from} at {j} is not a new position of the segment"
                );
                seen[from] = true;
                assert_eq!(
                    keys[from].to_bits().to_u64(),
                    out[j].to_bits().to_u64(),
                    "segment {s}: the value at {j} names another key"
                );
            }
        }
    }
    for seed in 0..2 {
        each::<f32>(&cuda, 70 + seed);
        each::<u8>(&cuda, 72 + seed);
        each::<f64>(&cuda, 74 + seed);
    }
}
