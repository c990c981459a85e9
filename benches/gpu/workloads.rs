//! The workload table: what is measured, on which input, what it must move at least, and the CPU
//! reference result every implementation is checked against.
//!
//! A workload is (a) a deterministic input (a kind, its sizes and a generator seed: gen.cuh makes
//! the same input in every implementation), (b) its floor bytes, (c) an optional oxicub runner
//! (oxicub.rs) and (d) the peers, which receive it as one plan line (peers.rs).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use crate::gen::{self, Digest};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SetOp {
    Intersection,
    Union,
    Difference,
    SymmetricDifference,
    /// std::merge: every key of both inputs, A's first among equal keys (a stable merge).
    Merge,
}

impl SetOp {
    pub fn plan_kind(self) -> &'static str {
        match self {
            SetOp::Intersection => "set_intersection",
            SetOp::Union => "set_union",
            SetOp::Difference => "set_difference",
            SetOp::SymmetricDifference => "set_symdiff",
            SetOp::Merge => "merge",
        }
    }
    /// The plan kind of the batched operation (`Kind::BatchedSet`).
    pub fn batched_plan_kind(self) -> &'static str {
        match self {
            SetOp::Intersection => "batched_set_intersection",
            SetOp::Union => "batched_set_union",
            SetOp::Difference => "batched_set_difference",
            SetOp::SymmetricDifference => "batched_set_symdiff",
            SetOp::Merge => "batched_merge",
        }
    }
    fn label(self) -> &'static str {
        match self {
            SetOp::Intersection => "set intersection",
            SetOp::Union => "set union",
            SetOp::Difference => "set difference",
            SetOp::SymmetricDifference => "set symmetric difference",
            SetOp::Merge => "merge",
        }
    }
}

/// The key order within the rows of a batched workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// Uniform keys (gen.cuh: `oxb_f32`).
    Random,
    /// Ascending keys, the k largest last (gen.cuh: `oxb_ramp_f32`): sorted or time-ordered
    /// scores.
    Ascending,
    /// bf16 keys, the uniform f32 keys truncated to their top 16 bits (gen.cuh:
    /// `oxb_bf16_bits`): 8 significant bits, so long runs of equal keys, as bf16 logits have.
    Bf16,
    /// Uniform f32 keys in a `[segments x len]` matrix whose row `r` holds only its first
    /// `oxb_ragged_len(seed, r, len, k)` keys (at least `k`, most rows shorter than `len`),
    /// the row lengths in device memory: decode-time sparse attention over KV histories of
    /// different lengths.
    Ragged,
    /// Tie-heavy f32 keys (gen.cuh: `oxb_tie_bits`): 64 values sharing their top 26 bits, so
    /// the `k`-th key's tie class straddles `k`; the result is digested with its index set
    /// (`cpu_reference`), so only a selection that keeps the smaller indices of that class
    /// matches.
    Ties,
}

impl Rows {
    /// Bytes of one key.
    pub fn key_bytes(self) -> u64 {
        match self {
            Rows::Bf16 => 2,
            Rows::Random | Rows::Ascending | Rows::Ragged | Rows::Ties => 4,
        }
    }
}

/// The row lengths of a ragged batched workload (`Rows::Ragged`).
pub fn ragged_lens(seed: u64, segments: u64, len: u64, k: u64) -> Vec<u64> {
    (0..segments)
        .map(|r| u64::from(gen::ragged_len(seed, r, len as u32, k as u32)))
        .collect()
}

/// What a segmented sort of uniform rows returns beside the sorted keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carry {
    /// Sort pairs: u32 values, value i = i (the key's global position), so the values out are the
    /// permutation.
    Values,
    /// Argsort: each sorted key's int64 index within its segment (`torch.sort`'s indices).
    Indices,
}

/// The input of a locality sort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalityKeys {
    /// Key i = i + rand(0, range), both bounds inclusive (gen.cuh: `oxb_near_i32`).
    Near { range: u32 },
    /// Uniform random int32 keys (the u32 stream with the full mask, reinterpreted).
    Random,
}

/// A MoE router (`Kind::Route`): logits f32 [tokens x ROUTE_EXPERTS] (gen.cuh:
/// `oxb_route_logit`), ROUTE_K expert ids (i32) and weights (f32) per token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Router {
    /// DeepSeek-V3's `noaux_tc`: sigmoid scores plus an f32 correction bias (all zeros here,
    /// read by every implementation), 8 groups of 32 scored by their two best biased scores, the
    /// best 4 groups kept, the 8 best biased scores of those, weights renormalised, times 2.5.
    DeepSeekV3,
    /// Softmax over the experts, the 8 best, weights renormalised (Mixtral, Qwen); no bias.
    Softmax,
}

/// Experts and experts per token of both routers (DeepSeek-V3's shape).
pub const ROUTE_EXPERTS: u64 = 256;
pub const ROUTE_K: u64 = 8;
/// DeepSeek-V3's groups and kept groups (its weight scale, 2.5, is the library preset's:
/// `routing::DeepSeekV3::deepseek_v3`).
pub const V3_GROUPS: u64 = 8;
pub const V3_TOP_GROUPS: u64 = 4;

impl Router {
    pub fn plan_kind(self) -> &'static str {
        match self {
            Router::DeepSeekV3 => "route_deepseek_v3",
            Router::Softmax => "route_softmax",
        }
    }
    /// Whether the router reads the correction bias.
    pub fn has_bias(self) -> bool {
        self == Router::DeepSeekV3
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// The k largest of n f32 keys.
    TopK { n: u64, k: u64 },
    /// The k largest keys of each row of a dense [segments x len] f32 matrix.
    Batched {
        segments: u64,
        len: u64,
        k: u64,
        rows: Rows,
    },
    /// Ascending sort of each row of a dense [segments x len] f32 matrix.
    SegSort { segments: u64, len: u64 },
    /// Ascending segmented sort, power-law segment lengths (gen.cuh: oxb_powerlaw_len).
    SegSortPowerLaw { segments: u64, max_exp: u32 },
    /// Stable ascending sort of each row of a dense [segments x len] f32 matrix, with values
    /// (`Carry::Values`) or with each key's index within its row (`Carry::Indices`).
    SegSortCarry {
        segments: u64,
        len: u64,
        carry: Carry,
    },
    /// Ascending sort of n int32 keys, one array.
    Locality { n: u64, keys: LocalityKeys },
    /// A multiset operation or a merge of two sorted int32 arrays of n keys each, keys in
    /// [0, mask]: A is stream `seed`, B is stream `seed + 1`.
    Set { op: SetOp, n: u64, mask: u32 },
    /// A `Set` operation over `pairs` pairs of sorted u32 segments in one call, pair i's
    /// result after pair i - 1's: A's segment sizes are the power-law lengths of stream `seed`,
    /// B's of stream `seed + 1` (`batched_set_offsets`); A's keys are stream `seed + 2` under
    /// `mask`, B's stream `seed + 3`, each segment sorted ascending.
    BatchedSet {
        op: SetOp,
        pairs: u64,
        max_exp: u32,
        mask: u32,
    },
    /// MoE routing of `tokens` tokens by `router` (ids checked; weights are checked by the
    /// library's tests against the oracle, 1 ulp, not here).
    Route { router: Router, tokens: u64 },
}

#[derive(Clone, Debug)]
pub struct Workload {
    /// Identifier: plan lines, JSON, and `--filter`. No spaces.
    pub id: String,
    /// What the table shows.
    pub label: String,
    pub kind: Kind,
    pub seed: u64,
    pub warmup: usize,
    pub reps: usize,
}

const SPARSE_MASK: u32 = 0x7FFF_FFFF; // keys in [0, 2^31): almost all distinct
const DUP_MASK: u32 = 0xFFF; // keys in [0, 4096): each key about 4096 times per 2^24-key input
const POWERLAW_SEGMENTS: u64 = 1536;
const POWERLAW_MAX_EXP: u32 = 16; // lengths 1 .. 2^17 - 1; about 1.7e7 keys in all
const LOCALITY_LOG2: u32 = 26;
// Adjacency-list intersection (common neighbours, triangle counting): many short sorted lists.
// Lengths 1 .. 2^9 - 1 average about 85, so about 5.5e6 keys a side (max_exp 16 would give
// 7.6e8). Keys in [0, 1024): a pair of long lists shares a good part of its keys, a short one
// little, and long lists repeat keys, so the multiset semantics show.
const BATCHED_SET_PAIRS: u64 = 1 << 16;
const BATCHED_SET_MAX_EXP: u32 = 8;
const BATCHED_SET_MASK: u32 = 0x3FF;
// Decode (1, 16 tokens), a prefill chunk (256, 4096) and large batches (16384, 65536).
const ROUTE_TOKENS: [u64; 6] = [1, 16, 256, 4096, 16384, 65536];

/// Every workload of the issue, in table order.
pub fn all() -> Vec<Workload> {
    let mut v = Vec::new();
    let mut add = |id: String, label: String, kind: Kind, seed: u64| {
        // 2^28-key inputs are 1 GiB: fewer runs keep the whole benchmark inside its time budget,
        // and at that size the run-to-run spread is small.
        let big = input_bytes(&kind) >= (1 << 30);
        v.push(Workload {
            id,
            label,
            kind,
            seed,
            warmup: if big { 2 } else { 3 },
            reps: if big { 20 } else { 25 },
        });
    };
    for (lg, seed) in [(24u32, 101u64), (28, 102)] {
        for k in [8u64, 1024, 16384] {
            add(
                format!("topk_n2^{lg}_k{k}"),
                format!("top-k N=2^{lg} k={k}"),
                Kind::TopK { n: 1 << lg, k },
                seed,
            );
        }
    }
    // Seeds 201-205, then the sparse-attention indexer's shapes at serving batch sizes: uniform
    // rows, one long row, ascending, bf16, ragged and tie-heavy rows (206-211, 214: the first seed
    // from 212 whose every row has the k-th key's tie class straddling k, as the selftest checks).
    for (segments, len, k, rows, seed) in [
        (4096u64, 64u64, 6u64, Rows::Random, 201u64),
        (16384, 256, 8, Rows::Random, 202),
        (65536, 256, 8, Rows::Random, 203),
        (64, 131072, 2048, Rows::Random, 204),
        (256, 32768, 2048, Rows::Random, 205),
        (256, 131072, 2048, Rows::Random, 207),
        (1024, 131072, 2048, Rows::Random, 208),
        (1, 1 << 20, 2048, Rows::Random, 209),
        (64, 131072, 2048, Rows::Ascending, 206),
        (4, 65536, 512, Rows::Bf16, 210),
        (64, 131072, 2048, Rows::Ragged, 211),
        (64, 131072, 2048, Rows::Ties, 214),
    ] {
        let (suffix, what) = match rows {
            Rows::Random => ("", ""),
            Rows::Ascending => ("_ascending", ", ascending rows"),
            Rows::Bf16 => ("_bf16", " bf16"),
            Rows::Ragged => ("_ragged", ", ragged rows (lengths on the device)"),
            Rows::Ties => ("_ties", ", tie-heavy rows (index sets checked)"),
        };
        add(
            format!("batched_{segments}x{len}_k{k}{suffix}"),
            format!("batched top-k [{segments}x{len}] k={k}{what}"),
            Kind::Batched {
                segments,
                len,
                k,
                rows,
            },
            seed,
        );
    }
    for (i, (segments, len)) in [(16384u64, 1024u64), (262144, 64), (1024, 16384)]
        .into_iter()
        .enumerate()
    {
        add(
            format!("segsort_{segments}x{len}"),
            format!("segmented sort [{segments}x{len}]"),
            Kind::SegSort { segments, len },
            301 + i as u64,
        );
    }
    add(
        format!("segsort_powerlaw_{POWERLAW_SEGMENTS}"),
        format!("segmented sort, power-law lengths ({POWERLAW_SEGMENTS} segments, 1..2^17)"),
        Kind::SegSortPowerLaw {
            segments: POWERLAW_SEGMENTS,
            max_exp: POWERLAW_MAX_EXP,
        },
        304,
    );
    let (segments, len) = (16384u64, 1024u64);
    add(
        format!("segsort_pairs_{segments}x{len}"),
        format!("segmented sort pairs [{segments}x{len}]"),
        Kind::SegSortCarry {
            segments,
            len,
            carry: Carry::Values,
        },
        305,
    );
    add(
        format!("segsort_argsort_{segments}x{len}"),
        format!("segmented argsort [{segments}x{len}] (stable)"),
        Kind::SegSortCarry {
            segments,
            len,
            carry: Carry::Indices,
        },
        306,
    );
    for (keys, seed) in [
        (LocalityKeys::Near { range: 25 }, 501u64),
        (LocalityKeys::Near { range: 1000 }, 502),
        (LocalityKeys::Random, 503),
    ] {
        let (id, what) = match keys {
            LocalityKeys::Near { range } => (
                format!("locality_rand{range}"),
                format!("keys[i] = i + rand(0, {range})"),
            ),
            LocalityKeys::Random => ("locality_random".to_owned(), "random keys".to_owned()),
        };
        add(
            id,
            format!("locality sort 2^{LOCALITY_LOG2} i32, {what}"),
            Kind::Locality {
                n: 1 << LOCALITY_LOG2,
                keys,
            },
            seed,
        );
    }
    for (dist, mask, seed) in [("sparse", SPARSE_MASK, 401u64), ("dups", DUP_MASK, 403)] {
        for op in [
            SetOp::Intersection,
            SetOp::Union,
            SetOp::Difference,
            SetOp::SymmetricDifference,
        ] {
            let what = if dist == "sparse" {
                "sparse keys"
            } else {
                "heavy duplicates"
            };
            add(
                format!("{}_{dist}", op.plan_kind()),
                format!("{} 2x2^24 int32, {what}", op.label()),
                Kind::Set {
                    op,
                    n: 1 << 24,
                    mask,
                },
                seed,
            );
        }
    }
    // std::merge on the sparse set rows' inputs (the same seed, so the CPU reference reuses their
    // sorted keys).
    let op = SetOp::Merge;
    add(
        format!("{}_sparse", op.plan_kind()),
        format!("{} 2x2^24 int32, sparse keys", op.label()),
        Kind::Set {
            op,
            n: 1 << 24,
            mask: SPARSE_MASK,
        },
        401,
    );
    let op = SetOp::Intersection;
    add(
        op.batched_plan_kind().to_owned(),
        format!(
            "batched {} 2^16 pairs u32, lengths 1..2^{}",
            op.label(),
            BATCHED_SET_MAX_EXP + 1
        ),
        Kind::BatchedSet {
            op,
            pairs: BATCHED_SET_PAIRS,
            max_exp: BATCHED_SET_MAX_EXP,
            mask: BATCHED_SET_MASK,
        },
        601,
    );
    for (router, short, what, seed) in [
        (Router::DeepSeekV3, "v3", "DeepSeek-V3", 701u64),
        (Router::Softmax, "softmax", "softmax", 711),
    ] {
        for (i, tokens) in ROUTE_TOKENS.into_iter().enumerate() {
            add(
                format!("route_{short}_t{tokens}"),
                format!("routing {what} [{tokens}x{ROUTE_EXPERTS}] k={ROUTE_K}"),
                Kind::Route { router, tokens },
                seed + i as u64,
            );
        }
    }
    v
}

/// Bytes of input one run reads (one copy of the input).
pub fn input_bytes(kind: &Kind) -> u64 {
    match *kind {
        Kind::TopK { n, .. } => 4 * n,
        Kind::Batched {
            segments,
            len,
            rows,
            ..
        } => rows.key_bytes() * segments * len,
        Kind::SegSort { segments, len } => 4 * segments * len,
        // keys, and for pairs the u32 values (argsort reads only the keys)
        Kind::SegSortCarry {
            segments,
            len,
            carry,
        } => match carry {
            Carry::Values => 8 * segments * len,
            Carry::Indices => 4 * segments * len,
        },
        Kind::Locality { n, .. } => 4 * n,
        Kind::SegSortPowerLaw { segments, max_exp } => {
            // Lengths depend on the seed; this bound is only used to choose rotations, and
            // power-law inputs (~64 MiB) are far above L2 either way.
            4 * segments * (1u64 << (max_exp + 1))
        }
        Kind::Set { n, .. } => 8 * n,
        // As for the power-law segmented sort: a bound (the keys of both sides at the longest
        // lengths, and both offset arrays).
        Kind::BatchedSet { pairs, max_exp, .. } => {
            8 * pairs * (1u64 << (max_exp + 1)) + 16 * (pairs + 1)
        }
        // the logits (the bias, 1 KiB, is one copy for all rotations)
        Kind::Route { tokens, .. } => 4 * tokens * ROUTE_EXPERTS,
    }
}

/// The segment offsets (length pairs + 1 each) of a batched set operation's A and B.
pub fn batched_set_offsets(seed: u64, pairs: u64, max_exp: u32) -> [Vec<u64>; 2] {
    [
        gen::powerlaw_offsets(seed, pairs, max_exp),
        gen::powerlaw_offsets(seed + 1, pairs, max_exp),
    ]
}

/// The key counts of a batched set operation's A and B.
fn batched_set_lens(seed: u64, pairs: u64, max_exp: u32) -> [u64; 2] {
    batched_set_offsets(seed, pairs, max_exp).map(|off| *off.last().unwrap_or(&0))
}

impl Workload {
    /// How many identical copies of the input the runs rotate through: inputs that fit in L2 are
    /// rotated over enough copies to cover 3x the L2 size, so no run starts with its input warm
    /// in L2 from the previous one; larger inputs use one copy.
    pub fn rotations(&self, l2_bytes: u64) -> usize {
        let b = match self.kind {
            Kind::SegSortPowerLaw { segments, max_exp } => {
                4 * *gen::powerlaw_offsets(self.seed, segments, max_exp)
                    .last()
                    .unwrap_or(&0)
            }
            Kind::BatchedSet { pairs, max_exp, .. } => {
                let [na, nb] = batched_set_lens(self.seed, pairs, max_exp);
                4 * (na + nb) + 16 * (pairs + 1)
            }
            k => input_bytes(&k),
        };
        if b == 0 || b > l2_bytes {
            1
        } else {
            (3 * l2_bytes).div_ceil(b).clamp(1, 256) as usize
        }
    }

    /// Bytes that must move at least: every input key read once, every output key written once.
    /// `out_len` is the output length from the CPU reference (it matters for the set operations,
    /// whose output size depends on the data).
    pub fn floor_bytes(&self, out_len: u64) -> u64 {
        match self.kind {
            // keys read + k keys written (keys only: indices are not part of this workload)
            Kind::TopK { n, k } => 4 * n + 4 * k,
            // all keys read + k keys per row written; ragged rows: each row's keys and its
            // length (an i64, as oxicub takes it) read
            Kind::Batched {
                segments,
                len,
                k,
                rows: Rows::Ragged,
            } => {
                4 * ragged_lens(self.seed, segments, len, k).iter().sum::<u64>()
                    + 8 * segments
                    + 4 * segments * k
            }
            // tie-heavy rows: their u32 indices written too
            Kind::Batched {
                segments,
                len,
                k,
                rows: Rows::Ties,
            } => 4 * segments * len + 8 * segments * k,
            Kind::Batched {
                segments,
                len,
                k,
                rows,
            } => rows.key_bytes() * (segments * len + segments * k),
            // every key read and written once (uniform rows need no offsets array)
            Kind::SegSort { segments, len } => 8 * segments * len,
            // every key read and written once + the int64 segment offsets read once
            Kind::SegSortPowerLaw { segments, .. } => 8 * out_len + 8 * (segments + 1),
            // pairs: every key and u32 value read and written once; argsort: every key read,
            // every key and its 8-byte index written
            Kind::SegSortCarry {
                segments,
                len,
                carry,
            } => match carry {
                Carry::Values => 16 * segments * len,
                Carry::Indices => (4 + 4 + 8) * segments * len,
            },
            // every key read and written once
            Kind::Locality { n, .. } => 8 * n,
            // both inputs read + the output written
            Kind::Set { n, .. } => 8 * n + 4 * out_len,
            // both inputs' keys and int64 offsets (pairs + 1 each) read, the output keys and
            // their pairs + 1 int64 offsets written
            Kind::BatchedSet { pairs, max_exp, .. } => {
                let [na, nb] = batched_set_lens(self.seed, pairs, max_exp);
                4 * (na + nb) + 2 * 8 * (pairs + 1) + 4 * out_len + 8 * (pairs + 1)
            }
            // the logits (and DeepSeek-V3's f32 bias) read, k int32 ids and k f32 weights per
            // token written
            Kind::Route { router, tokens } => {
                let bias = if router.has_bias() {
                    4 * ROUTE_EXPERTS
                } else {
                    0
                };
                4 * tokens * ROUTE_EXPERTS + bias + 8 * tokens * ROUTE_K
            }
        }
    }

    /// The plan line the peers execute: name kind seed p1 p2 p3 warmup reps rotations.
    pub fn plan_line(&self, rotations: usize) -> String {
        let (kind, p1, p2, p3) = match self.kind {
            Kind::TopK { n, k } => ("topk", n, k, 0),
            Kind::Batched {
                segments,
                len,
                k,
                rows,
            } => match rows {
                Rows::Random => ("batched", segments, len, k),
                Rows::Ascending => ("batched_ramp", segments, len, k),
                Rows::Bf16 => ("batched_bf16", segments, len, k),
                Rows::Ragged => ("batched_ragged", segments, len, k),
                Rows::Ties => ("batched_ties", segments, len, k),
            },
            Kind::SegSort { segments, len } => ("segsort", segments, len, 0),
            Kind::SegSortPowerLaw { segments, max_exp } => {
                ("segsort_pl", segments, u64::from(max_exp), 0)
            }
            Kind::SegSortCarry {
                segments,
                len,
                carry,
            } => match carry {
                Carry::Values => ("segsort_pairs", segments, len, 0),
                Carry::Indices => ("segsort_argsort", segments, len, 0),
            },
            Kind::Locality { n, keys } => match keys {
                LocalityKeys::Near { range } => ("locality_near", n, u64::from(range), 0),
                LocalityKeys::Random => ("locality_random", n, 0, 0),
            },
            Kind::Set { op, n, mask } => (op.plan_kind(), n, u64::from(mask), 0),
            Kind::BatchedSet {
                op,
                pairs,
                max_exp,
                mask,
            } => (
                op.batched_plan_kind(),
                pairs,
                u64::from(max_exp),
                u64::from(mask),
            ),
            Kind::Route { router, tokens } => (router.plan_kind(), tokens, ROUTE_EXPERTS, ROUTE_K),
        };
        format!(
            "{} {} {} {} {} {} {} {} {}",
            self.id, kind, self.seed, p1, p2, p3, self.warmup, self.reps, rotations
        )
    }
}

/// The CPU reference of a workload: the canonical output's digest and length.
#[derive(Clone, Copy, Debug)]
pub struct Reference {
    pub digest: Digest,
    pub out_len: u64,
    /// The tie-heavy rows' other digests (`digest` is their `smaller`), for judging peers.
    pub ties: Option<TieDigests>,
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Splits [0, n) into contiguous ranges, one per thread, runs `f(start, end)` on each in
/// parallel and returns the results in range order.
fn par_ranges<R: Send>(n: u64, f: impl Fn(u64, u64) -> R + Sync) -> Vec<R> {
    let t = (threads() as u64).clamp(1, n.max(1));
    let chunk = n.div_ceil(t);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..t)
            .map(|i| {
                let (a, b) = ((i * chunk).min(n), ((i + 1) * chunk).min(n));
                let f = &f;
                s.spawn(move || f(a, b))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r,
                Err(p) => std::panic::resume_unwind(p),
            })
            .collect()
    })
}

/// Sorted set-operation inputs, shared by the rows on the same keys.
#[derive(Default)]
pub struct RefCache {
    sorted: HashMap<(u64, u64, u32), Arc<Vec<u32>>>,
}

impl RefCache {
    fn sorted_keys(&mut self, seed: u64, n: u64, mask: u32) -> Arc<Vec<u32>> {
        self.sorted
            .entry((seed, n, mask))
            .or_insert_with(|| {
                let parts = par_ranges(n, |a, b| {
                    let mut v: Vec<u32> = (a..b).map(|i| gen::u32_at(seed, i, mask)).collect();
                    v.sort_unstable();
                    v
                });
                Arc::new(merge_sorted_runs(parts))
            })
            .clone()
    }
}

/// Merges sorted runs pairwise (in parallel per level) into one sorted vector.
fn merge_sorted_runs<T: Ord + Copy + Send>(mut runs: Vec<Vec<T>>) -> Vec<T> {
    while runs.len() > 1 {
        let mut pairs = Vec::new();
        let mut it = runs.into_iter();
        while let Some(a) = it.next() {
            pairs.push((a, it.next().unwrap_or_default()));
        }
        runs = std::thread::scope(|s| {
            let hs: Vec<_> = pairs
                .into_iter()
                .map(|(a, b)| s.spawn(move || merge_two(&a, &b)))
                .collect();
            hs.into_iter()
                .map(|h| match h.join() {
                    Ok(r) => r,
                    Err(p) => std::panic::resume_unwind(p),
                })
                .collect()
        });
    }
    runs.pop().unwrap_or_default()
}

/// std::merge: stable, `a`'s keys first among equal keys.
fn merge_two<T: Ord + Copy>(a: &[T], b: &[T]) -> Vec<T> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if b[j] < a[i] {
            out.push(b[j]);
            j += 1;
        } else {
            out.push(a[i]);
            i += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// The k largest f32 keys (as bits; keys are non-negative so bits order like values) of stream
/// `seed`, positions [a, b), in descending order.
fn top_bits(seed: u64, a: u64, b: u64, k: usize) -> Vec<u32> {
    let mut heap: BinaryHeap<Reverse<u32>> = BinaryHeap::with_capacity(k + 1);
    for i in a..b {
        let x = gen::f32_bits_at(seed, i);
        if heap.len() < k {
            heap.push(Reverse(x));
        } else if heap.peek().is_some_and(|m| x > m.0) {
            heap.pop();
            heap.push(Reverse(x));
        }
    }
    let mut v: Vec<u32> = heap.into_iter().map(|r| r.0).collect();
    v.sort_unstable_by(|x, y| y.cmp(x));
    v
}

/// Canonical outputs (see the digest in gen.rs):
/// - top-k: the k selected keys sorted descending (per row, rows in order, for batched);
/// - sorts: the whole sorted output;
/// - sorts with values (pairs, argsort): the sorted keys, then their values (gen.rs: `Digest`);
/// - set operations and merge: the output keys, in order;
/// - batched set operations: the output keys (pair after pair), then the pairs + 1 int64 output
///   offsets (where each pair's keys begin), so a result split wrongly between pairs fails;
/// - routing: each token's k expert ids sorted ascending, token after token (the ids' order and
///   the weights are not compared: implementations order the ids differently).
pub fn cpu_reference(w: &Workload, cache: &mut RefCache) -> Reference {
    let seed = w.seed;
    match w.kind {
        Kind::TopK { n, k } => {
            let parts = par_ranges(n, |a, b| top_bits(seed, a, b, k as usize));
            let mut all: Vec<u32> = parts.into_iter().flatten().collect();
            all.sort_unstable_by(|x, y| y.cmp(x));
            all.truncate(k as usize);
            Reference {
                digest: Digest::of_words(&all),
                out_len: k,
                ties: None,
            }
        }
        Kind::Batched {
            segments,
            len,
            k,
            rows,
        } => {
            if rows == Rows::Ties {
                return ties_reference(seed, segments, len, k);
            }
            // Every key's bits order like its value: the keys are non-negative.
            let key = |i: u64| match rows {
                Rows::Random | Rows::Ragged => gen::f32_bits_at(seed, i),
                Rows::Ascending => gen::ramp_bits_at(seed, i, len),
                Rows::Bf16 => u32::from(gen::bf16_bits_at(seed, i)),
                Rows::Ties => gen::tie_bits_at(seed, i),
            };
            let row_len = |s: u64| match rows {
                Rows::Ragged => u64::from(gen::ragged_len(seed, s, len as u32, k as u32)),
                _ => len,
            };
            let parts = par_ranges(segments, |a, b| {
                let mut d = Digest::default();
                let mut row = Vec::with_capacity(len as usize);
                for s in a..b {
                    row.clear();
                    row.extend((0..row_len(s)).map(|j| key(s * len + j)));
                    row.select_nth_unstable_by(k as usize - 1, |x, y| y.cmp(x));
                    let top = &mut row[..k as usize];
                    top.sort_unstable_by(|x, y| y.cmp(x));
                    d = d.add(Digest::of_words_at(s * k, top));
                }
                d
            });
            Reference {
                digest: parts.into_iter().fold(Digest::default(), Digest::add),
                out_len: segments * k,
                ties: None,
            }
        }
        Kind::SegSort { segments, len } => {
            let off: Vec<u64> = (0..=segments).map(|s| s * len).collect();
            segsort_reference(seed, &off)
        }
        Kind::SegSortPowerLaw { segments, max_exp } => {
            let off = gen::powerlaw_offsets(seed, segments, max_exp);
            segsort_reference(seed, &off)
        }
        Kind::SegSortCarry {
            segments,
            len,
            carry,
        } => segsort_carry_reference(seed, segments, len, carry),
        Kind::Locality { n, keys } => locality_reference(seed, n, keys),
        Kind::Set { op, n, mask } => {
            let a = cache.sorted_keys(seed, n, mask);
            let b = cache.sorted_keys(seed + 1, n, mask);
            let out = set_op(op, &a, &b);
            Reference {
                digest: Digest::of_words(&out),
                out_len: out.len() as u64,
                ties: None,
            }
        }
        Kind::BatchedSet {
            op,
            pairs,
            max_exp,
            mask,
        } => batched_set_reference(op, seed, pairs, max_exp, mask),
        Kind::Route { router, tokens } => {
            let parts = par_ranges(tokens, |a, b| {
                let mut d = Digest::default();
                let mut logits = vec![0f32; ROUTE_EXPERTS as usize];
                for t in a..b {
                    route_logits(seed, t, &mut logits);
                    let ids = route_ids(router, &logits).ids;
                    d = d.add(Digest::of_words_at(t * ROUTE_K, &ids));
                }
                d
            });
            Reference {
                digest: parts.into_iter().fold(Digest::default(), Digest::add),
                out_len: tokens * ROUTE_K,
                ties: None,
            }
        }
    }
}

/// The tie-heavy rows' reference: each row's k best keys sorted descending (rows in order),
/// then each row's selected indices sorted ascending (rows in order), ties at the k-th key
/// broken toward the smaller index (common.cuh: `digest_ties`).
fn ties_reference(seed: u64, segments: u64, len: u64, k: u64) -> Reference {
    let ties = ties_digests(seed, segments, len, k);
    Reference {
        digest: ties.smaller,
        out_len: segments * k,
        ties: Some(ties),
    }
}

/// The tie-heavy rows' digests (each row's k keys sorted descending, rows in order, then for
/// the index sets each row's indices sorted ascending).
#[derive(Clone, Copy, Debug)]
pub struct TieDigests {
    /// Keys then index sets, ties at the k-th key to the smaller index: the reference.
    pub smaller: Digest,
    /// The same with ties to the larger index: the answer of a peer that asks for that.
    pub larger: Digest,
    /// The keys alone, which tells a selection that broke the ties otherwise from one that
    /// lost candidates.
    pub keys: Digest,
}

/// See [`TieDigests`].
pub fn ties_digests(seed: u64, segments: u64, len: u64, k: u64) -> TieDigests {
    let rows = par_ranges(segments, |a, b| {
        let mut out = Vec::new();
        let mut row: Vec<(u32, u32)> = Vec::with_capacity(len as usize);
        for s in a..b {
            row.clear();
            row.extend((0..len).map(|j| (gen::tie_bits_at(seed, s * len + j), j as u32)));
            let mut sets = [Vec::new(), Vec::new()];
            for (set, larger) in sets.iter_mut().zip([false, true]) {
                row.sort_unstable_by(|x, y| {
                    let by_index = if larger { y.1.cmp(&x.1) } else { x.1.cmp(&y.1) };
                    y.0.cmp(&x.0).then(by_index)
                });
                *set = row[..k as usize].iter().map(|p| p.1).collect();
            }
            // The row is sorted by key, descending: so are its first k keys.
            let keys: Vec<u32> = row[..k as usize].iter().map(|p| p.0).collect();
            out.push((keys, sets));
        }
        out
    });
    let rows: Vec<(Vec<u32>, [Vec<u32>; 2])> = rows.into_iter().flatten().collect();
    let keys: Vec<u32> = rows.iter().flat_map(|r| r.0.iter().copied()).collect();
    let sets = |i: usize| rows.iter().flat_map(|r| r.1[i].iter().copied()).collect();
    TieDigests {
        smaller: keys_then_index_sets(keys.clone(), sets(0), k),
        larger: keys_then_index_sets(keys.clone(), sets(1), k),
        keys: Digest::of_words(&keys),
    }
}

/// The digest of a tie-heavy result (common.cuh: `digest_ties`): each row's `k` keys sorted
/// descending (their bits: the keys are non-negative), rows in order, then each row's `k`
/// indices sorted ascending, rows in order.
pub fn keys_then_index_sets(mut keys: Vec<u32>, mut indices: Vec<u32>, k: u64) -> Digest {
    for row in keys.chunks_mut(k as usize) {
        row.sort_unstable_by(|a, b| b.cmp(a));
    }
    for row in indices.chunks_mut(k as usize) {
        row.sort_unstable();
    }
    keys.extend(indices);
    Digest::of_words(&keys)
}

/// Token `token`'s logits (gen.cuh: `oxb_route_logit`) into `out` (ROUTE_EXPERTS values).
pub fn route_logits(seed: u64, token: u64, out: &mut [f32]) {
    for (e, x) in out.iter_mut().enumerate() {
        *x = gen::route_logit(seed, token, e as u32, ROUTE_EXPERTS as u32);
    }
}

/// One token's routing in f64, and how close it came to another answer.
pub struct Routed {
    /// The k expert ids, ascending (the canonical form).
    pub ids: Vec<u32>,
    /// The score of the last kept group minus the best dropped one's, relative to the first
    /// (DeepSeek-V3; infinite for softmax): the room an implementation's rounding has before it
    /// keeps another group.
    pub group_margin: f64,
    /// The k-th best candidate's ranking score minus the next one's, relative to the first.
    pub expert_margin: f64,
}

/// The indices of the `n` largest of `v`, best first (ties to the smaller index; the
/// generator makes none).
fn best(v: &[f64], n: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[b].total_cmp(&v[a]).then(a.cmp(&b)));
    idx.truncate(n);
    idx
}

/// A router's ids from one token's logits, in f64 and step by step as the model code writes
/// them (f64 is enough: the generator's logits leave the answer unambiguous, see `Routed`'s
/// margins and the selftest). The bias is all zeros, so DeepSeek-V3's biased scores are its
/// scores.
pub fn route_ids(router: Router, logits: &[f32]) -> Routed {
    let k = ROUTE_K as usize;
    let x: Vec<f64> = logits.iter().map(|&l| f64::from(l)).collect();
    let (choice, group_margin) = match router {
        Router::DeepSeekV3 => {
            let s: Vec<f64> = x.iter().map(|&x| 1.0 / (1.0 + (-x).exp())).collect();
            let per_group = s.len() / V3_GROUPS as usize;
            let group_scores: Vec<f64> = s
                .chunks(per_group)
                .map(|g| best(g, 2).iter().map(|&i| g[i]).sum())
                .collect();
            let ranked = best(&group_scores, group_scores.len());
            let kept = V3_TOP_GROUPS as usize;
            let last = group_scores[ranked[kept - 1]];
            let margin = (last - group_scores[ranked[kept]]) / last;
            let mut choice = vec![f64::NEG_INFINITY; s.len()];
            for &g in &ranked[..kept] {
                let r = g * per_group..(g + 1) * per_group;
                choice[r.clone()].copy_from_slice(&s[r]);
            }
            (choice, margin)
        }
        Router::Softmax => {
            let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = x.iter().map(|&x| (x - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            (e.iter().map(|&e| e / sum).collect(), f64::INFINITY)
        }
    };
    let ranked = best(&choice, k + 1);
    let mut ids: Vec<u32> = ranked[..k].iter().map(|&i| i as u32).collect();
    ids.sort_unstable();
    Routed {
        ids,
        group_margin,
        expert_margin: (choice[ranked[k - 1]] - choice[ranked[k]]) / choice[ranked[k - 1]],
    }
}

/// Each pair's segments of A and B sorted, then `set_op` on them, the pairs' results one after
/// another, then their offsets.
fn batched_set_reference(op: SetOp, seed: u64, pairs: u64, max_exp: u32, mask: u32) -> Reference {
    let [a_off, b_off] = batched_set_offsets(seed, pairs, max_exp);
    let segment = |off: &[u64], key_seed: u64, p: u64| {
        let (lo, hi) = (off[p as usize], off[p as usize + 1]);
        let mut v: Vec<u32> = (lo..hi).map(|i| gen::u32_at(key_seed, i, mask)).collect();
        v.sort_unstable();
        v
    };
    let parts = par_ranges(pairs, |lo, hi| {
        let mut keys = Vec::new();
        let mut lens = Vec::with_capacity((hi - lo) as usize);
        for p in lo..hi {
            let (a, b) = (segment(&a_off, seed + 2, p), segment(&b_off, seed + 3, p));
            let out = set_op(op, &a, &b);
            lens.push(out.len() as i64);
            keys.extend_from_slice(&out);
        }
        (keys, lens)
    });
    let mut keys = Vec::new();
    let mut offsets = vec![0i64];
    for (k, lens) in parts {
        keys.extend_from_slice(&k);
        for len in lens {
            offsets.push(offsets[offsets.len() - 1] + len);
        }
    }
    let out_len = keys.len() as u64;
    Reference {
        digest: Digest::of_words(&keys).add(Digest::of_i64_at(out_len, &offsets)),
        out_len,
        ties: None,
    }
}

/// Input key i of a segmented sort is f32 value i of the stream; segment s is [off[s], off[s+1]).
fn segsort_reference(seed: u64, off: &[u64]) -> Reference {
    let segments = off.len() as u64 - 1;
    let parts = par_ranges(segments, |a, b| {
        let mut d = Digest::default();
        let mut seg = Vec::new();
        for s in a..b {
            let (lo, hi) = (off[s as usize], off[s as usize + 1]);
            seg.clear();
            seg.extend((lo..hi).map(|i| gen::f32_bits_at(seed, i)));
            seg.sort_unstable();
            d = d.add(Digest::of_words_at(lo, &seg));
        }
        d
    });
    Reference {
        digest: parts.into_iter().fold(Digest::default(), Digest::add),
        out_len: *off.last().unwrap_or(&0),
        ties: None,
    }
}

/// Rows of `len` keys (key i is f32 value i of the stream), each sorted stably with its values:
/// the keys at [0, n), then the values from word n (gen.rs: `Digest`). A stable sort of
/// (key, position) pairs is a sort by (key, position), since the positions rise along a row.
fn segsort_carry_reference(seed: u64, segments: u64, len: u64, carry: Carry) -> Reference {
    let n = segments * len;
    let parts = par_ranges(segments, |a, b| {
        let mut d = Digest::default();
        let mut row: Vec<(u32, u32)> = Vec::with_capacity(len as usize);
        let mut keys = Vec::with_capacity(len as usize);
        let mut positions = Vec::with_capacity(len as usize);
        let mut indices = Vec::with_capacity(len as usize);
        for s in a..b {
            let lo = s * len;
            row.clear();
            row.extend((0..len).map(|j| (gen::f32_bits_at(seed, lo + j), j as u32)));
            row.sort_unstable();
            keys.clear();
            keys.extend(row.iter().map(|&(k, _)| k));
            d = d.add(Digest::of_words_at(lo, &keys));
            match carry {
                Carry::Values => {
                    positions.clear();
                    positions.extend(row.iter().map(|&(_, j)| (lo + u64::from(j)) as u32));
                    d = d.add(Digest::of_words_at(n + lo, &positions));
                }
                Carry::Indices => {
                    indices.clear();
                    indices.extend(row.iter().map(|&(_, j)| i64::from(j)));
                    d = d.add(Digest::of_i64_at(n + 2 * lo, &indices));
                }
            }
        }
        d
    });
    Reference {
        digest: parts.into_iter().fold(Digest::default(), Digest::add),
        out_len: n,
        ties: None,
    }
}

/// Key i of a locality sort input (gen.cuh: `oxb_near_i32`, or `oxb_u32` reinterpreted).
pub fn locality_key(seed: u64, i: u64, keys: LocalityKeys) -> i32 {
    match keys {
        LocalityKeys::Near { range } => gen::near_i32_at(seed, i, range),
        LocalityKeys::Random => gen::i32_at(seed, i),
    }
}

/// The n int32 keys sorted ascending (signed), digested as their 32-bit words.
fn locality_reference(seed: u64, n: u64, keys: LocalityKeys) -> Reference {
    let parts = par_ranges(n, |a, b| {
        let mut v: Vec<i32> = (a..b).map(|i| locality_key(seed, i, keys)).collect();
        v.sort_unstable();
        v
    });
    let sorted = merge_sorted_runs(parts);
    let digests = par_ranges(n, |a, b| {
        let words: Vec<u32> = sorted[a as usize..b as usize]
            .iter()
            .map(|&k| k as u32)
            .collect();
        Digest::of_words_at(a, &words)
    });
    Reference {
        digest: digests.into_iter().fold(Digest::default(), Digest::add),
        out_len: n,
        ties: None,
    }
}

/// std::set_* semantics on sorted multisets: each element of one input matches at most one
/// equal element of the other, so a key held a times in A and b times in B appears min(a,b),
/// max(a,b), max(a-b,0) or |a-b| times; std::merge keeps all a+b, A's first.
pub fn set_op(op: SetOp, a: &[u32], b: &[u32]) -> Vec<u32> {
    if op == SetOp::Merge {
        return merge_two(a, b);
    }
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] < b[j] {
            if matches!(
                op,
                SetOp::Union | SetOp::Difference | SetOp::SymmetricDifference
            ) {
                out.push(a[i]);
            }
            i += 1;
        } else if b[j] < a[i] {
            if matches!(op, SetOp::Union | SetOp::SymmetricDifference) {
                out.push(b[j]);
            }
            j += 1;
        } else {
            if matches!(op, SetOp::Intersection | SetOp::Union) {
                out.push(a[i]);
            }
            i += 1;
            j += 1;
        }
    }
    if matches!(
        op,
        SetOp::Union | SetOp::Difference | SetOp::SymmetricDifference
    ) {
        out.extend_from_slice(&a[i..]);
    }
    if matches!(op, SetOp::Union | SetOp::SymmetricDifference) {
        out.extend_from_slice(&b[j..]);
    }
    out
}
