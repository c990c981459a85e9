//! Batched (segmented) top-k: many independent segments, each with its own size, `k` and
//! select direction, in one call, on every backend.
//!
//! # The problem
//!
//! A [`Problem`] says where the segments are and what is known about them:
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
//! * **`num_segments`**: static, uniform, or [`Deferred`] (an `i64` the host does not read:
//!   `&i64` on the host, a one-element `CudaView<i64>` on [`Cuda`], read in stream order, so
//!   launches can follow each other with no host synchronisation).
//!
//! **Temporary storage** on [`Cuda`] is sized from the bounds: per segment a few words of
//! descriptor, and for segments of more than 2048 keys (several blocks each) a histogram,
//! chunk counts and the selected indices. Give the environment a
//! [`TotalItems`](oxicub_params::guarantee::TotalItems) guarantee (the sum of the segment
//! sizes) and that second part is sized for at most `total / 2049` such segments instead of
//! one per segment (many small segments around a few huge ones). The guarantee is checked (on the device when the sizes are
//! there): a sum outside it is reported by [`Outcome::check`] as [`Error::Param`] naming
//! `total_items`, and the results are then unspecified (memory is never written out of
//! bounds).
//!
//! Every entry point first runs the one front check [`contract::batched_topk`]: static
//! contradictions (a static `k` above every segment size the types allow, ...) are compile
//! errors there, host-known ones are [`Error::Param`]. The static bounds that survive choose
//! which GPU kernels exist (see [`Cuda`] below).
//!
//! # Results
//!
//! Segment `i` writes its `min(k_i, size_i)` results to `out[i * out_stride ..]`, in the
//! environment's order (as single-problem [`topk`](crate::topk)); the slots past them are left
//! untouched. `out_stride` is, unless set with [`Problem::out_stride`], the most one segment
//! can write: `min(k.max, segment_sizes.max)` over the tightest bounds (and at most the stride
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
//!   compile error.) An empty segment, `k_i = 0` and `num_segments = 0` write nothing.
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
//! use oxicub_algorithms::{batched_topk::{self, Problem}, Host};
//! use oxicub_params::{direction, k, num_segments, segment_size};
//!
//! let problem = Problem::strided(
//!     256,
//!     segment_size::Uniform::<1, 256>::new(256)?,
//!     k::Static::<300>::new(),
//!     direction::Max,
//!     num_segments::uniform(1)?,
//! );
//! let mut out = [0f32; 256];
//! batched_topk::select_keys(&Host::new(), &problem, &[0f32; 256][..], &mut out[..], &oxicub_env::Env::new())?.check()?;
//! # Ok::<(), oxicub_algorithms::Error>(())
//! ```
//!
//! ```
//! use oxicub_algorithms::{batched_topk::{self, Problem}, Host};
//! use oxicub_env::Env;
//! use oxicub_params::{direction, k, num_segments, segment_size};
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
//! # Ok::<(), oxicub_algorithms::Error>(())
//! ```

mod cuda;
mod host;
mod listed;

pub use listed::{select_indices_listed, select_keys_listed, select_pairs_listed, Listed};

use cudarc::driver::{CudaView, CudaViewMut};
use oxicub_env::{merged_static_bounds, Environment, Guarantees, Resolved};
use oxicub_kernels::families::batched_topk::{BatchedTiers, WARP_MAX_SIZE};
use oxicub_params::{
    role, Bounds, Deferred, DiscreteParam, DiscreteParamFor, Param, ParamError, ParamFor,
    PerSegment, PerSegmentChoice, SelectDirection, SingleValue, Static, Uniform,
};

use crate::backend::{AnyBackend, Backend, Buffer, Cuda, Host};
use crate::radix::RadixKey;
use crate::topk::{SourceIndex, ValuesIn};
use crate::{contract, Error};

// ---- Where each argument's values are, per backend ----

/// A backend that runs batched top-k (all of them). Use the functions of this module: they
/// check the arguments once and then call [`batched_topk_checked`](Self::batched_topk_checked).
pub trait BatchedTopKBackend: Backend {
    /// Per-segment `i64` values (sizes, `k`, offsets): `&[i64]` on the host, a `CudaView` on
    /// [`Cuda`].
    type Ints<'r>: Copy;
    /// Per-segment directions: `&[u8]` on the host, a `CudaView<u8>` on [`Cuda`].
    type Bytes<'r>: Copy;
    /// One `i64` the host does not read before the call (a deferred `num_segments`).
    type Int<'r>: Copy;

    /// Batched top-k after the argument checks.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn batched_topk_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: &Request,
        args: Args<'_, Self>,
        keys: Self::Slice<'_, K>,
        values: ValuesIn<Self::Slice<'_, V>, V>,
        out_keys: Self::SliceMut<'_, K>,
        out_values: Option<Self::SliceMut<'_, V>>,
    ) -> Result<Outcome, Error>;

    /// Batched top-k over a listed layout (one slice per segment) after the argument checks.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn batched_topk_listed_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: &Request,
        args: Args<'_, Self>,
        segments: &[Self::Slice<'_, K>],
        values: ValuesIn<&[Self::Slice<'_, V>], V>,
        out_keys: Self::SliceMut<'_, K>,
        out_values: Option<Self::SliceMut<'_, V>>,
    ) -> Result<Outcome, Error>;
}

/// A count that is one host value, one value per segment, or (segment sizes with offsets) only
/// bounded.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum CountArg<I> {
    /// The same value for every segment.
    Host(u64),
    /// One value per segment.
    PerSegment(I),
    /// No values: only bounds (the sizes come from the layout's offsets).
    BoundsOnly,
}

/// A direction for every segment, or one per segment.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum DirectionArg<B> {
    /// The same for every segment.
    Host(SelectDirection),
    /// One `u8` per segment.
    PerSegment(B),
}

/// The number of segments: on the host, or read where the backend keeps it.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum NumSegmentsArg<I> {
    /// Known on the host.
    Host(u64),
    /// Deferred.
    Deferred(I),
}

/// Where segment `i` starts.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum LayoutArg<I> {
    /// At `i * stride`.
    Strided(u64),
    /// At `begin[i]`, ending at `end[i]`.
    Offsets {
        /// Begin offsets.
        begin: I,
        /// End offsets.
        end: I,
    },
    /// Each segment is its own slice, passed beside the problem ([`Problem::listed`]).
    Listed,
}

/// Every per-segment argument of one call, as the backend reads it.
#[doc(hidden)]
pub struct Args<'r, B: BatchedTopKBackend + ?Sized> {
    /// The layout.
    pub layout: LayoutArg<B::Ints<'r>>,
    /// The segment sizes.
    pub sizes: CountArg<B::Ints<'r>>,
    /// `k`.
    pub k: CountArg<B::Ints<'r>>,
    /// The directions.
    pub direction: DirectionArg<B::Bytes<'r>>,
    /// The number of segments.
    pub num_segments: NumSegmentsArg<B::Int<'r>>,
}

impl BatchedTopKBackend for Host {
    type Ints<'r> = &'r [i64];
    type Bytes<'r> = &'r [u8];
    type Int<'r> = &'r i64;

    fn batched_topk_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: &Request,
        args: Args<'_, Self>,
        keys: &[K],
        values: ValuesIn<&[V], V>,
        out_keys: &mut [K],
        out_values: Option<&mut [V]>,
    ) -> Result<Outcome, Error> {
        Ok(host::run(
            request,
            &host_args(&args),
            keys,
            values,
            out_keys,
            out_values,
        ))
    }

    fn batched_topk_listed_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: &Request,
        args: Args<'_, Self>,
        segments: &[&[K]],
        values: ValuesIn<&[&[V]], V>,
        out_keys: &mut [K],
        out_values: Option<&mut [V]>,
    ) -> Result<Outcome, Error> {
        listed::run_joined(self, request, args, segments, values, out_keys, out_values)
    }
}

/// The host-memory arguments of [`AnyBackend`] are those of [`Host`].
fn host_args<'r, B>(args: &Args<'r, B>) -> Args<'r, Host>
where
    B: BatchedTopKBackend<Ints<'r> = &'r [i64], Bytes<'r> = &'r [u8], Int<'r> = &'r i64> + ?Sized,
{
    Args {
        layout: args.layout,
        sizes: args.sizes,
        k: args.k,
        direction: args.direction,
        num_segments: args.num_segments,
    }
}

/// On [`AnyBackend`] the arguments are host slices; on a GPU they are copied there and back.
impl BatchedTopKBackend for AnyBackend {
    type Ints<'r> = &'r [i64];
    type Bytes<'r> = &'r [u8];
    type Int<'r> = &'r i64;

    fn batched_topk_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: &Request,
        args: Args<'_, Self>,
        keys: &[K],
        values: ValuesIn<&[V], V>,
        out_keys: &mut [K],
        out_values: Option<&mut [V]>,
    ) -> Result<Outcome, Error> {
        match self {
            AnyBackend::Host(_) => Ok(host::run(
                request,
                &host_args(&args),
                keys,
                values,
                out_keys,
                out_values,
            )),
            AnyBackend::Cuda(cuda) => {
                cuda::run_any(cuda, request, &args, keys, values, out_keys, out_values)
            }
        }
    }

    fn batched_topk_listed_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: &Request,
        args: Args<'_, Self>,
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
    type Ints<'r> = &'r CudaView<'r, i64>;
    type Bytes<'r> = &'r CudaView<'r, u8>;
    type Int<'r> = &'r CudaView<'r, i64>;

    fn batched_topk_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: &Request,
        args: Args<'_, Self>,
        keys: CudaView<'_, K>,
        values: ValuesIn<CudaView<'_, V>, V>,
        out_keys: CudaViewMut<'_, K>,
        out_values: Option<CudaViewMut<'_, V>>,
    ) -> Result<Outcome, Error> {
        cuda::run(self, request, args, keys, values, out_keys, out_values)
    }

    fn batched_topk_listed_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: &Request,
        args: Args<'_, Self>,
        segments: &[CudaView<'_, K>],
        values: ValuesIn<&[CudaView<'_, V>], V>,
        out_keys: CudaViewMut<'_, K>,
        out_values: Option<CudaViewMut<'_, V>>,
    ) -> Result<Outcome, Error> {
        cuda::run_listed(self, request, args, segments, values, out_keys, out_values)
    }
}

// ---- Parameters a backend can read ----

/// A `segment_sizes` parameter a backend can read: `Static`/`Uniform` everywhere,
/// `PerSegment` over the backend's per-segment buffer, or `PerSegment<()>` (bounds only, for
/// [`Problem::offsets`]).
pub trait SegmentSizes<B: BatchedTopKBackend + ?Sized>: ParamFor<role::SegmentSize> {
    /// Where the values are.
    #[doc(hidden)]
    fn arg(&self) -> CountArg<B::Ints<'_>>;
}

/// A `k` parameter a backend can read: `Static`/`Uniform` everywhere, `PerSegment` over the
/// backend's per-segment buffer.
pub trait SegmentK<B: BatchedTopKBackend + ?Sized>: ParamFor<role::K> {
    /// Where the values are.
    #[doc(hidden)]
    fn arg(&self) -> CountArg<B::Ints<'_>>;
}

/// A `num_segments` parameter a backend can read: `Static`/`Uniform`, or `Deferred` where the
/// backend keeps single values (`&i64` on the host, `CudaView<i64>` on [`Cuda`]).
pub trait NumSegments<B: BatchedTopKBackend + ?Sized>:
    ParamFor<role::NumSegments> + SingleValue
{
    /// Where the value is.
    #[doc(hidden)]
    fn arg(&self) -> NumSegmentsArg<B::Int<'_>>;
}

/// A select direction a backend can read: `direction::Max`/`Min`, `direction::Choice`, or
/// `direction::PerSegment` over the backend's per-segment bytes.
pub trait Directions<B: BatchedTopKBackend + ?Sized>:
    DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>
{
    /// Where the values are.
    #[doc(hidden)]
    fn arg(&self) -> DirectionArg<B::Bytes<'_>>;
}

macro_rules! host_valued {
    ($trait:ident, $role:ident) => {
        impl<B: BatchedTopKBackend + ?Sized, const V: i64> $trait<B> for Static<role::$role, V> {
            fn arg(&self) -> CountArg<B::Ints<'_>> {
                CountArg::Host(V as u64)
            }
        }
        impl<B: BatchedTopKBackend + ?Sized, const MIN: i64, const MAX: i64> $trait<B>
            for Uniform<role::$role, MIN, MAX>
        {
            fn arg(&self) -> CountArg<B::Ints<'_>> {
                CountArg::Host(self.get() as u64)
            }
        }
        impl<const MIN: i64, const MAX: i64> $trait<Host>
            for PerSegment<role::$role, &[i64], MIN, MAX>
        {
            fn arg(&self) -> CountArg<&[i64]> {
                CountArg::PerSegment(self.source())
            }
        }
        impl<const MIN: i64, const MAX: i64> $trait<AnyBackend>
            for PerSegment<role::$role, &[i64], MIN, MAX>
        {
            fn arg(&self) -> CountArg<&[i64]> {
                CountArg::PerSegment(self.source())
            }
        }
        impl<'a, const MIN: i64, const MAX: i64> $trait<Cuda>
            for PerSegment<role::$role, CudaView<'a, i64>, MIN, MAX>
        {
            fn arg(&self) -> CountArg<&CudaView<'_, i64>> {
                CountArg::PerSegment(self.source())
            }
        }
    };
}
host_valued!(SegmentSizes, SegmentSize);
host_valued!(SegmentK, K);

impl<B: BatchedTopKBackend + ?Sized, const MIN: i64, const MAX: i64> SegmentSizes<B>
    for PerSegment<role::SegmentSize, (), MIN, MAX>
{
    fn arg(&self) -> CountArg<B::Ints<'_>> {
        CountArg::BoundsOnly
    }
}

impl<B: BatchedTopKBackend + ?Sized, const V: i64> NumSegments<B> for Static<role::NumSegments, V> {
    fn arg(&self) -> NumSegmentsArg<B::Int<'_>> {
        NumSegmentsArg::Host(V as u64)
    }
}
impl<B: BatchedTopKBackend + ?Sized, const MIN: i64, const MAX: i64> NumSegments<B>
    for Uniform<role::NumSegments, MIN, MAX>
{
    fn arg(&self) -> NumSegmentsArg<B::Int<'_>> {
        NumSegmentsArg::Host(self.get() as u64)
    }
}
impl<const MIN: i64, const MAX: i64> NumSegments<Host>
    for Deferred<role::NumSegments, &i64, MIN, MAX>
{
    fn arg(&self) -> NumSegmentsArg<&i64> {
        NumSegmentsArg::Deferred(self.source())
    }
}
impl<const MIN: i64, const MAX: i64> NumSegments<AnyBackend>
    for Deferred<role::NumSegments, &i64, MIN, MAX>
{
    fn arg(&self) -> NumSegmentsArg<&i64> {
        NumSegmentsArg::Deferred(self.source())
    }
}
impl<'a, const MIN: i64, const MAX: i64> NumSegments<Cuda>
    for Deferred<role::NumSegments, CudaView<'a, i64>, MIN, MAX>
{
    fn arg(&self) -> NumSegmentsArg<&CudaView<'_, i64>> {
        NumSegmentsArg::Deferred(self.source())
    }
}

macro_rules! static_direction {
    ($($marker:ident),*) => {$(
        impl<B: BatchedTopKBackend + ?Sized> Directions<B> for oxicub_params::direction::$marker {
            fn arg(&self) -> DirectionArg<B::Bytes<'_>> {
                DirectionArg::Host(SelectDirection::$marker)
            }
        }
    )*};
}
static_direction!(Max, Min);

/// Views a slice of directions as the `u8`s the backends read.
fn direction_bytes(directions: &[SelectDirection]) -> &[u8] {
    // SAFETY: `SelectDirection` is `#[repr(u8)]`, so a slice of it has the size, alignment
    // and (valid, initialised) bytes of a `[u8]` of the same length.
    unsafe { std::slice::from_raw_parts(directions.as_ptr().cast::<u8>(), directions.len()) }
}

macro_rules! choice_directions {
    ($($set:ident),*) => {$(
        impl<B: BatchedTopKBackend + ?Sized> Directions<B>
            for oxicub_params::Choice<oxicub_params::direction::$set>
        {
            fn arg(&self) -> DirectionArg<B::Bytes<'_>> {
                DirectionArg::Host(self.get())
            }
        }
        impl Directions<Host> for PerSegmentChoice<oxicub_params::direction::$set, &[u8]> {
            fn arg(&self) -> DirectionArg<&[u8]> {
                DirectionArg::PerSegment(self.source())
            }
        }
        impl Directions<AnyBackend> for PerSegmentChoice<oxicub_params::direction::$set, &[u8]> {
            fn arg(&self) -> DirectionArg<&[u8]> {
                DirectionArg::PerSegment(self.source())
            }
        }
        impl Directions<Host>
            for PerSegmentChoice<oxicub_params::direction::$set, &[SelectDirection]>
        {
            fn arg(&self) -> DirectionArg<&[u8]> {
                DirectionArg::PerSegment(direction_bytes(self.source()))
            }
        }
        impl Directions<AnyBackend>
            for PerSegmentChoice<oxicub_params::direction::$set, &[SelectDirection]>
        {
            fn arg(&self) -> DirectionArg<&[u8]> {
                DirectionArg::PerSegment(direction_bytes(self.source()))
            }
        }
        impl<'a> Directions<Cuda>
            for PerSegmentChoice<oxicub_params::direction::$set, CudaView<'a, u8>>
        {
            fn arg(&self) -> DirectionArg<&CudaView<'_, u8>> {
                DirectionArg::PerSegment(self.source())
            }
        }
    )*};
}
choice_directions!(Max, Min, Either);

// ---- The problem ----

/// The strided layout: segment `i` starts at `keys[i * stride]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strided {
    stride: u64,
}

/// The offsets layout: segment `i` is `keys[begin[i] .. end[i]]` (offsets as `i64`).
#[derive(Clone, Copy, Debug)]
pub struct Offsets<O> {
    begin: O,
    end: O,
}

/// A segment layout a backend can read: [`Strided`] everywhere, [`Offsets`] over the
/// backend's per-segment buffers.
pub trait Layout<B: BatchedTopKBackend + ?Sized> {
    /// Where the segments are.
    #[doc(hidden)]
    fn arg(&self) -> LayoutArg<B::Ints<'_>>;
}

impl<B: BatchedTopKBackend + ?Sized> Layout<B> for Strided {
    fn arg(&self) -> LayoutArg<B::Ints<'_>> {
        LayoutArg::Strided(self.stride)
    }
}
impl Layout<Host> for Offsets<&[i64]> {
    fn arg(&self) -> LayoutArg<&[i64]> {
        LayoutArg::Offsets {
            begin: self.begin,
            end: self.end,
        }
    }
}
impl Layout<AnyBackend> for Offsets<&[i64]> {
    fn arg(&self) -> LayoutArg<&[i64]> {
        LayoutArg::Offsets {
            begin: self.begin,
            end: self.end,
        }
    }
}
impl<'a> Layout<Cuda> for Offsets<CudaView<'a, i64>> {
    fn arg(&self) -> LayoutArg<&CudaView<'_, i64>> {
        LayoutArg::Offsets {
            begin: &self.begin,
            end: &self.end,
        }
    }
}

/// One batched top-k problem: the layout of the segments and the four parameters. Build it
/// with [`Problem::strided`] or [`Problem::offsets`]; run it with [`select_keys`],
/// [`select_pairs`] or [`select_indices`].
///
/// ```
/// use oxicub_algorithms::batched_topk::Problem;
/// use oxicub_params::{direction, k, num_segments, segment_size};
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
/// # Ok::<(), oxicub_params::ParamError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Problem<L, S, K, D, N> {
    layout: L,
    segment_sizes: S,
    k: K,
    direction: D,
    num_segments: N,
    out_stride: Option<u64>,
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
        Problem {
            layout: Strided {
                stride: stride as u64,
            },
            segment_sizes,
            k,
            direction,
            num_segments,
            out_stride: None,
        }
    }
}

impl<O, S, K, D, N> Problem<Offsets<O>, S, K, D, N> {
    /// Segment `i` is `keys[begin[i] .. end[i]]`. `segment_sizes` bounds `end[i] - begin[i]`:
    /// `segment_size::PerSegment::<(), MIN, MAX>::new(())` (optionally `.with_bounds(..)`), or
    /// a `Static`/`Uniform` size every segment must have.
    ///
    /// ```
    /// use oxicub_algorithms::{batched_topk::{self, Problem}, Host};
    /// use oxicub_params::{direction, k, num_segments, segment_size};
    ///
    /// let keys = [4u8, 1, 9, /**/ 7, /**/ 3, 3];
    /// let (begin, end) = ([0i64, 3, 4], [3i64, 4, 6]);
    /// let sizes = segment_size::PerSegment::<(), 0, 1024>::new(());
    /// let problem = Problem::offsets(&begin[..], &end[..], sizes, k::Static::<2>::new(), direction::Min, num_segments::uniform(3)?);
    /// let mut low = [0u8; 6];
    /// batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut low[..], &oxicub_env::Env::new())?.check()?;
    /// // Segment 1 holds one key: k is clamped to 1, its second slot is untouched.
    /// assert_eq!(low, [1, 4, 7, 0, 3, 3]);
    /// # Ok::<(), oxicub_algorithms::Error>(())
    /// ```
    pub fn offsets(
        begin: O,
        end: O,
        segment_sizes: S,
        k: K,
        direction: D,
        num_segments: N,
    ) -> Problem<Offsets<O>, S, K, D, N> {
        Problem {
            layout: Offsets { begin, end },
            segment_sizes,
            k,
            direction,
            num_segments,
            out_stride: None,
        }
    }
}

impl<L, S, K, D, N> Problem<L, S, K, D, N> {
    /// Sets the distance between the first outputs of consecutive segments (default: the most
    /// one segment can write). It must be at least that.
    pub fn out_stride(mut self, out_stride: usize) -> Self {
        self.out_stride = Some(out_stride as u64);
        self
    }
}

// ---- The checked request ----

/// One checked batched top-k call, as the backends receive it.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Request {
    /// The requirements, defaults applied.
    pub requirements: Resolved,
    /// `keys.len()`.
    pub num_keys: u64,
    /// The tightest bounds of each per-segment value (static, runtime, guarantees).
    pub sizes: Bounds,
    /// The tightest bounds of `k`.
    pub k: Bounds,
    /// The tightest bounds of the number of segments.
    pub num_segments: Bounds,
    /// The `TotalItems` guarantee: bounds of the sum of the valid segments' sizes.
    pub total_items: Bounds,
    /// The tightest static bounds of the segment sizes (kernel choice).
    pub sizes_static: Bounds,
    /// The tightest static bounds of `k` (kernel choice).
    pub k_static: Bounds,
    /// The directions that may occur (one bit per [`SelectDirection`]).
    pub directions: u32,
    /// The most segments the call may process (the host value, or the upper bound).
    pub max_segments: u64,
    /// The most items one segment may write.
    pub per_segment_max: u64,
    /// Distance between consecutive segments' outputs.
    pub out_stride: u64,
    /// The tiers the static bounds allow (a constant of the parameter types).
    pub static_tiers: BatchedTiers,
    /// Keys per lane of the warp tier (a constant of the parameter types).
    pub warp_items: u32,
}

/// Why one segment was not processed.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Violation {
    /// `begin < 0` or `begin > end`.
    OffsetsOutOfOrder = 1,
    /// The segment ends past `keys.len()`.
    PastBuffer = 2,
    /// The size is outside the bounds of `segment_sizes`.
    SizeOutOfBounds = 3,
    /// The size is larger than the stride.
    SizeAboveStride = 4,
    /// `k` is outside its bounds.
    KOutOfBounds = 5,
    /// The direction is not among the compiled options.
    DirectionNotCompiled = 6,
}

impl Violation {
    /// The violation with this device code.
    #[allow(dead_code)]
    pub(crate) fn from_code(code: u8) -> Option<Violation> {
        Some(match code {
            1 => Violation::OffsetsOutOfOrder,
            2 => Violation::PastBuffer,
            3 => Violation::SizeOutOfBounds,
            4 => Violation::SizeAboveStride,
            5 => Violation::KOutOfBounds,
            6 => Violation::DirectionNotCompiled,
            _ => return None,
        })
    }

    /// The error for segment `segment` whose offending value is `value`.
    pub(crate) fn error(self, request: &Request, segment: u64, value: i64) -> Error {
        let (arg, reason) = match self {
            Violation::OffsetsOutOfOrder => (
                "offsets",
                "is out of order (begin must be in 0..=end)".to_owned(),
            ),
            Violation::PastBuffer => (
                "offsets",
                format!("ends past the keys (keys.len() = {})", request.num_keys),
            ),
            Violation::SizeOutOfBounds => (
                "segment_sizes",
                format!("is outside its bounds {}", request.sizes),
            ),
            Violation::SizeAboveStride => (
                "segment_sizes",
                "is larger than the stride of the layout".to_owned(),
            ),
            Violation::KOutOfBounds => ("k", format!("is outside its bounds {}", request.k)),
            Violation::DirectionNotCompiled => (
                "direction",
                format!(
                    "is not among the compiled options (mask {:#b}; 0 = max, 1 = min)",
                    request.directions
                ),
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
pub(crate) fn total_items_error(bounds: Bounds, total: i64) -> ParamError {
    ParamError::OutOfBounds {
        param: "total_items",
        value: total,
        bounds,
        origin: oxicub_params::BoundOrigin::Guarantee,
    }
}

/// A deferred `num_segments` outside its bounds.
pub(crate) fn num_segments_error(request: &Request, value: i64) -> Error {
    Error::Param(ParamError::OutOfBounds {
        param: "num_segments",
        value,
        bounds: request.num_segments,
        origin: oxicub_params::BoundOrigin::Runtime,
    })
}

/// What a batched top-k call found while running: the per-segment checks that can only be
/// made on the data. [`check`](Outcome::check) it: on [`Cuda`] that waits for the stream (the
/// caller's explicit synchronisation; skip it between back-to-back launches and check later).
#[must_use = "per-segment values are checked while the call runs; `.check()` reports a violation"]
#[derive(Debug)]
pub struct Outcome {
    inner: OutcomeInner,
}

#[derive(Debug)]
enum OutcomeInner {
    /// Already known (host backends).
    Ready(Option<Error>),
    /// On the device.
    Device(cuda::DeviceStatus),
}

impl Outcome {
    pub(crate) fn ready(error: Option<Error>) -> Outcome {
        Outcome {
            inner: OutcomeInner::Ready(error),
        }
    }

    fn device(status: cuda::DeviceStatus) -> Outcome {
        Outcome {
            inner: OutcomeInner::Device(status),
        }
    }

    /// `Ok` when every segment was valid, else the error of the smallest invalid segment
    /// ([`Error::InvalidSegment`]) or of a deferred `num_segments` outside its bounds.
    pub fn check(self) -> Result<(), Error> {
        match self.inner {
            OutcomeInner::Ready(None) => Ok(()),
            OutcomeInner::Ready(Some(error)) => Err(error),
            OutcomeInner::Device(status) => status.check(),
        }
    }
}

// ---- The front check ----

/// The kernels a call may need, from the static bounds of its parameter types alone: a
/// constant, so what the types exclude is never compiled.
struct StaticTiers<S, K, G>(std::marker::PhantomData<(S, K, G)>);

impl<S: Param, K: Param, G: Guarantees> StaticTiers<S, K, G> {
    const SIZES: Bounds = merged_static_bounds::<S, G>();
    const K: Bounds = merged_static_bounds::<K, G>();
    const TIERS: BatchedTiers = BatchedTiers::for_bounds(
        (Self::SIZES.min, Self::SIZES.max),
        (Self::K.min, Self::K.max),
    );
    const WARP_ITEMS: u32 = BatchedTiers::warp_items(if Self::SIZES.max < WARP_MAX_SIZE {
        Self::SIZES.max
    } else {
        WARP_MAX_SIZE
    });
}

/// The kernel variants a call with these parameter types instantiates on [`Cuda`], decided
/// from the static bounds alone (runtime bounds may skip some of them): the control stages
/// and one kernel per tier. `value_bytes` is 0 for keys only, else 4 or 8.
///
/// ```
/// use oxicub_algorithms::batched_topk::kernel_specs;
/// use oxicub_env::Env;
/// use oxicub_params::{k, segment_size};
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

fn front_check<'p, B, L, S, K, D, N, E>(
    problem: &'p Problem<L, S, K, D, N>,
    num_keys: usize,
    env: &E,
) -> Result<(Request, Args<'p, B>), Error>
where
    B: BatchedTopKBackend + ?Sized,
    L: Layout<B>,
    S: SegmentSizes<B>,
    K: SegmentK<B>,
    D: Directions<B>,
    N: NumSegments<B>,
    E: Environment,
{
    let checked = contract::batched_topk(
        &problem.segment_sizes,
        &problem.k,
        &problem.direction,
        &problem.num_segments,
        env,
    )?;
    let args = Args {
        layout: problem.layout.arg(),
        sizes: problem.segment_sizes.arg(),
        k: problem.k.arg(),
        direction: problem.direction.arg(),
        num_segments: problem.num_segments.arg(),
    };
    let num_keys = num_keys as u64;
    let max_segments = match args.num_segments {
        NumSegmentsArg::Host(n) => n,
        NumSegmentsArg::Deferred(_) => checked.num_segments.max as u64,
    };
    // The most items one segment can hold, then write.
    let mut per_segment_max = (checked.segment_sizes.max as u64).min(num_keys);
    match (&args.layout, &args.sizes) {
        (LayoutArg::Strided(stride), CountArg::Host(size)) => {
            if *size > *stride {
                return Err(Error::InvalidArgument {
                    arg: "segment_sizes",
                    reason: format!("{size} is larger than the stride {stride}"),
                });
            }
            let needed = if max_segments == 0 {
                0
            } else {
                (max_segments - 1)
                    .checked_mul(*stride)
                    .and_then(|v| v.checked_add(*size))
                    .unwrap_or(u64::MAX)
            };
            if num_keys < needed {
                return Err(Error::BufferTooSmall {
                    arg: "keys",
                    len: num_keys as usize,
                    required: needed.min(usize::MAX as u64) as usize,
                    required_from: "(num_segments - 1) * stride + segment size",
                });
            }
            per_segment_max = per_segment_max.min(*stride);
        }
        (LayoutArg::Strided(stride), CountArg::PerSegment(_)) => {
            per_segment_max = per_segment_max.min(*stride);
        }
        (LayoutArg::Strided(_), CountArg::BoundsOnly) => {
            return Err(Error::InvalidArgument {
                arg: "segment_sizes",
                reason: "a strided layout needs the sizes: pass Static, Uniform or PerSegment \
                         over the sizes, not PerSegment<()>"
                    .to_owned(),
            });
        }
        (LayoutArg::Offsets { .. }, CountArg::PerSegment(_)) => {
            return Err(Error::InvalidArgument {
                arg: "segment_sizes",
                reason: "with offsets the sizes are end - begin: pass only bounds \
                         (segment_size::PerSegment::<(), MIN, MAX>::new(())) or a Static/Uniform \
                         size"
                    .to_owned(),
            });
        }
        (LayoutArg::Listed, CountArg::PerSegment(_)) => {
            return Err(Error::InvalidArgument {
                arg: "segment_sizes",
                reason: "with listed segments the sizes are the slices' lengths: pass only \
                         bounds (segment_size::PerSegment::<(), MIN, MAX>::new(())) or a \
                         Static/Uniform size"
                    .to_owned(),
            });
        }
        (LayoutArg::Offsets { .. } | LayoutArg::Listed, _) => {}
    }
    if let CountArg::Host(size) = args.sizes {
        per_segment_max = per_segment_max.min(size);
        if let (LayoutArg::Strided(_), NumSegmentsArg::Host(n)) = (&args.layout, &args.num_segments)
        {
            // Every segment has this size: the total is known here (a direct call on the
            // device reports nothing afterwards).
            let total = size.saturating_mul(*n).min(i64::MAX as u64) as i64;
            if !checked.total_items.contains(total) {
                return Err(total_items_error(checked.total_items, total).into());
            }
        }
    }
    per_segment_max = per_segment_max.min(checked.k.max as u64);
    if let CountArg::Host(k) = args.k {
        per_segment_max = per_segment_max.min(k);
    }
    let out_stride = match problem.out_stride {
        None => per_segment_max,
        Some(stride) if stride >= per_segment_max => stride,
        Some(stride) => {
            return Err(Error::InvalidArgument {
                arg: "out_stride",
                reason: format!(
                    "{stride} is smaller than the most one segment can write ({per_segment_max})"
                ),
            })
        }
    };
    let request = Request {
        requirements: checked.requirements,
        num_keys,
        sizes: checked.segment_sizes,
        k: checked.k,
        num_segments: checked.num_segments,
        total_items: checked.total_items,
        sizes_static: checked.segment_sizes_static,
        k_static: checked.k_static,
        directions: checked.directions,
        max_segments,
        per_segment_max,
        out_stride,
        static_tiers: StaticTiers::<S, K, E::Guarantees>::TIERS,
        warp_items: StaticTiers::<S, K, E::Guarantees>::WARP_ITEMS,
    };
    Ok((request, args))
}

impl Request {
    /// The output length the call needs: `(n - 1) * out_stride + per_segment_max`.
    fn out_len(&self) -> u64 {
        if self.max_segments == 0 || self.per_segment_max == 0 {
            0
        } else {
            (self.max_segments - 1)
                .saturating_mul(self.out_stride)
                .saturating_add(self.per_segment_max)
        }
    }
}

fn check_out(arg: &'static str, len: usize, request: &Request) -> Result<(), Error> {
    let required = request.out_len();
    if (len as u64) < required {
        return Err(Error::BufferTooSmall {
            arg,
            len,
            required: required.min(usize::MAX as u64) as usize,
            required_from: "(num_segments - 1) * out_stride + min(k, segment size)",
        });
    }
    Ok(())
}

/// Per-segment buffers must hold one value per segment (up to the bound of a deferred
/// `num_segments`).
fn check_per_segment<B: BatchedTopKBackend + ?Sized>(
    request: &Request,
    args: &Args<'_, B>,
    len_of_ints: impl Fn(&B::Ints<'_>) -> usize,
    len_of_bytes: impl Fn(&B::Bytes<'_>) -> usize,
) -> Result<(), Error> {
    let need = request.max_segments;
    let check = |arg: &'static str, len: usize| {
        if (len as u64) < need {
            Err(Error::BufferTooSmall {
                arg,
                len,
                required: need as usize,
                required_from: "num_segments (its upper bound when deferred)",
            })
        } else {
            Ok(())
        }
    };
    if let LayoutArg::Offsets { begin, end } = &args.layout {
        check("begin_offsets", len_of_ints(begin))?;
        check("end_offsets", len_of_ints(end))?;
    }
    if let CountArg::PerSegment(sizes) = &args.sizes {
        check("segment_sizes", len_of_ints(sizes))?;
    }
    if let CountArg::PerSegment(k) = &args.k {
        check("k", len_of_ints(k))?;
    }
    if let DirectionArg::PerSegment(dirs) = &args.direction {
        check("direction", len_of_bytes(dirs))?;
    }
    Ok(())
}

/// The lengths of per-segment buffers on a backend.
pub trait PerSegmentLengths: BatchedTopKBackend {
    /// Length of a per-segment `i64` buffer.
    #[doc(hidden)]
    fn ints_len(ints: &Self::Ints<'_>) -> usize;
    /// Length of a per-segment `u8` buffer.
    #[doc(hidden)]
    fn bytes_len(bytes: &Self::Bytes<'_>) -> usize;
}

macro_rules! host_lengths {
    ($($backend:ty),*) => {$(
        impl PerSegmentLengths for $backend {
            fn ints_len(ints: &&[i64]) -> usize { ints.len() }
            fn bytes_len(bytes: &&[u8]) -> usize { bytes.len() }
        }
    )*};
}
host_lengths!(Host, AnyBackend);

impl PerSegmentLengths for Cuda {
    fn ints_len(ints: &&CudaView<'_, i64>) -> usize {
        ints.len()
    }
    fn bytes_len(bytes: &&CudaView<'_, u8>) -> usize {
        bytes.len()
    }
}

/// The size check of a value type: 4 or 8 bytes, as the kernels move values as raw words.
const fn check_value_size<V>() {
    const {
        assert!(
            std::mem::size_of::<V>() == 4 || std::mem::size_of::<V>() == 8,
            "oxicub: top-k values must be 4 or 8 bytes (u32, f32, u64, i64, (u32, u32), ...)"
        )
    }
}

fn checked<'p, B, L, S, K, D, N, E>(
    problem: &'p Problem<L, S, K, D, N>,
    num_keys: usize,
    env: &E,
    outputs: &[(&'static str, usize)],
) -> Result<(Request, Args<'p, B>), Error>
where
    B: BatchedTopKBackend + PerSegmentLengths,
    L: Layout<B>,
    S: SegmentSizes<B>,
    K: SegmentK<B>,
    D: Directions<B>,
    N: NumSegments<B>,
    E: Environment,
{
    let (request, args) = front_check::<B, L, S, K, D, N, E>(problem, num_keys, env)?;
    check_per_segment::<B>(&request, &args, |i| B::ints_len(i), |b| B::bytes_len(b))?;
    for &(arg, len) in outputs {
        check_out(arg, len, &request)?;
    }
    Ok((request, args))
}

/// The top `k_i` keys of every segment, written to `out_keys[i * out_stride ..]` in the
/// environment's order. See the [module docs](self) for the layout, the clamping of `k` and
/// the per-segment checks reported by the returned [`Outcome`].
///
/// ```
/// use oxicub_algorithms::{batched_topk::{self, Problem}, Host};
/// use oxicub_env::{require, determinism, output_ordering};
/// use oxicub_params::{direction, k, num_segments, segment_size, SelectDirection};
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
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn select_keys<B, K, L, S, Kp, D, N, E>(
    backend: &B,
    problem: &Problem<L, S, Kp, D, N>,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    env: &E,
) -> Result<Outcome, Error>
where
    B: BatchedTopKBackend + PerSegmentLengths,
    K: RadixKey,
    L: Layout<B>,
    S: SegmentSizes<B>,
    Kp: SegmentK<B>,
    D: Directions<B>,
    N: NumSegments<B>,
    E: Environment,
{
    let outputs = [("out_keys", out_keys.len())];
    let (request, args) = checked::<B, L, S, Kp, D, N, E>(problem, keys.len(), env, &outputs)?;
    backend.batched_topk_checked::<K, u32>(&request, args, keys, ValuesIn::None, out_keys, None)
}

/// The top `k_i` keys of every segment with the value of each (`values[j]` belongs to
/// `keys[j]`); values are any `Copy` type of 4 or 8 bytes. As [`select_keys`] otherwise.
///
/// ```
/// use oxicub_algorithms::{batched_topk::{self, Problem}, Host};
/// use oxicub_params::{direction, k, num_segments, segment_size};
///
/// let keys = [0.5f32, 0.25, /**/ 0.0, 1.0];
/// let tokens = [10u64, 11, 20, 21];
/// let problem = Problem::strided(2, segment_size::Static::<2>::new(), k::Static::<1>::new(), direction::Max, num_segments::Static::<2>::new());
/// let (mut top, mut token) = ([0f32; 2], [0u64; 2]);
/// batched_topk::select_pairs(&Host::new(), &problem, &keys[..], &tokens[..], &mut top[..], &mut token[..], &oxicub_env::Env::new())?.check()?;
/// assert_eq!((top, token), ([0.5, 1.0], [10, 21]));
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn select_pairs<B, K, V, L, S, Kp, D, N, E>(
    backend: &B,
    problem: &Problem<L, S, Kp, D, N>,
    keys: B::Slice<'_, K>,
    values: B::Slice<'_, V>,
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    env: &E,
) -> Result<Outcome, Error>
where
    B: BatchedTopKBackend + PerSegmentLengths,
    K: RadixKey,
    V: Copy + Send + Sync + 'static,
    L: Layout<B>,
    S: SegmentSizes<B>,
    Kp: SegmentK<B>,
    D: Directions<B>,
    N: NumSegments<B>,
    E: Environment,
{
    check_value_size::<V>();
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_values", out_values.len()),
    ];
    let (request, args) = checked::<B, L, S, Kp, D, N, E>(problem, keys.len(), env, &outputs)?;
    Error::check_len("values", values.len(), keys.len(), "keys.len()")?;
    backend.batched_topk_checked(
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
/// use oxicub_algorithms::{batched_topk::{self, Problem}, Host};
/// use oxicub_env::{require, tie_break};
/// use oxicub_params::{direction, k, num_segments, segment_size};
///
/// let keys = [1u16, 5, 5, 5];
/// let problem = Problem::strided(4, segment_size::Static::<4>::new(), k::Static::<2>::new(), direction::Max, num_segments::uniform(1)?);
/// let (mut top, mut at) = ([0u16; 2], [0i64; 2]);
/// let env = require!(tie_break::PreferLargerIndex);
/// batched_topk::select_indices(&Host::new(), &problem, &keys[..], &mut top[..], &mut at[..], &env)?.check()?;
/// assert_eq!(at, [2, 3]); // the tie at the boundary keeps the larger indices, stable sorted
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn select_indices<B, K, I, L, S, Kp, D, N, E>(
    backend: &B,
    problem: &Problem<L, S, Kp, D, N>,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    env: &E,
) -> Result<Outcome, Error>
where
    B: BatchedTopKBackend + PerSegmentLengths,
    K: RadixKey,
    I: SourceIndex,
    L: Layout<B>,
    S: SegmentSizes<B>,
    Kp: SegmentK<B>,
    D: Directions<B>,
    N: NumSegments<B>,
    E: Environment,
{
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_indices", out_indices.len()),
    ];
    let (request, args) = checked::<B, L, S, Kp, D, N, E>(problem, keys.len(), env, &outputs)?;
    let largest_segment = (request.sizes.max as u64).min(request.num_keys);
    if largest_segment > I::MAX_ITEMS {
        return Err(Error::TooLarge {
            arg: "segment_sizes",
            len: largest_segment,
            max: I::MAX_ITEMS,
            reason: "the index type cannot hold every index within a segment; use u64 or i64",
        });
    }
    backend.batched_topk_checked(
        &request,
        args,
        keys,
        ValuesIn::Index(I::from_index),
        out_keys,
        Some(out_indices),
    )
}
