//! Batched (segmented) top-k: many independent segments, each with its own size, `k` and
//! select direction, in one call, on every backend.
//!
//! # The problem
//!
//! A [`Problem`] is the shared segmented problem ([`Segments`]: layout, sizes, count; see
//! [`crate::segments`]) plus what top-k adds: `k` and the select direction.
//!
//! * **Layout.** [`Problem::strided`]: segment `i` is `keys[i * stride ..][..size_i]` (a
//!   `[rows x stride]` matrix whose rows may be partly used). [`Problem::offsets`]: segment `i`
//!   is `keys[begin[i] .. end[i]]`; its size is `end[i] - begin[i]`, and the `segment_sizes`
//!   parameter only bounds it (pass `segment_size::PerSegment::<(), MIN, MAX>::new(())`, or a
//!   `Static`/`Uniform` size that every segment must have). [`Problem::listed`]: segment `i`
//!   is the `i`-th of a list of slices (on [`Cuda`], `CudaView`s of any allocations: the
//!   seeds' iterator of iterators), run with [`select_keys_listed`], [`select_pairs_listed`]
//!   or [`select_indices_listed`]; sizes are bounded as with offsets.
//! * **`segment_sizes`, `k`, `direction`**: each static (`Static<N>`, `direction::Max`),
//!   uniform (`Uniform`, `direction::Choice`) or per segment (`PerSegment` over a host slice
//!   on [`Host`]/[`AnyBackend`], a `CudaView` on [`Cuda`]). A per-segment direction is a `u8`
//!   per segment (`0` = max, `1` = min; `SelectDirection as u8`); on the host a
//!   `&[SelectDirection]` works too.
//! * **`num_segments`**: static, uniform, or [`Deferred`](oxicub_params::Deferred) (an `i64`
//!   the host does not read: `&i64` on the host, a one-element `CudaView<i64>` on [`Cuda`],
//!   read in stream order, so launches can follow each other with no host synchronisation).
//!
//! **Temporary storage** on [`Cuda`] is sized from the bounds: per segment a few words of
//! descriptor, and for segments of more than 2048 keys (several blocks each) a histogram,
//! chunk counts and the selected indices. Give the environment a
//! [`TotalItems`](oxicub_params::guarantee::TotalItems) guarantee (the sum of the segment
//! sizes) and that second part is sized for at most `total / 2049` such segments instead of
//! one per segment (many small segments around a few huge ones). The guarantee is checked (on
//! the device when the sizes are there): a sum outside it is reported by
//! [`Outcome::check`](crate::segments::Pending::check) as [`Error::Param`] naming
//! `total_items`, and the results are then unspecified (memory is never written out of
//! bounds).
//!
//! Every entry point first runs the one front check
//! ([`contract::batched_topk`](crate::contract::batched_topk)): static contradictions (a static
//! `k` above every segment size the types allow, ...) are compile errors there, host-known
//! ones are [`Error::Param`]. The static bounds that survive choose which GPU kernels exist
//! (see [`Cuda`] below).
//!
//! # Results
//!
//! Segment `i` writes its `min(k_i, size_i)` results to `out[i * out_stride ..]`, in the
//! environment's order (as single-problem [`topk`](crate::topk)); the slots past them are left
//! untouched, or take a fill key and index ([`Problem::fill_past_k`]). `out_stride` is, unless
//! set with [`Problem::out_stride`], the most one segment can write: `min(k.max,
//! segment_sizes.max)` over the tightest bounds (and at most the stride
//! or `keys.len()`). The outputs need `(n - 1) * out_stride + that` elements for `n` segments
//! (`n` = the upper bound of a deferred `num_segments`). [`select_indices`] writes each item's
//! index *within its segment* (MoE: the expert id).
//!
//! The requirements are those of single-problem top-k, per segment: the default
//! (`gpu_to_gpu`, `prefer_smaller_index`, `stable_sorted`) pins every output bit, and every
//! combination of determinism x tie-break x output ordering is honoured.
//!
//! # `k` larger than a segment, empty segments, bad values
//!
//! * `k_i > size_i` is **clamped per segment**: the segment writes all its `size_i` items. (The
//!   single-problem top-k rejects `k > keys.len()` when the host knows both; in a batch the
//!   sizes vary by segment, and a static `k` above every size the types allow is still a
//!   compile error.) A caller whose rows must hold `k` items asks for an error instead
//!   ([`Problem::reject_k_above_size`]): such a segment is then invalid, as below. An empty
//!   segment, `k_i = 0` and `num_segments = 0` write nothing.
//! * Per-segment values are checked against their declared bounds (static, runtime and the
//!   environment's guarantees), offsets against order and the buffer, a direction against the
//!   option set compiled. A segment that fails writes nothing, the others are processed, and
//!   the failure of the smallest such segment index is reported by [`Outcome::check`] as
//!   [`Error::InvalidSegment`] (on [`Cuda`] the check is done on the device; reading the
//!   report is the caller's explicit synchronisation). A deferred `num_segments` outside its
//!   bounds is clamped into them and reported as [`Error::Param`] the same way.
//!
//! A static `k` that no segment the types allow can hold does not build (the front check's
//! contract, evaluated at compile time):
//!
//! ```compile_fail
//! use oxicub::{batched_topk::{self, Problem}, Host};
//! use oxicub::params::{direction, k, num_segments, segment_size};
//!
//! let problem = Problem::strided(
//!     256,
//!     segment_size::Uniform::<1, 256>::new(256)?,
//!     k::Static::<300>::new(),
//!     direction::Max,
//!     num_segments::uniform(1)?,
//! );
//! let mut out = [0f32; 256];
//! batched_topk::select_keys(&Host::new(), &problem, &[0f32; 256][..], &mut out[..], &oxicub::env::Env::new())?.check()?;
//! # Ok::<(), oxicub::Error>(())
//! ```
//!
//! ```
//! use oxicub::{batched_topk::{self, Problem}, Host};
//! use oxicub::env::Env;
//! use oxicub::params::{direction, k, num_segments, segment_size};
//!
//! // Two rows of four scores: top-2 of each.
//! let scores = [0.1f32, 0.9, 0.3, 0.9, /**/ 5.0, -1.0, 7.0, 6.0];
//! let problem = Problem::strided(
//!     4,
//!     segment_size::Static::<4>::new(),
//!     k::Static::<2>::new(),
//!     direction::Max,
//!     num_segments::uniform(2)?,
//! );
//! let (mut top, mut expert) = ([0f32; 4], [0u32; 4]);
//! batched_topk::select_indices(&Host::new(), &problem, &scores[..], &mut top[..], &mut expert[..], &Env::new())?
//!     .check()?;
//! assert_eq!(top, [0.9, 0.9, 7.0, 6.0]);
//! assert_eq!(expert, [1, 3, 2, 3]); // ties: the smaller index first
//! # Ok::<(), oxicub::Error>(())
//! ```

mod cuda;
mod host;
mod listed;

pub use listed::{select_indices_listed, select_keys_listed, select_pairs_listed};

use cudarc::driver::{CudaView, CudaViewMut};
use oxicub_env::Environment;
use oxicub_kernels::families::batched_topk::{BatchedFill, BatchedTiers};
use oxicub_kernels::{KeyType, RadixBits};
use oxicub_params::Param;

use crate::backend::{AnyBackend, Backend, Buffer, Cuda, DeviceValue, Host};
use crate::contract::{BatchedTopKArgsOn, BatchedTopKRequest, StaticTiers};
use crate::radix::RadixKey;
use crate::sealed::{Sealed, Token};
use crate::segments::{Offsets, Outcome, Segments, Strided};
use crate::values::{check_topk_value_width, SourceIndex, ValuesIn};
use crate::Error;

/// A backend that runs batched top-k: [`Host`], [`Cuda`] and [`AnyBackend`]. Use the functions
/// of this module: they check the arguments once ([`contract`](crate::contract)) and then run the checked call.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not run batched top-k",
    note = "oxicub's backends are `Host`, `Cuda` and `AnyBackend`"
)]
pub trait BatchedTopKBackend: Backend {
    /// Batched top-k after the front check (only the contract builds a request).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn batched_topk_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: &BatchedTopKRequest,
        args: BatchedTopKArgsOn<'_, Self>,
        keys: Self::Slice<'_, K>,
        values: ValuesIn<Self::Slice<'_, V>, V>,
        out_keys: Self::SliceMut<'_, K>,
        out_values: Option<Self::SliceMut<'_, V>>,
    ) -> Result<Outcome, Error>;

    /// Batched top-k over a listed layout (one slice per segment) after the front check.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn batched_topk_listed_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: &BatchedTopKRequest,
        args: BatchedTopKArgsOn<'_, Self>,
        segments: &[Self::Slice<'_, K>],
        values: ValuesIn<&[Self::Slice<'_, V>], V>,
        out_keys: Self::SliceMut<'_, K>,
        out_values: Option<Self::SliceMut<'_, V>>,
    ) -> Result<Outcome, Error>;
}

/// A batched top-k [`Problem`] every argument of which backend `B` can read: its layout
/// ([`Layout`](crate::segments::Layout)), sizes and `k` ([`PerSegmentOn`](crate::PerSegmentOn)),
/// direction ([`ChoicesOn`](crate::ChoicesOn)) and number of segments
/// ([`ValuesOn`](crate::ValuesOn)). Implemented by `Problem` whenever that holds; the entry points take
/// any such problem.
///
/// ```
/// use oxicub::batched_topk::{Problem, ProblemOn};
/// use oxicub::Host;
/// use oxicub::params::{direction, k, num_segments, segment_size};
///
/// fn runs_on_host<P: ProblemOn<Host>>(_: &P) {}
/// let ks = [2i64, 1];
/// runs_on_host(&Problem::strided(
///     4,
///     segment_size::Static::<4>::new(),
///     k::PerSegment::<_, 0, 4>::new(&ks[..]),
///     direction::Max,
///     num_segments::uniform(2)?,
/// ));
/// # Ok::<(), oxicub::params::ParamError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "the `{B}` backend cannot run the batched top-k problem `{Self}`",
    note = "every argument of the problem must be readable on the backend: per-segment values \
            and offsets in host slices on `Host` and `AnyBackend`, in `CudaView`s on `Cuda`"
)]
pub trait ProblemOn<B: Backend + ?Sized>: Sealed {
    /// The front check of a call on this problem over `num_keys` keys (listed: the slices'
    /// total) writing `outputs` (name, length): only it builds a request.
    #[doc(hidden)]
    fn checked<E: Environment>(
        &self,
        token: Token,
        num_keys: usize,
        env: &E,
        outputs: &[(&'static str, usize)],
    ) -> Result<(BatchedTopKRequest, BatchedTopKArgsOn<'_, B>), Error>;
}

impl BatchedTopKBackend for Host {
    fn batched_topk_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &BatchedTopKRequest,
        args: BatchedTopKArgsOn<'_, Self>,
        keys: &[K],
        values: ValuesIn<&[V], V>,
        out_keys: &mut [K],
        out_values: Option<&mut [V]>,
    ) -> Result<Outcome, Error> {
        Ok(host::run(
            request, &args, keys, values, out_keys, out_values,
        ))
    }

    fn batched_topk_listed_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &BatchedTopKRequest,
        args: BatchedTopKArgsOn<'_, Self>,
        segments: &[&[K]],
        values: ValuesIn<&[&[V]], V>,
        out_keys: &mut [K],
        out_values: Option<&mut [V]>,
    ) -> Result<Outcome, Error> {
        listed::run_joined(self, request, args, segments, values, out_keys, out_values)
    }
}

/// On [`AnyBackend`] the arguments are host slices; on a GPU they are copied there and back.
impl BatchedTopKBackend for AnyBackend {
    fn batched_topk_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &BatchedTopKRequest,
        args: BatchedTopKArgsOn<'_, Self>,
        keys: &[K],
        values: ValuesIn<&[V], V>,
        out_keys: &mut [K],
        out_values: Option<&mut [V]>,
    ) -> Result<Outcome, Error> {
        match self {
            AnyBackend::Host(_) => Ok(host::run(
                request, &args, keys, values, out_keys, out_values,
            )),
            AnyBackend::Cuda(cuda) => {
                cuda::run_any(cuda, request, &args, keys, values, out_keys, out_values)
            }
        }
    }

    fn batched_topk_listed_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &BatchedTopKRequest,
        args: BatchedTopKArgsOn<'_, Self>,
        segments: &[&[K]],
        values: ValuesIn<&[&[V]], V>,
        out_keys: &mut [K],
        out_values: Option<&mut [V]>,
    ) -> Result<Outcome, Error> {
        // The host slices are copied to the device anyway: joined into one buffer there.
        listed::run_joined(self, request, args, segments, values, out_keys, out_values)
    }
}

impl BatchedTopKBackend for Cuda {
    fn batched_topk_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &BatchedTopKRequest,
        args: BatchedTopKArgsOn<'_, Self>,
        keys: CudaView<'_, K>,
        values: ValuesIn<CudaView<'_, V>, V>,
        out_keys: CudaViewMut<'_, K>,
        out_values: Option<CudaViewMut<'_, V>>,
    ) -> Result<Outcome, Error> {
        cuda::run(self, request, args, keys, values, out_keys, out_values)
    }

    fn batched_topk_listed_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &BatchedTopKRequest,
        args: BatchedTopKArgsOn<'_, Self>,
        segments: &[CudaView<'_, K>],
        values: ValuesIn<&[CudaView<'_, V>], V>,
        out_keys: CudaViewMut<'_, K>,
        out_values: Option<CudaViewMut<'_, V>>,
    ) -> Result<Outcome, Error> {
        cuda::run_listed(self, request, args, segments, values, out_keys, out_values)
    }
}

// ---- The problem ----

/// One batched top-k problem: the layout of the segments and the four parameters. Build it
/// with [`Problem::strided`] or [`Problem::offsets`]; run it with [`select_keys`],
/// [`select_pairs`] or [`select_indices`].
///
/// ```
/// use oxicub::batched_topk::Problem;
/// use oxicub::params::{direction, k, num_segments, segment_size};
///
/// // MoE routing: 16384 tokens x 256 experts, top-8: everything but the token count static.
/// let routing = Problem::strided(
///     256,
///     segment_size::Static::<256>::new(),
///     k::Static::<8>::new(),
///     direction::Max,
///     num_segments::uniform(16_384)?,
/// );
/// # let _ = routing;
/// # Ok::<(), oxicub::params::ParamError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Problem<L, S, K, D, N> {
    pub(crate) segments: Segments<L, S, N>,
    pub(crate) k: K,
    pub(crate) direction: D,
    pub(crate) out_stride: Option<u64>,
    pub(crate) reject_k_above_size: bool,
    pub(crate) fill: Option<FillPastK>,
}

/// What [`Problem::fill_past_k`] writes: a key of the call's key type, and an index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FillPastK {
    key_bits: u64,
    key: KeyType,
    index: i64,
}

impl FillPastK {
    /// The launch's fill for `K` keys, with the index as `I` when the call writes indices.
    fn bits<K: RadixKey, I: SourceIndex>(&self, indices: bool) -> Result<BatchedFill, Error> {
        if self.key != K::KEY_TYPE {
            return Err(Error::InvalidArgument {
                arg: "fill_past_k",
                reason: format!(
                    "its key is {:?}, the call's keys are {:?}",
                    self.key,
                    K::KEY_TYPE
                ),
            });
        }
        let value_bits = if indices {
            Some(
                I::fill_bits(self.index).ok_or_else(|| Error::InvalidArgument {
                    arg: "fill_past_k",
                    reason: format!(
                        "index {} does not fit the indices' type {}",
                        self.index,
                        std::any::type_name::<I>()
                    ),
                })?,
            )
        } else {
            None
        };
        Ok(BatchedFill {
            key_bits: self.key_bits,
            value_bits,
        })
    }
}

/// The request of a call on `K` keys with the problem's fill resolved for it (`I`: the index
/// type when the call writes indices).
fn with_fill<K: RadixKey, I: SourceIndex>(
    mut request: BatchedTopKRequest,
    indices: bool,
) -> Result<BatchedTopKRequest, Error> {
    request.fill_bits = match request.fill {
        Some(fill) => Some(fill.bits::<K, I>(indices)?),
        None => None,
    };
    Ok(request)
}

impl<L, S, K, D, N> Problem<L, S, K, D, N> {
    /// Top-`k` in `direction` of every segment of `segments` (any layout).
    ///
    /// ```
    /// use oxicub::batched_topk::Problem;
    /// use oxicub::segments::Segments;
    /// use oxicub::params::{direction, k, num_segments, segment_size};
    ///
    /// let rows = Segments::strided(256, segment_size::Static::<256>::new(), num_segments::uniform(4)?);
    /// let problem = Problem::new(rows, k::Static::<8>::new(), direction::Max);
    /// # let _ = problem;
    /// # Ok::<(), oxicub::params::ParamError>(())
    /// ```
    pub fn new(segments: Segments<L, S, N>, k: K, direction: D) -> Problem<L, S, K, D, N> {
        Problem {
            segments,
            k,
            direction,
            out_stride: None,
            reject_k_above_size: false,
            fill: None,
        }
    }

    /// The segments.
    pub fn segments(&self) -> &Segments<L, S, N> {
        &self.segments
    }
}

impl<S, K, D, N> Problem<Strided, S, K, D, N> {
    /// Segment `i` is `keys[i * stride ..][..size_i]`; every `size_i <= stride`.
    pub fn strided(
        stride: usize,
        segment_sizes: S,
        k: K,
        direction: D,
        num_segments: N,
    ) -> Problem<Strided, S, K, D, N> {
        Problem::new(
            Segments::strided(stride, segment_sizes, num_segments),
            k,
            direction,
        )
    }
}

impl<O, S, K, D, N> Problem<Offsets<O>, S, K, D, N> {
    /// Segment `i` is `keys[begin[i] .. end[i]]`. `segment_sizes` bounds `end[i] - begin[i]`:
    /// `segment_size::PerSegment::<(), MIN, MAX>::new(())` (optionally `.with_bounds(..)`), or
    /// a `Static`/`Uniform` size every segment must have.
    ///
    /// ```
    /// use oxicub::{batched_topk::{self, Problem}, Host};
    /// use oxicub::params::{direction, k, num_segments, segment_size};
    ///
    /// let keys = [4u8, 1, 9, /**/ 7, /**/ 3, 3];
    /// let (begin, end) = ([0i64, 3, 4], [3i64, 4, 6]);
    /// let sizes = segment_size::PerSegment::<(), 0, 1024>::new(());
    /// let problem = Problem::offsets(&begin[..], &end[..], sizes, k::Static::<2>::new(), direction::Min, num_segments::uniform(3)?);
    /// let mut low = [0u8; 6];
    /// batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut low[..], &oxicub::env::Env::new())?.check()?;
    /// // Segment 1 holds one key: k is clamped to 1, its second slot is untouched.
    /// assert_eq!(low, [1, 4, 7, 0, 3, 3]);
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn offsets(
        begin: O,
        end: O,
        segment_sizes: S,
        k: K,
        direction: D,
        num_segments: N,
    ) -> Problem<Offsets<O>, S, K, D, N> {
        Problem::new(
            Segments::offsets(begin, end, segment_sizes, num_segments),
            k,
            direction,
        )
    }
}

impl<L, S, K, D, N> Problem<L, S, K, D, N> {
    /// Sets the distance between the first outputs of consecutive segments (default: the most
    /// one segment can write). It must be at least that.
    pub fn out_stride(mut self, out_stride: usize) -> Self {
        self.out_stride = Some(out_stride as u64);
        self
    }

    /// Refuses a segment whose `k` is above its size instead of clamping it (the default
    /// writes the whole segment): such a segment writes nothing and the call reports
    /// [`Error::InvalidSegment`] for the smallest one, naming `k`; the other segments are
    /// processed. For callers whose rows must hold at least `k` items (a bug upstream
    /// otherwise).
    ///
    /// ```
    /// use oxicub::{batched_topk::{self, Problem}, Error, Host};
    /// use oxicub::params::{direction, k, num_segments, segment_size};
    ///
    /// let keys = [4u8, 1, 9, /**/ 7, 0, 0];
    /// let sizes = [3i64, 1];
    /// let problem = Problem::strided(3, segment_size::PerSegment::<_, 0, 3>::new(&sizes[..]), k::Static::<2>::new(), direction::Max, num_segments::uniform(2)?)
    ///     .reject_k_above_size();
    /// let mut top = [0u8; 4];
    /// let result = batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut top[..], &oxicub::env::Env::new())?.check();
    /// assert!(matches!(result, Err(Error::InvalidSegment { segment: 1, arg: "k", value: 2, .. })));
    /// assert_eq!(top, [9, 4, 0, 0]); // segment 0 written, segment 1 not
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn reject_k_above_size(mut self) -> Self {
        self.reject_k_above_size = true;
        self
    }

    /// Writes `key` into each valid segment's key slots past its results, up to the most one
    /// segment can write (the `min(k.max, size.max)` slots a segment's outputs span), and
    /// `index` into the same index slots of [`select_indices`] (as the index type, which must
    /// hold it: `-1` needs a signed one). A sparse-attention indexer marks a short row's
    /// missing picks this way. Copied values' slots ([`select_pairs`]) and an invalid
    /// segment's slots are left untouched. `key` must be of the call's key type
    /// ([`Error::InvalidArgument`] naming `fill_past_k` otherwise).
    ///
    /// ```
    /// use oxicub::{batched_topk::{self, Problem}, Host};
    /// use oxicub::params::{direction, k, num_segments, segment_size};
    ///
    /// let keys = [0.5f32, 0.9, 0.1, /**/ 0.7, 0.0, 0.0];
    /// let lengths = [3i64, 1]; // the second row holds one key
    /// let problem = Problem::strided(3, segment_size::PerSegment::<_, 0, 3>::new(&lengths[..]), k::Static::<2>::new(), direction::Max, num_segments::uniform(2)?)
    ///     .fill_past_k(f32::NEG_INFINITY, -1);
    /// let (mut top, mut at) = ([0f32; 4], [0i32; 4]);
    /// batched_topk::select_indices(&Host::new(), &problem, &keys[..], &mut top[..], &mut at[..], &oxicub::env::Env::new())?.check()?;
    /// assert_eq!(top, [0.9, 0.5, 0.7, f32::NEG_INFINITY]);
    /// assert_eq!(at, [1, 0, 0, -1]);
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn fill_past_k<F: RadixKey>(mut self, key: F, index: i64) -> Self {
        self.fill = Some(FillPastK {
            key_bits: key.to_bits().to_u64(),
            key: F::KEY_TYPE,
            index,
        });
        self
    }
}

/// The kernel variants a call with these parameter types instantiates on [`Cuda`], decided
/// from the static bounds alone (runtime bounds may skip some of them): the control stages
/// and one kernel per tier. `value_bytes` is 0 for keys only, else 4 or 8.
///
/// ```
/// use oxicub::batched_topk::kernel_specs;
/// use oxicub::env::Env;
/// use oxicub::params::{k, segment_size};
///
/// // MoE routing: k = Static<8> over Static<256> experts compiles the warp tier only.
/// let specs = kernel_specs::<f32, segment_size::Static<256>, k::Static<8>, Env>(4);
/// let names: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
/// assert_eq!(names, [
///     "oxicub::batched_topk<oxicub::KeyU32, 256, 0, 0, 1, 0>",
///     "oxicub::batched_topk<oxicub::KeyF32, 256, 1, 4, 8, 0>",
/// ]);
/// ```
pub fn kernel_specs<Key: RadixKey, S: Param, K: Param, E: Environment>(
    value_bytes: u8,
) -> Vec<oxicub_kernels::KernelSpec> {
    let sizes = StaticTiers::<S, K, E::Guarantees>::SIZES;
    let k = StaticTiers::<S, K, E::Guarantees>::K;
    // The key width's own cap for the stream tier (the constant is the union over widths).
    let key_bytes = std::mem::size_of::<Key>() as u32;
    let for_key = BatchedTiers::for_key_bounds(key_bytes, (sizes.min, sizes.max), (k.min, k.max));
    oxicub_kernels::families::batched_topk::specs_for(
        Key::KEY_TYPE,
        value_bytes,
        StaticTiers::<S, K, E::Guarantees>::TIERS.and(for_key),
        StaticTiers::<S, K, E::Guarantees>::WARP_ITEMS,
    )
}

/// The top `k_i` keys of every segment, written to `out_keys[i * out_stride ..]` in the
/// environment's order. See the [module docs](self) for the layout, the clamping of `k` and
/// the per-segment checks reported by the returned [`Outcome`].
///
/// ```
/// use oxicub::{batched_topk::{self, Problem}, Host};
/// use oxicub::env::{require, determinism, output_ordering};
/// use oxicub::params::{direction, k, num_segments, segment_size, SelectDirection};
///
/// // Per-segment k and direction (CUB has no per-segment direction).
/// let keys = [3i32, 1, 2, /**/ 9, 8, 7];
/// let ks = [1i64, 2];
/// let dirs = [SelectDirection::Max, SelectDirection::Min];
/// let problem = Problem::strided(
///     3,
///     segment_size::Static::<3>::new(),
///     k::PerSegment::<_, 0, 3>::new(&ks[..]),
///     direction::PerSegment::<_>::new(&dirs[..]),
///     num_segments::uniform(2)?,
/// );
/// let mut out = [0i32; 6];
/// let env = require!(determinism::RunToRun, output_ordering::Sorted);
/// batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut out[..], &env)?.check()?;
/// assert_eq!(out, [3, 0, 0, 7, 8, 0]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn select_keys<B, K, P, E>(
    backend: &B,
    problem: &P,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    env: &E,
) -> Result<Outcome, Error>
where
    B: BatchedTopKBackend,
    K: RadixKey,
    P: ProblemOn<B>,
    E: Environment,
{
    let outputs = [("out_keys", out_keys.len())];
    let (request, args) = problem.checked(Token::new(), keys.len(), env, &outputs)?;
    let request = with_fill::<K, u32>(request, false)?;
    let token = Token::new();
    backend.batched_topk_checked::<K, u32>(
        token,
        &request,
        args,
        keys,
        ValuesIn::None,
        out_keys,
        None,
    )
}

/// The top `k_i` keys of every segment with the value of each (`values[j]` belongs to
/// `keys[j]`); values are any `Copy` type of 4 or 8 bytes. As [`select_keys`] otherwise.
///
/// ```
/// use oxicub::{batched_topk::{self, Problem}, Host};
/// use oxicub::params::{direction, k, num_segments, segment_size};
///
/// let keys = [0.5f32, 0.25, /**/ 0.0, 1.0];
/// let tokens = [10u64, 11, 20, 21];
/// let problem = Problem::strided(2, segment_size::Static::<2>::new(), k::Static::<1>::new(), direction::Max, num_segments::Static::<2>::new());
/// let (mut top, mut token) = ([0f32; 2], [0u64; 2]);
/// batched_topk::select_pairs(&Host::new(), &problem, &keys[..], &tokens[..], &mut top[..], &mut token[..], &oxicub::env::Env::new())?.check()?;
/// assert_eq!((top, token), ([0.5, 1.0], [10, 21]));
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn select_pairs<B, K, V, P, E>(
    backend: &B,
    problem: &P,
    keys: B::Slice<'_, K>,
    values: B::Slice<'_, V>,
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    env: &E,
) -> Result<Outcome, Error>
where
    B: BatchedTopKBackend,
    K: RadixKey,
    V: DeviceValue,
    P: ProblemOn<B>,
    E: Environment,
{
    check_topk_value_width::<V>();
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_values", out_values.len()),
    ];
    let (request, args) = problem.checked(Token::new(), keys.len(), env, &outputs)?;
    let request = with_fill::<K, u32>(request, false)?;
    Error::check_len("values", values.len(), keys.len(), "keys.len()")?;
    backend.batched_topk_checked(
        Token::new(),
        &request,
        args,
        keys,
        ValuesIn::Copy(values),
        out_keys,
        Some(out_values),
    )
}

/// The top `k_i` keys of every segment with each one's index *within its segment* (`u32`,
/// `u64` or `i64`): for MoE routing, the expert ids. As [`select_keys`] otherwise.
///
/// ```
/// use oxicub::{batched_topk::{self, Problem}, Host};
/// use oxicub::env::{require, tie_break};
/// use oxicub::params::{direction, k, num_segments, segment_size};
///
/// let keys = [1u16, 5, 5, 5];
/// let problem = Problem::strided(4, segment_size::Static::<4>::new(), k::Static::<2>::new(), direction::Max, num_segments::uniform(1)?);
/// let (mut top, mut at) = ([0u16; 2], [0i64; 2]);
/// let env = require!(tie_break::PreferLargerIndex);
/// batched_topk::select_indices(&Host::new(), &problem, &keys[..], &mut top[..], &mut at[..], &env)?.check()?;
/// assert_eq!(at, [2, 3]); // the tie at the boundary keeps the larger indices, stable sorted
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn select_indices<B, K, I, P, E>(
    backend: &B,
    problem: &P,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    env: &E,
) -> Result<Outcome, Error>
where
    B: BatchedTopKBackend,
    K: RadixKey,
    I: SourceIndex,
    P: ProblemOn<B>,
    E: Environment,
{
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_indices", out_indices.len()),
    ];
    let (request, args) = problem.checked(Token::new(), keys.len(), env, &outputs)?;
    let request = with_fill::<K, I>(request, true)?;
    let largest_segment = request.segments.largest;
    if largest_segment > I::MAX_ITEMS {
        return Err(Error::TooLarge {
            arg: "segment_sizes",
            len: largest_segment,
            max: I::MAX_ITEMS,
            reason: "the index type cannot hold every index within a segment; use u64 or i64",
        });
    }
    backend.batched_topk_checked(
        Token::new(),
        &request,
        args,
        keys,
        ValuesIn::Index(I::from_index),
        out_keys,
        Some(out_indices),
    )
}
