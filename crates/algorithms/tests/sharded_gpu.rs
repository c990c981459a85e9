//! Sharded top-k over NCCL on two GPUs (the `nccl` feature): every rank's result equals the
//! single-device top-k of the concatenated rows (the host's), bit for bit; one process
//! driving both GPUs (a thread per rank) and one process per GPU (this binary re-run as rank
//! 1). Needs two GPUs and `libnccl.so` on the library path; with `OXICUB_REQUIRE_GPU=1` a
//! missing one fails.
#![cfg(feature = "nccl")]

use oxicub::params::{direction, k, SelectDirection};
use oxicub::radix::RadixKey;
use oxicub::sharded::{self, Nccl, Problem, Shards};
use oxicub::{Cuda, Error};
use oxicub_test::sharded::{bits, check_rank_result, shard_of, whole_rows_topk, Contract};
use oxicub_test::with_contract_env;
use oxicub_test::SplitMix64;

/// Two backends on devices 0 and 1, or a skip (a failure with `OXICUB_REQUIRE_GPU=1`).
fn two_gpus_or_skip() -> Option<[Cuda; 2]> {
    let first = oxicub_test::gpu_or_skip()?;
    match Cuda::new(1) {
        Ok(second) => Some([first, second]),
        Err(why) => {
            if std::env::var("OXICUB_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("OXICUB_REQUIRE_GPU=1 but there is no second GPU: {why}");
            }
            println!("skipped: one GPU only ({why})");
            None
        }
    }
}

/// Runs `f` for each rank on a thread of its own, the results in rank order (`&mut`: a
/// communicator is used by one thread at a time; `Nccl` is not `Sync`).
fn on_each_rank<R: Send>(
    backends: &[Cuda],
    comms: &mut [Nccl],
    f: impl Fn(&Cuda, &mut Nccl) -> R + Sync,
) -> Vec<R> {
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = backends
            .iter()
            .zip(comms.iter_mut())
            .map(|(cuda, comm)| scope.spawn(move || f(cuda, comm)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    })
}

/// One rank's call on its own device: agree, upload its shard, select, download.
#[allow(clippy::too_many_arguments)]
fn rank_call<K: RadixKey>(
    cuda: &Cuda,
    comm: &mut Nccl,
    shards: &Shards,
    keys: &[K],
    rows: usize,
    kk: i64,
    dir: SelectDirection,
    contract: Contract,
    trim: usize,
) -> Result<(Vec<K>, Vec<u32>), Error> {
    let r = comm.rank();
    let total = shards.total() as usize;
    let problem = Problem::<K, u32, _>::agree(
        cuda,
        comm,
        shards.clone(),
        rows,
        k::uniform(kk)?,
        direction::Choice::<direction::Either>::new(dir)?,
    )?;
    let mut mine = shard_of(keys, rows, total, shards.offset(r) as usize, shards.len(r));
    mine.truncate(mine.len() - trim);
    let mine = cuda.upload_keys(&mine)?;
    let n = rows * problem.written();
    // Poisoned outputs: an unwritten slot shows.
    let poison = keys
        .first()
        .copied()
        .unwrap_or(K::from_bits(Default::default()));
    let mut top = cuda.upload_keys(&vec![poison; n.max(1)])?;
    let mut at = cuda.upload(&vec![u32::MAX; n.max(1)])?;
    let outcome = with_contract_env!(contract, |env| {
        sharded::select_indices(
            cuda,
            &problem,
            mine.as_view(),
            top.as_view_mut(),
            at.as_view_mut(),
            &env,
        )?
    });
    outcome.check()?;
    let mut top = cuda.download_keys(&top)?;
    let mut at = cuda.download(&at.as_view())?;
    top.truncate(n);
    at.truncate(n);
    Ok((top, at))
}

/// Both ranks from threads of this process; each result against the host's whole rows,
/// under every contract (the opt-outs checked as any valid top-k: keys without NaN).
fn check_two<K: RadixKey + PartialEq>(
    keys: &[K],
    rows: usize,
    lens: [usize; 2],
    kk: i64,
    what: &str,
) {
    let every = [
        Contract::Smaller,
        Contract::Larger,
        Contract::OptOutUnsorted,
        Contract::OptOutSorted,
    ];
    check_two_under(keys, rows, lens, kk, what, &every);
}

/// [`check_two`] under `contracts` only.
fn check_two_under<K: RadixKey + PartialEq>(
    keys: &[K],
    rows: usize,
    lens: [usize; 2],
    kk: i64,
    what: &str,
    contracts: &[Contract],
) {
    let Some(backends) = two_gpus_or_skip() else {
        return;
    };
    // SAFETY: both ranks' threads make the same calls (rank_call: agree, select_indices).
    let mut comms = unsafe { Nccl::for_devices(&backends) }.expect("NCCL on both devices");
    let shards = Shards::new(&lens).expect("shards");
    let total = shards.total() as usize;
    for dir in [SelectDirection::Max, SelectDirection::Min] {
        for &contract in contracts {
            let want = whole_rows_topk(keys, rows, total, kk, dir, contract == Contract::Larger);
            let results: Vec<_> = on_each_rank(&backends, &mut comms, |cuda, comm| {
                rank_call(cuda, comm, &shards, keys, rows, kk, dir, contract, 0)
            });
            for (rank, result) in results.into_iter().enumerate() {
                let case =
                    format!("{what}: rank {rank}, {dir:?}, {contract:?}, lens {lens:?}, k {kk}");
                let (top, at) = result.unwrap_or_else(|e| panic!("{case}: {e}"));
                let (got, want) = ((&top[..], &at[..]), (&want.0[..], &want.1[..]));
                check_rank_result(contract, keys, rows, total, dir, got, want, &case);
            }
        }
    }
}

fn random_f32(rows: usize, total: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    (0..rows * total)
        .map(|_| rng.next_unit_f64() as f32 * 2.0 - 1.0)
        .collect()
}

#[test]
fn random_rows_vocab_parallel() {
    check_two(
        &random_f32(8, 2 * 4000, 1),
        8,
        [4000, 4000],
        50,
        "random [8 x 8000] k=50",
    );
    check_two(
        &random_f32(4, 2 * 16_000, 2),
        4,
        [16_000, 16_000],
        2048,
        "random [4 x 32000] k=2048",
    );
}

#[test]
fn uneven_shards_and_k_above_a_shard() {
    check_two(
        &random_f32(3, 1300, 3),
        3,
        [1000, 300],
        500,
        "k above the small shard",
    );
    check_two(&random_f32(2, 900, 4), 2, [900, 0], 40, "an empty shard");
    check_two(
        &random_f32(2, 64, 5),
        2,
        [40, 24],
        100,
        "k above the whole row",
    );
    check_two(&random_f32(2, 64, 6), 2, [40, 24], 0, "k = 0");
    check_two(&random_f32(0, 64, 6), 0, [40, 24], 5, "no rows");
}

#[test]
fn ties_straddling_the_shard_boundary() {
    // Four distinct keys: the tie class at the k-th key spans both shards.
    let mut rng = SplitMix64::new(7);
    let keys: Vec<i32> = (0..4 * 6000).map(|_| (rng.next_u64() % 4) as i32).collect();
    check_two(&keys, 4, [2500, 3500], 2048, "ties");
    check_two(
        &vec![3u16; 2 * 5000],
        2,
        [2500, 2500],
        1000,
        "all equal u16",
    );
}

#[test]
fn nan_and_signed_zeros() {
    let pool = [
        f32::NAN,
        -f32::NAN,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.0,
    ];
    let mut rng = SplitMix64::new(9);
    let keys: Vec<f32> = (0..2 * 3000)
        .map(|_| pool[(rng.next_u64() % 7) as usize])
        .collect();
    // NaN payloads tie, so only the pinned contracts compare bits.
    let pinned = [Contract::Smaller, Contract::Larger];
    check_two_under(&keys, 2, [1800, 1200], 700, "nan and zeros", &pinned);
    let halves: Vec<half::bf16> = keys.iter().map(|&k| half::bf16::from_f32(k)).collect();
    check_two_under(&halves, 2, [1800, 1200], 700, "bf16 nan and zeros", &pinned);
}

#[test]
fn a_rank_with_wrong_keys_is_reported_by_its_peer() {
    let Some(backends) = two_gpus_or_skip() else {
        return;
    };
    // SAFETY: both ranks' threads make the same calls (rank_call: agree, select_indices).
    let mut comms = unsafe { Nccl::for_devices(&backends) }.expect("NCCL");
    let shards = Shards::new(&[500, 500]).expect("shards");
    let keys = random_f32(2, 1000, 10);
    let results: Vec<_> = on_each_rank(&backends, &mut comms, |cuda, comm| {
        let trim = usize::from(comm.rank() == 1);
        rank_call(
            cuda,
            comm,
            &shards,
            &keys,
            2,
            10,
            SelectDirection::Max,
            Contract::Smaller,
            trim,
        )
    });
    assert!(
        matches!(results[0], Err(Error::PeerFailed { rank: 1 })),
        "{:?}",
        results[0]
    );
    assert!(
        matches!(results[1], Err(Error::LengthMismatch { arg: "keys", .. })),
        "{:?}",
        results[1]
    );
}

/// Rank 1 of [`one_process_per_gpu`]: this binary re-run with the id in the environment.
const CHILD_ID: &str = "OXICUB_SHARDED_TEST_ID";

/// One process's rank of [`one_process_per_gpu`]: joins with `id`, calls, and compares.
fn process_rank(cuda: &Cuda, rank: usize, id: cudarc::nccl::Id) {
    let rows = 16;
    let shards = Shards::new(&[10_000, 6_000]).expect("shards");
    let keys = random_f32(rows, 16_000, 11);
    // SAFETY: both processes make the same calls (rank_call: agree, select_indices).
    let mut comm = unsafe { Nccl::from_rank(cuda, rank, 2, id) }.expect("a rank");
    let got = rank_call(
        cuda,
        &mut comm,
        &shards,
        &keys,
        rows,
        64,
        SelectDirection::Max,
        Contract::Smaller,
        0,
    )
    .unwrap_or_else(|e| panic!("rank {rank}'s call: {e}"));
    let want = whole_rows_topk(&keys, rows, 16_000, 64, SelectDirection::Max, false);
    assert_eq!(
        (bits(&got.0), got.1),
        (bits(&want.0), want.1),
        "rank {rank}"
    );
}

#[test]
fn one_process_per_gpu() {
    if let Ok(hex) = std::env::var(CHILD_ID) {
        // The child: rank 1 on device 1.
        let bytes: Vec<std::ffi::c_char> = (0..hex.len() / 2)
            .map(|i| {
                u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex") as std::ffi::c_char
            })
            .collect();
        let id = cudarc::nccl::Id::uninit(bytes.try_into().expect("128 bytes"));
        process_rank(&Cuda::new(1).expect("device 1"), 1, id);
        return;
    }
    let Some([cuda, _]) = two_gpus_or_skip() else {
        return;
    };
    let id = Nccl::unique_id().expect("an NCCL id");
    let hex: String = id
        .internal()
        .iter()
        .map(|&b| format!("{:02x}", b as u8))
        .collect();
    let child = std::process::Command::new(std::env::current_exe().expect("this binary"))
        .args([
            "--exact",
            "one_process_per_gpu",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD_ID, hex)
        .spawn()
        .expect("rank 1's process");
    process_rank(&cuda, 0, id);
    let status = child.wait_with_output().expect("rank 1 ends").status;
    assert!(status.success(), "rank 1's process: {status}");
}

#[test]
fn keys_on_the_other_device_fail_that_rank_only() {
    let Some(backends) = two_gpus_or_skip() else {
        return;
    };
    // SAFETY: both ranks' threads make the same calls (agree, select_indices).
    let mut comms = unsafe { Nccl::for_devices(&backends) }.expect("NCCL");
    let shards = Shards::new(&[300, 300]).expect("shards");
    let keys = random_f32(2, 600, 12);
    // Rank 1's shard, allocated on device 0.
    let misplaced = backends[0]
        .upload_keys(&shard_of(&keys, 2, 600, 300, 300))
        .expect("upload");
    let results: Vec<Result<(), Error>> = on_each_rank(&backends, &mut comms, |cuda, comm| {
        let rank = comm.rank();
        let problem = Problem::<f32, u32, _>::agree(
            cuda,
            comm,
            shards.clone(),
            2,
            k::Static::<8>::new(),
            direction::Max,
        )?;
        let own = cuda.upload_keys(&shard_of(&keys, 2, 600, 0, 300))?;
        let input = if rank == 0 {
            own.as_view()
        } else {
            misplaced.as_view()
        };
        let (mut top, mut at) = (cuda.alloc_zeros::<f32>(16)?, cuda.alloc_zeros::<u32>(16)?);
        sharded::select_indices(
            cuda,
            &problem,
            input,
            top.as_view_mut(),
            at.as_view_mut(),
            &oxicub::Env::new(),
        )?
        .check()
    });
    assert!(
        matches!(results[0], Err(Error::PeerFailed { rank: 1 })),
        "{:?}",
        results[0]
    );
    assert!(
        matches!(results[1], Err(Error::Kernel(_))),
        "{:?}",
        results[1]
    );
}

#[test]
fn a_backend_on_another_stream_is_ordered_with_the_communicator() {
    let Some(backends) = two_gpus_or_skip() else {
        return;
    };
    // SAFETY: both ranks' threads make the same calls (agree, select_indices).
    let mut comms = unsafe { Nccl::for_devices(&backends) }.expect("NCCL");
    let (rows, shards) = (4, Shards::new(&[5000, 3000]).expect("shards"));
    let keys = random_f32(rows, 8000, 13);
    let want = whole_rows_topk(&keys, rows, 8000, 100, SelectDirection::Max, false);
    let results: Vec<Result<Vec<u32>, Error>> =
        on_each_rank(&backends, &mut comms, |cuda, comm| {
            // Another stream of the same context than the communicator's.
            let side = cuda.on_stream(cuda.context().new_stream().expect("a stream"))?;
            let r = comm.rank();
            let problem = Problem::<f32, u32, _>::agree(
                &side,
                comm,
                shards.clone(),
                rows,
                k::Static::<100>::new(),
                direction::Max,
            )?;
            let mine = side.upload_keys(&shard_of(
                &keys,
                rows,
                8000,
                shards.offset(r) as usize,
                shards.len(r),
            ))?;
            let (mut top, mut at) = (
                side.alloc_zeros::<f32>(rows * 100)?,
                side.alloc_zeros::<u32>(rows * 100)?,
            );
            sharded::select_indices(
                &side,
                &problem,
                mine.as_view(),
                top.as_view_mut(),
                at.as_view_mut(),
                &oxicub::Env::new(),
            )?
            .check()?;
            side.download(&at.as_view())
        });
    for (rank, result) in results.into_iter().enumerate() {
        assert_eq!(
            result.unwrap_or_else(|e| panic!("rank {rank}: {e}")),
            want.1,
            "rank {rank}"
        );
    }
}
