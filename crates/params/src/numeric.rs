//! The four sources of a numeric parameter's value, and the traits algorithms consume.
//!
//! | kind | type | where the value lives | bound |
//! |---|---|---|---|
//! | static | [`Static<R, V>`] | in the type | exact, at compile time |
//! | uniform | [`Uniform<R, MIN, MAX>`] | one host value | `MIN..=MAX` at compile time, value checked on construction |
//! | per segment | [`PerSegment<R, S, MIN, MAX>`] | one value per segment in `S` (host or device) | static, plus optional runtime bounds |
//! | deferred | [`Deferred<R, S, MIN, MAX>`] | one value on the device, read in stream order | static, plus optional runtime bounds |
//!
//! All four implement [`Param`], the single trait dispatch reads: the tightest static bounds as
//! associated consts (so dispatch can branch in `const` context and compile only what the bounds
//! allow) and the tightest runtime bounds known on the host.

use crate::role::Role;
use crate::{BoundOrigin, Bounds, ParamError};
use core::marker::PhantomData;

/// Which of the four sources a parameter's value comes from.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ParamKind {
    /// Known exactly at compile time.
    Static,
    /// One runtime value, known on the host, the same for every segment.
    Uniform,
    /// One runtime value per segment.
    PerSegment,
    /// One runtime value that lives on the device and is read in stream order.
    Deferred,
}

/// Checks static bounds in `const` context: the one place a type's `MIN`/`MAX` are validated.
///
/// Called from associated consts, so a bad type is rejected when it is used (a post-monomorphization
/// error that `cargo build` reports; `cargo check` may not).
pub(crate) const fn checked_static_bounds(min: i64, max: i64) -> Bounds {
    assert!(
        min >= 0,
        "oxicub: a parameter's static MIN is negative, but every oxicub parameter is a count: \
         use a lower bound of 0 or more"
    );
    assert!(
        min <= max,
        "oxicub: a parameter's static bounds are empty (MIN > MAX): write the smaller bound \
         first, e.g. `Uniform<1, 8>`"
    );
    Bounds::new(min, max)
}

/// Validates caller-supplied runtime bounds against static ones.
pub(crate) fn checked_runtime_bounds<R: Role>(
    static_bounds: Bounds,
    min: i64,
    max: i64,
) -> Result<Bounds, ParamError> {
    let runtime = Bounds::new(min, max);
    if runtime.is_empty() {
        return Err(ParamError::EmptyBounds {
            param: R::NAME,
            bounds: runtime,
        });
    }
    if !static_bounds.encloses(runtime) {
        return Err(ParamError::WiderThanStatic {
            param: R::NAME,
            runtime,
            static_bounds,
        });
    }
    Ok(runtime)
}

/// A numeric parameter of an algorithm: what is known about its value, statically and at run time.
///
/// This is the one trait dispatch consumes. `STATIC_MIN`/`STATIC_MAX` are the bounds of the type
/// (evaluating them validates the type, so an empty or negative range fails to compile);
/// [`runtime_bounds`](Param::runtime_bounds) is the tightest interval known on the host.
/// Environment guarantees are merged on top of both by `oxicub-env`.
///
/// ```
/// use oxicub::params::{k, Param, ParamKind};
///
/// fn describe<P: Param>(p: &P) -> String {
///     format!("{:?} {} in {}", P::KIND, P::NAME, p.runtime_bounds())
/// }
/// assert_eq!(describe(&k::Static::<8>::new()), "Static k in [8, 8]");
/// assert_eq!(describe(&k::Uniform::<1, 64>::new(5)?), "Uniform k in [5, 5]");
/// # Ok::<(), oxicub::params::ParamError>(())
/// ```
pub trait Param {
    /// The argument this parameter feeds.
    type Role: Role;
    /// Where the value comes from.
    const KIND: ParamKind;
    /// The bounds the type promises, validated at compile time.
    const STATIC_BOUNDS: Bounds;
    /// The parameter's name (`k`, `segment_sizes`, ...).
    const NAME: &'static str = <Self::Role as Role>::NAME;
    /// Smallest value the type admits.
    const STATIC_MIN: i64 = Self::STATIC_BOUNDS.min;
    /// Largest value the type admits.
    const STATIC_MAX: i64 = Self::STATIC_BOUNDS.max;
    /// `true` when the type admits exactly one value.
    const IS_EXACT: bool = Self::STATIC_BOUNDS.is_exact();

    /// The tightest bounds known on the host: the value itself for static and uniform parameters,
    /// the caller's runtime bounds (or the static ones) for per-segment and deferred parameters.
    fn runtime_bounds(&self) -> Bounds;

    /// The value when the host knows it (static and uniform parameters).
    fn host_value(&self) -> Option<i64>;
}

/// A parameter for the argument `R`.
///
/// Algorithms bound each argument with `ParamFor<role>`, so a parameter built for another argument
/// is rejected at compile time with a message naming both.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a parameter for `{R}`",
    label = "this argument takes a `{R}` parameter",
    note = "build it from the argument's own module: `oxicub::params::k::Static::<8>::new()`, \
            `segment_size::Uniform::<1, 256>::new(n)?`, `num_segments::uniform(n)?`, ..."
)]
pub trait ParamFor<R: Role>: Param {}

// Implemented per kind rather than as a blanket over `Param<Role = R>`: a blanket impl would
// match every parameter and then fail on the role, which rustc reports as a bare type mismatch
// instead of the message above.
impl<R: Role, const V: i64> ParamFor<R> for Static<R, V> {}
impl<R: Role, const MIN: i64, const MAX: i64> ParamFor<R> for Uniform<R, MIN, MAX> {}
impl<R: Role, S, const MIN: i64, const MAX: i64> ParamFor<R> for PerSegment<R, S, MIN, MAX> {}
impl<R: Role, S, const MIN: i64, const MAX: i64> ParamFor<R> for Deferred<R, S, MIN, MAX> {}

/// A parameter that holds one value for the whole call (static, uniform or deferred).
#[diagnostic::on_unimplemented(
    message = "`{Self}` gives one value per segment, but this argument takes a single value",
    label = "expected one value for the whole call",
    note = "pass `Static::<N>`, `uniform(n)?` (a host value) or `Deferred::new(..)` (a value on \
            the device) from the argument's module instead of `PerSegment`"
)]
pub trait SingleValue: Param {}

/// A parameter whose value the host knows before the launch (static or uniform).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is only known on the device, but this argument must be known on the host",
    label = "expected a host value",
    note = "pass `Static::<N>` or `uniform(n)?` from the argument's module"
)]
pub trait HostValue: SingleValue {
    /// The value.
    fn value(&self) -> i64;
}

/// A value known exactly at compile time: `k::Static<8>`.
///
/// ```
/// use oxicub::params::{k, Param};
/// const K: i64 = k::Static::<8>::STATIC_MAX;
/// assert_eq!(K, 8);
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Static<R: Role, const V: i64>(PhantomData<R>);

impl<R: Role, const V: i64> Static<R, V> {
    /// The compile-time value.
    pub const VALUE: i64 = checked_static_bounds(V, V).min;

    /// The parameter (zero-sized).
    pub const fn new() -> Self {
        let _validated = Self::VALUE;
        Static(PhantomData)
    }
}

impl<R: Role, const V: i64> Default for Static<R, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Role, const V: i64> Clone for Static<R, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R: Role, const V: i64> Copy for Static<R, V> {}

impl<R: Role, const V: i64> Param for Static<R, V> {
    type Role = R;
    const KIND: ParamKind = ParamKind::Static;
    const STATIC_BOUNDS: Bounds = Bounds::exactly(Self::VALUE);

    fn runtime_bounds(&self) -> Bounds {
        Self::STATIC_BOUNDS
    }

    fn host_value(&self) -> Option<i64> {
        Some(V)
    }
}
impl<R: Role, const V: i64> SingleValue for Static<R, V> {}
impl<R: Role, const V: i64> HostValue for Static<R, V> {
    fn value(&self) -> i64 {
        V
    }
}

/// One runtime value on the host, with compile-time bounds `MIN..=MAX`: `k::Uniform<1, 8>`.
///
/// The value is checked on construction, so a `Uniform` always holds a value inside its bounds.
///
/// ```
/// use oxicub::params::k;
///
/// let k = k::Uniform::<1, 8>::new(4)?;
/// assert_eq!(k.get(), 4);
/// assert!(k::Uniform::<1, 8>::new(9).is_err());
/// # Ok::<(), oxicub::params::ParamError>(())
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Uniform<R: Role, const MIN: i64 = 0, const MAX: i64 = { i64::MAX }> {
    value: i64,
    role: PhantomData<R>,
}

impl<R: Role, const MIN: i64, const MAX: i64> Uniform<R, MIN, MAX> {
    /// The type's static bounds (validated: `0 <= MIN <= MAX`).
    pub const BOUNDS: Bounds = checked_static_bounds(MIN, MAX);

    /// The parameter holding `value`, or an error naming the bound it breaks.
    pub fn new(value: i64) -> Result<Self, ParamError> {
        if !Self::BOUNDS.contains(value) {
            return Err(ParamError::OutOfBounds {
                param: R::NAME,
                value,
                bounds: Self::BOUNDS,
                origin: BoundOrigin::Static,
            });
        }
        Ok(Uniform {
            value,
            role: PhantomData,
        })
    }

    /// The value.
    pub const fn get(&self) -> i64 {
        self.value
    }
}

impl<R: Role, const MIN: i64, const MAX: i64> Clone for Uniform<R, MIN, MAX> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R: Role, const MIN: i64, const MAX: i64> Copy for Uniform<R, MIN, MAX> {}

impl<R: Role, const MIN: i64, const MAX: i64> Param for Uniform<R, MIN, MAX> {
    type Role = R;
    const KIND: ParamKind = ParamKind::Uniform;
    const STATIC_BOUNDS: Bounds = Self::BOUNDS;

    fn runtime_bounds(&self) -> Bounds {
        Bounds::exactly(self.value)
    }

    fn host_value(&self) -> Option<i64> {
        Some(self.value)
    }
}
impl<R: Role, const MIN: i64, const MAX: i64> SingleValue for Uniform<R, MIN, MAX> {}
impl<R: Role, const MIN: i64, const MAX: i64> HostValue for Uniform<R, MIN, MAX> {
    fn value(&self) -> i64 {
        self.value
    }
}

/// Declares a parameter kind whose values live elsewhere (a host or device buffer) and whose host
/// knowledge is a pair of runtime bounds inside the static ones.
macro_rules! runtime_bounded_param {
    ($(#[$doc:meta])* $name:ident, $field:ident, $kind:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name<R: Role, S, const MIN: i64 = 0, const MAX: i64 = { i64::MAX }> {
            $field: S,
            bounds: Bounds,
            role: PhantomData<R>,
        }

        impl<R: Role, S, const MIN: i64, const MAX: i64> $name<R, S, MIN, MAX> {
            /// The type's static bounds (validated: `0 <= MIN <= MAX`).
            pub const BOUNDS: Bounds = checked_static_bounds(MIN, MAX);

            /// The parameter over `source`; its runtime bounds are the static ones until
            /// [`with_bounds`](Self::with_bounds) narrows them.
            pub const fn new(source: S) -> Self {
                $name {
                    $field: source,
                    bounds: Self::BOUNDS,
                    role: PhantomData,
                }
            }

            /// Narrows the runtime bounds to `min..=max`; they must be non-empty and lie inside the
            /// static bounds. Dispatch trusts them to pick kernels, and the kernels check each
            /// value against them on the device.
            pub fn with_bounds(self, min: i64, max: i64) -> Result<Self, ParamError> {
                let bounds = checked_runtime_bounds::<R>(Self::BOUNDS, min, max)?;
                Ok($name { bounds, ..self })
            }

            /// Where the values live.
            pub const fn source(&self) -> &S {
                &self.$field
            }

            /// The value source, giving up the bounds.
            pub fn into_source(self) -> S {
                self.$field
            }
        }

        impl<R: Role, S, const MIN: i64, const MAX: i64> Param for $name<R, S, MIN, MAX> {
            type Role = R;
            const KIND: ParamKind = ParamKind::$kind;
            const STATIC_BOUNDS: Bounds = Self::BOUNDS;

            fn runtime_bounds(&self) -> Bounds {
                self.bounds
            }

            fn host_value(&self) -> Option<i64> {
                None
            }
        }
    };
}

runtime_bounded_param!(
    /// One value per segment, read from `S` (a host slice, or a device buffer in
    /// `oxicub-algorithms`), with static bounds `MIN..=MAX` and optional runtime bounds.
    ///
    /// ```
    /// use oxicub::params::{k, Bounds, Param};
    ///
    /// let per_segment = [2i64, 8, 4];
    /// let k = k::PerSegment::<_, 1, 16>::new(&per_segment[..]).with_bounds(2, 8)?;
    /// assert_eq!(k.runtime_bounds(), Bounds::new(2, 8));
    /// assert!(k::PerSegment::<_, 1, 16>::new(&per_segment[..]).with_bounds(0, 8).is_err());
    /// # Ok::<(), oxicub::params::ParamError>(())
    /// ```
    PerSegment,
    values,
    PerSegment
);

runtime_bounded_param!(
    /// One value that lives on the device and is read in stream order (for example produced by
    /// a previous kernel), with static bounds `MIN..=MAX` and optional runtime bounds. It lets
    /// launches follow each other with no host synchronisation.
    ///
    /// ```
    /// use oxicub::params::{num_segments, Param, ParamKind};
    ///
    /// // `S` is the device location in `oxicub-algorithms`; any value source works here.
    /// let n = num_segments::Deferred::<_, 1, 4096>::new("device pointer").with_bounds(1, 1024)?;
    /// assert_eq!(<num_segments::Deferred<&str, 1, 4096> as Param>::KIND, ParamKind::Deferred);
    /// assert_eq!(n.host_value(), None);
    /// # Ok::<(), oxicub::params::ParamError>(())
    /// ```
    Deferred,
    value,
    Deferred
);

impl<R: Role, S, const MIN: i64, const MAX: i64> SingleValue for Deferred<R, S, MIN, MAX> {}

/// Declares the per-role module of aliases: `k::Static<8>`, `k::Uniform<1, 8>`, ...
macro_rules! role_module {
    ($(#[$doc:meta])* $module:ident, $role:ident $(, { $($extra:item)* })?) => {
        $(#[$doc])*
        pub mod $module {
            use crate::role::$role as R;

            /// A compile-time value (see [`crate::Static`]).
            pub type Static<const V: i64> = crate::Static<R, V>;
            /// One host value with static bounds (see [`crate::Uniform`]).
            pub type Uniform<const MIN: i64 = 0, const MAX: i64 = { i64::MAX }> =
                crate::Uniform<R, MIN, MAX>;
            /// One value per segment (see [`crate::PerSegment`]).
            pub type PerSegment<S, const MIN: i64 = 0, const MAX: i64 = { i64::MAX }> =
                crate::PerSegment<R, S, MIN, MAX>;
            /// One value on the device, read in stream order (see [`crate::Deferred`]).
            pub type Deferred<S, const MIN: i64 = 0, const MAX: i64 = { i64::MAX }> =
                crate::Deferred<R, S, MIN, MAX>;

            /// One host value with no static bounds beyond being a count.
            ///
            /// Expression paths do not apply the aliases' default bounds, so this is the short
            /// form of `<Uniform>::new(value)`.
            pub fn uniform(value: i64) -> Result<Uniform, crate::ParamError> {
                Uniform::new(value)
            }

            $($($extra)*)?
        }
    };
}

role_module!(
    /// `k`: how many items top-k returns.
    ///
    /// ```
    /// use oxicub::params::k;
    /// let k = k::uniform(16)?;
    /// assert_eq!(k.get(), 16);
    /// # Ok::<(), oxicub::params::ParamError>(())
    /// ```
    k,
    K
);
role_module!(
    /// `segment_sizes`: the size of each segment.
    ///
    /// ```
    /// use oxicub::params::segment_size;
    /// assert!(segment_size::Uniform::<1, 256>::new(64).is_ok());
    /// ```
    segment_size,
    SegmentSize
);
role_module!(
    /// `num_segments`: how many segments a call processes (a single value: no `PerSegment`
    /// form is accepted by any algorithm).
    ///
    /// ```
    /// use oxicub::params::num_segments;
    /// assert_eq!(num_segments::uniform(4096)?.get(), 4096);
    /// # Ok::<(), oxicub::params::ParamError>(())
    /// ```
    num_segments,
    NumSegments,
    {
        /// The number of rows of a `[rows x row]` matrix held in `len` items: `len / row`,
        /// when that is a whole number ([`ParamError::NotWholeRows`](crate::ParamError::NotWholeRows)
        /// otherwise, and for rows of no item), so a `[tokens x experts]` buffer whose length
        /// is off by a partial row is refused rather than its tail ignored.
        ///
        /// ```
        /// use oxicub::params::num_segments;
        /// assert_eq!(num_segments::rows(64 * 256, 256)?.get(), 64);
        /// assert!(num_segments::rows(64 * 256 + 3, 256).is_err());
        /// # Ok::<(), oxicub::params::ParamError>(())
        /// ```
        pub fn rows(len: usize, row: usize) -> Result<Uniform, crate::ParamError> {
            if row == 0 || len % row != 0 {
                return Err(crate::ParamError::NotWholeRows { len, row });
            }
            let rows = i64::try_from(len / row).map_err(|_| crate::ParamError::NotWholeRows {
                len,
                row,
            })?;
            Uniform::new(rows)
        }
    }
);
role_module!(
    /// `experts`: how many experts a MoE router chooses among.
    ///
    /// ```
    /// use oxicub::params::experts;
    /// assert_eq!(experts::Static::<256>::VALUE, 256);
    /// ```
    experts,
    Experts
);
role_module!(
    /// `groups`: how many groups a MoE router's experts form (1: no groups).
    ///
    /// ```
    /// use oxicub::params::groups;
    /// assert_eq!(groups::Static::<8>::VALUE, 8);
    /// ```
    groups,
    Groups
);
role_module!(
    /// `top_groups`: how many groups a MoE router keeps per token.
    ///
    /// ```
    /// use oxicub::params::top_groups;
    /// assert_eq!(top_groups::uniform(4)?.get(), 4);
    /// # Ok::<(), oxicub::params::ParamError>(())
    /// ```
    top_groups,
    TopGroups
);
role_module!(
    /// `num_items`: the length of a single-problem input.
    ///
    /// ```
    /// use oxicub::params::num_items;
    /// assert!(num_items::uniform(-1).is_err());
    /// ```
    num_items,
    NumItems
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{k, role};
    use proptest::prelude::*;

    #[test]
    fn static_bounds_are_exact() {
        assert_eq!(<k::Static<8> as Param>::STATIC_BOUNDS, Bounds::exactly(8));
        const { assert!(<k::Static<8> as Param>::IS_EXACT) };
        const { assert!(!<k::Uniform<1, 8> as Param>::IS_EXACT) };
        assert_eq!(<k::Uniform as Param>::STATIC_BOUNDS, Bounds::COUNTS);
    }

    #[test]
    fn the_error_names_parameter_value_and_bound() {
        let err = crate::segment_size::Uniform::<1, 256>::new(257).unwrap_err();
        assert_eq!(
            err,
            ParamError::OutOfBounds {
                param: "segment_sizes",
                value: 257,
                bounds: Bounds::new(1, 256),
                origin: BoundOrigin::Static,
            }
        );
        assert_eq!(
            err.to_string(),
            "segment_sizes = 257 is outside its static bounds [1, 256]"
        );
    }

    #[test]
    fn runtime_bounds_must_be_non_empty_and_inside_static() {
        let p = k::PerSegment::<(), 1, 16>::new(());
        assert_eq!(p.runtime_bounds(), Bounds::new(1, 16));
        assert!(matches!(
            p.with_bounds(5, 4),
            Err(ParamError::EmptyBounds { param: "k", .. })
        ));
        assert!(matches!(
            p.with_bounds(1, 17),
            Err(ParamError::WiderThanStatic { param: "k", .. })
        ));
        assert_eq!(
            p.with_bounds(2, 2).map(|p| p.runtime_bounds()),
            Ok(Bounds::exactly(2))
        );
    }

    proptest! {
        #[test]
        fn uniform_accepts_exactly_the_static_range(v in -10i64..300) {
            let r = Uniform::<role::K, 1, 256>::new(v);
            prop_assert_eq!(r.is_ok(), (1..=256).contains(&v));
            if let Ok(p) = r {
                prop_assert_eq!(p.runtime_bounds(), Bounds::exactly(v));
                prop_assert_eq!(p.host_value(), Some(v));
            } else {
                let named = matches!(
                    r,
                    Err(ParamError::OutOfBounds { param: "k", value, .. }) if value == v
                );
                prop_assert!(named);
            }
        }

        #[test]
        fn runtime_bounds_accepted_iff_inside_static(a in -5i64..40, b in -5i64..40) {
            let r = Deferred::<role::NumSegments, (), 0, 32>::new(()).with_bounds(a, b);
            let ok = a <= b && a >= 0 && b <= 32;
            prop_assert_eq!(r.is_ok(), ok);
            if let Ok(p) = r {
                prop_assert_eq!(p.runtime_bounds(), Bounds::new(a, b));
            }
        }
    }
}
