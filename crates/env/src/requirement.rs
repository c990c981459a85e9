//! Requirements on an algorithm's result: determinism, tie-break and output ordering.
//!
//! Each requirement is a zero-sized marker type; its run-time value is the matching enum.
//! The semantics are those of the seeds' requirement model (see the crate documentation).

use core::fmt::{self, Debug, Display};

/// How reproducible the *set* of selected items is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Determinism {
    /// Among items tied at the selection boundary, any valid subset may be returned.
    NotGuaranteed,
    /// The same set on repeated runs on the same GPU with the same input.
    RunToRun,
    /// The same set on every GPU of the same architecture.
    GpuToGpu,
}

/// Which of the items tied at the selection boundary are kept (only with a deterministic set).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum TieBreak {
    /// Any deterministic rule; the implementation chooses.
    Unspecified,
    /// Prefer the items with the smaller source index.
    PreferSmallerIndex,
    /// Prefer the items with the larger source index.
    PreferLargerIndex,
}

/// How the selected set is laid out in the output.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum OutputOrdering {
    /// No order; the same set may come out in different permutations.
    Unsorted,
    /// Sorted by key (descending for max, ascending for min); equal keys in any order.
    Sorted,
    /// Sorted by key, equal keys in input order (smaller source index first).
    StableSorted,
}

macro_rules! display_as_snake_case {
    ($($ty:ident { $($variant:ident => $name:literal),* })*) => {$(
        impl Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self { $($ty::$variant => $name),* })
            }
        }
    )*};
}
display_as_snake_case! {
    Determinism { NotGuaranteed => "not_guaranteed", RunToRun => "run_to_run", GpuToGpu => "gpu_to_gpu" }
    TieBreak {
        Unspecified => "unspecified",
        PreferSmallerIndex => "prefer_smaller_index",
        PreferLargerIndex => "prefer_larger_index"
    }
    OutputOrdering { Unsorted => "unsorted", Sorted => "sorted", StableSorted => "stable_sorted" }
}

/// The slot of an environment that a requirement fills: one per kind of requirement.
pub mod slot {
    /// The determinism slot.
    #[derive(Clone, Copy, Default, Debug)]
    pub struct Determinism;
    /// The tie-break slot.
    #[derive(Clone, Copy, Default, Debug)]
    pub struct TieBreak;
    /// The output-ordering slot.
    #[derive(Clone, Copy, Default, Debug)]
    pub struct OutputOrdering;
}

/// A requirement that can be placed in an environment with `require!(..)` or [`Env::with`].
///
/// [`Env::with`]: crate::Env::with
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a requirement",
    label = "expected a requirement",
    note = "requirements are `determinism::{{NotGuaranteed, RunToRun, GpuToGpu}}`, \
            `tie_break::{{Unspecified, PreferSmallerIndex, PreferLargerIndex}}` and \
            `output_ordering::{{Unsorted, Sorted, StableSorted}}`"
)]
pub trait Requirement: Copy + Default + Debug + Send + Sync + 'static {
    /// The slot the requirement fills.
    type Slot;
}

/// A determinism requirement.
pub trait DeterminismRequirement: Requirement<Slot = slot::Determinism> {
    /// Its run-time value.
    const VALUE: Determinism;
}
/// A tie-break requirement.
pub trait TieBreakRequirement: Requirement<Slot = slot::TieBreak> {
    /// Its run-time value.
    const VALUE: TieBreak;
}
/// An output-ordering requirement.
pub trait OrderingRequirement: Requirement<Slot = slot::OutputOrdering> {
    /// Its run-time value.
    const VALUE: OutputOrdering;
}

macro_rules! requirement_markers {
    ($(#[$mdoc:meta])* $module:ident, $slot:ident, $trait:ident, $enum:ident, [$($(#[$doc:meta])* $variant:ident),*]) => {
        $(#[$mdoc])*
        pub mod $module {
            $(
                $(#[$doc])*
                #[derive(Clone, Copy, Default, Debug, PartialEq, Eq, Hash)]
                pub struct $variant;
                impl super::Requirement for $variant {
                    type Slot = super::slot::$slot;
                }
                impl super::$trait for $variant {
                    const VALUE: super::$enum = super::$enum::$variant;
                }
            )*
        }
    };
}

requirement_markers!(
    /// `determinism::*`: how reproducible the selected set is (see [`Determinism`]).
    determinism, Determinism, DeterminismRequirement, Determinism, [
    /// Any valid subset among boundary ties: the fastest paths.
    NotGuaranteed,
    /// The same set run after run on one GPU.
    RunToRun,
    /// The same set on every GPU of the same architecture.
    GpuToGpu
]);
requirement_markers!(
    /// `tie_break::*`: which boundary ties are kept (see [`TieBreak`]).
    tie_break, TieBreak, TieBreakRequirement, TieBreak, [
    /// Any deterministic rule.
    Unspecified,
    /// Keep the smaller source indices.
    PreferSmallerIndex,
    /// Keep the larger source indices.
    PreferLargerIndex
]);
requirement_markers!(
    /// `output_ordering::*`: how the selected set is laid out (see [`OutputOrdering`]).
    output_ordering, OutputOrdering, OrderingRequirement, OutputOrdering, [
    /// No order.
    Unsorted,
    /// Sorted by key.
    Sorted,
    /// Sorted by key, ties in input order.
    StableSorted
]);

/// A slot of the environment that no requirement has filled yet; it resolves to the default.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq, Hash)]
pub struct Unset;
