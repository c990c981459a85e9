//! The reference for selection results: a plain sequential top-k written from the documented
//! contract, and a checker that asserts exactly what a set of requirements promises.
//!
//! The oracle shares no code with the implementations it checks. Its key order
//! ([`RefKey`]) is written from the contract's words, not from the radix transform: numeric
//! order, `-0.0` below `+0.0`, every NaN equal to every other NaN and above `+inf` (the order
//! the radix codes give, documented in `oxicub_kernels::radix`). Its selection is a full sort:
//! every item by key, best first, equal keys by the preferred index; the first `k` kept; laid
//! out by key, equal keys by source index (the stable order).
//!
//! ```
//! use oxicub_env::TieBreak;
//! use oxicub_params::SelectDirection;
//! use oxicub_test::oracle::top_k;
//!
//! // The seeds' worked example: K = 3 on `10 8 8 8 6 5`.
//! let keys = [10i32, 8, 8, 8, 6, 5];
//! let smaller = top_k(&keys, 3, SelectDirection::Max, TieBreak::PreferSmallerIndex);
//! assert_eq!(smaller, [0, 1, 2]);
//! let larger = top_k(&keys, 3, SelectDirection::Max, TieBreak::PreferLargerIndex);
//! assert_eq!(larger, [0, 2, 3]);
//! ```

use std::cmp::Ordering;

use half::{bf16, f16};
use oxicub_algorithms::radix::{RadixBits, RadixKey};
use oxicub_env::{OutputOrdering, Resolved, TieBreak};
use oxicub_params::SelectDirection;

/// A key type with the contract's order, written independently of the radix transform:
/// numeric order, `-0.0 < +0.0`, every NaN equal to every other NaN and above `+inf`.
///
/// Implemented for every radix key type (`u8`..`u64`, `i8`..`i64`, `f16`, `bf16`, `f32`,
/// `f64`).
///
/// ```
/// use std::cmp::Ordering;
/// use oxicub_test::oracle::RefKey;
///
/// assert_eq!((-0.0f32).ref_cmp(&0.0), Ordering::Less);
/// assert_eq!(f32::NAN.ref_cmp(&f32::INFINITY), Ordering::Greater);
/// assert_eq!(f64::NAN.ref_cmp(&-f64::NAN), Ordering::Equal);
/// ```
pub trait RefKey: RadixKey {
    /// The contract's order of `self` and `other`.
    fn ref_cmp(&self, other: &Self) -> Ordering;
}

macro_rules! int_ref_key {
    ($($t:ty),*) => {$(
        impl RefKey for $t {
            fn ref_cmp(&self, other: &Self) -> Ordering { self.cmp(other) }
        }
    )*};
}
int_ref_key!(u8, u16, u32, u64, i8, i16, i32, i64);

fn float_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.total_cmp(&b),
    }
}

impl RefKey for f64 {
    fn ref_cmp(&self, other: &Self) -> Ordering {
        float_cmp(*self, *other)
    }
}
impl RefKey for f32 {
    fn ref_cmp(&self, other: &Self) -> Ordering {
        float_cmp(f64::from(*self), f64::from(*other))
    }
}
impl RefKey for f16 {
    fn ref_cmp(&self, other: &Self) -> Ordering {
        float_cmp(self.to_f64(), other.to_f64())
    }
}
impl RefKey for bf16 {
    fn ref_cmp(&self, other: &Self) -> Ordering {
        float_cmp(self.to_f64(), other.to_f64())
    }
}

/// The order of `a` and `b` in a sorted output of `direction`: `Less` when `a` comes first
/// (the larger key for max, the smaller for min).
///
/// ```
/// use std::cmp::Ordering;
/// use oxicub_params::SelectDirection;
/// use oxicub_test::oracle::output_cmp;
///
/// assert_eq!(output_cmp(&9u8, &3, SelectDirection::Max), Ordering::Less);
/// assert_eq!(output_cmp(&9u8, &3, SelectDirection::Min), Ordering::Greater);
/// ```
pub fn output_cmp<K: RefKey>(a: &K, b: &K, direction: SelectDirection) -> Ordering {
    match direction {
        SelectDirection::Max => b.ref_cmp(a),
        SelectDirection::Min => a.ref_cmp(b),
    }
}

/// The reference top-k: the source indices selected with an explicit tie-break, in the
/// stable-sorted output order. Sorts every item by key, best first, equal keys by the
/// preferred index (the smaller unless `tie_break` is `PreferLargerIndex`); keeps the first
/// `min(k, keys.len())`; lays them out by key, equal keys by source index.
///
/// ```
/// use oxicub_env::TieBreak;
/// use oxicub_params::SelectDirection;
///
/// let keys = [1.0f32, f32::NAN, -0.0, 0.0];
/// let low = oxicub_test::oracle::top_k(&keys, 2, SelectDirection::Min, TieBreak::PreferSmallerIndex);
/// assert_eq!(low, [2, 3]);
/// ```
pub fn top_k<K: RefKey>(
    keys: &[K],
    k: usize,
    direction: SelectDirection,
    tie_break: TieBreak,
) -> Vec<usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| {
        output_cmp(&keys[a], &keys[b], direction).then(match tie_break {
            TieBreak::PreferLargerIndex => b.cmp(&a),
            _ => a.cmp(&b),
        })
    });
    order.truncate(k.min(keys.len()));
    order.sort_by(|&a, &b| output_cmp(&keys[a], &keys[b], direction).then(a.cmp(&b)));
    order
}

/// Asserts exactly the contract of `requirements` for a top-k result given as keys and
/// source indices (`what` names the case in every failure message):
///
/// * `min(k, keys.len())` keys and indices; each index a distinct source item whose key is
///   the output key, bit for bit;
/// * the keys are the true top-k as a multiset, under the contract's order;
/// * where the requirements pin the set (a deterministic run with an explicit tie-break),
///   the selected indices are exactly [`top_k`]'s;
/// * the order that `requirements.ordering` asks for (stable: equal keys by index);
/// * where the requirements pin the output, the indices are [`top_k`]'s in its order.
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_env::{Env, Requirements};
/// use oxicub_params::{direction, k, SelectDirection};
/// use oxicub_test::oracle::check_top_k;
///
/// let keys = [10i32, 8, 8, 8, 6, 5];
/// let env = Env::new();
/// let (out_keys, out_indices) = topk::select_indices_owned::<_, _, _, u64, _, _>(
///     &Host::new(),
///     &direction::Max,
///     &keys[..],
///     &k::Static::<3>::new(),
///     &env,
/// )?.check()?;
/// check_top_k("example", &keys, 3, SelectDirection::Max, env.resolved(), &out_keys, &out_indices);
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn check_top_k<K: RefKey>(
    what: &str,
    keys: &[K],
    k: usize,
    direction: SelectDirection,
    requirements: Resolved,
    out_keys: &[K],
    out_indices: &[u64],
) {
    let k = k.min(keys.len());
    assert_eq!(out_keys.len(), k, "{what}: number of keys");
    assert_eq!(out_indices.len(), k, "{what}: number of indices");
    // Each index is a distinct source item and the key is that item's key, bit for bit.
    let mut seen = vec![false; keys.len()];
    for (j, (&i, key)) in out_indices.iter().zip(out_keys).enumerate() {
        let i = i as usize;
        assert!(i < keys.len(), "{what}: index {i} out of range at {j}");
        assert!(!seen[i], "{what}: index {i} selected twice");
        seen[i] = true;
        assert!(
            key.to_bits() == keys[i].to_bits(),
            "{what}: key at {j} is not keys[{i}]"
        );
    }
    assert_top_keys(what, keys, k, direction, out_keys);
    // An explicit tie-break pins the set.
    if requirements.pins_result_set() {
        let mut expected_set = top_k(keys, k, direction, requirements.tie_break);
        expected_set.sort_unstable();
        let mut got_set: Vec<usize> = out_indices.iter().map(|&i| i as usize).collect();
        got_set.sort_unstable();
        assert_eq!(got_set, expected_set, "{what}: selected set");
    }
    // The order.
    for j in 1..k {
        let (a, b) = (&out_keys[j - 1], &out_keys[j]);
        match requirements.ordering {
            OutputOrdering::Unsorted => {}
            OutputOrdering::Sorted => {
                assert_ne!(
                    output_cmp(a, b, direction),
                    Ordering::Greater,
                    "{what}: not sorted at {j}"
                )
            }
            OutputOrdering::StableSorted => {
                let order = output_cmp(a, b, direction);
                assert_ne!(order, Ordering::Greater, "{what}: not sorted at {j}");
                if order == Ordering::Equal {
                    assert!(
                        out_indices[j - 1] < out_indices[j],
                        "{what}: not stable at {j}"
                    );
                }
            }
        }
    }
    if requirements.pins_output() {
        let expected = top_k(keys, k, direction, requirements.tie_break);
        let got: Vec<usize> = out_indices.iter().map(|&i| i as usize).collect();
        assert_eq!(got, expected, "{what}: pinned output");
    }
}

/// Asserts that `out_keys` are the true top `k` of `keys` as a multiset, under the contract's
/// order.
fn assert_top_keys<K: RefKey>(
    what: &str,
    keys: &[K],
    k: usize,
    direction: SelectDirection,
    out_keys: &[K],
) {
    let expected = top_k(keys, k, direction, TieBreak::PreferSmallerIndex);
    let mut got: Vec<K> = out_keys.to_vec();
    got.sort_by(|a, b| output_cmp(a, b, direction));
    for (j, (&e, g)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(
            keys[e].ref_cmp(g),
            Ordering::Equal,
            "{what}: the {j}-th best selected key is {g:?}, expected {:?}",
            keys[e]
        );
    }
}

/// Key bits, to compare keys bit for bit (NaN payloads and signed zeros included).
fn key_bits<K: RadixKey>(keys: impl IntoIterator<Item = K>) -> Vec<u64> {
    keys.into_iter().map(|key| key.to_bits().to_u64()).collect()
}

/// Asserts the contract of `requirements` for a top-k result given as keys alone (no index
/// says which item each key came from), as [`check_top_k`] does where keys can show it:
///
/// * `min(k, keys.len())` keys, which are distinct source items' keys, bit for bit (as
///   multisets of bit patterns);
/// * the true top-k as a multiset under the contract's order;
/// * where the requirements pin the set, the bit patterns of exactly [`top_k`]'s items;
/// * the order that `requirements.ordering` asks for (which of equal keys comes first shows
///   only where the output is pinned);
/// * where the requirements pin the output, [`top_k`]'s keys in its order, bit for bit.
///
/// ```
/// use oxicub_env::{Env, Requirements};
/// use oxicub_params::SelectDirection;
/// use oxicub_test::oracle::check_top_k_keys;
///
/// let keys = [f32::NAN, 1.0, -f32::NAN, 2.0];
/// let out = [f32::NAN, -f32::NAN]; // both NaNs rank above every number, by index
/// check_top_k_keys("example", &keys, 2, SelectDirection::Max, Env::new().resolved(), &out);
/// ```
pub fn check_top_k_keys<K: RefKey>(
    what: &str,
    keys: &[K],
    k: usize,
    direction: SelectDirection,
    requirements: Resolved,
    out_keys: &[K],
) {
    let k = k.min(keys.len());
    assert_eq!(out_keys.len(), k, "{what}: number of keys");
    // Distinct source items: the output's bit patterns are a sub-multiset of the input's.
    let mut source = key_bits(keys.iter().copied());
    source.sort_unstable();
    let mut got = key_bits(out_keys.iter().copied());
    got.sort_unstable();
    let mut from = source.iter().peekable();
    for bits in &got {
        while from.next_if(|&&s| s < *bits).is_some() {}
        assert!(
            from.next_if(|&&s| s == *bits).is_some(),
            "{what}: key bits {bits:#x} written more often than the input holds them"
        );
    }
    assert_top_keys(what, keys, k, direction, out_keys);
    let reference = top_k(keys, k, direction, requirements.tie_break);
    if requirements.pins_result_set() {
        let mut expected_set = key_bits(reference.iter().map(|&i| keys[i]));
        expected_set.sort_unstable();
        assert_eq!(got, expected_set, "{what}: selected set (key bits)");
    }
    if requirements.ordering != OutputOrdering::Unsorted {
        for j in 1..k {
            assert_ne!(
                output_cmp(&out_keys[j - 1], &out_keys[j], direction),
                Ordering::Greater,
                "{what}: not sorted at {j}"
            );
        }
    }
    if requirements.pins_output() {
        let expected = key_bits(reference.iter().map(|&i| keys[i]));
        assert_eq!(
            key_bits(out_keys.iter().copied()),
            expected,
            "{what}: pinned output (key bits)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxicub_env::Determinism;

    const KEYS: [i32; 6] = [10, 8, 8, 8, 6, 5];
    const STABLE: Resolved = Resolved {
        determinism: Determinism::GpuToGpu,
        tie_break: TieBreak::PreferSmallerIndex,
        ordering: OutputOrdering::StableSorted,
    };

    #[test]
    fn the_checker_accepts_the_reference() {
        let (keys, indices) = ([10, 8, 8], [0, 1, 2]);
        check_top_k("", &KEYS, 3, SelectDirection::Max, STABLE, &keys, &indices);
    }

    #[test]
    #[should_panic(expected = "selected set")]
    fn the_checker_rejects_the_other_tie_break() {
        let (keys, indices) = ([10, 8, 8], [0, 2, 3]);
        check_top_k("", &KEYS, 3, SelectDirection::Max, STABLE, &keys, &indices);
    }
}
