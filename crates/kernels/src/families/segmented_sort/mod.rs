//! Family `segmented_sort` (`cuda/segmented_sort/`; docs/design/segmented_sort.md): the control
//! stages resolve and check every segment; keys of at most 32 bits then take the register path
//! (segments binned by size class, sorted a block at a time in registers, long ones in chunks
//! joined by merge passes with the seed's early exit), and 64-bit keys the seed's whole-array
//! segmented mergesort.
//!
//! * `constants`: the stages, flags and status words shared with the kernel;
//! * `kernels`: the family's table, parameter struct and specs ([`specs`]);
//! * `call`: what a call asks for ([`SegmentedSortPlan`]);
//! * `plan`: the path and the merge passes, pure functions of the call (unit-tested without a
//!   GPU);
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
