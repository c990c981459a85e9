//! The segmented sort's launch plan: pure functions of the call's size (unit-tested without a
//! GPU).

use super::constants::{BLOCK_THREADS, SS_ITEMS, SS_TILE, WIDE_BLOCK_THREADS};

/// The run widths of the merge passes after the tile sort, in order: `tile`, twice that, ...
/// while a run is shorter than `longest` keys (the largest segment, or every key); the result is
/// in buffer `widths.len() % 2`.
pub(crate) fn merge_widths(tile: u64, longest: u64) -> Vec<u64> {
    let mut widths = Vec::new();
    let mut width = tile;
    while width < longest {
        widths.push(width);
        width = width.saturating_mul(2);
    }
    widths
}

/// The keys a register-path block sorts at once (the largest short segment, and a long
/// segment's chunk) with `threads` threads: SS_ITEMS a thread.
pub(crate) const fn register_tile(threads: u32) -> u64 {
    threads as u64 * SS_ITEMS as u64
}

/// How a call sorts (docs/design/segmented_sort.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SortPath {
    /// Keys of at most 32 bits, segments below 2^32 keys, every segment of one known size that
    /// fits a tile: a block sorts `tile / span` segments at a time in registers.
    RegisterUniform {
        /// The smallest power of two holding a segment.
        span: u64,
        /// Threads per block (the tile: SS_ITEMS keys a thread).
        threads: u32,
    },
    /// Keys of at most 32 bits, segments below 2^32 keys: segments binned by size class, short
    /// ones sorted in registers a batch at a time, long ones a chunk at a time and merged.
    RegisterClasses {
        /// Threads per block (the tile: SS_ITEMS keys a thread).
        threads: u32,
    },
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
/// `uniform` when every segment has that one size. The register path takes blocks of
/// BLOCK_THREADS, or of WIDE_BLOCK_THREADS (a 16384-key tile in 139 KiB of shared memory, one
/// block an SM) when a segment is longer than the narrow tile and the device's shared memory
/// per block holds it (`wide_fits`; not below sm_90's 227 KiB, where the narrow tile takes
/// more merge passes): each doubling of the tile replaces a merge pass through global memory
/// by a merge round in shared memory.
pub(crate) fn sort_path(key_bits: u32, largest: u64, uniform: bool, wide_fits: bool) -> SortPath {
    let span = largest.max(1).next_power_of_two();
    if key_bits <= 32 && largest < 1 << 32 {
        let threads = if wide_fits && largest > register_tile(BLOCK_THREADS) {
            WIDE_BLOCK_THREADS
        } else {
            BLOCK_THREADS
        };
        if uniform && largest <= register_tile(threads) {
            SortPath::RegisterUniform { span, threads }
        } else {
            SortPath::RegisterClasses { threads }
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
        assert!(merge_widths(tile, 0).is_empty());
        assert!(merge_widths(tile, tile).is_empty());
        assert_eq!(merge_widths(tile, tile + 1), [tile]);
        assert_eq!(merge_widths(tile, 4 * tile), [tile, 2 * tile]);
        assert_eq!(merge_widths(tile, 4 * tile + 1), [tile, 2 * tile, 4 * tile]);
        assert_eq!(merge_widths(tile, u64::MAX).len(), 64 - 10);
    }

    #[test]
    fn narrow_keys_take_the_register_path() {
        let (narrow, wide) = (BLOCK_THREADS, WIDE_BLOCK_THREADS);
        let tile = register_tile(narrow);
        let uniform = |span, threads| SortPath::RegisterUniform { span, threads };
        let classes = |threads| SortPath::RegisterClasses { threads };
        assert_eq!(tile, 4096);
        assert_eq!(register_tile(wide), 16384);
        assert_eq!(sort_path(32, 64, true, true), uniform(64, narrow));
        assert_eq!(sort_path(16, 1000, true, true), uniform(1024, narrow));
        assert_eq!(sort_path(8, 0, true, true), uniform(1, narrow));
        assert_eq!(sort_path(32, tile + 1, true, true), uniform(2 * tile, wide));
        assert_eq!(sort_path(32, 16384, true, true), uniform(16384, wide));
        assert_eq!(sort_path(32, 16385, true, true), classes(wide));
        assert_eq!(sort_path(32, 64, false, true), classes(narrow));
        assert_eq!(sort_path(32, tile, false, true), classes(narrow));
        assert_eq!(sort_path(32, tile + 1, false, true), classes(wide));
        assert_eq!(sort_path(32, 1 << 32, false, true), SortPath::Mergesort);
        assert_eq!(
            sort_path(64, 1000, false, true),
            SortPath::SharedSmall { span: 1024 }
        );
        assert_eq!(sort_path(64, 1025, true, true), SortPath::Mergesort);
        // A device whose shared memory per block cannot hold the wide tile: the narrow one.
        assert_eq!(sort_path(32, 16384, true, false), classes(narrow));
        assert_eq!(sort_path(32, tile + 1, false, false), classes(narrow));
        assert_eq!(sort_path(32, 64, true, false), uniform(64, narrow));
    }
}
