//! Kernel specs: which template instantiation of which kernel family to compile and launch.
//!
//! Dispatch turns Rust types (key type, value type, direction, static bounds, ...) into a
//! [`KernelSpec`]. Each kernel family has one [`FamilyTable`] that lists, in order, the
//! template arguments its C++ template takes; the C++ instantiation, the generated
//! `extern "C"` entry point and the entry's name are all rendered from that one list, so the
//! Rust side and the C++ side cannot drift apart.

use std::fmt;

use crate::codegen::DeviceConstants;
use crate::radix::KeyType;
use crate::{KernelError, KernelFamily};

/// How the work of a kernel is laid out over the grid. More tiers (thread, warp, block or
/// several blocks per segment) come with the segmented algorithms.
///
/// ```
/// use oxicub::kernels::{KernelSpec, KeyType, Tier, TransformOp};
///
/// let spec = KernelSpec::transform_keys(KeyType::U8, TransformOp::Encode);
/// assert_eq!(spec.tier(), Tier::GridStride);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Tier {
    /// One flat problem; a grid-stride loop over all items.
    GridStride,
    /// A warp per segment (small segments, small k).
    WarpPerSegment,
    /// A block per segment (segments that fit in shared memory).
    BlockPerSegment,
    /// Several blocks per segment (huge segments).
    BlocksPerSegment,
}

/// Sort or selection direction.
///
/// ```
/// use oxicub::kernels::{KernelSpec, KeyType, TransformOp};
///
/// // The radix primitives have no direction.
/// assert_eq!(KernelSpec::transform_keys(KeyType::U8, TransformOp::Encode).direction(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// Smallest first (top-k "min").
    Ascending,
    /// Largest first (top-k "max").
    Descending,
}

/// The values carried along with keys in key-value ("pairs") kernels. Kernels move values
/// without looking at them, so only the width matters.
///
/// ```
/// use oxicub::kernels::{KernelSpec, KeyType, TransformOp, ValueType};
///
/// let index = ValueType::Opaque { bytes: 4 };
/// assert_ne!(Some(index), KernelSpec::transform_keys(KeyType::U8, TransformOp::Encode).value());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueType {
    /// An opaque value of this many bytes (1, 2, 4, 8 or 16).
    Opaque {
        /// Size in bytes.
        bytes: u8,
    },
}

/// One template argument of a family's C++ template, in the order the template takes them.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TemplateArg {
    /// The key traits type (`oxicub::KeyF32`, ...).
    Key,
    /// The number of threads per block.
    BlockThreads,
    /// A named compile-time constant of the spec (a static bound or an option).
    Const(&'static str),
}

/// The table that defines a kernel family: everything the generator needs.
pub(crate) struct FamilyTable {
    /// C++ function template name in namespace `oxicub`, also the entry name prefix.
    pub(crate) name: &'static str,
    /// The family's headers (`cuda/<name>/*.cuh`), concatenated in the order they build on each
    /// other.
    pub(crate) header: &'static str,
    /// The constants the family shares with its host code, declared before its header (after
    /// the core's, [`CORE_CONSTANTS`]).
    pub(crate) constants: &'static [&'static DeviceConstants],
    /// The parameter struct's C++ name.
    pub(crate) params_name: &'static str,
    /// The parameter struct's C++ declaration.
    pub(crate) params_declaration: fn() -> String,
    /// The template arguments, in order.
    pub(crate) template_args: &'static [TemplateArg],
    /// Static shared memory the instantiation uses, in bytes.
    pub(crate) static_shared_bytes: fn(&KernelSpec) -> u64,
}

/// The core header every generated kernel starts with: the integer types the constants and the
/// parameter structs are declared in.
const CORE_TYPES: &str = include_str!("../../cuda/core/types.cuh");

/// The core's building blocks (`cuda/core/`), which every generated kernel includes after the
/// constants and the parameter struct and before the family's headers: none has a family
/// constant, and what a kernel does not call compiles to nothing.
const CORE_HEADERS: [&str; 8] = [
    include_str!("../../cuda/core/radix.cuh"),
    include_str!("../../cuda/core/warp.cuh"),
    include_str!("../../cuda/core/block.cuh"),
    include_str!("../../cuda/core/block_sort.cuh"),
    include_str!("../../cuda/core/register_sort.cuh"),
    include_str!("../../cuda/core/loads.cuh"),
    include_str!("../../cuda/core/segments.cuh"),
    include_str!("../../cuda/core/balanced_path.cuh"),
];

/// The constant lists every generated kernel declares, before any family's: those of the
/// segmented problem, which every segmented family shares.
const CORE_CONSTANTS: [&DeviceConstants; 1] = [&crate::segments::SEGMENT_CONSTANTS];

/// Largest static shared memory a kernel may declare (the CUDA limit without opt-in).
///
/// ```
/// assert_eq!(oxicub::kernels::STATIC_SHARED_LIMIT_BYTES, 49152);
/// ```
pub const STATIC_SHARED_LIMIT_BYTES: u64 = 48 * 1024;

/// Shared memory an sm_90 CUBIN from NVRTC 13 holds per kernel beyond the kernel's own
/// variables (1 KiB in every family's kernels), counted for every architecture.
const RESERVED_SHARED_BYTES: u64 = 1024;

/// Names one template instantiation of one kernel family: the key type, the value type (for
/// pairs), the direction, the tier, the block size and the family's named compile-time
/// constants (static bounds, digit widths, options). Its `Display` is the C++ instantiation.
///
/// Specs are built by the family constructors, e.g. [`KernelSpec::digit_histogram`], which
/// always provide every constant the family's template needs.
///
/// ```
/// use oxicub::kernels::{CountType, KernelSpec, KeyType};
///
/// let spec = KernelSpec::digit_histogram(KeyType::F32, 8, CountType::U64);
/// assert_eq!(spec.to_string(), "oxicub::digit_histogram<oxicub::KeyF32, 256, 8, 8>");
/// assert_eq!(spec.entry_name(), "oxicub_digit_histogram__f32__b256__digit_bits8__count_bytes8");
/// assert!(spec.generated_source().contains("extern \"C\" __global__"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelSpec {
    pub(crate) family: KernelFamily,
    pub(crate) key: KeyType,
    pub(crate) value: Option<ValueType>,
    pub(crate) direction: Option<Direction>,
    pub(crate) tier: Tier,
    pub(crate) block_threads: u32,
    pub(crate) consts: Vec<(&'static str, i64)>,
}

impl KernelSpec {
    /// The kernel family.
    pub fn family(&self) -> KernelFamily {
        self.family
    }

    /// The key type.
    pub fn key(&self) -> KeyType {
        self.key
    }

    /// The value type, for key-value kernels.
    pub fn value(&self) -> Option<ValueType> {
        self.value
    }

    /// The direction, for kernels that have one.
    pub fn direction(&self) -> Option<Direction> {
        self.direction
    }

    /// The tier.
    pub fn tier(&self) -> Tier {
        self.tier
    }

    /// Threads per block (also the entry point's `__launch_bounds__`).
    pub fn block_threads(&self) -> u32 {
        self.block_threads
    }

    /// The value of a named compile-time constant, if the spec has it.
    pub fn constant(&self, name: &str) -> Option<i64> {
        self.consts
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, v)| v)
    }

    /// Static shared memory of this instantiation, in bytes: an upper bound of what its CUBIN
    /// declares (the `compile_all` test checks every spec against its CUBIN), used to check the
    /// limits before launching and to size the dynamic shared memory a launch may ask for.
    pub fn static_shared_bytes(&self) -> u64 {
        (self.family.table().static_shared_bytes)(self) + RESERVED_SHARED_BYTES
    }

    /// Checks the spec against its family and the limits that hold on every device: a block
    /// size that is a multiple of 32 in `32..=1024`, every template constant present, static
    /// shared memory within 48 KiB.
    pub fn validate(&self) -> Result<(), KernelError> {
        let invalid = |reason: String| KernelError::InvalidSpec {
            kernel: self.to_string(),
            reason,
        };
        if !(32..=1024).contains(&self.block_threads) || self.block_threads % 32 != 0 {
            return Err(invalid(format!(
                "block size {} must be a multiple of 32 in 32..=1024",
                self.block_threads
            )));
        }
        for arg in self.family.table().template_args {
            if let TemplateArg::Const(name) = arg {
                if self.constant(name).is_none() {
                    return Err(invalid(format!("missing template constant {name}")));
                }
            }
        }
        let shared = self.static_shared_bytes();
        if shared > STATIC_SHARED_LIMIT_BYTES {
            return Err(KernelError::Resources {
                kernel: self.to_string(),
                resource: "bytes of static shared memory per block",
                requested: shared,
                limit: STATIC_SHARED_LIMIT_BYTES,
            });
        }
        Ok(())
    }

    /// Renders each template argument as (C++ text, entry-name fragment).
    fn rendered_args(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.family
            .table()
            .template_args
            .iter()
            .map(move |arg| match *arg {
                TemplateArg::Key => (self.key.cxx_traits().to_owned(), self.key.name().to_owned()),
                TemplateArg::BlockThreads => (
                    self.block_threads.to_string(),
                    format!("b{}", self.block_threads),
                ),
                TemplateArg::Const(name) => match self.constant(name) {
                    Some(v) => (
                        v.to_string(),
                        format!(
                            "{}{}{}",
                            name.to_ascii_lowercase(),
                            if v < 0 { "m" } else { "" },
                            v.unsigned_abs()
                        ),
                    ),
                    None => ("/*missing*/".to_owned(), "missing".to_owned()),
                },
            })
    }

    /// The name of the generated `extern "C"` entry point, derived from the same template
    /// argument list as the C++ instantiation.
    pub fn entry_name(&self) -> String {
        let mut name = format!("oxicub_{}", self.family.name());
        for (_, fragment) in self.rendered_args() {
            name.push_str("__");
            name.push_str(&fragment);
        }
        name
    }

    /// The complete CUDA C++ translation unit for this spec: the core's types, the constants the
    /// core and the family share with the host, the parameter struct, the core's headers, the
    /// family's headers and the `extern "C"` entry point.
    pub fn generated_source(&self) -> String {
        let table = self.family.table();
        let mut source = format!("// oxicub kernel: {self}\n");
        source.push_str(CORE_TYPES);
        for constants in CORE_CONSTANTS.iter().chain(table.constants) {
            source.push_str(&constants.cxx_declaration());
        }
        source.push_str(&(table.params_declaration)());
        for header in CORE_HEADERS {
            source.push_str(header);
            source.push('\n');
        }
        source.push_str(table.header);
        // A spec constant MIN_BLOCKS (not a template argument) asks the compiler to keep that
        // many blocks resident per SM (it caps the registers per thread).
        let bounds = match self.constant("MIN_BLOCKS") {
            Some(min) => format!("{}, {min}", self.block_threads),
            None => self.block_threads.to_string(),
        };
        source.push_str(&format!(
            "\nextern \"C\" __global__ void __launch_bounds__({bounds}) {entry}(const oxicub::{params} params) {{\n    {instantiation}(params);\n}}\n",
            entry = self.entry_name(),
            params = table.params_name,
            instantiation = self,
        ));
        source
    }
}

impl fmt::Display for KernelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oxicub::{}<", self.family.name())?;
        for (i, (cxx, _)) in self.rendered_args().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&cxx)?;
        }
        f.write_str(">")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::radix::CountType;

    #[test]
    fn entry_names_are_distinct_across_the_matrix() {
        let specs = crate::representative_specs();
        let mut names: Vec<String> = specs.iter().map(KernelSpec::entry_name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), specs.len());
        for spec in &specs {
            spec.validate().expect("representative spec is valid");
            assert!(spec
                .entry_name()
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_'));
        }
    }

    #[test]
    fn missing_constant_is_reported() {
        let mut spec = KernelSpec::digit_histogram(KeyType::U8, 8, CountType::U32);
        spec.consts.clear();
        let err = spec.validate().unwrap_err();
        assert!(err.to_string().contains("DIGIT_BITS"), "{err}");
    }

    #[test]
    fn bad_block_size_is_reported() {
        let mut spec = KernelSpec::transform_keys(KeyType::U8, crate::TransformOp::Encode);
        spec.block_threads = 100;
        assert!(spec.validate().is_err());
    }
}
