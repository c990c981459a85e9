//! Parameters that take one of a few discrete options: select direction and sort order.
//!
//! A parameter's *option set* is a type: the options it names are the kernel variants that get
//! compiled. The value itself comes from one of three sources:
//!
//! | kind | type | example |
//! |---|---|---|
//! | static | the option's marker | `direction::Max` |
//! | uniform | [`Choice<Set>`]: one runtime value from `Set` | `Choice::<direction::Either>::new(SelectDirection::Min)?` |
//! | per segment | [`PerSegmentChoice<Set, S>`]: one value per segment from `S` | `PerSegmentChoice::<direction::Either, _>::new(&dirs)` |

use crate::{ParamError, ParamKind};
use core::fmt::{self, Debug, Display};
use core::marker::PhantomData;

/// An enumeration of discrete options, such as [`SelectDirection`].
pub trait Discrete: Copy + Eq + Debug + Display + Send + Sync + 'static {
    /// The parameter's name in signatures and errors.
    const PARAM: &'static str;
    /// Every option, in bit order.
    const ALL: &'static [Self];
    /// The option's bit in an option mask.
    fn bit(self) -> u32;
    /// The option's name.
    fn name(self) -> &'static str;
}

/// Which items top-k selects: the largest or the smallest keys.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(u8)]
pub enum SelectDirection {
    /// The `k` largest keys.
    Max = 0,
    /// The `k` smallest keys.
    Min = 1,
}

/// The order a sort writes its output in.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(u8)]
pub enum SortOrder {
    /// Smallest key first.
    Ascending = 0,
    /// Largest key first.
    Descending = 1,
}

macro_rules! discrete_enum {
    ($ty:ident, $param:literal, [$($variant:ident => $name:literal),*]) => {
        impl Discrete for $ty {
            const PARAM: &'static str = $param;
            const ALL: &'static [Self] = &[$($ty::$variant),*];
            fn bit(self) -> u32 {
                1 << (self as u32)
            }
            fn name(self) -> &'static str {
                match self { $($ty::$variant => $name),* }
            }
        }
        impl Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
discrete_enum!(SelectDirection, "direction", [Max => "max", Min => "min"]);
discrete_enum!(SortOrder, "order", [Ascending => "ascending", Descending => "descending"]);

/// A set of options of one [`Discrete`] enumeration, as a type.
pub trait OptionSet: Copy + Default + Debug + Send + Sync + 'static {
    /// The enumeration the options come from.
    type Option: Discrete;
    /// One bit per option in the set ([`Discrete::bit`]).
    const MASK: u32;

    /// `true` when `option` is in the set.
    fn admits(option: Self::Option) -> bool {
        Self::MASK & option.bit() != 0
    }

    /// The options of the set, for messages: `max, min`.
    fn describe() -> String {
        let names: Vec<&str> = <Self::Option as Discrete>::ALL
            .iter()
            .filter(|o| Self::admits(**o))
            .map(|o| o.name())
            .collect();
        names.join(", ")
    }
}

/// A discrete parameter of an algorithm: which options can occur, and where the value comes from.
///
/// ```
/// use oxicub::params::{direction, DiscreteParam, ParamKind};
///
/// assert_eq!(<direction::Max as DiscreteParam>::KIND, ParamKind::Static);
/// assert_eq!(<direction::Choice as DiscreteParam>::OPTIONS, 0b11);
/// ```
pub trait DiscreteParam {
    /// The enumeration of options.
    type Option: Discrete;
    /// Where the value comes from.
    const KIND: ParamKind;
    /// The options that can occur (and therefore get compiled), one bit each.
    const OPTIONS: u32;
    /// The value when the host knows it.
    fn host_value(&self) -> Option<Self::Option>;
}

/// A discrete parameter over the enumeration `E`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `{E}` parameter",
    label = "this argument takes a `{E}` parameter",
    note = "for a select direction pass `direction::Max`, `direction::Min`, \
            `direction::Choice::new(..)?` or `direction::PerSegment::new(..)`; for a sort order \
            use the `order` module"
)]
pub trait DiscreteParamFor<E: Discrete>: DiscreteParam {}
// Implemented per concrete option set (in `option_module!`), not as a blanket over
// `DiscreteParam<Option = E>`, so a mismatch reports the message above.

/// A runtime value, the same for every segment, drawn from the option set `Set`.
///
/// ```
/// use oxicub::params::{direction, SelectDirection};
///
/// let either = direction::Choice::<direction::Either>::new(SelectDirection::Min)?;
/// assert_eq!(either.get(), SelectDirection::Min);
/// // A set that only compiled `Max` rejects `Min` with an error naming both.
/// let err = direction::Choice::<direction::Max>::new(SelectDirection::Min).unwrap_err();
/// assert_eq!(err.to_string(), "direction = min is not among the compiled options {max}");
/// # Ok::<(), oxicub::params::ParamError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Choice<Set: OptionSet> {
    value: Set::Option,
    set: PhantomData<Set>,
}

impl<Set: OptionSet> Choice<Set> {
    /// The parameter holding `value`, or an error when `Set` does not contain it.
    pub fn new(value: Set::Option) -> Result<Self, ParamError> {
        if !Set::admits(value) {
            return Err(ParamError::OptionNotCompiled {
                param: <Set::Option as Discrete>::PARAM,
                option: value.name(),
                allowed: Set::describe(),
            });
        }
        Ok(Choice {
            value,
            set: PhantomData,
        })
    }

    /// The value.
    pub fn get(&self) -> Set::Option {
        self.value
    }
}

impl<Set: OptionSet> DiscreteParam for Choice<Set> {
    type Option = Set::Option;
    const KIND: ParamKind = ParamKind::Uniform;
    const OPTIONS: u32 = Set::MASK;
    fn host_value(&self) -> Option<Self::Option> {
        Some(self.value)
    }
}

/// One value per segment, read from `S`, each drawn from the option set `Set` (a value outside
/// the set is detected on the device and reported after the launch).
///
/// ```
/// use oxicub::params::{direction, DiscreteParam, ParamKind};
///
/// let dirs = [0u8, 1, 1, 0]; // SelectDirection as u8, one per segment
/// let p = direction::PerSegment::<_>::new(&dirs[..]);
/// assert_eq!(<direction::PerSegment<&[u8]> as DiscreteParam>::KIND, ParamKind::PerSegment);
/// assert_eq!(p.source().len(), 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PerSegmentChoice<Set: OptionSet, S> {
    values: S,
    set: PhantomData<Set>,
}

impl<Set: OptionSet, S> PerSegmentChoice<Set, S> {
    /// The parameter over `values`.
    pub const fn new(values: S) -> Self {
        PerSegmentChoice {
            values,
            set: PhantomData,
        }
    }

    /// Where the values live.
    pub const fn source(&self) -> &S {
        &self.values
    }
}

impl<Set: OptionSet, S> DiscreteParam for PerSegmentChoice<Set, S> {
    type Option = Set::Option;
    const KIND: ParamKind = ParamKind::PerSegment;
    const OPTIONS: u32 = Set::MASK;
    fn host_value(&self) -> Option<Self::Option> {
        None
    }
}

/// Declares a module of option markers for one enumeration: each single option is also a static
/// parameter; `Either` is the set of both.
macro_rules! option_module {
    ($(#[$doc:meta])* $module:ident, $enum:ident, $a:ident, $b:ident) => {
        $(#[$doc])*
        pub mod $module {
            use super::*;

            #[doc = concat!("`", stringify!($enum), "::", stringify!($a), "`, fixed at compile time (also the option set of only that option).")]
            #[derive(Clone, Copy, Default, Debug, PartialEq, Eq, Hash)]
            pub struct $a;
            #[doc = concat!("`", stringify!($enum), "::", stringify!($b), "`, fixed at compile time (also the option set of only that option).")]
            #[derive(Clone, Copy, Default, Debug, PartialEq, Eq, Hash)]
            pub struct $b;
            /// The option set of both options (a runtime choice compiles both variants).
            #[derive(Clone, Copy, Default, Debug, PartialEq, Eq, Hash)]
            pub struct Either;

            /// A runtime choice, the same for every segment (see [`super::Choice`]).
            pub type Choice<Set = Either> = super::Choice<Set>;
            /// A choice per segment (see [`super::PerSegmentChoice`]).
            pub type PerSegment<S, Set = Either> = super::PerSegmentChoice<Set, S>;

            impl OptionSet for $a {
                type Option = $enum;
                const MASK: u32 = 1 << ($enum::$a as u32);
            }
            impl OptionSet for $b {
                type Option = $enum;
                const MASK: u32 = 1 << ($enum::$b as u32);
            }
            impl OptionSet for Either {
                type Option = $enum;
                const MASK: u32 = <$a as OptionSet>::MASK | <$b as OptionSet>::MASK;
            }

            impl DiscreteParamFor<$enum> for $a {}
            impl DiscreteParamFor<$enum> for $b {}
            impl DiscreteParamFor<$enum> for super::Choice<$a> {}
            impl DiscreteParamFor<$enum> for super::Choice<$b> {}
            impl DiscreteParamFor<$enum> for super::Choice<Either> {}
            impl<S> DiscreteParamFor<$enum> for super::PerSegmentChoice<$a, S> {}
            impl<S> DiscreteParamFor<$enum> for super::PerSegmentChoice<$b, S> {}
            impl<S> DiscreteParamFor<$enum> for super::PerSegmentChoice<Either, S> {}

            impl DiscreteParam for $a {
                type Option = $enum;
                const KIND: ParamKind = ParamKind::Static;
                const OPTIONS: u32 = <$a as OptionSet>::MASK;
                fn host_value(&self) -> Option<$enum> {
                    Some($enum::$a)
                }
            }
            impl DiscreteParam for $b {
                type Option = $enum;
                const KIND: ParamKind = ParamKind::Static;
                const OPTIONS: u32 = <$b as OptionSet>::MASK;
                fn host_value(&self) -> Option<$enum> {
                    Some($enum::$b)
                }
            }
        }
    };
}

option_module!(
    /// Select direction options: `Max`, `Min`, `Either`.
    ///
    /// ```
    /// use oxicub::params::{direction, DiscreteParam, SelectDirection};
    /// assert_eq!(direction::Min.host_value(), Some(SelectDirection::Min));
    /// ```
    direction,
    SelectDirection,
    Max,
    Min
);
option_module!(
    /// Sort order options: `Ascending`, `Descending`, `Either`.
    ///
    /// ```
    /// use oxicub::params::{order, DiscreteParam, SortOrder};
    /// assert_eq!(order::Descending.host_value(), Some(SortOrder::Descending));
    /// ```
    order,
    SortOrder,
    Ascending,
    Descending
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choice_accepts_exactly_its_set() {
        for set_mask in [0b01u32, 0b10, 0b11] {
            for d in SelectDirection::ALL {
                let admitted = match set_mask {
                    0b01 => Choice::<direction::Max>::new(*d).is_ok(),
                    0b10 => Choice::<direction::Min>::new(*d).is_ok(),
                    _ => Choice::<direction::Either>::new(*d).is_ok(),
                };
                assert_eq!(admitted, set_mask & d.bit() != 0, "{set_mask:b} {d}");
            }
        }
        assert_eq!(
            Choice::<order::Ascending>::new(SortOrder::Descending),
            Err(ParamError::OptionNotCompiled {
                param: "order",
                option: "descending",
                allowed: "ascending".into()
            })
        );
    }
}
