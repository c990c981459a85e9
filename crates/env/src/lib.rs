//! # oxicub-env: what a caller requires of a result, and what it guarantees
//!
//! An [`Env`] holds three requirement slots, a list of guarantees and a stream:
//!
//! - determinism: [`determinism::NotGuaranteed`], [`determinism::RunToRun`], [`determinism::GpuToGpu`];
//! - tie-break: [`tie_break::Unspecified`], [`tie_break::PreferSmallerIndex`], [`tie_break::PreferLargerIndex`];
//! - output ordering: [`output_ordering::Unsorted`], [`output_ordering::Sorted`], [`output_ordering::StableSorted`].
//!
//! Determinism (refined by a tie-break) decides *which* items are selected; output ordering
//! decides *how* that fixed set is laid out. When nothing is required the committed default
//! contract applies: `gpu_to_gpu`, `prefer_smaller_index`, `stable_sorted`; the same items in the
//! same positions, run after run and GPU to GPU. Weaker requirements opt into faster paths.
//!
//! ```
//! use oxicub::env::{require, determinism, tie_break, output_ordering, Requirements};
//!
//! // The seeds' worked example row "run_to_run, prefer_larger_index" with sorted output.
//! let env = require!(
//!     determinism::RunToRun,
//!     tie_break::PreferLargerIndex,
//!     output_ordering::Sorted,
//! );
//! let r = env.resolved();
//! assert!(r.pins_result_set() && !r.pins_output());
//! ```
//!
//! Invalid combinations do not compile, and the message names the fix:
//!
//! ```compile_fail
//! use oxicub::env::{require, determinism, tie_break};
//! // a tie-break only means something when the result set is deterministic
//! let env = require!(determinism::NotGuaranteed, tie_break::PreferSmallerIndex);
//! ```
//!
//! ```compile_fail
//! use oxicub::env::{require, output_ordering};
//! // each requirement is given once
//! let env = require!(output_ordering::Sorted, output_ordering::Unsorted);
//! ```
//!
//! Guarantees (option 2 of the parameter proposal) bound parameters from the environment; they
//! merge with the parameters' own bounds and the tightest wins ([`Env::bounds_of`]).

#![warn(missing_docs)]

mod env;
mod guarantees;
mod requirement;

pub use env::{
    AcceptsTieBreak, DeterminismNotYetRequired, Env, Environment, OrderingNotYetRequired, Place,
    Requirements, ResolveDeterminism, ResolveOrdering, ResolveTieBreak, Resolved,
    TieBreakAllowedWith, TieBreakNotYetRequired,
};
pub use guarantees::{merged_bounds, merged_static_bounds, Guarantees};
pub use requirement::{
    determinism, output_ordering, slot, tie_break, Determinism, DeterminismRequirement,
    OrderingRequirement, OutputOrdering, Requirement, TieBreak, TieBreakRequirement, Unset,
};

/// The type of a guarantee list, for naming it in const context:
/// `HList!(MaxK<8>, MaxSegmentSize<256>)` (frunk's HList macro).
pub use frunk::HList;

/// Builds an environment from requirements, in any order:
/// `require!(determinism::RunToRun, output_ordering::Sorted)`.
///
/// `require!()` is the empty environment (the default contract). Each requirement may appear
/// once, and a tie-break needs a deterministic result set; both are checked at compile time.
///
/// ```
/// use oxicub::env::{require, output_ordering, tie_break, Requirements, Determinism, TieBreak};
///
/// let env = require!(output_ordering::Unsorted, tie_break::PreferLargerIndex);
/// assert_eq!(env.resolved().determinism, Determinism::GpuToGpu);
/// assert_eq!(env.resolved().tie_break, TieBreak::PreferLargerIndex);
/// ```
#[macro_export]
macro_rules! require {
    ($($requirement:expr),* $(,)?) => {
        $crate::Env::new()$(.with($requirement))*
    };
}
