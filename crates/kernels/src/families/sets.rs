//! Family `sets` (`cuda/sets/`, `cuda/core/balanced_path.cuh`): a multiset operation or a merge
//! of two sorted inputs (seed 003; docs/design/sets.md, "GPU"). Two launches in stream order
//! after one zeroed scratch buffer: PARTITION (a group of lanes per tile boundary: the Balanced
//! Path, or Merge Path, at its diagonal), TILES (a single pass: each tile loads its ranges once,
//! checks their order, runs the operation, takes its outputs' offset from the tiles before it
//! by decoupled look-back and writes them). The last tile leaves the total on the device, and
//! in the caller's count buffer when one is given. A batched call (many pairs of segments, each
//! input's in order and disjoint) runs the same stages over composite keys (`cuda/sets/batch.cuh`)
//! and leaves every pair's output offset.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, SyncOnDrop};

use crate::codegen::{device_constants, kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::families::scratch::{Scratch, StatusWords};
use crate::families::{at_least, keep, DeviceInts, HostOrDevice};
use crate::health::ContextHealth;
use crate::radix::{KeyType, RadixKey};
use crate::segments::{
    SEGMENT_COUNT_DEFERRED, SEGMENT_OFFSETS, SEGMENT_SIZES_I32, SEGMENT_SIZES_PER_SEGMENT,
};
use crate::{KernelError, KernelFamily, KernelRuntime, KernelSpec, Tier, ValueType};

/// Threads per block.
const BLOCK_THREADS: u32 = 256;

device_constants! {
    /// The constants the set operations' launcher and kernel share.
    pub(crate) static SETS_CONSTANTS;

    /// `params.stage`: the partition at every tile's diagonal.
    pub(crate) const SETS_STAGE_PARTITION: u32 = 0;
    /// Stage: every tile loaded, checked, run, placed after the tiles before it, written.
    pub(crate) const SETS_STAGE_TILES: u32 = 1;

    /// Lanes that search one tile boundary's partition together (a round of loads tests
    /// this many points).
    pub(crate) const SETS_PARTITION_LANES: u32 = 8;

    /// Key-rank slots a thread runs (the seed's VT) for keys of up to 4 bytes: a tile is
    /// BLOCK_THREADS x SETS_ITEMS inputs, one more when its right diagonal is starred. Larger
    /// tiles mean fewer partitions and look-backs ("Tried and dropped" in docs/design/sets.md
    /// has the sizes measured).
    pub(crate) const SETS_ITEMS: u32 = 19;
    /// Slots a thread runs for 8-byte keys (their tile's ranks fit the 48 KB of static shared
    /// memory a block may hold).
    pub(crate) const SETS_ITEMS_WIDE: u32 = 15;
    /// Slots a thread of a batched call runs for keys of up to 4 bytes (its tile also holds a
    /// u32 region per element).
    pub(crate) const SETS_ITEMS_BATCHED: u32 = 17;
    /// Slots a thread of a batched call runs for 8-byte keys.
    pub(crate) const SETS_ITEMS_BATCHED_WIDE: u32 = 11;

    /// Template constant OP: `std::set_intersection`.
    pub(crate) const SETS_OP_INTERSECTION: u32 = 0;
    /// OP: `std::set_union`.
    pub(crate) const SETS_OP_UNION: u32 = 1;
    /// OP: `std::set_difference`.
    pub(crate) const SETS_OP_DIFFERENCE: u32 = 2;
    /// OP: `std::set_symmetric_difference`.
    pub(crate) const SETS_OP_SYMMETRIC_DIFFERENCE: u32 = 3;
    /// OP: `std::merge`.
    pub(crate) const SETS_OP_MERGE: u32 = 4;

    /// Flag: check that the inputs are sorted.
    pub(crate) const SETS_CHECK: u32 = 1;
    /// Flag: with SETS_CHECK, equal neighbours are out of order too (no duplicates promised).
    pub(crate) const SETS_STRICT: u32 = 2;
    /// Flag: the inputs are sorted descending.
    pub(crate) const SETS_DESCENDING: u32 = 4;
    /// Flag: no key repeats within a or within b (Merge Path with a star test partitions).
    pub(crate) const SETS_NO_DUPLICATES: u32 = 8;
    /// Flag: the values written are source positions (a's from 0, b's from a's count).
    pub(crate) const SETS_INDEX: u32 = 16;

    /// Status word: the number of outputs.
    pub(crate) const SETS_STATUS_COUNT: u32 = 0;
    /// Status word: a's first position out of order, as `!(position << 1 | repeat)` (the
    /// largest complement: the smallest position), 0 when a is in order.
    pub(crate) const SETS_STATUS_A_BAD: u32 = 1;
    /// Status word: b's first position out of order, as for a.
    pub(crate) const SETS_STATUS_B_BAD: u32 = 2;
    /// Status word: 1 when a tile's partitions came out of order (the last tile to finish then
    /// compares every neighbour).
    pub(crate) const SETS_STATUS_DISORDER: u32 = 3;
    /// Status word: the next tile to hand to a block.
    pub(crate) const SETS_STATUS_TICKET: u32 = 4;
    /// Status word: the tiles finished (with the order check on).
    pub(crate) const SETS_STATUS_DONE: u32 = 5;
    /// Status word (batched): the smallest invalid pair, as `!(pair << 8 | side << 7 |
    /// code)` (side 1: b's segment; code: a `VIOLATION_*`), 0 when every pair is valid.
    pub(crate) const SETS_STATUS_VIOLATION: u32 = 6;
    /// Status word (batched): that pair's offending value.
    pub(crate) const SETS_STATUS_VALUE: u32 = 7;
    /// Status word (batched): 1 when a deferred number of pairs was outside its bounds.
    pub(crate) const SETS_STATUS_COUNT_BAD: u32 = 8;
    /// Status word (batched): that number.
    pub(crate) const SETS_STATUS_COUNT_VALUE: u32 = 9;
    /// The number of status words (the scratch buffer's first words).
    pub(crate) const SETS_STATUS_WORDS: u32 = 10;

    /// State words each lane of a look-back reads a round (the window is 32 times this).
    pub(crate) const SETS_LOOK_BACK_WORDS: u32 = 1;
    /// Nanoseconds a look-back waits before reading its window again.
    pub(crate) const SETS_LOOK_BACK_SLEEP_NS: u32 = 100;

    /// A tile's state word, top bits: its own count is published (low bits).
    pub(crate) const SETS_TILE_AGGREGATE: u64 = 1 << 62;
    /// State: the count of every output up to and including the tile is published.
    pub(crate) const SETS_TILE_INCLUSIVE: u64 = 2 << 62;
    /// State: the flag bits (0: nothing published yet).
    pub(crate) const SETS_TILE_FLAGS: u64 = 3 << 62;
}

kernel_params! {
    /// Parameters of `sets` (device pointers as `u64`, 0 where unused).
    struct SetsParams {
        a: u64,
        b: u64,
        a_values: u64,
        b_values: u64,
        out_keys: u64,
        out_values: u64,
        /// `tiles + 1` u64: each diagonal's a index, its star in the top bit.
        partition: u64,
        /// A u64 per tile: its state word (`SETS_TILE_*`), zeroed before TILES.
        tile_state: u64,
        status: u64,
        /// The caller's one-element i64 count on the device, or 0.
        count_out: u64,
        a_count: u64,
        b_count: u64,
        /// The outputs' length (the operation's bound).
        out_len: u64,
        tiles: u64,
        /// Batched: each pair's output offset (i64, pairs + 1).
        out_offsets: u64,
        /// Batched: a's segments (`cuda/core/segments.cuh`'s fields, a_layout its flags).
        a_begin: u64,
        a_end: u64,
        a_sizes: u64,
        a_size_value: u64,
        a_size_min: u64,
        a_size_max: u64,
        a_stride: u64,
        /// Batched: b's segments.
        b_begin: u64,
        b_end: u64,
        b_sizes: u64,
        b_size_value: u64,
        b_size_min: u64,
        b_size_max: u64,
        b_stride: u64,
        /// Batched: the number of pairs (host), or its deferred value's address and bounds.
        num_segments: u64,
        num_segments_ptr: u64,
        num_segments_min: u64,
        num_segments_max: u64,
        flags: u32,
        stage: u32,
        /// Batched: a's SEGMENT_* flags (SEGMENT_COUNT_DEFERRED: the number of pairs).
        a_layout: u32,
        /// Batched: b's SEGMENT_* flags.
        b_layout: u32,
    }
}

/// Inputs a tile of `key`s holds (without the one a starred right diagonal adds), for a
/// batched call or not.
fn tile_items(key: KeyType, batched: bool) -> u64 {
    let items = match (key.bits() == 64, batched) {
        (false, false) => SETS_ITEMS,
        (true, false) => SETS_ITEMS_WIDE,
        (false, true) => SETS_ITEMS_BATCHED,
        (true, true) => SETS_ITEMS_BATCHED_WIDE,
    };
    u64::from(BLOCK_THREADS * items)
}

/// Whether `spec` is a batched call's kernel.
fn is_batched(spec: &KernelSpec) -> bool {
    spec.constant("BATCHED").is_some_and(|b| b != 0)
}

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "sets",
    header: concat!(
        include_str!("../../cuda/sets/batch.cuh"),
        include_str!("../../cuda/sets/sets.cuh")
    ),
    constants: &[&SETS_CONSTANTS],
    params_name: SetsParams::CXX_NAME,
    params_declaration: SetsParams::cxx_declaration,
    template_args: &[
        TemplateArg::Key,
        TemplateArg::BlockThreads,
        TemplateArg::Const("OP"),
        TemplateArg::Const("VALUE_BYTES"),
        TemplateArg::Const("BATCHED"),
    ],
    // The tile's ranks (tile + 2 keys and three 16-byte lines for the ranges' line offsets;
    // a batched call's regions beside them, a u32 each) and its compacted sources (tile + 2
    // u16), a u32 start per thread, a u64 per warp for the block scan, seven u64 words (the
    // next tile, the offset, the last-done flag), a u32 count, the mbarrier, 32 bytes for the
    // alignment between them.
    static_shared_bytes: |spec| {
        let batched = is_batched(spec);
        let items = tile_items(spec.key, batched);
        let line = 16 / u64::from(spec.key.bits() / 8);
        let slot_bytes = u64::from(spec.key.bits() / 8) + if batched { 4 } else { 0 };
        slot_bytes * (items + 2 + 3 * line)
            + 2 * (items + 2)
            + 4 * u64::from(BLOCK_THREADS)
            + 8 * u64::from(BLOCK_THREADS / 32)
            + 56
            + 4
            + 8
            + 32
    },
};

/// The value widths the family moves (0: keys only).
const VALUE_WIDTHS: [u8; 5] = [0, 1, 2, 4, 8];

impl KernelSpec {
    /// The spec of the `sets` kernel: keys of type `key`, operation `op` (0 intersection, 1
    /// union, 2 difference, 3 symmetric difference, 4 merge), carrying values (or source
    /// positions) of `value_bytes` bytes (0: keys only; 1, 2, 4 or 8).
    ///
    /// ```
    /// use oxicub::kernels::{KernelSpec, KeyType};
    ///
    /// let spec = KernelSpec::sets(KeyType::I32, 3, 4);
    /// assert_eq!(spec.to_string(), "oxicub::sets<oxicub::KeyI32, 256, 3, 4, 0>");
    /// ```
    pub fn sets(key: KeyType, op: u32, value_bytes: u8) -> KernelSpec {
        KernelSpec::sets_variant(key, op, value_bytes, false)
    }

    /// The spec of a batched call's `sets` kernel (as [`KernelSpec::sets`]; many pairs of
    /// segments at once).
    ///
    /// ```
    /// use oxicub::kernels::{KernelSpec, KeyType};
    ///
    /// let spec = KernelSpec::batched_sets(KeyType::U32, 0, 0);
    /// assert_eq!(spec.to_string(), "oxicub::sets<oxicub::KeyU32, 256, 0, 0, 1>");
    /// ```
    pub fn batched_sets(key: KeyType, op: u32, value_bytes: u8) -> KernelSpec {
        KernelSpec::sets_variant(key, op, value_bytes, true)
    }

    fn sets_variant(key: KeyType, op: u32, value_bytes: u8, batched: bool) -> KernelSpec {
        KernelSpec {
            family: KernelFamily::Sets,
            key,
            value: (value_bytes != 0).then_some(ValueType::Opaque { bytes: value_bytes }),
            direction: None,
            tier: Tier::GridStride,
            block_threads: BLOCK_THREADS,
            consts: vec![
                ("OP", i64::from(op)),
                ("VALUE_BYTES", i64::from(value_bytes)),
                ("BATCHED", i64::from(batched)),
                // A batched thread holds a region beside each rank: fewer blocks, more
                // registers each.
                ("MIN_BLOCKS", if batched { 4 } else { 5 }),
            ],
        }
    }
}

/// Every `sets` spec: each key type, operation and value width, one call or batched.
///
/// ```
/// assert_eq!(oxicub::kernels::families::sets::specs().len(), 12 * 5 * 5 * 2);
/// ```
pub fn specs() -> Vec<KernelSpec> {
    let mut specs = Vec::new();
    for key in KeyType::ALL {
        for op in SETS_OP_INTERSECTION..=SETS_OP_MERGE {
            for bytes in VALUE_WIDTHS {
                specs.push(KernelSpec::sets(key, op, bytes));
                specs.push(KernelSpec::batched_sets(key, op, bytes));
            }
        }
    }
    specs
}

/// What a set operation call asks for (its contract checked it).
#[derive(Clone, Copy, Debug)]
pub struct SetsPlan {
    /// The operation (0 intersection, 1 union, 2 difference, 3 symmetric difference, 4
    /// merge).
    pub op: u32,
    /// The inputs are sorted descending.
    pub descending: bool,
    /// Check the inputs' order while running.
    pub check: bool,
    /// With `check`: equal neighbours are out of order too.
    pub strict: bool,
    /// No key repeats within an input (the cheaper partition).
    pub no_duplicates: bool,
    /// The outputs' length every write stays below (the operation's bound).
    pub out_len: u64,
}

/// The values a set operation carries with its keys.
#[derive(Debug)]
pub enum SetsValues<'a, 'b, V> {
    /// Keys only.
    None,
    /// `a_values[i]` goes with `a[i]`, `b_values[j]` with `b[j]`, into `out`.
    Copy {
        /// One per key of a.
        a_values: &'b CudaView<'a, V>,
        /// One per key of b.
        b_values: &'b CudaView<'a, V>,
        /// Room for the bound.
        out: &'b mut CudaViewMut<'a, V>,
    },
    /// Each output's source position (a's from 0, b's from a's count) into `out`.
    Index {
        /// Room for the bound.
        out: &'b mut CudaViewMut<'a, V>,
    },
}

/// The decoded status of a finished call ([`SetsStatus::decode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetsReport {
    /// The number of outputs.
    pub count: u64,
    /// a's first position out of order and whether its key repeats the one before.
    pub a_out_of_order: Option<(u64, bool)>,
    /// b's, as for a.
    pub b_out_of_order: Option<(u64, bool)>,
    /// A batched call's smallest invalid pair: (pair, b's segment rather than a's, the
    /// `VIOLATION_*` code, the offending value).
    pub violation: Option<(u64, bool, u8, i64)>,
    /// A batched call's deferred number of pairs, when outside its bounds.
    pub bad_num_segments: Option<i64>,
}

/// The status words a call leaves on the device (the first words of its scratch buffer), read
/// when the caller checks.
#[derive(Debug)]
pub struct SetsStatus {
    /// `None` when the call was only measured.
    words: Option<StatusWords>,
    health: Arc<ContextHealth>,
}

impl SetsStatus {
    /// Reads the status (waits for the stream). A kernel fault seen here is
    /// [`KernelError::ContextPoisoned`].
    pub fn decode(&self, stream: &Arc<CudaStream>) -> Result<SetsReport, KernelError> {
        self.health.check()?;
        let words = match self.words.as_ref() {
            Some(words) => words.read(&self.health, stream)?,
            None => Vec::new(),
        };
        let word = |at: u32| words.get(at as usize).copied().unwrap_or(0);
        let bad = |at: u32| {
            let w = !word(at);
            (w != u64::MAX).then_some((w >> 1, w & 1 == 1))
        };
        let violation = (word(SETS_STATUS_VIOLATION) != 0).then(|| {
            let w = !word(SETS_STATUS_VIOLATION);
            let value = word(SETS_STATUS_VALUE) as i64;
            (w >> 8, w & 128 != 0, (w & 127) as u8, value)
        });
        Ok(SetsReport {
            count: word(SETS_STATUS_COUNT),
            a_out_of_order: bad(SETS_STATUS_A_BAD),
            b_out_of_order: bad(SETS_STATUS_B_BAD),
            violation,
            bad_num_segments: (word(SETS_STATUS_COUNT_BAD) != 0)
                .then_some(word(SETS_STATUS_COUNT_VALUE) as i64),
        })
    }
}

/// Where one input's segments of a batched call are.
#[derive(Clone, Copy, Debug)]
pub enum SetsSegments<'a, 'b> {
    /// Segment `i` starts at `i * stride`; its size is one host value or one per segment on the
    /// device.
    Strided {
        /// The distance between segment starts.
        stride: u64,
        /// The sizes.
        sizes: HostOrDevice<DeviceInts<'a, 'b>, u64>,
    },
    /// Segment `i` is `[begin[i], end[i])`.
    Offsets {
        /// Begin offsets, one per pair.
        begin: &'b CudaView<'a, i64>,
        /// End offsets, one per pair.
        end: &'b CudaView<'a, i64>,
    },
}

/// One input's segments of a batched call and the bounds every size must satisfy.
#[derive(Clone, Copy, Debug)]
pub struct SetsSideArgs<'a, 'b> {
    /// Where the segments are.
    pub segments: SetsSegments<'a, 'b>,
    /// The bounds of every segment's size.
    pub sizes: (u64, u64),
}

/// The pairs of a batched call: pair `i` is a's segment `i` and b's segment `i`; each input's
/// segments must be in order and disjoint (checked on the device, as every segment's layout).
#[derive(Debug)]
pub struct SetsBatch<'a, 'b> {
    /// a's segments.
    pub a: SetsSideArgs<'a, 'b>,
    /// b's segments.
    pub b: SetsSideArgs<'a, 'b>,
    /// The number of pairs: a host value, or one deferred value on the device.
    pub num_segments: HostOrDevice<&'b CudaView<'a, i64>, u64>,
    /// The bounds of a deferred number of pairs (a value outside them is reported).
    pub num_segments_bounds: (u64, u64),
    /// The most pairs the call may have (the host value, or the upper bound).
    pub max_segments: u64,
}

/// Runs `plan`'s operation over `a` and `b` into `out_keys` (and values, or source
/// positions), leaving the count on the device (and in `count_out` when given: one `i64`).
/// Asynchronous on `stream`; [`SetsStatus::decode`] reads the count and the order checks.
#[allow(clippy::too_many_arguments)]
pub fn set_operation<K: RadixKey, V>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    scratch: &Scratch<'_>,
    plan: SetsPlan,
    a: &CudaView<'_, K>,
    b: &CudaView<'_, K>,
    out_keys: &mut CudaViewMut<'_, K>,
    values: SetsValues<'_, '_, V>,
    count_out: Option<&mut CudaViewMut<'_, i64>>,
) -> Result<SetsStatus, KernelError> {
    launch(
        runtime, stream, scratch, plan, None, a, b, out_keys, values, count_out,
    )
}

/// Runs `plan`'s operation over every pair of `batch` at once: pair `i`'s outputs (keys, and
/// values or source positions in the whole of a and b) compacted after pair `i - 1`'s, their
/// offsets in `out_offsets` (`max_segments + 1` elements: pair `i`'s outputs are
/// `[out_offsets[i], out_offsets[i + 1])`), the total as [`set_operation`]'s count. Asynchronous on
/// `stream`; [`SetsStatus::decode`] reads the count, the order checks and the pairs' checks.
#[allow(clippy::too_many_arguments)]
pub fn batched_set_operation<K: RadixKey, V>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    scratch: &Scratch<'_>,
    plan: SetsPlan,
    batch: SetsBatch<'_, '_>,
    out_offsets: &mut CudaViewMut<'_, i64>,
    a: &CudaView<'_, K>,
    b: &CudaView<'_, K>,
    out_keys: &mut CudaViewMut<'_, K>,
    values: SetsValues<'_, '_, V>,
) -> Result<SetsStatus, KernelError> {
    let batch = Some((batch, out_offsets));
    launch(
        runtime, stream, scratch, plan, batch, a, b, out_keys, values, None,
    )
}

/// A batched call's segment fields: (begin, end, sizes, size value, stride, flags) of one side.
fn side_fields<'g>(
    side: &SetsSideArgs<'_, 'g>,
    runtime: &KernelRuntime,
    stream: &'g Arc<CudaStream>,
    guards: &mut Vec<SyncOnDrop<'g>>,
    max_segments: u64,
) -> Result<(u64, u64, u64, u64, u64, u32), KernelError> {
    Ok(match side.segments {
        SetsSegments::Strided { stride, sizes } => match sizes {
            HostOrDevice::Host(size) => (0, 0, 0, size, stride, 0),
            HostOrDevice::Device(sizes) => {
                sizes.check(runtime, "segment_sizes")?;
                at_least("segment_sizes", sizes.len(), max_segments)?;
                let width = if sizes.is_i32() { SEGMENT_SIZES_I32 } else { 0 };
                let ptr = sizes.ptr(guards, stream);
                (0, 0, ptr, 0, stride, SEGMENT_SIZES_PER_SEGMENT | width)
            }
        },
        SetsSegments::Offsets { begin, end } => {
            runtime.check_buffer("begin_offsets", begin)?;
            runtime.check_buffer("end_offsets", end)?;
            at_least("begin_offsets", begin.len(), max_segments)?;
            at_least("end_offsets", end.len(), max_segments)?;
            let (b, e) = (
                keep(guards, begin.device_ptr(stream)),
                keep(guards, end.device_ptr(stream)),
            );
            (b, e, 0, 0, 0, SEGMENT_OFFSETS)
        }
    })
}

/// The body of [`set_operation`] and [`batched_set_operation`].
#[allow(clippy::too_many_arguments)]
fn launch<K: RadixKey, V>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    scratch: &Scratch<'_>,
    plan: SetsPlan,
    mut batch: Option<(SetsBatch<'_, '_>, &mut CudaViewMut<'_, i64>)>,
    a: &CudaView<'_, K>,
    b: &CudaView<'_, K>,
    out_keys: &mut CudaViewMut<'_, K>,
    mut values: SetsValues<'_, '_, V>,
    count_out: Option<&mut CudaViewMut<'_, i64>>,
) -> Result<SetsStatus, KernelError> {
    let invalid = |reason: String| KernelError::InvalidSpec {
        kernel: "sets".to_owned(),
        reason,
    };
    if plan.op > SETS_OP_MERGE {
        return Err(invalid(format!("no operation {}", plan.op)));
    }
    runtime.check_buffer("a", a)?;
    runtime.check_buffer("b", b)?;
    runtime.check_buffer("out_keys", &*out_keys)?;
    at_least("out_keys", out_keys.len(), plan.out_len)?;
    let (m, n) = (a.len() as u64, b.len() as u64);
    let value_bytes = std::mem::size_of::<V>() as u8;
    let (value_bytes, index) = match &values {
        SetsValues::None => (0, false),
        SetsValues::Copy {
            a_values,
            b_values,
            out,
        } => {
            runtime.check_buffer("a_values", *a_values)?;
            runtime.check_buffer("b_values", *b_values)?;
            runtime.check_buffer("out_values", &**out)?;
            at_least("a_values", a_values.len(), m)?;
            at_least("b_values", b_values.len(), n)?;
            at_least("out_values", out.len(), plan.out_len)?;
            (value_bytes, false)
        }
        SetsValues::Index { out } => {
            runtime.check_buffer("out_values", &**out)?;
            at_least("out_values", out.len(), plan.out_len)?;
            if !matches!(value_bytes, 4 | 8) {
                return Err(invalid(format!(
                    "positions are 4 or 8 bytes, not {value_bytes}"
                )));
            }
            (value_bytes, true)
        }
    };
    if !matches!(value_bytes, 0 | 1 | 2 | 4 | 8) {
        return Err(invalid(format!(
            "values must be 1, 2, 4 or 8 bytes, not {value_bytes}"
        )));
    }
    let mut flags = 0;
    for (on, flag) in [
        (plan.check, SETS_CHECK),
        (plan.check && plan.strict, SETS_STRICT),
        (plan.descending, SETS_DESCENDING),
        (plan.no_duplicates, SETS_NO_DUPLICATES),
        (index, SETS_INDEX),
    ] {
        if on {
            flags |= flag;
        }
    }
    let batched = batch.is_some();
    let spec = KernelSpec::sets_variant(K::KEY_TYPE, plan.op, value_bytes, batched);
    let kernel = runtime.kernel(&spec)?;
    let total = m.saturating_add(n);
    let tiles = total.div_ceil(tile_items(K::KEY_TYPE, batched));
    // The status words, and one zeroed buffer: a state word per tile, the partition words of
    // each tile boundary (tiles + 1 of them, one word each, three for a batched call: written
    // by PARTITION before TILES reads them).
    let mut status_words = scratch.status(runtime, stream, SETS_STATUS_WORDS.into())?;
    let partition_words: u64 = if batched { 3 } else { 1 };
    let tiles_len = tiles.saturating_add(tiles.saturating_add(1).saturating_mul(partition_words));
    let mut tile_words = scratch.zeroed::<u64>(runtime, stream, "sets tiles", tiles_len)?;
    let mut guards = Vec::new();
    let (a_values, b_values, out_values) = match &mut values {
        SetsValues::None => (0, 0, 0),
        SetsValues::Copy {
            a_values,
            b_values,
            out,
        } => (
            keep(&mut guards, a_values.device_ptr(stream)),
            keep(&mut guards, b_values.device_ptr(stream)),
            keep(&mut guards, out.device_ptr_mut(stream)),
        ),
        SetsValues::Index { out } => (0, 0, keep(&mut guards, out.device_ptr_mut(stream))),
    };
    let count_ptr = match count_out {
        Some(count) => {
            runtime.check_buffer("count", &*count)?;
            at_least("count", count.len(), 1)?;
            keep(&mut guards, count.device_ptr_mut(stream))
        }
        None => 0,
    };
    let status = status_words
        .as_mut()
        .map_or(0, |words| words.ptr(&mut guards, stream));
    let tile_state = tile_words.ptr(&mut guards, stream);
    let mut batch_params = SetsParams::default();
    let mut pairs_threads = 0;
    if let Some((batch, out_offsets)) = batch.as_mut() {
        let max = batch.max_segments;
        let (a_begin, a_end, a_sizes, a_size_value, a_stride, a_flags) =
            side_fields(&batch.a, runtime, stream, &mut guards, max)?;
        let (b_begin, b_end, b_sizes, b_size_value, b_stride, b_flags) =
            side_fields(&batch.b, runtime, stream, &mut guards, max)?;
        let (num_segments, num_segments_ptr, count_flag) = match batch.num_segments {
            HostOrDevice::Host(count) => (count, 0, 0),
            HostOrDevice::Device(count) => {
                runtime.check_buffer("num_segments", count)?;
                at_least("num_segments", count.len(), 1)?;
                let ptr = keep(&mut guards, count.device_ptr(stream));
                (0, ptr, SEGMENT_COUNT_DEFERRED)
            }
        };
        runtime.check_buffer("out_offsets", &**out_offsets)?;
        at_least("out_offsets", out_offsets.len(), max.saturating_add(1))?;
        pairs_threads = max;
        batch_params = SetsParams {
            out_offsets: keep(&mut guards, out_offsets.device_ptr_mut(stream)),
            a_begin,
            a_end,
            a_sizes,
            a_size_value,
            a_size_min: batch.a.sizes.0,
            a_size_max: batch.a.sizes.1,
            a_stride,
            b_begin,
            b_end,
            b_sizes,
            b_size_value,
            b_size_min: batch.b.sizes.0,
            b_size_max: batch.b.sizes.1,
            b_stride,
            num_segments,
            num_segments_ptr,
            num_segments_min: batch.num_segments_bounds.0,
            num_segments_max: batch.num_segments_bounds.1,
            a_layout: a_flags | count_flag,
            b_layout: b_flags,
            ..SetsParams::default()
        };
    }
    if scratch.is_measuring() {
        return Ok(SetsStatus {
            words: None,
            health: runtime.health().clone(),
        });
    }
    let params = SetsParams {
        a: keep(&mut guards, a.device_ptr(stream)),
        b: keep(&mut guards, b.device_ptr(stream)),
        a_values,
        b_values,
        out_keys: keep(&mut guards, out_keys.device_ptr_mut(stream)),
        out_values,
        partition: tile_state + 8 * tiles,
        tile_state,
        status,
        count_out: count_ptr,
        a_count: m,
        b_count: n,
        out_len: plan.out_len,
        tiles,
        flags,
        stage: SETS_STAGE_PARTITION,
        ..batch_params
    };
    let stage = |stage: u32| SetsParams { stage, ..params };
    // A batched call's PARTITION also checks every pair (a thread each).
    if tiles > 0 || batched {
        let lanes = (tiles + 1)
            .saturating_mul(u64::from(SETS_PARTITION_LANES))
            .max(pairs_threads);
        let over_diagonals = runtime.grid_blocks(&kernel, lanes, 1);
        runtime.launch(stream, &kernel, over_diagonals, stage(SETS_STAGE_PARTITION))?;
    }
    // Resident blocks take the tiles by ticket (one block for no input: it writes the count).
    let over_tiles =
        runtime.grid_blocks(&kernel, tiles.saturating_mul(u64::from(BLOCK_THREADS)), 1);
    runtime.launch(stream, &kernel, over_tiles, stage(SETS_STAGE_TILES))?;
    drop(guards);
    Ok(SetsStatus {
        words: status_words,
        health: runtime.health().clone(),
    })
}
