//! The device buffers the launchers allocate for themselves (scratch, status words, per-segment
//! tables), with their sizes checked first.
//!
//! A launcher sizes its buffers from a call's bounds, which a caller may make as large as it
//! likes (a deferred segment count bounded by 2^60, say). cudarc's `alloc` multiplies the
//! element count by the element size without checking, so a wrapped product would allocate a
//! few bytes that the kernels then write far past. Every allocation of a launcher goes through
//! here: the size in bytes must not overflow, must be a valid allocation size (at most
//! `isize::MAX`) and must fit the device's memory, or the call is refused with
//! [`KernelError::AllocationTooLarge`] before anything is allocated or launched.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};

use crate::{KernelError, KernelRuntime};

/// The bytes of `count` elements of `element_bytes` bytes each, when they make a buffer the
/// device can hold: no overflow, at most `isize::MAX` bytes (Rust's and cudarc's limit on one
/// allocation), at most `device_bytes` (the device's memory). Else the error names `buffer`.
pub(crate) fn checked_bytes(
    buffer: &'static str,
    count: u64,
    element_bytes: u64,
    device_bytes: u64,
) -> Result<usize, KernelError> {
    let limit = device_bytes.min(isize::MAX as u64);
    count
        .checked_mul(element_bytes)
        .filter(|&bytes| bytes <= limit)
        .and_then(|bytes| usize::try_from(bytes).ok())
        .ok_or(KernelError::AllocationTooLarge {
            buffer,
            count,
            element_bytes,
            limit,
        })
}

/// The element count of a checked buffer of `count` `T`s (see [`checked_bytes`]).
fn checked_len<T>(
    runtime: &KernelRuntime,
    buffer: &'static str,
    count: u64,
) -> Result<usize, KernelError> {
    let element_bytes = std::mem::size_of::<T>() as u64;
    checked_bytes(buffer, count, element_bytes, runtime.facts().total_memory)?;
    // The byte count fits a usize, so the element count does too.
    Ok(count as usize)
}

/// `count` uninitialised `T`s on `stream`, after the size check.
///
/// # Safety
///
/// The memory is uninitialised: the caller's kernels must write every element before any
/// reads it.
pub(crate) unsafe fn alloc_uninit<T: DeviceRepr>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    buffer: &'static str,
    count: u64,
) -> Result<CudaSlice<T>, KernelError> {
    let len = checked_len::<T>(runtime, buffer, count)?;
    // SAFETY: `len * size_of::<T>()` was checked above not to overflow; the contents are the
    // caller's to initialise (this function's contract).
    runtime.during("cuMemAllocAsync", unsafe { stream.alloc::<T>(len) })
}

/// `count` zeroed `T`s on `stream`, after the size check.
pub(crate) fn alloc_zeroed<T: DeviceRepr + ValidAsZeroBits>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    buffer: &'static str,
    count: u64,
) -> Result<CudaSlice<T>, KernelError> {
    // SAFETY: every element is zeroed below, before anything can read it.
    let mut zeroed = unsafe { alloc_uninit::<T>(runtime, stream, buffer, count) }?;
    runtime.during("cuMemsetD8Async", stream.memset_zeros(&mut zeroed))?;
    Ok(zeroed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// Sizes the device holds pass through; a product that wraps, passes `isize::MAX` or the
    /// device's memory is an error naming the buffer, never a small allocation.
    #[test]
    fn allocation_sizes_are_checked_before_allocating() {
        assert_eq!(checked_bytes("status", 11, 8, 80 * GIB).ok(), Some(88));
        assert_eq!(checked_bytes("none", 0, 8, 80 * GIB).ok(), Some(0));
        assert_eq!(
            checked_bytes("all", 10 * GIB / 8, 8, 10 * GIB).ok(),
            Some((10 * GIB) as usize)
        );
        // The case: a deferred count bounded by 2^60 + 1 sizes the descriptors at
        // 4 words a segment, 2^65 + 32 bytes, which wraps to 32 in a plain multiplication.
        let words = ((1u64 << 60) + 1) * 4;
        assert_eq!(words.wrapping_mul(8), 32);
        let err = checked_bytes("descriptors", words, 8, 80 * GIB).unwrap_err();
        assert!(
            matches!(
                err,
                KernelError::AllocationTooLarge {
                    buffer: "descriptors",
                    count,
                    element_bytes: 8,
                    limit,
                } if count == words && limit == 80 * GIB
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("descriptors"), "{err}");
        // Past the device's memory, and past isize::MAX on a device that reports more.
        assert!(checked_bytes("bins", 10 * GIB / 8 + 1, 8, 10 * GIB).is_err());
        assert!(checked_bytes("bins", (isize::MAX as u64) / 8 + 1, 8, u64::MAX).is_err());
        assert!(checked_bytes("bins", u64::MAX, 1, u64::MAX).is_err());
    }
}
