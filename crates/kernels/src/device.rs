//! The CUDA driver: checking that it is present, opening a device, reading device facts.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::CudaContext;

use crate::error::DriverResultExt;
use crate::nvrtc::Arch;
use crate::{KernelError, KernelSpec};

/// Checks that the CUDA driver library can be loaded, without panicking when it cannot
/// (cudarc's loader panics on first use of a missing library, so every driver path calls this
/// first).
///
/// ```
/// match oxicub::kernels::driver_available() {
///     Ok(()) => println!("CUDA driver present"),
///     Err(e) => println!("{e}"),
/// }
/// ```
pub fn driver_available() -> Result<(), KernelError> {
    static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *PRESENT.get_or_init(|| crate::culib::loads("cuda")) {
        Ok(())
    } else {
        Err(KernelError::DriverUnavailable {
            tried: crate::culib::lib_name_candidates("cuda").join(", "),
        })
    }
}

/// Number of CUDA devices (0 when the driver loads but finds no device).
///
/// ```
/// let count = oxicub::kernels::device_count().unwrap_or(0);
/// println!("{count} CUDA device(s)");
/// ```
pub fn device_count() -> Result<usize, KernelError> {
    driver_available()?;
    match CudaContext::device_count() {
        Ok(count) => Ok(usize::try_from(count).unwrap_or(0)),
        // cuInit reports "no device" as an error; that is a count of zero.
        Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_NO_DEVICE => Ok(0),
        Err(source) => Err(KernelError::Driver {
            call: "cuDeviceGetCount",
            source,
        }),
    }
}

/// Opens (retains) the primary context of device `ordinal`, after checking that the driver is
/// present and the device exists.
///
/// ```no_run
/// let ctx = oxicub::kernels::open_context(0)?;
/// println!("{}", ctx.ordinal());
/// # Ok::<(), oxicub::kernels::KernelError>(())
/// ```
pub fn open_context(ordinal: usize) -> Result<Arc<CudaContext>, KernelError> {
    let count = device_count()?;
    if ordinal >= count {
        return Err(KernelError::NoDevice { ordinal, count });
    }
    CudaContext::new(ordinal).during("cuDevicePrimaryCtxRetain")
}

/// Facts about a device that dispatch needs, read once per context.
///
/// ```no_run
/// use oxicub::kernels::{open_context, DeviceFacts};
///
/// let facts = DeviceFacts::read(&open_context(0)?)?;
/// println!("{} ({}): {} SMs, {} B L2", facts.name, facts.arch, facts.sm_count, facts.l2_bytes);
/// # Ok::<(), oxicub::kernels::KernelError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceFacts {
    /// The device ordinal.
    pub ordinal: usize,
    /// The device name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// The architecture (from the compute capability); kernels are compiled for it.
    pub arch: Arch,
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// Maximum threads per block.
    pub max_threads_per_block: u32,
    /// Maximum resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Maximum grid size in x.
    pub max_grid_x: u32,
    /// Shared memory per block without opt-in, in bytes.
    pub shared_per_block: u32,
    /// Shared memory per block with opt-in (dynamic shared memory), in bytes.
    pub shared_per_block_optin: u32,
    /// Shared memory per SM, in bytes.
    pub shared_per_sm: u32,
    /// L2 cache size, in bytes.
    pub l2_bytes: u32,
    /// The device's memory, in bytes: no buffer a launcher allocates may be larger.
    pub total_memory: u64,
    /// Threads per warp.
    pub warp_size: u32,
    /// The driver's CUDA version, 1000 * major + 10 * minor (e.g. 12080 for 12.8): launch
    /// features newer than the driver are not used (cuLaunchKernelEx needs 12.0).
    pub driver_version: u32,
}

impl DeviceFacts {
    /// Reads the facts of the context's device.
    pub fn read(ctx: &Arc<CudaContext>) -> Result<DeviceFacts, KernelError> {
        let attr = |attribute: Attr| -> Result<u32, KernelError> {
            let value = ctx.attribute(attribute).during("cuDeviceGetAttribute")?;
            Ok(u32::try_from(value).unwrap_or(0))
        };
        let mut driver_version = 0i32;
        // SAFETY: cuDriverGetVersion writes one int through the pointer, which is valid for
        // the call; the library is loaded (the context exists).
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) }
            .result()
            .during("cuDriverGetVersion")?;
        let major = attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        Ok(DeviceFacts {
            ordinal: ctx.ordinal(),
            name: ctx.name().during("cuDeviceGetName")?,
            arch: Arch::from_compute_capability(major, minor),
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            max_threads_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_threads_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
            max_grid_x: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            shared_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            shared_per_block_optin: attr(
                Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
            shared_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
            total_memory: ctx.total_mem().during("cuDeviceTotalMem")? as u64,
            warp_size: attr(Attr::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            driver_version: u32::try_from(driver_version).unwrap_or(0),
        })
    }
}

impl DeviceFacts {
    /// Whether launches can carry attributes (clusters, programmatic dependencies): sm_90 and
    /// later, with cuLaunchKernelEx (a CUDA 12.0 driver or newer).
    pub fn launches_with_attributes(&self) -> bool {
        self.arch.compute_capability().0 >= 9 && self.driver_version >= 12_000
    }
}

/// The limits of a device that decide which kernels a call may launch (a launch plan's input,
/// so the plans are pure and tested for every architecture without its GPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeviceLimits {
    /// Bytes of shared memory a block may have, static and dynamic (with opt-in).
    pub(crate) shared_per_block: u64,
    /// Whether the device launches clusters (sm_90 or later with a CUDA 12 driver).
    pub(crate) clusters: bool,
}

impl DeviceLimits {
    /// The limits of the device these facts describe.
    pub(crate) fn of(facts: &DeviceFacts) -> DeviceLimits {
        DeviceLimits {
            shared_per_block: u64::from(facts.shared_per_block_optin),
            clusters: facts.launches_with_attributes(),
        }
    }

    /// Whether a block of `spec` with `dynamic_shared_bytes` of dynamic shared memory (and its
    /// static shared memory) fits the device's per-block limit.
    pub(crate) fn fits(&self, spec: &KernelSpec, dynamic_shared_bytes: u32) -> bool {
        u64::from(dynamic_shared_bytes) + spec.static_shared_bytes() <= self.shared_per_block
    }
}
