//! Family `sets` (`cuda/sets/`, `cuda/core/balanced_path.cuh`): a multiset operation or a merge
//! of two sorted inputs (seed 003; docs/design/sets.md, "GPU"). Two launches in stream order
//! after one zeroed scratch buffer: PARTITION (a group of lanes per tile boundary: the Balanced
//! Path, or Merge Path, at its diagonal), TILES (a single pass: each tile loads its ranges once,
//! checks their order, runs the operation, takes its outputs' offset from the tiles before it
//! by decoupled look-back and writes them). The last tile leaves the total on the device, and
//! in the caller's count buffer when one is given.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use crate::codegen::{device_constants, kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::families::scratch::alloc_zeroed;
use crate::families::{at_least, keep};
use crate::health::ContextHealth;
use crate::radix::{KeyType, RadixKey};
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
    /// The number of status words (the scratch buffer's first words).
    pub(crate) const SETS_STATUS_WORDS: u32 = 6;

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
        flags: u32,
        stage: u32,
    }
}

/// Inputs a tile of `key`s holds (without the one a starred right diagonal adds).
fn tile_items(key: KeyType) -> u64 {
    let items = if key.bits() == 64 {
        SETS_ITEMS_WIDE
    } else {
        SETS_ITEMS
    };
    u64::from(BLOCK_THREADS * items)
}

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "sets",
    header: include_str!("../../cuda/sets/sets.cuh"),
    constants: &[&SETS_CONSTANTS],
    params_name: SetsParams::CXX_NAME,
    params_declaration: SetsParams::cxx_declaration,
    template_args: &[
        TemplateArg::Key,
        TemplateArg::BlockThreads,
        TemplateArg::Const("OP"),
        TemplateArg::Const("VALUE_BYTES"),
    ],
    // The tile's ranks (tile + 2 keys and three 16-byte lines for the ranges' line offsets)
    // and its compacted sources (tile + 2 u16), a u32 start per thread, a u64 per warp for the
    // block scan, five u64 words (the next tile, the offset, the last-done flag), the
    // mbarrier, 32 bytes for the alignment between them.
    static_shared_bytes: |spec| {
        (u64::from(spec.key.bits() / 8) + 2) * (tile_items(spec.key) + 2)
            + 48
            + 4 * u64::from(BLOCK_THREADS)
            + 8 * u64::from(BLOCK_THREADS / 32)
            + 40
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
    /// use oxicub_kernels::{KernelSpec, KeyType};
    ///
    /// let spec = KernelSpec::sets(KeyType::I32, 3, 4);
    /// assert_eq!(spec.to_string(), "oxicub::sets<oxicub::KeyI32, 256, 3, 4>");
    /// ```
    pub fn sets(key: KeyType, op: u32, value_bytes: u8) -> KernelSpec {
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
                ("MIN_BLOCKS", 5),
            ],
        }
    }
}

/// Every `sets` spec: each key type, operation and value width.
///
/// ```
/// assert_eq!(oxicub_kernels::families::sets::specs().len(), 12 * 5 * 5);
/// ```
pub fn specs() -> Vec<KernelSpec> {
    let mut specs = Vec::new();
    for key in KeyType::ALL {
        for op in SETS_OP_INTERSECTION..=SETS_OP_MERGE {
            for bytes in VALUE_WIDTHS {
                specs.push(KernelSpec::sets(key, op, bytes));
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
}

/// The status words a call leaves on the device (the first words of its scratch buffer), read
/// when the caller checks.
#[derive(Debug)]
pub struct SetsStatus {
    words: CudaSlice<u64>,
    health: Arc<ContextHealth>,
}

impl SetsStatus {
    /// Reads the status (waits for the stream). A kernel fault seen here is
    /// [`KernelError::ContextPoisoned`].
    pub fn decode(&self, stream: &Arc<CudaStream>) -> Result<SetsReport, KernelError> {
        self.health.check()?;
        let status = self
            .words
            .slice(..(SETS_STATUS_WORDS as usize).min(self.words.len()));
        let words = self
            .health
            .during("cuMemcpyDtoHAsync", stream.clone_dtoh(&status))?;
        let word = |at: u32| words.get(at as usize).copied().unwrap_or(0);
        let bad = |at: u32| {
            let w = !word(at);
            (w != u64::MAX).then_some((w >> 1, w & 1 == 1))
        };
        Ok(SetsReport {
            count: word(SETS_STATUS_COUNT),
            a_out_of_order: bad(SETS_STATUS_A_BAD),
            b_out_of_order: bad(SETS_STATUS_B_BAD),
        })
    }
}

/// Runs `plan`'s operation over `a` and `b` into `out_keys` (and values, or source
/// positions), leaving the count on the device (and in `count_out` when given: one `i64`).
/// Asynchronous on `stream`; [`SetsStatus::decode`] reads the count and the order checks.
#[allow(clippy::too_many_arguments)]
pub fn set_operation<K: RadixKey, V>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    plan: SetsPlan,
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
    let spec = KernelSpec::sets(K::KEY_TYPE, plan.op, value_bytes);
    let kernel = runtime.kernel(&spec)?;
    let total = m.saturating_add(n);
    let tiles = total.div_ceil(tile_items(K::KEY_TYPE));
    // One zeroed buffer: the status words, a state word per tile, a partition word per tile
    // boundary (tiles + 1; written by PARTITION before TILES reads them).
    let status_words = u64::from(SETS_STATUS_WORDS);
    let scratch_len = status_words
        .saturating_add(tiles.saturating_mul(2))
        .saturating_add(1);
    let mut scratch = alloc_zeroed::<u64>(runtime, stream, "sets scratch", scratch_len)?;
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
    let status = keep(&mut guards, scratch.device_ptr_mut(stream));
    let params = SetsParams {
        a: keep(&mut guards, a.device_ptr(stream)),
        b: keep(&mut guards, b.device_ptr(stream)),
        a_values,
        b_values,
        out_keys: keep(&mut guards, out_keys.device_ptr_mut(stream)),
        out_values,
        partition: status + 8 * (status_words + tiles),
        tile_state: status + 8 * status_words,
        status,
        count_out: count_ptr,
        a_count: m,
        b_count: n,
        out_len: plan.out_len,
        tiles,
        flags,
        stage: SETS_STAGE_PARTITION,
    };
    let stage = |stage: u32| SetsParams { stage, ..params };
    if tiles > 0 {
        let lanes = (tiles + 1).saturating_mul(u64::from(SETS_PARTITION_LANES));
        let over_diagonals = runtime.grid_blocks(&kernel, lanes, 1);
        runtime.launch(stream, &kernel, over_diagonals, stage(SETS_STAGE_PARTITION))?;
    }
    // Resident blocks take the tiles by ticket (one block for no input: it writes the count).
    let over_tiles =
        runtime.grid_blocks(&kernel, tiles.saturating_mul(u64::from(BLOCK_THREADS)), 1);
    runtime.launch(stream, &kernel, over_tiles, stage(SETS_STAGE_TILES))?;
    drop(guards);
    Ok(SetsStatus {
        words: scratch,
        health: runtime.health().clone(),
    })
}
