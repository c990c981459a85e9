//! The device buffers the launchers use besides the caller's (scratch, status words,
//! per-segment tables), with their sizes checked first, and where they come from ([`Scratch`]):
//! stream-ordered allocations, a caller's [`DeviceWorkspace`], or nowhere (measuring what a
//! call needs).
//!
//! A launcher sizes its buffers from a call's bounds, which a caller may make as large as it
//! likes (a deferred segment count bounded by 2^60, say). cudarc's `alloc` multiplies the
//! element count by the element size without checking, so a wrapped product would allocate a
//! few bytes that the kernels then write far past. Every buffer of a launcher goes through
//! here: the size in bytes must not overflow, must be a valid allocation size (at most
//! `isize::MAX`) and must fit the device's memory, or the call is refused with
//! [`KernelError::AllocationTooLarge`] before anything is allocated or launched.
//!
//! A workspace serves one call at a time, in stream order: its memory is carved afresh by each
//! call (a lock holds it from the call's `Scratch` to its last launch, so calls from several host
//! threads do not interleave their launches over it), and it belongs to one stream, so the
//! next call's kernels run after the previous call's. Status words outlive the call (the
//! caller reads them when it checks), so they never come from the carved memory: a workspace
//! keeps a pool of small status buffers, each lent to one call's status until that status is
//! dropped.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cudarc::driver::result::{memcpy_htod_async, memset_d8_async};
use cudarc::driver::{
    CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, SyncOnDrop, ValidAsZeroBits,
};

use crate::families::listed::table;
use crate::health::ContextHealth;
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

/// Bytes between carved buffers: what `cuMemAlloc` guarantees, so a kernel may read any
/// buffer with vector or bulk (TMA) copies.
const CARVE_ALIGN: u64 = 256;

/// Words of a pooled status buffer: at least any family's status or statistics (a segmented
/// sort's two words per merge pass, at most 64 passes, and two more).
const STATUS_SLOT_WORDS: u64 = 160;

/// Status buffers a workspace allocates when it is made: enough for a caller that keeps an
/// outcome or two unchecked at a time (a segmented sort takes two: status and statistics).
const STATUS_SLOTS_AT_START: usize = 4;

/// Device memory a caller lends every call made through it (one call at a time, on one
/// stream), so that a steady state allocates nothing: the launchers carve their scratch from
/// it and take their status words from its pool. (The facade's `oxicub::Workspace` wraps it.)
///
/// ```no_run
/// use oxicub::kernels::{open_context, DeviceWorkspace, KernelRuntime, Scratch};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let workspace = DeviceWorkspace::new(&runtime, &stream, 1 << 20)?;
/// let scratch = Scratch::workspace(&workspace, &stream)?; // pass to a launcher
/// assert!(!scratch.is_measuring());
/// # Ok::<(), oxicub::kernels::KernelError>(())
/// ```
#[derive(Debug)]
pub struct DeviceWorkspace {
    /// Held for the carved memory's address and its lifetime (freed in stream order on drop).
    _memory: CudaSlice<u8>,
    base: u64,
    bytes: u64,
    stream: Arc<CudaStream>,
    /// Held by a call from its first carved buffer until its launches are enqueued.
    busy: Mutex<()>,
    statuses: Arc<StatusPool>,
}

/// A workspace's free status buffers ([`STATUS_SLOT_WORDS`] words each).
#[derive(Debug, Default)]
struct StatusPool {
    free: Mutex<Vec<CudaSlice<u64>>>,
}

impl StatusPool {
    fn take(&self) -> Option<CudaSlice<u64>> {
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
    }

    fn give_back(&self, words: CudaSlice<u64>) {
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(words);
    }
}

impl DeviceWorkspace {
    /// `bytes` of device memory on `stream` (at least one byte: the device allocates no empty
    /// buffers), and the first status buffers of its pool.
    pub fn new(
        runtime: &KernelRuntime,
        stream: &Arc<CudaStream>,
        bytes: u64,
    ) -> Result<DeviceWorkspace, KernelError> {
        // SAFETY: the launchers write every carved byte before they read it, or zero it first
        // (the contract of `Scratch::uninit`).
        let memory = unsafe { alloc_uninit::<u8>(runtime, stream, "workspace", bytes.max(1)) }?;
        let (base, guard) = memory.device_ptr(stream);
        // Only this workspace's stream uses the memory, in stream order: no event to record.
        drop(guard);
        let statuses = Arc::new(StatusPool::default());
        for _ in 0..STATUS_SLOTS_AT_START {
            // SAFETY: `Scratch::status` zeroes the words a call uses before lending them.
            let slot =
                unsafe { alloc_uninit::<u64>(runtime, stream, "status", STATUS_SLOT_WORDS) }?;
            statuses.give_back(slot);
        }
        Ok(DeviceWorkspace {
            _memory: memory,
            base,
            bytes,
            stream: Arc::clone(stream),
            busy: Mutex::new(()),
            statuses,
        })
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The stream it belongs to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

/// Where one call's buffers come from; made for the call and dropped after its launches.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use oxicub::kernels::Scratch;
///
/// let most = AtomicU64::new(0);
/// let scratch = Scratch::measure(&most); // a launcher given it checks and plans, launches nothing
/// assert!(scratch.is_measuring() && !Scratch::allocate().is_measuring());
/// drop(scratch);
/// assert_eq!(most.load(Ordering::Relaxed), 0); // it carved nothing
/// ```
#[derive(Debug)]
pub struct Scratch<'w> {
    source: Source<'w>,
    /// Bytes carved so far (a workspace, or measuring).
    carved: Cell<u64>,
}

#[derive(Debug)]
enum Source<'w> {
    Allocate,
    Workspace {
        workspace: &'w DeviceWorkspace,
        _busy: MutexGuard<'w, ()>,
    },
    Measure {
        most: &'w AtomicU64,
    },
}

/// A buffer of a call: allocated (freed in stream order when dropped), carved from a
/// workspace, or absent (address 0: measured only, for a call that launches nothing, or a
/// buffer no stage uses).
#[derive(Debug)]
pub(crate) enum ScratchBuffer<T> {
    Owned(CudaSlice<T>),
    Carved(u64),
    Absent,
}

impl<'w> Scratch<'w> {
    /// Every buffer a stream-ordered allocation of its own.
    pub fn allocate() -> Scratch<'static> {
        Scratch {
            source: Source::Allocate,
            carved: Cell::new(0),
        }
    }

    /// Every buffer carved from `workspace`, for a call on `stream` (the workspace's; another
    /// stream is refused, here and by every buffer asked of it). Holds the workspace from now
    /// until dropped: another host thread's call waits, and a second `Scratch` of the same
    /// workspace on this thread would wait forever (each call makes one).
    pub fn workspace(
        workspace: &'w DeviceWorkspace,
        stream: &Arc<CudaStream>,
    ) -> Result<Scratch<'w>, KernelError> {
        same_stream(workspace, stream)?;
        let busy = workspace
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(Scratch {
            source: Source::Workspace {
                workspace,
                _busy: busy,
            },
            carved: Cell::new(0),
        })
    }

    /// Nothing allocated and nothing launched: the call is checked and planned, and the bytes
    /// its buffers would carve raise `most` (when dropped) to at least them.
    pub fn measure(most: &'w AtomicU64) -> Scratch<'w> {
        Scratch {
            source: Source::Measure { most },
            carved: Cell::new(0),
        }
    }

    /// Whether this call only measures: the launcher returns before its first launch.
    pub fn is_measuring(&self) -> bool {
        matches!(self.source, Source::Measure { .. })
    }

    /// The next `count` `T`s of the carved memory (checked like an allocation, then against the
    /// workspace's size): its address, or `None` when measuring.
    fn carve<T>(
        &self,
        runtime: &KernelRuntime,
        buffer: &'static str,
        count: u64,
    ) -> Result<Option<u64>, KernelError> {
        let len = checked_len::<T>(runtime, buffer, count)? as u64;
        let (offset, end) = carve_range(self.carved.get(), len * std::mem::size_of::<T>() as u64);
        self.carved.set(end);
        match &self.source {
            Source::Workspace { workspace, .. } if end > workspace.bytes => {
                Err(KernelError::WorkspaceTooSmall {
                    buffer,
                    needed: end,
                    available: workspace.bytes,
                })
            }
            Source::Workspace { workspace, .. } => Ok(Some(workspace.base + offset)),
            _ => Ok(None),
        }
    }

    /// `count` uninitialised `T`s on `stream`, after the size check.
    ///
    /// # Safety
    ///
    /// The memory is uninitialised (or holds an earlier call's scratch): the caller's kernels
    /// must write every element before any reads it.
    pub(crate) unsafe fn uninit<T: DeviceRepr>(
        &self,
        runtime: &KernelRuntime,
        stream: &Arc<CudaStream>,
        buffer: &'static str,
        count: u64,
    ) -> Result<ScratchBuffer<T>, KernelError> {
        match self.source {
            // SAFETY: the contents are the caller's to initialise (this function's contract).
            Source::Allocate => Ok(ScratchBuffer::Owned(unsafe {
                alloc_uninit(runtime, stream, buffer, count)
            }?)),
            Source::Workspace { workspace, .. } => {
                same_stream(workspace, stream)?;
                Ok(match self.carve::<T>(runtime, buffer, count)? {
                    Some(address) => ScratchBuffer::Carved(address),
                    None => ScratchBuffer::Absent,
                })
            }
            Source::Measure { .. } => {
                self.carve::<T>(runtime, buffer, count)?;
                Ok(ScratchBuffer::Absent)
            }
        }
    }

    /// `count` zeroed `T`s on `stream`, after the size check.
    pub(crate) fn zeroed<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        runtime: &KernelRuntime,
        stream: &Arc<CudaStream>,
        buffer: &'static str,
        count: u64,
    ) -> Result<ScratchBuffer<T>, KernelError> {
        // SAFETY: every element is zeroed below, before anything can read it.
        let mut zeroed = unsafe { self.uninit::<T>(runtime, stream, buffer, count) }?;
        zeroed.zero_prefix(runtime, stream, count)?;
        Ok(zeroed)
    }

    /// `values` copied to the device (one element when there is none: an empty table is never
    /// read, and the device allocates no empty buffers).
    pub(crate) fn upload<T: DeviceRepr + Default + Copy>(
        &self,
        runtime: &KernelRuntime,
        stream: &Arc<CudaStream>,
        buffer: &'static str,
        mut values: Vec<T>,
    ) -> Result<ScratchBuffer<T>, KernelError> {
        if let Source::Allocate = self.source {
            return table(runtime, stream, values).map(ScratchBuffer::Owned);
        }
        if values.is_empty() {
            values.push(T::default());
        }
        if let Source::Workspace { workspace, .. } = &self.source {
            same_stream(workspace, stream)?;
        }
        let table = self.carve::<T>(runtime, buffer, values.len() as u64)?;
        if let Some(address) = table {
            runtime.during("cuCtxSetCurrent", stream.context().bind_to_thread())?;
            // SAFETY: `address` is the start of `values.len()` carved elements of the
            // workspace, which outlives the copy (dropped in stream order); a copy from
            // pageable memory has read `values` when it returns.
            let copy = unsafe { memcpy_htod_async(address, &values, stream.cu_stream()) };
            runtime.during("cuMemcpyHtoDAsync", copy)?;
        }
        Ok(table.map_or(ScratchBuffer::Absent, ScratchBuffer::Carved))
    }

    /// Status words for the call (`words` at most [`STATUS_SLOT_WORDS`]), zeroed; `None` when
    /// measuring. A workspace lends one of its pool's buffers (allocating one only when all are
    /// lent), taken back when the status is dropped.
    pub(crate) fn status(
        &self,
        runtime: &KernelRuntime,
        stream: &Arc<CudaStream>,
        words: u64,
    ) -> Result<Option<StatusWords>, KernelError> {
        // Checked when measuring too: a measure sizes a workspace, whose pool takes this many.
        if !matches!(self.source, Source::Allocate) && words > STATUS_SLOT_WORDS {
            return Err(KernelError::InvalidSpec {
                kernel: "workspace".to_owned(),
                reason: format!("{words} status words; a status buffer holds {STATUS_SLOT_WORDS}"),
            });
        }
        let pool = match &self.source {
            Source::Measure { .. } => return Ok(None),
            Source::Allocate => None,
            Source::Workspace { workspace, .. } => {
                same_stream(workspace, stream)?;
                Some(Arc::clone(&workspace.statuses))
            }
        };
        let mut slice = match pool.as_ref().and_then(|pool| pool.take()) {
            Some(slice) => slice,
            None => {
                let len = if pool.is_some() {
                    STATUS_SLOT_WORDS
                } else {
                    words
                };
                // SAFETY: zeroed below, before any launch reads it.
                unsafe { alloc_uninit::<u64>(runtime, stream, "status", len) }?
            }
        };
        let zeroed = stream.memset_zeros(&mut slice.slice_mut(..words as usize));
        runtime.during("cuMemsetD8Async", zeroed)?;
        Ok(Some(StatusWords {
            words: Some(slice),
            len: words as usize,
            pool,
        }))
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        if let Source::Measure { most } = self.source {
            most.fetch_max(self.carved.get(), Ordering::Relaxed);
        }
    }
}

impl<T: DeviceRepr> ScratchBuffer<T> {
    /// The buffer's address for a launch (0 when measuring), its guard kept in `guards`.
    pub(crate) fn ptr<'a>(
        &'a mut self,
        guards: &mut Vec<SyncOnDrop<'a>>,
        stream: &'a Arc<CudaStream>,
    ) -> u64 {
        match self {
            ScratchBuffer::Owned(slice) => {
                let (ptr, guard) = slice.device_ptr_mut(stream);
                guards.push(guard);
                ptr
            }
            ScratchBuffer::Carved(address) => *address,
            ScratchBuffer::Absent => 0,
        }
    }

    /// The address of a buffer the kernels only read (0 when absent), its guard kept in
    /// `guards`.
    pub(crate) fn read_ptr<'a>(
        &'a self,
        guards: &mut Vec<SyncOnDrop<'a>>,
        stream: &'a Arc<CudaStream>,
    ) -> u64 {
        match self {
            ScratchBuffer::Owned(slice) => {
                let (ptr, guard) = slice.device_ptr(stream);
                guards.push(guard);
                ptr
            }
            ScratchBuffer::Carved(address) => *address,
            ScratchBuffer::Absent => 0,
        }
    }
}

impl<T: DeviceRepr + ValidAsZeroBits> ScratchBuffer<T> {
    /// Zeroes the first `count` elements, in stream order.
    pub(crate) fn zero_prefix(
        &mut self,
        runtime: &KernelRuntime,
        stream: &Arc<CudaStream>,
        count: u64,
    ) -> Result<(), KernelError> {
        let bytes = count as usize * std::mem::size_of::<T>();
        match self {
            ScratchBuffer::Owned(slice) => {
                let zeroed = stream.memset_zeros(&mut slice.slice_mut(..count as usize));
                runtime.during("cuMemsetD8Async", zeroed)
            }
            ScratchBuffer::Carved(address) => {
                runtime.during("cuCtxSetCurrent", stream.context().bind_to_thread())?;
                // SAFETY: `count` elements from `address` were carved for this buffer (the
                // caller zeroes at most what it carved) and the workspace outlives the memset.
                let zeroed = unsafe { memset_d8_async(*address, 0, bytes, stream.cu_stream()) };
                runtime.during("cuMemsetD8Async", zeroed)
            }
            ScratchBuffer::Absent => Ok(()),
        }
    }
}

/// A call's status words, read when the caller checks; a workspace's pooled buffer goes back
/// to its pool when dropped (after the call's kernels, in stream order: the pool serves only
/// the workspace's stream). Held by each family's status ([`SegmentedStatus`](crate::segments::SegmentedStatus), ...).
#[derive(Debug)]
pub struct StatusWords {
    words: Option<CudaSlice<u64>>,
    len: usize,
    pool: Option<Arc<StatusPool>>,
}

impl StatusWords {
    /// The words' address for a launch, its guard kept in `guards`.
    pub(crate) fn ptr<'a>(
        &'a mut self,
        guards: &mut Vec<SyncOnDrop<'a>>,
        stream: &'a Arc<CudaStream>,
    ) -> u64 {
        match self.words.as_mut() {
            Some(words) => {
                let (ptr, guard) = words.device_ptr_mut(stream);
                guards.push(guard);
                ptr
            }
            None => 0,
        }
    }

    /// Overwrites the first words with `values`, in stream order.
    pub(crate) fn write(
        &mut self,
        runtime: &KernelRuntime,
        stream: &Arc<CudaStream>,
        values: &[u64],
    ) -> Result<(), KernelError> {
        if let Some(words) = self.words.as_mut() {
            let mut head = words.slice_mut(..values.len().min(self.len));
            let copy = stream.memcpy_htod(&values[..head.len()], &mut head);
            runtime.during("cuMemcpyHtoDAsync", copy)?;
        }
        Ok(())
    }

    /// Reads the words (waits for the stream).
    pub(crate) fn read(
        &self,
        health: &ContextHealth,
        stream: &Arc<CudaStream>,
    ) -> Result<Vec<u64>, KernelError> {
        match self.words.as_ref() {
            Some(words) => {
                let words = words.slice(..self.len);
                health.during("cuMemcpyDtoHAsync", stream.clone_dtoh(&words))
            }
            None => Ok(vec![0; self.len]),
        }
    }
}

impl Drop for StatusWords {
    fn drop(&mut self) {
        if let (Some(pool), Some(words)) = (self.pool.as_ref(), self.words.take()) {
            pool.give_back(words);
        }
    }
}

/// Refuses a stream other than the workspace's: its memory and status buffers are reused in
/// that stream's order only.
fn same_stream(workspace: &DeviceWorkspace, stream: &Arc<CudaStream>) -> Result<(), KernelError> {
    if Arc::ptr_eq(stream, &workspace.stream) {
        Ok(())
    } else {
        Err(KernelError::InvalidSpec {
            kernel: "workspace".to_owned(),
            reason: "a workspace serves the stream it was made on".to_owned(),
        })
    }
}

/// Where the next buffer of `bytes` bytes lies after `carved` bytes: its start (the next
/// multiple of [`CARVE_ALIGN`]) and end (saturating: an end past the workspace is refused).
fn carve_range(carved: u64, bytes: u64) -> (u64, u64) {
    let offset = carved
        .checked_next_multiple_of(CARVE_ALIGN)
        .unwrap_or(u64::MAX);
    (offset, offset.saturating_add(bytes))
}

/// `count` uninitialised `T`s on `stream`, after the size check (counted).
///
/// # Safety
///
/// The memory is uninitialised: the caller's kernels must write every element before any
/// reads it.
unsafe fn alloc_uninit<T: DeviceRepr>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    buffer: &'static str,
    count: u64,
) -> Result<CudaSlice<T>, KernelError> {
    let len = checked_len::<T>(runtime, buffer, count)?;
    runtime.count_allocation();
    // SAFETY: `len * size_of::<T>()` was checked above not to overflow; the contents are the
    // caller's to initialise (this function's contract).
    runtime.during("cuMemAllocAsync", unsafe { stream.alloc::<T>(len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Carved buffers start on 256-byte boundaries, one after another, never overlapping; a
    /// size near the top of the address range saturates (and is then refused as too large).
    #[test]
    fn carved_buffers_are_aligned_and_disjoint() {
        assert_eq!(carve_range(0, 8), (0, 8));
        assert_eq!(carve_range(8, 4), (256, 260));
        assert_eq!(carve_range(256, 0), (256, 256));
        assert_eq!(carve_range(257, 16), (512, 528));
        let mut carved = 0;
        let mut last_end = 0;
        for bytes in [1u64, 255, 256, 257, 4096, 3] {
            let (offset, end) = carve_range(carved, bytes);
            assert!(offset % 256 == 0 && offset >= last_end && end == offset + bytes);
            (carved, last_end) = (end, end);
        }
        assert_eq!(carve_range(u64::MAX - 10, 100).1, u64::MAX);
    }

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
        // The issue's case: a deferred count bounded by 2^60 + 1 sizes the descriptors at
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
