//! Segments described by their heads, on [`Cuda`]: head flags or head indices in device memory
//! become begin and end offsets and their number in device memory, in stream order (the
//! `segment_heads` kernel family). The number of segments stays on the device, so it can be
//! the deferred `num_segments` of the next call without a host round trip; the checks (every
//! head index, the offsets' room) are read when the caller checks.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut};
use oxicub_kernels::families::segment_heads::{self, HeadFault, HeadsStatus};

use super::heads::{not_above_reason, outside_reason};
use super::{DeviceReport, Pending};
use crate::backend::Cuda;
use crate::Error;

/// Which description a call read.
#[derive(Clone, Copy, Debug)]
enum Heads {
    Flags,
    Indices,
}

/// A call's status on the device, read when the caller checks.
#[derive(Debug)]
struct HeadsCheck {
    status: HeadsStatus,
    stream: Arc<CudaStream>,
    heads: Heads,
    num_keys: u64,
    begin_len: usize,
    end_len: usize,
}

impl DeviceReport<usize> for HeadsCheck {
    fn wait(&self) -> Result<usize, Error> {
        let report = self.status.decode(&self.stream)?;
        if let Some(invalid) = report.invalid {
            let reason = match invalid.fault {
                HeadFault::Outside => {
                    outside_reason(invalid.position, invalid.value, self.num_keys)
                }
                HeadFault::NotAbove => {
                    not_above_reason(invalid.position, invalid.value, invalid.previous)
                }
            };
            return Err(Error::InvalidArgument {
                arg: "heads",
                reason,
            });
        }
        let required_from = match self.heads {
            Heads::Flags => "the number of segments the head flags describe",
            Heads::Indices => "the number of segments the head indices describe",
        };
        // At most `num_keys` segments, which fit a usize (the call's argument).
        let count = usize::try_from(report.count).unwrap_or(usize::MAX);
        for (arg, len) in [("begin", self.begin_len), ("end", self.end_len)] {
            if count > len {
                return Err(Error::BufferTooSmall {
                    arg,
                    len,
                    required: count,
                    required_from,
                });
            }
        }
        Ok(count)
    }
}

/// The checks made before launching: `num_keys` fits the `i64` offsets, `count` has room for
/// the number of segments.
fn check_outputs(num_keys: usize, count: &CudaViewMut<'_, i64>) -> Result<(), Error> {
    Error::item_count(num_keys)?;
    if count.is_empty() {
        return Err(Error::BufferTooSmall {
            arg: "count",
            len: count.len(),
            required: 1,
            required_from: "one i64: the number of segments",
        });
    }
    Ok(())
}

/// [`offsets_from_head_flags`](super::offsets_from_head_flags) on the device: the begin and
/// end offsets of the segments that head `flags` describe over `num_keys` keys (bit `j % 32`
/// of word `j / 32` set: a segment starts at key `j`; key 0 always starts one; bits past
/// `num_keys` are ignored) are written to `begin` and `end`, and their number to `count[0]`,
/// asynchronously on [`Cuda::stream`] with no host round trip: `count` can be the
/// `num_segments::Deferred` of a segmented sort over these offsets.
///
/// `flags` needs `ceil(num_keys / 32)` words and `count` one element, or the call fails at
/// once with [`Error::BufferTooSmall`] naming the argument. `begin` and `end` need room for
/// every segment: the count is always written, offsets past a buffer are not, and
/// [`Pending::check`] reports [`Error::BufferTooSmall`] naming the buffer. Checked, the result
/// is the number of segments (the offsets are then those
/// [`offsets_from_head_flags`](super::offsets_from_head_flags) returns).
///
/// ```no_run
/// use oxicub::segments::offsets_from_head_flags_on_device;
/// use oxicub::Cuda;
///
/// let cuda = Cuda::new(0)?;
/// // Heads at 0, 3 and 33 over 40 keys.
/// let flags = cuda.upload(&[0b1000u32 | 1, 0b10])?;
/// let (mut begin, mut end) = (cuda.alloc_zeros::<i64>(40)?, cuda.alloc_zeros::<i64>(40)?);
/// let mut count = cuda.alloc_zeros::<i64>(1)?;
/// let segments = offsets_from_head_flags_on_device(
///     &cuda,
///     flags.as_view(),
///     40,
///     begin.as_view_mut(),
///     end.as_view_mut(),
///     count.as_view_mut(),
/// )?;
/// // ... launch work that reads `begin`, `end` and `count` on the same stream, then:
/// assert_eq!(segments.check()?, 3);
/// assert_eq!(cuda.download(&begin.slice(..3))?, [0, 3, 33]);
/// assert_eq!(cuda.download(&end.slice(..3))?, [3, 33, 40]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn offsets_from_head_flags_on_device(
    cuda: &Cuda,
    flags: CudaView<'_, u32>,
    num_keys: usize,
    mut begin: CudaViewMut<'_, i64>,
    mut end: CudaViewMut<'_, i64>,
    mut count: CudaViewMut<'_, i64>,
) -> Result<Pending<usize>, Error> {
    let words = num_keys.div_ceil(32);
    if flags.len() < words {
        return Err(Error::BufferTooSmall {
            arg: "flags",
            len: flags.len(),
            required: words,
            required_from: "ceil(num_keys / 32) words of head flags",
        });
    }
    check_outputs(num_keys, &count)?;
    let (begin_len, end_len) = (begin.len(), end.len());
    let status = segment_heads::offsets_from_head_flags(
        cuda.runtime(),
        cuda.stream(),
        &cuda.scratch()?,
        &flags,
        num_keys as u64,
        &mut begin,
        &mut end,
        &mut count,
    )?;
    Ok(Pending::computed(Box::new(HeadsCheck {
        status,
        stream: Arc::clone(cuda.stream()),
        heads: Heads::Flags,
        num_keys: num_keys as u64,
        begin_len,
        end_len,
    })))
}

/// [`offsets_from_head_indices`](super::offsets_from_head_indices) on the device: the begin
/// and end offsets of the segments that head indices describe over `num_keys` keys (`heads`:
/// the sorted, unique positions where a segment starts, each in `0..num_keys`; key 0 always
/// starts one, and a head at 0 may be given or omitted) are written to `begin` and `end`, and
/// their number to `count[0]`, asynchronously on [`Cuda::stream`] with no host round trip:
/// `count` can be the `num_segments::Deferred` of a segmented sort over these offsets.
///
/// Every head is checked on the device: [`Pending::check`] reports the first invalid one
/// (unsorted, repeated, outside `0..num_keys`) as [`Error::InvalidArgument`] naming `heads`
/// and the position, with the host function's message; the offsets are then unspecified and
/// `count[0]` is 0. `count` needs one element ([`Error::BufferTooSmall`] at once); `begin` and
/// `end` need room for every segment (`heads.len() + 1` is always enough): the count is always
/// written, offsets past a buffer are not, and [`Pending::check`] reports
/// [`Error::BufferTooSmall`] naming the buffer. Checked, the result is the number of segments.
///
/// ```no_run
/// use oxicub::segments::offsets_from_head_indices_on_device;
/// use oxicub::Cuda;
///
/// let cuda = Cuda::new(0)?;
/// let heads = cuda.upload(&[4i64, 19])?;
/// let (mut begin, mut end) = (cuda.alloc_zeros::<i64>(3)?, cuda.alloc_zeros::<i64>(3)?);
/// let mut count = cuda.alloc_zeros::<i64>(1)?;
/// let segments = offsets_from_head_indices_on_device(
///     &cuda,
///     heads.as_view(),
///     25,
///     begin.as_view_mut(),
///     end.as_view_mut(),
///     count.as_view_mut(),
/// )?;
/// assert_eq!(segments.check()?, 3);
/// assert_eq!(cuda.download(&begin.as_view())?, [0, 4, 19]);
/// assert_eq!(cuda.download(&end.as_view())?, [4, 19, 25]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn offsets_from_head_indices_on_device(
    cuda: &Cuda,
    heads: CudaView<'_, i64>,
    num_keys: usize,
    mut begin: CudaViewMut<'_, i64>,
    mut end: CudaViewMut<'_, i64>,
    mut count: CudaViewMut<'_, i64>,
) -> Result<Pending<usize>, Error> {
    check_outputs(num_keys, &count)?;
    let (begin_len, end_len) = (begin.len(), end.len());
    let status = segment_heads::offsets_from_head_indices(
        cuda.runtime(),
        cuda.stream(),
        &cuda.scratch()?,
        &heads,
        num_keys as u64,
        &mut begin,
        &mut end,
        &mut count,
    )?;
    Ok(Pending::computed(Box::new(HeadsCheck {
        status,
        stream: Arc::clone(cuda.stream()),
        heads: Heads::Indices,
        num_keys: num_keys as u64,
        begin_len,
        end_len,
    })))
}
