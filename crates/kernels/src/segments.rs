//! The segmented problem's vocabulary that the host and every segmented kernel family share:
//! the layout flags of a launch, the status words its control stages leave, the per-segment
//! descriptors and the codes of the per-segment checks (`cuda/core/segments.cuh` reads them).
//!
//! The violation codes are public: they are what a segmented call's status reports for its
//! smallest invalid segment.
//!
//! ```
//! use oxicub::kernels::segments::{
//!     VIOLATION_OPTION_NOT_COMPILED, VIOLATION_OFFSETS_OUT_OF_ORDER,
//! };
//!
//! assert!(VIOLATION_OFFSETS_OUT_OF_ORDER < VIOLATION_OPTION_NOT_COMPILED);
//! ```

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::codegen::device_constants;
use crate::families::scratch::StatusWords;
use crate::health::ContextHealth;
use crate::{KernelError, KernelRuntime};

device_constants! {
    /// The constants of the segmented problem, declared in every generated kernel.
    pub(crate) static SEGMENT_CONSTANTS;

    /// Flag (`params.flags`): the segments are given by begin and end offsets (else strided).
    pub(crate) const SEGMENT_OFFSETS: u32 = 1;
    /// Flag: strided segments whose sizes are per segment (`params.sizes`).
    pub(crate) const SEGMENT_SIZES_PER_SEGMENT: u32 = 2;
    /// Flag: those per-segment sizes are `i32` (else `i64`).
    pub(crate) const SEGMENT_SIZES_I32: u32 = 1 << 20;
    /// Flag: the number of segments is deferred, an `i64` at `params.num_segments_ptr`.
    pub(crate) const SEGMENT_COUNT_DEFERRED: u32 = 16;
    /// Flag: a direct call (strided, every value one host value checked on the host): no
    /// control stages, no descriptors, no status words.
    pub(crate) const SEGMENT_DIRECT: u32 = 1024;
    /// Flag: listed layout, `params.values` holds each segment's value address (`u64`), not
    /// one buffer of values.
    pub(crate) const SEGMENT_VALUE_POINTERS: u32 = 2048;
    /// Every flag of the segmented problem: a family's own flags take other bits.
    pub(crate) const SEGMENT_FLAGS: u32 = SEGMENT_OFFSETS
        | SEGMENT_SIZES_PER_SEGMENT
        | SEGMENT_SIZES_I32
        | SEGMENT_COUNT_DEFERRED
        | SEGMENT_DIRECT
        | SEGMENT_VALUE_POINTERS;

    /// Status word (`u64`): the smallest `segment << 8 | violation code` over invalid segments
    /// (all ones when there is none).
    pub(crate) const SEGMENT_STATUS_VIOLATION: u32 = 0;
    /// Status word: the offending value of that segment.
    pub(crate) const SEGMENT_STATUS_VALUE: u32 = 1;
    /// Status word: 1 when a deferred number of segments was outside its bounds.
    pub(crate) const SEGMENT_STATUS_COUNT_BAD: u32 = 2;
    /// Status word: that number.
    pub(crate) const SEGMENT_STATUS_COUNT_VALUE: u32 = 3;
    /// Status word: the number of segments processed.
    pub(crate) const SEGMENT_STATUS_COUNT: u32 = 4;
    /// Status words from here: the segments appended to each of the family's bin lists
    /// (possibly past a list's capacity); the family's own words follow them.
    pub(crate) const SEGMENT_STATUS_LISTS: u32 = 5;

    /// `u64` words of a segment's descriptor: begin, size, a word of the family's, and its
    /// flags (the family's low 8 bits and SEGMENT_DESC_VALID).
    pub(crate) const SEGMENT_DESC_WORDS: u32 = 4;
    /// The descriptor flag of a valid segment.
    pub(crate) const SEGMENT_DESC_VALID: u64 = 256;

    /// Violation: a begin offset is negative or above its end offset.
    pub const VIOLATION_OFFSETS_OUT_OF_ORDER: u32 = 1;
    /// Violation: a segment ends past the keys.
    pub const VIOLATION_PAST_BUFFER: u32 = 2;
    /// Violation: a segment's size is outside its bounds.
    pub const VIOLATION_SIZE_OUT_OF_BOUNDS: u32 = 3;
    /// Violation: a strided segment is larger than the stride.
    pub const VIOLATION_SIZE_ABOVE_STRIDE: u32 = 4;
    /// Violation: a per-segment parameter of the family (top-k's `k`) is outside its bounds.
    pub const VIOLATION_PARAM_OUT_OF_BOUNDS: u32 = 5;
    /// Violation: a per-segment option of the family (top-k's direction) is not one of the
    /// options compiled.
    pub const VIOLATION_OPTION_NOT_COMPILED: u32 = 6;
    /// Violation: a segment begins before the previous one ends (a family that writes each
    /// segment where it lies, such as a sort, needs them in order and disjoint).
    pub const VIOLATION_OVERLAPS: u32 = 7;
    /// Violation: a segment's `k` is above its size, in a call that refuses that rather than
    /// clamping (batched top-k's `reject_k_above_size`).
    pub const VIOLATION_K_ABOVE_SIZE: u32 = 8;
}

/// The status words a segmented call leaves on the device (see [`SegmentedStatus::decode`]).
#[derive(Debug)]
pub struct SegmentedStatus {
    /// The words; `None` when the host checked every value before launching (strided layout,
    /// every parameter uniform and valid): nothing can fail on the device.
    pub words: Option<StatusWords>,
    /// The health of the launching runtime's context: a kernel fault seen by the read is
    /// reported as one.
    health: Arc<ContextHealth>,
    /// The family's status words of the valid segments' total size and of its check
    /// (`BT_STATUS_TOTAL`, `BT_STATUS_TOTAL_BAD` for batched top-k).
    total_words: (u32, u32),
}

/// The decoded status of a finished call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentedReport {
    /// The smallest invalid segment: (segment, violation code, offending value).
    pub violation: Option<(u64, u8, i64)>,
    /// A deferred number of segments outside its bounds: its value.
    pub bad_num_segments: Option<i64>,
    /// The sum of the valid segments' sizes, when it is outside the TotalItems guarantee.
    pub bad_total_items: Option<u64>,
}

impl SegmentedStatus {
    /// The status of a call launched by `runtime`, whose family keeps the valid segments'
    /// total size and its check in `total_words`.
    pub(crate) fn new(
        runtime: &KernelRuntime,
        words: Option<StatusWords>,
        total_words: (u32, u32),
    ) -> SegmentedStatus {
        SegmentedStatus {
            words,
            health: Arc::clone(runtime.health()),
            total_words,
        }
    }

    /// The health of the launching runtime's context.
    pub(crate) fn health(&self) -> &ContextHealth {
        &self.health
    }

    /// Reads the status (waits for the stream when the call left words to read: a call with
    /// nothing the device could find wrong returns at once). A kernel fault seen here (the
    /// call's own, or an earlier one's on the context) is [`KernelError::ContextPoisoned`].
    pub fn decode(&self, stream: &Arc<CudaStream>) -> Result<SegmentedReport, KernelError> {
        self.health.check()?;
        let Some(words) = &self.words else {
            // Nothing to read, so nothing to wait for: the outputs are read in stream order.
            return Ok(SegmentedReport {
                violation: None,
                bad_num_segments: None,
                bad_total_items: None,
            });
        };
        let words = words.read(&self.health, stream)?;
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
        let (total, total_bad) = self.total_words;
        let bad_total_items = (word(total_bad) != 0).then_some(word(total));
        Ok(SegmentedReport {
            violation,
            bad_num_segments,
            bad_total_items,
        })
    }
}
