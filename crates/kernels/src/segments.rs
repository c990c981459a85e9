//! The segmented problem's vocabulary that the host and every segmented kernel family share:
//! the layout flags of a launch, the status words its control stages leave, the per-segment
//! descriptors and the codes of the per-segment checks (`cuda/core/segments.cuh` reads them).
//!
//! The violation codes are public: they are what a segmented call's status reports for its
//! smallest invalid segment.
//!
//! ```
//! use oxicub_kernels::segments::{
//!     VIOLATION_OPTION_NOT_COMPILED, VIOLATION_OFFSETS_OUT_OF_ORDER,
//! };
//!
//! assert!(VIOLATION_OFFSETS_OUT_OF_ORDER < VIOLATION_OPTION_NOT_COMPILED);
//! ```

use crate::codegen::device_constants;

device_constants! {
    /// The constants of the segmented problem, declared in every generated kernel.
    pub(crate) static SEGMENT_CONSTANTS;

    /// Flag (`params.flags`): the segments are given by begin and end offsets (else strided).
    pub(crate) const SEGMENT_OFFSETS: u32 = 1;
    /// Flag: strided segments whose sizes are per segment (`params.sizes`).
    pub(crate) const SEGMENT_SIZES_PER_SEGMENT: u32 = 2;
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
}
