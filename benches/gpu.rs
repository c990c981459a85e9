//! bench-gpu: oxicub against what users would pick instead (CUB/thrust, PyTorch, FlashInfer), on
//! the same GPU in the same run, and against the physical floor.
//!
//! Usually started by benches/peers/run.sh, which builds the peers and passes them with --peer.
//! What it does, in order:
//!  1. opens the GPU, compiles the shared input generator (benches/peers/gen.cuh) with NVRTC and
//!     measures the device copy bandwidth (the floor's denominator);
//!  2. per workload (benches/gpu/workloads.rs): computes the CPU reference result from the same
//!     generator, and runs oxicub's implementation if it has one (benches/gpu/oxicub.rs);
//!  3. writes a plan and runs each peer program on it (benches/gpu/peers.rs), after its own GPU
//!     work, so nothing else runs on the GPU while a peer is timed;
//!  4. checks every result digest against the reference, and prints and writes the table
//!     (NAME.md, NAME.json, NAME.svg in the --out directory; benches/gpu/report.rs).
//!
//! Usage: bench-gpu --out DIR [--name NAME] [--peer CMD]... [--filter SUBSTR]... [--command TEXT]
//!        bench-gpu --list | --selftest | --help

#[path = "gpu/device.rs"]
mod device;
#[path = "gpu/err.rs"]
mod err;
#[path = "gpu/gen.rs"]
mod gen;
#[path = "gpu/oxicub.rs"]
mod oxicub;
#[path = "gpu/peers.rs"]
mod peers;
#[path = "gpu/report.rs"]
mod report;
#[path = "gpu/workloads.rs"]
mod workloads;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use device::Gpu;
use err::{BenchError, Context, Result};
use gen::Digest;
use report::{Cell, Report, Row, State, COLUMNS};
use workloads::{Kind, RefCache, Rows, Workload};

/// The generator check: the first GEN_CHECK_N values of streams GEN_CHECK_SEED (f32),
/// GEN_CHECK_SEED + 1 (u32, full mask), GEN_CHECK_SEED + 2 (power-law lengths),
/// GEN_CHECK_SEED + 3 (near-sorted int32 keys, i + rand(0, GEN_CHECK_NEAR_RANGE)) and
/// GEN_CHECK_SEED + 4 (router logits over GEN_CHECK_ROUTE_EXPERTS experts, row after row).
const GEN_CHECK_N: u64 = 1 << 20;
const GEN_CHECK_SEED: u64 = 1;
const GEN_CHECK_MAX_EXP: u32 = 16;
const GEN_CHECK_NEAR_RANGE: u32 = 1000;
/// Fixed by the protocol (benches/gpu/peers.rs), not sent in the plan.
const GEN_CHECK_ROUTE_EXPERTS: u32 = 256;

const USAGE: &str = "\
usage: bench-gpu --out DIR [--name NAME] [--peer CMD]... [--filter SUBSTR]... [--command TEXT]
       bench-gpu --list       print the workloads and their plan lines (no GPU needed)
       bench-gpu --selftest   check the host generator, digests and CPU references (no GPU needed)

  --out DIR        where NAME.md, NAME.json and NAME.svg are written
  --name NAME      output file stem (default gpu-bench)
  --peer CMD       a peer program; run as `sh -c 'CMD PLAN'` (repeatable)
  --filter SUBSTR  only workloads whose id contains SUBSTR (repeatable: any of them)
  --command TEXT   the command line to record in the table header (default: this one)
  --dry-run        no GPU: assume 3000 GB/s and a 50 MiB L2, skip oxicub; for testing the
                   peer protocol and the report on a machine without a GPU";

#[derive(Default)]
struct Args {
    out: Option<PathBuf>,
    name: String,
    peers: Vec<String>,
    filters: Vec<String>,
    command: Option<String>,
    list: bool,
    selftest: bool,
    dry_run: bool,
    help: bool,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        name: "gpu-bench".into(),
        ..Default::default()
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |what: &str| {
            it.next()
                .ok_or_else(|| BenchError::new(format!("{what} needs a value\n{USAGE}")))
        };
        match arg.as_str() {
            "--out" => a.out = Some(PathBuf::from(value("--out")?)),
            "--name" => a.name = value("--name")?,
            "--peer" => a.peers.push(value("--peer")?),
            "--filter" => a.filters.push(value("--filter")?),
            "--command" => a.command = Some(value("--command")?),
            "--list" => a.list = true,
            "--selftest" => a.selftest = true,
            "--dry-run" => a.dry_run = true,
            "--help" | "-h" => a.help = true,
            // `cargo bench` passes --bench to harness = false targets.
            "--bench" => {}
            other => {
                return Err(BenchError::new(format!(
                    "unknown argument {other}\n{USAGE}"
                )))
            }
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bench-gpu: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<ExitCode> {
    let args = parse_args()?;
    if args.help {
        println!("{USAGE}");
        return Ok(ExitCode::SUCCESS);
    }
    let workloads: Vec<Workload> = workloads::all()
        .into_iter()
        .filter(|w| args.filters.is_empty() || args.filters.iter().any(|f| w.id.contains(f)))
        .collect();
    if args.list {
        for w in &workloads {
            println!("{:<44} {}", w.label, w.plan_line(1));
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.selftest {
        return selftest();
    }
    let out_dir = args
        .out
        .clone()
        .ok_or_else(|| BenchError::new(format!("--out DIR is required\n{USAGE}")))?;

    if args.dry_run {
        std::fs::create_dir_all(&out_dir).ctx(format!("creating {}", out_dir.display()))?;
        return measure_and_report(&args, &out_dir, &workloads, None);
    }
    // cudarc's loader panics when a library is absent, so ask first (oxicub's probe, which also
    // holds when another crate has cudarc link the libraries) and say plainly what is missing.
    if ::oxicub::kernels::driver_available().is_err() {
        eprintln!(
            "bench-gpu: no CUDA driver (libcuda.so) on this machine: it needs an NVIDIA GPU. \
             (`bench-gpu --list` and `--selftest` run without one.)"
        );
        return Ok(ExitCode::from(2));
    }
    if ::oxicub::kernels::nvrtc_available().is_err() {
        eprintln!(
            "bench-gpu: NVRTC (libnvrtc.so) not found: add the CUDA toolkit's lib64 to LD_LIBRARY_PATH"
        );
        return Ok(ExitCode::from(2));
    }
    std::fs::create_dir_all(&out_dir).ctx(format!("creating {}", out_dir.display()))?;

    let gpu = Gpu::open()?;
    measure_and_report(&args, &out_dir, &workloads, Some(&gpu))
}

/// Everything after the GPU is open (`gpu` is None only for --dry-run).
fn measure_and_report(
    args: &Args,
    out_dir: &std::path::Path,
    workloads: &[Workload],
    gpu: Option<&Gpu>,
) -> Result<ExitCode> {
    let Some(gpu) = gpu else {
        return report_without_gpu(args, out_dir, workloads);
    };
    let mut device = format!(
        "{} (sm_{}{}, {} SMs, L2 {} MiB, {} GiB)",
        gpu.name,
        gpu.cc.0,
        gpu.cc.1,
        gpu.sm_count,
        gpu.l2_bytes >> 20,
        gpu.total_mem >> 30
    );
    if let Ok(info) = std::env::var("OXICUB_BENCH_DEVICE_INFO") {
        device = format!("{device}; nvidia-smi: {}", info.trim());
    }
    eprintln!("bench-gpu: {device}");

    let bw = gpu.bandwidth()?;
    let l2_bytes = gpu.l2_bytes;
    eprintln!(
        "bench-gpu: copy bandwidth {:.0} GB/s (memcpy {:.0}, kernel {:.0})",
        bw.best_gbs(),
        bw.memcpy_gbs(),
        bw.kernel_gbs()
    );

    // Generator check: host (Rust) vs device (NVRTC here); the peers add theirs below.
    let host_gen = host_generator_digests();
    let dev_gen = device_generator_digests(gpu)?;
    let generator = vec![
        ("rust-host".to_string(), host_gen.clone()),
        ("rust-nvrtc".to_string(), dev_gen),
    ];
    let oxicub_cell = |w: &Workload, reference: &workloads::Reference, rotations: usize| {
        (
            run_oxicub(gpu, w, reference, rotations, oxicub::runner(w)),
            run_oxicub(gpu, w, reference, rotations, oxicub::opt_out_runner(w)),
        )
    };
    finish(
        args,
        out_dir,
        workloads,
        device,
        bw,
        l2_bytes,
        generator,
        &oxicub_cell,
    )
}

/// --dry-run: the same pipeline with assumed device numbers and no oxicub runs.
fn report_without_gpu(
    args: &Args,
    out_dir: &std::path::Path,
    workloads: &[Workload],
) -> Result<ExitCode> {
    let assumed_gbs = 3000.0;
    let bytes_moved = 2u64 << 30;
    let t = device::Timing {
        median_ms: bytes_moved as f64 / (assumed_gbs * 1e6),
        min_ms: bytes_moved as f64 / (assumed_gbs * 1e6),
        reps: 0,
    };
    let bw = device::Bandwidth {
        bytes_moved,
        memcpy: t,
        kernel: t,
    };
    let generator = vec![("rust-host".to_string(), host_generator_digests())];
    let no_oxicub = |_: &Workload, _: &workloads::Reference, _: usize| {
        let cell = Cell::new(State::NotImplemented, "dry run: oxicub not run");
        (cell.clone(), cell)
    };
    finish(
        args,
        out_dir,
        workloads,
        "DRY RUN without a GPU (assumed 3000 GB/s, L2 50 MiB)".into(),
        bw,
        50 << 20,
        generator,
        &no_oxicub,
    )
}

fn run_oxicub(
    gpu: &Gpu,
    w: &Workload,
    reference: &workloads::Reference,
    rotations: usize,
    runner: Option<oxicub::Runner>,
) -> Cell {
    match runner {
        None => Cell::new(State::NotImplemented, ""),
        Some(run) => match run(gpu, w, rotations) {
            Ok(m) if m.digest == reference.digest => Cell::new(
                State::Timed {
                    median_ms: m.timing.median_ms,
                    min_ms: m.timing.min_ms,
                    reps: m.timing.reps as u64,
                },
                m.note,
            ),
            Ok(m) => Cell::new(
                State::Mismatch {
                    median_ms: m.timing.median_ms,
                    digest: m.digest.text(),
                },
                m.note,
            ),
            Err(e) => {
                eprintln!("bench-gpu: oxicub failed on {}: {e}", w.id);
                Cell::new(State::Error, e.to_string())
            }
        },
    }
}

/// The cell of one peer result line, checked against the `expected` digest; the line's
/// implementation joins `matched` or `mismatched` when it was timed.
///
/// `ties`: for a result digested with its index sets (tie-heavy rows), the answer with ties to
/// the larger index (a peer variant that asks for those matches it instead: timed, and said so)
/// and the digest of the keys alone, which a mismatching line may report as `keys_digest`: its
/// note then says whether it selected the right keys and only other tied indices (such a line
/// joins `other_ties`, not `mismatched`: most peers promise no tie-break).
fn line_cell(
    l: &peers::PeerLine,
    expected: &str,
    ties: Option<&workloads::TieDigests>,
    matched: &mut Vec<String>,
    mismatched: &mut Vec<String>,
    other_ties: &mut Vec<String>,
) -> Cell {
    let larger = ties.map(|t| t.larger.text());
    let keys_expected = ties.map(|t| t.keys.text());
    match (l.status.as_str(), l.median_ms, &l.digest) {
        // Only a variant that asks for ties to the larger index is timed against that answer
        // (its name says so: "cub-main gpu_to_gpu+larger").
        ("ok", Some(median_ms), Some(d))
            if Some(d) == larger.as_ref() && l.imp.contains("larger") =>
        {
            matched.push(format!("{} (ties to the larger index)", l.imp));
            Cell::new(
                State::Timed {
                    median_ms,
                    min_ms: l.min_ms.unwrap_or(median_ms),
                    reps: l.reps.unwrap_or(0),
                },
                format!(
                    "the answer with ties to the larger index, as it asks: {}",
                    l.note
                ),
            )
        }
        ("ok", Some(median_ms), Some(d)) if *d == expected => {
            matched.push(l.imp.clone());
            Cell::new(
                State::Timed {
                    median_ms,
                    min_ms: l.min_ms.unwrap_or(median_ms),
                    reps: l.reps.unwrap_or(0),
                },
                l.note.clone(),
            )
        }
        ("ok", Some(median_ms), d) => {
            let keys = l.raw.get("keys_digest").and_then(serde_json::Value::as_str);
            let right_keys = keys.is_some() && keys == keys_expected.as_deref();
            if right_keys {
                other_ties.push(l.imp.clone());
            } else {
                mismatched.push(l.imp.clone());
            }
            let why = match (keys_expected.as_deref(), keys) {
                _ if right_keys => "the k best keys, but other indices of the k-th key's ties: ",
                (Some(_), Some(_)) => "other keys than the k best (candidates lost): ",
                _ => "",
            };
            Cell::new(
                State::Mismatch {
                    median_ms,
                    digest: d.clone().unwrap_or_default(),
                },
                format!("{why}{}", l.note),
            )
        }
        ("unsupported", ..) => Cell::new(State::Unsupported, l.note.clone()),
        _ => Cell::new(State::Error, l.note.clone()),
    }
}

/// One column's cell from the cells of its lines for a workload (implementation, cell). Usually
/// one line; where a peer times several ways of doing the same thing (thrust's batched set
/// operation: a call per pair, or one call over pair-tagged keys), the column shows the fastest
/// way that matched, the one a user would pick, and its note lists every way with its time. A
/// mismatch or an error is shown before any time, so it cannot hide behind a faster way.
fn column_cell(mut cells: Vec<(String, Cell)>) -> Cell {
    // A peer program prints "unsupported" for the kinds another program of the same column
    // runs (FlashInfer's routing and top-k programs): such a line is no way of its own.
    if cells
        .iter()
        .any(|(_, c)| !matches!(c.state, State::Unsupported))
    {
        cells.retain(|(_, c)| !matches!(c.state, State::Unsupported));
    }
    if cells.len() == 1 {
        if let Some((_, cell)) = cells.pop() {
            return cell;
        }
    }
    let failed = cells
        .iter()
        .position(|(_, c)| matches!(c.state, State::Mismatch { .. } | State::Error));
    let fastest = cells
        .iter()
        .enumerate()
        .filter_map(|(i, (_, c))| c.ms().map(|ms| (i, ms)))
        .min_by(|x, y| x.1.total_cmp(&y.1))
        .map(|(i, _)| i);
    let shown = failed.or(fastest).unwrap_or(0);
    cells.swap(0, shown);
    let ways: Vec<String> = cells
        .iter()
        .map(|(imp, c)| {
            let what = c
                .ms()
                .map_or_else(|| c.text(), |ms| format!("{} ms", report::fmt_ms(ms)));
            format!("{imp} {what}: {}", c.note)
        })
        .collect();
    let note = format!(
        "{} ways, the cell is the first: {}",
        cells.len(),
        ways.join("; ")
    );
    match cells.into_iter().next() {
        Some((_, cell)) => Cell::new(cell.state, note),
        None => Cell::new(State::Missing, ""),
    }
}

/// How a peer line on a tie-heavy row is judged (line_cell): the reference times; the answer
/// with ties to the larger index times only for a variant that asks for it; the k best keys
/// with other tied indices is listed apart, not a failure; other keys are a mismatch.
fn peer_check_selftest(check: &mut dyn FnMut(&str, bool)) {
    let ties = workloads::ties_digests(12, 9, 4096, 64);
    let line = |imp: &str, digest: &Digest, keys: &Digest| peers::PeerLine {
        workload: "t".into(),
        imp: imp.into(),
        status: "ok".into(),
        median_ms: Some(1.0),
        min_ms: Some(1.0),
        reps: Some(1),
        digest: Some(digest.text()),
        note: String::new(),
        raw: serde_json::json!({ "keys_digest": keys.text() }),
    };
    let wrong = Digest::of_words(&[1, 2, 3]);
    let judge = |l: peers::PeerLine| {
        let (mut matched, mut mismatched, mut other) = (Vec::new(), Vec::new(), Vec::new());
        let cell = line_cell(
            &l,
            &ties.smaller.text(),
            Some(&ties),
            &mut matched,
            &mut mismatched,
            &mut other,
        );
        let timed = matches!(cell.state, State::Timed { .. });
        (timed, matched.len(), mismatched.len(), other.len())
    };
    check(
        "peer check: the reference is timed",
        judge(line("p", &ties.smaller, &ties.keys)) == (true, 1, 0, 0),
    );
    check(
        "peer check: ties to the larger index time only where asked",
        judge(line("p gpu_to_gpu+larger", &ties.larger, &ties.keys)) == (true, 1, 0, 0)
            && judge(line("p", &ties.larger, &ties.keys)) == (false, 0, 0, 1),
    );
    check(
        "peer check: other tied indices apart, lost candidates a mismatch",
        judge(line("p", &wrong, &ties.keys)) == (false, 0, 0, 1)
            && judge(line("p", &wrong, &wrong)) == (false, 0, 1, 0),
    );
}

/// CPU references and oxicub per workload, then the peers, the checks and the outputs.
#[allow(clippy::too_many_arguments)]
fn finish(
    args: &Args,
    out_dir: &std::path::Path,
    workloads: &[Workload],
    device: String,
    bw: device::Bandwidth,
    l2_bytes: u64,
    mut generator: Vec<(String, String)>,
    oxicub_cell: &dyn Fn(&Workload, &workloads::Reference, usize) -> (Cell, Cell),
) -> Result<ExitCode> {
    let host_gen = generator[0].1.clone();

    // CPU references and oxicub, workload by workload.
    let mut cache = RefCache::default();
    let mut prepared = Vec::new();
    for w in workloads {
        let t0 = std::time::Instant::now();
        let reference = workloads::cpu_reference(w, &mut cache);
        let rotations = w.rotations(l2_bytes);
        eprintln!(
            "bench-gpu: {}: CPU reference {} ({:.1} s), {} input cop{}",
            w.id,
            reference.digest.text(),
            t0.elapsed().as_secs_f64(),
            rotations,
            if rotations == 1 { "y" } else { "ies" }
        );
        let (oxicub, opt_out) = oxicub_cell(w, &reference, rotations);
        prepared.push((w, reference, rotations, oxicub, opt_out));
    }
    drop(cache);

    // Peers, after all of our own GPU work.
    let plan_path =
        std::env::temp_dir().join(format!("oxicub-bench-plan-{}.txt", std::process::id()));
    let mut plan = vec![format!(
        "generator generator {GEN_CHECK_SEED} {GEN_CHECK_N} {GEN_CHECK_MAX_EXP} {GEN_CHECK_NEAR_RANGE} 0 0 1"
    )];
    plan.extend(prepared.iter().map(|(w, _, rot, _, _)| w.plan_line(*rot)));
    peers::write_plan(&plan_path, &plan)?;
    let mut peer_lines: HashMap<(String, String), Vec<peers::PeerLine>> = HashMap::new();
    let mut peer_failed = false;
    for cmd in &args.peers {
        let (lines, ok) = peers::run_peer(cmd, &plan_path)?;
        peer_failed |= !ok;
        for l in lines {
            if l.workload == "generator" {
                let d = |k: &str| {
                    l.raw
                        .get(k)
                        .and_then(|v| v.as_str())
                        .unwrap_or("?")
                        .to_string()
                };
                generator.push((
                    l.imp.clone(),
                    format!(
                        "f32 {} u32 {} powerlaw {} near {} route {}",
                        d("digest_f32"),
                        d("digest_u32"),
                        d("digest_powerlaw"),
                        d("digest_near"),
                        d("digest_route")
                    ),
                ));
                continue;
            }
            let col = COLUMNS
                .iter()
                .find(|c| c.holds(&l.imp))
                .map_or(l.imp.clone(), |c| c.key.to_string());
            peer_lines
                .entry((l.workload.clone(), col))
                .or_default()
                .push(l);
        }
    }
    let _ = std::fs::remove_file(&plan_path);
    let generator_ok = generator.iter().all(|(_, d)| *d == host_gen);

    // Merge and check.
    let mut failures = 0usize;
    let mut rows = Vec::new();
    for (w, reference, rotations, oxicub, oxicub_opt_out) in prepared {
        let expected = reference.digest.text();
        let ties = reference.ties.as_ref();
        let mut matched = Vec::new();
        let mut mismatched = Vec::new();
        let mut other_ties = Vec::new();
        if let State::Timed { .. } = oxicub.state {
            matched.push("oxicub".to_string());
        }
        if let State::Mismatch { .. } = oxicub.state {
            mismatched.push("oxicub".to_string());
        }
        if let State::Timed { .. } = oxicub_opt_out.state {
            matched.push("oxicub opt-out".to_string());
        }
        if let State::Mismatch { .. } = oxicub_opt_out.state {
            mismatched.push("oxicub opt-out".to_string());
        }
        let mut peer_errors = 0;
        let peers: Vec<Cell> = COLUMNS
            .iter()
            .map(|c| {
                let Some(lines) = peer_lines.get(&(w.id.clone(), c.key.to_string())) else {
                    return Cell::new(State::Missing, "");
                };
                let cells: Vec<(String, Cell)> = lines
                    .iter()
                    .map(|l| {
                        let cell = line_cell(
                            l,
                            &expected,
                            ties,
                            &mut matched,
                            &mut mismatched,
                            &mut other_ties,
                        );
                        (l.imp.clone(), cell)
                    })
                    .collect();
                peer_errors += cells
                    .iter()
                    .filter(|(_, c)| matches!(c.state, State::Error))
                    .count();
                column_cell(cells)
            })
            .collect();
        failures += mismatched.len() + peer_errors;
        failures += [&oxicub, &oxicub_opt_out]
            .into_iter()
            .filter(|c| matches!(c.state, State::Error))
            .count();
        let against = if matches!(oxicub.state, State::Timed { .. }) {
            "oxicub and CPU ref"
        } else {
            "CPU ref"
        };
        let mut check = if matched.is_empty() {
            "nothing checked".to_string()
        } else {
            format!("{} = {against}", matched.join(", "))
        };
        if !mismatched.is_empty() {
            check = format!("{check}; MISMATCH: {}", mismatched.join(", "));
        }
        if !other_ties.is_empty() {
            check = format!(
                "{check}; the k best keys, other tied indices: {}",
                other_ties.join(", ")
            );
        }
        let floor_bytes = w.floor_bytes(reference.out_len);
        rows.push(Row {
            id: w.id.clone(),
            label: w.label.clone(),
            floor_bytes,
            floor_ms: floor_bytes as f64 / (bw.best_gbs() * 1e6),
            reference_digest: expected,
            out_len: reference.out_len,
            rotations,
            oxicub,
            oxicub_opt_out,
            peers,
            check,
        });
    }

    let command = args
        .command
        .clone()
        .unwrap_or_else(|| std::env::args().collect::<Vec<_>>().join(" "));
    let report = Report {
        date: std::env::var("OXICUB_BENCH_DATE").unwrap_or_else(|_| utc_now()),
        device,
        command,
        bandwidth: bw,
        generator,
        generator_ok,
        rows,
    };
    print!("{}", report.text());
    let svg_name = format!("{}.svg", args.name);
    let files = [
        (format!("{}.md", args.name), report.markdown(&svg_name)),
        (
            format!("{}.json", args.name),
            serde_json::to_string_pretty(&report.json()).ctx("serializing the JSON table")?,
        ),
        (svg_name.clone(), report.svg()),
    ];
    for (name, text) in &files {
        let p = out_dir.join(name);
        std::fs::write(&p, text).ctx(format!("writing {}", p.display()))?;
        eprintln!("bench-gpu: wrote {}", p.display());
    }
    if !generator_ok {
        eprintln!("bench-gpu: FAILED: the input generators disagree (see 'generator check')");
    }
    if failures > 0 || peer_failed {
        eprintln!("bench-gpu: FAILED: {failures} result(s) wrong or in error; a peer failed: {peer_failed}");
    }
    Ok(if generator_ok && failures == 0 && !peer_failed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn gen_check_text(f: Digest, u: Digest, p: Digest, near: Digest, route: Digest) -> String {
    format!(
        "f32 {} u32 {} powerlaw {} near {} route {}",
        f.text(),
        u.text(),
        p.text(),
        near.text(),
        route.text()
    )
}

fn host_generator_digests() -> String {
    let f: Vec<u32> = (0..GEN_CHECK_N)
        .map(|i| gen::f32_bits_at(GEN_CHECK_SEED, i))
        .collect();
    let u: Vec<u32> = (0..GEN_CHECK_N)
        .map(|i| gen::u32_at(GEN_CHECK_SEED + 1, i, u32::MAX))
        .collect();
    let p: Vec<u32> = (0..GEN_CHECK_N)
        .map(|i| gen::powerlaw_len(GEN_CHECK_SEED + 2, i, GEN_CHECK_MAX_EXP))
        .collect();
    let near: Vec<u32> = (0..GEN_CHECK_N)
        .map(|i| gen::near_i32_at(GEN_CHECK_SEED + 3, i, GEN_CHECK_NEAR_RANGE) as u32)
        .collect();
    let e = u64::from(GEN_CHECK_ROUTE_EXPERTS);
    let route: Vec<u32> = (0..GEN_CHECK_N)
        .map(|i| {
            gen::route_logit(
                GEN_CHECK_SEED + 4,
                i / e,
                (i % e) as u32,
                GEN_CHECK_ROUTE_EXPERTS,
            )
            .to_bits()
        })
        .collect();
    gen_check_text(
        Digest::of_words(&f),
        Digest::of_words(&u),
        Digest::of_words(&p),
        Digest::of_words(&near),
        Digest::of_words(&route),
    )
}

fn device_generator_digests(gpu: &Gpu) -> Result<String> {
    let f = gpu.to_host(&gpu.gen_f32(GEN_CHECK_N, GEN_CHECK_SEED)?)?;
    let u = gpu.to_host(&gpu.gen_u32(GEN_CHECK_N, GEN_CHECK_SEED + 1, u32::MAX)?)?;
    let p =
        gpu.to_host(&gpu.gen_powerlaw_len(GEN_CHECK_N, GEN_CHECK_SEED + 2, GEN_CHECK_MAX_EXP)?)?;
    let near: Vec<u32> = gpu
        .to_host(&gpu.gen_near_i32(GEN_CHECK_N, GEN_CHECK_SEED + 3, GEN_CHECK_NEAR_RANGE)?)?
        .into_iter()
        .map(|k| k as u32)
        .collect();
    let route = gpu.to_host(&gpu.gen_route_logits(
        GEN_CHECK_N / u64::from(GEN_CHECK_ROUTE_EXPERTS),
        GEN_CHECK_SEED + 4,
        GEN_CHECK_ROUTE_EXPERTS,
    )?)?;
    Ok(gen_check_text(
        Digest::of_f32(&f),
        Digest::of_words(&u),
        Digest::of_words(&p),
        Digest::of_words(&near),
        Digest::of_f32(&route),
    ))
}

/// The routing rows' inputs and reference: the generator's logits are the grid, once per token
/// and exact in bf16; over every permutation the generator can pick, the f64 routing has margins
/// far above f32 rounding (so every faithful implementation gets the same ids); the CPU
/// reference (in parallel, digested) equals the same steps token by token and oxicub's Host
/// backend (the library's CPU implementation of the kernel's steps, in f32).
fn route_selftest(check: &mut dyn FnMut(&str, bool), cache: &mut RefCache) -> Result<()> {
    use workloads::{Router, ROUTE_EXPERTS, ROUTE_K};
    let e = ROUTE_EXPERTS as usize;
    let grid: Vec<u32> = (0..e)
        .map(|p| ((p as f32 - (e / 2) as f32) / (e / 2) as f32).to_bits())
        .collect();
    let mut logits = vec![0f32; e];
    let mut each_once = true;
    for t in 0..2000 {
        workloads::route_logits(31, t, &mut logits);
        let mut bits: Vec<u32> = logits.iter().map(|x| x.to_bits()).collect();
        bits.sort_unstable_by(|a, b| f32::from_bits(*a).total_cmp(&f32::from_bits(*b)));
        each_once &= bits == grid;
    }
    check(
        "router logits: each token holds -1 .. 127/128 in steps of 1/128, each once",
        each_once,
    );
    check(
        "router logits are exact in bf16",
        grid.iter().all(|b| b & 0xFFFF == 0),
    );
    check(
        "router logits for 2 experts are -1 and 0",
        (0..100).all(|t| {
            let mut v = [0, 1].map(|x| gen::route_logit(32, t, x, 2));
            v.sort_by(f32::total_cmp);
            v == [-1.0, 0.0]
        }),
    );
    // Every affine permutation p(e) = (e * m + o) mod 256 the generator can pick.
    for router in [Router::DeepSeekV3, Router::Softmax] {
        let (mut group, mut expert) = (f64::INFINITY, f64::INFINITY);
        for m in (1..e).step_by(2) {
            for o in 0..e {
                for (x, l) in logits.iter_mut().enumerate() {
                    *l = ((x * m + o) % e) as f32 / (e / 2) as f32 - 1.0;
                }
                let r = workloads::route_ids(router, &logits);
                group = group.min(r.group_margin);
                expert = expert.min(r.expert_margin);
            }
        }
        check(
            &format!(
                "{router:?}: over all {} permutations, kept-group margin {group:.2e}, expert \
                 margin {expert:.2e} (relative; f32 rounding is 1.2e-7)",
                e * e / 2
            ),
            group > 1e-5 && expert > 1e-3,
        );
    }
    // The CPU reference against oxicub's Host backend and against the plain per-token version.
    for (router, seed) in [(Router::DeepSeekV3, 33u64), (Router::Softmax, 34)] {
        let tokens = 3000u64;
        let mut all = Vec::with_capacity(tokens as usize * e);
        let mut plain = Vec::new();
        for t in 0..tokens {
            workloads::route_logits(seed, t, &mut logits);
            all.extend_from_slice(&logits);
            plain.extend(workloads::route_ids(router, &logits).ids);
        }
        let host = oxicub::routing::host_ids(router, &all)?;
        let r = workloads::cpu_reference(
            &Workload {
                id: "t".into(),
                label: "t".into(),
                kind: Kind::Route { router, tokens },
                seed,
                warmup: 0,
                reps: 0,
            },
            cache,
        );
        check(
            &format!("routing {router:?}: CPU reference = oxicub Host = per token"),
            host == plain && r.digest == Digest::of_words(&plain) && r.out_len == tokens * ROUTE_K,
        );
    }
    Ok(())
}

/// "YYYY-MM-DD HH:MM UTC" from the system clock (civil-from-days, proleptic Gregorian).
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Host-only checks (no GPU): the CPU references against plain, obviously-correct versions on
/// small inputs, and the host generator's check digests (compare them with the peers' by hand:
/// `g++ -x c++` on gen.cuh, or numpy, print the same). Returns failure if any check fails.
fn selftest() -> Result<ExitCode> {
    let mut bad = 0;
    let mut check = |what: &str, ok: bool| {
        println!("{} {what}", if ok { "ok  " } else { "FAIL" });
        bad += usize::from(!ok);
    };
    println!("generator check digests: {}", host_generator_digests());
    println!(
        "first values: f32(1,0..4) = {:?}, u32(2,0..4) = {:?}, powerlaw(3,0..4) = {:?}, \
         near(4,0..4,1000) = {:?}",
        (0..4).map(|i| gen::f32_at(1, i)).collect::<Vec<_>>(),
        (0..4)
            .map(|i| gen::u32_at(2, i, u32::MAX))
            .collect::<Vec<_>>(),
        (0..4)
            .map(|i| gen::powerlaw_len(3, i, 16))
            .collect::<Vec<_>>(),
        (0..4)
            .map(|i| gen::near_i32_at(4, i, 1000))
            .collect::<Vec<_>>()
    );
    check(
        "f32 keys lie in [0, 1)",
        (0..100_000).all(|i| (0.0..1.0).contains(&gen::f32_at(5, i))),
    );
    check(
        "power-law lengths lie in [1, 2^17)",
        (0..100_000).all(|i| (1..(1 << 17)).contains(&gen::powerlaw_len(5, i, 16))),
    );
    check(
        "near keys lie in [i, i + R], both bounds reached (R = 3)",
        (0..100_000u64)
            .all(|i| (0..=3).contains(&(i64::from(gen::near_i32_at(5, i, 3)) - i as i64)))
            && (0..3).all(|r| {
                (0..100_000u64).any(|i| i64::from(gen::near_i32_at(5, i, 3)) - i as i64 == r)
            }),
    );
    check(
        "near keys of 2^26 + 1000 stay non-negative int32",
        gen::near_i32_at(5, (1 << 26) - 1, 1000) >= (1 << 26) - 1,
    );
    check(
        "random i32 keys are the u32 stream's bits",
        (0..1000).all(|i| gen::i32_at(6, i) as u32 == gen::u32_at(6, i, u32::MAX))
            && (0..1000).any(|i| gen::i32_at(6, i) < 0),
    );
    check(
        "digest of parts adds up",
        Digest::of_words_at(0, &[1, 2]).add(Digest::of_words_at(2, &[3]))
            == Digest::of_words(&[1, 2, 3]),
    );
    check(
        "int64 values digest as their little-endian words",
        Digest::of_words(&[7]).add(Digest::of_i64_at(1, &[5, -2, 1 << 40]))
            == Digest::of_words(&[7, 5, 0, u32::MAX - 1, u32::MAX, 0, 1 << 8]),
    );

    let mut cache = RefCache::default();
    let wl = |kind: Kind, seed: u64| Workload {
        id: "t".into(),
        label: "t".into(),
        kind,
        seed,
        warmup: 0,
        reps: 0,
    };
    // top-k: against a full sort
    for (n, k) in [(100_000u64, 8u64), (100_000, 1000), (5000, 5000)] {
        let r = workloads::cpu_reference(&wl(Kind::TopK { n, k }, 9), &mut cache);
        let mut all: Vec<u32> = (0..n).map(|i| gen::f32_bits_at(9, i)).collect();
        all.sort_unstable_by(|a, b| b.cmp(a));
        check(
            &format!("top-k n={n} k={k}"),
            r.digest == Digest::of_words(&all[..k as usize]),
        );
    }
    // batched: against per-row full sorts; ascending rows also against their last k keys, bf16
    // keys against the f32 keys they truncate, ragged rows against their lengths' bounds
    for rows in [Rows::Random, Rows::Ascending, Rows::Bf16, Rows::Ragged] {
        let (segments, len, k) = (37u64, 300u64, 7u64);
        let kind = Kind::Batched {
            segments,
            len,
            k,
            rows,
        };
        let r = workloads::cpu_reference(&wl(kind, 11), &mut cache);
        let key = |i: u64| match rows {
            Rows::Random | Rows::Ragged => gen::f32_bits_at(11, i),
            Rows::Ascending => gen::ramp_bits_at(11, i, len),
            Rows::Bf16 => u32::from(gen::bf16_bits_at(11, i)),
            Rows::Ties => unreachable!("checked below"),
        };
        let lens = workloads::ragged_lens(11, segments, len, k);
        let mut want = Vec::new();
        let mut shape_ok = true;
        for s in 0..segments {
            let row_len = if rows == Rows::Ragged {
                lens[s as usize]
            } else {
                len
            };
            let mut row: Vec<u32> = (0..row_len).map(|j| key(s * len + j)).collect();
            shape_ok &= match rows {
                Rows::Random => true,
                Rows::Ascending => row
                    .windows(2)
                    .all(|w| f32::from_bits(w[0]) < f32::from_bits(w[1])),
                Rows::Bf16 => (0..len).all(|j| {
                    let (x, b) = (gen::f32_at(11, s * len + j), key(s * len + j));
                    let t = half::bf16::from_bits(b as u16).to_f32();
                    t <= x && x - t < x / 128.0 + f32::MIN_POSITIVE
                }),
                Rows::Ragged => (k..=len).contains(&row_len),
                Rows::Ties => unreachable!("checked below"),
            };
            row.sort_unstable_by(|a, b| b.cmp(a));
            want.extend_from_slice(&row[..k as usize]);
        }
        check(
            &format!("batched top-k, {rows:?} rows"),
            r.digest == Digest::of_words(&want) && shape_ok,
        );
    }
    // tie-heavy rows: keys then index sets, ties to the smaller index (against a stable sort
    // of each row), and at the bench's shape the k-th key's tie class straddles k in every row
    {
        let (segments, len, k) = (9u64, 4096u64, 64u64);
        let kind = Kind::Batched {
            segments,
            len,
            k,
            rows: Rows::Ties,
        };
        let r = workloads::cpu_reference(&wl(kind, 12), &mut cache);
        let (mut keys, mut indices, mut larger) = (Vec::new(), Vec::new(), Vec::new());
        for s in 0..segments {
            // stable: equal keys keep index order (reversed: the larger index first)
            let mut order: Vec<u64> = (0..len).collect();
            order.sort_by_key(|&j| std::cmp::Reverse(gen::tie_bits_at(12, s * len + j)));
            let mut reversed: Vec<u64> = (0..len).rev().collect();
            reversed.sort_by_key(|&j| std::cmp::Reverse(gen::tie_bits_at(12, s * len + j)));
            let mut top_keys: Vec<u32> = order[..k as usize]
                .iter()
                .map(|&j| gen::tie_bits_at(12, s * len + j))
                .collect();
            let mut top_at: Vec<u32> = order[..k as usize].iter().map(|&j| j as u32).collect();
            let mut top_larger: Vec<u32> =
                reversed[..k as usize].iter().map(|&j| j as u32).collect();
            top_keys.sort_unstable_by(|a, b| b.cmp(a));
            top_at.sort_unstable();
            top_larger.sort_unstable();
            keys.extend(top_keys);
            indices.extend(top_at);
            larger.extend(top_larger);
        }
        let key_digest = Digest::of_words(&keys);
        let mut with_larger = keys.clone();
        with_larger.extend(larger);
        keys.extend(indices);
        // The reference carries the other digests the peers are judged by.
        let others_ok = r.ties.is_some_and(|t| {
            t.keys == key_digest
                && t.larger == Digest::of_words(&with_larger)
                && t.smaller == r.digest
                && t.larger != t.smaller
        });
        let (len, k) = (131_072u64, 2048u64);
        let straddles = (0..64).all(|s| {
            let row: Vec<u32> = (0..len)
                .map(|j| gen::tie_bits_at(214, s * len + j))
                .collect();
            let mut sorted = row.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            let kth = sorted[k as usize - 1];
            row.iter().filter(|&&x| x == kth).count() as u64
                > sorted[..k as usize].iter().filter(|&&x| x == kth).count() as u64
        });
        check(
            "batched top-k, tie-heavy rows (index sets)",
            r.digest == Digest::of_words(&keys) && straddles && others_ok,
        );
    }
    // ragged rows: lengths in [k, len], a third of the way on average, every row length
    // reachable (gen.cuh: oxb_ragged_len)
    {
        let (rows, len, k) = (100_000u64, 131_072u64, 2048u64);
        let lens = workloads::ragged_lens(5, rows, len, k);
        let mean = lens.iter().sum::<u64>() as f64 / rows as f64;
        let expect = k as f64 + (len - k) as f64 / 3.0;
        check(
            "ragged row lengths",
            lens.iter().all(|n| (k..=len).contains(n))
                && (mean - expect).abs() < 0.01 * expect
                && lens.iter().any(|&n| n < k + 64)
                && lens.iter().any(|&n| n > len - 64),
        );
    }
    // segmented sorts: against sorting each segment of a materialized input
    {
        let seg_check = |off: &[u64], seed: u64| {
            let n = *off.last().unwrap_or(&0);
            let mut v: Vec<f32> = (0..n).map(|i| gen::f32_at(seed, i)).collect();
            for s in 0..off.len() - 1 {
                v[off[s] as usize..off[s + 1] as usize].sort_by(f32::total_cmp);
            }
            Digest::of_f32(&v)
        };
        let r = workloads::cpu_reference(
            &wl(
                Kind::SegSort {
                    segments: 50,
                    len: 129,
                },
                13,
            ),
            &mut cache,
        );
        let off: Vec<u64> = (0..=50).map(|s| s * 129).collect();
        check("segmented sort, uniform", r.digest == seg_check(&off, 13));
        let r = workloads::cpu_reference(
            &wl(
                Kind::SegSortPowerLaw {
                    segments: 40,
                    max_exp: 10,
                },
                14,
            ),
            &mut cache,
        );
        let off = gen::powerlaw_offsets(14, 40, 10);
        check(
            "segmented sort, power-law",
            r.digest == seg_check(&off, 14) && r.out_len == off[40],
        );
    }
    // segmented sorts with values: against a stable sort of each row's (key, position) pairs,
    // on rows long enough to hold equal keys (2^13 keys from 2^24 values: about 2 ties a row)
    for carry in [workloads::Carry::Values, workloads::Carry::Indices] {
        let (segments, len, seed) = (40u64, 8192u64, 15u64);
        let n = segments * len;
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        let mut ties = 0;
        for s in 0..segments {
            let mut row: Vec<(f32, u64)> = (0..len)
                .map(|j| (gen::f32_at(seed, s * len + j), j))
                .collect();
            row.sort_by(|a, b| a.0.total_cmp(&b.0)); // stable
            ties += row.windows(2).filter(|w| w[0].0 == w[1].0).count();
            keys.extend(row.iter().map(|p| p.0.to_bits()));
            for &(_, j) in &row {
                match carry {
                    workloads::Carry::Values => values.push((s * len + j) as u32),
                    workloads::Carry::Indices => values.extend([j as u32, 0]),
                }
            }
        }
        let r = workloads::cpu_reference(
            &wl(
                Kind::SegSortCarry {
                    segments,
                    len,
                    carry,
                },
                seed,
            ),
            &mut cache,
        );
        keys.extend_from_slice(&values);
        check(
            &format!("segmented sort with {carry:?} ({ties} equal neighbours)"),
            ties > 0 && r.digest == Digest::of_words(&keys) && r.out_len == n,
        );
    }
    // locality sort: against a plain sort of the materialized keys (signed order)
    for keys in [
        workloads::LocalityKeys::Near { range: 25 },
        workloads::LocalityKeys::Near { range: 1000 },
        workloads::LocalityKeys::Random,
    ] {
        let n = 300_001u64;
        let mut v: Vec<i32> = (0..n)
            .map(|i| workloads::locality_key(16, i, keys))
            .collect();
        v.sort_unstable();
        let words: Vec<u32> = v.iter().map(|&k| k as u32).collect();
        let r = workloads::cpu_reference(&wl(Kind::Locality { n, keys }, 16), &mut cache);
        check(
            &format!("locality sort, {keys:?}"),
            r.digest == Digest::of_words(&words) && r.out_len == n,
        );
    }
    // set operations and merge: against per-key counts (min, max, a-b, |a-b|, a+b copies of
    // each key)
    let count = |keys: &mut dyn Iterator<Item = u32>| {
        let mut m = std::collections::BTreeMap::<u32, i64>::new();
        for key in keys {
            *m.entry(key).or_default() += 1;
        }
        m
    };
    let counted = |op: workloads::SetOp,
                   ca: &std::collections::BTreeMap<u32, i64>,
                   cb: &std::collections::BTreeMap<u32, i64>| {
        let keys: std::collections::BTreeSet<u32> = ca.keys().chain(cb.keys()).copied().collect();
        let mut want = Vec::new();
        for &key in &keys {
            let (a, b) = (
                ca.get(&key).copied().unwrap_or(0),
                cb.get(&key).copied().unwrap_or(0),
            );
            let c = match op {
                workloads::SetOp::Intersection => a.min(b),
                workloads::SetOp::Union => a.max(b),
                workloads::SetOp::Difference => (a - b).max(0),
                workloads::SetOp::SymmetricDifference => (a - b).abs(),
                workloads::SetOp::Merge => a + b,
            };
            want.extend(std::iter::repeat_n(key, c as usize));
        }
        want
    };
    let all_ops = [
        workloads::SetOp::Intersection,
        workloads::SetOp::Union,
        workloads::SetOp::Difference,
        workloads::SetOp::SymmetricDifference,
        workloads::SetOp::Merge,
    ];
    for mask in [0xFFu32, 0x7FFF_FFFF] {
        let n = 20_000u64;
        let stream = |seed: u64| count(&mut (0..n).map(|i| gen::u32_at(seed, i, mask)));
        let (ca, cb) = (stream(21), stream(22));
        for op in all_ops {
            let want = counted(op, &ca, &cb);
            let r = workloads::cpu_reference(&wl(Kind::Set { op, n, mask }, 21), &mut cache);
            check(
                &format!(
                    "{} mask {mask:#x} ({} keys out)",
                    op.plan_kind(),
                    want.len()
                ),
                r.digest == Digest::of_words(&want),
            );
        }
    }
    // batched set operations: each pair against per-key counts, the keys then the int64 offsets
    {
        let (pairs, max_exp, mask, seed) = (500u64, 6u32, 0x3Fu32, 23u64);
        let [a_off, b_off] = workloads::batched_set_offsets(seed, pairs, max_exp);
        let segment = |off: &[u64], key_seed: u64, p: usize| {
            count(&mut (off[p]..off[p + 1]).map(|i| gen::u32_at(key_seed, i, mask)))
        };
        for op in all_ops {
            let (mut keys, mut offsets) = (Vec::new(), vec![0i64]);
            for p in 0..pairs as usize {
                let (ca, cb) = (segment(&a_off, seed + 2, p), segment(&b_off, seed + 3, p));
                keys.extend(counted(op, &ca, &cb));
                offsets.push(keys.len() as i64);
            }
            let kind = Kind::BatchedSet {
                op,
                pairs,
                max_exp,
                mask,
            };
            let r = workloads::cpu_reference(&wl(kind, seed), &mut cache);
            let n = keys.len() as u64;
            check(
                &format!("{} ({n} keys out)", op.batched_plan_kind()),
                r.digest == Digest::of_words(&keys).add(Digest::of_i64_at(n, &offsets))
                    && r.out_len == n,
            );
        }
    }
    route_selftest(&mut check, &mut cache)?;
    peer_check_selftest(&mut check);
    // NVRTC compiles the shared generator (needs libnvrtc, not a GPU)
    if ::oxicub::kernels::nvrtc_available().is_ok() {
        match device::compile_generator((9, 0)) {
            Ok(ptx) => check(
                "NVRTC compiles gen.cuh for compute_90",
                [
                    "oxb_gen_f32",
                    "oxb_gen_u32",
                    "oxb_gen_near_i32",
                    "oxb_gen_powerlaw_len",
                    "oxb_gen_route_logits",
                    "oxb_copy16",
                    "oxb_empty",
                ]
                .iter()
                .all(|k| ptx.to_src().contains(&format!(".entry {k}("))),
            ),
            Err(e) => check(&format!("NVRTC compiles gen.cuh: {e}"), false),
        }
    } else {
        println!("skip NVRTC compile of gen.cuh (no libnvrtc; `source .ci/nvrtc.sh` provides one)");
    }
    // every workload's plan line has the 9 fields the peers read
    check(
        "plan lines",
        workloads::all()
            .iter()
            .all(|w| w.plan_line(1).split_whitespace().count() == 9),
    );
    println!(
        "selftest: {}",
        if bad == 0 { "all passed" } else { "FAILED" }
    );
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
