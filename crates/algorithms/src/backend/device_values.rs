//! Values as bytes: the one place where the algorithms reinterpret memory.
//!
//! Kernels move keys and values without looking at them, as raw bytes. That is sound only for
//! types whose every byte is initialised (no padding) and for which every bit pattern of their
//! size is a valid value: a byte copy, the zeros of an unwritten slot, a source index written
//! as a value, even a value torn by a copy that raced with a write. [`DeviceValue`] is that
//! promise; every `unsafe` block of `oxicub-algorithms` that moves values lives in this module
//! and relies on it (keys rely on the sealed [`RadixKey`], whose types are integers and floats
//! of their `Bits`' size).

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use half::{bf16, f16};
use oxicub_params::{SelectDirection, SortOrder};

use super::Cuda;
use crate::radix::RadixKey;
use crate::Error;

/// A type whose values the GPU can carry as plain bytes: the values of key-value calls
/// (`*_pairs`), the source indices of `*_indices` calls.
///
/// Implemented for the integer and float types (`u8` ..= `u64`, `usize`, `i8` ..= `i64`,
/// `isize`, `f32`, `f64`, [`f16`](struct@f16), [`bf16`](struct@bf16)) and for arrays of them. A value with padding
/// bytes, such as `(u8, u32)`, does not build: its padding is uninitialised memory, which
/// copying as bytes would read.
///
/// ```
/// use oxicub::{topk, DeviceValue, Host};
/// use oxicub::params::k;
///
/// fn moves_as_bytes<V: DeviceValue>() {}
/// moves_as_bytes::<[u16; 4]>();
///
/// let (mut top, mut pair) = ([0u8; 1], [[0u32; 2]; 1]);
/// topk::max_pairs(&Host::new(), &[1u8, 9][..], &[[1, 10], [9, 90]][..], &mut top[..], &mut pair[..], &k::Static::<1>::new(), &oxicub::env::Env::new())?.check()?;
/// assert_eq!(pair, [[9, 90]]);
/// # Ok::<(), oxicub::Error>(())
/// ```
///
/// ```compile_fail
/// fn moves_as_bytes<V: oxicub::DeviceValue>() {}
/// moves_as_bytes::<(u8, u32)>(); // three padding bytes
/// ```
///
/// # Safety
///
/// Implement it for your own type only when both hold: the type has no padding bytes (every
/// byte of every value is initialised: a `#[repr(C)]` struct whose fields' sizes add up to its
/// size, with fields that are themselves `DeviceValue`s), and every bit pattern of its size is
/// a valid value (no references or owning pointers, no `bool`, `char`, `NonZero` or enum
/// fields). These are the conditions of bytemuck's `Pod`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot travel to the GPU as a value",
    label = "oxicub copies values as raw bytes",
    note = "a value must have no padding bytes, and every bit pattern must be a value: \
            integers, floats, `f16`, `bf16` and arrays of them are; a tuple such as `(u8, u32)` \
            has padding (use `[u32; 2]`, or a `#[repr(C)]` struct without padding and \
            `unsafe impl oxicub::DeviceValue for MyValue {{}}`)"
)]
pub unsafe trait DeviceValue: Copy + Send + Sync + 'static {}

macro_rules! device_value {
    ($($ty:ty),*) => {$(
        // SAFETY: a primitive number: no padding, every bit pattern is a valid value.
        unsafe impl DeviceValue for $ty {}
    )*};
}
device_value!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, f16, bf16);

// SAFETY: an array has no padding between or after its elements (its size is `N` times theirs),
// so it is padding-free, and valid for every bit pattern, exactly when its element type is.
unsafe impl<T: DeviceValue, const N: usize> DeviceValue for [T; N] {}

/// The bytes of `values`.
fn as_bytes<V: DeviceValue>(values: &[V]) -> &[u8] {
    // SAFETY: `V: DeviceValue` has no padding, so every one of the `size_of_val(values)` bytes
    // is initialised; `u8` has no alignment requirement; the borrow keeps `values` alive and
    // unchanged for the lifetime of the result.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

/// The bytes of `values`, to overwrite with bytes that hold valid values of `V`.
fn as_bytes_mut<V: DeviceValue>(values: &mut [V]) -> &mut [u8] {
    let len = std::mem::size_of_val(values);
    // SAFETY: as in `as_bytes`; every bit pattern of `V`'s size is a valid `V`
    // (`DeviceValue`'s contract), so whatever bytes are written the values stay valid.
    unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<u8>(), len) }
}

/// A discrete option stored as one byte (`#[repr(u8)]`): a per-segment slice of them is the
/// `u8`s the kernels read.
pub(crate) trait ByteOption: Copy {
    /// The options as their bytes.
    fn as_option_bytes(options: &[Self]) -> &[u8];
}

macro_rules! byte_option {
    ($($ty:ty),*) => {$(
        impl ByteOption for $ty {
            fn as_option_bytes(options: &[$ty]) -> &[u8] {
                const { assert!(std::mem::size_of::<$ty>() == 1) };
                // SAFETY: the type is a fieldless `#[repr(u8)]` enum (checked size 1): a slice
                // of it has the size, alignment and initialised bytes of a `[u8]` of the same
                // length.
                unsafe { std::slice::from_raw_parts(options.as_ptr().cast::<u8>(), options.len()) }
            }
        }
    )*};
}
byte_option!(SelectDirection, SortOrder);

/// Keys of type `K` on the device, stored as their raw bits (`CudaSlice<K::Bits>`), so key
/// types without cudarc's `DeviceRepr` (`f16`, `bf16` without cudarc's `f16` feature) can be
/// used. Views of it are `CudaView<K>`, as the algorithms take.
///
/// ```no_run
/// use half::f16;
/// use oxicub::Cuda;
///
/// let cuda = Cuda::new(0)?;
/// let keys = cuda.upload_keys(&[f16::ONE, f16::NEG_INFINITY])?;
/// assert_eq!(keys.len(), 2);
/// let _view = keys.as_view();
/// # Ok::<(), oxicub::Error>(())
/// ```
#[derive(Debug)]
pub struct DeviceKeys<K: RadixKey> {
    bits: CudaSlice<K::Bits>,
    key: PhantomData<K>,
}

impl<K: RadixKey> DeviceKeys<K> {
    pub(crate) fn from_bits(bits: CudaSlice<K::Bits>) -> DeviceKeys<K> {
        DeviceKeys {
            bits,
            key: PhantomData,
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.bits.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }

    /// The keys as a device view of `K`.
    pub fn as_view(&self) -> CudaView<'_, K> {
        // SAFETY: `RadixKey` is sealed and implemented only for types with the size and
        // alignment of their `Bits`, for which every bit pattern is a valid value, so the same
        // memory read as `K` is valid; the length in `K`s equals the length in `Bits`.
        match unsafe { self.bits.transmute::<K>(self.bits.len()) } {
            Some(view) => view,
            None => unreachable!("K and K::Bits have the same size"),
        }
    }

    /// The keys as a writable device view of `K`.
    pub fn as_view_mut(&mut self) -> CudaViewMut<'_, K> {
        let len = self.bits.len();
        // SAFETY: as in `as_view`; any `K` written through the view is a valid `Bits`.
        match unsafe { self.bits.transmute_mut::<K>(len) } {
            Some(view) => view,
            None => unreachable!("K and K::Bits have the same size"),
        }
    }

    /// The raw bits.
    pub fn bits(&self) -> &CudaSlice<K::Bits> {
        &self.bits
    }

    /// Gives up the typing and returns the raw bits.
    pub fn into_bits(self) -> CudaSlice<K::Bits> {
        self.bits
    }
}

/// Values of any [`DeviceValue`] type on the device (stored as bytes, so `V` needs no cudarc
/// `DeviceRepr`): the results of the `*_owned` top-k functions on [`Cuda`], and how
/// [`Cuda::upload_values`] copies values there. Slots that nothing wrote hold zero bits.
///
/// ```no_run
/// use oxicub::{topk, Cuda};
/// use oxicub::params::{direction, k};
///
/// let cuda = Cuda::new(0)?;
/// let keys = cuda.upload(&[3u32, 9, 1])?;
/// let (top, at) = topk::select_indices_owned::<_, _, _, u64, _, _>(&cuda, &direction::Max, keys.as_view(), &k::Static::<2>::new(), &oxicub::env::Env::new())?.check()?;
/// assert_eq!(at.download(&cuda)?, [1, 0]);
/// # let _ = top;
/// # Ok::<(), oxicub::Error>(())
/// ```
#[derive(Debug)]
pub struct DeviceValues<V: DeviceValue> {
    bytes: CudaSlice<u8>,
    len: usize,
    value: PhantomData<V>,
}

impl<V: DeviceValue> DeviceValues<V> {
    /// `len` zeroed values.
    pub(crate) fn zeroed(cuda: &Cuda, len: usize) -> Result<DeviceValues<V>, Error> {
        let bytes = Self::byte_len(len)?;
        Ok(DeviceValues {
            bytes: cuda.alloc_zeros::<u8>(bytes.max(1))?,
            len,
            value: PhantomData,
        })
    }

    /// A copy of `values` on the device.
    pub(crate) fn upload(cuda: &Cuda, values: &[V]) -> Result<DeviceValues<V>, Error> {
        if values.is_empty() {
            return Self::zeroed(cuda, 0);
        }
        Ok(DeviceValues {
            bytes: cuda.upload(as_bytes(values))?,
            len: values.len(),
            value: PhantomData,
        })
    }

    fn byte_len(len: usize) -> Result<usize, Error> {
        len.checked_mul(std::mem::size_of::<V>())
            .ok_or(Error::TooLarge {
                arg: "values",
                len: len as u64,
                max: (usize::MAX / std::mem::size_of::<V>().max(1)) as u64,
                reason: "the values' size in bytes overflows",
            })
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The values as a device view of `V`.
    pub fn as_view(&self) -> CudaView<'_, V> {
        // SAFETY: every bit pattern of `V`'s size is a valid `V` (`DeviceValue`'s contract), so
        // whatever the bytes hold (uploaded values, kernel outputs, zeros) they are `len` valid
        // values; the allocation holds `len * size_of::<V>()` bytes (at least one) and is
        // 256-byte aligned.
        match unsafe { self.bytes.transmute::<V>(self.len) } {
            Some(view) => view,
            None => unreachable!("the allocation holds len values"),
        }
    }

    /// The values as a writable device view of `V`.
    pub fn as_view_mut(&mut self) -> CudaViewMut<'_, V> {
        let len = self.len;
        // SAFETY: as in `as_view`; whatever is written through the view is a `V`.
        match unsafe { self.bytes.transmute_mut::<V>(len) } {
            Some(view) => view,
            None => unreachable!("the allocation holds len values"),
        }
    }

    /// Copies the values to the host (waits for the stream).
    pub fn download(&self, cuda: &Cuda) -> Result<Vec<V>, Error> {
        let mut values = vec![zeroed::<V>(); self.len];
        self.download_into(cuda, &mut values)?;
        Ok(values)
    }

    /// Copies the values into `out` (exactly `len()` elements; waits for the stream).
    pub fn download_into(&self, cuda: &Cuda, out: &mut [V]) -> Result<(), Error> {
        Error::check_len("out", out.len(), self.len, "the number of values")?;
        self.download_prefix_into(cuda, out)
    }

    /// Copies the first `out.len()` values into `out` (at most `len()`; waits for the stream):
    /// what a call wrote, when it wrote fewer than the buffer holds.
    pub(crate) fn download_prefix_into(&self, cuda: &Cuda, out: &mut [V]) -> Result<(), Error> {
        if out.len() > self.len {
            return Err(Error::BufferTooSmall {
                arg: "values",
                len: self.len,
                required: out.len(),
                required_from: "the values to copy back",
            });
        }
        if out.is_empty() {
            return Ok(());
        }
        let bytes = self.bytes.slice(..std::mem::size_of_val(out));
        cuda.stream()
            .memcpy_dtoh(&bytes, as_bytes_mut(out))
            .map_err(cuda.driver_error("cuMemcpyDtoHAsync"))?;
        // Into page-locked memory the copy is still running when the call returns: `out` is
        // the caller's again only once the stream has finished it.
        super::Backend::synchronize(cuda)
    }
}

/// The all-zero value of `V`.
pub(crate) fn zeroed<V: DeviceValue>() -> V {
    // SAFETY: every bit pattern, zeros included, is a valid `V` (`DeviceValue`'s contract).
    unsafe { std::mem::zeroed() }
}
