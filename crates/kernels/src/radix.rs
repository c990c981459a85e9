//! Radix key transforms shared by every algorithm.
//!
//! A radix transform maps a key onto unsigned bits ([`RadixKey::Bits`]) whose unsigned order is
//! the key's order, so radix-based algorithms (histograms, radix select, radix sort) can work on
//! digits of plain unsigned integers. The CUDA side (`cuda/core/radix.cuh`) implements the same
//! transform; the GPU tests compare the two bit for bit.
//!
//! # Policy
//!
//! * Unsigned integers: identity.
//! * Signed integers (two's complement): the sign bit is flipped.
//! * IEEE floats ([`f16`](struct@f16), [`bf16`], [`f32`], [`f64`]): a negative value has all its bits
//!   inverted, a non-negative value has its sign bit set. The order is
//!   `-inf < negatives < -0.0 < +0.0 < positives < +inf`.
//! * **Signed zeros stay distinct**: `-0.0` and `+0.0` map to two adjacent codes, `-0.0` just
//!   below `+0.0`. (A caller that wants them equal can canonicalise before the call.)
//! * **NaN**: every NaN, of either sign and with any payload, maps to one code, all ones, above
//!   `+inf`. So a "max" selection ranks NaN first and a "min" selection ranks it last, and all
//!   NaNs tie with each other. Decoding that code gives the positive quiet NaN whose mantissa
//!   bits are all set; [`RadixKey::from_radix`] of [`RadixKey::to_radix`] is therefore the
//!   identity on every bit pattern except NaNs, which come back as that canonical NaN.
//!
//! ```
//! use oxicub::kernels::radix::RadixKey;
//!
//! assert!((-0.0f32).to_radix() < 0.0f32.to_radix());
//! assert!(f32::INFINITY.to_radix() < f32::NAN.to_radix());
//! assert_eq!((-f32::NAN).to_radix(), f32::NAN.to_radix());
//! assert_eq!((-5i32).to_radix(), 0x7FFF_FFFB);
//! assert_eq!(f64::from_radix(2.5f64.to_radix()), 2.5);
//! ```

use std::fmt;

use half::{bf16, f16};

/// The element types a radix-sortable key can have. Names the key type in a
/// [`KernelSpec`](crate::KernelSpec) and in error messages.
///
/// ```
/// use oxicub::kernels::radix::{KeyType, RadixKey};
///
/// assert_eq!(<f32 as RadixKey>::KEY_TYPE, KeyType::F32);
/// assert_eq!(KeyType::BF16.bits(), 16);
/// assert_eq!(KeyType::I64.to_string(), "i64");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyType {
    /// `u8`
    U8,
    /// `u16`
    U16,
    /// `u32`
    U32,
    /// `u64`
    U64,
    /// `i8`
    I8,
    /// `i16`
    I16,
    /// `i32`
    I32,
    /// `i64`
    I64,
    /// [`half::f16`] (IEEE binary16)
    F16,
    /// [`half::bf16`] (bfloat16)
    BF16,
    /// `f32`
    F32,
    /// `f64`
    F64,
}

impl KeyType {
    /// Every key type, in declaration order.
    pub const ALL: [KeyType; 12] = [
        KeyType::U8,
        KeyType::U16,
        KeyType::U32,
        KeyType::U64,
        KeyType::I8,
        KeyType::I16,
        KeyType::I32,
        KeyType::I64,
        KeyType::F16,
        KeyType::BF16,
        KeyType::F32,
        KeyType::F64,
    ];

    /// Width of the key (and of its radix code) in bits.
    pub const fn bits(self) -> u32 {
        match self {
            KeyType::U8 | KeyType::I8 => 8,
            KeyType::U16 | KeyType::I16 | KeyType::F16 | KeyType::BF16 => 16,
            KeyType::U32 | KeyType::I32 | KeyType::F32 => 32,
            KeyType::U64 | KeyType::I64 | KeyType::F64 => 64,
        }
    }

    /// The Rust name of the type (`"u32"`, `"bf16"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            KeyType::U8 => "u8",
            KeyType::U16 => "u16",
            KeyType::U32 => "u32",
            KeyType::U64 => "u64",
            KeyType::I8 => "i8",
            KeyType::I16 => "i16",
            KeyType::I32 => "i32",
            KeyType::I64 => "i64",
            KeyType::F16 => "f16",
            KeyType::BF16 => "bf16",
            KeyType::F32 => "f32",
            KeyType::F64 => "f64",
        }
    }

    /// The C++ traits type in `cuda/core/radix.cuh` that implements this key's transform.
    pub const fn cxx_traits(self) -> &'static str {
        match self {
            KeyType::U8 => "oxicub::KeyU8",
            KeyType::U16 => "oxicub::KeyU16",
            KeyType::U32 => "oxicub::KeyU32",
            KeyType::U64 => "oxicub::KeyU64",
            KeyType::I8 => "oxicub::KeyI8",
            KeyType::I16 => "oxicub::KeyI16",
            KeyType::I32 => "oxicub::KeyI32",
            KeyType::I64 => "oxicub::KeyI64",
            KeyType::F16 => "oxicub::KeyF16",
            KeyType::BF16 => "oxicub::KeyBF16",
            KeyType::F32 => "oxicub::KeyF32",
            KeyType::F64 => "oxicub::KeyF64",
        }
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// The unsigned integer types that hold radix codes: `u8`, `u16`, `u32`, `u64`.
///
/// ```
/// use oxicub::kernels::radix::RadixBits;
///
/// assert_eq!(<u16 as RadixBits>::BITS, 16);
/// assert_eq!(0xABCDu16.digit(4, 8), 0xBC);
/// ```
pub trait RadixBits:
    sealed::Sealed
    + Copy
    + Ord
    + Eq
    + std::hash::Hash
    + fmt::Debug
    + fmt::LowerHex
    + Default
    + Send
    + Sync
    + cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
    + 'static
{
    /// Width in bits.
    const BITS: u32;
    /// Widens to `u64` (zero-extended).
    fn to_u64(self) -> u64;
    /// Truncates a `u64` to this width.
    fn from_u64_truncating(value: u64) -> Self;
    /// The `digit_bits`-wide digit starting at `bit_offset`; bits above the width read as
    /// zero, so the top digit may be narrower. Requires `bit_offset < 64` and
    /// `digit_bits < 32`.
    fn digit(self, bit_offset: u32, digit_bits: u32) -> u32 {
        ((self.to_u64() >> bit_offset) & ((1u64 << digit_bits) - 1)) as u32
    }
}

macro_rules! radix_bits {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl RadixBits for $t {
            const BITS: u32 = <$t>::BITS;
            fn to_u64(self) -> u64 {
                u64::from(self)
            }
            fn from_u64_truncating(value: u64) -> Self {
                value as $t
            }
        }
    )*};
}
radix_bits!(u8, u16, u32, u64);

/// A key type with an order-preserving radix transform (see the [module docs](self) for the
/// policy on signed zeros and NaN).
///
/// Implemented for `u8`, `u16`, `u32`, `u64`, `i8`, `i16`, `i32`, `i64`, [`f16`](struct@f16), [`bf16`],
/// `f32` and `f64`; sealed. Every implementing type has the size and alignment of its
/// [`Bits`](Self::Bits), and every bit pattern of `Bits` is a valid value of it, so device
/// buffers of keys may be reinterpreted as buffers of `Bits` and back.
///
/// ```
/// use half::f16;
/// use oxicub::kernels::radix::RadixKey;
///
/// let keys = [f16::from_f32(1.5), f16::NEG_INFINITY, f16::from_f32(-2.0)];
/// let mut codes: Vec<u16> = keys.iter().map(|k| k.to_radix()).collect();
/// codes.sort();
/// let sorted: Vec<f32> = codes.iter().map(|&c| f16::from_radix(c).to_f32()).collect();
/// assert_eq!(sorted, [f32::NEG_INFINITY, -2.0, 1.5]);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a key type oxicub can rank",
    label = "keys must have an order-preserving radix transform",
    note = "key types are `u8`, `u16`, `u32`, `u64`, `i8`, `i16`, `i32`, `i64`, `f16`, `bf16`, \
            `f32` and `f64`; carry anything else as the values of a key-value call"
)]
pub trait RadixKey: sealed::Sealed + Copy + Send + Sync + fmt::Debug + 'static {
    /// The unsigned type of the same width that holds the raw bits and the radix code.
    type Bits: RadixBits;
    /// The run-time name of this type, used in kernel specs.
    const KEY_TYPE: KeyType;
    /// The raw bit pattern (no transform), as stored in memory.
    fn to_bits(self) -> Self::Bits;
    /// The key with this raw bit pattern (no transform).
    fn from_bits(bits: Self::Bits) -> Self;
    /// The order-preserving radix code of this key.
    fn to_radix(self) -> Self::Bits;
    /// The key whose radix code is `code` (NaN codes decode to the canonical NaN).
    fn from_radix(code: Self::Bits) -> Self;
}

macro_rules! unsigned_key {
    ($($t:ty => $kt:ident),*) => {$(
        impl RadixKey for $t {
            type Bits = $t;
            const KEY_TYPE: KeyType = KeyType::$kt;
            fn to_bits(self) -> $t { self }
            fn from_bits(bits: $t) -> Self { bits }
            fn to_radix(self) -> $t { self }
            fn from_radix(code: $t) -> Self { code }
        }
    )*};
}
unsigned_key!(u8 => U8, u16 => U16, u32 => U32, u64 => U64);

macro_rules! signed_key {
    ($($t:ty, $u:ty => $kt:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl RadixKey for $t {
            type Bits = $u;
            const KEY_TYPE: KeyType = KeyType::$kt;
            fn to_bits(self) -> $u { self as $u }
            fn from_bits(bits: $u) -> Self { bits as $t }
            fn to_radix(self) -> $u { (self as $u) ^ (1 << (<$u>::BITS - 1)) }
            fn from_radix(code: $u) -> Self { (code ^ (1 << (<$u>::BITS - 1))) as $t }
        }
    )*};
}
signed_key!(i8, u8 => I8, i16, u16 => I16, i32, u32 => I32, i64, u64 => I64);

/// The float transform on raw bits of width `B`, with `inf_bits` the pattern of `+inf`.
macro_rules! float_transform {
    ($u:ty) => {
        impl FloatCodec for $u {
            fn encode_float(raw: $u, inf_bits: $u) -> $u {
                const SIGN: $u = 1 << (<$u>::BITS - 1);
                if raw & !SIGN > inf_bits {
                    <$u>::MAX // every NaN: one code above +inf
                } else if raw & SIGN != 0 {
                    !raw
                } else {
                    raw | SIGN
                }
            }
            fn decode_float(code: $u) -> $u {
                const SIGN: $u = 1 << (<$u>::BITS - 1);
                if code & SIGN != 0 {
                    code & !SIGN
                } else {
                    !code
                }
            }
        }
    };
}

trait FloatCodec: Sized {
    fn encode_float(raw: Self, inf_bits: Self) -> Self;
    fn decode_float(code: Self) -> Self;
}
float_transform!(u16);
float_transform!(u32);
float_transform!(u64);

macro_rules! float_key {
    ($($t:ty, $u:ty => $kt:ident, $inf:expr),*) => {$(
        impl sealed::Sealed for $t {}
        impl RadixKey for $t {
            type Bits = $u;
            const KEY_TYPE: KeyType = KeyType::$kt;
            fn to_bits(self) -> $u { <$t>::to_bits(self) }
            fn from_bits(bits: $u) -> Self { <$t>::from_bits(bits) }
            fn to_radix(self) -> $u { <$u>::encode_float(<$t>::to_bits(self), $inf) }
            fn from_radix(code: $u) -> Self { <$t>::from_bits(<$u>::decode_float(code)) }
        }
    )*};
}
float_key!(
    f16, u16 => F16, 0x7C00,
    bf16, u16 => BF16, 0x7F80,
    f32, u32 => F32, 0x7F80_0000,
    f64, u64 => F64, 0x7FF0_0000_0000_0000
);

/// Upper bound on [`RadixDigit::digit_bits`]: a histogram has at most `2^11` bins.
///
/// ```
/// use oxicub::kernels::radix::{RadixDigit, MAX_DIGIT_BITS};
///
/// assert!(RadixDigit::new(0, MAX_DIGIT_BITS).is_ok());
/// ```
pub const MAX_DIGIT_BITS: u32 = 11;

/// Which digit of a radix code to look at: `digit_bits` bits starting at `bit_offset` (bit 0
/// is the least significant bit of the code).
///
/// Bits above the key's width read as zero, so the most significant digit of a key may be
/// narrower than `digit_bits`.
///
/// ```
/// use oxicub::kernels::radix::RadixDigit;
///
/// let top_byte_of_u32 = RadixDigit::new(24, 8)?;
/// assert_eq!(top_byte_of_u32.bins(), 256);
/// assert!(RadixDigit::new(0, 12).is_err());
/// # Ok::<(), oxicub::kernels::KernelError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RadixDigit {
    bit_offset: u32,
    digit_bits: u32,
}

impl RadixDigit {
    /// The default digit width (one byte).
    pub const DEFAULT_BITS: u32 = 8;

    /// A digit of `digit_bits` bits (`1..=`[`MAX_DIGIT_BITS`]) starting at `bit_offset`
    /// (`< 64`; whether it lies inside a given key type is checked where the key type is known).
    pub fn new(bit_offset: u32, digit_bits: u32) -> Result<Self, crate::KernelError> {
        if !(1..=MAX_DIGIT_BITS).contains(&digit_bits) {
            return Err(crate::KernelError::InvalidDigit {
                reason: format!("digit_bits = {digit_bits} must be in 1..={MAX_DIGIT_BITS}"),
            });
        }
        if bit_offset >= 64 {
            return Err(crate::KernelError::InvalidDigit {
                reason: format!("bit_offset = {bit_offset} must be < 64"),
            });
        }
        Ok(RadixDigit {
            bit_offset,
            digit_bits,
        })
    }

    /// The `index`-th byte (8-bit digit) counted from the least significant one.
    pub fn byte(index: u32) -> Result<Self, crate::KernelError> {
        RadixDigit::new(index.saturating_mul(8), 8)
    }

    /// The lowest bit of the digit.
    pub const fn bit_offset(self) -> u32 {
        self.bit_offset
    }

    /// The width of the digit in bits.
    pub const fn digit_bits(self) -> u32 {
        self.digit_bits
    }

    /// Number of histogram bins: `2^digit_bits`.
    pub const fn bins(self) -> usize {
        1 << self.digit_bits
    }

    /// Checks that the digit starts inside a key of type `key`.
    pub fn check_fits(self, key: KeyType) -> Result<(), crate::KernelError> {
        if self.bit_offset >= key.bits() {
            return Err(crate::KernelError::InvalidDigit {
                reason: format!(
                    "bit_offset = {} is outside a {}-bit key of type {key}",
                    self.bit_offset,
                    key.bits()
                ),
            });
        }
        Ok(())
    }
}

/// The counter types a histogram can have (`u32`, `u64`); sealed.
///
/// ```
/// use oxicub::kernels::CountType;
///
/// assert_eq!(CountType::U32.max_count(), u32::MAX as u64);
/// assert_eq!(CountType::U64.bytes(), 8);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CountType {
    /// 32-bit counters: the input must have fewer than `2^32` keys.
    U32,
    /// 64-bit counters.
    U64,
}

impl CountType {
    /// Size of one counter in bytes.
    pub const fn bytes(self) -> u32 {
        match self {
            CountType::U32 => 4,
            CountType::U64 => 8,
        }
    }

    /// The largest number of items that can be counted without overflow.
    pub const fn max_count(self) -> u64 {
        match self {
            CountType::U32 => u32::MAX as u64,
            CountType::U64 => u64::MAX,
        }
    }
}

/// A histogram counter type: `u32` or `u64`.
///
/// ```
/// use oxicub::kernels::radix::{CountType, HistogramCount};
///
/// assert_eq!(<u32 as HistogramCount>::COUNT_TYPE, CountType::U32);
/// assert_eq!(u64::from_count(7), 7u64);
/// ```
pub trait HistogramCount:
    sealed::Sealed
    + Copy
    + Eq
    + fmt::Debug
    + Default
    + Send
    + Sync
    + cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
    + 'static
{
    /// The run-time name of this counter type.
    const COUNT_TYPE: CountType;
    /// Converts a count that is known to fit (callers check the input length against
    /// [`CountType::max_count`] first; larger values are truncated).
    fn from_count(count: u64) -> Self;
}

impl HistogramCount for u32 {
    const COUNT_TYPE: CountType = CountType::U32;
    fn from_count(count: u64) -> Self {
        count as u32
    }
}

impl HistogramCount for u64 {
    const COUNT_TYPE: CountType = CountType::U64;
    fn from_count(count: u64) -> Self {
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_exhaustive<K: RadixKey + PartialOrd>(
        all: impl Iterator<Item = K>,
        is_nan: fn(K) -> bool,
    ) {
        let keys: Vec<K> = all.collect();
        let mut sorted: Vec<K> = keys.iter().copied().filter(|k| !is_nan(*k)).collect();
        // The oracle order: the type's own comparison; the only values that compare equal with
        // different bits are -0.0 and +0.0, and the policy puts -0.0 (the larger bit pattern)
        // first.
        sorted.sort_by(|a, b| {
            a.partial_cmp(b)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| b.to_bits().cmp(&a.to_bits()))
        });
        for pair in sorted.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            assert!(a.to_radix() < b.to_radix(), "{a:?} {b:?}");
        }
        for &k in &keys {
            if is_nan(k) {
                assert_eq!(k.to_radix().to_u64(), u64::MAX >> (64 - K::Bits::BITS));
                assert!(is_nan(K::from_radix(k.to_radix())));
            } else {
                assert_eq!(K::from_radix(k.to_radix()).to_bits(), k.to_bits(), "{k:?}");
            }
        }
    }

    #[test]
    fn exhaustive_8_and_16_bit() {
        check_exhaustive((0..=u8::MAX).map(u8::from_bits), |_| false);
        check_exhaustive((0..=u8::MAX).map(i8::from_bits), |_| false);
        check_exhaustive((0..=u16::MAX).map(u16::from_bits), |_| false);
        check_exhaustive((0..=u16::MAX).map(i16::from_bits), |_| false);
        check_exhaustive((0..=u16::MAX).map(f16::from_bits), |k| k.is_nan());
        check_exhaustive((0..=u16::MAX).map(bf16::from_bits), |k| k.is_nan());
    }

    #[test]
    fn zero_and_nan_policy() {
        assert_eq!((-0.0f32).to_radix() + 1, 0.0f32.to_radix());
        assert_eq!((-0.0f64).to_radix() + 1, 0.0f64.to_radix());
        assert!(f64::INFINITY.to_radix() < f64::NAN.to_radix());
        assert_eq!(f64::NAN.to_radix(), u64::MAX);
        assert_eq!(f32::from_bits(0xFFC0_0001).to_radix(), u32::MAX);
        assert_eq!(f32::from_radix(u32::MAX).to_bits(), 0x7FFF_FFFF);
        assert_eq!(f16::NAN.to_radix(), u16::MAX);
        assert_eq!(bf16::NAN.to_radix(), u16::MAX);
    }

    #[test]
    fn digits() {
        assert_eq!(0x1234_5678u32.digit(28, 8), 0x1);
        assert_eq!(0xFFu8.digit(4, 11), 0xF);
        assert!(RadixDigit::new(32, 8).is_ok_and(|d| d.check_fits(KeyType::U32).is_err()));
        assert!(RadixDigit::new(0, 0).is_err());
        assert!(RadixDigit::new(64, 1).is_err());
    }
}
