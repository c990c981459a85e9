//! What a batched top-k call gives the launcher besides its keys and values, and the status it
//! leaves on the device.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView};

use super::constants::{BT_STATUS_TOTAL, BT_STATUS_TOTAL_BAD};
use super::tiers::BatchedTiers;
use super::HostOrDevice;
use crate::health::ContextHealth;
use crate::segments::{
    SEGMENT_STATUS_COUNT_BAD, SEGMENT_STATUS_COUNT_VALUE, SEGMENT_STATUS_VALUE,
    SEGMENT_STATUS_VIOLATION,
};
use crate::{KernelError, KernelRuntime};

/// Where the segments are, for keys of type `K`.
#[derive(Clone, Copy, Debug)]
pub enum BatchedLayout<'a, 'b, K> {
    /// Segment `i` starts at `i * stride`; its size is `sizes`.
    Strided {
        /// The stride.
        stride: u64,
        /// The sizes.
        sizes: HostOrDevice<'a, 'b, i64, u64>,
    },
    /// Segment `i` is `begin[i]..end[i]`.
    Offsets {
        /// Begin offsets.
        begin: &'b CudaView<'a, i64>,
        /// End offsets.
        end: &'b CudaView<'a, i64>,
    },
    /// Segment `i` is the view `segments[i]`, each in its own allocation (the seeds' iterator
    /// of iterators); the keys buffer of [`batched_topk`](super::batched_topk) is `None`.
    /// Copied values come as [`SelectedValues::Listed`](crate::families::SelectedValues::Listed),
    /// a view per segment. The launcher takes each segment's address and length from its view
    /// and checks the view's context and alignment: a segment is exactly its view.
    Listed {
        /// The segments: at least as many as the call's most segments.
        segments: &'b [CudaView<'a, K>],
    },
}

/// Everything a batched top-k launch needs besides the buffers of keys and values, for keys of
/// type `K`.
#[derive(Clone, Copy, Debug)]
pub struct BatchedTopKPlan<'a, 'b, K> {
    /// The layout.
    pub layout: BatchedLayout<'a, 'b, K>,
    /// `k`.
    pub k: HostOrDevice<'a, 'b, i64, u64>,
    /// The direction: 0 = max, 1 = min (per segment: `u8`s).
    pub direction: HostOrDevice<'a, 'b, u8, u32>,
    /// The options of the direction that were compiled (bit 0: max, bit 1: min).
    pub direction_mask: u32,
    /// The number of segments: on the host, or deferred (an `i64` clamped into
    /// `num_segments_bounds`).
    pub num_segments: HostOrDevice<'a, 'b, i64, u64>,
    /// Bounds of a deferred number of segments; its upper bound is the most segments launched.
    pub num_segments_bounds: (u64, u64),
    /// Bounds every segment size must satisfy.
    pub size_bounds: (u64, u64),
    /// Bounds every `k` must satisfy.
    pub k_bounds: (u64, u64),
    /// Bounds of the sum of the valid segments' sizes (the TotalItems guarantee; `(0,
    /// u64::MAX)` when there is none): the several-blocks tier's scratch is sized from the
    /// upper bound, and a sum outside them is reported.
    pub total_bounds: (u64, u64),
    /// Distance between consecutive segments' outputs.
    pub out_stride: u64,
    /// The most items one segment writes.
    pub per_segment_max: u64,
    /// The tiers to run.
    pub tiers: BatchedTiers,
    /// Keys per lane of the warp tier.
    pub warp_items: u32,
    /// Ties at the boundary keep the larger indices.
    pub prefer_larger_index: bool,
    /// The output is sorted by key.
    pub sorted: bool,
    /// ... with equal keys by index.
    pub stable: bool,
}

/// The status words a call leaves on the device (see [`BatchedStatus::decode`]).
#[derive(Debug)]
pub struct BatchedStatus {
    /// The words; `None` when the host checked every value before launching (strided layout,
    /// every parameter uniform and valid): nothing can fail on the device.
    pub words: Option<CudaSlice<u64>>,
    /// The health of the launching runtime's context: a kernel fault seen by the read is
    /// reported as one.
    health: Arc<ContextHealth>,
}

/// The decoded status of a finished call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchedReport {
    /// The smallest invalid segment: (segment, violation code, offending value).
    pub violation: Option<(u64, u8, i64)>,
    /// A deferred number of segments outside its bounds: its value.
    pub bad_num_segments: Option<i64>,
    /// The sum of the valid segments' sizes, when it is outside the TotalItems guarantee.
    pub bad_total_items: Option<u64>,
}

impl BatchedStatus {
    /// The status of a call launched by `runtime`.
    pub(super) fn new(runtime: &KernelRuntime, words: Option<CudaSlice<u64>>) -> BatchedStatus {
        BatchedStatus {
            words,
            health: Arc::clone(runtime.health()),
        }
    }

    /// Reads the status (waits for the stream). A kernel fault seen here (the call's own, or
    /// an earlier one's on the context) is [`KernelError::ContextPoisoned`].
    pub fn decode(&self, stream: &Arc<CudaStream>) -> Result<BatchedReport, KernelError> {
        self.health.check()?;
        let Some(words) = &self.words else {
            // Nothing to read; still the caller's synchronisation point.
            self.health
                .during("cuStreamSynchronize", stream.synchronize())?;
            return Ok(BatchedReport {
                violation: None,
                bad_num_segments: None,
                bad_total_items: None,
            });
        };
        let words = self
            .health
            .during("cuMemcpyDtoHAsync", stream.clone_dtoh(words))?;
        let word = |at: u32| words[at as usize];
        let first = word(SEGMENT_STATUS_VIOLATION);
        let violation = (first != u64::MAX).then(|| {
            (
                first >> 8,
                (first & 0xFF) as u8,
                word(SEGMENT_STATUS_VALUE) as i64,
            )
        });
        let bad_num_segments = (word(SEGMENT_STATUS_COUNT_BAD) != 0)
            .then_some(word(SEGMENT_STATUS_COUNT_VALUE) as i64);
        let bad_total_items = (word(BT_STATUS_TOTAL_BAD) != 0).then_some(word(BT_STATUS_TOTAL));
        Ok(BatchedReport {
            violation,
            bad_num_segments,
            bad_total_items,
        })
    }
}
