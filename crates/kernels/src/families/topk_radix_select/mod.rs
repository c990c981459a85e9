//! Family `topk_radix_select`: single-problem top-k by MSB-first radix select
//! (`cuda/topk_radix_select/`; docs/design/topk.md, "Radix select"). One kernel whose stages are
//! launched back to back on one stream, with the fast path's sample and prefilter compiled
//! apart.
//!
//! * `constants`: the fast path's and the rank sort's tuning, and the constants shared with the
//!   kernel;
//! * `kernels`: the family's table, parameter struct and specs ([`specs`]);
//! * `call`: what a call asks for ([`TopKPlan`]);
//! * `plan`: the launch plan, pure functions of the call's shape (unit-tested without a GPU);
//! * `launch`: [`topk_radix_select`], which checks, allocates, binds and launches.

mod call;
mod constants;
mod kernels;
mod launch;
mod plan;

pub use call::{TopKPlan, TopKStatus};
pub use kernels::specs;
pub(crate) use kernels::TABLE;
pub use launch::topk_radix_select;
