//! A predicted error: the variant, the argument it names and its numbers.

use oxicub_algorithms::Error;
use oxicub_params::{BoundOrigin, Bounds, ParamError};

/// An error the oracle predicts: the [`Error`] variant with the argument it names and every
/// number it carries (messages and the origin of a violated bound are not compared).
///
/// ```
/// use oxicub_algorithms::Error;
/// use oxicub_test::fuzz::Expected;
///
/// let error = Error::BufferTooSmall { arg: "out_keys", len: 2, required: 3, required_from: "k" };
/// assert!(Expected::BufferTooSmall { arg: "out_keys", len: 2, required: 3 }.matches(&error));
/// assert!(!Expected::BufferTooSmall { arg: "out_values", len: 2, required: 3 }.matches(&error));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// [`Error::InvalidArgument`].
    InvalidArgument {
        /// The argument.
        arg: &'static str,
    },
    /// [`Error::LengthMismatch`].
    LengthMismatch {
        /// The buffer.
        arg: &'static str,
        /// Its length.
        actual: usize,
        /// The length it must have.
        expected: usize,
    },
    /// [`Error::BufferTooSmall`].
    BufferTooSmall {
        /// The buffer.
        arg: &'static str,
        /// Its length.
        len: usize,
        /// The length it needs.
        required: usize,
    },
    /// [`Error::InvalidSegment`].
    InvalidSegment {
        /// The segment.
        segment: u64,
        /// The per-segment argument at fault.
        arg: &'static str,
        /// Its value for that segment.
        value: i64,
    },
    /// [`Error::Param`] with [`ParamError::OutOfBounds`].
    OutOfBounds {
        /// The parameter.
        param: &'static str,
        /// Its value.
        value: i64,
        /// The bounds it breaks.
        bounds: Bounds,
        /// Where those bounds come from.
        origin: BoundOrigin,
    },
    /// [`Error::Param`] with [`ParamError::ContradictsGuarantee`].
    ContradictsGuarantee {
        /// The parameter.
        param: &'static str,
        /// Its own bounds.
        param_bounds: Bounds,
        /// The environment's guarantee.
        guarantee: Bounds,
    },
    /// [`Error::Param`] with [`ParamError::ContradictoryGuarantees`].
    ContradictoryGuarantees {
        /// The parameter.
        param: &'static str,
        /// The empty intersection of its guarantees.
        bounds: Bounds,
    },
}

impl Expected {
    /// Whether `error` is this one.
    pub fn matches(&self, error: &Error) -> bool {
        match (self, error) {
            (Expected::InvalidArgument { arg }, Error::InvalidArgument { arg: a, .. }) => arg == a,
            (
                Expected::LengthMismatch {
                    arg,
                    actual,
                    expected,
                },
                Error::LengthMismatch {
                    arg: a,
                    actual: b,
                    expected: c,
                    ..
                },
            ) => (arg, actual, expected) == (a, b, c),
            (
                Expected::BufferTooSmall { arg, len, required },
                Error::BufferTooSmall {
                    arg: a,
                    len: b,
                    required: c,
                    ..
                },
            ) => (arg, len, required) == (a, b, c),
            (
                Expected::InvalidSegment {
                    segment,
                    arg,
                    value,
                },
                Error::InvalidSegment {
                    segment: s,
                    arg: a,
                    value: v,
                    ..
                },
            ) => (segment, arg, value) == (s, a, v),
            (expected, Error::Param(param)) => expected.matches_param(param),
            _ => false,
        }
    }

    fn matches_param(&self, error: &ParamError) -> bool {
        match (self, error) {
            (
                Expected::OutOfBounds {
                    param,
                    value,
                    bounds,
                    origin,
                },
                ParamError::OutOfBounds {
                    param: p,
                    value: v,
                    bounds: b,
                    origin: o,
                },
            ) => (param, value, bounds, origin) == (p, v, b, o),
            (
                Expected::ContradictsGuarantee {
                    param,
                    param_bounds,
                    guarantee,
                },
                ParamError::ContradictsGuarantee {
                    param: p,
                    param_bounds: b,
                    guarantee: g,
                },
            ) => (param, param_bounds, guarantee) == (p, b, g),
            (
                Expected::ContradictoryGuarantees { param, bounds },
                ParamError::ContradictoryGuarantees {
                    param: p,
                    bounds: b,
                },
            ) => (param, bounds) == (p, b),
            _ => false,
        }
    }

    /// Asserts that `result` is this error (`what` names the call in the message).
    ///
    /// # Panics
    ///
    /// When `result` is `Ok` or another error.
    pub fn assert_is<T: std::fmt::Debug>(&self, what: &str, result: &Result<T, Error>) {
        match result {
            Err(error) if self.matches(error) => {}
            Err(error) => panic!("{what}: expected {self:?}, got {error:?}"),
            Ok(value) => panic!("{what}: expected {self:?}, got Ok({value:?})"),
        }
    }
}

/// Asserts that `got` is `expected`: `None` (`Ok`) or the predicted error.
pub(crate) fn assert_outcome(what: &str, expected: &Option<Expected>, got: &Result<(), Error>) {
    match expected {
        None => {
            if let Err(error) = got {
                panic!("{what}: expected Ok, got {error:?}");
            }
        }
        Some(expected) => expected.assert_is(what, got),
    }
}
