//! Whether a CUDA library (the driver, NVRTC) can be loaded, asked before cudarc touches it.
//!
//! cudarc, when it loads its libraries at run time, panics on the first call into one it cannot
//! find; when an engine beside oxicub asks it to link them instead (`dynamic-linking`), the
//! libraries are loaded with the process and cudarc has no loader to ask. This check serves
//! both: it tries the file names cudarc's loader tries, so a library found here is one cudarc
//! finds too, and a linked library is found under its own name.

/// The file names cudarc's loader tries for `lib` (its `get_lib_name_candidates`, for the CUDA
/// version its bindings are built for, in its order).
pub(crate) fn lib_name_candidates(lib: &str) -> Vec<String> {
    use std::env::consts::{DLL_PREFIX as P, DLL_SUFFIX as S};
    let width = if cfg!(target_pointer_width = "32") {
        "32"
    } else {
        "64"
    };
    let version = cudarc::driver::sys::CUDA_VERSION;
    let (major, minor) = (version / 1000, version % 1000 / 10);
    vec![
        format!("{P}{lib}{S}"),
        format!("{P}{lib}{width}{S}"),
        format!("{P}{lib}{width}_{major}{S}"),
        format!("{P}{lib}{width}_{major}{minor}{S}"),
        format!("{P}{lib}{width}_{major}{minor}_0{S}"),
        format!("{P}{lib}{width}_{major}0_{minor}{S}"),
        format!("{P}{lib}{width}_10{S}"),
        format!("{P}{lib}{width}_11{S}"),
        format!("{P}{lib}{width}_12{S}"),
        format!("{P}{lib}{width}_{major}0_0{S}"),
        format!("{P}{lib}{width}_9{S}"),
        format!("{P}{lib}{S}.{major}"),
        format!("{P}{lib}{S}.12"),
        format!("{P}{lib}{S}.11"),
        format!("{P}{lib}{S}.10"),
        format!("{P}{lib}{S}.9"),
        format!("{P}{lib}{S}.1"),
    ]
}

/// Whether `lib` loads under one of its candidate names.
pub(crate) fn loads(lib: &str) -> bool {
    lib_name_candidates(lib).iter().any(|name| {
        // SAFETY: loading a CUDA library runs its initialisers, which have no preconditions on
        // our side; cudarc loads the same library the same way. The handle is closed again
        // (the library stays loaded for cudarc, which opens it itself).
        unsafe { libloading::Library::new(name) }.is_ok()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn candidates_name_the_built_version_first_among_numbered_sonames() {
        let names = super::lib_name_candidates("nvrtc");
        let major = cudarc::driver::sys::CUDA_VERSION / 1000;
        let soname = format!(
            "{}nvrtc{}.{major}",
            std::env::consts::DLL_PREFIX,
            std::env::consts::DLL_SUFFIX
        );
        assert!(names.contains(&soname), "{names:?}");
        assert_eq!(names.len(), 17);
    }
}
