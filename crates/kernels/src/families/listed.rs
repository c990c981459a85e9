//! The listed layout's addressing, shared by the families that read it (batched top-k) and the
//! one that moves it (`listed_copy`): a view is addressed by *element address* (byte address /
//! element size) from a base of 0, so its address must be a multiple of its element size and
//! its element range must fit the kernels' `i64` offsets.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr};

use crate::{KernelError, KernelRuntime};

/// Whether a byte address is a multiple of the element size (the kernels index a listed view
/// by element from a base of 0).
fn aligned(address: u64, element_bytes: usize) -> bool {
    element_bytes != 0 && address % element_bytes as u64 == 0
}

/// The first and one-past-last element addresses of `len` elements of `element_bytes` bytes at
/// the aligned byte address `address`, as the kernels' `i64` offsets; `None` when the range
/// does not fit an `i64`.
fn element_range(address: u64, len: usize, element_bytes: usize) -> Option<(i64, i64)> {
    let first = i64::try_from(address / element_bytes as u64).ok()?;
    let end = first.checked_add(i64::try_from(len).ok()?)?;
    Some((first, end))
}

/// The element range of view `index` of list `buffer` (`len` elements of `T` at byte address
/// `address`): refused when the address is not a multiple of the element size or the range
/// does not fit an `i64`.
pub(crate) fn listed_range<T>(
    (buffer, index): (&'static str, usize),
    address: u64,
    len: usize,
) -> Result<(i64, i64), KernelError> {
    let element_bytes = std::mem::size_of::<T>();
    if !aligned(address, element_bytes) {
        return Err(KernelError::Misaligned {
            buffer,
            index,
            address,
            element_bytes,
        });
    }
    element_range(address, len, element_bytes).ok_or(KernelError::TooLarge {
        buffer,
        len: len as u64,
        max: i64::MAX as u64,
        why: "a view's element addresses must fit the kernels' 64-bit offsets",
    })
}

/// A table of one value per segment on the device (one element when there is no segment: the
/// device allocates no empty buffers, and an empty table is never read).
pub(crate) fn table<T: DeviceRepr + Default + Copy>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    mut values: Vec<T>,
) -> Result<CudaSlice<T>, KernelError> {
    if values.is_empty() {
        values.push(T::default());
    }
    runtime.count_allocation();
    runtime.during("cuMemcpyHtoDAsync", stream.clone_htod(&values))
}

#[cfg(test)]
mod tests {
    use super::{aligned, element_range, listed_range};

    /// A view's element range is its address over the element size and its length; an address
    /// that is not a multiple of the element size, or a range past what an `i64` holds, is
    /// refused.
    #[test]
    fn element_ranges_are_aligned_and_fit_the_kernels_offsets() {
        let at = 0x7f00_0000_0400;
        assert!(aligned(at, 4) && aligned(at, 8) && aligned(at, 1));
        assert_eq!(
            element_range(at, 100, 4),
            Some((0x1fc0_0000_0100, 0x1fc0_0000_0164))
        );
        assert_eq!(element_range(0x1000, 0, 8), Some((0x200, 0x200)));
        assert!(!aligned(0x1002, 4) && !aligned(0x1004, 8) && !aligned(8, 0));
        assert_eq!(element_range(1 << 63, 1, 1), None);
        assert_eq!(element_range((1 << 63) - 1, 1, 1), None);
        assert_eq!(
            element_range((1 << 63) - 2, 1, 1),
            Some((i64::MAX - 1, i64::MAX))
        );
        assert!(listed_range::<u32>(("segments", 3), 0x1002, 1).is_err());
        assert_eq!(
            listed_range::<u16>(("segments", 0), 0x1002, 2).ok(),
            Some((0x801, 0x803))
        );
    }
}
