//! oxicub-kernels: the CUDA C++ kernel sources of oxicub, their NVRTC compilation and caching,
//! and the launch plumbing.
//!
//! * [`radix`]: the radix key transforms shared by every algorithm ([`RadixKey`]).
//! * [`KernelSpec`]: names one template instantiation of one kernel family; its C++ code and
//!   entry-point name are generated from one table per family.
//! * [`compile_cubin`]: NVRTC to CUBIN for a real architecture, no driver needed.
//! * [`cached_cubin`] / [`CacheConfig`]: in-process and on-disk module cache (what the disk
//!   cache trusts and checks: SECURITY.md).
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
//! use oxicub::kernels::{representative_specs, KernelSpec};
//!
//! for spec in representative_specs().iter().take(2) {
//!     println!("{spec} -> {}", spec.entry_name());
//! }
//! ```

#![deny(missing_docs)]

mod cache;
mod codegen;
mod culib;
mod device;
mod error;
pub mod families;
mod health;
pub mod math;
mod nvrtc;
pub mod radix;
mod runtime;
pub mod segments;

pub use cache::{
    cache_stats, cached_cubin, disk_cache_refusal, CacheConfig, CacheStats, CubinOrigin,
};
pub use codegen::spec::{Direction, KernelSpec, Tier, ValueType, STATIC_SHARED_LIMIT_BYTES};
pub use device::{device_count, driver_available, open_context, DeviceFacts};
pub use error::KernelError;
pub use families::digit_histogram::digit_histogram;
pub use families::scratch::{DeviceWorkspace, Scratch, StatusWords};
pub use families::transform_keys::{inverse_transform_keys, transform_keys, TransformOp};
pub use families::{all_specs, KernelFamily};
pub use nvrtc::{compile_cubin, nvrtc_available, nvrtc_version, Arch};
pub use radix::{CountType, HistogramCount, KeyType, RadixBits, RadixDigit, RadixKey};
pub use runtime::{KernelRuntime, LoadedKernel};

/// A representative set of the specs that dispatch produces for the radix primitives: every
/// key type with every transform direction, and with both counter types and the smallest, a
/// nibble's, the default and the largest digit widths (the families' [`KernelFamily::specs`]).
/// The compile check compiles them with every other family's specs.
///
/// ```
/// let specs = oxicub::kernels::representative_specs();
/// assert!(specs.len() >= 12 * 2);
/// ```
pub fn representative_specs() -> Vec<KernelSpec> {
    let mut specs = families::transform_keys::specs();
    specs.extend(families::digit_histogram::specs());
    specs
}
