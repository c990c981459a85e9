//! What a top-k call asks for, and the report it leaves on the device.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView};

use crate::families::scratch::StatusWords;

use crate::families::HostOrDevice;
use crate::health::ContextHealth;
use crate::{Direction, KernelError, KernelRuntime};

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
    /// one-element view) read in stream order, checked against `k_bounds` (a value outside is
    /// clamped into them and reported by [`TopKStatus::decode`]) and clamped to the number of
    /// keys.
    pub k: HostOrDevice<&'a CudaView<'a, i64>, u64>,
    /// The bounds of a deferred `k`; `min(k_bounds.1, keys.len())` must not exceed
    /// `max_written`.
    pub k_bounds: (u64, u64),
    /// The most items the call may write (`min(k or its upper bound, keys.len())`); the output
    /// buffers hold at least this many.
    pub max_written: u64,
}

/// What a call leaves on the device: a deferred `k` outside its bounds, read by
/// [`decode`](Self::decode).
#[derive(Debug)]
pub struct TopKStatus {
    /// Two words, a flag and the value, when `k` was deferred; `None` when the host knew it
    /// (nothing to report).
    words: Option<StatusWords>,
    /// The health of the launching runtime's context: a kernel fault seen by the read is
    /// reported as one.
    health: Arc<ContextHealth>,
}

impl TopKStatus {
    /// The status of a call launched by `runtime`.
    pub(super) fn new(runtime: &KernelRuntime, words: Option<StatusWords>) -> TopKStatus {
        TopKStatus {
            words,
            health: Arc::clone(runtime.health()),
        }
    }

    /// `true` when the call left nothing to read (its `k` was known on the host).
    pub fn is_empty(&self) -> bool {
        self.words.is_none()
    }

    /// Reads the report (waits for the stream when there is one): the deferred `k` when it was
    /// outside `k_bounds`. A kernel fault seen here is [`KernelError::ContextPoisoned`].
    pub fn decode(&self, stream: &Arc<CudaStream>) -> Result<Option<i64>, KernelError> {
        let Some(words) = &self.words else {
            return Ok(None);
        };
        self.health.check()?;
        let words = words.read(&self.health, stream)?;
        Ok((words[0] != 0).then_some(words[1] as i64))
    }
}
