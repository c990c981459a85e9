//! The operations, as types: each picks the serial logic of one kernel skeleton (the seed's
//! `MgpuSetOp` template argument) and bounds its output.

use crate::sealed::Sealed;

/// Which operation, as the host loop and the kernels number it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum SetOp {
    /// `std::set_intersection`.
    Intersection = 0,
    /// `std::set_union`.
    Union = 1,
    /// `std::set_difference`.
    Difference = 2,
    /// `std::set_symmetric_difference`.
    SymmetricDifference = 3,
    /// `std::merge`.
    Merge = 4,
}

/// A set operation: [`Intersection`], [`Union`], [`Difference`], [`SymmetricDifference`] or
/// [`Merge`].
///
/// ```
/// use oxicub::sets::{op, SetOperation};
///
/// assert_eq!(op::Intersection.bound(5, 3), 3);
/// assert_eq!(op::Difference.bound(5, 3), 5);
/// assert_eq!(op::Union.bound(5, 3), 8);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a set operation",
    note = "pass `op::Intersection`, `op::Union`, `op::Difference`, `op::SymmetricDifference` or \
            `op::Merge` from `oxicub::sets::op`"
)]
pub trait SetOperation: Sealed + Copy {
    /// The operation.
    const OP: SetOp;
    /// Its name, as errors and reports spell it.
    const NAME: &'static str;

    /// The most keys the operation writes for inputs of `a` and `b` keys (what the outputs must
    /// hold).
    fn bound(&self, a: u64, b: u64) -> u64 {
        match Self::OP {
            SetOp::Intersection => a.min(b),
            SetOp::Difference => a,
            SetOp::Union | SetOp::SymmetricDifference | SetOp::Merge => a.saturating_add(b),
        }
    }
}

macro_rules! operations {
    ($($(#[$doc:meta])* $ty:ident => $op:ident, $name:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $ty;
        impl Sealed for $ty {}
        impl SetOperation for $ty {
            const OP: SetOp = SetOp::$op;
            const NAME: &'static str = $name;
        }
    )*};
}

operations! {
    /// `std::set_intersection`: each key `min(m, n)` times, from `a`.
    Intersection => Intersection, "intersection";
    /// `std::set_union`: each key `max(m, n)` times, `a`'s copies first.
    Union => Union, "union";
    /// `std::set_difference`: each key `m - n` times (none if `n >= m`), from `a`.
    Difference => Difference, "difference";
    /// `std::set_symmetric_difference`: each key `|m - n|` times, from the side with more.
    SymmetricDifference => SymmetricDifference, "symmetric_difference";
    /// `std::merge`: every key of both, `a`'s first among equal keys.
    Merge => Merge, "merge";
}
