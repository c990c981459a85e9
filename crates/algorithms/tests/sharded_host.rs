//! Sharded top-k on simulated ranks (threads on the Host backend): every result equals the
//! single-device batched top-k of the concatenated rows, bit for bit, under every tie-break,
//! with ties straddling the shards, uneven and empty shards, `k` above a shard and above the
//! row, NaN and signed zeros; bad arguments on one rank are reported on every rank.

use oxicub::params::{direction, k, SelectDirection};
use oxicub::sharded::{self, Delivery, HostRank, HostRanks, Problem, Shards};
use oxicub::{Error, Host};
use oxicub_test::sharded::{check_rank_result, shard_of, whole_rows_topk as expected, Contract};
use oxicub_test::with_contract_env;

/// What one rank returns: its outputs, or its error (from agreement or the call).
type RankResult<K> = Result<(Vec<K>, Vec<u32>), Error>;

/// Runs `rows` rows of `row_len` keys (row-major `keys`) split as `lens` on simulated ranks;
/// `each` lets a test change one rank's arguments (its keys' length, its `k`).
fn run_sharded<K: oxicub::radix::RadixKey + PartialEq>(
    keys: &[K],
    rows: usize,
    lens: &[usize],
    dir: SelectDirection,
    contract_of: impl Fn(usize) -> Contract + Sync,
    delivery: Delivery,
    each: impl Fn(usize) -> (i64, usize) + Sync,
) -> Vec<RankResult<K>> {
    let shards = Shards::new(lens).expect("shards");
    let total = shards.total() as usize;
    let ranks = HostRanks::new(lens.len()).expect("ranks");
    let (each, contract_of) = (&each, &contract_of);
    std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|mut rank: HostRank| {
                let shards = shards.clone();
                scope.spawn(move || -> RankResult<K> {
                    let host = Host::new();
                    let r = rank.rank();
                    let (my_k, trim) = each(r);
                    let problem = Problem::<K, u32, _>::agree_delivering(
                        &host,
                        &mut rank,
                        shards.clone(),
                        rows,
                        k::uniform(my_k)?,
                        direction::Choice::<direction::Either>::new(dir)?,
                        delivery,
                    )?;
                    let (lo, len) = (shards.offset(r) as usize, shards.len(r));
                    let mut mine = shard_of(keys, rows, total, lo, len);
                    mine.truncate(mine.len().saturating_sub(trim));
                    let written = problem.written();
                    let poison = keys
                        .first()
                        .copied()
                        .unwrap_or_else(|| K::from_bits(Default::default()));
                    let (mut top, mut at) =
                        (vec![poison; rows * written], vec![u32::MAX; rows * written]);
                    let outcome = with_contract_env!(contract_of(r), |env| {
                        sharded::select_indices(
                            &host,
                            &problem,
                            &mine[..],
                            &mut top[..],
                            &mut at[..],
                            &env,
                        )?
                    });
                    outcome.check()?;
                    Ok((top, at))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no rank panics"))
            .collect()
    })
}

/// Every rank's result equals the single-device one, for both directions and tie-breaks (and
/// is a valid top-k, in order where required, under the opt-outs). Keys without NaN for the
/// opt-outs (`check_any_top_k`).
fn check_all<K: oxicub::radix::RadixKey + PartialEq>(
    keys: &[K],
    rows: usize,
    lens: &[usize],
    kk: i64,
    what: &str,
) {
    check_under(keys, rows, lens, kk, what, &CONTRACTS);
}

/// Every contract a test runs under.
const CONTRACTS: [Contract; 4] = [
    Contract::Smaller,
    Contract::Larger,
    Contract::OptOutUnsorted,
    Contract::OptOutSorted,
];

/// [`check_all`] under `contracts` only.
fn check_under<K: oxicub::radix::RadixKey + PartialEq>(
    keys: &[K],
    rows: usize,
    lens: &[usize],
    kk: i64,
    what: &str,
    contracts: &[Contract],
) {
    let total: usize = lens.iter().sum();
    for dir in [SelectDirection::Max, SelectDirection::Min] {
        for &contract in contracts {
            let larger = contract == Contract::Larger;
            let want = expected(keys, rows, total, kk, dir, larger);
            let got = run_sharded(
                keys,
                rows,
                lens,
                dir,
                |_| contract,
                Delivery::Everyone,
                |_| (kk, 0),
            );
            for (rank, result) in got.into_iter().enumerate() {
                let case =
                    format!("{what}: rank {rank}, {dir:?}, {contract:?}, lens {lens:?}, k {kk}");
                let (top, at) = result.unwrap_or_else(|e| panic!("{case}: {e}"));
                let (got, want) = ((&top[..], &at[..]), (&want.0[..], &want.1[..]));
                check_rank_result(contract, keys, rows, total, dir, got, want, &case);
            }
        }
    }
}

/// The shared deterministic generator, as a closure.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut rng = oxicub_test::SplitMix64::new(seed);
    move || rng.next_u64()
}

#[test]
fn random_rows_over_even_and_uneven_shards() {
    let mut next = rng(7);
    for (lens, rows, kk) in [
        (vec![64, 64], 3, 10),
        (vec![100, 37, 91], 4, 50),
        (vec![1, 200, 0, 55], 2, 64),
        (vec![300], 2, 17),
        (vec![16, 16, 16, 16, 16, 16, 16, 16], 5, 40),
    ] {
        let total: usize = lens.iter().sum();
        let keys: Vec<f32> = (0..rows * total)
            .map(|_| (next() % 10_000) as f32 / 7.0 - 500.0)
            .collect();
        check_all(&keys, rows, &lens, kk, "random f32");
    }
}

#[test]
fn ties_straddling_the_shards() {
    // Few distinct keys: the tie class at the k-th key spans every shard.
    let mut next = rng(11);
    for (lens, kk) in [
        (vec![40, 40, 40], 50),
        (vec![7, 90, 3], 20),
        (vec![33, 33], 33),
    ] {
        let total: usize = lens.iter().sum();
        let keys: Vec<i32> = (0..3 * total).map(|_| (next() % 4) as i32).collect();
        check_all(&keys, 3, &lens, kk, "ties");
    }
}

#[test]
fn all_equal_rows_keep_the_smallest_or_largest_global_indices() {
    let keys = vec![5u16; 2 * 90];
    check_all(&keys, 2, &[30, 30, 30], 40, "all equal");
    let got = run_sharded(
        &keys,
        2,
        &[30, 30, 30],
        SelectDirection::Max,
        |_| Contract::Smaller,
        Delivery::Everyone,
        |_| (40, 0),
    );
    let (_, at) = got[1].as_ref().expect("rank 1");
    assert_eq!(at[..40], (0..40).collect::<Vec<u32>>()[..]);
}

#[test]
fn nan_and_signed_zeros_rank_as_on_one_device() {
    let mut next = rng(3);
    let pool = [
        f64::NAN,
        -f64::NAN,
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.5,
        -1.5,
    ];
    let keys: Vec<f64> = (0..2 * 120).map(|_| pool[(next() % 8) as usize]).collect();
    // NaN payloads tie, so only the pinned contracts compare bits.
    let pinned = [Contract::Smaller, Contract::Larger];
    check_under(&keys, 2, &[50, 10, 60], 30, "nan and zeros", &pinned);
}

#[test]
fn k_at_the_edges() {
    let mut next = rng(5);
    let lens = [20, 5, 0, 12];
    let keys: Vec<u8> = (0..2 * 37).map(|_| (next() % 256) as u8).collect();
    for kk in [0, 1, 5, 6, 12, 20, 21, 36, 37, 38, 1000] {
        check_all(&keys, 2, &lens, kk, "k edges");
    }
}

#[test]
fn delivery_to_a_root_leaves_the_others_untouched() {
    let keys: Vec<u32> = (0..60).map(|i| (i * 7919) % 61).collect();
    let want = expected(&keys, 2, 30, 8, SelectDirection::Max, false);
    let got = run_sharded(
        &keys,
        2,
        &[10, 20],
        SelectDirection::Max,
        |_| Contract::Smaller,
        Delivery::Root(1),
        |_| (8, 0),
    );
    let (top0, at0) = got[0].as_ref().expect("rank 0");
    assert!(
        at0.iter().all(|&i| i == u32::MAX),
        "rank 0 is not the root: {at0:?}"
    );
    assert!(top0.iter().all(|&k| k == keys[0]));
    assert_eq!(got[1].as_ref().expect("rank 1"), &want);
}

#[test]
fn ranks_that_state_another_k_disagree_on_every_rank() {
    let keys = vec![1.0f32; 40];
    let got = run_sharded(
        &keys,
        1,
        &[20, 20],
        SelectDirection::Max,
        |_| Contract::Smaller,
        Delivery::Everyone,
        |r| (if r == 1 { 5 } else { 4 }, 0),
    );
    for (rank, result) in got.iter().enumerate() {
        match result {
            Err(Error::RanksDisagree {
                field: "k",
                rank: other,
                ..
            }) => {
                assert_eq!(*other, 1 - rank, "rank {rank} names the other rank");
            }
            other => panic!("rank {rank}: {other:?}"),
        }
    }
}

#[test]
fn a_rank_with_wrong_keys_fails_and_its_peers_report_it() {
    let keys = vec![2i64; 3 * 30];
    let got = run_sharded(
        &keys,
        3,
        &[10, 10, 10],
        SelectDirection::Min,
        |_| Contract::Smaller,
        Delivery::Everyone,
        |r| (4, usize::from(r == 2)),
    );
    assert!(
        matches!(got[2], Err(Error::LengthMismatch { arg: "keys", .. })),
        "{:?}",
        got[2]
    );
    for result in &got[..2] {
        assert!(
            matches!(result, Err(Error::PeerFailed { rank: 2 })),
            "{result:?}"
        );
    }
}

#[test]
fn shards_for_another_number_of_ranks_are_refused_on_every_rank() {
    let shards = Shards::new(&[4, 4, 4]).expect("shards");
    let ranks = HostRanks::new(2).expect("ranks");
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|mut rank| {
                let shards = shards.clone();
                scope.spawn(move || {
                    Problem::<u32, u32, _>::agree(
                        &Host::new(),
                        &mut rank,
                        shards,
                        1,
                        k::Static::<2>::new(),
                        direction::Max,
                    )
                    .map(|_| ())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    for result in results {
        assert!(
            matches!(result, Err(Error::InvalidArgument { arg: "shards", .. })),
            "{result:?}"
        );
    }
}

#[test]
fn ranks_under_other_requirements_are_reported() {
    let keys: Vec<u32> = (0..40).collect();
    let got = run_sharded(
        &keys,
        1,
        &[20, 20],
        SelectDirection::Max,
        |r| {
            if r == 0 {
                Contract::Smaller
            } else {
                Contract::Larger
            }
        },
        Delivery::Everyone,
        |_| (4, 0),
    );
    for (rank, result) in got.iter().enumerate() {
        match result {
            Err(Error::RanksDisagree {
                field: "requirements",
                rank: other,
                ..
            }) => {
                assert_eq!(*other, 1 - rank, "rank {rank} names the other rank");
            }
            other => panic!("rank {rank}: {other:?}"),
        }
    }
}

#[test]
fn no_rows_write_nothing() {
    let keys: Vec<f32> = Vec::new();
    check_all(&keys, 0, &[4, 4], 3, "no rows");
}
