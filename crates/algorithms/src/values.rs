//! What travels with the keys: a caller's values ([`DeviceValue`]s) or the keys' source indices
//! ([`SourceIndex`]).

use crate::backend::DeviceValue;

mod sealed {
    pub trait SourceIndex {}
    impl SourceIndex for u32 {}
    impl SourceIndex for i32 {}
    impl SourceIndex for u64 {}
    impl SourceIndex for i64 {}
}

/// The type of a source index written by the `*_indices` functions: `u32`, `i32` (what most
/// engines hold), `u64` or `i64` (PyTorch's index type). With `u32` the indexed range must have
/// at most `2^32` elements, with `i32` at most `2^31` (checked before anything runs).
///
/// ```
/// use oxicub::SourceIndex;
/// assert_eq!(<u32 as SourceIndex>::MAX_ITEMS, 1 << 32);
/// assert_eq!(<i32 as SourceIndex>::MAX_ITEMS, 1 << 31);
/// assert_eq!(i64::from_index(7), 7);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hold source indices",
    label = "an index type",
    note = "source indices are written as `u32`, `i32`, `u64` or `i64` (PyTorch's index type)"
)]
pub trait SourceIndex: sealed::SourceIndex + DeviceValue {
    /// The largest number of items whose indices this type can hold.
    const MAX_ITEMS: u64;
    /// The index `index` as this type (`index < MAX_ITEMS`).
    fn from_index(index: u64) -> Self;
    /// The bits of `value` as this type (the low bits of the result), when it holds it: a
    /// fill value (`-1`, say) need not be an index.
    fn fill_bits(value: i64) -> Option<u64>;
    /// This index as a `u64` (a negative one wraps; the kernels never write one).
    #[doc(hidden)]
    fn to_index(self) -> u64;
}

impl SourceIndex for u32 {
    const MAX_ITEMS: u64 = 1 << 32;
    fn to_index(self) -> u64 {
        u64::from(self)
    }
    fn from_index(index: u64) -> u32 {
        index as u32
    }
    fn fill_bits(value: i64) -> Option<u64> {
        u32::try_from(value).ok().map(u64::from)
    }
}

// The kernels write a 4-byte index as its 32 bits: below 2^31, an i32's are a u32's.
impl SourceIndex for i32 {
    const MAX_ITEMS: u64 = 1 << 31;
    fn to_index(self) -> u64 {
        u64::from(self as u32)
    }
    fn from_index(index: u64) -> i32 {
        index as i32
    }
    fn fill_bits(value: i64) -> Option<u64> {
        i32::try_from(value).ok().map(|v| u64::from(v as u32))
    }
}

impl SourceIndex for u64 {
    const MAX_ITEMS: u64 = u64::MAX;
    fn to_index(self) -> u64 {
        self
    }
    fn from_index(index: u64) -> u64 {
        index
    }
    fn fill_bits(value: i64) -> Option<u64> {
        u64::try_from(value).ok()
    }
}

impl SourceIndex for i64 {
    const MAX_ITEMS: u64 = i64::MAX as u64;
    fn to_index(self) -> u64 {
        self as u64
    }
    fn from_index(index: u64) -> i64 {
        index as i64
    }
    fn fill_bits(value: i64) -> Option<u64> {
        Some(value as u64)
    }
}

/// The values carried with the keys: read from a buffer, or the source indices.
#[doc(hidden)]
pub enum ValuesIn<S, V> {
    /// Keys only.
    None,
    /// `values[i]` goes with `keys[i]`.
    Copy(S),
    /// `index(i)` goes with `keys[i]`.
    Index(fn(u64) -> V),
}

/// Sort and set-operation values are any padding-free type of up to 8 bytes (the kernels move
/// them as one word): a compile-time check of `V`.
pub(crate) const fn check_sort_value_width<V>() {
    const {
        assert!(
            std::mem::size_of::<V>() <= 8,
            "oxicub: sort and set-operation values must be at most 8 bytes (u8 .. u64, f32, \
             [u32; 2], ...)"
        )
    }
}

/// The top-k kernels carry a value as one 4- or 8-byte word: a compile-time check of `V`.
pub(crate) const fn check_topk_value_width<V>() {
    const {
        assert!(
            std::mem::size_of::<V>() == 4 || std::mem::size_of::<V>() == 8,
            "oxicub: top-k values must be 4 or 8 bytes (u32, f32, u64, i64, [u32; 2], ...)"
        )
    }
}
