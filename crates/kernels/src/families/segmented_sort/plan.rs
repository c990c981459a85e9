//! The segmented sort's launch plan: pure functions of the call's size (unit-tested without a
//! GPU).

use super::constants::SS_TILE;

/// The run widths of the merge passes after the tile sort, in order: SS_TILE, twice that, ...
/// while a run is shorter than the keys; the result is in buffer `widths.len() % 2`.
pub(crate) fn merge_widths(num_keys: u64) -> Vec<u64> {
    let mut widths = Vec::new();
    let mut width = u64::from(SS_TILE);
    while width < num_keys {
        widths.push(width);
        width = width.saturating_mul(2);
    }
    widths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_tile_needs_no_merge_and_each_pass_doubles_the_runs() {
        let tile = u64::from(SS_TILE);
        assert!(merge_widths(0).is_empty());
        assert!(merge_widths(tile).is_empty());
        assert_eq!(merge_widths(tile + 1), [tile]);
        assert_eq!(merge_widths(4 * tile), [tile, 2 * tile]);
        assert_eq!(merge_widths(4 * tile + 1), [tile, 2 * tile, 4 * tile]);
        assert_eq!(merge_widths(u64::MAX).len(), 64 - 10);
    }
}
