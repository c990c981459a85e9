//! The merge passes' statistics of a sort (the seed's `verbose` report).

use std::fmt;

/// What one merge pass did: the tiles it merged (the segment that spans two runs moved
/// through them) and the tiles it copied (nothing moved, but the pass's destination held
/// other entries there); every other tile was left alone (the seed's early exit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergePass {
    /// Tiles merged.
    pub merge_tiles: u64,
    /// Tiles copied.
    pub copy_tiles: u64,
}

/// The merge passes a sort ran on the device, with a `Display` that prints the seed's table
/// (tiles merged and copied per pass, as counts and as percentages of the tiles, their average
/// and their total). A call that ran no merge pass (the host backend, or no segment
/// longer than a tile) has none; on the GPU a tile is a chunk of a long segment (4096 or 16384
/// keys).
///
/// ```
/// use oxicub::segmented_sort::{MergePass, MergeStatistics};
///
/// let stats = MergeStatistics {
///     tiles: 4,
///     passes: vec![MergePass { merge_tiles: 4, copy_tiles: 0 }, MergePass { merge_tiles: 1, copy_tiles: 3 }],
/// };
/// let table = stats.to_string();
/// assert!(table.contains("pass  0:         4 (100.00%)           0 (  0.00%)"));
/// assert!(table.contains("total  :         5 (125.00%)           3 ( 75.00%)"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeStatistics {
    /// The tiles of the sort (each pass visits every one).
    pub tiles: u64,
    /// One entry per merge pass, in order.
    pub passes: Vec<MergePass>,
}

impl MergeStatistics {
    /// Tiles merged and copied over every pass.
    pub fn total(&self) -> MergePass {
        self.passes
            .iter()
            .fold(MergePass::default(), |sum, pass| MergePass {
                merge_tiles: sum.merge_tiles + pass.merge_tiles,
                copy_tiles: sum.copy_tiles + pass.copy_tiles,
            })
    }
}

impl fmt::Display for MergeStatistics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let percent = |tiles: u64| 100.0 * tiles as f64 / self.tiles.max(1) as f64;
        let row = |f: &mut fmt::Formatter<'_>, label: String, merge: u64, copy: u64| {
            writeln!(
                f,
                "{label}:{merge:>10} ({:6.2}%){copy:>12} ({:6.2}%)",
                percent(merge),
                percent(copy)
            )
        };
        if self.passes.is_empty() {
            return writeln!(f, "no merge pass");
        }
        writeln!(f, "                Merge tiles            Copy tiles")?;
        for (i, pass) in self.passes.iter().enumerate() {
            row(f, format!("pass {i:2}"), pass.merge_tiles, pass.copy_tiles)?;
        }
        let total = self.total();
        let n = (self.passes.len() as u64).max(1);
        row(
            f,
            "average".to_owned(),
            total.merge_tiles / n,
            total.copy_tiles / n,
        )?;
        row(f, "total  ".to_owned(), total.merge_tiles, total.copy_tiles)
    }
}
