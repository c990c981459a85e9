//! NVRTC: compile a generated translation unit to a CUBIN for one real architecture.
//!
//! Nothing here touches the CUDA driver: compiling for an explicit [`Arch`] works on a machine
//! with NVRTC and no GPU (that is how CI checks that every kernel variant compiles).

use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, CString};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cudarc::nvrtc::{result as nvrtc_result, sys as nvrtc_sys};

use crate::error::NvrtcResultExt;
use crate::{KernelError, KernelSpec};

/// A real GPU architecture (`sm_XY`), the target of an NVRTC compile. Kernels are compiled to
/// SASS for the device's own architecture, so the driver never JIT-compiles PTX.
///
/// ```
/// use oxicub::kernels::Arch;
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
    crate::culib::lib_name_candidates("nvrtc").join(", ")
}

/// Checks that the NVRTC library can be loaded, without panicking when it cannot (cudarc's
/// loader panics on first use of a missing library, so every NVRTC path calls this first).
///
/// ```
/// match oxicub::kernels::nvrtc_available() {
///     Ok(()) => println!("NVRTC present"),
///     Err(e) => println!("{e}"),
/// }
/// ```
pub fn nvrtc_available() -> Result<(), KernelError> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    if *PRESENT.get_or_init(|| crate::culib::loads("nvrtc")) {
        Ok(())
    } else {
        Err(KernelError::NvrtcUnavailable {
            tried: nvrtc_candidates(),
        })
    }
}

/// The NVRTC version `(major, minor)`; part of every cache key (with the library files, see
/// `nvrtc_identity`).
///
/// ```
/// if let Ok((major, minor)) = oxicub::kernels::nvrtc_version() {
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

/// What identifies the NVRTC build in use, for the cache key: `nvrtcVersion`'s major.minor
/// (NVRTC reports no patch level or build number) and the library files, each `libnvrtc`
/// mapped into this process and the `libnvrtc-builtins` files beside it (which `libnvrtc`
/// loads when it compiles), by path, size and modification time. Where the mapped files cannot
/// be listed (no `/proc/self/maps`), it says so and the version stands alone.
pub(crate) fn nvrtc_identity() -> Result<String, KernelError> {
    // After nvrtcVersion the library stays loaded for the life of the process, so the files
    // mapped now are the ones every compile uses.
    let (major, minor) = nvrtc_version()?;
    static FILES: OnceLock<String> = OnceLock::new();
    let files = FILES.get_or_init(|| match std::fs::read_to_string("/proc/self/maps") {
        Ok(maps) => nvrtc_library_files(&maps),
        Err(e) => format!("library files not identified (/proc/self/maps: {e})"),
    });
    Ok(format!("{major}.{minor}; {files}"))
}

/// The `libnvrtc` files named in a `/proc/self/maps` listing and the `libnvrtc-builtins`
/// files beside them, each with its size and modification time.
fn nvrtc_library_files(maps: &str) -> String {
    let file_name = |path: &Path| {
        path.file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let is_builtins = |path: &Path| file_name(path).starts_with("libnvrtc-builtins");
    let is_nvrtc = |path: &Path| file_name(path).starts_with("libnvrtc") && !is_builtins(path);
    // A mapping's path is the rest of the line from its first '/': the fields before it (the
    // address range, permissions, offset, device, inode) have none.
    let libraries: BTreeSet<PathBuf> = maps
        .lines()
        .filter_map(|line| line.find('/').map(|at| PathBuf::from(&line[at..])))
        .filter(|path| is_nvrtc(path))
        .collect();
    if libraries.is_empty() {
        return "library files not identified (no libnvrtc mapped)".to_owned();
    }
    let mut files = libraries.clone();
    for library in &libraries {
        let beside = library.parent().and_then(|dir| std::fs::read_dir(dir).ok());
        files.extend(
            beside
                .into_iter()
                .flatten()
                .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                .filter(|path| is_builtins(path)),
        );
    }
    let describe = |path: &PathBuf| match std::fs::metadata(path) {
        Ok(meta) => {
            let modified = meta
                .modified()
                .ok()
                .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or_else(
                    || "unknown".to_owned(),
                    |since| format!("{}.{:09}", since.as_secs(), since.subsec_nanos()),
                );
            format!(
                "{} ({} bytes, modified {modified})",
                path.display(),
                meta.len()
            )
        }
        Err(e) => format!("{} ({e})", path.display()),
    };
    files.iter().map(describe).collect::<Vec<_>>().join("; ")
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

/// The NVRTC options used for every kernel (part of every cache key).
pub(crate) fn compile_options(arch: Arch) -> Vec<String> {
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
/// complete generated source, which is also saved to a new file in the temporary directory
/// (its `Display` shows the log and names that file).
///
/// ```no_run
/// use oxicub::kernels::{compile_cubin, Arch, KernelSpec, KeyType, TransformOp};
///
/// let spec = KernelSpec::transform_keys(KeyType::F32, TransformOp::Encode);
/// let cubin = compile_cubin(&spec, Arch::SM_90)?;
/// assert!(!cubin.is_empty());
/// # Ok::<(), oxicub::kernels::KernelError>(())
/// ```
pub fn compile_cubin(spec: &KernelSpec, arch: Arch) -> Result<Vec<u8>, KernelError> {
    spec.validate()?;
    compile_source(
        &spec.to_string(),
        &spec.entry_name(),
        spec.generated_source(),
        arch,
        &compile_options(arch),
    )
}

/// Compiles one translation unit (`kernel` names it in errors, `program_name` is the file name
/// NVRTC reports) to a CUBIN for `arch` with NVRTC `options` ([`compile_options`]).
pub(crate) fn compile_source(
    kernel: &str,
    program_name: &str,
    source: String,
    arch: Arch,
    options: &[String],
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
    if options.iter().any(|option| option.contains('\0')) {
        return Err(invalid("an NVRTC option contains NUL"));
    }
    // SAFETY: the program is live; the options contain no NUL bytes (checked above).
    let compiled = unsafe { nvrtc_result::compile_program(program.0, options) };
    match compiled {
        Ok(()) => program.cubin(),
        Err(err) if err.0 == nvrtc_sys::nvrtcResult::NVRTC_ERROR_COMPILATION => {
            Err(KernelError::Compile {
                kernel: kernel.to_owned(),
                arch: arch.to_string(),
                log: program.log()?,
                saved_source: save_source(program_name, &source).ok(),
                generated_source: source,
            })
        }
        Err(source) => Err(KernelError::Nvrtc {
            call: "nvrtcCompileProgram",
            source,
        }),
    }
}

/// Saves a source NVRTC rejected to a new file in the temporary directory, readable by the
/// user only, for reading alongside the log (the error's `Display` names it instead of
/// printing the source). The name is random, and the file is created exclusively, so nothing
/// planted in a shared temporary directory is followed or overwritten.
fn save_source(program_name: &str, source: &str) -> std::io::Result<PathBuf> {
    let stem: String = program_name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(96)
        .collect();
    let path =
        std::env::temp_dir().join(format!("oxicub-{stem}-{}.cu", crate::cache::random_hex(8)?));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(&path)?.write_all(source.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Whether NVRTC is present; with `OXICUB_REQUIRE_NVRTC=1` its absence fails the test.
    pub(crate) fn nvrtc_or_skip() -> bool {
        match nvrtc_available() {
            Ok(()) => true,
            Err(e) if std::env::var("OXICUB_REQUIRE_NVRTC").is_ok_and(|v| v == "1") => {
                panic!("OXICUB_REQUIRE_NVRTC=1 but NVRTC is missing: {e}")
            }
            Err(e) => {
                println!("skipped: no NVRTC ({e})");
                false
            }
        }
    }

    fn compile_for_sm_90(name: &str, source: String) -> Result<Vec<u8>, KernelError> {
        let options = compile_options(Arch::SM_90);
        compile_source(name, name, source, Arch::SM_90, &options)
    }

    #[test]
    fn compile_error_carries_log_and_source() {
        if !nvrtc_or_skip() {
            return;
        }
        let source = "extern \"C\" __global__ void broken() { undeclared_name = 1; }\n".to_owned();
        match compile_for_sm_90("broken", source) {
            Err(KernelError::Compile {
                log,
                generated_source,
                arch,
                saved_source,
                ..
            }) => {
                assert!(log.contains("undeclared_name"), "{log}");
                assert!(generated_source.contains("void broken()"));
                assert_eq!(arch, "sm_90");
                let _ = std::fs::remove_file(saved_source.expect("saved"));
            }
            other => panic!("expected a compile error, got {other:?}"),
        }
    }

    /// A rejected source as large as a generated translation unit is saved, not printed: the
    /// message is the log and the saved file's path.
    #[test]
    fn compile_error_display_is_short_and_names_the_saved_source() {
        if !nvrtc_or_skip() {
            return;
        }
        let mut source = "// padding of a generated translation unit\n".repeat(5_000);
        source.push_str("extern \"C\" __global__ void broken() { undeclared_name = 1; }\n");
        assert!(source.len() > 200_000);
        let err = compile_for_sm_90("broken_kernel", source.clone()).expect_err("must fail");
        let shown = err.to_string();
        println!("{shown}");
        let KernelError::Compile {
            saved_source: Some(path),
            generated_source,
            log,
            ..
        } = &err
        else {
            panic!("expected a compile error with a saved source, got {err:?}");
        };
        assert!(log.contains("undeclared_name"), "{log}");
        assert!(shown.contains(log.as_str()), "{shown}");
        assert!(
            shown.len() < log.len() + 1024,
            "{} bytes: {shown}",
            shown.len()
        );
        assert!(!shown.contains("padding"), "{shown}");
        assert!(shown.contains(&path.display().to_string()), "{shown}");
        assert_eq!(generated_source, &source, "the error keeps the source");
        assert_eq!(std::fs::read_to_string(path).expect("saved"), source);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path)
                .expect("metadata")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_file(path).expect("remove");
    }

    #[test]
    fn invalid_architecture_is_an_nvrtc_error() {
        if !nvrtc_or_skip() {
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

    /// The library files come from the maps listing and the builtins beside them, with sizes:
    /// a rebuilt builtins library of another size changes the identity.
    #[test]
    fn library_files_from_a_maps_listing() {
        let dir = std::env::temp_dir().join(format!(
            "oxicub-nvrtc-maps-{}-{}",
            std::process::id(),
            crate::cache::random_hex(8).expect("random")
        ));
        std::fs::create_dir(&dir).expect("create");
        let library = dir.join("libnvrtc.so.13");
        let builtins = dir.join("libnvrtc-builtins.so.13.0");
        std::fs::write(&library, [0u8; 10]).expect("write");
        std::fs::write(&builtins, [0u8; 20]).expect("write");
        std::fs::write(dir.join("unrelated.so"), [0u8; 30]).expect("write");
        let maps = format!(
            "7f00-7f10 r-xp 00000000 08:01 42 {}\n7f10-7f20 r--p 00000000 08:01 7 /usr/lib/libc.so.6\n7f20-7f30 rw-p 00000000 00:00 0 [heap]\n",
            library.display()
        );
        let files = nvrtc_library_files(&maps);
        assert!(
            files.contains(&format!("{} (10 bytes", library.display())),
            "{files}"
        );
        assert!(
            files.contains(&format!("{} (20 bytes", builtins.display())),
            "{files}"
        );
        assert!(
            !files.contains("libc") && !files.contains("unrelated"),
            "{files}"
        );
        std::fs::write(&builtins, [0u8; 21]).expect("rewrite");
        assert_ne!(nvrtc_library_files(&maps), files);
        assert!(
            nvrtc_library_files("7f00-7f10 r-xp 0 0 0 /usr/lib/libc.so.6\n")
                .contains("not identified")
        );
        std::fs::remove_dir_all(&dir).expect("remove");
    }

    #[test]
    fn nvrtc_identity_names_the_loaded_library() {
        if !nvrtc_or_skip() {
            return;
        }
        let identity = nvrtc_identity().expect("identity");
        println!("NVRTC identity: {identity}");
        let (major, minor) = nvrtc_version().expect("version");
        assert!(
            identity.starts_with(&format!("{major}.{minor}; ")),
            "{identity}"
        );
        #[cfg(target_os = "linux")]
        {
            assert!(identity.contains("/libnvrtc"), "{identity}");
            assert!(identity.contains("/libnvrtc-builtins"), "{identity}");
            assert!(!identity.contains("not identified"), "{identity}");
        }
    }
}
