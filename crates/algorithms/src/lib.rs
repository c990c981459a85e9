//! oxicub-algorithms: oxicub's algorithms, their front checks, and the backends they run on.
//!
//! * Backends: [`Host`] (rayon; the oracle of every GPU test), [`Cuda`] (a cudarc context and
//!   stream; buffers are cudarc views) and [`AnyBackend`] (picks one at run time:
//!   [`AnyBackend::auto`]). All implement [`Backend`]. Where each kind of parameter value lives
//!   on a backend: [`ValuesOn`], [`PerSegmentOn`], [`ChoicesOn`]; values that travel as bytes:
//!   [`DeviceValue`].
//! * [`segments`]: the segmented problem every segmented algorithm shares (layouts, sizes,
//!   counts, per-segment checks, [`segments::Pending`] results).
//! * [`contract`]: the one front check of each algorithm.
//! * [`radix`]: the radix key transforms and radix-digit histograms.
//! * [`topk`]: single-problem top-k (max/min, keys, pairs, source indices) under the
//!   requirement model.
//! * [`batched_topk`]: top-k of many segments in one call (per-segment size, k and direction;
//!   warp, block and multi-block tiers chosen from the static bounds).
//! * [`sharded`]: top-k over rows sharded across ranks (GPUs over NCCL, or host threads), with
//!   the single-device contract.
//! * [`Error`]: the one error type; argument errors name the argument.
//!
//! ```
//! use oxicub::{radix, AnyBackend};
//!
//! let backend = AnyBackend::auto();
//! println!("running on {backend}");
//! let mut codes = [0u32; 2];
//! radix::transform_keys(&backend, &[2.0f32, -2.0][..], &mut codes[..])?;
//! assert!(codes[1] < codes[0]);
//! # Ok::<(), oxicub::Error>(())
//! ```

#![deny(missing_docs)]

mod backend;
pub mod batched_topk;
pub mod contract;
mod error;
pub mod locality_sort;
pub mod radix;
pub mod routing;
pub mod segmented_sort;
pub mod segments;
pub mod sets;
pub mod sharded;
pub mod topk;
mod values;

/// What only this crate may implement or call.
mod sealed {
    /// The supertrait of the public traits whose implementations are oxicub's alone (a
    /// parameter that lied about its values would get past the front check).
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not one of oxicub's types: this trait is implemented by oxicub \
                   alone",
        note = "build parameters from oxicub's modules (`k`, `segment_size`, `num_segments`, \
                `direction`, ...), layouts from `segments`, problems from their constructors"
    )]
    pub trait Sealed {}

    /// The first argument of the public traits' hidden methods: only this crate makes one, so
    /// only its entry points, after their front check, call those methods.
    #[derive(Clone, Copy, Debug)]
    pub struct Token(());

    impl Token {
        pub(crate) const fn new() -> Token {
            Token(())
        }
    }
}

pub use backend::{
    AnyBackend, Backend, Buffer, ChoicesOn, Cuda, DeviceKeys, DeviceValue, DeviceValues, Host,
    PerSegmentOn, ValuesOn, WarmUp, Workspace,
};
#[doc(hidden)]
pub use backend::{ChoiceValues, ChoiceValuesOn, ParamValues, ParamValuesOn};
pub use error::Error;
pub use oxicub_kernels::{DeviceFacts, KernelError};
pub use segments::{Outcome, Pending};
pub use values::SourceIndex;
#[doc(hidden)]
pub use values::ValuesIn;
