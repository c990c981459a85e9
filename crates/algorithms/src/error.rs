//! The public error type of oxicub's algorithms.

use oxicub_kernels::KernelError;

/// Every error an oxicub algorithm returns. Argument errors name the argument and the bound it
/// broke; everything below the algorithms (NVRTC, the driver, device limits) arrives as
/// [`Error::Kernel`].
///
/// ```
/// use oxicub::{radix, Error, Host};
///
/// let keys = [1u32, 2, 3];
/// let mut codes = [0u32; 2];
/// let err = radix::transform_keys(&Host::new(), &keys[..], &mut codes[..]).unwrap_err();
/// assert!(matches!(err, Error::LengthMismatch { arg: "codes", actual: 2, expected: 3, .. }));
/// assert_eq!(err.to_string(), "`codes` has 2 elements, expected 3 (= keys.len())");
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument's value is not allowed.
    #[error("invalid argument `{arg}`: {reason}")]
    InvalidArgument {
        /// The argument's name, as in the function's signature.
        arg: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// A buffer's length does not match what the other arguments require.
    #[error("`{arg}` has {actual} elements, expected {expected} (= {expected_from})")]
    LengthMismatch {
        /// The buffer's name, as in the function's signature.
        arg: &'static str,
        /// Its length.
        actual: usize,
        /// The length it must have.
        expected: usize,
        /// Where the expected length comes from, e.g. `keys.len()` or `2^digit_bits`.
        expected_from: &'static str,
    },
    /// An input is larger than the algorithm supports with the chosen types.
    #[error("`{arg}` has {len} elements, at most {max} are supported: {reason}")]
    TooLarge {
        /// The buffer's name.
        arg: &'static str,
        /// Its length.
        len: u64,
        /// The largest supported length.
        max: u64,
        /// Why, and what to change.
        reason: &'static str,
    },
    /// An output buffer is shorter than the number of items the call writes.
    #[error("`{arg}` has {len} elements, at least {required} are needed (= {required_from})")]
    BufferTooSmall {
        /// The buffer's name, as in the function's signature.
        arg: &'static str,
        /// Its length.
        len: usize,
        /// The number of elements the call writes.
        required: usize,
        /// Where that number comes from, e.g. `k`.
        required_from: &'static str,
    },
    /// One segment of a batched call is invalid: a per-segment value outside its declared
    /// bounds, offsets out of order or past the buffer. Reported for the smallest such segment
    /// index; the other segments are processed (see `batched_topk`).
    #[error("segment {segment}: {arg} = {value} {reason}")]
    InvalidSegment {
        /// The segment's index.
        segment: u64,
        /// The per-segment argument at fault (`k`, `segment_sizes`, `direction`, `offsets`).
        arg: &'static str,
        /// Its value for that segment.
        value: i64,
        /// What is wrong: the bound it breaks.
        reason: String,
    },
    /// An input that must be sorted is not: its key at `position` comes before (in the call's
    /// order) the key at `position - 1`. Reported for the first such position of the first
    /// input found out of order (`a` before `b`).
    #[error(
        "`{arg}` is not sorted {order}: {arg}[{position}] comes before {arg}[{}]",
        position - 1
    )]
    NotSorted {
        /// The input (`a`, `b`).
        arg: &'static str,
        /// The first position whose key comes before the key before it.
        position: u64,
        /// The order the call names (`ascending`, `descending`).
        order: &'static str,
    },
    /// An input holds the same key at `position - 1` and `position` although the environment
    /// guarantees `NoDuplicateKeys`. Reported as [`Error::NotSorted`] is.
    #[error(
        "`{arg}` repeats a key at {arg}[{position}] (equal to {arg}[{}]), which the \
         environment's NoDuplicateKeys guarantee rules out",
        position - 1
    )]
    RepeatedKey {
        /// The input (`a`, `b`).
        arg: &'static str,
        /// The first position whose key equals the key before it.
        position: u64,
    },
    /// The ranks of a sharded call do not state the same problem (`sharded::Problem::agree`),
    /// or ran one call under different requirements.
    #[error("rank {rank} has {field} = {theirs}, this rank {ours}")]
    RanksDisagree {
        /// What differs (`rows`, `k`, `shards`, `key type`, `tie_break`, ...).
        field: &'static str,
        /// The first rank that differs from this one.
        rank: usize,
        /// Its value.
        theirs: String,
        /// This rank's.
        ours: String,
    },
    /// A rank of a sharded call failed its own checks (it returned the error); this rank's
    /// outputs hold unspecified values.
    #[error("rank {rank} failed its part of the sharded call (its own error is reported there)")]
    PeerFailed {
        /// The first failed rank.
        rank: usize,
    },
    /// The communicator failed: NCCL missing, or an NCCL call's error.
    #[error("communicator: {call} failed: {reason}")]
    Communicator {
        /// The failed call (`ncclAllGather`, loading `libnccl.so`, ...).
        call: &'static str,
        /// What it reported.
        reason: String,
    },
    /// A parameter is outside its bounds (for example `k > keys.len()`), or its bounds contradict
    /// the environment's guarantees. Names the parameter.
    #[error(transparent)]
    Param(#[from] oxicub_params::ParamError),
    /// The kernel layer failed: missing driver or NVRTC, compile error, device limits, a
    /// failed CUDA call, a buffer from another context.
    #[error(transparent)]
    Kernel(#[from] KernelError),
}

impl Error {
    /// The number of keys as the `i64` count the parameters speak in, or [`Error::TooLarge`].
    pub(crate) fn item_count(len: usize) -> Result<i64, Error> {
        i64::try_from(len).map_err(|_| Error::TooLarge {
            arg: "keys",
            len: len as u64,
            max: i64::MAX as u64,
            reason: "item counts are 64-bit signed",
        })
    }

    /// A [`Error::LengthMismatch`] unless `actual == expected`.
    pub(crate) fn check_len(
        arg: &'static str,
        actual: usize,
        expected: usize,
        expected_from: &'static str,
    ) -> Result<(), Error> {
        if actual == expected {
            Ok(())
        } else {
            Err(Error::LengthMismatch {
                arg,
                actual,
                expected,
                expected_from,
            })
        }
    }
}

/// Attaches the name of a failed CUDA driver call.
pub(crate) fn driver_error(
    call: &'static str,
) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
    move |source| Error::Kernel(KernelError::Driver { call, source })
}
