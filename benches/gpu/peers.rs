//! Running the peer programs and reading what they print.
//!
//! Protocol. bench-gpu writes a plan file, one workload per line:
//!     name kind seed p1 p2 p3 warmup reps rotations
//! (kinds and parameters: Workload::plan_line; the first line is the generator check, kind
//! "generator"). A peer command is run as `sh -c '<command> <plan>'`; its stdout carries one JSON
//! object per line:
//!     {"workload", "impl", "status": "ok" | "unsupported" | "error", "median_ms", "min_ms",
//!      "reps", "rotations", "digest", "note"}
//! (the generator line has digest_f32 / digest_u32 / digest_powerlaw / digest_near / digest_route
//! instead: the first p1 values of streams seed .. seed + 4, the router logits over 256 experts).
//! Other stdout lines and all of stderr are passed through to our stderr as the peer's log.
//!
//! Routing kinds: "route_deepseek_v3" and "route_softmax", p1 = tokens, p2 = experts, p3 = k
//! (workloads.rs: `Router`; DeepSeek-V3's 8 groups, top 4 and scale 2.5 come with the kind).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::err::{Context, Result};

pub fn write_plan(path: &Path, lines: &[String]) -> Result<()> {
    let mut f = std::fs::File::create(path).ctx(format!("creating {}", path.display()))?;
    writeln!(
        f,
        "# oxicub bench-gpu plan: name kind seed p1 p2 p3 warmup reps rotations"
    )
    .and_then(|_| lines.iter().try_for_each(|l| writeln!(f, "{l}")))
    .ctx(format!("writing {}", path.display()))
}

/// One parsed result line.
#[derive(Clone, Debug)]
pub struct PeerLine {
    pub workload: String,
    pub imp: String,
    pub status: String,
    pub median_ms: Option<f64>,
    pub min_ms: Option<f64>,
    pub reps: Option<u64>,
    pub digest: Option<String>,
    pub note: String,
    pub raw: Value,
}

fn parse_line(v: Value) -> Option<PeerLine> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    Some(PeerLine {
        workload: s("workload")?,
        imp: s("impl")?,
        status: s("status").unwrap_or_else(|| "ok".into()),
        median_ms: v.get("median_ms").and_then(Value::as_f64),
        min_ms: v.get("min_ms").and_then(Value::as_f64),
        reps: v.get("reps").and_then(Value::as_u64),
        digest: s("digest"),
        note: s("note").unwrap_or_default(),
        raw: v,
    })
}

/// Runs one peer command on the plan; returns its result lines and whether it exited cleanly.
/// A peer that cannot be started is an error; one that fails part-way keeps what it printed.
pub fn run_peer(command: &str, plan: &Path) -> Result<(Vec<PeerLine>, bool)> {
    let full = format!("{command} '{}'", plan.display());
    eprintln!("bench-gpu: running peer: {full}");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&full)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .ctx(format!("starting peer `{full}`"))?;
    let mut lines = Vec::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let line = line.ctx(format!("reading the output of `{full}`"))?;
            let t = line.trim();
            match serde_json::from_str::<Value>(t).ok().and_then(parse_line) {
                Some(p) if t.starts_with('{') => lines.push(p),
                _ => eprintln!("  [peer] {line}"),
            }
        }
    }
    let status = child.wait().ctx(format!("waiting for `{full}`"))?;
    if !status.success() {
        eprintln!("bench-gpu: peer `{full}` exited with {status}");
    }
    Ok((lines, status.success()))
}
