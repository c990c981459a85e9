//! Family `listed_copy`: a listed layout (each segment a view of its own) gathered into one
//! joined buffer, the segments one after another, or the joined buffer scattered back into the
//! list. What lets an algorithm built on one buffer (segmented sort) serve listed segments, and
//! what joins sharded top-k's exchanged candidates into rows, each rank's local indices made
//! global on the way ([`gather_adding`]).

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, SyncOnDrop};

use crate::codegen::{kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::families::listed::{listed_range, table};
use crate::families::{at_least, keep};
use crate::radix::KeyType;
use crate::{KernelError, KernelFamily, KernelRuntime, KernelSpec, Tier};

kernel_params! {
    /// Parameters of `listed_copy` (device pointers as `u64`).
    struct ListedCopyParams {
        /// `num_segments` i64: each view's first element address (byte address / element size).
        list_begin: u64,
        /// `num_segments + 1` ascending i64: where each view starts in the joined buffer, then
        /// the joined length.
        joined_offsets: u64,
        /// The joined buffer.
        joined: u64,
        num_segments: u64,
        /// The joined length.
        total: u64,
        /// `num_segments` i64 added to every element of each view as it is gathered (integer
        /// words of 4 or 8 bytes, wrapping), or 0 for none; with `single` 2, the addend itself.
        list_addend: u64,
        /// 0: list to joined; 1: joined to list.
        to_list: u32,
        /// 0: the tables above; 1: one view, `list_begin` its element address and
        /// `joined_offsets` unused (no table to upload); 2: the same with the addend
        /// `list_addend`.
        single: u32,
    }
}

/// Threads per block.
const BLOCK_THREADS: u32 = 256;

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "listed_copy",
    header: include_str!("../../cuda/listed_copy/listed_copy.cuh"),
    constants: &[],
    params_name: ListedCopyParams::CXX_NAME,
    params_declaration: ListedCopyParams::cxx_declaration,
    template_args: &[TemplateArg::Key, TemplateArg::BlockThreads],
    static_shared_bytes: |_| 16,
};

/// The unsigned key type of `bytes` bytes: the word `listed_copy` moves.
fn word(bytes: usize) -> Option<KeyType> {
    match bytes {
        1 => Some(KeyType::U8),
        2 => Some(KeyType::U16),
        4 => Some(KeyType::U32),
        8 => Some(KeyType::U64),
        _ => None,
    }
}

impl KernelSpec {
    /// The spec of the `listed_copy` kernel moving elements of `bytes` bytes (1, 2, 4 or 8);
    /// `None` for any other width.
    ///
    /// ```
    /// use oxicub::kernels::KernelSpec;
    ///
    /// let spec = KernelSpec::listed_copy(4).expect("a 4-byte word");
    /// assert_eq!(spec.to_string(), "oxicub::listed_copy<oxicub::KeyU32, 256>");
    /// assert!(KernelSpec::listed_copy(3).is_none());
    /// ```
    pub fn listed_copy(bytes: usize) -> Option<KernelSpec> {
        Some(KernelSpec {
            family: KernelFamily::ListedCopy,
            key: word(bytes)?,
            value: None,
            direction: None,
            tier: Tier::GridStride,
            block_threads: BLOCK_THREADS,
            consts: Vec::new(),
        })
    }
}

/// Every `listed_copy` spec: one per element width.
///
/// ```
/// assert_eq!(oxicub::kernels::families::listed_copy::specs().len(), 4);
/// ```
pub fn specs() -> Vec<KernelSpec> {
    [1, 2, 4, 8]
        .into_iter()
        .filter_map(KernelSpec::listed_copy)
        .collect()
}

/// Where each view of a list starts in the joined buffer: `len + 1` offsets, the last the
/// joined length.
///
/// ```
/// use oxicub::kernels::families::listed_copy::joined_offsets;
///
/// assert_eq!(joined_offsets([3, 0, 2]), vec![0, 3, 3, 5]);
/// ```
pub fn joined_offsets(lengths: impl IntoIterator<Item = usize>) -> Vec<i64> {
    let mut offsets = vec![0i64];
    let mut total = 0i64;
    for len in lengths {
        // A list of device views: their lengths sum to less than the device memory.
        total = total.saturating_add(i64::try_from(len).unwrap_or(i64::MAX));
        offsets.push(total);
    }
    offsets
}

/// Launches one `listed_copy` over the list whose views start at the element addresses
/// `list_begin` (guards already held by the caller).
fn launch_copy<T>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    list_begin: Vec<i64>,
    lengths: impl IntoIterator<Item = usize>,
    (joined, joined_len): (u64, usize),
    direction: Move,
) -> Result<(), KernelError> {
    let offsets = joined_offsets(lengths);
    let total = offsets.last().copied().unwrap_or(0) as u64;
    at_least("joined", joined_len, total)?;
    if total == 0 {
        return Ok(());
    }
    let spec = KernelSpec::listed_copy(std::mem::size_of::<T>()).ok_or_else(|| {
        KernelError::InvalidSpec {
            kernel: "listed_copy".to_owned(),
            reason: format!(
                "elements are 1, 2, 4 or 8 bytes, not {}",
                std::mem::size_of::<T>()
            ),
        }
    })?;
    let num_segments = list_begin.len() as u64;
    let kernel = runtime.kernel(&spec)?;
    let grid = runtime.grid_blocks(&kernel, total.div_ceil(4), 1);
    let to_list = u32::from(matches!(direction, Move::Scatter));
    if let ([begin], Move::Gather(addend)) = (&list_begin[..], direction) {
        // One view: its address and addend travel in the parameters, with no table to
        // upload (an upload from pageable memory is a driver call and a staging copy).
        let params = ListedCopyParams {
            list_begin: *begin as u64,
            joined_offsets: 0,
            joined,
            num_segments,
            total,
            list_addend: addend.and_then(|a| a.first()).map_or(0, |&a| a as u64),
            to_list,
            single: if addend.is_some() { 2 } else { 1 },
        };
        return runtime.launch(stream, &kernel, grid, params);
    }
    let list_begin = table(runtime, stream, list_begin)?;
    let joined_offsets = table(runtime, stream, offsets)?;
    let addends = match direction {
        Move::Gather(Some(addends)) => Some(table(runtime, stream, addends.to_vec())?),
        Move::Gather(None) | Move::Scatter => None,
    };
    let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
    let params = ListedCopyParams {
        list_begin: keep(&mut guards, list_begin.device_ptr(stream)),
        joined_offsets: keep(&mut guards, joined_offsets.device_ptr(stream)),
        joined,
        num_segments,
        total,
        list_addend: addends
            .as_ref()
            .map_or(0, |addends| keep(&mut guards, addends.device_ptr(stream))),
        to_list,
        single: 0,
    };
    runtime.launch(stream, &kernel, grid, params)
}

/// Which way [`launch_copy`] moves elements.
#[derive(Clone, Copy)]
enum Move<'a> {
    /// The list into the joined buffer, with an addend per view or none.
    Gather(Option<&'a [i64]>),
    /// The joined buffer back into the list.
    Scatter,
}

/// Copies the views of `list` one after another into `joined` (view `i` at the sum of the
/// earlier views' lengths; `joined` holds at least their total). Asynchronous on `stream`.
///
/// ```no_run
/// use oxicub::kernels::{families::listed_copy, open_context, KernelRuntime};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let (a, b) = (stream.clone_htod(&[3u32, 1])?, stream.clone_htod(&[7u32])?);
/// let mut joined = stream.alloc_zeros::<u32>(3)?;
/// listed_copy::gather(&runtime, &stream, &[a.as_view(), b.as_view()], &mut joined.as_view_mut())?;
/// assert_eq!(stream.clone_dtoh(&joined)?, [3, 1, 7]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn gather<T>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    list: &[CudaView<'_, T>],
    joined: &mut CudaViewMut<'_, T>,
) -> Result<(), KernelError> {
    gather_list(runtime, stream, list, joined, Move::Gather(None))
}

/// [`gather`] for integers of 4 or 8 bytes, adding `addends[i]` to every element of view `i`
/// (wrapping, in the element's width): local indices made global as they are joined.
/// `addends` has one entry per view. Asynchronous on `stream`.
///
/// ```no_run
/// use oxicub::kernels::{families::listed_copy, open_context, KernelRuntime};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let (a, b) = (stream.clone_htod(&[0u32, 2])?, stream.clone_htod(&[1u32])?);
/// let mut joined = stream.alloc_zeros::<u32>(3)?;
/// listed_copy::gather_adding(&runtime, &stream, &[a.as_view(), b.as_view()], &[0, 100], &mut joined.as_view_mut())?;
/// assert_eq!(stream.clone_dtoh(&joined)?, [0, 2, 101]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn gather_adding<T>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    list: &[CudaView<'_, T>],
    addends: &[i64],
    joined: &mut CudaViewMut<'_, T>,
) -> Result<(), KernelError> {
    if addends.len() != list.len() {
        return Err(KernelError::LengthMismatch {
            buffer: "addends",
            actual: addends.len(),
            expected: list.len(),
        });
    }
    if !matches!(std::mem::size_of::<T>(), 4 | 8) {
        return Err(KernelError::InvalidSpec {
            kernel: "listed_copy".to_owned(),
            reason: format!(
                "addends apply to integers of 4 or 8 bytes, not {}",
                std::mem::size_of::<T>()
            ),
        });
    }
    gather_list(runtime, stream, list, joined, Move::Gather(Some(addends)))
}

/// [`gather`] and [`gather_adding`].
fn gather_list<T>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    list: &[CudaView<'_, T>],
    joined: &mut CudaViewMut<'_, T>,
    direction: Move<'_>,
) -> Result<(), KernelError> {
    runtime.check_buffer("joined", &*joined)?;
    let mut guards = Vec::with_capacity(list.len() + 1);
    let mut begin = Vec::with_capacity(list.len());
    for (i, view) in list.iter().enumerate() {
        runtime.check_buffer("list", view)?;
        let address = keep(&mut guards, view.device_ptr(stream));
        begin.push(listed_range::<T>(("list", i), address, view.len())?.0);
    }
    let joined_len = joined.len();
    let joined = keep(&mut guards, joined.device_ptr_mut(stream));
    let lengths = list.iter().map(|view| view.len());
    launch_copy::<T>(
        runtime,
        stream,
        begin,
        lengths,
        (joined, joined_len),
        direction,
    )
}

/// Copies `joined` back into the views of `list` (view `i` from the sum of the earlier views'
/// lengths): the inverse of [`gather`]. Asynchronous on `stream`.
///
/// ```no_run
/// use oxicub::kernels::{families::listed_copy, open_context, KernelRuntime};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let (mut a, mut b) = (stream.alloc_zeros::<u16>(2)?, stream.alloc_zeros::<u16>(1)?);
/// let joined = stream.clone_htod(&[5u16, 6, 9])?;
/// listed_copy::scatter(&runtime, &stream, &joined.as_view(), &mut [a.as_view_mut(), b.as_view_mut()])?;
/// assert_eq!(stream.clone_dtoh(&b)?, [9]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn scatter<T>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    joined: &CudaView<'_, T>,
    list: &mut [CudaViewMut<'_, T>],
) -> Result<(), KernelError> {
    runtime.check_buffer("joined", joined)?;
    let lengths: Vec<usize> = list.iter().map(|view| view.len()).collect();
    let mut guards = Vec::with_capacity(list.len() + 1);
    let mut begin = Vec::with_capacity(list.len());
    for (i, view) in list.iter_mut().enumerate() {
        runtime.check_buffer("list", &*view)?;
        let len = view.len();
        let address = keep(&mut guards, view.device_ptr_mut(stream));
        begin.push(listed_range::<T>(("list", i), address, len)?.0);
    }
    let joined_len = joined.len();
    let joined = keep(&mut guards, joined.device_ptr(stream));
    launch_copy::<T>(
        runtime,
        stream,
        begin,
        lengths,
        (joined, joined_len),
        Move::Scatter,
    )
}

/// Copies `height` rows of `width` elements from `src` (row `i` at `i * src_pitch`) to `dst`
/// (row `i` at `i * dst_pitch`): one `cuMemcpy2DAsync` on `stream`, no kernel. What joins
/// sharded top-k's exchanged candidates into rows (a rank's slots into its columns of every
/// row). Both views are checked to hold every row.
///
/// ```no_run
/// use oxicub::kernels::{families::listed_copy, open_context, KernelRuntime};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let src = stream.clone_htod(&[1u32, 2, 9, 3, 4, 9])?; // two rows of 2, pitch 3
/// let mut dst = stream.alloc_zeros::<u32>(8)?; // into columns 1..3 of rows of 4
/// listed_copy::copy_rows(&runtime, &stream, &src.as_view(), 3, &mut dst.slice_mut(1..), 4, 2, 2)?;
/// assert_eq!(stream.clone_dtoh(&dst)?, [0, 1, 2, 0, 0, 3, 4, 0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn copy_rows<T>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    src: &CudaView<'_, T>,
    src_pitch: usize,
    dst: &mut CudaViewMut<'_, T>,
    dst_pitch: usize,
    width: usize,
    height: usize,
) -> Result<(), KernelError> {
    runtime.check_buffer("src", src)?;
    runtime.check_buffer("dst", &*dst)?;
    if width == 0 || height == 0 {
        return Ok(());
    }
    let bytes = std::mem::size_of::<T>();
    let spans = |pitch: usize| {
        (width <= pitch)
            .then(|| (height - 1).checked_mul(pitch)?.checked_add(width))
            .flatten()
    };
    for (buffer, pitch, len) in [("src", src_pitch, src.len()), ("dst", dst_pitch, dst.len())] {
        match spans(pitch) {
            Some(needed) if needed <= len => {}
            _ => {
                return Err(KernelError::LengthMismatch {
                    buffer,
                    actual: len,
                    expected: (height - 1).saturating_mul(pitch).saturating_add(width),
                })
            }
        }
    }
    let in_bytes = |elements: usize| {
        elements
            .checked_mul(bytes)
            .ok_or(KernelError::LengthMismatch {
                buffer: "pitch",
                actual: elements,
                expected: usize::MAX / bytes.max(1),
            })
    };
    let (src_pitch, dst_pitch, width) =
        (in_bytes(src_pitch)?, in_bytes(dst_pitch)?, in_bytes(width)?);
    let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
    let src_ptr = keep(&mut guards, src.device_ptr(stream));
    let dst_ptr = keep(&mut guards, dst.device_ptr_mut(stream));
    let copy = cudarc::driver::sys::CUDA_MEMCPY2D {
        srcMemoryType: cudarc::driver::sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcDevice: src_ptr,
        srcPitch: src_pitch,
        dstMemoryType: cudarc::driver::sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstDevice: dst_ptr,
        dstPitch: dst_pitch,
        WidthInBytes: width,
        Height: height,
        srcXInBytes: 0,
        srcY: 0,
        srcHost: std::ptr::null(),
        srcArray: std::ptr::null_mut(),
        dstXInBytes: 0,
        dstY: 0,
        dstHost: std::ptr::null_mut(),
        dstArray: std::ptr::null_mut(),
    };
    runtime.during("cuCtxSetCurrent", runtime.context().bind_to_thread())?;
    // SAFETY: both ranges were checked above to lie within their views (rows of `width`
    // elements, `pitch` apart, `height` of them), the views belong to this runtime's context
    // (check_buffer), which is current on this thread, and the guards keep their event
    // tracking until the copy is enqueued on `stream`.
    let result = unsafe { cudarc::driver::sys::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) };
    runtime.during("cuMemcpy2DAsync", result.result())
}
