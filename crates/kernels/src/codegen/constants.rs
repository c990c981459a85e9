//! Constants shared by the host and the kernels, declared once in Rust.
//!
//! A kernel and its host launcher agree on many numbers: stage codes, flag bits, slots of a
//! state array, status words, the shapes of shared-memory and scratch layouts. Each such number
//! is declared once with [`device_constants!`], which makes it a Rust `const` and adds it to a
//! [`DeviceConstants`] list. Every generated translation unit declares the lists it uses as C++
//! `constexpr`s of the same name, type and value, before the headers that read them (see
//! [`KernelSpec::generated_source`](crate::KernelSpec::generated_source)), so the host and the
//! device cannot drift apart and no header keeps a copy.
//!
//! ```text
//! device_constants! {
//!     /// The constants of family `example`.
//!     pub(crate) static EXAMPLE_CONSTANTS;
//!     /// `params.stage`: the first stage.
//!     pub(crate) const EXAMPLE_STAGE_INIT: u32 = 0;
//!     /// Words of the status array.
//!     pub(crate) const EXAMPLE_STATUS_WORDS: u32 = EXAMPLE_STAGE_INIT + 4;
//! }
//! ```
//!
//! The C++ side then reads `constexpr u32 EXAMPLE_STAGE_INIT = 0u;` (values are evaluated in
//! Rust and emitted as literals).

/// The C++ spelling of a constant's type: `u32` or `u64` (the typedefs of `cuda/core/types.cuh`).
pub(crate) trait CxxConstant: Copy {
    /// The C++ type.
    const CXX: &'static str;
    /// The suffix of a C++ literal of that type.
    const SUFFIX: &'static str;
}

impl CxxConstant for u32 {
    const CXX: &'static str = "u32";
    const SUFFIX: &'static str = "u";
}

impl CxxConstant for u64 {
    const CXX: &'static str = "u64";
    const SUFFIX: &'static str = "ull";
}

/// One constant of a [`DeviceConstants`] list.
#[derive(Debug)]
pub(crate) struct DeviceConstant {
    /// The name on both sides.
    pub(crate) name: &'static str,
    /// The C++ type ([`CxxConstant::CXX`]).
    pub(crate) cxx_type: &'static str,
    /// The C++ literal suffix ([`CxxConstant::SUFFIX`]).
    pub(crate) suffix: &'static str,
    /// The value (widened to 64 bits).
    pub(crate) value: u64,
    /// The Rust doc comment's lines, repeated in the C++ declaration.
    pub(crate) doc: &'static [&'static str],
}

/// A list of constants declared by [`device_constants!`].
#[derive(Debug)]
pub(crate) struct DeviceConstants {
    /// The list's name (the Rust static), for the generated source's comment.
    pub(crate) name: &'static str,
    /// The constants, in declaration order.
    pub(crate) constants: &'static [DeviceConstant],
}

impl DeviceConstants {
    /// The C++ declarations: one `constexpr` per constant in namespace `oxicub`, each after its
    /// doc comment.
    pub(crate) fn cxx_declaration(&self) -> String {
        let mut decl = format!(
            "// Generated from the Rust list {}.\nnamespace oxicub {{\n",
            self.name
        );
        for constant in self.constants {
            for line in constant.doc {
                decl.push_str("//");
                decl.push_str(line);
                decl.push('\n');
            }
            decl.push_str(&format!(
                "constexpr {} {} = {}{};\n",
                constant.cxx_type, constant.name, constant.value, constant.suffix
            ));
        }
        decl.push_str("}  // namespace oxicub\n");
        decl
    }

    /// The constant called `name`.
    #[cfg(test)]
    pub(crate) fn get(&self, name: &str) -> Option<&DeviceConstant> {
        self.constants.iter().find(|c| c.name == name)
    }
}

/// Declares constants shared by the host and the kernels: each a Rust `const` (of type `u32` or
/// `u64`) and an entry of the list named first, whose [`DeviceConstants::cxx_declaration`]
/// every kernel of a family that lists it compiles. Every constant is used on the device side,
/// so none is dead code there even when the host reads only some.
macro_rules! device_constants {
    (
        $(#[$list_meta:meta])*
        $list_vis:vis static $list:ident;
        $(
            $(#[doc = $doc:literal])*
            $vis:vis const $name:ident : $ty:ty = $value:expr;
        )*
    ) => {
        $(
            $(#[doc = $doc])*
            #[allow(dead_code)]
            $vis const $name: $ty = $value;
        )*

        $(#[$list_meta])*
        $list_vis static $list: $crate::codegen::DeviceConstants =
            $crate::codegen::DeviceConstants {
                name: concat!(module_path!(), "::", stringify!($list)),
                constants: &[$(
                    $crate::codegen::DeviceConstant {
                        name: stringify!($name),
                        cxx_type: <$ty as $crate::codegen::CxxConstant>::CXX,
                        suffix: <$ty as $crate::codegen::CxxConstant>::SUFFIX,
                        value: $name as u64,
                        doc: &[$($doc),*],
                    },
                )*],
            };
    };
}
pub(crate) use device_constants;

#[cfg(test)]
mod tests {
    device_constants! {
        /// A list for the test.
        static TEST_CONSTANTS;
        /// The first.
        const TEST_FIRST: u32 = 3;
        /// A wide one,
        /// from the first.
        const TEST_WIDE: u64 = (TEST_FIRST as u64) << 40;
    }

    #[test]
    fn every_constant_is_declared_in_cxx_with_its_value_and_type() {
        let decl = TEST_CONSTANTS.cxx_declaration();
        assert!(decl.contains("constexpr u32 TEST_FIRST = 3u;\n"), "{decl}");
        assert!(
            decl.contains(
                "// A wide one,\n// from the first.\nconstexpr u64 TEST_WIDE = 3298534883328ull;\n"
            ),
            "{decl}"
        );
        assert!(decl.contains("tests::TEST_CONSTANTS"), "{decl}");
        assert_eq!(
            TEST_CONSTANTS.get("TEST_WIDE").map(|c| c.value),
            Some(TEST_WIDE)
        );
    }
}
