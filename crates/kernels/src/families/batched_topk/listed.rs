//! The listed layout on the device: each segment is a view of its own, and the kernels read it
//! as the offsets layout over a keys base of 0 (`cuda/batched_topk/common.cuh`), its begin and
//! end being *element addresses* (byte address / key size). The tables the kernels read are
//! made here from the views themselves, so a segment is exactly its view: its length is the
//! view's, its address the view's, and the view belongs to the runtime's context.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, DevicePtr, SyncOnDrop};

use crate::families::at_least;
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

/// A table of one `i64` or `u64` per segment on the device (one element when there is no
/// segment: the device allocates no empty buffers, and an empty table is never read).
fn table<T: cudarc::driver::DeviceRepr + Default + Copy>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    mut values: Vec<T>,
) -> Result<CudaSlice<T>, KernelError> {
    if values.is_empty() {
        values.push(T::default());
    }
    runtime.during("cuMemcpyHtoDAsync", stream.clone_htod(&values))
}

/// The device tables of a listed call: each segment's begin and end element addresses and,
/// for copied values, each segment's values' byte address. Holds the guards of the views, so
/// they stay marked in use on the stream until the launches are issued and this is dropped.
pub(super) struct ListedTables<'v> {
    pub(super) begin: CudaSlice<i64>,
    pub(super) end: CudaSlice<i64>,
    pub(super) value_addresses: Option<CudaSlice<u64>>,
    _guards: Vec<SyncOnDrop<'v>>,
}

/// The byte address of view `index` of a list, its guard taken (to `guards`), with the view's
/// context and alignment checked.
fn view_address<'v, T>(
    runtime: &KernelRuntime,
    stream: &'v CudaStream,
    (buffer, index): (&'static str, usize),
    view: &'v CudaView<'_, T>,
    guards: &mut Vec<SyncOnDrop<'v>>,
) -> Result<u64, KernelError> {
    runtime.check_buffer(buffer, view)?;
    let (address, guard) = view.device_ptr(stream);
    guards.push(guard);
    let element_bytes = std::mem::size_of::<T>();
    if !aligned(address, element_bytes) {
        return Err(KernelError::Misaligned {
            buffer,
            index,
            address,
            element_bytes,
        });
    }
    Ok(address)
}

impl<'v> ListedTables<'v> {
    /// Checks the views and makes the tables: at least `max_segments` segments, each of the
    /// runtime's context and aligned to its key type; copied values (`values`): at least as
    /// many views, each at least as long as its segment, of the context and aligned.
    pub(super) fn new<K, V>(
        runtime: &KernelRuntime,
        stream: &'v Arc<CudaStream>,
        segments: &'v [CudaView<'_, K>],
        values: Option<&'v [CudaView<'_, V>]>,
        max_segments: u64,
    ) -> Result<ListedTables<'v>, KernelError> {
        at_least("segments", segments.len(), max_segments)?;
        let mut guards = Vec::with_capacity(segments.len());
        let (mut begin, mut end) = (Vec::with_capacity(segments.len()), Vec::new());
        for (i, segment) in segments.iter().enumerate() {
            let address = view_address(runtime, stream, ("segments", i), segment, &mut guards)?;
            let key_bytes = std::mem::size_of::<K>();
            let Some((first, last)) = element_range(address, segment.len(), key_bytes) else {
                return Err(KernelError::TooLarge {
                    buffer: "segments",
                    len: segment.len() as u64,
                    max: i64::MAX as u64,
                    why: "a segment's element addresses must fit the kernels' 64-bit offsets",
                });
            };
            begin.push(first);
            end.push(last);
        }
        let value_addresses = match values {
            None => None,
            Some(values) => {
                at_least("values", values.len(), max_segments)?;
                let mut addresses = Vec::with_capacity(values.len());
                for (i, view) in values.iter().enumerate() {
                    if let Some(segment) = segments.get(i) {
                        at_least("values", view.len(), segment.len() as u64)?;
                    }
                    addresses.push(view_address(
                        runtime,
                        stream,
                        ("values", i),
                        view,
                        &mut guards,
                    )?);
                }
                Some(table(runtime, stream, addresses)?)
            }
        };
        Ok(ListedTables {
            begin: table(runtime, stream, begin)?,
            end: table(runtime, stream, end)?,
            value_addresses,
            _guards: guards,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{aligned, element_range};

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
    }
}
