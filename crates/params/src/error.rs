//! The typed error every runtime check of this crate returns.

use crate::Bounds;

/// Where a violated bound came from, so an error can say which fact was broken.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BoundOrigin {
    /// The static bounds written in the parameter's type (`Uniform<1, 8>`).
    Static,
    /// Runtime bounds the caller attached to the parameter (`.with_bounds(..)`).
    Runtime,
    /// A guarantee given through the environment (option 2 of the parameter proposal).
    Guarantee,
}

impl core::fmt::Display for BoundOrigin {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            BoundOrigin::Static => "its static bounds",
            BoundOrigin::Runtime => "its runtime bounds",
            BoundOrigin::Guarantee => "the environment's guarantee",
        })
    }
}

/// A parameter value or bound that breaks what its type or the environment promised.
///
/// Every variant names the parameter (`k`, `segment_sizes`, ...), the offending value and the
/// bound, so the message alone tells the caller what to change.
///
/// ```
/// use oxicub::params::k;
///
/// let err = k::Uniform::<1, 8>::new(9).unwrap_err();
/// assert_eq!(err.to_string(), "k = 9 is outside its static bounds [1, 8]");
/// ```
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ParamError {
    /// A value lies outside a bound.
    #[error("{param} = {value} is outside {origin} {bounds}")]
    OutOfBounds {
        /// The parameter's name.
        param: &'static str,
        /// The rejected value.
        value: i64,
        /// The bound it violates.
        bounds: Bounds,
        /// Which fact the bound came from.
        origin: BoundOrigin,
    },
    /// A buffer's length is not a whole number of rows (`num_segments::rows`).
    #[error("{len} items are not a whole number of rows of {row}: the last row would be partial")]
    NotWholeRows {
        /// The buffer's length.
        len: usize,
        /// The row's length.
        row: usize,
    },
    /// Runtime bounds with `min > max`.
    #[error("{param}: runtime bounds {bounds} are empty (min > max)")]
    EmptyBounds {
        /// The parameter's name.
        param: &'static str,
        /// The empty interval.
        bounds: Bounds,
    },
    /// Runtime bounds that admit values the static bounds exclude: a runtime bound may only
    /// narrow the static range, never widen it.
    #[error(
        "{param}: runtime bounds {runtime} are wider than the static bounds {static_bounds}; \
         narrow them or widen the type's bounds"
    )]
    WiderThanStatic {
        /// The parameter's name.
        param: &'static str,
        /// The runtime bounds given.
        runtime: Bounds,
        /// The static bounds of the parameter's type.
        static_bounds: Bounds,
    },
    /// The parameter's bounds and a guarantee of the environment have no value in common.
    #[error(
        "{param}: the parameter admits {param_bounds} but the environment guarantees \
         {guarantee}; no value satisfies both"
    )]
    ContradictsGuarantee {
        /// The parameter's name.
        param: &'static str,
        /// The parameter's own (static and runtime) bounds.
        param_bounds: Bounds,
        /// The environment's guarantee for the same parameter.
        guarantee: Bounds,
    },
    /// Two guarantees for the same parameter have no value in common.
    #[error("{param}: the environment's guarantees contradict each other (together they admit {bounds})")]
    ContradictoryGuarantees {
        /// The parameter's name.
        param: &'static str,
        /// The empty intersection of the guarantees.
        bounds: Bounds,
    },
    /// A discrete option that the parameter's type did not compile in.
    #[error("{param} = {option} is not among the compiled options {{{allowed}}}")]
    OptionNotCompiled {
        /// The parameter's name.
        param: &'static str,
        /// The rejected option.
        option: &'static str,
        /// The options the type admits, comma separated.
        allowed: String,
    },
}

impl ParamError {
    /// The name of the parameter the error is about.
    ///
    /// ```
    /// use oxicub::params::segment_size;
    /// let err = segment_size::Uniform::<1, 256>::new(0).unwrap_err();
    /// assert_eq!(err.param(), "segment_sizes");
    /// ```
    pub fn param(&self) -> &'static str {
        match self {
            ParamError::OutOfBounds { param, .. }
            | ParamError::EmptyBounds { param, .. }
            | ParamError::WiderThanStatic { param, .. }
            | ParamError::ContradictsGuarantee { param, .. }
            | ParamError::ContradictoryGuarantees { param, .. }
            | ParamError::OptionNotCompiled { param, .. } => param,
            ParamError::NotWholeRows { .. } => "num_segments",
        }
    }
}
