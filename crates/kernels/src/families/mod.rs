//! The kernel families: for each, its table (template arguments, headers, constants,
//! parameter struct), its spec constructors, every spec it can produce and its typed launcher.
//!
//! A family is a folder of headers `cuda/<family>/`, a module here (`pub mod <family>;`, which
//! rustfmt must see) and one line of the `families!` registry below, which makes its
//! [`KernelFamily`] variant, its place in [`KernelFamily::ALL`], the lookup of its table and of
//! its specs (the compile check compiles [`all_specs`]). The module provides
//! `pub(crate) static TABLE: FamilyTable` and `pub fn specs() -> Vec<KernelSpec>`.

pub mod batched_topk;
pub mod digit_histogram;
mod listed;
pub mod listed_copy;
pub mod routing;
pub mod routing_dispatch;
pub(crate) mod scratch;
pub mod segment_heads;
pub mod segmented_sort;
pub mod sets;
pub mod topk_radix_select;
pub mod transform_keys;

use std::fmt;
use std::sync::Arc;

use crate::codegen::FamilyTable;
use crate::KernelSpec;

/// Declares the registry of kernel families: `Variant => module` per family, with the
/// variant's doc comment.
macro_rules! families {
    ($($(#[doc = $doc:literal])* $variant:ident => $module:ident,)*) => {
        /// The kernel families: one C++ template (in `cuda/<name>/`) each.
        ///
        /// ```
        /// use oxicub::kernels::KernelFamily;
        ///
        /// assert_eq!(KernelFamily::DigitHistogram.to_string(), "digit_histogram");
        /// assert!(KernelFamily::ALL.contains(&KernelFamily::BatchedTopK));
        /// ```
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum KernelFamily {
            $($(#[doc = $doc])* $variant,)*
        }

        impl KernelFamily {
            /// Every family, in registry order.
            pub const ALL: [KernelFamily; [$(KernelFamily::$variant),*].len()] =
                [$(KernelFamily::$variant),*];

            /// The family's table.
            pub(crate) fn table(self) -> &'static FamilyTable {
                match self {
                    $(KernelFamily::$variant => &$module::TABLE,)*
                }
            }

            /// Every spec of the family that dispatch can produce (for the radix primitives, a
            /// representative set).
            pub fn specs(self) -> Vec<KernelSpec> {
                match self {
                    $(KernelFamily::$variant => $module::specs(),)*
                }
            }
        }
    };
}

families! {
    /// Apply the radix transform (or its inverse) to every key.
    TransformKeys => transform_keys,
    /// Count the values of one radix digit over all keys.
    DigitHistogram => digit_histogram,
    /// Single-problem top-k by radix select (every stage of it).
    TopKRadixSelect => topk_radix_select,
    /// Batched top-k: the control stages and the warp, block, multi-block and stream tiers.
    BatchedTopK => batched_topk,
    /// Segmented sort: the control stages, the tile sort, the merge passes and the write.
    SegmentedSort => segmented_sort,
    /// Segments described by their heads (flags or indices) turned into offsets and their
    /// number, on the device.
    SegmentHeads => segment_heads,
    /// Move a listed layout's views into one joined buffer, or back.
    ListedCopy => listed_copy,
    /// A multiset operation or a merge of two sorted inputs.
    Sets => sets,
    /// MoE routers: a warp per token, scores, groups, top-k and weights.
    Routing => routing,
    /// After a router: each expert's number of entries and the entries grouped by expert.
    RoutingDispatch => routing_dispatch,
}

impl KernelFamily {
    /// The family's name (the C++ template's name and the entry points' prefix).
    pub fn name(self) -> &'static str {
        self.table().name
    }
}

impl fmt::Display for KernelFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every spec of every family ([`KernelFamily::specs`]), in registry order: what the compile
/// check compiles.
///
/// ```
/// let specs = oxicub::kernels::all_specs();
/// assert!(specs.len() > oxicub::kernels::representative_specs().len());
/// ```
pub fn all_specs() -> Vec<KernelSpec> {
    KernelFamily::ALL
        .iter()
        .flat_map(|family| family.specs())
        .collect()
}

use cudarc::driver::{
    CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop,
};

use crate::{KernelError, KernelRuntime};

/// Checks that an input and an output buffer live in the runtime's context and have the same
/// length.
fn check_same_length<I, O>(
    runtime: &KernelRuntime,
    input: (&'static str, &impl DeviceSlice<I>),
    output: (&'static str, &impl DeviceSlice<O>),
) -> Result<(), KernelError> {
    runtime.check_buffer(input.0, input.1)?;
    runtime.check_buffer(output.0, output.1)?;
    if input.1.len() != output.1.len() {
        return Err(KernelError::LengthMismatch {
            buffer: output.0,
            actual: output.1.len(),
            expected: input.1.len(),
        });
    }
    Ok(())
}

/// Device pointers of an input and an output buffer, as the `u64`s the parameter structs hold,
/// with the guards that order the buffers' events around the launch.
fn device_ptrs<'a, I, O>(
    stream: &'a CudaStream,
    input: &'a impl DevicePtr<I>,
    output: &'a mut impl DevicePtrMut<O>,
) -> ((u64, u64), (SyncOnDrop<'a>, SyncOnDrop<'a>)) {
    let (input_ptr, input_guard) = input.device_ptr(stream);
    let (output_ptr, output_guard) = output.device_ptr_mut(stream);
    ((input_ptr, output_ptr), (input_guard, output_guard))
}

/// A buffer must hold at least `expected` elements.
fn at_least(buffer: &'static str, actual: usize, expected: u64) -> Result<(), KernelError> {
    if (actual as u64) < expected {
        Err(KernelError::LengthMismatch {
            buffer,
            actual,
            expected: expected.min(usize::MAX as u64) as usize,
        })
    } else {
        Ok(())
    }
}

/// Keeps the guard of a device pointer until the launches are issued; returns the pointer.
fn keep<'a>(guards: &mut Vec<SyncOnDrop<'a>>, (ptr, guard): (u64, SyncOnDrop<'a>)) -> u64 {
    guards.push(guard);
    ptr
}

/// A launch argument: one value known on the host, or values the kernels read from device
/// memory in stream order (one per segment, or a single deferred value). `D` is the device
/// form: [`DeviceInts`] for per-segment sizes and `k`, a `&CudaView` otherwise.
///
/// ```
/// use oxicub::kernels::families::{DeviceInts, HostOrDevice};
///
/// let k: HostOrDevice<DeviceInts<'_, '_>, u64> = HostOrDevice::Host(8);
/// assert!(matches!(k, HostOrDevice::Host(8)));
/// ```
#[derive(Clone, Copy, Debug)]
pub enum HostOrDevice<D, U> {
    /// One value, the same for every segment.
    Host(U),
    /// In device memory: one per segment (at least `max_segments` elements), or one deferred
    /// value (one element).
    Device(D),
}

impl<D, U> HostOrDevice<D, U> {
    /// The host value, if the value is on the host.
    pub fn host(self) -> Option<U> {
        match self {
            HostOrDevice::Host(value) => Some(value),
            HostOrDevice::Device(_) => None,
        }
    }
}

/// Per-segment integers in device memory (sizes, `k`), in either width a caller holds them:
/// the kernels widen `i32` values as they read them (a launch flag says which).
///
/// ```no_run
/// use cudarc::driver::CudaContext;
/// use oxicub::kernels::families::DeviceInts;
///
/// let stream = CudaContext::new(0)?.default_stream();
/// let ks = stream.clone_htod(&[8i32, 2, 4])?;
/// let view = ks.as_view();
/// assert_eq!(DeviceInts::I32(&view).len(), 3);
/// # Ok::<(), cudarc::driver::DriverError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub enum DeviceInts<'a, 'b> {
    /// `i64` values.
    I64(&'b CudaView<'a, i64>),
    /// `i32` values.
    I32(&'b CudaView<'a, i32>),
}

impl<'b> DeviceInts<'_, 'b> {
    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            DeviceInts::I64(view) => view.len(),
            DeviceInts::I32(view) => view.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the values are `i32` (the launch sets the family's width flag).
    pub(crate) fn is_i32(&self) -> bool {
        matches!(self, DeviceInts::I32(_))
    }

    /// Checks the buffer's context ([`KernelRuntime::check_buffer`]).
    pub(crate) fn check(
        &self,
        runtime: &KernelRuntime,
        name: &'static str,
    ) -> Result<(), KernelError> {
        match self {
            DeviceInts::I64(view) => runtime.check_buffer(name, *view),
            DeviceInts::I32(view) => runtime.check_buffer(name, *view),
        }
    }

    /// The device address, its guard kept until the launches are issued.
    pub(crate) fn ptr<'g>(
        self,
        guards: &mut Vec<SyncOnDrop<'g>>,
        stream: &'g Arc<CudaStream>,
    ) -> u64
    where
        'b: 'g,
    {
        match self {
            DeviceInts::I64(view) => keep(guards, view.device_ptr(stream)),
            DeviceInts::I32(view) => keep(guards, view.device_ptr(stream)),
        }
    }
}

/// The values a selection (top-k, batched top-k) carries with its keys.
#[derive(Debug)]
pub enum SelectedValues<'a, 'b, V> {
    /// Keys only.
    None,
    /// `values[i]` goes with `keys[i]` into `out`.
    Copy {
        /// One per key.
        values: &'b CudaView<'a, V>,
        /// Room for every item the call can write.
        out: &'b mut CudaViewMut<'a, V>,
    },
    /// The index of each selected key (truncated to the width of `V`) into `out`: the source
    /// index for top-k, the index within its segment for batched top-k.
    Index {
        /// Room for every item the call can write.
        out: &'b mut CudaViewMut<'a, V>,
    },
    /// Batched top-k over a listed layout: `values[i][j]` goes with key `j` of segment `i`
    /// into `out`.
    Listed {
        /// A view per segment, each at least as long as its segment.
        values: &'b [CudaView<'a, V>],
        /// Room for every item the call can write.
        out: &'b mut CudaViewMut<'a, V>,
    },
}

impl<V> SelectedValues<'_, '_, V> {
    /// The device pointers of the values and of their output (0 where there is none; for
    /// listed values, the table of their addresses is the launcher's); the guards go to
    /// `guards`. (Whether the kernel writes indices is a flag of the plan.)
    fn device_ptrs<'s>(
        &'s mut self,
        stream: &'s CudaStream,
        guards: &mut Vec<SyncOnDrop<'s>>,
    ) -> (u64, u64) {
        match self {
            SelectedValues::None => (0, 0),
            SelectedValues::Copy { values, out } => (
                keep(guards, values.device_ptr(stream)),
                keep(guards, out.device_ptr_mut(stream)),
            ),
            SelectedValues::Index { out } | SelectedValues::Listed { out, .. } => {
                (0, keep(guards, out.device_ptr_mut(stream)))
            }
        }
    }
}
