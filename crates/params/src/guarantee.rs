//! Guarantees: facts about a parameter's values that the caller promises, given beside the
//! parameters (the `total_items` argument) or through the environment (`oxicub-env`).

use crate::numeric::{checked_runtime_bounds, checked_static_bounds};
use crate::role::{self, Role};
use crate::{Bounds, ParamError};
use core::marker::PhantomData;

/// A promise that every value of the parameter `R` lies in `MIN..=MAX` (static), narrowed at
/// run time by [`between`](Guarantee::between).
///
/// Guarantees size temporary storage and pick kernels; the tightest of all facts about a
/// parameter wins, and contradicting facts are an error (a compile error where all are static).
///
/// ```
/// use oxicub::params::guarantee::{MaxK, TotalItems};
/// use oxicub::params::Bounds;
///
/// assert_eq!(MaxK::<8>::new().bounds(), Bounds::new(0, 8));
/// let total = TotalItems::<0, { 1 << 30 }>::new().between(0, 65_536 * 256)?;
/// assert_eq!(total.bounds().max, 16_777_216);
/// # Ok::<(), oxicub::params::ParamError>(())
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Guarantee<R: Role, const MIN: i64 = 0, const MAX: i64 = { i64::MAX }> {
    bounds: Bounds,
    role: PhantomData<R>,
}

impl<R: Role, const MIN: i64, const MAX: i64> Guarantee<R, MIN, MAX> {
    /// The static bounds (validated: `0 <= MIN <= MAX`).
    pub const STATIC_BOUNDS: Bounds = checked_static_bounds(MIN, MAX);

    /// The guarantee with only its static bounds.
    pub const fn new() -> Self {
        Guarantee {
            bounds: Self::STATIC_BOUNDS,
            role: PhantomData,
        }
    }

    /// Narrows the guarantee at run time to `min..=max`, which must lie inside the static bounds.
    pub fn between(self, min: i64, max: i64) -> Result<Self, ParamError> {
        Ok(Guarantee {
            bounds: checked_runtime_bounds::<R>(Self::STATIC_BOUNDS, min, max)?,
            role: PhantomData,
        })
    }

    /// Narrows the guarantee to exactly `value`.
    pub fn exactly(self, value: i64) -> Result<Self, ParamError> {
        self.between(value, value)
    }

    /// The guaranteed bounds known at run time.
    pub const fn bounds(&self) -> Bounds {
        self.bounds
    }
}

impl<R: Role, const MIN: i64, const MAX: i64> Default for Guarantee<R, MIN, MAX> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Role, const MIN: i64, const MAX: i64> Clone for Guarantee<R, MIN, MAX> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R: Role, const MIN: i64, const MAX: i64> Copy for Guarantee<R, MIN, MAX> {}

/// `k` lies in `MIN..=MAX`.
pub type KRange<const MIN: i64, const MAX: i64> = Guarantee<role::K, MIN, MAX>;
/// `k` is at most `N`.
pub type MaxK<const N: i64> = Guarantee<role::K, 0, N>;
/// Every segment size lies in `MIN..=MAX`.
pub type SegmentSizeRange<const MIN: i64, const MAX: i64> = Guarantee<role::SegmentSize, MIN, MAX>;
/// Every segment holds at least `N` items.
pub type MinSegmentSize<const N: i64> = Guarantee<role::SegmentSize, N, { i64::MAX }>;
/// Every segment holds at most `N` items.
pub type MaxSegmentSize<const N: i64> = Guarantee<role::SegmentSize, 0, N>;
/// The number of segments lies in `MIN..=MAX`.
pub type NumSegmentsRange<const MIN: i64, const MAX: i64> = Guarantee<role::NumSegments, MIN, MAX>;
/// There are at most `N` segments.
pub type MaxNumSegments<const N: i64> = Guarantee<role::NumSegments, 0, N>;
/// A single problem holds at most `N` items.
pub type MaxNumItems<const N: i64> = Guarantee<role::NumItems, 0, N>;
/// All segments together hold `MIN..=MAX` items: sizes temporary storage.
pub type TotalItems<const MIN: i64 = 0, const MAX: i64 = { i64::MAX }> =
    Guarantee<role::TotalItems, MIN, MAX>;
/// No key occurs twice within either input of a set operation (the seed's `Duplicates = false`):
/// the operations partition by Merge Path instead of Balanced Path. A promise; a set operation
/// that sees a repeated key reports it, as it reports unsorted input.
pub type NoDuplicateKeys = Guarantee<role::KeyMultiplicity, 0, 1>;
/// The inputs of a set operation are sorted in the call's order: the operation skips its check
/// (an unsorted input then gives unspecified output, never an out-of-bounds access).
pub type SortedInputs = Guarantee<role::UnsortedPositions, 0, 0>;
