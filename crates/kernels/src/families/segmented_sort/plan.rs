//! The segmented sort's launch plan: pure functions of the call's size (unit-tested without a
//! GPU).

use super::constants::{SS_BLOCK_TILE, SS_TILE};

/// The run widths of the merge passes after the tile sort, in order: `tile`, twice that, ...
/// while a run is shorter than `longest` keys (the largest segment, or every key); the result is
/// in buffer `widths.len() % 2`.
pub(crate) fn merge_widths(tile: u32, longest: u64) -> Vec<u64> {
    let mut widths = Vec::new();
    let mut width = u64::from(tile);
    while width < longest {
        widths.push(width);
        width = width.saturating_mul(2);
    }
    widths
}

/// How a call sorts (docs/design/segmented_sort.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SortPath {
    /// Keys of at most 32 bits, segments below 2^32 keys, every segment of one known size of at
    /// most SS_BLOCK_TILE: a block sorts `SS_BLOCK_TILE / span` segments at a time in registers.
    RegisterUniform {
        /// The smallest power of two holding a segment.
        span: u64,
    },
    /// Keys of at most 32 bits, segments below 2^32 keys: segments binned by size class, short
    /// ones sorted in registers a batch at a time, long ones a chunk at a time and merged.
    RegisterClasses,
    /// Other keys whose segments all fit SS_TILE: a block per batch of segments in shared
    /// memory.
    SharedSmall {
        /// The smallest power of two holding the largest segment.
        span: u64,
    },
    /// Other keys: the whole-array segmented mergesort.
    Mergesort,
}

/// The path for keys of `key_bits` bits whose largest segment is at most `largest` keys,
/// `uniform` when every segment has that one size.
pub(crate) fn sort_path(key_bits: u32, largest: u64, uniform: bool) -> SortPath {
    let span = largest.max(1).next_power_of_two();
    if key_bits <= 32 && largest < 1 << 32 {
        if uniform && largest <= u64::from(SS_BLOCK_TILE) {
            SortPath::RegisterUniform { span }
        } else {
            SortPath::RegisterClasses
        }
    } else if largest <= u64::from(SS_TILE) {
        SortPath::SharedSmall { span }
    } else {
        SortPath::Mergesort
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_tile_needs_no_merge_and_each_pass_doubles_the_runs() {
        let tile = u64::from(SS_TILE);
        assert!(merge_widths(SS_TILE, 0).is_empty());
        assert!(merge_widths(SS_TILE, tile).is_empty());
        assert_eq!(merge_widths(SS_TILE, tile + 1), [tile]);
        assert_eq!(merge_widths(SS_TILE, 4 * tile), [tile, 2 * tile]);
        assert_eq!(
            merge_widths(SS_TILE, 4 * tile + 1),
            [tile, 2 * tile, 4 * tile]
        );
        assert_eq!(merge_widths(SS_TILE, u64::MAX).len(), 64 - 10);
    }

    #[test]
    fn narrow_keys_take_the_register_path() {
        let tile = u64::from(SS_BLOCK_TILE);
        assert_eq!(
            sort_path(32, 64, true),
            SortPath::RegisterUniform { span: 64 }
        );
        assert_eq!(
            sort_path(16, 1000, true),
            SortPath::RegisterUniform { span: 1024 }
        );
        assert_eq!(sort_path(8, 0, true), SortPath::RegisterUniform { span: 1 });
        assert_eq!(sort_path(32, tile + 1, true), SortPath::RegisterClasses);
        assert_eq!(sort_path(32, 64, false), SortPath::RegisterClasses);
        assert_eq!(sort_path(32, 1 << 32, false), SortPath::Mergesort);
        assert_eq!(
            sort_path(64, 1000, false),
            SortPath::SharedSmall { span: 1024 }
        );
        assert_eq!(sort_path(64, 1025, true), SortPath::Mergesort);
    }
}
