//! What a top-k call asks for.

use crate::families::HostOrDevice;
use crate::Direction;

/// What a top-k call selects and how it lays the result out.
#[derive(Clone, Copy, Debug)]
pub struct TopKPlan<'a> {
    /// `Descending` selects the largest keys, `Ascending` the smallest.
    pub direction: Direction,
    /// Among keys equal to the k-th, keep the larger source indices (else the smaller).
    pub prefer_larger_index: bool,
    /// Sort the result by key (equal keys in source-index order); else any order (source-index
    /// order, or sorted, when `deterministic`).
    pub sorted: bool,
    /// The same result on every run (and GPU). When false and `sorted` is false, the result is
    /// written in whatever order the threads finish, and ties at the k-th key are taken in any
    /// order.
    pub deterministic: bool,
    /// `k`: known on the host (at most the number of keys), or an `i64` on the device (a
    /// one-element view) read in stream order and clamped into `k_bounds` (and the number of
    /// keys).
    pub k: HostOrDevice<'a, 'a, i64, u64>,
    /// The bounds a deferred `k` is clamped into.
    pub k_bounds: (u64, u64),
    /// The most items the call may write (`min(k or its upper bound, keys.len())`); the output
    /// buffers hold at least this many.
    pub max_written: u64,
}
