//! Batched top-k cases and checks: segments given by offsets with a k and a direction each
//! ([`Case`]), builders of the shapes each tier of `docs/design/batched_topk.md` is meant for,
//! the per-segment check against the [oracle](crate::oracle), and (in the GPU half) runs of one
//! case on the host and on the GPU compared with each other.
//!
//! ```
//! use oxicub_test::batched_topk::Case;
//!
//! // Three segments of 4, 0 and 2 keys: k = 2, 1, 5 (above the size); max, min, max.
//! let case = Case::contiguous(vec![5u32, 1, 4, 2, 8, 7], &[4, 0, 2], &[2, 1, 5], &[0, 1, 0]);
//! assert_eq!((case.begin.clone(), case.end.clone()), (vec![0, 4, 4], vec![4, 4, 6]));
//! assert_eq!(case.stride(), 4); // min(largest size, largest k)
//! ```

mod gpu;

pub use gpu::{check_on_gpu, check_strided, run_on_gpu, run_on_host, Run, StridedShape};

use oxicub_env::Resolved;
use oxicub_params::SelectDirection;

use crate::cases::{SplitMix64, POISON_INDEX};
use crate::oracle::{check_top_k, RefKey};

/// One batched top-k case: segments given by offsets into `keys`, a k and a direction code
/// per segment.
///
/// Direction codes are the per-segment bytes of `direction::PerSegment`: 0 selects the
/// largest keys, 1 the smallest, anything else is a bad value that the call reports for that
/// segment. Offsets and k may be bad too (out of order, past the buffer, negative), so a case
/// can pin how violations are reported.
#[derive(Clone, Debug)]
pub struct Case<K> {
    /// Every segment's keys, and whatever lies between them.
    pub keys: Vec<K>,
    /// Where each segment starts in `keys`.
    pub begin: Vec<i64>,
    /// Where each segment ends in `keys` (exclusive).
    pub end: Vec<i64>,
    /// How many keys each segment selects.
    pub ks: Vec<i64>,
    /// Each segment's direction code: 0 max, 1 min.
    pub dirs: Vec<u8>,
}

impl<K: RefKey> Case<K> {
    /// `sizes.len()` segments one after another, covering `keys` exactly.
    ///
    /// # Panics
    ///
    /// When the sizes do not add up to `keys.len()`.
    pub fn contiguous(keys: Vec<K>, sizes: &[usize], ks: &[i64], dirs: &[u8]) -> Case<K> {
        let (mut begin, mut end, mut at) = (Vec::new(), Vec::new(), 0i64);
        for &s in sizes {
            begin.push(at);
            at += s as i64;
            end.push(at);
        }
        assert_eq!(at as usize, keys.len());
        Case {
            keys,
            begin,
            end,
            ks: ks.to_vec(),
            dirs: dirs.to_vec(),
        }
    }

    /// A mixed case for every tier at once: tiny, shared-memory and huge segments (up to
    /// 40 000 keys) and 40 random ones below 300, with adversarial k (0, the size, above the
    /// size, 1, random below 40) and random directions. `keys_for(total, seed)` gives the keys.
    ///
    /// ```
    /// use oxicub_test::{batched_topk::Case, sample_keys};
    ///
    /// let case = Case::mixed(sample_keys::<f32>, 1);
    /// assert_eq!(case.ks.len(), 50);
    /// assert_eq!(case.max_size(), 40_000);
    /// ```
    pub fn mixed(keys_for: impl Fn(usize, u64) -> Vec<K>, seed: u64) -> Case<K> {
        let mut rng = SplitMix64::new(seed);
        let mut sizes = vec![0usize, 1, 7, 64, 256, 300, 2048, 2049, 5000, 40_000];
        for _ in 0..40 {
            sizes.push((rng.next_u64() % 300) as usize);
        }
        let ks: Vec<i64> = sizes
            .iter()
            .map(|&s| match rng.next_u64() % 6 {
                0 => 0,
                1 => s as i64,
                2 => s as i64 + 5,
                3 => 1,
                _ => (rng.next_u64() % 40) as i64,
            })
            .collect();
        let total = sizes.iter().sum();
        let d = random_directions(&mut rng, sizes.len());
        Case::contiguous(keys_for(total, seed), &sizes, &ks, &d)
    }

    /// Segments for the stream tier and its neighbours (`docs/design/batched_topk.md`, "Stream
    /// tier"): sizes just above the block tier, sizes that end inside a chunk, the
    /// sparse-attention row; k from 1 to the tier's cap of 2048, and just above it (the
    /// multi-block tier); a few small segments (warp and block tiers). `keys_for(total, seed)`
    /// gives the keys.
    ///
    /// ```
    /// use oxicub_test::{batched_topk::Case, cases::tied_keys};
    ///
    /// let case = Case::stream(tied_keys::<i32>, 41);
    /// assert_eq!(case.max_size(), 131_072);
    /// ```
    pub fn stream(keys_for: impl Fn(usize, u64) -> Vec<K>, seed: u64) -> Case<K> {
        let mut rng = SplitMix64::new(seed);
        let sizes = [
            2049usize, 2051, 3000, 4099, 9000, 16_387, 40_000, 131_072, 5000, 60_000, 100, 2048, 7,
        ];
        let ks: Vec<i64> = sizes
            .iter()
            .enumerate()
            .map(|(i, _)| match i {
                0 => 2048, // all but one item
                1 => 2049, // above the cap: multi-block tier
                7 => 2048, // sparse attention
                8 => 2500, // above the cap, sorted globally
                9 => 1,    // a single winner
                12 => 9,   // k > size
                _ => 1 + (rng.next_u64() % 700) as i64,
            })
            .collect();
        let total = sizes.iter().sum();
        let d = random_directions(&mut rng, sizes.len());
        Case::contiguous(keys_for(total, seed), &sizes, &ks, &d)
    }

    /// `keys` cut into adversarial segments: empty ones (one at the end), single keys, 300-key
    /// ones, random ones below 40; k of 0, the size, above the size and random below 9;
    /// random directions.
    ///
    /// ```
    /// use oxicub_test::batched_topk::Case;
    ///
    /// let case = Case::adversarial(vec![7u32; 500], 9);
    /// assert_eq!(case.end.last(), Some(&500));
    /// ```
    pub fn adversarial(keys: Vec<K>, seed: u64) -> Case<K> {
        let mut rng = SplitMix64::new(seed);
        let mut sizes = Vec::new();
        let mut left = keys.len();
        while left > 0 {
            let s = match rng.next_u64() % 6 {
                0 => 0,
                1 => 1,
                2 => left.min(300),
                _ => (rng.next_u64() as usize % 40).min(left),
            };
            sizes.push(s);
            left -= s;
        }
        sizes.push(0); // an empty segment at the end
        let ks: Vec<i64> = sizes
            .iter()
            .map(|&s| match rng.next_u64() % 5 {
                0 => 0,
                1 => s as i64,
                2 => s as i64 + 3, // k > size: clamped
                _ => (rng.next_u64() % 9) as i64,
            })
            .collect();
        let dirs = random_directions(&mut rng, sizes.len());
        Case::contiguous(keys, &sizes, &ks, &dirs)
    }

    /// The number of segments.
    pub fn num_segments(&self) -> usize {
        self.ks.len()
    }

    /// The largest segment size (0 without segments).
    pub fn max_size(&self) -> i64 {
        let sizes = self.begin.iter().zip(&self.end).map(|(b, e)| e - b);
        sizes.max().unwrap_or(0).max(0)
    }

    /// The largest k (0 without segments).
    pub fn max_k(&self) -> i64 {
        self.ks.iter().copied().max().unwrap_or(0).max(0)
    }

    /// The output stride the runs use: the most one segment can write under the runtime
    /// bounds they declare (exactly the largest size and the largest k).
    pub fn stride(&self) -> usize {
        self.max_size().min(self.max_k()) as usize
    }

    /// Segment `i`'s direction, `None` for a code outside max (0) and min (1).
    pub fn direction(&self, i: usize) -> Option<SelectDirection> {
        match self.dirs[i] {
            0 => Some(SelectDirection::Max),
            1 => Some(SelectDirection::Min),
            _ => None,
        }
    }

    /// Every segment's direction, for calls that take them typed.
    ///
    /// # Panics
    ///
    /// When a code is neither max (0) nor min (1).
    pub fn directions(&self) -> Vec<SelectDirection> {
        (0..self.num_segments())
            .map(|i| self.direction(i).expect("a direction code of 0 or 1"))
            .collect()
    }

    /// Segment `i`'s keys, `None` when its offsets are out of order or past the keys.
    pub fn segment(&self, i: usize) -> Option<&[K]> {
        let (b, e) = (self.begin[i], self.end[i]);
        let valid = b >= 0 && b <= e && e as usize <= self.keys.len();
        valid.then(|| &self.keys[b as usize..e as usize])
    }
}

/// `n` random direction codes, 0 (max) or 1 (min).
///
/// ```
/// use oxicub_test::{batched_topk::random_directions, SplitMix64};
///
/// let dirs = random_directions(&mut SplitMix64::new(1), 100);
/// assert!(dirs.iter().all(|&d| d < 2));
/// ```
pub fn random_directions(rng: &mut SplitMix64, n: usize) -> Vec<u8> {
    (0..n).map(|_| (rng.next_u64() % 2) as u8).collect()
}

/// Checks a batched result (`out_keys` and `out_indices` at the case's [stride](Case::stride))
/// segment by segment: a segment with bad offsets, a bad direction code or a negative k wrote
/// none of its slots; every other one meets [`check_top_k`] for `requirements` over its own
/// keys, and wrote no slot past its `min(k, size)` results. Outputs start as
/// [`POISON_INDEX`].
///
/// ```
/// use oxicub_algorithms::{batched_topk::{self, Problem}, Host};
/// use oxicub_env::{Env, Requirements};
/// use oxicub_params::{direction, k, num_segments, segment_size};
/// use oxicub_test::batched_topk::{check_segments, Case};
/// use oxicub_test::cases::{poison, POISON_INDEX};
///
/// let case = Case::contiguous(vec![5u32, 1, 4, 2, 8, 7], &[3, 3], &[2, 2], &[0, 0]);
/// let problem = Problem::strided(
///     3,
///     segment_size::Static::<3>::new(),
///     k::Static::<2>::new(),
///     direction::Max,
///     num_segments::uniform(2)?,
/// );
/// let (mut out_keys, mut out_indices) = (vec![poison::<u32>(); 4], vec![POISON_INDEX; 4]);
/// let env = Env::new();
/// batched_topk::select_indices(
///     &Host::new(),
///     &problem,
///     &case.keys[..],
///     &mut out_keys[..],
///     &mut out_indices[..],
///     &env,
/// )?
/// .check()?;
/// check_segments(&case, env.resolved(), &out_keys, &out_indices);
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn check_segments<K: RefKey>(
    case: &Case<K>,
    requirements: Resolved,
    out_keys: &[K],
    out_indices: &[u64],
) {
    let r = requirements;
    let stride = case.stride();
    for i in 0..case.num_segments() {
        let base = i * stride;
        let what = format!(
            "{} segment {i} [{}, {}) k={} dir={} {r:?}",
            K::KEY_TYPE,
            case.begin[i],
            case.end[i],
            case.ks[i],
            case.dirs[i]
        );
        let (Some(seg), Some(dir), true) = (case.segment(i), case.direction(i), case.ks[i] >= 0)
        else {
            assert!(
                out_indices[base..base + stride]
                    .iter()
                    .all(|&x| x == POISON_INDEX),
                "{what}: an invalid segment wrote"
            );
            continue;
        };
        let written = (case.ks[i] as usize).min(seg.len());
        check_top_k(
            &what,
            seg,
            written,
            dir,
            r,
            &out_keys[base..base + written],
            &out_indices[base..base + written],
        );
        assert!(
            out_indices[base + written..base + stride]
                .iter()
                .all(|&x| x == POISON_INDEX),
            "{what}: a slot past the results was written"
        );
    }
}

/// A row of 131072 keys for direction code `dir` (0 max) whose sampled positions hold its
/// best numbers: the positions p with p % 128 < 8, which hold every run that the stream
/// tier's filter and clustered kernel sample (`docs/design/batched_topk.md`, "Stream tier":
/// runs of 8 or 4 keys at strides of 128, 256 or 512 keys, for f32 and f64 keys). Of the
/// other keys, uniform in [0, 1), one in 32 is a NaN (negative for max), so the sample misses
/// while NaNs rank below the threshold for min.
///
/// ```
/// let row = oxicub_test::batched_topk::sample_miss_row(1, 70);
/// assert_eq!(row[0], -1000.0);
/// assert!(row[16].is_nan());
/// ```
pub fn sample_miss_row(dir: u8, seed: u64) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    (0..131_072)
        .map(|i| match (i % 128 < 8, i % 32, dir) {
            (true, _, 0) => 1000.0 + i as f64,
            (true, _, _) => -1000.0 - i as f64,
            (false, 16, 0) => -f64::NAN,
            (false, 16, _) => f64::NAN,
            _ => rng.next_unit_f64(),
        })
        .collect()
}
