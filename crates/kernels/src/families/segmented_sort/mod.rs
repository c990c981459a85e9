//! Family `segmented_sort`: the seed's segmented mergesort over the whole keys array
//! (`cuda/segmented_sort/`; docs/design/segmented_sort.md, "GPU: segmented mergesort"): the
//! control stages resolve and check every segment, tiles are sorted in shared memory, merge
//! passes move only the segment that spans two runs' interface, and the write stage puts each
//! key (and value, or index) in place.
//!
//! * `constants`: the stages, flags and status words shared with the kernel;
//! * `kernels`: the family's table, parameter struct and specs ([`specs`]);
//! * `call`: what a call asks for ([`SegmentedSortPlan`]);
//! * `plan`: the merge passes, pure functions of the call's size (unit-tested without a GPU);
//! * `launch`: [`segmented_sort`], which checks, allocates, binds and launches.

mod call;
mod constants;
mod kernels;
mod launch;
mod plan;

pub use call::{SegmentedSortPlan, SortLayout, SortStatus};
pub use kernels::specs;
pub(crate) use kernels::TABLE;
pub use launch::segmented_sort;
