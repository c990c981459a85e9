//! Family `routing_dispatch` (`cuda/routing/dispatch.cuh`): after a router, each expert's
//! number of entries and the entries grouped by expert, stable (docs/design/routing.md,
//! "Dispatch"). One launch when the entries fit one tile ([`TILE_ENTRIES`]: 512 tokens of 8),
//! else three (each tile counted, each expert's tiles scanned, each tile placed); no atomics
//! decide an order, so every run writes the same bits.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, SyncOnDrop};

use crate::codegen::{device_constants, kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::families::routing::{ExpertId, MAX_EXPERTS};
use crate::families::scratch::{Scratch, StatusWords};
use crate::families::{at_least, keep};
use crate::health::ContextHealth;
use crate::radix::KeyType;
use crate::{KernelError, KernelFamily, KernelRuntime, KernelSpec, Tier};

/// Threads per block: eight warps.
const BLOCK_THREADS: u32 = 256;
/// Entries a lane holds (its warp's are 32 times as many, consecutive).
const ITEMS_PER_LANE: u32 = 16;
/// Entries a block counts and places together: a stage's unit of work, and the most a single
/// launch takes.
pub const TILE_ENTRIES: u32 = BLOCK_THREADS * ITEMS_PER_LANE;

device_constants! {
    /// The constants the dispatch launcher and its kernel share.
    pub(crate) static RD_CONSTANTS;

    /// The most experts: a warp's shared row holds a count per expert.
    pub(crate) const RD_MAX_EXPERTS: u32 = MAX_EXPERTS;
    /// Entries a lane holds.
    pub(crate) const RD_ITEMS_PER_LANE: u32 = ITEMS_PER_LANE;
    /// Entries a tile holds.
    pub(crate) const RD_TILE_ENTRIES: u32 = TILE_ENTRIES;
    /// The id of a lane past the entries (never an expert).
    pub(crate) const RD_NONE: u32 = u32::MAX;

    /// `params.stage`: at most one tile, everything in one block.
    pub(crate) const RD_STAGE_SINGLE: u32 = 0;
    /// Stage: each tile's counts per expert into `tile_counts`; invalid entries reported.
    pub(crate) const RD_STAGE_COUNT: u32 = 1;
    /// Stage (a warp per expert): its count, and each tile's first position within the
    /// expert in place of the tile's count.
    pub(crate) const RD_STAGE_SCAN: u32 = 2;
    /// Stage: each tile's entries written to `order`.
    pub(crate) const RD_STAGE_PLACE: u32 = 3;

    /// Status word (u64): the complement of the smallest invalid entry (0 when there is none),
    /// so that an atomic maximum keeps the smallest.
    pub(crate) const RD_STATUS_INVALID: u32 = 0;
    /// Status word: that entry's id (its bits).
    pub(crate) const RD_STATUS_VALUE: u32 = 1;
    /// The number of status words.
    pub(crate) const RD_STATUS_WORDS: u32 = 2;
}

kernel_params! {
    /// Parameters of `routing_dispatch` (device pointers as `u64`).
    struct RoutingDispatchParams {
        /// `entries` expert ids (u32 or i32 bits).
        ids: u64,
        /// `experts` counts (u32 or i32 bits).
        counts: u64,
        /// `entries` entry indices (u32 or i32 bits).
        order: u64,
        /// A u32 per tile and expert (three-stage calls only).
        tile_counts: u64,
        /// RD_STATUS_WORDS u64, zeroed.
        status: u64,
        entries: u64,
        experts: u32,
        stage: u32,
    }
}

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "routing_dispatch",
    header: include_str!("../../cuda/routing/dispatch.cuh"),
    constants: &[&RD_CONSTANTS],
    params_name: RoutingDispatchParams::CXX_NAME,
    params_declaration: RoutingDispatchParams::cxx_declaration,
    template_args: &[TemplateArg::BlockThreads],
    // A row of counts per warp, the experts' offsets, a u32 per warp for the block scan.
    static_shared_bytes: |spec| {
        let warps = u64::from(spec.block_threads / 32);
        4 * (warps * u64::from(MAX_EXPERTS) + u64::from(MAX_EXPERTS) + warps)
    },
};

impl KernelSpec {
    /// The spec of the `routing_dispatch` kernel (every stage; its key type is nominal:
    /// [`KeyType::U32`]).
    ///
    /// ```
    /// use oxicub::kernels::KernelSpec;
    ///
    /// let spec = KernelSpec::routing_dispatch();
    /// assert_eq!(spec.to_string(), "oxicub::routing_dispatch<256>");
    /// ```
    pub fn routing_dispatch() -> KernelSpec {
        KernelSpec {
            family: KernelFamily::RoutingDispatch,
            key: KeyType::U32,
            value: None,
            direction: None,
            tier: Tier::GridStride,
            block_threads: BLOCK_THREADS,
            consts: Vec::new(),
        }
    }
}

/// Every `routing_dispatch` spec: the one kernel.
///
/// ```
/// assert_eq!(oxicub::kernels::families::routing_dispatch::specs().len(), 1);
/// ```
pub fn specs() -> Vec<KernelSpec> {
    vec![KernelSpec::routing_dispatch()]
}

/// The smallest entry whose id is not an expert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidEntry {
    /// Its index in the ids.
    pub entry: u64,
    /// Its id, as the caller's type reads it (an `i32` id may be negative).
    pub id: i64,
}

/// The status words a call leaves on the device, read when the caller checks.
#[derive(Debug)]
pub struct DispatchStatus {
    /// `None` when the call was only measured.
    words: Option<StatusWords>,
    health: Arc<ContextHealth>,
    /// The id type's reading of an id's bits.
    id_value: fn(u32) -> i64,
}

impl DispatchStatus {
    /// Reads the status (waits for the stream): the smallest invalid entry, if any (the counts
    /// and the order are then unspecified). A kernel fault seen here (the call's own, or an
    /// earlier one's on the context) is [`KernelError::ContextPoisoned`].
    pub fn decode(&self, stream: &Arc<CudaStream>) -> Result<Option<InvalidEntry>, KernelError> {
        self.health.check()?;
        let Some(words) = self.words.as_ref() else {
            return Ok(None);
        };
        let words = words.read(&self.health, stream)?;
        let word = |at: u32| words.get(at as usize).copied().unwrap_or(0);
        let invalid = word(RD_STATUS_INVALID);
        Ok((invalid != 0).then(|| InvalidEntry {
            entry: !invalid,
            id: (self.id_value)(word(RD_STATUS_VALUE) as u32),
        }))
    }
}

/// Counts, for each of `experts` experts, the entries of `ids` (a router's ids, `tokens * k`
/// of them) that name it, into `counts` (`experts` values), and writes the entries' indices
/// grouped by expert into `order` (`ids.len()` values): expert 0's entries first, each expert's
/// in ascending order (so by token: a token names an expert once). Entry `order[j]` is token
/// `order[j] / k`'s choice number `order[j] % k`; expert `e`'s entries start at the sum of
/// `counts[..e]`. Every id is checked on the device: the smallest entry that names no expert is
/// reported by [`DispatchStatus::decode`] (the outputs are then unspecified). Asynchronous on
/// `stream`: one launch up to [`TILE_ENTRIES`] entries, else three.
///
/// ```no_run
/// use oxicub::kernels::families::routing_dispatch::dispatch;
/// use oxicub::kernels::{open_context, KernelRuntime, Scratch};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// // Three tokens' two experts each, of 4 experts.
/// let ids = stream.clone_htod(&[2u32, 0, 2, 3, 0, 2]).map_err(|e| e.to_string())?;
/// let mut counts = stream.alloc_zeros::<u32>(4).map_err(|e| e.to_string())?;
/// let mut order = stream.alloc_zeros::<u32>(6).map_err(|e| e.to_string())?;
/// let status = dispatch(&runtime, &stream, &Scratch::allocate(), 4, &ids.as_view(), &mut counts.as_view_mut(), &mut order.as_view_mut())?;
/// assert_eq!(status.decode(&stream)?, None);
/// assert_eq!(stream.clone_dtoh(&counts).map_err(|e| e.to_string())?, [2, 0, 3, 1]);
/// assert_eq!(stream.clone_dtoh(&order).map_err(|e| e.to_string())?, [1, 4, 0, 2, 5, 3]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn dispatch<I: ExpertId>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    scratch: &Scratch<'_>,
    experts: u32,
    ids: &CudaView<'_, I>,
    counts: &mut CudaViewMut<'_, I>,
    order: &mut CudaViewMut<'_, I>,
) -> Result<DispatchStatus, KernelError> {
    if !(1..=MAX_EXPERTS).contains(&experts) {
        return Err(KernelError::InvalidSpec {
            kernel: "routing_dispatch".to_owned(),
            reason: format!("experts: {experts} is outside 1..={MAX_EXPERTS}"),
        });
    }
    runtime.check_buffer("ids", ids)?;
    runtime.check_buffer("counts", &*counts)?;
    runtime.check_buffer("order", &*order)?;
    let entries = ids.len() as u64;
    if entries > I::MAX_INDEX {
        return Err(KernelError::TooLarge {
            buffer: "ids",
            len: entries,
            max: I::MAX_INDEX,
            why: "the order holds entry indices of the ids' type",
        });
    }
    at_least("counts", counts.len(), u64::from(experts))?;
    at_least("order", order.len(), entries)?;
    let kernel = runtime.kernel(&KernelSpec::routing_dispatch())?;
    let tiles = entries.div_ceil(u64::from(TILE_ENTRIES));
    let mut status = scratch.status(runtime, stream, RD_STATUS_WORDS.into())?;
    let mut tile_counts = if tiles > 1 {
        // SAFETY: COUNT writes every tile's count of every expert before SCAN reads it.
        Some(unsafe {
            scratch.uninit::<u32>(runtime, stream, "tile_counts", tiles * u64::from(experts))
        }?)
    } else {
        None
    };
    let measured = DispatchStatus {
        words: None,
        health: Arc::clone(runtime.health()),
        id_value: I::id_value,
    };
    if scratch.is_measuring() {
        return Ok(measured);
    }
    let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
    let params = RoutingDispatchParams {
        ids: keep(&mut guards, ids.device_ptr(stream)),
        counts: keep(&mut guards, counts.device_ptr_mut(stream)),
        order: keep(&mut guards, order.device_ptr_mut(stream)),
        tile_counts: tile_counts
            .as_mut()
            .map_or(0, |buffer| buffer.ptr(&mut guards, stream)),
        status: status
            .as_mut()
            .map_or(0, |words| words.ptr(&mut guards, stream)),
        entries,
        experts,
        stage: RD_STAGE_SINGLE,
    };
    let stage = |stage: u32| RoutingDispatchParams { stage, ..params };
    if tiles <= 1 {
        runtime.launch(stream, &kernel, 1, stage(RD_STAGE_SINGLE))?;
    } else {
        let block = u64::from(BLOCK_THREADS);
        let over_tiles = runtime.grid_blocks(&kernel, tiles.saturating_mul(block), 1);
        // A warp per expert.
        let over_experts = runtime.grid_blocks(&kernel, u64::from(experts) * 32, 1);
        runtime.launch(stream, &kernel, over_tiles, stage(RD_STAGE_COUNT))?;
        runtime.launch(stream, &kernel, over_experts, stage(RD_STAGE_SCAN))?;
        runtime.launch(stream, &kernel, over_tiles, stage(RD_STAGE_PLACE))?;
    }
    drop(guards);
    Ok(DispatchStatus {
        words: status,
        ..measured
    })
}
