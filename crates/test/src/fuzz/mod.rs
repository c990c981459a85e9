//! Generated calls of every algorithm's public API on the host backend, and the oracle's
//! prediction of each: the exact error of a bad input (variant, argument and numbers), or what
//! the call reports afterwards and what every output slot then holds.
//!
//! A call is plain data ([`topk::TopKCall`], [`batched::BatchedCall`]): the entry point, how
//! each parameter is passed (static, uniform, per segment, deferred), its values, the buffers'
//! lengths and the environment's guarantees. A test turns the description into the typed call
//! (the parameter types follow the description), runs it on outputs filled with poison, and
//! hands what came back to the description's `check`, which compares it with the prediction:
//! the same error, or for a call that ran, the reported outcome, each written slot against the
//! sequential [oracle](crate::oracle), and every other slot still poison.
//!
//! The prediction is written from the documented contract (the module docs of
//! `oxicub_algorithms::topk`, `batched_topk` and `segments`, and the order of the front checks
//! that `crates/algorithms/tests/batched_topk_host_errors.rs` pins), not from the code under
//! test.
//!
//! Descriptions are built from a [`Tape`] of random draws that proptest supplies and shrinks:
//! a draw of 0 is always the simplest choice (the first option, a valid argument), so a failing
//! case shrinks toward the smallest call that still fails.
//!
//! ```
//! use oxicub_test::fuzz::{topk::TopKCall, Tape};
//!
//! // An all-zero tape is the simplest call: valid, so the prediction is a run.
//! let call = TopKCall::<u32>::generate(&mut Tape::new(&[0; 8]), &TopKCall::<u32>::ALL_KINDS);
//! assert!(call.predict().is_ok());
//! ```

pub mod batched;
mod expected;
pub mod topk;
mod values;

pub use expected::Expected;
pub use values::{FuzzValue, PrintOnPanic};

use oxicub_algorithms::radix::{RadixBits, RadixKey};
use oxicub_env::{Env, HList, Resolved, Unset};
use oxicub_params::role::{self, Role};
use oxicub_params::{BoundOrigin, Bounds, Deferred, Guarantee, PerSegment, SelectDirection};
use proptest::prelude::*;
use proptest::test_runner::Config;

use crate::cases::{edge_bits, poison, SplitMix64};
use crate::oracle::{check_top_k, check_top_k_keys, RefKey};

/// The environment variable that sets the number of proptest cases (proptest's own).
pub const CASES_VAR: &str = "PROPTEST_CASES";

/// A proptest configuration running `default_cases` cases, or as many as [`CASES_VAR`] says.
///
/// ```
/// let config = oxicub_test::fuzz::config(1000);
/// if std::env::var_os(oxicub_test::fuzz::CASES_VAR).is_none() {
///     assert_eq!(config.cases, 1000);
/// }
/// ```
pub fn config(default_cases: u32) -> Config {
    let mut config = Config::default();
    if std::env::var_os(CASES_VAR).is_none() {
        config.cases = default_cases;
    }
    config
}

/// The strategy of tapes: up to 700 random draws, shrunk toward fewer draws and zeros.
pub fn tapes() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(any::<u32>(), 0..700)
}

/// A sequence of random draws that builds a call. Past its end every draw is 0.
#[derive(Clone, Debug)]
pub struct Tape<'a> {
    draws: &'a [u32],
    at: usize,
}

impl<'a> Tape<'a> {
    /// A tape over `draws`.
    pub fn new(draws: &'a [u32]) -> Tape<'a> {
        Tape { draws, at: 0 }
    }

    /// The next draw, below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        let draw = self.draws.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        if n == 0 {
            0
        } else {
            u64::from(draw) % n
        }
    }

    /// A draw in `0..=max`.
    pub fn up_to(&mut self, max: u64) -> u64 {
        self.below(max.saturating_add(1))
    }

    /// `true` with probability `percent` / 100; a zero draw is `false`.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) >= 100 - percent
    }

    /// One of `options`; a zero draw is the first.
    ///
    /// # Panics
    ///
    /// When `options` is empty.
    pub fn pick<T: Copy>(&mut self, options: &[T]) -> T {
        options[self.below(options.len() as u64) as usize]
    }

    /// 64 random bits from one draw (a zero draw gives a fixed pattern).
    pub fn bits(&mut self) -> u64 {
        SplitMix64::new(self.below(1 << 32)).next_u64()
    }

    /// Bounds `[min, min + width]` with `min <= max_min`, `width <= max_width`.
    pub fn bounds(&mut self, max_min: u64, max_width: u64) -> Bounds {
        let min = self.up_to(max_min) as i64;
        Bounds::new(min, min + self.up_to(max_width) as i64)
    }

    /// A per-segment value that no bound of a count admits, or one far above any buffer:
    /// negative, `2^40`, `i64::MAX`, `i64::MIN`.
    pub fn wild(&mut self) -> i64 {
        self.pick(&[-1, 1 << 40, i64::MAX, i64::MIN, -(1 << 33)])
    }

    /// `len` keys: drawn from a pool of a few values (edge values of the key type and random
    /// patterns), so ties are common, or random patterns. Never the poison pattern.
    pub fn keys<K: RadixKey>(&mut self, len: usize) -> Vec<K> {
        let width = <K::Bits as RadixBits>::BITS;
        let edges = edge_bits(width);
        let random = self.percent(20);
        let pool: Vec<u64> = (0..1 + self.below(6))
            .map(|_| match self.below(3) {
                0 => edges[self.below(edges.len() as u64) as usize],
                _ => self.bits(),
            })
            .collect();
        let poison_bits = poison::<K>().to_bits().to_u64();
        (0..len)
            .map(|_| {
                let pattern = if random {
                    self.bits()
                } else {
                    pool[self.below(pool.len() as u64) as usize]
                };
                let mut bits = <K::Bits as RadixBits>::from_u64_truncating(pattern);
                if bits.to_u64() == poison_bits {
                    bits = <K::Bits as RadixBits>::from_u64_truncating(pattern ^ 1);
                }
                K::from_bits(bits)
            })
            .collect()
    }
}

/// What a call returns beside the keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// `*_keys`.
    Keys,
    /// `*_pairs`: the value of source item `p` is `V::from_source(p)` ([`FuzzValue`]).
    Pairs,
    /// `*_indices`.
    Indices,
}

/// How a parameter of one value for the whole call is passed: single-problem top-k's `k`, a
/// number of segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Single {
    /// `Static::<N>` of the parameter's module, `N` the value the call's module names
    /// ([`topk::STATIC_K`], [`batched::STATIC_NUM_SEGMENTS`]).
    Static,
    /// `uniform(v)`.
    Uniform(i64),
    /// `Deferred::<&i64>` over `value` (a host value the call does not read before it runs),
    /// narrowed to `bounds`.
    Deferred {
        /// The value.
        value: i64,
        /// Runtime bounds (`with_bounds`), if any.
        bounds: Option<Bounds>,
    },
}

/// The kinds of [`Single`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SingleKind {
    /// [`Single::Static`].
    Static,
    /// [`Single::Uniform`].
    Uniform,
    /// [`Single::Deferred`].
    Deferred,
}

/// The runtime bounds of the environment's guarantees, two for each role a call reads (a test
/// gives both, as `Guarantee::between`; [`Bounds::COUNTS`] is no constraint). Two guarantees
/// for one role may contradict each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuaranteeSpec {
    /// `k`.
    pub k: [Bounds; 2],
    /// The segment sizes.
    pub segment_sizes: [Bounds; 2],
    /// The number of segments.
    pub num_segments: [Bounds; 2],
    /// The sum of the segment sizes.
    pub total_items: [Bounds; 2],
}

impl GuaranteeSpec {
    /// No constraint on any role.
    pub const NONE: GuaranteeSpec = GuaranteeSpec {
        k: [Bounds::COUNTS; 2],
        segment_sizes: [Bounds::COUNTS; 2],
        num_segments: [Bounds::COUNTS; 2],
        total_items: [Bounds::COUNTS; 2],
    };

    /// Guarantees for a tape: mostly none; sometimes bounds near `typical` (one per role:
    /// `k`, sizes, count, total), sometimes a second guarantee that may contradict the first.
    pub fn generate(tape: &mut Tape<'_>, typical: [u64; 4]) -> GuaranteeSpec {
        let mut role = |typical: u64| {
            let mut pair = [Bounds::COUNTS; 2];
            if tape.percent(8) {
                pair[0] = tape.bounds(typical.min(3), typical + 2);
            }
            if tape.percent(3) {
                pair[1] = tape.bounds(typical + 2, typical + 2);
            }
            pair
        };
        GuaranteeSpec {
            k: role(typical[0]),
            segment_sizes: role(typical[1]),
            num_segments: role(typical[2]),
            total_items: role(typical[3]),
        }
    }
}

/// The tightest bounds of a parameter named `param` whose own bounds are `own` (the value
/// itself when the host knows it: `host`), under two guarantees: what the contract merges, or
/// the error it reports (`oxicub_env::merged_bounds`).
pub(crate) fn merged(
    param: &'static str,
    own: Bounds,
    host: Option<i64>,
    guarantees: [Bounds; 2],
) -> Result<Bounds, Expected> {
    let guaranteed = guarantees[0].intersect(guarantees[1]);
    if guaranteed.is_empty() {
        return Err(Expected::ContradictoryGuarantees {
            param,
            bounds: guaranteed,
        });
    }
    let merged = own.intersect(guaranteed);
    if merged.is_empty() {
        return Err(match host {
            Some(value) => Expected::OutOfBounds {
                param,
                value,
                bounds: guaranteed,
                origin: BoundOrigin::Guarantee,
            },
            None => Expected::ContradictsGuarantee {
                param,
                param_bounds: own,
                guarantee: guaranteed,
            },
        });
    }
    Ok(merged)
}

/// A deferred count (`Deferred` with the default type bounds [`Bounds::COUNTS`]) whose own
/// bounds are `own` and tightest `merged`, read as `value` while the call runs: clamped into
/// `merged`, and outside it reported with the bounds it breaks, the type's first, then the
/// caller's, then the guarantees'.
pub(crate) fn deferred_report(
    param: &'static str,
    value: i64,
    own: Bounds,
    merged: Bounds,
) -> (i64, Option<Expected>) {
    if merged.contains(value) {
        return (value, None);
    }
    let (bounds, origin) = if !Bounds::COUNTS.contains(value) {
        (Bounds::COUNTS, BoundOrigin::Static)
    } else if !own.contains(value) {
        (own, BoundOrigin::Runtime)
    } else {
        (merged, BoundOrigin::Guarantee)
    };
    let error = Expected::OutOfBounds {
        param,
        value,
        bounds,
        origin,
    };
    (value.clamp(merged.min, merged.max), Some(error))
}

/// Checks `written` items selected from `keys` in `direction`: with `second` (the values or
/// indices written beside the keys, and the source item of `keys[0]`) by
/// [`check_top_k`](crate::oracle::check_top_k), else by
/// [`check_top_k_keys`](crate::oracle::check_top_k_keys).
pub(crate) fn check_selection<K: RefKey, V: FuzzValue>(
    what: &str,
    keys: &[K],
    written: usize,
    direction: SelectDirection,
    requirements: Resolved,
    out_keys: &[K],
    second: Option<(&[V], u64)>,
) {
    let Some((second, first_source)) = second else {
        return check_top_k_keys(what, keys, written, direction, requirements, out_keys);
    };
    let indices: Vec<u64> = second
        .iter()
        .enumerate()
        .map(|(j, value)| match value.to_source() {
            Some(source) if source >= first_source => source - first_source,
            _ => panic!("{what}: slot {j} holds {value:?}, which names no item of the segment"),
        })
        .collect();
    check_top_k(
        what,
        keys,
        written,
        direction,
        requirements,
        out_keys,
        &indices,
    );
}

/// Asserts that every slot of `keys` and `second` still holds poison (`first` is the index of
/// their first slot in the output, for the message).
pub(crate) fn check_untouched<K: RadixKey, V: FuzzValue>(
    what: &str,
    keys: &[K],
    second: Option<&[V]>,
    first: usize,
) {
    let poison_bits = poison::<K>().to_bits().to_u64();
    if let Some(j) = keys
        .iter()
        .position(|k| k.to_bits().to_u64() != poison_bits)
    {
        panic!(
            "{what}: out_keys[{}] was written ({:?}) but must be untouched",
            first + j,
            keys[j]
        );
    }
    if let Some(second) = second {
        if let Some(j) = second.iter().position(|v| !v.same_bits(V::poison())) {
            panic!(
                "{what}: slot {} of the values or indices was written ({:?}) but must be \
                 untouched",
                first + j,
                second[j]
            );
        }
    }
}

/// The guarantees of a generated environment: two of each role a call reads, in the order
/// [`GuaranteeSpec::env`] lists them.
pub type Guarantees = HList!(
    Guarantee<role::K>,
    Guarantee<role::K>,
    Guarantee<role::SegmentSize>,
    Guarantee<role::SegmentSize>,
    Guarantee<role::NumSegments>,
    Guarantee<role::NumSegments>,
    Guarantee<role::TotalItems>,
    Guarantee<role::TotalItems>,
);

/// The environment of a generated call, before requirements: [`Guarantees`].
pub type GuaranteeEnv = Env<Unset, Unset, Unset, Guarantees>;

/// A guarantee on role `R` with static bounds of every count and runtime bounds `bounds`.
///
/// # Panics
///
/// When `bounds` is empty or admits a negative value.
pub fn guarantee<R: Role>(bounds: Bounds) -> Guarantee<R> {
    Guarantee::new()
        .between(bounds.min, bounds.max)
        .expect("generated guarantees are non-empty counts")
}

impl GuaranteeSpec {
    /// The environment with these guarantees and no requirement (the default contract).
    ///
    /// ```
    /// use oxicub_env::{Environment, Guarantees};
    /// use oxicub_params::{role::RoleId, Bounds};
    /// use oxicub_test::fuzz::GuaranteeSpec;
    ///
    /// let mut spec = GuaranteeSpec::NONE;
    /// spec.k[1] = Bounds::new(0, 8);
    /// assert_eq!(spec.env().guarantees().runtime(RoleId::K), Bounds::new(0, 8));
    /// ```
    pub fn env(&self) -> GuaranteeEnv {
        let [k0, k1] = self.k;
        let [s0, s1] = self.segment_sizes;
        let [n0, n1] = self.num_segments;
        let [t0, t1] = self.total_items;
        // Each guarantee goes to the front of the list.
        Env::new()
            .guarantee(guarantee::<role::TotalItems>(t1))
            .guarantee(guarantee::<role::TotalItems>(t0))
            .guarantee(guarantee::<role::NumSegments>(n1))
            .guarantee(guarantee::<role::NumSegments>(n0))
            .guarantee(guarantee::<role::SegmentSize>(s1))
            .guarantee(guarantee::<role::SegmentSize>(s0))
            .guarantee(guarantee::<role::K>(k1))
            .guarantee(guarantee::<role::K>(k0))
    }
}

/// `PerSegment<R>` over `values`, narrowed to `bounds`.
///
/// # Panics
///
/// When `bounds` is empty or admits a negative value.
pub fn per_segment<R: Role>(values: &[i64], bounds: Option<Bounds>) -> PerSegment<R, &[i64]> {
    let param = PerSegment::new(values);
    match bounds {
        Some(b) => param
            .with_bounds(b.min, b.max)
            .expect("generated bounds are counts"),
        None => param,
    }
}

/// Segment sizes given only by bounds (`PerSegment<()>`), narrowed to `bounds`.
///
/// # Panics
///
/// When `bounds` is empty or admits a negative value.
pub fn bounds_only(bounds: Option<Bounds>) -> PerSegment<role::SegmentSize, ()> {
    let param = PerSegment::new(());
    match bounds {
        Some(b) => param
            .with_bounds(b.min, b.max)
            .expect("generated bounds are counts"),
        None => param,
    }
}

/// `Deferred<R>` over `value` (a host `&i64`), narrowed to `bounds`.
///
/// # Panics
///
/// When `bounds` is empty or admits a negative value.
pub fn deferred<R: Role>(value: &i64, bounds: Option<Bounds>) -> Deferred<R, &i64> {
    let param = Deferred::new(value);
    match bounds {
        Some(b) => param
            .with_bounds(b.min, b.max)
            .expect("generated bounds are counts"),
        None => param,
    }
}

/// Calls `$body` with `$env` bound to `$base` (an `oxicub_env::Env` without requirements)
/// under the `$index`-th of [`REQUIREMENT_SETS`] requirement combinations: 0 is none (the
/// default contract), then those of [`for_every_env!`](crate::for_every_env) in its order.
///
/// ```
/// use oxicub_env::{Env, Requirements};
/// use oxicub_test::fuzz::REQUIREMENT_SETS;
/// use oxicub_test::with_requirements;
///
/// let mut seen = Vec::new();
/// for index in 0..REQUIREMENT_SETS {
///     with_requirements!(index, Env::new(), |env| seen.push(env.resolved()));
/// }
/// seen.sort_by_key(|r| format!("{r:?}"));
/// seen.dedup();
/// assert_eq!(seen.len(), 21); // the default is one of the 21 combinations
/// ```
#[macro_export]
macro_rules! with_requirements {
    ($index:expr, $base:expr, |$env:ident| $body:expr) => {{
        use $crate::__macro_support::oxicub_env::{
            determinism as d, output_ordering as o, tie_break as t,
        };
        let base = $base;
        $crate::with_requirements!(@sets $index, base, $env, $body;
            0 => ();
            1 => (d::NotGuaranteed, o::Unsorted);
            2 => (d::NotGuaranteed, o::Sorted);
            3 => (d::NotGuaranteed, o::StableSorted);
            4 => (d::RunToRun, t::Unspecified, o::Unsorted);
            5 => (d::RunToRun, t::Unspecified, o::Sorted);
            6 => (d::RunToRun, t::Unspecified, o::StableSorted);
            7 => (d::RunToRun, t::PreferSmallerIndex, o::Unsorted);
            8 => (d::RunToRun, t::PreferSmallerIndex, o::Sorted);
            9 => (d::RunToRun, t::PreferSmallerIndex, o::StableSorted);
            10 => (d::RunToRun, t::PreferLargerIndex, o::Unsorted);
            11 => (d::RunToRun, t::PreferLargerIndex, o::Sorted);
            12 => (d::RunToRun, t::PreferLargerIndex, o::StableSorted);
            13 => (d::GpuToGpu, t::Unspecified, o::Unsorted);
            14 => (d::GpuToGpu, t::Unspecified, o::Sorted);
            15 => (d::GpuToGpu, t::Unspecified, o::StableSorted);
            16 => (d::GpuToGpu, t::PreferSmallerIndex, o::Unsorted);
            17 => (d::GpuToGpu, t::PreferSmallerIndex, o::Sorted);
            18 => (d::GpuToGpu, t::PreferSmallerIndex, o::StableSorted);
            19 => (d::GpuToGpu, t::PreferLargerIndex, o::Unsorted);
            20 => (d::GpuToGpu, t::PreferLargerIndex, o::Sorted);
            21 => (d::GpuToGpu, t::PreferLargerIndex, o::StableSorted);
        )
    }};
    (@sets $index:expr, $base:ident, $env:ident, $body:expr;
        $($set:literal => ($($requirement:expr),*);)*) => {
        match $index {
            $($set => {
                let $env = &$base$(.with($requirement))*;
                $body
            })*
            other => panic!("requirement set {other} of {}", $crate::fuzz::REQUIREMENT_SETS),
        }
    };
}

/// The number of requirement sets [`with_requirements!`](crate::with_requirements) runs.
pub const REQUIREMENT_SETS: usize = 22;
