//! oxicub-algorithms: oxicub's algorithms, their dispatch, and the backends they run on.
//!
//! * Backends: [`Host`] (rayon; the oracle of every GPU test), [`Cuda`] (a cudarc context and
//!   stream; buffers are cudarc views) and [`AnyBackend`] (picks one at run time:
//!   [`AnyBackend::auto`]). All implement [`Backend`].
//! * [`radix`]: the radix key transforms and radix-digit histograms.
//! * [`topk`]: single-problem top-k (max/min, keys, pairs, source indices) under the
//!   requirement model.
//! * [`batched_topk`]: top-k of many segments in one call (per-segment size, k and direction;
//!   warp, block and multi-block tiers chosen from the static bounds).
//! * [`Error`]: the one error type; argument errors name the argument.
//!
//! ```
//! use oxicub_algorithms::{radix, AnyBackend};
//!
//! let backend = AnyBackend::auto();
//! println!("running on {backend}");
//! let mut codes = [0u32; 2];
//! radix::transform_keys(&backend, &[2.0f32, -2.0][..], &mut codes[..])?;
//! assert!(codes[1] < codes[0]);
//! # Ok::<(), oxicub_algorithms::Error>(())
//! ```

#![deny(missing_docs)]

mod backend;
pub mod batched_topk;
mod error;
pub mod radix;
pub mod topk;

// Owned by the lead: the per-algorithm front checks (parameters x environment).
pub mod contract;

pub use backend::{AnyBackend, Backend, Buffer, Cuda, DeviceKeys, Host};
pub use error::Error;
pub use oxicub_kernels::{DeviceFacts, KernelError};
