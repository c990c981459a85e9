//! Family `batched_topk`: top-k of many segments (`cuda/batched_topk/`; docs/design/
//! batched_topk.md, "Tiers"). The tiers a call launches are chosen by the caller from the
//! static bounds of its parameters ([`BatchedTiers`]); each tier is its own template
//! instantiation, so a call whose bounds exclude a tier never compiles it.
//!
//! * `constants`: the tuning caps and the constants shared with the kernels;
//! * `tiers`: [`BatchedTiers`], which tiers some segment may need;
//! * `kernels`: the family's table, parameter struct and specs ([`BatchedKernel`], [`specs`]);
//! * `call`: what a call gives the launcher ([`BatchedTopKPlan`]) and the status it leaves;
//! * `layout` and `plan`: the stream tier's layouts and the launch plan, pure functions of the
//!   call's shape and the device's limits (unit-tested without a GPU); `split`: long rows run
//!   as two calls of the stream tier;
//! * `listed`: the listed layout's tables, made from the segments' views;
//! * `launch`: [`batched_topk`], which checks, allocates, binds and launches.

mod call;
mod constants;
mod kernels;
mod launch;
mod layout;
mod listed;
mod plan;
mod split;
mod tiers;

pub use super::{DeviceInts, HostOrDevice};
pub use call::{BatchedFill, BatchedLayout, BatchedTopKPlan};
pub use constants::{
    BLOCK_THREADS, SORT_CAP, STREAM_MAX_BYTES, STREAM_MAX_K, STREAM_TIER_ENABLED, WARP_MAX_K,
    WARP_MAX_SIZE,
};
pub(crate) use kernels::TABLE;
pub use kernels::{specs, specs_for, BatchedKernel};
pub use launch::{batched_topk, clustered_launches};
pub use tiers::BatchedTiers;
