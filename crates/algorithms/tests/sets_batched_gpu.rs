//! Batched set operations on the GPU against the host backend, bit for bit (count, keys,
//! source positions and every pair's offset; outputs poisoned first): every operation for
//! several key types in both orders over power-law batches with unsorted gaps, one huge pair
//! among tiny ones, runs of equal keys across tiles, empty pairs everywhere, strided rows with
//! device sizes and a deferred count, pairs and keys forms, `AnyBackend`, and every bad batch
//! reported as the host reports it.

use cudarc::driver::{CudaSlice, CudaView};
use oxicub_algorithms::segments::{Offsets, Strided};
use oxicub_algorithms::sets::{self, op, Batch, BatchOn, SetOperation};
use oxicub_algorithms::{AnyBackend, Cuda, DeviceKeys, Host, Pending};
use oxicub_env::{Env, Environment};
use oxicub_params::{guarantee, num_segments, order, segment_size, SortOrder};
use oxicub_test::cases::poison;
use oxicub_test::gpu_or_skip;
use oxicub_test::oracle::RefKey;
use oxicub_test::set_batches::{host_batched, power_law_sizes, set_batch, SetBatch};

/// A batched call's results: the checked count (or the error's text), the keys' bits, the
/// source positions, the offsets.
type Batched = (Result<usize, String>, Vec<u64>, Vec<u64>, Vec<i64>);

fn bits<K: RefKey>(keys: &[K]) -> Vec<u64> {
    keys.iter()
        .map(|k| oxicub_algorithms::radix::RadixBits::to_u64(k.to_bits()))
        .collect()
}

fn choice(order: SortOrder) -> order::Choice<order::Either> {
    order::Choice::<order::Either>::new(order).expect("order")
}

/// `sets::batched_indices` on the host.
fn on_host<K: RefKey, Op: SetOperation, E: Environment>(
    operation: Op,
    order: SortOrder,
    batch: &SetBatch<K>,
    env: &E,
) -> Batched
where
    E::Ordering: oxicub_algorithms::contract::SortOrdering,
    E::TieBreak: oxicub_algorithms::contract::SortTieBreak,
{
    let (count, keys, from, offsets) = host_batched(operation, order, batch, env);
    (count, bits(&keys), from, offsets)
}

/// Device buffers of a batched call's outputs, poisoned.
struct Outputs<K: RefKey> {
    keys: DeviceKeys<K>,
    from: CudaSlice<u64>,
    offsets: CudaSlice<i64>,
}

impl<K: RefKey> Outputs<K> {
    fn new(cuda: &Cuda, bound: usize, pairs: usize) -> Self {
        Outputs {
            keys: cuda
                .upload_keys(&vec![poison::<K>(); bound.max(1)])
                .expect("poison"),
            from: cuda.upload(&vec![u64::MAX; bound.max(1)]).expect("poison"),
            offsets: cuda.upload(&vec![-1i64; pairs + 1]).expect("poison"),
        }
    }

    fn download(self, cuda: &Cuda, count: Result<usize, String>, bound: usize) -> Batched {
        let keys = cuda.download_keys(&self.keys).expect("download");
        let from = cuda.download(&self.from.as_view()).expect("download");
        let offsets = cuda.download(&self.offsets.as_view()).expect("download");
        (count, bits(&keys[..bound]), from[..bound].to_vec(), offsets)
    }
}

/// One batched call on the GPU over `pairs`: its count or its error's text.
fn call<K: RefKey, Op: SetOperation, P: BatchOn<Cuda>, E: Environment>(
    cuda: &Cuda,
    operation: Op,
    order: SortOrder,
    pairs: &P,
    (a, b): (CudaView<'_, K>, CudaView<'_, K>),
    out: &mut Outputs<K>,
    env: &E,
) -> Result<usize, String>
where
    E::Ordering: oxicub_algorithms::contract::SortOrdering,
    E::TieBreak: oxicub_algorithms::contract::SortTieBreak,
{
    sets::batched_indices(
        cuda,
        operation,
        choice(order),
        pairs,
        a,
        b,
        out.keys.as_view_mut(),
        out.from.as_view_mut(),
        out.offsets.as_view_mut(),
        env,
    )
    .expect("the front check passes")
    .check()
    .map_err(|e| e.to_string())
}

/// The same call as [`on_host`] on the GPU, every buffer in device memory (an empty buffer: a
/// view of none of one element); with `deferred` the number of pairs stays on the device.
fn on_gpu<K: RefKey, Op: SetOperation, E: Environment>(
    cuda: &Cuda,
    operation: Op,
    order: SortOrder,
    batch: &SetBatch<K>,
    deferred: bool,
    env: &E,
) -> Batched
where
    E::Ordering: oxicub_algorithms::contract::SortOrdering,
    E::TieBreak: oxicub_algorithms::contract::SortTieBreak,
{
    let bound = operation.bound(batch.a.len() as u64, batch.b.len() as u64) as usize;
    let filler = [poison::<K>()];
    let keys_of = |v: &[K]| {
        cuda.upload_keys(if v.is_empty() { &filler[..] } else { v })
            .expect("upload")
    };
    // A deferred count is bounded by DEFERRED_PAIRS: the per-pair buffers hold that many.
    let n = batch.pairs();
    let cap = if deferred { DEFERRED_PAIRS.max(n) } else { n };
    let offsets_of = |v: &[i64]| {
        let mut padded = v.to_vec();
        padded.resize(cap.max(1), v.last().copied().unwrap_or(0));
        cuda.upload(&padded).expect("upload")
    };
    let (a, b) = (keys_of(&batch.a), keys_of(&batch.b));
    let (a_begin, a_end) = (offsets_of(&batch.a_begin), offsets_of(&batch.a_end));
    let (b_begin, b_end) = (offsets_of(&batch.b_begin), offsets_of(&batch.b_end));
    let count_on_device = cuda.upload(&[n as i64]).expect("count");
    let mut out = Outputs::<K>::new(cuda, bound, cap);
    let inputs = || {
        (
            a.as_view().slice(..batch.a.len()),
            b.as_view().slice(..batch.b.len()),
        )
    };
    let (a_layout, b_layout) = (
        Offsets::new(a_begin.as_view().slice(..cap), a_end.as_view().slice(..cap)),
        Offsets::new(b_begin.as_view().slice(..cap), b_end.as_view().slice(..cap)),
    );
    let sizes = || segment_size::PerSegment::<()>::new(());
    let count = if deferred {
        let count = num_segments::Deferred::<_, 0, { DEFERRED_PAIRS as i64 }>::new(
            count_on_device.as_view(),
        );
        let pairs = Batch::new(a_layout, sizes(), b_layout, sizes(), count);
        call(cuda, operation, order, &pairs, inputs(), &mut out, env)
    } else {
        let count = num_segments::uniform(n as i64).expect("count");
        let pairs = Batch::new(a_layout, sizes(), b_layout, sizes(), count);
        call(cuda, operation, order, &pairs, inputs(), &mut out, env)
    };
    let mut result = out.download(cuda, count, bound);
    result.3.truncate(n + 1);
    result
}

/// The upper bound of the tests' deferred counts.
const DEFERRED_PAIRS: usize = 4096;

/// Every operation on both backends, compared whole (the poisoned tail included).
fn same_all<K: RefKey, E: Environment>(
    what: &str,
    cuda: &Cuda,
    order: SortOrder,
    batch: &SetBatch<K>,
    deferred: bool,
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
        batch: &SetBatch<K>,
        deferred: bool,
        env: &E,
    ) where
        E::Ordering: oxicub_algorithms::contract::SortOrdering,
        E::TieBreak: oxicub_algorithms::contract::SortTieBreak,
    {
        let host = on_host(operation, order, batch, env);
        let gpu = on_gpu(cuda, operation, order, batch, deferred, env);
        let name = Op::NAME;
        assert_eq!(gpu.0, host.0, "{what} {name}: the count");
        if let Some(i) = (0..host.3.len()).find(|&i| gpu.3[i] != host.3[i]) {
            panic!(
                "{what} {name}: offset {i} of {}: gpu {} host {}",
                host.3.len(),
                gpu.3[i],
                host.3[i]
            );
        }
        if let Some(j) = (0..host.1.len()).find(|&j| gpu.1[j] != host.1[j] || gpu.2[j] != host.2[j])
        {
            panic!(
                "{what} {name}: output {j} of {}: gpu ({:#x}, {}) host ({:#x}, {})",
                host.1.len(),
                gpu.1[j],
                gpu.2[j],
                host.1[j],
                host.2[j]
            );
        }
    }
    one(what, cuda, op::Intersection, order, batch, deferred, env);
    one(what, cuda, op::Union, order, batch, deferred, env);
    one(what, cuda, op::Difference, order, batch, deferred, env);
    one(
        what,
        cuda,
        op::SymmetricDifference,
        order,
        batch,
        deferred,
        env,
    );
    one(what, cuda, op::Merge, order, batch, deferred, env);
}

/// The batches every key type runs: power-law pairs with gaps, the same without gaps (CSR
/// rows), one huge pair among tiny ones, few distinct keys (runs across tiles), empty pairs.
fn batches<K: RefKey>(descending: bool, seed: u64) -> Vec<(&'static str, SetBatch<K>)> {
    let mut huge = power_law_sizes(2000, 30, seed);
    huge[1234] = (150_000, 90_000);
    let mut empties = vec![(0, 0); 300];
    empties[150] = (5000, 7000);
    empties[151] = (0, 3);
    vec![
        (
            "power law with gaps",
            set_batch(
                &power_law_sizes(4096, 3000, seed),
                400,
                true,
                descending,
                seed,
            ),
        ),
        (
            "csr rows",
            set_batch(
                &power_law_sizes(3000, 2000, seed + 1),
                100_000,
                false,
                descending,
                seed,
            ),
        ),
        (
            "one huge pair",
            set_batch(&huge, 200, true, descending, seed),
        ),
        (
            "runs of equal keys",
            set_batch(
                &power_law_sizes(500, 20_000, seed + 2),
                3,
                true,
                descending,
                seed,
            ),
        ),
        (
            "empty pairs",
            set_batch(&empties, 50, true, descending, seed),
        ),
        (
            "one pair",
            set_batch(&[(40_000, 33_000)], 1000, false, descending, seed),
        ),
        (
            "nothing",
            set_batch(&[(0, 0), (0, 0)], 10, false, descending, seed),
        ),
    ]
}

#[test]
fn every_operation_batched() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn key<K: RefKey>(name: &str, cuda: &Cuda, seed: u64) {
        for order in [SortOrder::Ascending, SortOrder::Descending] {
            for (what, batch) in batches::<K>(order == SortOrder::Descending, seed) {
                let what = format!("{name} {what} {order:?}");
                same_all(&what, cuda, order, &batch, false, &Env::new());
            }
        }
    }
    key::<u32>("u32", &cuda, 1);
    key::<i32>("i32", &cuda, 2);
    key::<f32>("f32", &cuda, 3);
    key::<u64>("u64", &cuda, 4);
    key::<f64>("f64", &cuda, 5);
    key::<i8>("i8", &cuda, 6);
    key::<u16>("u16", &cuda, 7);
}

#[test]
fn deferred_count_and_guarantees() {
    let Some(cuda) = gpu_or_skip() else { return };
    let batch = set_batch::<u32>(&power_law_sizes(3000, 500, 11), 1000, true, false, 11);
    same_all(
        "deferred",
        &cuda,
        SortOrder::Ascending,
        &batch,
        true,
        &Env::new(),
    );
    // No repeated key within a segment: the strict check, and no check at all.
    let mut distinct = set_batch::<u32>(&power_law_sizes(1000, 800, 12), 1 << 20, true, false, 12);
    for (side, begin, end) in [
        (&mut distinct.a, &distinct.a_begin, &distinct.a_end),
        (&mut distinct.b, &distinct.b_begin, &distinct.b_end),
    ] {
        for (&b, &e) in begin.iter().zip(end) {
            let segment = &mut side[b as usize..e as usize];
            segment.sort_unstable();
            for (i, key) in segment.iter_mut().enumerate() {
                *key = (*key & !0xFFF) | i as u32; // keep them distinct and sorted
            }
            segment.sort_unstable();
        }
    }
    let strict = Env::new().guarantee(guarantee::NoDuplicateKeys::new());
    same_all(
        "no duplicates",
        &cuda,
        SortOrder::Ascending,
        &distinct,
        false,
        &strict,
    );
    let trusted = Env::new().guarantee(guarantee::SortedInputs::new());
    same_all(
        "sorted inputs",
        &cuda,
        SortOrder::Ascending,
        &batch,
        false,
        &trusted,
    );
}

#[test]
fn strided_rows_with_sizes_on_the_device() {
    let Some(cuda) = gpu_or_skip() else { return };
    // 1000 rows of a [1000 x 64] matrix against rows of 48, each row using a prefix.
    let (rows, a_stride, b_stride) = (1000usize, 64usize, 48usize);
    let mut rng = oxicub_test::SplitMix64::new(21);
    let a_sizes: Vec<i64> = (0..rows).map(|_| (rng.next_u64() % 65) as i64).collect();
    let mut a = oxicub_test::cases::sorted_keys::<i32>(rows * a_stride, 300, 21, false);
    let b = oxicub_test::cases::sorted_keys::<i32>(rows * b_stride, 300, 22, false);
    for row in a.chunks_mut(a_stride) {
        row.sort_unstable();
    }
    let mut b = b;
    for row in b.chunks_mut(b_stride) {
        row.sort_unstable();
    }
    let bound = a.len() + b.len();
    let (mut keys, mut offsets) = (vec![0i32; bound], vec![0i64; rows + 1]);
    let host = Batch::new(
        Strided::new(a_stride),
        segment_size::PerSegment::<_>::new(&a_sizes[..]),
        Strided::new(b_stride),
        segment_size::Static::<48>::new(),
        num_segments::uniform(rows as i64).expect("count"),
    );
    let n = sets::batched_keys(
        &Host::new(),
        op::SymmetricDifference,
        order::Ascending,
        &host,
        &a[..],
        &b[..],
        &mut keys[..],
        &mut offsets[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host");
    let (da, db) = (
        cuda.upload_keys(&a).expect("up"),
        cuda.upload_keys(&b).expect("up"),
    );
    let count = cuda.upload(&[rows as i64]).expect("up");
    // The sizes on the device as i64, then as i32 (the kernels widen them as they read): each
    // call equals the host's, outputs poisoned.
    macro_rules! same_on_device {
        ($sizes:expr) => {{
            let sizes = cuda.upload(&$sizes).expect("up");
            let mut dkeys = cuda
                .upload_keys(&vec![poison::<i32>(); bound])
                .expect("poison");
            let mut doffsets = cuda.upload(&vec![-1i64; rows + 1]).expect("poison");
            let device = Batch::new(
                Strided::new(a_stride),
                segment_size::PerSegment::<_>::new(sizes.as_view()),
                Strided::new(b_stride),
                segment_size::Static::<48>::new(),
                num_segments::Deferred::<_, 0, 1000>::new(count.as_view()),
            );
            let m = sets::batched_keys(
                &cuda,
                op::SymmetricDifference,
                order::Ascending,
                &device,
                da.as_view(),
                db.as_view(),
                dkeys.as_view_mut(),
                doffsets.as_view_mut(),
                &Env::new(),
            )
            .and_then(Pending::check)
            .expect("gpu");
            assert_eq!(m, n);
            assert_eq!(cuda.download(&doffsets.as_view()).expect("down"), offsets);
            assert_eq!(cuda.download_keys(&dkeys).expect("down")[..n], keys[..n]);
        }};
    }
    same_on_device!(a_sizes);
    same_on_device!(a_sizes.iter().map(|&s| s as i32).collect::<Vec<i32>>());
}

#[test]
fn pairs_keys_and_any_backend_agree() {
    let Some(cuda) = gpu_or_skip() else { return };
    let batch = set_batch::<f32>(&power_law_sizes(2000, 1000, 31), 500, true, true, 31);
    let (indices_count, keys, from, offsets) = on_gpu(
        &cuda,
        op::Union,
        SortOrder::Descending,
        &batch,
        false,
        &Env::new(),
    );
    let n = indices_count.expect("union");
    // Pairs: each value is the key's source position, so the values must equal the positions.
    let a_values: Vec<u64> = (0..batch.a.len() as u64).collect();
    let b_values: Vec<u64> = (0..batch.b.len() as u64)
        .map(|j| batch.a.len() as u64 + j)
        .collect();
    let pairs = Batch::new(
        Offsets::new(&batch.a_begin[..], &batch.a_end[..]),
        segment_size::PerSegment::<()>::new(()),
        Offsets::new(&batch.b_begin[..], &batch.b_end[..]),
        segment_size::PerSegment::<()>::new(()),
        num_segments::uniform(batch.pairs() as i64).expect("count"),
    );
    let bound = batch.a.len() + batch.b.len();
    let (mut any_keys, mut any_values, mut any_offsets) = (
        vec![0f32; bound],
        vec![0u64; bound],
        vec![0i64; batch.pairs() + 1],
    );
    let any = AnyBackend::Cuda(cuda.clone());
    let m = sets::batched_pairs(
        &any,
        op::Union,
        order::Descending,
        &pairs,
        &batch.a[..],
        &a_values[..],
        &batch.b[..],
        &b_values[..],
        &mut any_keys[..],
        &mut any_values[..],
        &mut any_offsets[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("any backend pairs");
    assert_eq!(m, n);
    assert_eq!(any_offsets, offsets);
    assert_eq!(bits(&any_keys[..n]), keys[..n]);
    assert_eq!(any_values[..n], from[..n]);
    // Keys alone.
    let mut only_keys = vec![0f32; bound];
    let k = sets::batched_keys(
        &any,
        op::Union,
        order::Descending,
        &pairs,
        &batch.a[..],
        &batch.b[..],
        &mut only_keys[..],
        &mut any_offsets[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("any backend keys");
    assert_eq!(k, n);
    assert_eq!(bits(&only_keys[..n]), keys[..n]);
}

#[test]
fn bad_batches_report_what_the_host_reports() {
    let Some(cuda) = gpu_or_skip() else { return };
    let base = set_batch::<i32>(&power_law_sizes(1500, 2000, 41), 300, true, false, 41);
    let check = |what: &str, batch: &SetBatch<i32>| {
        let host = on_host(op::Intersection, SortOrder::Ascending, batch, &Env::new());
        let gpu = on_gpu(
            &cuda,
            op::Intersection,
            SortOrder::Ascending,
            batch,
            false,
            &Env::new(),
        );
        assert!(host.0.is_err(), "{what}: the host finds it");
        assert_eq!(gpu.0, host.0, "{what}");
    };
    // A key out of order deep inside the largest segment of a, and late in b (each segment
    // starting below the end of the one before it is fine: the batches are full of those).
    let unsort = |keys: &mut [i32], begin: i64, end: i64, from: usize| {
        let (begin, end) = (begin as usize, end as usize);
        let at = (begin + from..end - 1)
            .find(|&i| keys[i] < keys[i + 1])
            .expect("a rise");
        keys.swap(at, at + 1);
    };
    let largest = (0..base.pairs())
        .max_by_key(|&i| base.a_end[i] - base.a_begin[i])
        .expect("pairs");
    let mut unsorted = base.clone();
    let third = (base.a_end[largest] - base.a_begin[largest]) as usize / 3;
    unsort(
        &mut unsorted.a,
        base.a_begin[largest],
        base.a_end[largest],
        third,
    );
    check("unsorted in a", &unsorted);
    let late = (0..base.pairs())
        .rev()
        .find(|&i| {
            let segment = &base.b[base.b_begin[i] as usize..base.b_end[i] as usize];
            segment.windows(2).any(|w| w[0] < w[1])
        })
        .expect("a pair");
    let mut unsorted = base.clone();
    unsort(&mut unsorted.b, base.b_begin[late], base.b_end[late], 0);
    check("unsorted in b", &unsorted);
    // A segment of a that begins inside the one before it; b's segment 900 ends past b.
    let pair = (700..base.pairs())
        .find(|&i| base.a_end[i - 1] > base.a_begin[i - 1])
        .expect("a nonempty segment");
    let mut overlap = base.clone();
    overlap.a_begin[pair] = overlap.a_end[pair - 1] - 1;
    check("overlap", &overlap);
    let mut past = base.clone();
    past.b_end[900] = past.b.len() as i64 + 1;
    check("past b", &past);
    // A deferred count above its bounds.
    let batch = set_batch::<i32>(&power_law_sizes(10, 100, 42), 50, false, false, 42);
    let (da, db) = (
        cuda.upload_keys(&batch.a).expect("up"),
        cuda.upload_keys(&batch.b).expect("up"),
    );
    let (ab, ae) = (
        cuda.upload(&batch.a_begin).expect("up"),
        cuda.upload(&batch.a_end).expect("up"),
    );
    let (bb, be) = (
        cuda.upload(&batch.b_begin).expect("up"),
        cuda.upload(&batch.b_end).expect("up"),
    );
    let count = cuda.upload(&[11i64]).expect("up");
    let pairs = Batch::new(
        Offsets::new(ab.as_view(), ae.as_view()),
        segment_size::PerSegment::<()>::new(()),
        Offsets::new(bb.as_view(), be.as_view()),
        segment_size::PerSegment::<()>::new(()),
        num_segments::Deferred::<_, 0, 10>::new(count.as_view()),
    );
    let mut out = Outputs::<i32>::new(&cuda, batch.a.len().min(batch.b.len()), 10);
    let result = call(
        &cuda,
        op::Intersection,
        SortOrder::Ascending,
        &pairs,
        (da.as_view(), db.as_view()),
        &mut out,
        &Env::new(),
    );
    assert!(
        result.as_ref().is_err_and(|e| e.contains("num_segments")),
        "{result:?}"
    );
}
