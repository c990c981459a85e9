//! Shared by the top-k tests: a plain sequential reference written from the seeds' contract
//! text, the contract checker for modes that do not pin the output, and the list of every
//! valid environment.
#![allow(dead_code)]

use std::cmp::Ordering;

use half::{bf16, f16};
use oxicub_algorithms::radix::RadixKey;
use oxicub_env::{OutputOrdering, Resolved, TieBreak};
use oxicub_params::SelectDirection;

/// The key order of the contract, written independently of the radix transform: numeric
/// order, `-0.0 < +0.0`, every NaN equal to every other NaN and above `+inf`.
pub trait RefKey: RadixKey {
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

/// `Less` when `a` comes first in the output: the larger key for max, the smaller for min.
pub fn better<K: RefKey>(a: &K, b: &K, direction: SelectDirection) -> Ordering {
    match direction {
        SelectDirection::Max => b.ref_cmp(a),
        SelectDirection::Min => a.ref_cmp(b),
    }
}

/// The reference: which source indices are selected (with an explicit tie-break) and the
/// stable-sorted output. Sort every item by key, best first, equal keys by the preferred index;
/// keep the first `k`; lay them out by key, equal keys by source index.
pub fn reference<K: RefKey>(
    keys: &[K],
    k: usize,
    direction: SelectDirection,
    tie_break: TieBreak,
) -> Vec<usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| {
        better(&keys[a], &keys[b], direction).then(match tie_break {
            TieBreak::PreferLargerIndex => b.cmp(&a),
            _ => a.cmp(&b),
        })
    });
    order.truncate(k.min(keys.len()));
    order.sort_by(|&a, &b| better(&keys[a], &keys[b], direction).then(a.cmp(&b)));
    order
}

/// Checks exactly the contract of `requirements` for a result given as keys and source indices.
pub fn check_contract<K: RefKey>(
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
    // The keys are the true top-k as a multiset (under the contract's order).
    let expected = reference(keys, k, direction, TieBreak::PreferSmallerIndex);
    let mut got: Vec<K> = out_keys.to_vec();
    got.sort_by(|a, b| better(a, b, direction));
    for (j, (&e, g)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(
            keys[e].ref_cmp(g),
            Ordering::Equal,
            "{what}: the {j}-th best selected key is {g:?}, expected {:?}",
            keys[e]
        );
    }
    // An explicit tie-break pins the set.
    if requirements.pins_result_set() {
        let mut expected_set = reference(keys, k, direction, requirements.tie_break);
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
                    better(a, b, direction),
                    Ordering::Greater,
                    "{what}: not sorted at {j}"
                )
            }
            OutputOrdering::StableSorted => {
                let order = better(a, b, direction);
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
        let expected = reference(keys, k, direction, requirements.tie_break);
        let got: Vec<usize> = out_indices.iter().map(|&i| i as usize).collect();
        assert_eq!(got, expected, "{what}: pinned output");
    }
}

/// Calls `$f(args.., &env)` for every valid environment: the default and each of the 21 valid
/// combinations of determinism x tie-break x output ordering.
#[macro_export]
macro_rules! for_every_env {
    ($f:ident ( $($arg:expr),* )) => {{
        use oxicub_env::{determinism as d, output_ordering as o, require, tie_break as t, Env};
        $f($($arg,)* &Env::new());
        $crate::for_every_env!(@orders $f ($($arg),*) d::NotGuaranteed);
        $crate::for_every_env!(@ties $f ($($arg),*) d::RunToRun);
        $crate::for_every_env!(@ties $f ($($arg),*) d::GpuToGpu);
    }};
    (@ties $f:ident ($($arg:expr),*) $d:expr) => {{
        $crate::for_every_env!(@orders $f ($($arg),*) $d, t::Unspecified);
        $crate::for_every_env!(@orders $f ($($arg),*) $d, t::PreferSmallerIndex);
        $crate::for_every_env!(@orders $f ($($arg),*) $d, t::PreferLargerIndex);
    }};
    (@orders $f:ident ($($arg:expr),*) $($req:expr),*) => {{
        $f($($arg,)* &require!($($req,)* o::Unsorted));
        $f($($arg,)* &require!($($req,)* o::Sorted));
        $f($($arg,)* &require!($($req,)* o::StableSorted));
    }};
}
