//! Batched top-k calls (`oxicub_algorithms::batched_topk`): the strided, offsets and listed
//! layouts; segment sizes, `k` and the direction each static, uniform or per segment (sizes
//! also as bounds only); the number of segments static, uniform or deferred; guarantees on every
//! role; `out_stride`; keys, pairs and indices. [`BatchedCall::predict`] is the contract:
//! the front check's error, or which segments run and what the outcome reports.

mod host;
mod predict;

pub use host::{CountOnHost, DirectionOnHost, KOnHost, SizesOnHost};
pub use predict::{BatchedRun, Scalars, SegmentRun};

use oxicub_params::{Bounds, SelectDirection};

use super::{Entry, GuaranteeSpec, Single, SingleKind, Tape};
use crate::oracle::RefKey;

/// The value of a static segment size (`segment_size::Static::<5>`).
pub const STATIC_SIZE: i64 = 5;
/// The value of a static `k` (`k::Static::<3>`).
pub const STATIC_K: i64 = 3;
/// The value of a static number of segments (`num_segments::Static::<3>`).
pub const STATIC_NUM_SEGMENTS: i64 = 3;

/// Where the segments are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `Problem::strided(stride, ..)`.
    Strided {
        /// The stride.
        stride: usize,
    },
    /// `Problem::offsets(&begin, &end, ..)`.
    Offsets {
        /// Begin offsets.
        begin: Vec<i64>,
        /// End offsets.
        end: Vec<i64>,
    },
    /// `Problem::listed(..)`: the slices are the call's keys cut into these lengths.
    Listed {
        /// The slices' lengths.
        lens: Vec<usize>,
    },
}

/// The kinds of [`Layout`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutKind {
    /// [`Layout::Strided`].
    Strided,
    /// [`Layout::Offsets`].
    Offsets,
    /// [`Layout::Listed`].
    Listed,
}

/// How the segment sizes are passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sizes {
    /// `segment_size::Static::<STATIC_SIZE>`.
    Static,
    /// `segment_size::uniform(v)`.
    Uniform(i64),
    /// `segment_size::PerSegment::<&[i64]>` over `values`, narrowed to `bounds`.
    PerSegment {
        /// One size per segment.
        values: Vec<i64>,
        /// Runtime bounds, if any.
        bounds: Option<Bounds>,
    },
    /// `segment_size::PerSegment::<()>`: bounds only, narrowed to `bounds`.
    BoundsOnly {
        /// Runtime bounds, if any.
        bounds: Option<Bounds>,
    },
}

/// The kinds of [`Sizes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizesKind {
    /// [`Sizes::Static`].
    Static,
    /// [`Sizes::Uniform`].
    Uniform,
    /// [`Sizes::PerSegment`].
    PerSegment,
    /// [`Sizes::BoundsOnly`].
    BoundsOnly,
}

/// How `k` is passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KArg {
    /// `k::Static::<STATIC_K>`.
    Static,
    /// `k::uniform(v)`.
    Uniform(i64),
    /// `k::PerSegment::<&[i64]>` over `values`, narrowed to `bounds`.
    PerSegment {
        /// One `k` per segment.
        values: Vec<i64>,
        /// Runtime bounds, if any.
        bounds: Option<Bounds>,
    },
}

/// The kinds of [`KArg`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KKind {
    /// [`KArg::Static`].
    Static,
    /// [`KArg::Uniform`].
    Uniform,
    /// [`KArg::PerSegment`].
    PerSegment,
}

/// The option set of a per-segment direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirectionSet {
    /// `direction::Either`.
    Either,
    /// `direction::Max`.
    Max,
    /// `direction::Min`.
    Min,
}

impl DirectionSet {
    /// Whether the set holds `direction`.
    pub fn admits(self, direction: SelectDirection) -> bool {
        !matches!(
            (self, direction),
            (DirectionSet::Max, SelectDirection::Min) | (DirectionSet::Min, SelectDirection::Max)
        )
    }
}

/// How the direction is passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Direction {
    /// `direction::Max`.
    Max,
    /// `direction::Min`.
    Min,
    /// `direction::Choice::<Either>`.
    Choice(SelectDirection),
    /// `direction::PerSegment::<&[u8], set>` over `bytes` (`SelectDirection as u8`).
    Bytes {
        /// The compiled options.
        set: DirectionSet,
        /// One byte per segment.
        bytes: Vec<u8>,
    },
    /// `direction::PerSegment::<&[SelectDirection]>`.
    Typed(Vec<SelectDirection>),
}

/// The kinds of [`Direction`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirectionKind {
    /// [`Direction::Max`].
    Max,
    /// [`Direction::Min`].
    Min,
    /// [`Direction::Choice`].
    Choice,
    /// [`Direction::Bytes`] with this set.
    Bytes(DirectionSet),
    /// [`Direction::Typed`].
    Typed,
}

/// Which kinds a test's dispatch runs; the first of each is what a zero draw picks.
#[derive(Clone, Copy, Debug)]
pub struct Kinds {
    /// Entry points.
    pub entries: &'static [Entry],
    /// Layouts.
    pub layouts: &'static [LayoutKind],
    /// Segment sizes.
    pub sizes: &'static [SizesKind],
    /// `k`.
    pub k: &'static [KKind],
    /// Directions.
    pub directions: &'static [DirectionKind],
    /// Numbers of segments.
    pub counts: &'static [SingleKind],
}

/// One batched top-k call.
#[derive(Clone, Debug)]
pub struct BatchedCall<Key> {
    /// The entry point (`select_*`, or `select_*_listed` for the listed layout).
    pub entry: Entry,
    /// The layout.
    pub layout: Layout,
    /// The segment sizes.
    pub sizes: Sizes,
    /// `k`.
    pub k: KArg,
    /// The direction.
    pub direction: Direction,
    /// The number of segments.
    pub num_segments: Single,
    /// The environment's guarantees.
    pub guarantees: GuaranteeSpec,
    /// `Problem::out_stride`, if set.
    pub out_stride: Option<usize>,
    /// The keys (listed: the slices one after another).
    pub keys: Vec<Key>,
    /// The length of `values` (pairs, not listed); value `p` is `V::from_source(p)`.
    pub values_len: usize,
    /// The lengths of the value slices (pairs, listed); each value names its key's place in
    /// [`keys`](Self::keys).
    pub value_lens: Vec<usize>,
    /// The lengths of the outputs: keys, then values or indices.
    pub out_lens: [usize; 2],
}

/// Truncates `values` now and then (a per-segment buffer too short), or lengthens it with
/// `extra` (harmless).
fn resize<T: Clone>(tape: &mut Tape<'_>, values: &mut Vec<T>, extra: T) {
    if !values.is_empty() && tape.percent(3) {
        let cut = 1 + tape.below(values.len() as u64) as usize;
        values.truncate(values.len() - cut);
    } else if tape.percent(5) {
        values.extend(std::iter::repeat_n(extra, 1 + tape.below(2) as usize));
    }
}

/// A `k` for a segment of `size` keys: within it, the size, above it, 0, 1, or huge.
fn k_for(tape: &mut Tape<'_>, size: u64) -> i64 {
    let size = size as i64;
    match tape.below(10) {
        0..=3 => tape.up_to(size as u64) as i64,
        4 => size,
        5 => size + 1 + tape.below(3) as i64,
        6 => 0,
        7 => 1,
        8 => tape.up_to(8) as i64,
        _ => tape.pick(&[1 << 40, i64::MAX]),
    }
}

impl<Key: RefKey> BatchedCall<Key> {
    /// Every kind.
    pub const ALL_KINDS: Kinds = Kinds {
        entries: &[Entry::Indices, Entry::Keys, Entry::Pairs],
        layouts: &[LayoutKind::Strided, LayoutKind::Offsets, LayoutKind::Listed],
        sizes: &[
            SizesKind::PerSegment,
            SizesKind::Uniform,
            SizesKind::Static,
            SizesKind::BoundsOnly,
        ],
        k: &[KKind::PerSegment, KKind::Uniform, KKind::Static],
        directions: &[
            DirectionKind::Bytes(DirectionSet::Either),
            DirectionKind::Choice,
            DirectionKind::Max,
            DirectionKind::Min,
            DirectionKind::Bytes(DirectionSet::Max),
            DirectionKind::Bytes(DirectionSet::Min),
            DirectionKind::Typed,
        ],
        counts: &[
            SingleKind::Uniform,
            SingleKind::Deferred,
            SingleKind::Static,
        ],
    };

    /// A call from `tape` with parameters of `kinds`: up to 5 segments of up to 64 keys,
    /// mostly valid, with each bad input the contract names now and then (buffers too short,
    /// sizes above the stride, offsets out of order or past the keys, per-segment values
    /// outside their bounds, negative or `2^40`, direction bytes outside the set, counts
    /// outside their bounds, contradicting guarantees, a small `out_stride`).
    pub fn generate(tape: &mut Tape<'_>, kinds: &Kinds) -> BatchedCall<Key> {
        let entry = tape.pick(kinds.entries);
        let layout_kind = tape.pick(kinds.layouts);
        let mut sizes_kind = tape.pick(kinds.sizes);
        // Sizes the layout rejects (a strided layout without sizes, offsets or listed with
        // them): rarely.
        let swap = match (layout_kind, sizes_kind) {
            (LayoutKind::Strided, SizesKind::BoundsOnly) => SizesKind::PerSegment,
            (LayoutKind::Offsets | LayoutKind::Listed, SizesKind::PerSegment) => {
                SizesKind::BoundsOnly
            }
            _ => sizes_kind,
        };
        if kinds.sizes.contains(&swap) && !tape.percent(10) {
            sizes_kind = swap;
        }
        let k_kind = tape.pick(kinds.k);
        let direction_kind = tape.pick(kinds.directions);
        let count_kind = tape.pick(kinds.counts);
        // The number of segments every buffer is made for.
        let cap = match count_kind {
            SingleKind::Static => STATIC_NUM_SEGMENTS as usize,
            _ => tape.up_to(5) as usize,
        };
        let host_size = matches!(sizes_kind, SizesKind::Static | SizesKind::Uniform);
        let common = match sizes_kind {
            SizesKind::Static => STATIC_SIZE as u64,
            _ => tape.up_to(64),
        };
        let mut extents: Vec<u64> = (0..cap)
            .map(|_| if host_size { common } else { tape.up_to(64) })
            .collect();
        if host_size && layout_kind != LayoutKind::Strided {
            // A segment without the size every segment must have.
            for extent in &mut extents {
                if tape.percent(3) {
                    *extent += 1 + tape.below(3);
                }
            }
        }
        let largest = extents.iter().copied().max().unwrap_or(0).max(common);
        let tail = |tape: &mut Tape<'_>| if tape.percent(30) { tape.up_to(3) } else { 0 };
        let (layout, num_keys) = match layout_kind {
            LayoutKind::Strided => {
                let stride = largest + tail(tape);
                let used = match cap.checked_sub(1) {
                    None => 0,
                    Some(last) => last as u64 * stride + extents[last],
                };
                let mut len = used + tail(tape);
                if used > 0 && tape.percent(3) {
                    len = used - 1 - tape.below(used.min(4));
                }
                let stride = stride as usize;
                (Layout::Strided { stride }, len)
            }
            LayoutKind::Offsets => Self::offsets(tape, &extents),
            LayoutKind::Listed => {
                let lens: Vec<usize> = extents.iter().map(|&e| e as usize).collect();
                let len = extents.iter().sum();
                (Layout::Listed { lens }, len)
            }
        };
        let keys = tape.keys(num_keys as usize);
        let sizes = match sizes_kind {
            SizesKind::Static => Sizes::Static,
            SizesKind::Uniform if tape.percent(3) => Sizes::Uniform((common + 1) as i64),
            SizesKind::Uniform => Sizes::Uniform(common as i64),
            SizesKind::PerSegment => {
                let mut values: Vec<i64> = extents.iter().map(|&e| e as i64).collect();
                for value in &mut values {
                    if tape.percent(4) {
                        *value = match &layout {
                            Layout::Strided { stride } if tape.percent(50) => {
                                (stride + 1 + tape.below(3) as usize) as i64
                            }
                            _ => tape.wild(),
                        };
                    }
                }
                resize(tape, &mut values, 0);
                let bounds = tape.percent(25).then(|| tape.bounds(3, largest + 2));
                Sizes::PerSegment { values, bounds }
            }
            SizesKind::BoundsOnly => {
                let bounds = tape.percent(40).then(|| tape.bounds(3, largest + 2));
                Sizes::BoundsOnly { bounds }
            }
        };
        let k = match k_kind {
            KKind::Static => KArg::Static,
            KKind::Uniform => KArg::Uniform(k_for(tape, largest)),
            KKind::PerSegment => {
                let mut values: Vec<i64> = extents
                    .iter()
                    .map(|&e| {
                        if tape.percent(4) {
                            tape.wild()
                        } else {
                            k_for(tape, e)
                        }
                    })
                    .collect();
                resize(tape, &mut values, 0);
                let bounds = tape.percent(25).then(|| tape.bounds(3, largest + 2));
                KArg::PerSegment { values, bounds }
            }
        };
        let direction = Self::direction(tape, direction_kind, cap);
        let num_segments = Self::count(tape, count_kind, cap);
        let typical_k = match &k {
            KArg::Static => STATIC_K as u64,
            _ => largest,
        };
        let total = extents.iter().sum();
        let guarantees = GuaranteeSpec::generate(tape, [typical_k, largest, cap as u64, total]);
        let mut value_lens: Vec<usize> = match &layout {
            Layout::Listed { lens } => lens.clone(),
            _ => Vec::new(),
        };
        if tape.percent(3) {
            resize(tape, &mut value_lens, 1);
        }
        if !value_lens.is_empty() && tape.percent(3) {
            let at = tape.below(value_lens.len() as u64) as usize;
            value_lens[at] = (value_lens[at] + 1).saturating_sub(2 * tape.below(2) as usize);
        }
        let mut call = BatchedCall {
            entry,
            layout,
            sizes,
            k,
            direction,
            num_segments,
            guarantees,
            out_stride: None,
            keys,
            values_len: num_keys as usize,
            value_lens,
            out_lens: [0; 2],
        };
        if tape.percent(3) {
            call.values_len = (call.values_len + 1).saturating_sub(2 * tape.below(2) as usize);
        }
        if tape.percent(15) {
            let most = call.scalars().map_or(0, |s| s.per_segment_max);
            call.out_stride = Some(match tape.below(4) {
                0 | 1 => most + tape.up_to(3),
                2 => most.saturating_sub(1 + tape.below(2)),
                _ => 1 << 40,
            } as usize);
        }
        let required = match call.scalars() {
            Ok(scalars) if scalars.out_len <= 1 << 16 => scalars.out_len as usize,
            _ => tape.below(8) as usize,
        };
        for len in &mut call.out_lens {
            *len = required + tail(tape) as usize;
            if required > 0 && tape.percent(4) {
                *len = required - 1 - tape.below(required as u64) as usize;
            }
        }
        call
    }

    /// Offsets of segments of `extents` keys: one after another, with gaps or overlaps now and
    /// then; some out of order, negative or past the keys. Returns them and `keys.len()`.
    fn offsets(tape: &mut Tape<'_>, extents: &[u64]) -> (Layout, u64) {
        let (mut begin, mut end, mut cursor) = (Vec::new(), Vec::new(), 0i64);
        for &extent in extents {
            let b = match tape.below(10) {
                0..=6 => cursor,
                7 => cursor + 1 + tape.below(3) as i64,
                8 => cursor - cursor.min(1 + tape.below(4) as i64),
                _ => 0,
            };
            begin.push(b);
            end.push(b + extent as i64);
            cursor = b + extent as i64;
        }
        let len = end.iter().copied().max().unwrap_or(0) + tape.below(3) as i64;
        for i in 0..extents.len() {
            if tape.percent(4) {
                match tape.below(4) {
                    0 => begin[i] = end[i] + 1 + tape.below(3) as i64,
                    1 => begin[i] = tape.wild().min(-1),
                    2 => end[i] = len + 1 + tape.below(3) as i64,
                    _ => end[i] = tape.wild().max(1 << 40),
                }
            }
        }
        resize(tape, &mut begin, 0);
        resize(tape, &mut end, 0);
        (Layout::Offsets { begin, end }, len as u64)
    }

    /// A direction of `kind` for `cap` segments; bytes outside the set now and then.
    fn direction(tape: &mut Tape<'_>, kind: DirectionKind, cap: usize) -> Direction {
        let either = [SelectDirection::Max, SelectDirection::Min];
        match kind {
            DirectionKind::Max => Direction::Max,
            DirectionKind::Min => Direction::Min,
            DirectionKind::Choice => Direction::Choice(tape.pick(&either)),
            DirectionKind::Bytes(set) => {
                let mut bytes: Vec<u8> = (0..cap)
                    .map(|_| {
                        let valid = match set {
                            DirectionSet::Either => tape.below(2) as u8,
                            DirectionSet::Max => 0,
                            DirectionSet::Min => 1,
                        };
                        if tape.percent(4) {
                            tape.pick(&[2, 7, 255, 1 - valid])
                        } else {
                            valid
                        }
                    })
                    .collect();
                resize(tape, &mut bytes, 0);
                Direction::Bytes { set, bytes }
            }
            DirectionKind::Typed => {
                let mut directions: Vec<SelectDirection> =
                    (0..cap).map(|_| tape.pick(&either)).collect();
                resize(tape, &mut directions, SelectDirection::Max);
                Direction::Typed(directions)
            }
        }
    }

    /// A number of segments of `kind` for buffers made for `cap` segments. A deferred count's
    /// upper bound is the buffers' `cap` (rarely none, or `2^40`); only under a bound of `cap`
    /// is its value outside the bounds (clamped to them), so no call runs more than `cap + 3`
    /// segments.
    fn count(tape: &mut Tape<'_>, kind: SingleKind, cap: usize) -> Single {
        let cap = cap as i64;
        match kind {
            SingleKind::Static => Single::Static,
            SingleKind::Uniform if tape.percent(3) => {
                Single::Uniform(cap + 1 + tape.below(3) as i64)
            }
            SingleKind::Uniform => Single::Uniform(cap),
            SingleKind::Deferred => {
                let min = if tape.percent(20) {
                    tape.up_to(cap as u64) as i64
                } else {
                    0
                };
                let (bounds, value) = match tape.below(20) {
                    0 => (None, tape.up_to(cap as u64) as i64),
                    1 => (
                        Some(Bounds::new(min, 1 << 40)),
                        tape.up_to(cap as u64) as i64,
                    ),
                    _ if tape.percent(10) => {
                        let wild = tape.pick(&[-1, 1 << 40, i64::MAX, i64::MIN, cap + 1]);
                        (Some(Bounds::new(min, cap)), wild)
                    }
                    _ => (Some(Bounds::new(min, cap)), tape.up_to(cap as u64) as i64),
                };
                Single::Deferred { value, bounds }
            }
        }
    }
}
