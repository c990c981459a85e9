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
