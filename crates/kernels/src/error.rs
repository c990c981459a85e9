//! The error type of the kernel layer.

use std::path::{Path, PathBuf};

use cudarc::driver::DriverError;
use cudarc::nvrtc::result::NvrtcError;

/// Everything that can go wrong between a [`KernelSpec`](crate::KernelSpec) and a finished
/// launch: missing libraries, NVRTC compile failures, device resource limits, failed driver
/// calls. No CUDA call's result is ignored, and none panics.
///
/// ```
/// use oxicub::kernels::KernelError;
///
/// let err = KernelError::Resources {
///     kernel: "digit_histogram<...>".into(),
///     resource: "threads per block",
///     requested: 2048,
///     limit: 1024,
/// };
/// assert!(err.to_string().contains("threads per block"));
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// The CUDA driver library (`libcuda`) could not be loaded: no driver is installed.
    #[error("the CUDA driver library could not be loaded (tried: {tried})")]
    DriverUnavailable {
        /// The library names that were tried.
        tried: String,
    },
    /// The NVRTC library could not be loaded.
    #[error(
        "the NVRTC library could not be loaded (tried: {tried}); install the CUDA toolkit's \
         NVRTC or the `nvidia-cuda-nvrtc` wheel and put its lib directory on LD_LIBRARY_PATH"
    )]
    NvrtcUnavailable {
        /// The library names that were tried.
        tried: String,
    },
    /// The driver loaded but there is no device with this ordinal.
    #[error("no CUDA device with ordinal {ordinal} ({count} device(s) present)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver reports.
        count: usize,
    },
    /// A CUDA driver API call failed.
    #[error("CUDA driver call `{call}` failed: {source}")]
    Driver {
        /// What was being done.
        call: &'static str,
        /// The driver's error code.
        #[source]
        source: DriverError,
    },
    /// The CUDA context is unusable: a kernel on it faulted (an illegal address, a trap, an
    /// assertion), which leaves a sticky error that every later driver call on the context
    /// returns, for the rest of the process. Reported by the first call of the runtime that
    /// sees it, and by every later call at once; names the kernel the runtime launched last
    /// before the fault was seen (the kernel that faulted, or one launched after it).
    #[error(
        "the CUDA context of device {ordinal} is unusable after a kernel fault ({:?}, seen by \
         `{call}`); the last kernel oxicub launched on it was {}; every later call on this \
         context fails",
        .source.0,
        last_launch_text(.last_launch)
    )]
    ContextPoisoned {
        /// The device ordinal.
        ordinal: usize,
        /// The driver call that first returned the error.
        call: &'static str,
        /// The driver's (sticky) error code.
        #[source]
        source: DriverError,
        /// The spec of the kernel the runtime launched last before the error was seen.
        last_launch: Option<String>,
    },
    /// An NVRTC API call (other than the compilation itself) failed.
    #[error("NVRTC call `{call}` failed: {source}")]
    Nvrtc {
        /// What was being done.
        call: &'static str,
        /// NVRTC's error code.
        #[source]
        source: NvrtcError,
    },
    /// NVRTC rejected a generated kernel: carries the compiler log and the full source. Its
    /// `Display` shows the log and where the source was saved, not the source (a generated
    /// translation unit is some hundred KB).
    #[error(
        "NVRTC failed to compile `{kernel}` for {arch}:\n{log}\n{}",
        saved_source_note(.saved_source.as_deref(), .generated_source.len())
    )]
    Compile {
        /// The kernel instantiation (the spec's `Display`).
        kernel: String,
        /// The target architecture, e.g. `sm_90`.
        arch: String,
        /// NVRTC's program log.
        log: String,
        /// The complete source that was compiled.
        generated_source: String,
        /// The file the source was saved to (new, in the temporary directory, readable by the
        /// user only), or `None` where it could not be written.
        saved_source: Option<PathBuf>,
    },
    /// A kernel needs more of a device resource than the device (or the launch) allows.
    #[error("kernel `{kernel}` needs {requested} {resource}, but at most {limit} are available")]
    Resources {
        /// The kernel instantiation.
        kernel: String,
        /// Which resource, e.g. `"bytes of shared memory per block"`.
        resource: &'static str,
        /// What the kernel asked for.
        requested: u64,
        /// What the device allows.
        limit: u64,
    },
    /// A kernel spec that the kernel family cannot instantiate.
    #[error("invalid kernel spec `{kernel}`: {reason}")]
    InvalidSpec {
        /// The kernel instantiation (or as much of it as could be formed).
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// A radix digit that is not usable (width out of range, offset outside the key).
    #[error("invalid radix digit: {reason}")]
    InvalidDigit {
        /// What is wrong.
        reason: String,
    },
    /// Two buffers (or a buffer and its expected size) disagree in length.
    #[error("buffer `{buffer}` has {actual} elements, expected {expected}")]
    LengthMismatch {
        /// The buffer's name.
        buffer: &'static str,
        /// Its length.
        actual: usize,
        /// The required length.
        expected: usize,
    },
    /// More items than this kernel can count or index.
    #[error("`{buffer}` has {len} elements, more than the {max} this kernel supports ({why})")]
    TooLarge {
        /// The buffer's name.
        buffer: &'static str,
        /// Its length.
        len: u64,
        /// The largest supported length.
        max: u64,
        /// Why the limit exists.
        why: &'static str,
    },
    /// A buffer a launcher would allocate (scratch sized from the call's bounds) is larger than
    /// the device's memory, or than one allocation can be: the call is refused before
    /// anything is allocated.
    #[error(
        "`{buffer}` would need {count} elements of {element_bytes} bytes, more than the \
         {limit} bytes one allocation on this device can hold"
    )]
    AllocationTooLarge {
        /// The buffer's name.
        buffer: &'static str,
        /// The elements it would hold.
        count: u64,
        /// Bytes of an element.
        element_bytes: u64,
        /// The most bytes one allocation may have: the device's memory, at most `isize::MAX`.
        limit: u64,
    },
    /// A caller's workspace is smaller than the call's scratch (the workspace's size comes
    /// from measuring the call: `Cuda::workspace_bytes`).
    #[error(
        "the workspace of {available} bytes is too small: buffer `{buffer}` of this call ends \
         at byte {needed} (measure the call's workspace with `Cuda::workspace_bytes`)"
    )]
    WorkspaceTooSmall {
        /// The buffer that did not fit.
        buffer: &'static str,
        /// The byte its carving would end at (the call may need more after it).
        needed: u64,
        /// The workspace's bytes.
        available: u64,
    },
    /// A view's address is not a multiple of the size of its elements (a listed layout's
    /// segment or values, whose addresses the kernels index by element).
    #[error(
        "`{buffer}[{index}]` at address {address:#x} is not aligned to its {element_bytes}-byte \
         elements"
    )]
    Misaligned {
        /// The list's name.
        buffer: &'static str,
        /// The view's position in the list.
        index: usize,
        /// Its byte address.
        address: u64,
        /// The size of its elements.
        element_bytes: usize,
    },
    /// A buffer belongs to a different CUDA context than the runtime launching the kernel.
    #[error(
        "buffer `{buffer}` belongs to CUDA device {found}, the kernel runs on device {expected}"
    )]
    WrongContext {
        /// The buffer's name.
        buffer: &'static str,
        /// The runtime's device ordinal.
        expected: usize,
        /// The buffer's device ordinal (it may also be another context on the same device).
        found: usize,
    },
}

/// The last line of a compile error's message: where the generated source is.
fn saved_source_note(path: Option<&Path>, source_bytes: usize) -> String {
    match path {
        Some(path) => format!(
            "the generated source ({source_bytes} bytes) is saved in {}",
            path.display()
        ),
        None => format!(
            "the generated source ({source_bytes} bytes) could not be saved; it is in the \
             error's `generated_source`"
        ),
    }
}

/// The kernel a [`KernelError::ContextPoisoned`] names, as its message says it.
fn last_launch_text(kernel: &Option<String>) -> String {
    match kernel {
        Some(kernel) => format!("`{kernel}`"),
        None => "none (the fault came from another library's kernel)".to_owned(),
    }
}

/// Attaches the name of the failing call to a driver error.
pub(crate) trait DriverResultExt<T> {
    fn during(self, call: &'static str) -> Result<T, KernelError>;
}

impl<T> DriverResultExt<T> for Result<T, DriverError> {
    fn during(self, call: &'static str) -> Result<T, KernelError> {
        self.map_err(|source| KernelError::Driver { call, source })
    }
}

/// Attaches the name of the failing call to an NVRTC error.
pub(crate) trait NvrtcResultExt<T> {
    fn during(self, call: &'static str) -> Result<T, KernelError>;
}

impl<T> NvrtcResultExt<T> for Result<T, NvrtcError> {
    fn during(self, call: &'static str) -> Result<T, KernelError> {
        self.map_err(|source| KernelError::Nvrtc { call, source })
    }
}
