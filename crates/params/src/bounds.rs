//! Closed integer intervals: the currency in which every bound is expressed.

use core::fmt;

/// A closed interval `[min, max]` of `i64` values.
///
/// Bounds describe what is known about a parameter: the static bounds of its type, the runtime
/// bounds a caller supplied, or a guarantee from the environment. Combining knowledge is
/// intersection, so the tightest fact always wins. An interval with `min > max` is *empty*: the
/// facts contradict each other.
///
/// ```
/// use oxicub::params::Bounds;
///
/// let k = Bounds::new(1, 64);
/// let guarantee = Bounds::at_most(8);
/// assert_eq!(k.intersect(guarantee), Bounds::new(1, 8));
/// assert!(Bounds::new(9, 16).intersect(guarantee).is_empty());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Bounds {
    /// Smallest admitted value.
    pub min: i64,
    /// Largest admitted value.
    pub max: i64,
}

impl Bounds {
    /// Every non-negative count: the domain of all numeric parameters in oxicub.
    pub const COUNTS: Bounds = Bounds::new(0, i64::MAX);

    /// The interval `[min, max]` (empty when `min > max`).
    pub const fn new(min: i64, max: i64) -> Self {
        Bounds { min, max }
    }

    /// The single value `value`.
    pub const fn exactly(value: i64) -> Self {
        Bounds::new(value, value)
    }

    /// Every count up to and including `max`.
    pub const fn at_most(max: i64) -> Self {
        Bounds::new(0, max)
    }

    /// Every count from `min` on.
    pub const fn at_least(min: i64) -> Self {
        Bounds::new(min, i64::MAX)
    }

    /// `true` when no value satisfies the bounds (`min > max`).
    pub const fn is_empty(self) -> bool {
        self.min > self.max
    }

    /// `true` when exactly one value satisfies the bounds.
    pub const fn is_exact(self) -> bool {
        self.min == self.max
    }

    /// `true` when `value` lies in the interval.
    pub const fn contains(self, value: i64) -> bool {
        self.min <= value && value <= self.max
    }

    /// `true` when every value of `other` lies in `self` (an empty `other` is inside anything).
    pub const fn encloses(self, other: Bounds) -> bool {
        other.is_empty() || (self.min <= other.min && other.max <= self.max)
    }

    /// The values admitted by both intervals: the tightest combination of two facts.
    pub const fn intersect(self, other: Bounds) -> Bounds {
        Bounds::new(
            if self.min > other.min {
                self.min
            } else {
                other.min
            },
            if self.max < other.max {
                self.max
            } else {
                other.max
            },
        )
    }
}

impl fmt::Display for Bounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: i64, f: &mut fmt::Formatter<'_>| match v {
            i64::MAX => f.write_str("i64::MAX"),
            i64::MIN => f.write_str("i64::MIN"),
            v => write!(f, "{v}"),
        };
        f.write_str("[")?;
        show(self.min, f)?;
        f.write_str(", ")?;
        show(self.max, f)?;
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn display_names_the_extremes() {
        assert_eq!(Bounds::COUNTS.to_string(), "[0, i64::MAX]");
        assert_eq!(Bounds::new(1, 8).to_string(), "[1, 8]");
    }

    proptest! {
        #[test]
        fn intersection_is_exactly_the_common_values(
            a in -50i64..50, b in -50i64..50, c in -50i64..50, d in -50i64..50, v in -60i64..60,
        ) {
            let (x, y) = (Bounds::new(a, b), Bounds::new(c, d));
            let both = x.intersect(y);
            prop_assert_eq!(both.contains(v), x.contains(v) && y.contains(v));
            prop_assert_eq!(both, y.intersect(x));
            prop_assert!(x.encloses(both) && y.encloses(both));
        }
    }
}
