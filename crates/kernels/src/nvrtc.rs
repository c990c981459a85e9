//! NVRTC: compile a generated translation unit to a CUBIN for one real architecture.
//!
//! Nothing here touches the CUDA driver: compiling for an explicit [`Arch`] works on a machine
//! with NVRTC and no GPU (that is how CI checks that every kernel variant compiles).

use std::ffi::{c_char, c_int, CString};
use std::fmt;
use std::sync::OnceLock;

use cudarc::nvrtc::{result as nvrtc_result, sys as nvrtc_sys};

use crate::error::NvrtcResultExt;
use crate::{KernelError, KernelSpec};

/// A real GPU architecture (`sm_XY`), the target of an NVRTC compile. Kernels are compiled to
/// SASS for the device's own architecture, so the driver never JIT-compiles PTX.
///
/// ```
/// use oxicub_kernels::Arch;
///
/// assert_eq!(Arch::SM_90.to_string(), "sm_90");
/// assert_eq!(Arch::from_compute_capability(8, 6).to_string(), "sm_86");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch {
    major: u32,
    minor: u32,
}

impl Arch {
    /// Hopper (H100, H200).
    pub const SM_90: Arch = Arch { major: 9, minor: 0 };

    /// The architecture of a device with this compute capability.
    pub const fn from_compute_capability(major: u32, minor: u32) -> Arch {
        Arch { major, minor }
    }

    /// Compute capability `(major, minor)`.
    pub const fn compute_capability(self) -> (u32, u32) {
        (self.major, self.minor)
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}{}", self.major, self.minor)
    }
}

/// The library names cudarc tries for NVRTC, for error messages.
fn nvrtc_candidates() -> String {
    cudarc::get_lib_name_candidates("nvrtc").join(", ")
}

/// Checks that the NVRTC library can be loaded, without panicking when it cannot (cudarc's
/// loader panics on first use of a missing library, so every NVRTC path calls this first).
///
/// ```
/// match oxicub_kernels::nvrtc_available() {
///     Ok(()) => println!("NVRTC present"),
///     Err(e) => println!("{e}"),
/// }
/// ```
pub fn nvrtc_available() -> Result<(), KernelError> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: `is_culib_present` only tries to dlopen the candidate library names; loading
    // NVRTC runs no initialisers with preconditions on our side.
    let present = *PRESENT.get_or_init(|| unsafe { nvrtc_sys::is_culib_present() });
    if present {
        Ok(())
    } else {
        Err(KernelError::NvrtcUnavailable {
            tried: nvrtc_candidates(),
        })
    }
}

/// The NVRTC version `(major, minor)`; part of every cache key.
///
/// ```
/// if let Ok((major, minor)) = oxicub_kernels::nvrtc_version() {
///     println!("NVRTC {major}.{minor}");
/// }
/// ```
pub fn nvrtc_version() -> Result<(i32, i32), KernelError> {
    nvrtc_available()?;
    static VERSION: OnceLock<Result<(i32, i32), KernelError>> = OnceLock::new();
    VERSION
        .get_or_init(|| {
            let (mut major, mut minor): (c_int, c_int) = (0, 0);
            // SAFETY: both pointers are valid for writes of one c_int each.
            unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }
                .result()
                .during("nvrtcVersion")?;
            Ok((major, minor))
        })
        .clone()
}

/// An NVRTC program, destroyed on drop.
struct Program(nvrtc_sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by `create_program` and is destroyed only here. A
        // failure to destroy can only leak host memory, so its result is not propagated.
        let _ = unsafe { nvrtc_result::destroy_program(self.0) };
    }
}

impl Program {
    fn log(&self) -> Result<String, KernelError> {
        // SAFETY: `self.0` is a live program.
        let raw = unsafe { nvrtc_result::get_program_log(self.0) }.during("nvrtcGetProgramLog")?;
        Ok(c_chars_to_string(&raw))
    }

    fn cubin(&self) -> Result<Vec<u8>, KernelError> {
        let mut size: usize = 0;
        // SAFETY: `self.0` is a live, compiled program; `size` is valid for one write.
        unsafe { nvrtc_sys::nvrtcGetCUBINSize(self.0, &mut size) }
            .result()
            .during("nvrtcGetCUBINSize")?;
        let mut cubin = vec![0u8; size];
        // SAFETY: `cubin` has exactly the `size` bytes NVRTC reported for the CUBIN.
        unsafe { nvrtc_sys::nvrtcGetCUBIN(self.0, cubin.as_mut_ptr().cast::<c_char>()) }
            .result()
            .during("nvrtcGetCUBIN")?;
        Ok(cubin)
    }
}

fn c_chars_to_string(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The NVRTC options used for every kernel.
fn compile_options(arch: Arch) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_owned(),
        "--device-as-default-execution-space".to_owned(),
    ]
}

/// Compiles `spec` with NVRTC to a CUBIN (real SASS) for `arch`, without any cache. Does not
/// touch the CUDA driver, so it works on a machine without a GPU.
///
/// On a compile error the returned [`KernelError::Compile`] carries NVRTC's log and the
/// complete generated source.
///
/// ```no_run
/// use oxicub_kernels::{compile_cubin, Arch, KernelSpec, KeyType, TransformOp};
///
/// let spec = KernelSpec::transform_keys(KeyType::F32, TransformOp::Encode);
/// let cubin = compile_cubin(&spec, Arch::SM_90)?;
/// assert!(!cubin.is_empty());
/// # Ok::<(), oxicub_kernels::KernelError>(())
/// ```
pub fn compile_cubin(spec: &KernelSpec, arch: Arch) -> Result<Vec<u8>, KernelError> {
    spec.validate()?;
    compile_source(
        &spec.to_string(),
        &spec.entry_name(),
        spec.generated_source(),
        arch,
    )
}

/// Compiles one translation unit (`kernel` names it in errors, `program_name` is the file name
/// NVRTC reports) to a CUBIN for `arch`.
fn compile_source(
    kernel: &str,
    program_name: &str,
    source: String,
    arch: Arch,
) -> Result<Vec<u8>, KernelError> {
    nvrtc_available()?;
    let invalid = |reason: &str| KernelError::InvalidSpec {
        kernel: kernel.to_owned(),
        reason: reason.to_owned(),
    };
    let c_source = CString::new(source.as_str()).map_err(|_| invalid("source contains NUL"))?;
    let c_name = CString::new(format!("{program_name}.cu"))
        .map_err(|_| invalid("program name contains NUL"))?;
    let program = Program(
        nvrtc_result::create_program(&c_source, Some(&c_name)).during("nvrtcCreateProgram")?,
    );
    // SAFETY: the program is live; the options contain no NUL bytes (they are built from
    // ASCII literals and the architecture's digits).
    let compiled = unsafe { nvrtc_result::compile_program(program.0, &compile_options(arch)) };
    match compiled {
        Ok(()) => program.cubin(),
        Err(err) if err.0 == nvrtc_sys::nvrtcResult::NVRTC_ERROR_COMPILATION => {
            Err(KernelError::Compile {
                kernel: kernel.to_owned(),
                arch: arch.to_string(),
                log: program.log()?,
                generated_source: source,
            })
        }
        Err(source) => Err(KernelError::Nvrtc {
            call: "nvrtcCompileProgram",
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compile_error_carries_log_and_source() {
        if let Err(e) = nvrtc_available() {
            println!("skipped: no NVRTC ({e})");
            return;
        }
        let source = "extern \"C\" __global__ void broken() { undeclared_name = 1; }\n".to_owned();
        match compile_source("broken", "broken", source, Arch::SM_90) {
            Err(KernelError::Compile {
                log,
                generated_source,
                arch,
                ..
            }) => {
                assert!(log.contains("undeclared_name"), "{log}");
                assert!(generated_source.contains("void broken()"));
                assert_eq!(arch, "sm_90");
            }
            other => panic!("expected a compile error, got {other:?}"),
        }
    }

    #[test]
    fn invalid_architecture_is_an_nvrtc_error() {
        if nvrtc_available().is_err() {
            return;
        }
        let spec = KernelSpec::transform_keys(crate::KeyType::U8, crate::TransformOp::Encode);
        let err = compile_cubin(&spec, Arch::from_compute_capability(1, 0));
        assert!(
            matches!(
                err,
                Err(KernelError::Nvrtc {
                    call: "nvrtcCompileProgram",
                    ..
                })
            ),
            "{err:?}"
        );
    }
}
