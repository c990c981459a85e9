//! Sharded top-k's tests: the single-device answer on the whole rows (the oracle every rank's
//! result must equal), and one rank's shard of row-major rows.

use oxicub_algorithms::{batched_topk, radix::RadixKey, Host};
use oxicub_env::{tie_break, Env};
use oxicub_kernels::RadixBits;
use oxicub_params::{direction, k, num_segments, segment_size, SelectDirection};

/// The top `min(k, total)` of each of `rows` rows of `total` keys (row-major `keys`) with their
/// indices in the row, from the host's single-device batched top-k under the default contract
/// (or with ties to the larger index): what every rank of a sharded call must return.
pub fn whole_rows_topk<K: RadixKey>(
    keys: &[K],
    rows: usize,
    total: usize,
    kk: i64,
    dir: SelectDirection,
    prefer_larger: bool,
) -> (Vec<K>, Vec<u32>) {
    let written = (kk.max(0) as usize).min(total);
    let zero = K::from_bits(Default::default());
    let (mut top, mut at) = (vec![zero; rows * written], vec![0u32; rows * written]);
    if written == 0 {
        return (top, at);
    }
    let problem = batched_topk::Problem::strided(
        total,
        segment_size::uniform(total as i64).expect("a row length"),
        k::uniform(kk).expect("k"),
        direction::Choice::<direction::Either>::new(dir).expect("a direction"),
        num_segments::uniform(rows as i64).expect("rows"),
    )
    .out_stride(written);
    let host = Host::new();
    let outcome = if prefer_larger {
        let env = Env::new().with(tie_break::PreferLargerIndex);
        batched_topk::select_indices(&host, &problem, keys, &mut top[..], &mut at[..], &env)
    } else {
        batched_topk::select_indices(
            &host,
            &problem,
            keys,
            &mut top[..],
            &mut at[..],
            &Env::new(),
        )
    };
    outcome
        .expect("the host call")
        .check()
        .expect("the host outcome");
    (top, at)
}

/// Columns `offset .. offset + len` of each of `rows` rows of `total` keys: one rank's shard.
pub fn shard_of<K: Copy>(
    keys: &[K],
    rows: usize,
    total: usize,
    offset: usize,
    len: usize,
) -> Vec<K> {
    (0..rows)
        .flat_map(|row| keys[row * total + offset..][..len].iter().copied())
        .collect()
}

/// The keys' bits, for comparing results bit for bit (NaN payloads, signed zeros).
pub fn bits<K: RadixKey>(keys: &[K]) -> Vec<u64> {
    keys.iter().map(|k| k.to_bits().to_u64()).collect()
}

/// The requirements a sharded test runs a call under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contract {
    /// The default: ties to the smaller index, stable sorted.
    Smaller,
    /// `PreferLargerIndex`.
    Larger,
    /// `NotGuaranteed` with `Unsorted`: any `k` items with the top keys, in any order.
    OptOutUnsorted,
    /// `NotGuaranteed` with `Sorted`.
    OptOutSorted,
}

impl Contract {
    /// Whether the contract pins the output bit for bit.
    pub fn pins_output(self) -> bool {
        matches!(self, Contract::Smaller | Contract::Larger)
    }
}

/// Checks one rank's result under `contract` against the pinned answer `want` of the same rows
/// (the default's, or `PreferLargerIndex`'s for [`Contract::Larger`]): bit for bit where the
/// contract pins the output, else with [`check_any_top_k`]. `case` names the call.
#[allow(clippy::too_many_arguments)]
pub fn check_rank_result<K: RadixKey>(
    contract: Contract,
    keys: &[K],
    rows: usize,
    total: usize,
    dir: SelectDirection,
    got: (&[K], &[u32]),
    want: (&[K], &[u32]),
    case: &str,
) {
    if contract.pins_output() {
        assert_eq!((bits(got.0), got.1), (bits(want.0), want.1), "{case}");
    } else {
        let sorted = contract == Contract::OptOutSorted;
        check_any_top_k(keys, rows, total, got, want, dir, sorted, case);
    }
}

/// Checks a result under an opted-out contract against the pinned answer `want` of the same
/// rows: each row holds keys with the same bits as the answer's (a multiset: ties may be other
/// items), at distinct indices in the row whose keys have those bits, in order when `sorted`.
/// For keys without NaN (all NaNs tie, with payloads of their own).
#[allow(clippy::too_many_arguments)]
pub fn check_any_top_k<K: RadixKey>(
    keys: &[K],
    rows: usize,
    total: usize,
    got: (&[K], &[u32]),
    want: (&[K], &[u32]),
    dir: SelectDirection,
    sorted: bool,
    what: &str,
) {
    let written = want.0.len() / rows.max(1);
    for row in 0..rows {
        let span = row * written..(row + 1) * written;
        let mut got_bits = bits(&got.0[span.clone()]);
        let mut want_bits = bits(&want.0[span.clone()]);
        if sorted {
            let codes: Vec<u64> = got.0[span.clone()]
                .iter()
                .map(|k| k.to_radix().to_u64())
                .collect();
            let ordered = codes.windows(2).all(|w| match dir {
                SelectDirection::Max => w[0] >= w[1],
                SelectDirection::Min => w[0] <= w[1],
            });
            assert!(ordered, "{what}: row {row} is not sorted: {codes:?}");
        }
        got_bits.sort_unstable();
        want_bits.sort_unstable();
        assert_eq!(got_bits, want_bits, "{what}: row {row} holds other keys");
        let indices = &got.1[span.clone()];
        let mut seen = indices.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(
            seen.len(),
            written,
            "{what}: row {row} repeats an index: {indices:?}"
        );
        for (slot, &index) in indices.iter().enumerate() {
            assert!(
                (index as usize) < total,
                "{what}: row {row} index {index} past the row"
            );
            assert_eq!(
                keys[row * total + index as usize].to_bits().to_u64(),
                got.0[span.start + slot].to_bits().to_u64(),
                "{what}: row {row} slot {slot}: the key at index {index} is another"
            );
        }
    }
}
