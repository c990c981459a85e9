//! Radix primitives: the key transform and its inverse, and radix-digit histograms, on every
//! backend.
//!
//! The transform policy (distinct signed zeros with `-0.0` below `+0.0`, every NaN one code
//! above `+inf`) is documented in [`oxicub::kernels::radix`](oxicub_kernels::radix).
//!
//! ```
//! use oxicub::{radix, Host};
//! use oxicub::radix::RadixDigit;
//!
//! let host = Host::new();
//! let keys = [3i32, -3, 0, 300];
//! let mut histogram = [0u64; 256];
//! radix::digit_histogram(&host, &keys[..], RadixDigit::byte(3)?, &mut histogram[..])?;
//! // The top byte of the code: 0x7F for the negative key, 0x80 for the others.
//! assert_eq!((histogram[0x7F], histogram[0x80]), (1, 3));
//! # Ok::<(), oxicub::Error>(())
//! ```

use rayon::prelude::*;

pub use oxicub_kernels::radix::{
    CountType, HistogramCount, KeyType, RadixBits, RadixDigit, RadixKey, MAX_DIGIT_BITS,
};

use crate::backend::{AnyBackend, Backend, Buffer, Cuda, Host};
use crate::sealed::Token;
use crate::Error;

/// A backend that implements the radix primitives (all of them do). Use the free functions of
/// this module: they check the arguments once and then call these methods.
pub trait RadixBackend: Backend {
    /// [`transform_keys`] after its argument checks.
    #[doc(hidden)]
    fn transform_keys_checked<K: RadixKey>(
        &self,
        token: Token,
        keys: Self::Slice<'_, K>,
        codes: Self::SliceMut<'_, K::Bits>,
    ) -> Result<(), Error>;

    /// [`inverse_transform_keys`] after its argument checks.
    #[doc(hidden)]
    fn inverse_transform_keys_checked<K: RadixKey>(
        &self,
        token: Token,
        codes: Self::Slice<'_, K::Bits>,
        keys: Self::SliceMut<'_, K>,
    ) -> Result<(), Error>;

    /// [`digit_histogram`] after its argument checks.
    #[doc(hidden)]
    fn digit_histogram_checked<K: RadixKey, C: HistogramCount>(
        &self,
        token: Token,
        keys: Self::Slice<'_, K>,
        digit: RadixDigit,
        histogram: Self::SliceMut<'_, C>,
    ) -> Result<(), Error>;
}

/// Writes the radix code of every key: `codes[i] = keys[i].to_radix()`.
///
/// `codes` must have `keys.len()` elements. Any length, including 0. Asynchronous on
/// [`Cuda`] (on its stream).
///
/// ```
/// use oxicub::{radix, Host};
///
/// let mut codes = [0u16; 3];
/// radix::transform_keys(&Host::new(), &[-1i16, 0, 1][..], &mut codes[..])?;
/// assert_eq!(codes, [0x7FFF, 0x8000, 0x8001]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn transform_keys<B: RadixBackend, K: RadixKey>(
    backend: &B,
    keys: B::Slice<'_, K>,
    codes: B::SliceMut<'_, K::Bits>,
) -> Result<(), Error> {
    Error::check_len("codes", codes.len(), keys.len(), "keys.len()")?;
    backend.transform_keys_checked(Token::new(), keys, codes)
}

/// Writes the key of every radix code: `keys[i] = K::from_radix(codes[i])` (NaN codes give
/// the canonical NaN).
///
/// `keys` must have `codes.len()` elements. Any length, including 0.
///
/// ```
/// use oxicub::{radix, Host};
///
/// let mut keys = [0f64; 2];
/// radix::inverse_transform_keys(&Host::new(), &[0x8000_0000_0000_0000u64, u64::MAX][..], &mut keys[..])?;
/// assert_eq!(keys[0].to_bits(), 0); // +0.0
/// assert!(keys[1].is_nan());
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn inverse_transform_keys<B: RadixBackend, K: RadixKey>(
    backend: &B,
    codes: B::Slice<'_, K::Bits>,
    keys: B::SliceMut<'_, K>,
) -> Result<(), Error> {
    Error::check_len("keys", keys.len(), codes.len(), "codes.len()")?;
    backend.inverse_transform_keys_checked(Token::new(), codes, keys)
}

/// Overwrites `histogram` with the number of keys whose radix code has each value of `digit`:
/// `histogram[d] = #{ i : keys[i].to_radix().digit(digit) == d }`.
///
/// `histogram` must have `digit.bins()` (`2^digit_bits`) elements; `digit` must start inside
/// the key (`bit_offset < bits of K`; the top digit may be narrower than `digit_bits`). With
/// `u32` counters, `keys` must have fewer than `2^32` elements; `u64` counters take any length.
///
/// ```
/// use oxicub::{radix, Host};
/// use oxicub::radix::RadixDigit;
///
/// let keys = [0x12u8, 0x1F, 0x20, 0xF2];
/// let mut high_nibble = [0u32; 16];
/// radix::digit_histogram(&Host::new(), &keys[..], RadixDigit::new(4, 4)?, &mut high_nibble[..])?;
/// assert_eq!((high_nibble[1], high_nibble[2], high_nibble[0xF]), (2, 1, 1));
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn digit_histogram<B: RadixBackend, K: RadixKey, C: HistogramCount>(
    backend: &B,
    keys: B::Slice<'_, K>,
    digit: RadixDigit,
    histogram: B::SliceMut<'_, C>,
) -> Result<(), Error> {
    if digit.bit_offset() >= K::Bits::BITS {
        return Err(Error::InvalidArgument {
            arg: "digit",
            reason: format!(
                "bit_offset = {} must be below {}, the width of {}",
                digit.bit_offset(),
                K::Bits::BITS,
                K::KEY_TYPE
            ),
        });
    }
    Error::check_len(
        "histogram",
        histogram.len(),
        digit.bins(),
        "2^digit.digit_bits()",
    )?;
    let max = C::COUNT_TYPE.max_count();
    if keys.len() as u64 > max {
        return Err(Error::TooLarge {
            arg: "keys",
            len: keys.len() as u64,
            max,
            reason: "the histogram's u32 counters could overflow; use u64 counters",
        });
    }
    backend.digit_histogram_checked(Token::new(), keys, digit, histogram)
}

/// Keys per rayon task in the host histogram.
const HOST_HISTOGRAM_CHUNK: usize = 1 << 16;

impl RadixBackend for Host {
    fn transform_keys_checked<K: RadixKey>(
        &self,
        _: Token,
        keys: &[K],
        codes: &mut [K::Bits],
    ) -> Result<(), Error> {
        codes
            .par_iter_mut()
            .zip(keys.par_iter())
            .for_each(|(code, key)| *code = key.to_radix());
        Ok(())
    }

    fn inverse_transform_keys_checked<K: RadixKey>(
        &self,
        _: Token,
        codes: &[K::Bits],
        keys: &mut [K],
    ) -> Result<(), Error> {
        keys.par_iter_mut()
            .zip(codes.par_iter())
            .for_each(|(key, &code)| *key = K::from_radix(code));
        Ok(())
    }

    fn digit_histogram_checked<K: RadixKey, C: HistogramCount>(
        &self,
        _: Token,
        keys: &[K],
        digit: RadixDigit,
        histogram: &mut [C],
    ) -> Result<(), Error> {
        let bins = digit.bins();
        let counts = keys
            .par_chunks(HOST_HISTOGRAM_CHUNK)
            .map(|chunk| {
                let mut counts = vec![0u64; bins];
                for key in chunk {
                    let d = key.to_radix().digit(digit.bit_offset(), digit.digit_bits());
                    counts[d as usize] += 1;
                }
                counts
            })
            .reduce(
                || vec![0u64; bins],
                |mut total, part| {
                    total.iter_mut().zip(part).for_each(|(t, p)| *t += p);
                    total
                },
            );
        for (out, count) in histogram.iter_mut().zip(counts) {
            *out = C::from_count(count);
        }
        Ok(())
    }
}

impl RadixBackend for Cuda {
    fn transform_keys_checked<K: RadixKey>(
        &self,
        _: Token,
        keys: Self::Slice<'_, K>,
        mut codes: Self::SliceMut<'_, K::Bits>,
    ) -> Result<(), Error> {
        self.refuse_tracked_capture()?;
        oxicub_kernels::transform_keys(self.runtime(), self.stream(), &keys, &mut codes)?;
        Ok(())
    }

    fn inverse_transform_keys_checked<K: RadixKey>(
        &self,
        _: Token,
        codes: Self::Slice<'_, K::Bits>,
        mut keys: Self::SliceMut<'_, K>,
    ) -> Result<(), Error> {
        self.refuse_tracked_capture()?;
        oxicub_kernels::inverse_transform_keys(self.runtime(), self.stream(), &codes, &mut keys)?;
        Ok(())
    }

    fn digit_histogram_checked<K: RadixKey, C: HistogramCount>(
        &self,
        _: Token,
        keys: Self::Slice<'_, K>,
        digit: RadixDigit,
        mut histogram: Self::SliceMut<'_, C>,
    ) -> Result<(), Error> {
        self.refuse_tracked_capture()?;
        oxicub_kernels::digit_histogram(
            self.runtime(),
            self.stream(),
            &keys,
            digit,
            &mut histogram,
        )?;
        Ok(())
    }
}

/// On CUDA, [`AnyBackend`] copies host inputs to the device, runs there and copies the output
/// back (waiting for it).
impl RadixBackend for AnyBackend {
    fn transform_keys_checked<K: RadixKey>(
        &self,
        token: Token,
        keys: &[K],
        codes: &mut [K::Bits],
    ) -> Result<(), Error> {
        match self {
            AnyBackend::Host(host) => host.transform_keys_checked(token, keys, codes),
            AnyBackend::Cuda(cuda) => {
                let device_keys = cuda.upload_keys(keys)?;
                let mut device_codes = cuda.alloc_zeros::<K::Bits>(codes.len())?;
                cuda.transform_keys_checked(
                    token,
                    device_keys.as_view(),
                    device_codes.as_view_mut(),
                )?;
                codes.copy_from_slice(&cuda.download(&device_codes.as_view())?);
                Ok(())
            }
        }
    }

    fn inverse_transform_keys_checked<K: RadixKey>(
        &self,
        token: Token,
        codes: &[K::Bits],
        keys: &mut [K],
    ) -> Result<(), Error> {
        match self {
            AnyBackend::Host(host) => host.inverse_transform_keys_checked(token, codes, keys),
            AnyBackend::Cuda(cuda) => {
                let device_codes = cuda.upload(codes)?;
                let mut device_keys = cuda.alloc_keys::<K>(keys.len())?;
                cuda.inverse_transform_keys_checked::<K>(
                    token,
                    device_codes.as_view(),
                    device_keys.as_view_mut(),
                )?;
                keys.copy_from_slice(&cuda.download_keys(&device_keys)?);
                Ok(())
            }
        }
    }

    fn digit_histogram_checked<K: RadixKey, C: HistogramCount>(
        &self,
        token: Token,
        keys: &[K],
        digit: RadixDigit,
        histogram: &mut [C],
    ) -> Result<(), Error> {
        match self {
            AnyBackend::Host(host) => host.digit_histogram_checked(token, keys, digit, histogram),
            AnyBackend::Cuda(cuda) => {
                let device_keys = cuda.upload_keys(keys)?;
                let mut device_histogram = cuda.alloc_zeros::<C>(histogram.len())?;
                cuda.digit_histogram_checked(
                    token,
                    device_keys.as_view(),
                    digit,
                    device_histogram.as_view_mut(),
                )?;
                histogram.copy_from_slice(&cuda.download(&device_histogram.as_view())?);
                Ok(())
            }
        }
    }
}

/// The rank of a key for the host backends: its radix code, inverted (within the key's width)
/// when `inverted`, so that one comparison serves both directions (top-k max: the larger rank
/// is better, min inverts; sort ascending: the smaller rank first, descending inverts).
pub(crate) fn rank<K: RadixKey>(key: K, inverted: bool) -> u64 {
    let code = key.to_radix().to_u64();
    if !inverted {
        return code;
    }
    let bits = <K::Bits as RadixBits>::BITS;
    let width = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    !code & width
}
