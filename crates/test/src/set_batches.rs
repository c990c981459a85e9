//! Batches of pairs of sorted segments for the batched set operation tests: both inputs with
//! their segments' begin and end offsets (in order and disjoint), unsorted filler in the gaps
//! between some segments, sizes drawn from a power law (many tiny pairs, a few huge ones).

use crate::cases::sample_keys;
use crate::oracle::RefKey;
use crate::SplitMix64;

/// One batch: pair `i` is `a[a_begin[i]..a_end[i]]` and `b[b_begin[i]..b_end[i]]`.
#[derive(Clone, Debug)]
pub struct SetBatch<K> {
    /// The first input (segments and gaps).
    pub a: Vec<K>,
    /// The second input.
    pub b: Vec<K>,
    /// Where each of a's segments begins.
    pub a_begin: Vec<i64>,
    /// Where each of a's segments ends.
    pub a_end: Vec<i64>,
    /// Where each of b's segments begins.
    pub b_begin: Vec<i64>,
    /// Where each of b's segments ends.
    pub b_end: Vec<i64>,
}

impl<K> SetBatch<K> {
    /// The number of pairs.
    pub fn pairs(&self) -> usize {
        self.a_begin.len()
    }
}

/// A batch of `sizes.len()` pairs (pair `i`: `sizes[i].0` keys of a, `sizes[i].1` of b), each
/// segment sorted in the order (`descending`) with keys drawn from `distinct` values (few:
/// long runs of equal keys), and with `gaps` a few unsorted keys before about a third of the
/// segments and after the last.
pub fn set_batch<K: RefKey>(
    sizes: &[(usize, usize)],
    distinct: usize,
    gaps: bool,
    descending: bool,
    seed: u64,
) -> SetBatch<K> {
    let mut rng = SplitMix64::new(seed ^ 0xba7c);
    let mut batch = SetBatch {
        a: Vec::new(),
        b: Vec::new(),
        a_begin: Vec::new(),
        a_end: Vec::new(),
        b_begin: Vec::new(),
        b_end: Vec::new(),
    };
    // One pool of keys for the whole batch (drawing it per segment would cost `distinct` keys
    // a segment).
    let pool: Vec<K> = sample_keys(distinct.max(1), seed);
    let side =
        |keys: &mut Vec<K>, begin: &mut Vec<i64>, end: &mut Vec<i64>, n, rng: &mut SplitMix64| {
            if gaps && rng.next_u64() % 3 == 0 {
                let filler = (rng.next_u64() % 4) as usize;
                keys.extend(sample_keys::<K>(filler, rng.next_u64()));
            }
            begin.push(keys.len() as i64);
            let mut segment: Vec<K> = (0..n)
                .map(|_| pool[(rng.next_u64() % pool.len() as u64) as usize])
                .collect();
            segment.sort_by(|x, y| {
                if descending {
                    y.ref_cmp(x)
                } else {
                    x.ref_cmp(y)
                }
            });
            keys.extend(segment);
            end.push(keys.len() as i64);
        };
    for &(m, n) in sizes {
        side(
            &mut batch.a,
            &mut batch.a_begin,
            &mut batch.a_end,
            m,
            &mut rng,
        );
        side(
            &mut batch.b,
            &mut batch.b_begin,
            &mut batch.b_end,
            n,
            &mut rng,
        );
    }
    if gaps {
        batch.a.extend(sample_keys::<K>(3, rng.next_u64()));
        batch.b.extend(sample_keys::<K>(2, rng.next_u64()));
    }
    batch
}

/// `pairs` pairs of sizes drawn from a power law up to `max` on each side (about half the
/// pairs hold a handful of keys, a few hold thousands), a tenth of them empty on one side.
pub fn power_law_sizes(pairs: usize, max: usize, seed: u64) -> Vec<(usize, usize)> {
    let mut rng = SplitMix64::new(seed ^ 0x9a1e);
    let size = |rng: &mut SplitMix64| {
        if rng.next_u64() % 10 == 0 {
            return 0;
        }
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((max as f64 + 1.0).powf(u * u) - 1.0) as usize
    };
    (0..pairs)
        .map(|_| (size(&mut rng), size(&mut rng)))
        .collect()
}

/// A batched call's results: the checked count (or the error's text), the keys, the source
/// positions, the pairs' offsets.
pub type BatchedResult<K> = (Result<usize, String>, Vec<K>, Vec<u64>, Vec<i64>);

/// `sets::batched_indices` of `operation` over `batch` on the host backend, in `order`, every
/// output poisoned first (keys with [`crate::cases::poison`], positions with `u64::MAX`,
/// offsets with -1): the oracle of the GPU tests.
pub fn host_batched<K, Op, E>(
    operation: Op,
    order: oxicub_params::SortOrder,
    batch: &SetBatch<K>,
    env: &E,
) -> BatchedResult<K>
where
    K: RefKey,
    Op: oxicub_algorithms::sets::SetOperation,
    E: oxicub_env::Environment,
    E::Ordering: oxicub_algorithms::contract::SortOrdering,
    E::TieBreak: oxicub_algorithms::contract::SortTieBreak,
{
    use oxicub_algorithms::segments::Offsets;
    use oxicub_algorithms::sets::{self, Batch};
    use oxicub_params::{num_segments, order, segment_size};
    let bound = operation.bound(batch.a.len() as u64, batch.b.len() as u64) as usize;
    let (mut keys, mut from) = (
        vec![crate::cases::poison::<K>(); bound],
        vec![u64::MAX; bound],
    );
    let mut offsets = vec![-1i64; batch.pairs() + 1];
    let pairs = Batch::new(
        Offsets::new(&batch.a_begin[..], &batch.a_end[..]),
        segment_size::PerSegment::<()>::new(()),
        Offsets::new(&batch.b_begin[..], &batch.b_end[..]),
        segment_size::PerSegment::<()>::new(()),
        num_segments::uniform(batch.pairs() as i64).expect("a count"),
    );
    let count = sets::batched_indices(
        &oxicub_algorithms::Host::new(),
        operation,
        order::Choice::<order::Either>::new(order).expect("an order"),
        &pairs,
        &batch.a[..],
        &batch.b[..],
        &mut keys[..],
        &mut from[..],
        &mut offsets[..],
        env,
    )
    .expect("the front check passes")
    .check()
    .map_err(|e| e.to_string());
    (count, keys, from, offsets)
}
