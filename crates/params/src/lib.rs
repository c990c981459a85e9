//! # oxicub-params: what a caller knows about each parameter
//!
//! oxicub's algorithms take their numeric parameters (`k`, `segment_sizes`, `num_segments`,
//! `num_items`) and discrete ones (select direction, sort order) as *types* that say where the
//! value comes from and what is known about it:
//!
//! - a compile-time constant ([`Static`]),
//! - one runtime host value with compile-time bounds ([`Uniform`]),
//! - one value per segment with compile-time and optional runtime bounds ([`PerSegment`]),
//! - one value that only the device holds, read in stream order ([`Deferred`]),
//! - a discrete option set, fixed or chosen at run time or per segment ([`direction`], [`order`]),
//! - guarantees that bound a parameter or size temporary storage ([`guarantee`]).
//!
//! Every numeric parameter carries its *role* ([`role`]), so each argument has its own module of
//! constructors and a value built for one argument cannot be passed as another:
//!
//! ```
//! use oxicub::params::{k, segment_size, num_segments, Param};
//!
//! let k = k::Static::<8>::new();                          // MoE routing: k known at compile time
//! let size = segment_size::Uniform::<64, 256>::new(128)?; // experts per token, bounded
//! let n = num_segments::uniform(16_384)?;                 // tokens
//! // Dispatch reads the static bounds in const context to choose which kernels exist.
//! const SMALL_K: bool = <k::Static<8> as Param>::STATIC_MAX <= 8;
//! assert!(SMALL_K);
//! # let _ = (k, size, n);
//! # Ok::<(), oxicub::params::ParamError>(())
//! ```
//!
//! Static bounds are checked at compile time (`k::Uniform<9, 8>` does not build); runtime values
//! and bounds are checked on construction and rejected with a [`ParamError`] that names the
//! parameter, the value and the bound.

#![warn(missing_docs)]

mod bounds;
mod discrete;
mod error;
pub mod guarantee;
mod numeric;
pub mod role;

pub use bounds::Bounds;
pub use discrete::{
    direction, order, Choice, Discrete, DiscreteParam, DiscreteParamFor, OptionSet,
    PerSegmentChoice, SelectDirection, SortOrder,
};
pub use error::{BoundOrigin, ParamError};
pub use guarantee::Guarantee;
pub use numeric::{
    experts, groups, k, num_items, num_segments, segment_size, top_groups, Deferred, HostValue,
    Param, ParamFor, ParamKind, PerSegment, SingleValue, Static, Uniform,
};
