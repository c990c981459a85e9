//! Family `segment_heads` (`cuda/segment_heads/`): segments described by their heads (a
//! bitfield of head flags, or the sorted list of head indices) turned into begin and end
//! offsets and their number, on the device, in stream order: no host round trip, so the count
//! can feed a deferred `num_segments` of the next call.
//!
//! Head flags take three launches (each chunk's heads counted, the chunks' counts scanned by
//! one block, every head written); head indices two (a thread per head checks it and writes
//! it, one thread writes the count or the offending values of the smallest invalid head). Each
//! offset past its buffer is not written; the count always is, and [`HeadsStatus::decode`]
//! returns it for the caller to compare with the buffers.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, SyncOnDrop};

use crate::codegen::{device_constants, kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::families::scratch::{Scratch, StatusWords};
use crate::families::{at_least, keep};
use crate::health::ContextHealth;
use crate::radix::KeyType;
use crate::{KernelError, KernelFamily, KernelRuntime, KernelSpec, Tier};

/// Threads per block.
const BLOCK_THREADS: u32 = 256;

device_constants! {
    /// The constants the segment heads launcher and its kernel share.
    pub(crate) static SH_CONSTANTS;

    /// `params.stage` (head flags): each chunk's heads counted into `chunk_counts`.
    pub(crate) const SH_STAGE_FLAGS_COUNT: u32 = 0;
    /// Stage (head flags, one block): the chunks' counts scanned (exclusive, in place); the
    /// number of segments written, and the last segment's end.
    pub(crate) const SH_STAGE_FLAGS_SCAN: u32 = 1;
    /// Stage (head flags): each head's begin, and the end of the segment before it.
    pub(crate) const SH_STAGE_FLAGS_WRITE: u32 = 2;
    /// Stage (head indices): a thread per head, checked (the smallest invalid position goes
    /// to SH_STATUS_INVALID) and written as a begin and the end before it.
    pub(crate) const SH_STAGE_INDICES: u32 = 3;
    /// Stage (head indices, one thread): the number of segments, the first begin and the last
    /// end; or, after an invalid head, the offending values (and no segment).
    pub(crate) const SH_STAGE_INDICES_FINISH: u32 = 4;

    /// Flag words a thread counts and writes (a chunk is a block's worth of them).
    pub(crate) const SH_WORDS_PER_THREAD: u32 = 4;

    /// Fault: a head outside `0..num_keys` (with no keys, a head other than 0).
    pub(crate) const SH_FAULT_OUTSIDE: u32 = 1;
    /// Fault: a head not above the one before it (unsorted or repeated).
    pub(crate) const SH_FAULT_NOT_ABOVE: u32 = 2;

    /// Status word (u64): the complement of the smallest `position << 8 | fault` over invalid
    /// heads (0 when there is none), so that an atomic maximum keeps the smallest.
    pub(crate) const SH_STATUS_INVALID: u32 = 0;
    /// Status word: the number of segments (0 after an invalid head).
    pub(crate) const SH_STATUS_COUNT: u32 = 1;
    /// Status word: the invalid head's value.
    pub(crate) const SH_STATUS_VALUE: u32 = 2;
    /// Status word: the value of the head before it.
    pub(crate) const SH_STATUS_PREVIOUS: u32 = 3;
    /// The number of status words.
    pub(crate) const SH_STATUS_WORDS: u32 = 4;
}

kernel_params! {
    /// Parameters of `segment_heads` (device pointers as `u64`).
    struct SegmentHeadsParams {
        /// The head flags (u32 words) or the head indices (i64).
        input: u64,
        /// `begin_len` i64 begin offsets.
        begin: u64,
        /// `end_len` i64 end offsets.
        end: u64,
        /// One i64: the number of segments.
        count: u64,
        /// Head flags: a u64 per chunk, its heads, then the heads before it.
        chunk_counts: u64,
        /// SH_STATUS_WORDS u64, zeroed.
        status: u64,
        num_keys: u64,
        /// Head indices: their number.
        num_inputs: u64,
        begin_len: u64,
        end_len: u64,
        stage: u32,
    }
}

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "segment_heads",
    header: include_str!("../../cuda/segment_heads/segment_heads.cuh"),
    constants: &[&SH_CONSTANTS],
    params_name: SegmentHeadsParams::CXX_NAME,
    params_declaration: SegmentHeadsParams::cxx_declaration,
    template_args: &[TemplateArg::BlockThreads],
    // A u64 per warp for the block scans.
    static_shared_bytes: |spec| 8 * u64::from(spec.block_threads / 32),
};

impl KernelSpec {
    /// The spec of the `segment_heads` kernel (every stage, head flags and head indices; its
    /// key type is nominal: [`KeyType::U32`]).
    ///
    /// ```
    /// use oxicub::kernels::KernelSpec;
    ///
    /// let spec = KernelSpec::segment_heads();
    /// assert_eq!(spec.to_string(), "oxicub::segment_heads<256>");
    /// ```
    pub fn segment_heads() -> KernelSpec {
        KernelSpec {
            family: KernelFamily::SegmentHeads,
            key: KeyType::U32,
            value: None,
            direction: None,
            tier: Tier::GridStride,
            block_threads: BLOCK_THREADS,
            consts: Vec::new(),
        }
    }
}

/// Every `segment_heads` spec: the one kernel.
///
/// ```
/// assert_eq!(oxicub::kernels::families::segment_heads::specs().len(), 1);
/// ```
pub fn specs() -> Vec<KernelSpec> {
    vec![KernelSpec::segment_heads()]
}

/// Why a head index is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadFault {
    /// Outside `0..num_keys` (with no keys, any head but 0).
    Outside,
    /// Not above the head before it: the heads are unsorted or repeated.
    NotAbove,
}

/// The smallest invalid head index a call found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidHead {
    /// Its position in the heads.
    pub position: u64,
    /// Why it is invalid.
    pub fault: HeadFault,
    /// Its value.
    pub value: i64,
    /// The value of the head before it (0 at position 0).
    pub previous: i64,
}

/// The decoded status of a finished call ([`HeadsStatus::decode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadsReport {
    /// The number of segments the heads describe (written to the call's count, even when it
    /// is above the offsets' lengths; 0 after an invalid head).
    pub count: u64,
    /// The smallest invalid head index (head flags have none).
    pub invalid: Option<InvalidHead>,
}

/// The status words a call leaves on the device, read when the caller checks.
#[derive(Debug)]
pub struct HeadsStatus {
    /// `None` when the call was only measured.
    words: Option<StatusWords>,
    health: Arc<ContextHealth>,
}

impl HeadsStatus {
    /// The status of a call that was only measured (nothing ran, nothing to report).
    fn measured(runtime: &KernelRuntime) -> HeadsStatus {
        HeadsStatus {
            words: None,
            health: Arc::clone(runtime.health()),
        }
    }

    /// Reads the status (waits for the stream). A kernel fault seen here (the call's own, or
    /// an earlier one's on the context) is [`KernelError::ContextPoisoned`].
    pub fn decode(&self, stream: &Arc<CudaStream>) -> Result<HeadsReport, KernelError> {
        self.health.check()?;
        let words = match self.words.as_ref() {
            Some(words) => words.read(&self.health, stream)?,
            None => Vec::new(),
        };
        let word = |at: u32| words.get(at as usize).copied().unwrap_or(0);
        let invalid = word(SH_STATUS_INVALID);
        let invalid = (invalid != 0).then(|| {
            let code = !invalid;
            InvalidHead {
                position: code >> 8,
                fault: if code & 0xFF == u64::from(SH_FAULT_OUTSIDE) {
                    HeadFault::Outside
                } else {
                    HeadFault::NotAbove
                },
                value: word(SH_STATUS_VALUE) as i64,
                previous: word(SH_STATUS_PREVIOUS) as i64,
            }
        });
        Ok(HeadsReport {
            count: word(SH_STATUS_COUNT),
            invalid,
        })
    }
}

/// Where a call writes: `begin` and `end` offsets (as many as they hold) and the count.
struct Outputs<'s> {
    begin: u64,
    end: u64,
    count: u64,
    lens: (u64, u64),
    guards: Vec<SyncOnDrop<'s>>,
}

/// Checks the outputs (context, a count of one element at least) and takes their pointers.
fn outputs<'s>(
    runtime: &KernelRuntime,
    stream: &'s CudaStream,
    begin: &'s mut CudaViewMut<'_, i64>,
    end: &'s mut CudaViewMut<'_, i64>,
    count: &'s mut CudaViewMut<'_, i64>,
) -> Result<Outputs<'s>, KernelError> {
    runtime.check_buffer("begin", &*begin)?;
    runtime.check_buffer("end", &*end)?;
    runtime.check_buffer("count", &*count)?;
    at_least("count", count.len(), 1)?;
    let lens = (begin.len() as u64, end.len() as u64);
    let mut guards = Vec::new();
    Ok(Outputs {
        begin: keep(&mut guards, begin.device_ptr_mut(stream)),
        end: keep(&mut guards, end.device_ptr_mut(stream)),
        count: keep(&mut guards, count.device_ptr_mut(stream)),
        lens,
        guards,
    })
}

/// `num_keys` as the i64 offsets hold it.
fn check_num_keys(num_keys: u64) -> Result<(), KernelError> {
    if num_keys > i64::MAX as u64 {
        return Err(KernelError::TooLarge {
            buffer: "keys",
            len: num_keys,
            max: i64::MAX as u64,
            why: "offsets are 64-bit signed",
        });
    }
    Ok(())
}

/// Writes the begin and end offsets of the segments that head `flags` describe over
/// `num_keys` keys (bit `j % 32` of word `j / 32`: a segment starts at key `j`; key 0 always
/// starts one; bits past the keys are ignored) into `begin` and `end`, and their number into
/// `count[0]`. Offsets past `begin.len()` or `end.len()` are not written; the count always is
/// ([`HeadsReport::count`] tells it to the host). Asynchronous on `stream`: three launches, no
/// host round trip. `flags` holds `ceil(num_keys / 32)` words at least.
///
/// ```no_run
/// use oxicub::kernels::families::segment_heads::offsets_from_head_flags;
/// use oxicub::kernels::Scratch;
/// use oxicub::kernels::{open_context, KernelRuntime};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let flags = stream.clone_htod(&[0b1001u32]).map_err(|e| e.to_string())?;
/// let mut begin = stream.alloc_zeros::<i64>(4).map_err(|e| e.to_string())?;
/// let mut end = stream.alloc_zeros::<i64>(4).map_err(|e| e.to_string())?;
/// let mut count = stream.alloc_zeros::<i64>(1).map_err(|e| e.to_string())?;
/// let status = offsets_from_head_flags(
///     &runtime,
///     &stream,
///     &Scratch::allocate(),
///     &flags.as_view(),
///     10,
///     &mut begin.as_view_mut(),
///     &mut end.as_view_mut(),
///     &mut count.as_view_mut(),
/// )?;
/// assert_eq!(status.decode(&stream)?.count, 2); // [0, 3) and [3, 10)
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn offsets_from_head_flags(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    scratch: &Scratch<'_>,
    flags: &CudaView<'_, u32>,
    num_keys: u64,
    begin: &mut CudaViewMut<'_, i64>,
    end: &mut CudaViewMut<'_, i64>,
    count: &mut CudaViewMut<'_, i64>,
) -> Result<HeadsStatus, KernelError> {
    check_num_keys(num_keys)?;
    runtime.check_buffer("flags", flags)?;
    let words = num_keys.div_ceil(32);
    at_least("flags", flags.len(), words)?;
    let chunk_words = u64::from(BLOCK_THREADS * SH_WORDS_PER_THREAD);
    let chunks = words.div_ceil(chunk_words);
    let kernel = runtime.kernel(&KernelSpec::segment_heads())?;
    let mut status = scratch.status(runtime, stream, SH_STATUS_WORDS.into())?;
    // SAFETY: COUNT writes every chunk's count before SCAN reads it.
    let mut chunk_counts =
        unsafe { scratch.uninit::<u64>(runtime, stream, "chunk_counts", chunks.max(1)) }?;
    let mut out = outputs(runtime, stream, begin, end, count)?;
    if scratch.is_measuring() {
        return Ok(HeadsStatus::measured(runtime));
    }
    let params = SegmentHeadsParams {
        input: keep(&mut out.guards, flags.device_ptr(stream)),
        begin: out.begin,
        end: out.end,
        count: out.count,
        chunk_counts: chunk_counts.ptr(&mut out.guards, stream),
        status: status
            .as_mut()
            .map_or(0, |words| words.ptr(&mut out.guards, stream)),
        num_keys,
        num_inputs: flags.len() as u64,
        begin_len: out.lens.0,
        end_len: out.lens.1,
        stage: SH_STAGE_FLAGS_COUNT,
    };
    let stage = |stage: u32| SegmentHeadsParams { stage, ..params };
    // A block per chunk (as many as are resident together, looping over the rest).
    let over_chunks =
        runtime.grid_blocks(&kernel, chunks.saturating_mul(u64::from(BLOCK_THREADS)), 1);
    if chunks > 0 {
        runtime.launch(stream, &kernel, over_chunks, stage(SH_STAGE_FLAGS_COUNT))?;
    }
    runtime.launch(stream, &kernel, 1, stage(SH_STAGE_FLAGS_SCAN))?;
    if chunks > 0 {
        runtime.launch(stream, &kernel, over_chunks, stage(SH_STAGE_FLAGS_WRITE))?;
    }
    drop(out);
    Ok(HeadsStatus {
        words: status,
        health: Arc::clone(runtime.health()),
    })
}

/// Writes the begin and end offsets of the segments that head indices describe over
/// `num_keys` keys (`heads`: the sorted, unique positions where a segment starts, each in
/// `0..num_keys`; key 0 always starts one, and a head at 0 may be given or omitted) into
/// `begin` and `end`, and their number into `count[0]`. Offsets past `begin.len()` or
/// `end.len()` are not written; the count always is. Every head is checked on the device: the
/// smallest invalid one is reported by [`HeadsStatus::decode`] (the offsets are then
/// unspecified and the count is 0). Asynchronous on `stream`: two launches, no host round
/// trip.
///
/// ```no_run
/// use oxicub::kernels::families::segment_heads::offsets_from_head_indices;
/// use oxicub::kernels::Scratch;
/// use oxicub::kernels::{open_context, KernelRuntime};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let heads = stream.clone_htod(&[4i64, 19]).map_err(|e| e.to_string())?;
/// let mut begin = stream.alloc_zeros::<i64>(3).map_err(|e| e.to_string())?;
/// let mut end = stream.alloc_zeros::<i64>(3).map_err(|e| e.to_string())?;
/// let mut count = stream.alloc_zeros::<i64>(1).map_err(|e| e.to_string())?;
/// let status = offsets_from_head_indices(
///     &runtime,
///     &stream,
///     &Scratch::allocate(),
///     &heads.as_view(),
///     25,
///     &mut begin.as_view_mut(),
///     &mut end.as_view_mut(),
///     &mut count.as_view_mut(),
/// )?;
/// let report = status.decode(&stream)?;
/// assert_eq!((report.count, report.invalid), (3, None));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn offsets_from_head_indices(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    scratch: &Scratch<'_>,
    heads: &CudaView<'_, i64>,
    num_keys: u64,
    begin: &mut CudaViewMut<'_, i64>,
    end: &mut CudaViewMut<'_, i64>,
    count: &mut CudaViewMut<'_, i64>,
) -> Result<HeadsStatus, KernelError> {
    check_num_keys(num_keys)?;
    runtime.check_buffer("heads", heads)?;
    let kernel = runtime.kernel(&KernelSpec::segment_heads())?;
    let mut status = scratch.status(runtime, stream, SH_STATUS_WORDS.into())?;
    let mut out = outputs(runtime, stream, begin, end, count)?;
    if scratch.is_measuring() {
        return Ok(HeadsStatus::measured(runtime));
    }
    let num_heads = heads.len() as u64;
    let params = SegmentHeadsParams {
        input: keep(&mut out.guards, heads.device_ptr(stream)),
        begin: out.begin,
        end: out.end,
        count: out.count,
        chunk_counts: 0,
        status: status
            .as_mut()
            .map_or(0, |words| words.ptr(&mut out.guards, stream)),
        num_keys,
        num_inputs: num_heads,
        begin_len: out.lens.0,
        end_len: out.lens.1,
        stage: SH_STAGE_INDICES,
    };
    if num_heads > 0 {
        let grid = runtime.grid_blocks(&kernel, num_heads, 1);
        runtime.launch(stream, &kernel, grid, params)?;
    }
    let finish = SegmentHeadsParams {
        stage: SH_STAGE_INDICES_FINISH,
        ..params
    };
    runtime.launch(stream, &kernel, 1, finish)?;
    drop(out);
    Ok(HeadsStatus {
        words: status,
        health: Arc::clone(runtime.health()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_spec_is_valid_and_declares_its_constants() {
        let spec = KernelSpec::segment_heads();
        spec.validate().expect("valid");
        assert_eq!(spec.entry_name(), "oxicub_segment_heads__b256");
        let source = spec.generated_source();
        assert!(
            source.contains("constexpr u32 SH_STAGE_INDICES_FINISH = 4u;"),
            "{source}"
        );
        assert!(source.contains("struct SegmentHeadsParams"), "{source}");
    }
}
