//! What a segmented call finds while it runs: per-segment violations, and the results that are
//! valid only once the stream has reached them.

use oxicub_kernels::segments::{
    SegmentedReport, VIOLATION_OFFSETS_OUT_OF_ORDER, VIOLATION_OVERLAPS, VIOLATION_PAST_BUFFER,
    VIOLATION_SIZE_ABOVE_STRIDE, VIOLATION_SIZE_OUT_OF_BOUNDS,
};
use oxicub_params::{BoundOrigin, Bounds, ParamError};

use super::SegmentsRequest;
use crate::Error;

/// Why one segment was not processed. The layout's own checks are shared by every segmented
/// algorithm; an algorithm adds its per-segment parameters' bounds and option sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Violation {
    /// `begin < 0` or `begin > end`.
    OffsetsOutOfOrder,
    /// The segment ends past the `num_keys` keys.
    PastBuffer {
        /// `keys.len()`.
        num_keys: u64,
    },
    /// The size is outside the bounds of `segment_sizes`.
    SizeOutOfBounds(Bounds),
    /// The size is larger than the stride.
    SizeAboveStride,
    /// The segment begins before the previous one ends (an algorithm that writes each segment
    /// where it lies, such as a sort, needs them in order and disjoint).
    Overlaps,
    /// A per-segment parameter is outside its bounds.
    OutOfBounds {
        /// The parameter.
        arg: &'static str,
        /// Its tightest bounds.
        bounds: Bounds,
    },
    /// A segment's `k` is above its size, in a call that refuses that.
    KAboveSize,
    /// A per-segment option is not among the compiled ones.
    NotCompiled {
        /// The parameter.
        arg: &'static str,
        /// The compiled options, one bit each.
        mask: u32,
        /// What each value means (`"0 = max, 1 = min"`).
        legend: &'static str,
    },
}

impl Violation {
    /// The layout's violation with this device code (`oxicub::kernels::segments::VIOLATION_*`),
    /// or `None` for a family's own code.
    pub(crate) fn of_segment(code: u32, request: &SegmentsRequest) -> Option<Violation> {
        Some(match code {
            VIOLATION_OFFSETS_OUT_OF_ORDER => Violation::OffsetsOutOfOrder,
            VIOLATION_PAST_BUFFER => Violation::PastBuffer {
                num_keys: request.num_keys,
            },
            VIOLATION_SIZE_OUT_OF_BOUNDS => Violation::SizeOutOfBounds(request.sizes),
            VIOLATION_SIZE_ABOVE_STRIDE => Violation::SizeAboveStride,
            VIOLATION_OVERLAPS => Violation::Overlaps,
            _ => return None,
        })
    }

    /// The error for segment `segment` whose offending value is `value`.
    pub(crate) fn error(self, segment: u64, value: i64) -> Error {
        let (arg, reason) = match self {
            Violation::OffsetsOutOfOrder => (
                "offsets",
                "is out of order (begin must be in 0..=end)".to_owned(),
            ),
            Violation::PastBuffer { num_keys } => (
                "offsets",
                format!("ends past the keys (keys.len() = {num_keys})"),
            ),
            Violation::SizeOutOfBounds(bounds) => {
                ("segment_sizes", format!("is outside its bounds {bounds}"))
            }
            Violation::SizeAboveStride => (
                "segment_sizes",
                "is larger than the stride of the layout".to_owned(),
            ),
            Violation::Overlaps => (
                "offsets",
                "begins before the previous segment ends (segments must be in order and \
                 disjoint: each is written where it lies)"
                    .to_owned(),
            ),
            Violation::OutOfBounds { arg, bounds } => {
                (arg, format!("is outside its bounds {bounds}"))
            }
            Violation::KAboveSize => (
                "k",
                "is above the segment's size (the problem refuses that: \
                 `Problem::reject_k_above_size`)"
                    .to_owned(),
            ),
            Violation::NotCompiled { arg, mask, legend } => (
                arg,
                format!("is not among the compiled options (mask {mask:#b}; {legend})"),
            ),
        };
        Error::InvalidSegment {
            segment,
            arg,
            value,
            reason,
        }
    }
}

/// The sizes of the valid segments sum to a value outside the `TotalItems` guarantee.
pub(crate) fn total_items_error(bounds: Bounds, total: i64) -> Error {
    Error::Param(ParamError::OutOfBounds {
        param: "total_items",
        value: total,
        bounds,
        origin: BoundOrigin::Guarantee,
    })
}

/// The error a segmented call's decoded device status reports, the first that applies of: a
/// deferred `num_segments` outside its bounds, a `TotalItems` guarantee broken, the smallest
/// invalid segment (`family` names the family's own violation codes).
pub(crate) fn segmented_error(
    report: SegmentedReport,
    segments: &SegmentsRequest,
    family: impl Fn(u32) -> Option<Violation>,
) -> Result<(), Error> {
    if let Some(value) = report.bad_num_segments {
        let (_, error) = segments.num_segments.resolve("num_segments", value);
        return error.map_or(Ok(()), Err);
    }
    if let Some(total) = report.bad_total_items {
        let total = total.min(i64::MAX as u64) as i64;
        return Err(total_items_error(segments.total_items, total));
    }
    match report.violation {
        None => Ok(()),
        Some((segment, code, value)) => {
            let code = u32::from(code);
            match family(code).or_else(|| Violation::of_segment(code, segments)) {
                Some(violation) => Err(violation.error(segment, value)),
                None => Err(Error::InvalidArgument {
                    arg: "segments",
                    reason: format!("segment {segment}: unknown violation code {code}"),
                }),
            }
        }
    }
}

/// The device side of a [`Pending`] result: status words a call left on the device, read when
/// the caller checks (and, for a result computed there, the result).
pub(crate) trait DeviceReport<T = ()>: std::fmt::Debug + Send + Sync {
    /// Waits for the stream and turns the status into the call's error, if any (else the
    /// result).
    fn wait(&self) -> Result<T, Error>;
}

#[derive(Debug)]
enum Report<T> {
    /// Known when the call returned (host backends, and device calls with nothing to report).
    Ready(T, Option<Error>),
    /// The value known, its checks on the device.
    Device(T, Box<dyn DeviceReport>),
    /// The value and its checks on the device (read together).
    Computed(Box<dyn DeviceReport<T>>),
}

/// The result `T` of a call whose checks of the values it reads while it runs (per-segment
/// values, a deferred `num_segments` or `k`) are made there (on [`Cuda`], on the device, in
/// stream order): valid once [`check`](Pending::check) says so. Every segmented algorithm and
/// single-problem [`topk`](crate::topk) return one. On [`Cuda`], checking waits for the stream
/// when the call left a report there (per-segment or deferred values), and returns at once
/// when it could not (every value known on the host): the outputs are then read in stream
/// order, as cudarc's copies do. Between back-to-back launches, keep the `Pending` and check it
/// later (after the caller's own synchronisation it has nothing left to wait for).
///
/// [`Cuda`]: crate::Cuda
///
/// ```
/// use oxicub::{batched_topk::{self, Problem}, Host};
/// use oxicub::params::{direction, k, num_segments, segment_size};
///
/// let keys = [1u8, 5, 3, /**/ 2, 2, 9];
/// let problem = Problem::strided(3, segment_size::Static::<3>::new(), k::Static::<1>::new(), direction::Max, num_segments::uniform(2)?);
/// let mut top = [0u8; 2];
/// let outcome = batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut top[..], &oxicub::env::Env::new())?;
/// outcome.check()?; // every segment was valid
/// assert_eq!(top, [5, 9]);
/// # Ok::<(), oxicub::Error>(())
/// ```
#[must_use = "per-segment values are checked while the call runs; `.check()` reports a violation"]
#[derive(Debug)]
pub struct Pending<T> {
    report: Report<T>,
}

/// The outcome of a segmented call that writes into caller buffers: nothing but the checks.
pub type Outcome = Pending<()>;

impl<T> Pending<T> {
    /// A result whose checks are already done (`error` is the first violation, if any).
    pub(crate) fn ready(value: T, error: Option<Error>) -> Pending<T> {
        Pending {
            report: Report::Ready(value, error),
        }
    }

    /// A result whose checks are on the device.
    pub(crate) fn device(value: T, report: Box<dyn DeviceReport>) -> Pending<T> {
        Pending {
            report: Report::Device(value, report),
        }
    }

    /// A result read from the device with its checks.
    pub(crate) fn computed(report: Box<dyn DeviceReport<T>>) -> Pending<T> {
        Pending {
            report: Report::Computed(report),
        }
    }

    /// The same checks over `f(value)`, for a result known when the call returned.
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> Pending<U> {
        let report = match self.report {
            Report::Ready(value, error) => Report::Ready(f(value), error),
            Report::Device(value, report) => Report::Device(f(value), report),
            Report::Computed(_) => unreachable!("no caller maps a result read from the device"),
        };
        Pending { report }
    }

    /// The result when every value read was valid, else one error, the first that applies of:
    /// a deferred `num_segments` or `k` outside its bounds (naming the bounds it broke and their
    /// origin), a `TotalItems` guarantee the valid segments' sizes broke (all
    /// [`Error::Param`]), the smallest invalid segment ([`Error::InvalidSegment`]). Waits for
    /// the stream on [`Cuda`](crate::Cuda) when the call left a report there, and only then.
    pub fn check(self) -> Result<T, Error> {
        match self.report {
            Report::Ready(value, None) => Ok(value),
            Report::Ready(_, Some(error)) => Err(error),
            Report::Device(value, report) => report.wait().map(|()| value),
            Report::Computed(report) => report.wait(),
        }
    }

    /// Whether the outcome is known to be valid without reading anything (a host call's, or a
    /// device call that could report nothing).
    fn is_settled_ok(&self) -> bool {
        matches!(self.report, Report::Ready(_, None))
    }

    /// [`check`](Pending::check) without giving the outcome up: for a call captured into a
    /// CUDA graph (stream capture on [`Cuda::stream`](crate::Cuda::stream)), whose status each
    /// replay rewrites, this reports the replay that last finished (it waits for the stream).
    /// Keep the outcome as long as the graph: it holds the status buffer the graph writes.
    ///
    /// ```
    /// use oxicub::{topk, Host};
    /// use oxicub::params::{direction, k};
    ///
    /// let mut top = [0u32; 1];
    /// let outcome = topk::select_keys(&Host::new(), &direction::Max, &[4u32, 7][..], &mut top[..], &k::Static::<1>::new(), &oxicub::env::Env::new())?;
    /// outcome.check_replay()?;
    /// outcome.check_replay()?; // the same report
    /// assert_eq!(top, [7]);
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn check_replay(&self) -> Result<T, Error>
    where
        T: Clone,
    {
        match &self.report {
            Report::Ready(value, None) => Ok(value.clone()),
            Report::Ready(_, Some(error)) => Err(error.clone()),
            Report::Device(value, report) => report.wait().map(|()| value.clone()),
            Report::Computed(report) => report.wait(),
        }
    }
}

impl Pending<()> {
    /// Sets this outcome aside on `cuda`, to be checked with the others by
    /// [`Cuda::check_deferred`](crate::Cuda::check_deferred) at the caller's next
    /// synchronisation: the call's checks are recorded on the device as it runs, and nothing
    /// waits now. An outcome that could report nothing is dropped at once. (It keeps its
    /// status buffer until checked: with a workspace, the pool grows to the outcomes deferred
    /// between two checks, then stays.)
    ///
    /// ```no_run
    /// use oxicub::{topk, Cuda, Env};
    /// use oxicub::params::{direction, k};
    ///
    /// let cuda = Cuda::new(0)?;
    /// let (scores, limit) = (cuda.upload(&[4u32, 7, 1])?, cuda.upload(&[2i64])?);
    /// let mut top = cuda.alloc_zeros::<u32>(2)?;
    /// let kp = k::Deferred::<_, 0, 2>::new(limit.as_view()); // k on the device
    /// topk::select_keys(&cuda, &direction::Max, scores.as_view(), top.as_view_mut(), &kp, &Env::new())?
    ///     .defer(&cuda);
    /// assert_eq!(cuda.download(&top.as_view())?, [7, 4]); // stream order: no check needed first
    /// cuda.check_deferred()?;
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn defer(self, cuda: &crate::Cuda) {
        if !self.is_settled_ok() {
            cuda.defer(self);
        }
    }
}
