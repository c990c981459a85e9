//! # oxicub
//!
//! GPU data-parallel primitives for segmented and batched work (top-k selection, segmented
//! sort, multiset operations) on NVIDIA GPUs, with a host backend that runs anywhere.
//!
//! What a caller knows about each parameter and what it requires of the result are types:
//!
//! ```
//! use oxicub::{require, determinism, output_ordering, k, num_segments, segment_size, direction};
//! use oxicub::guarantee::MaxK;
//!
//! // MoE routing over 256 experts: k is static, so no large-k kernel is ever compiled.
//! let env = require!(determinism::RunToRun, output_ordering::Sorted).guarantee(MaxK::<8>::new());
//! let checked = oxicub::contract::batched_topk(
//!     &segment_size::Static::<256>::new(),
//!     &k::Static::<8>::new(),
//!     &direction::Max,
//!     &num_segments::uniform(16_384)?,
//!     &env,
//! )?;
//! assert_eq!(checked.k_static.max, 8);
//! # Ok::<(), oxicub::ParamError>(())
//! ```
//!
//! The crates behind the facade: [`params`] (parameter kinds and bounds), [`env`](mod@env) (requirements,
//! guarantees) and the algorithms with their backends: [`topk`], [`batched_topk`], the
//! segmented problem they share ([`segments`]), and each algorithm's front check
//! ([`contract`]).

#![warn(missing_docs)]

#[cfg(feature = "candle")]
pub mod candle;
pub use oxicub_env as env;
/// The kernels' layer: specs, the runtime, the compile cache, the launchers (every type the
/// algorithms' signatures mention is nameable from `oxicub`).
pub use oxicub_kernels as kernels;
pub use oxicub_params as params;

pub use oxicub_env::{
    determinism, output_ordering, require, tie_break, Determinism, Env, Environment,
    OutputOrdering, Requirements, Resolved, TieBreak,
};
pub use oxicub_params::{
    direction, guarantee, k, num_items, num_segments, order, role, segment_size, Bounds, Deferred,
    Param, ParamError, ParamKind, PerSegment, SelectDirection, SortOrder, Static, Uniform,
};

/// Whether the CUDA driver library can be loaded (cudarc's loader panics when it cannot: ask
/// this first before touching cudarc's driver API yourself).
pub use oxicub_kernels::driver_available;

pub use oxicub_algorithms::{
    batched_topk, contract, locality_sort, radix, routing, segmented_sort, segments, sets, sharded,
    topk, AnyBackend, Backend, Buffer, ChoicesOn, Cuda, DeviceFacts, DeviceKeys, DeviceValue,
    DeviceValues, Error, Host, KernelError, Outcome, Pending, PerSegmentOn, SourceIndex, ValuesOn,
    WarmUp, Workspace,
};

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
