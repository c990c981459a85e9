//! `#[repr(C)]` kernel parameter structs whose C++ declaration is generated from the Rust one.
//!
//! Every kernel entry point takes exactly one argument, a parameter struct passed by value. The
//! [`kernel_params!`] macro declares the Rust struct and, from the same field list, the C++
//! struct (same fields, same order, same widths, so `#[repr(C)]` and C++ lay them out alike),
//! with `static_assert`s on its size and alignment that the C++ compiler checks against the
//! Rust values every time a kernel is compiled. (NVRTC has no `offsetof`.)

/// C++ spelling of a field type allowed in a parameter struct.
pub(crate) trait CxxField: Copy {
    /// The C++ type name.
    const CXX: &'static str;
}

impl CxxField for u32 {
    const CXX: &'static str = "unsigned int";
}

impl CxxField for u64 {
    const CXX: &'static str = "unsigned long long";
}

/// A parameter struct that can be passed to a kernel entry point. Implemented only through
/// [`kernel_params!`], which makes the struct `#[repr(C)]` with `u32`/`u64` fields (device
/// pointers travel as `u64`).
pub(crate) trait KernelParams: Copy + 'static {
    /// Name of the struct in C++ (inside namespace `oxicub`).
    const CXX_NAME: &'static str;
    /// The C++ declaration, including layout assertions.
    fn cxx_declaration() -> String;
}

/// Declares a `#[repr(C)]` parameter struct and implements [`KernelParams`] for it.
macro_rules! kernel_params {
    ($(#[$meta:meta])* struct $name:ident { $($(#[$field_meta:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default)]
        pub(crate) struct $name {
            $($(#[$field_meta])* pub(crate) $field: $ty,)*
        }

        impl $crate::codegen::params::KernelParams for $name {
            const CXX_NAME: &'static str = stringify!($name);

            fn cxx_declaration() -> String {
                use $crate::codegen::params::CxxField;
                let mut decl = format!("namespace oxicub {{\nstruct {} {{\n", stringify!($name));
                $(decl.push_str(&format!("    {} {};\n", <$ty as CxxField>::CXX, stringify!($field)));)*
                decl.push_str("};\n");
                decl.push_str(&format!(
                    "static_assert(sizeof({}) == {}, \"layout of {} differs from Rust\");\n",
                    stringify!($name),
                    std::mem::size_of::<$name>(),
                    stringify!($name),
                ));
                decl.push_str(&format!(
                    "static_assert(alignof({}) == {}, \"alignment of {} differs from Rust\");\n",
                    stringify!($name),
                    std::mem::align_of::<$name>(),
                    stringify!($name),
                ));
                decl.push_str("}  // namespace oxicub\n");
                decl
            }
        }
    };
}
pub(crate) use kernel_params;
