//! oxicub-kernels: the CUDA C++ kernel sources of oxicub, their NVRTC compilation and caching,
//! and the launch plumbing.
//!
//! * [`radix`]: the radix key transforms shared by every algorithm ([`RadixKey`]).
//! * [`KernelSpec`]: names one template instantiation of one kernel family; its C++ code and
//!   entry-point name are generated from one table per family.
//! * [`compile_cubin`]: NVRTC to CUBIN for a real architecture, no driver needed.
//! * [`cached_cubin`] / [`CacheConfig`]: in-process and on-disk module cache.
//! * [`segments`]: the segmented problem's flags, status words and violation codes.
//! * [`KernelRuntime`]: loads and launches kernels on one context, with the device's
//!   [`DeviceFacts`].
//! * Typed launchers: [`transform_keys`], [`inverse_transform_keys`], [`digit_histogram`].
//!
//! The CUDA driver and NVRTC are loaded dynamically; when either is missing, the functions that
//! need it return [`KernelError::DriverUnavailable`] / [`KernelError::NvrtcUnavailable`]
//! instead of panicking.
//!
//! ```
//! use oxicub_kernels::{representative_specs, KernelSpec};
//!
//! for spec in representative_specs().iter().take(2) {
//!     println!("{spec} -> {}", spec.entry_name());
//! }
//! ```

#![deny(missing_docs)]

mod cache;
mod codegen;
mod device;
mod error;
pub mod families;
mod nvrtc;
pub mod radix;
mod runtime;
pub mod segments;

pub use cache::{cache_stats, cached_cubin, CacheConfig, CacheStats, CubinOrigin};
pub use codegen::spec::{
    Direction, KernelFamily, KernelSpec, Tier, ValueType, STATIC_SHARED_LIMIT_BYTES,
};
pub use device::{device_count, driver_available, open_context, DeviceFacts};
pub use error::KernelError;
pub use families::digit_histogram::digit_histogram;
pub use families::transform_keys::{inverse_transform_keys, transform_keys, TransformOp};
pub use nvrtc::{compile_cubin, nvrtc_available, nvrtc_version, Arch};
pub use radix::{CountType, HistogramCount, KeyType, RadixBits, RadixDigit, RadixKey};
pub use runtime::{KernelRuntime, LoadedKernel};

/// Digit widths in the representative matrix: the smallest, a nibble, the default byte and
/// the largest supported width.
const REPRESENTATIVE_DIGIT_BITS: [u32; 4] = [1, 4, 8, radix::MAX_DIGIT_BITS];

/// A representative set of the specs that dispatch produces: every key type with every
/// family, every transform direction, both counter types, and the smallest, default and
/// largest digit widths. The compile check compiles all of them.
///
/// ```
/// let specs = oxicub_kernels::representative_specs();
/// assert!(specs.len() >= 12 * 2);
/// ```
pub fn representative_specs() -> Vec<KernelSpec> {
    let mut specs = Vec::new();
    for key in KeyType::ALL {
        for op in [TransformOp::Encode, TransformOp::Decode] {
            specs.push(KernelSpec::transform_keys(key, op));
        }
        for count in [CountType::U32, CountType::U64] {
            for digit_bits in REPRESENTATIVE_DIGIT_BITS {
                specs.push(KernelSpec::digit_histogram(key, digit_bits, count));
            }
        }
    }
    specs
}
