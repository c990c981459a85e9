//! Values and indices in outputs: each value names its source item, so a written value shows
//! which item it came from; poison shows a slot that was not written.

use std::fmt::Debug;

use oxicub_algorithms::DeviceValue;

use crate::cases::POISON_INDEX;

/// A value or index type in a generated call: the value of source item `p` is
/// [`from_source(p)`](FuzzValue::from_source), which [`to_source`](FuzzValue::to_source) reads
/// back; [`poison`](FuzzValue::poison) reads back as no item.
///
/// ```
/// use oxicub_test::fuzz::FuzzValue;
///
/// assert_eq!(f32::from_source(7).to_source(), Some(7));
/// assert_eq!(<u32 as FuzzValue>::poison().to_source(), None);
/// assert!(f64::poison().same_bits(f64::poison()));
/// ```
pub trait FuzzValue: DeviceValue + Debug {
    /// The value of source item `source` (below 2^24).
    fn from_source(source: u64) -> Self;
    /// The source item this value names, `None` for poison or anything else.
    fn to_source(self) -> Option<u64>;
    /// The value outputs start as.
    fn poison() -> Self;
    /// Bitwise equality (NaN poison included).
    fn same_bits(self, other: Self) -> bool;
}

/// Values past any source item of a generated call (which holds fewer than 2^24 items).
const SOURCES: u64 = 1 << 24;

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl FuzzValue for $t {
            fn from_source(source: u64) -> Self {
                source as $t
            }
            fn to_source(self) -> Option<u64> {
                let source = self as i128;
                (0..i128::from(SOURCES)).contains(&source).then_some(source as u64)
            }
            fn poison() -> Self {
                POISON_INDEX as $t
            }
            fn same_bits(self, other: Self) -> bool {
                self == other
            }
        }
    )*};
}
int_value!(u32, u64, i32, i64);

macro_rules! float_value {
    ($($t:ty),*) => {$(
        impl FuzzValue for $t {
            fn from_source(source: u64) -> Self {
                source as $t
            }
            fn to_source(self) -> Option<u64> {
                let integral = self >= 0.0 && self.fract() == 0.0 && self < SOURCES as $t;
                integral.then_some(self as u64)
            }
            fn poison() -> Self {
                <$t>::from_bits(POISON_INDEX as _)
            }
            fn same_bits(self, other: Self) -> bool {
                self.to_bits() == other.to_bits()
            }
        }
    )*};
}
float_value!(f32, f64);

/// Prints `0` (a call's description) if the thread panics while this guard lives: a failed
/// check then shows the call, not only proptest's tape.
///
/// ```
/// let call = "select_keys(..)";
/// let _guard = oxicub_test::fuzz::PrintOnPanic(&call);
/// ```
pub struct PrintOnPanic<'a, T: Debug>(pub &'a T);

impl<T: Debug> Drop for PrintOnPanic<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failing call: {:#?}", self.0);
        }
    }
}
