//! The listed layout on the device: each segment is a view of its own, and the kernels read it
//! as the offsets layout over a keys base of 0 (`cuda/batched_topk/common.cuh`), its begin and
//! end being *element addresses* (byte address / key size). The tables the kernels read are
//! made here from the views themselves, so a segment is exactly its view: its length is the
//! view's, its address the view's, and the view belongs to the runtime's context.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, DevicePtr, SyncOnDrop};

use crate::families::at_least;
use crate::families::listed::listed_range;
use crate::families::scratch::{Scratch, ScratchBuffer};
use crate::{KernelError, KernelRuntime};

/// The device tables of a listed call: each segment's begin and end element addresses and,
/// for copied values, each segment's values' byte address. Holds the guards of the views, so
/// they stay marked in use on the stream until the launches are issued and this is dropped.
pub(super) struct ListedTables<'v> {
    pub(super) begin: ScratchBuffer<i64>,
    pub(super) end: ScratchBuffer<i64>,
    pub(super) value_addresses: Option<ScratchBuffer<u64>>,
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
    listed_range::<T>((buffer, index), address, view.len())?;
    Ok(address)
}

impl<'v> ListedTables<'v> {
    /// Checks the views and makes the tables: at least `max_segments` segments, each of the
    /// runtime's context and aligned to its key type; copied values (`values`): at least as
    /// many views, each at least as long as its segment, of the context and aligned. The
    /// tables come from `scratch`.
    pub(super) fn new<K, V>(
        runtime: &KernelRuntime,
        scratch: &Scratch<'_>,
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
            let (first, last) = listed_range::<K>(("segments", i), address, segment.len())?;
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
                Some(scratch.upload(runtime, stream, "value_addresses", addresses)?)
            }
        };
        Ok(ListedTables {
            begin: scratch.upload(runtime, stream, "begin_offsets", begin)?,
            end: scratch.upload(runtime, stream, "end_offsets", end)?,
            value_addresses,
            _guards: guards,
        })
    }
}
