//! Sharded top-k across two GPUs (the `nccl` feature): the candidate exchange against
//! gathering the logits, side by side in one run (docs/design/sharded_topk.md,
//! "Measurements").
//!
//!   cargo bench --features nccl --bench sharded -- [--rows 256] [--total 256000] [--out FILE]
//!
//! For each `k`, on two GPUs each holding half the columns of `[rows x total]` f32 logits:
//! * `sharded`: `sharded::select_indices` (local top-k, one all-gather of the candidates, the
//!   merge), every rank receiving the result, each call's outcome checked at once (a wait for
//!   the stream); `sharded, checked later`: the outcomes deferred (`Pending::defer`) and
//!   checked after the loop, as a serving loop does; `sharded opt-out`: the same with
//!   `NotGuaranteed` and `Unsorted` (the cheaper selections); `host issue`: the median time one such
//!   call takes to return on rank 0 (the host's share of a call);
//! * `gather_logits`: NCCL all-gather of the logits shards, the rank-major result joined into
//!   rows (a device copy, as `torch.cat` does), then oxicub's single-GPU batched top-k of the
//!   whole rows on every rank: what a stack without a sharded top-k runs;
//! * `local_only`: one rank's own batched top-k of its shard (no exchange): the part of
//!   `sharded` no exchange can remove.
//!
//! Times are wall clock per call over a loop of calls on both ranks (each rank's thread issues
//! its calls; NCCL keeps the ranks in step), after warm-up, median of 5 loops. The result of
//! every variant is checked against the first rank's host copy of the whole rows once.

use std::time::Instant;

use cudarc::driver::CudaSlice;
use oxicub::batched_topk::{self, Problem as Batched};
use oxicub::kernels::families::listed_copy;
use oxicub::params::{direction, k, num_segments, segment_size, SelectDirection};
use oxicub::sharded::{self, Nccl, Problem, Shards};
use oxicub::{Backend, Cuda, Env, Error};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const ITERS: usize = 20;
const LOOPS: usize = 5;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn whole_rows(
    rows: usize,
    total: usize,
    kk: usize,
) -> Result<impl batched_topk::ProblemOn<Cuda>, Error> {
    Ok(Batched::strided(
        total,
        segment_size::uniform(total as i64)?,
        k::uniform(kk as i64)?,
        direction::Max,
        num_segments::uniform(rows as i64)?,
    ))
}

/// One rank's buffers for every variant (its communicator is held by the agreed problem).
struct Rank {
    cuda: Cuda,
    index: usize,
    shard: CudaSlice<f32>,
    gathered: CudaSlice<f32>,
    joined: CudaSlice<f32>,
    top: CudaSlice<f32>,
    at: CudaSlice<u32>,
}

/// A rank's agreed problem, on its NCCL communicator.
type Agreed<'c> = Problem<'c, f32, u32, Nccl>;

/// What one variant runs on a rank, with that rank's problem.
type Variant<'f, 'c> = &'f (dyn Fn(&mut Rank, &mut Agreed<'c>) -> Res<()> + Sync);

/// One rank's sharded call on its shard, `n` results written: every sharded variant's call.
fn sharded_select<E: oxicub::Environment>(
    rank: &mut Rank,
    problem: &Agreed<'_>,
    n: usize,
    env: &E,
) -> Result<oxicub::Outcome, Error> {
    sharded::select_indices(
        &rank.cuda,
        problem,
        rank.shard.as_view(),
        rank.top.slice_mut(..n),
        rank.at.slice_mut(..n),
        env,
    )
}

/// Median per-call milliseconds of `f` run `ITERS` times per loop on every rank together.
fn time_ranks<'c>(ranks: &mut [Rank], problems: &mut [Agreed<'c>], f: Variant<'_, 'c>) -> Res<f64> {
    let mut loops = Vec::new();
    for round in 0..=LOOPS {
        let start = Instant::now();
        std::thread::scope(|scope| -> Res<()> {
            let handles: Vec<_> = ranks
                .iter_mut()
                .zip(problems.iter_mut())
                .map(|(rank, problem)| {
                    scope.spawn(move || -> Res<()> {
                        for _ in 0..ITERS {
                            f(rank, problem)?;
                        }
                        rank.cuda.synchronize()?;
                        rank.cuda.check_deferred()?;
                        Ok(())
                    })
                })
                .collect();
            for h in handles {
                h.join().map_err(|_| "a rank panicked")??;
            }
            Ok(())
        })?;
        if round > 0 {
            loops.push(start.elapsed().as_secs_f64() * 1e3 / ITERS as f64);
        }
    }
    loops.sort_by(f64::total_cmp);
    Ok(loops[LOOPS / 2])
}

fn main() -> Res<()> {
    let rows = arg("--rows", 256);
    let total = arg("--total", 256_000);
    let out = std::env::args()
        .skip_while(|a| a != "--out")
        .nth(1)
        .unwrap_or_else(|| "sharded.md".to_owned());
    // `--no-event-tracking`: contexts without cudarc's per-buffer event waits and records (an
    // engine that orders its streams itself runs so; every call here is on one stream a GPU).
    let tracking = !std::env::args().any(|a| a == "--no-event-tracking");
    let backend = |ordinal: usize| -> Res<Cuda> {
        if tracking {
            return Ok(Cuda::new(ordinal)?);
        }
        let ctx = cudarc::driver::CudaContext::new(ordinal)?;
        // SAFETY: every buffer of this bench is used on its device's one stream only.
        unsafe { ctx.disable_event_tracking() };
        Ok(Cuda::from_stream(ctx.new_stream()?)?)
    };
    let backends = [backend(0)?, backend(1)?];
    // SAFETY: both ranks run every variant in step (time_ranks runs each on both ranks).
    let mut comms = unsafe { Nccl::for_devices(&backends)? };
    let shards = Shards::even(total, 2)?;
    let half = shards.len(0);
    let mut rng = oxicub_test::SplitMix64::new(42);
    let logits: Vec<f32> = (0..rows * total)
        .map(|_| rng.next_unit_f64() as f32)
        .collect();
    let mut ranks = Vec::new();
    for (r, cuda) in backends.iter().enumerate() {
        let mine =
            oxicub_test::sharded::shard_of(&logits, rows, total, shards.offset(r) as usize, half);
        ranks.push(Rank {
            shard: cuda.upload(&mine)?,
            gathered: cuda.alloc_zeros(rows * total)?,
            joined: cuda.alloc_zeros(rows * total)?,
            top: cuda.alloc_zeros(rows * 2048)?,
            at: cuda.alloc_zeros(rows * 2048)?,
            cuda: cuda.clone(),
            index: r,
        });
    }
    let names: Vec<String> = backends.iter().map(|b| b.facts().name.clone()).collect();
    let mut table = format!(
        "# Sharded top-k, 2 GPUs ({}), [{rows} x {total}] f32, {half} columns a rank, cudarc event tracking {}\n\n\
         | k | sharded ms | sharded, checked later ms | sharded opt-out ms | host issue ms | gather_logits ms | gather / sharded | local_only ms | local_only host issue ms | bytes sent a rank: sharded / gather_logits |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        names.join(", "),
        if tracking { "on" } else { "off" }
    );
    for kk in [50usize, 2048] {
        let mut problems: Vec<Agreed<'_>> = std::thread::scope(|scope| {
            let handles: Vec<_> = backends
                .iter()
                .zip(comms.iter_mut())
                .map(|(cuda, comm)| {
                    let shards = shards.clone();
                    scope.spawn(move || {
                        Problem::agree(
                            cuda,
                            comm,
                            shards,
                            rows,
                            k::uniform(kk as i64)?,
                            direction::Max,
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("no panic"))
                .collect::<Result<Vec<_>, Error>>()
        })?;
        let sent_sharded = problems[0].bytes_sent();
        let sent_gather = rows * half * 4;
        let n = rows * kk;
        let sharded_call = |rank: &mut Rank, problem: &mut Agreed<'_>| -> Res<()> {
            sharded_select(rank, problem, n, &Env::new())?.check()?;
            Ok(())
        };
        let sharded_deferred = |rank: &mut Rank, problem: &mut Agreed<'_>| -> Res<()> {
            sharded_select(rank, problem, n, &Env::new())?.defer(&rank.cuda);
            Ok(())
        };
        let sharded_opt_out = |rank: &mut Rank, problem: &mut Agreed<'_>| -> Res<()> {
            let env = oxicub::require!(
                oxicub::determinism::NotGuaranteed,
                oxicub::output_ordering::Unsorted
            );
            sharded_select(rank, problem, n, &env)?.defer(&rank.cuda);
            Ok(())
        };
        let whole = whole_rows(rows, total, kk)?;
        let gather_call = |rank: &mut Rank, problem: &mut Agreed<'_>| -> Res<()> {
            let Rank {
                cuda,
                shard,
                gathered,
                joined,
                top,
                at,
                ..
            } = rank;
            problem
                .comm()
                .comm()
                .all_gather(shard, gathered)
                .map_err(|e| format!("{e:?}"))?;
            // Rank-major [2][rows][half] into rows: a list of 2 * rows views joined.
            let all = gathered.as_view();
            let views: Vec<_> = (0..rows)
                .flat_map(|row| (0..2).map(move |r| (r * rows + row) * half))
                .map(|start| all.slice(start..start + half))
                .collect();
            listed_copy::gather(
                cuda.runtime(),
                cuda.stream(),
                &views,
                &mut joined.as_view_mut(),
            )?;
            batched_topk::select_indices(
                cuda,
                &whole,
                joined.as_view(),
                top.slice_mut(..n),
                at.slice_mut(..n),
                &Env::new(),
            )?
            .check()?;
            Ok(())
        };
        let local = whole_rows(rows, half, kk)?;
        let local_call = |rank: &mut Rank, _: &mut Agreed<'_>| -> Res<()> {
            batched_topk::select_indices(
                &rank.cuda,
                &local,
                rank.shard.as_view(),
                rank.top.slice_mut(..n),
                rank.at.slice_mut(..n),
                &Env::new(),
            )?
            .check()?;
            Ok(())
        };
        // Correctness once: both exchanged variants give the host's answer on rank 0.
        let want = oxicub_test::sharded::whole_rows_topk(
            &logits,
            rows,
            total,
            kk as i64,
            SelectDirection::Max,
            false,
        );
        for (name, call) in [
            ("sharded", &sharded_call as Variant<'_, '_>),
            ("gather_logits", &gather_call),
        ] {
            time_ranks(&mut ranks[..], &mut problems[..], call)?;
            let got = ranks[0].cuda.download(&ranks[0].at.slice(..n))?;
            assert_eq!(got, want.1, "{name} k={kk}: indices differ from the host's");
        }
        let t_sharded = time_ranks(&mut ranks[..], &mut problems[..], &sharded_call)?;
        let t_deferred = time_ranks(&mut ranks[..], &mut problems[..], &sharded_deferred)?;
        let t_opt_out = time_ranks(&mut ranks[..], &mut problems[..], &sharded_opt_out)?;
        // The host's side alone: how long one call takes to return on rank 0 when the ranks
        // issue back to back without waiting (the GPUs may still be busy).
        let issue = std::sync::Mutex::new(Vec::new());
        let timed_issue = |rank: &mut Rank, problem: &mut Agreed<'_>| -> Res<()> {
            let start = Instant::now();
            sharded_deferred(rank, problem)?;
            if rank.index == 0 {
                issue
                    .lock()
                    .map_err(|_| "poisoned")?
                    .push(start.elapsed().as_secs_f64() * 1e3);
            }
            Ok(())
        };
        time_ranks(&mut ranks[..], &mut problems[..], &timed_issue)?;
        let mut issued = issue.into_inner().map_err(|_| "poisoned")?;
        issued.sort_by(f64::total_cmp);
        let t_issue = issued[issued.len() / 2];
        let t_gather = time_ranks(&mut ranks[..], &mut problems[..], &gather_call)?;
        let t_local = time_ranks(&mut ranks[..1], &mut problems[..1], &local_call)?;
        let local_issue = std::sync::Mutex::new(Vec::new());
        let timed_local = |rank: &mut Rank, _: &mut Agreed<'_>| -> Res<()> {
            let start = Instant::now();
            batched_topk::select_indices(
                &rank.cuda,
                &local,
                rank.shard.as_view(),
                rank.top.slice_mut(..n),
                rank.at.slice_mut(..n),
                &Env::new(),
            )?
            .defer(&rank.cuda);
            local_issue
                .lock()
                .map_err(|_| "poisoned")?
                .push(start.elapsed().as_secs_f64() * 1e3);
            Ok(())
        };
        time_ranks(&mut ranks[..1], &mut problems[..1], &timed_local)?;
        let mut local_issued = local_issue.into_inner().map_err(|_| "poisoned")?;
        local_issued.sort_by(f64::total_cmp);
        let t_local_issue = local_issued[local_issued.len() / 2];
        let line = format!(
            "| {kk} | {t_sharded:.4} | {t_deferred:.4} | {t_opt_out:.4} | {t_issue:.4} | {t_gather:.4} | {:.1}x | {t_local:.4} | {t_local_issue:.4} | {sent_sharded} / {sent_gather} |\n",
            t_gather / t_deferred.min(t_sharded)
        );
        print!("{line}");
        table.push_str(&line);
    }
    std::fs::write(&out, table)?;
    println!("written to {out}");
    Ok(())
}
