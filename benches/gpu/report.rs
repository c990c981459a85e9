//! The result table: merged rows, the checks, and the three outputs (text on stdout, Markdown,
//! JSON) plus the SVG plot of every implementation's time against the floor.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::device::Bandwidth;

/// What one implementation produced for one workload.
#[derive(Clone, Debug)]
pub enum State {
    /// Timed, and its digest matched the expected one.
    Timed {
        median_ms: f64,
        min_ms: f64,
        reps: u64,
    },
    /// Ran, but the result differs from the reference: the time does not count.
    Mismatch {
        median_ms: f64,
        digest: String,
    },
    /// oxicub has no implementation of this workload yet.
    NotImplemented,
    /// The peer has no such operation (or no variant that can take this shape).
    Unsupported,
    Error,
    /// The peer printed nothing for this workload.
    Missing,
}

#[derive(Clone, Debug)]
pub struct Cell {
    pub state: State,
    pub note: String,
}

impl Cell {
    pub fn new(state: State, note: impl Into<String>) -> Cell {
        Cell {
            state,
            note: note.into(),
        }
    }
    pub fn ms(&self) -> Option<f64> {
        match self.state {
            State::Timed { median_ms, .. } => Some(median_ms),
            _ => None,
        }
    }
    pub fn text(&self) -> String {
        match &self.state {
            State::Timed { median_ms, .. } => fmt_ms(*median_ms),
            State::Mismatch { median_ms, .. } => format!("MISMATCH ({})", fmt_ms(*median_ms)),
            State::NotImplemented => "not implemented".into(),
            State::Unsupported => "n/a".into(),
            State::Error => "error".into(),
            State::Missing => "missing".into(),
        }
    }
    fn json(&self) -> Value {
        let (status, extra) = match &self.state {
            State::Timed {
                median_ms,
                min_ms,
                reps,
            } => (
                "ok",
                json!({"median_ms": median_ms, "min_ms": min_ms, "reps": reps}),
            ),
            State::Mismatch { median_ms, digest } => (
                "mismatch",
                json!({"median_ms": median_ms, "digest": digest}),
            ),
            State::NotImplemented => ("not implemented", json!({})),
            State::Unsupported => ("unsupported", json!({})),
            State::Error => ("error", json!({})),
            State::Missing => ("missing", json!({})),
        };
        let mut v = json!({"status": status, "note": self.note});
        if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
            o.extend(e);
        }
        v
    }
}

/// A peer column: one or more implementation names shown together.
pub struct Column {
    pub key: &'static str,
    pub title: &'static str,
    /// Implementation names; one ending in `*` stands for every name that starts with the rest
    /// (a peer's variants: `flashinfer filtered`, `cub-main gpu_to_gpu+smaller`, ...).
    pub imps: &'static [&'static str],
}

impl Column {
    /// Whether implementation `imp` belongs to this column.
    pub fn holds(&self, imp: &str) -> bool {
        self.imps.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => imp.starts_with(prefix),
            None => imp == *p,
        })
    }
}

/// CUB and thrust come from the same library (CCCL) and never cover the same workload, so they
/// share a column. "thrust loop" and "thrust tagged" are two ways of one batched workload; the
/// column shows the faster (gpu.rs: `column_cell`). CUB from CCCL's main branch (its cluster
/// `DeviceBatchedTopK`) is a column of its own, and so are FlashInfer's backends and modes:
/// each column shows its fastest variant that matched, or the first that did not.
pub const COLUMNS: &[Column] = &[
    Column {
        key: "cccl",
        title: "CUB/thrust",
        imps: &["cub", "thrust", "thrust loop", "thrust tagged"],
    },
    Column {
        key: "cccl-main",
        title: "CUB main",
        imps: &["cub-main", "cub-main *"],
    },
    Column {
        key: "torch",
        title: "PyTorch",
        imps: &["torch"],
    },
    Column {
        key: "flashinfer",
        title: "FlashInfer",
        imps: &["flashinfer", "flashinfer *"],
    },
];

pub struct Row {
    pub id: String,
    pub label: String,
    pub floor_bytes: u64,
    pub floor_ms: f64,
    pub reference_digest: String,
    pub out_len: u64,
    pub rotations: usize,
    pub oxicub: Cell,
    /// oxicub's opt-out contract (no determinism, unsorted) where it has one.
    pub oxicub_opt_out: Cell,
    /// One cell per entry of COLUMNS.
    pub peers: Vec<Cell>,
    /// What the timed results were checked against.
    pub check: String,
}

pub struct Report {
    pub date: String,
    pub device: String,
    pub command: String,
    pub bandwidth: Bandwidth,
    /// (source, digest text) of the generator check, and whether all agree.
    pub generator: Vec<(String, String)>,
    pub generator_ok: bool,
    pub rows: Vec<Row>,
}

pub fn fmt_ms(ms: f64) -> String {
    if ms < 0.1 {
        format!("{ms:.4}")
    } else if ms < 10.0 {
        format!("{ms:.3}")
    } else if ms < 100.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.1}")
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "—".into(),
    }
}

fn best_peer_ms(r: &Row) -> Option<f64> {
    r.peers.iter().filter_map(Cell::ms).min_by(f64::total_cmp)
}

impl Report {
    fn header_cells(&self) -> Vec<String> {
        let mut h = vec![
            "workload".to_string(),
            "oxicub ms".to_string(),
            "oxicub opt-out ms".to_string(),
            "default/opt-out".to_string(),
        ];
        h.extend(COLUMNS.iter().map(|c| format!("{} ms", c.title)));
        h.push("floor ms".into());
        h.extend(COLUMNS.iter().map(|c| format!("oxicub/{}", c.title)));
        h.push("oxicub/floor".into());
        h.push("best peer/floor".into());
        h.push("check".into());
        h
    }

    fn row_cells(&self, r: &Row) -> Vec<String> {
        let mut c = vec![
            r.label.clone(),
            r.oxicub.text(),
            r.oxicub_opt_out.text(),
            ratio(r.oxicub.ms(), r.oxicub_opt_out.ms()),
        ];
        c.extend(r.peers.iter().map(Cell::text));
        c.push(fmt_ms(r.floor_ms));
        c.extend(r.peers.iter().map(|p| ratio(r.oxicub.ms(), p.ms())));
        c.push(ratio(r.oxicub.ms(), Some(r.floor_ms)));
        c.push(ratio(best_peer_ms(r), Some(r.floor_ms)));
        c.push(r.check.clone());
        c
    }

    fn bandwidth_line(&self) -> String {
        let b = &self.bandwidth;
        format!(
            "{:.0} GB/s (better of cuMemcpyDtoD {:.0} GB/s and a copy kernel {:.0} GB/s; {} MiB read + written per copy, median of {})",
            b.best_gbs(),
            b.memcpy_gbs(),
            b.kernel_gbs(),
            b.bytes_moved >> 20,
            b.memcpy.reps
        )
    }

    fn generator_line(&self) -> String {
        let parts: Vec<String> = self
            .generator
            .iter()
            .map(|(src, d)| format!("{src} {d}"))
            .collect();
        format!(
            "{} ({})",
            if self.generator_ok {
                "all agree"
            } else {
                "DISAGREE"
            },
            parts.join("; ")
        )
    }

    /// Aligned plain-text table for the terminal.
    pub fn text(&self) -> String {
        let mut rows = vec![self.header_cells()];
        rows.extend(self.rows.iter().map(|r| self.row_cells(r)));
        let ncol = rows[0].len();
        let width: Vec<usize> = (0..ncol)
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        let mut s = String::new();
        let _ = writeln!(s, "device: {}", self.device);
        let _ = writeln!(s, "copy bandwidth: {}", self.bandwidth_line());
        let _ = writeln!(s, "generator check: {}", self.generator_line());
        for (k, r) in rows.iter().enumerate() {
            let line: Vec<String> = r
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let pad = width[i] - c.chars().count();
                    if i == 0 || i + 1 == ncol {
                        format!("{c}{}", " ".repeat(pad))
                    } else {
                        format!("{}{c}", " ".repeat(pad))
                    }
                })
                .collect();
            let _ = writeln!(s, "{}", line.join("  ").trim_end());
            if k == 0 {
                let _ = writeln!(
                    s,
                    "{}",
                    "-".repeat(width.iter().sum::<usize>() + 2 * (ncol - 1))
                );
            }
        }
        s
    }

    pub fn markdown(&self, plot_file: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# oxicub GPU benchmark\n");
        let _ = writeln!(s, "- date: {}", self.date);
        let _ = writeln!(s, "- device: {}", self.device);
        let _ = writeln!(s, "- command: `{}`", self.command);
        let _ = writeln!(s, "- copy bandwidth: {}", self.bandwidth_line());
        let _ = writeln!(
            s,
            "- input generator check (digest of the first 2^20 values): {}",
            self.generator_line()
        );
        let _ = writeln!(
            s,
            "- times: median of the timed runs between CUDA events, in ms (warm-up first; inputs that fit in L2 rotate over identical copies); \
             floor = bytes that must move (inputs read once, outputs written once) / copy bandwidth; \
             a time counts only when the result's digest equals the reference (oxicub's once it exists, and the CPU reference computed from the generator)\n"
        );
        let h = self.header_cells();
        let _ = writeln!(s, "| {} |", h.join(" | "));
        let align: Vec<&str> = (0..h.len())
            .map(|i| {
                if i == 0 || i + 1 == h.len() {
                    "---"
                } else {
                    "---:"
                }
            })
            .collect();
        let _ = writeln!(s, "| {} |", align.join(" | "));
        for r in &self.rows {
            let _ = writeln!(
                s,
                "| {} |",
                self.row_cells(r).join(" | ").replace('\n', " ")
            );
        }
        let _ = writeln!(s, "\n![time / floor per workload]({plot_file})\n");
        let _ = writeln!(s, "## What ran\n");
        for r in &self.rows {
            let mut notes = Vec::new();
            if !r.oxicub.note.is_empty() {
                notes.push(format!("oxicub: {}", r.oxicub.note));
            }
            if !r.oxicub_opt_out.note.is_empty() {
                notes.push(format!("oxicub opt-out: {}", r.oxicub_opt_out.note));
            }
            for (c, cell) in COLUMNS.iter().zip(&r.peers) {
                if !cell.note.is_empty() {
                    notes.push(format!("{}: {}", c.title, cell.note));
                }
            }
            let _ = writeln!(
                s,
                "- {} (`{}`, floor {} MB, {} output keys, {} input cop{}): {}",
                r.label,
                r.id,
                r.floor_bytes / 1_000_000,
                r.out_len,
                r.rotations,
                if r.rotations == 1 { "y" } else { "ies" },
                notes.join("; ")
            );
        }
        s
    }

    pub fn json(&self) -> Value {
        let b = &self.bandwidth;
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let mut peers = serde_json::Map::new();
                for (c, cell) in COLUMNS.iter().zip(&r.peers) {
                    let mut v = cell.json();
                    if let (Some(o), Some(ms), Some(ox)) =
                        (v.as_object_mut(), cell.ms(), r.oxicub.ms())
                    {
                        o.insert("oxicub_over_peer".into(), json!(ox / ms));
                    }
                    if let (Some(o), Some(ms)) = (v.as_object_mut(), cell.ms()) {
                        o.insert("over_floor".into(), json!(ms / r.floor_ms));
                    }
                    peers.insert(c.key.into(), v);
                }
                json!({
                    "workload": r.id,
                    "label": r.label,
                    "floor_bytes": r.floor_bytes,
                    "floor_ms": r.floor_ms,
                    "reference_digest": r.reference_digest,
                    "output_keys": r.out_len,
                    "rotations": r.rotations,
                    "oxicub": r.oxicub.json(),
                    "oxicub_over_floor": r.oxicub.ms().map(|m| m / r.floor_ms),
                    "oxicub_opt_out": r.oxicub_opt_out.json(),
                    "oxicub_default_over_opt_out": r.oxicub.ms().zip(r.oxicub_opt_out.ms()).map(|(a, b)| a / b),
                    "peers": peers,
                    "check": r.check,
                })
            })
            .collect();
        json!({
            "date": self.date,
            "device": self.device,
            "command": self.command,
            "bandwidth": {
                "bytes_moved_per_copy": b.bytes_moved,
                "memcpy_median_ms": b.memcpy.median_ms,
                "kernel_median_ms": b.kernel.median_ms,
                "memcpy_gbs": b.memcpy_gbs(),
                "kernel_gbs": b.kernel_gbs(),
                "floor_gbs": b.best_gbs(),
            },
            "generator_check": {
                "agree": self.generator_ok,
                "digests": self.generator.iter().map(|(s, d)| json!({"source": s, "digest": d})).collect::<Vec<_>>(),
            },
            "rows": rows,
        })
    }

    /// Horizontal bars of time / floor on a log scale, one group per workload, one bar per
    /// implementation; the line at 1 is the floor.
    pub fn svg(&self) -> String {
        let series: Vec<(&str, &str)> = [("oxicub", "#d62728"), ("oxicub opt-out", "#e377c2")]
            .into_iter()
            .chain(
                COLUMNS
                    .iter()
                    .zip(["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"])
                    .map(|(c, col)| (c.title, col)),
            )
            .collect();
        let ratios: Vec<Vec<Option<f64>>> = self
            .rows
            .iter()
            .map(|r| {
                [&r.oxicub, &r.oxicub_opt_out]
                    .into_iter()
                    .chain(&r.peers)
                    .map(|c| c.ms().map(|m| m / r.floor_ms))
                    .collect()
            })
            .collect();
        let all: Vec<f64> = ratios
            .iter()
            .flatten()
            .flatten()
            .copied()
            .filter(|x| *x > 0.0)
            .collect();
        let lo = all.iter().copied().fold(1.0f64, f64::min) / 1.5;
        let hi = all.iter().copied().fold(10.0f64, f64::max) * 1.5;
        let (l10lo, l10hi) = (lo.log10().floor(), hi.log10().ceil());

        let (label_w, plot_w, right) = (360.0, 560.0, 90.0);
        let (bar_h, gap, top) = (11.0, 9.0, 70.0);
        let group_h = bar_h * series.len() as f64 + gap;
        let height = top + group_h * self.rows.len() as f64 + 40.0;
        let width = label_w + plot_w + right;
        let x_of = |v: f64| label_w + (v.log10() - l10lo) / (l10hi - l10lo) * plot_w;

        let mut s = String::new();
        let _ = writeln!(
            s,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"##
        );
        let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="white"/>"##);
        let _ = writeln!(
            s,
            r##"<text x="10" y="18" font-size="14">{}</text>"##,
            xml(&format!(
                "oxicub GPU benchmark: time / floor (log scale), {}",
                self.device
            ))
        );
        let _ = writeln!(
            s,
            r##"<text x="10" y="34" fill="#555">floor = bytes that must move / copy bandwidth ({:.0} GB/s); shorter is better; 1 = the floor</text>"##,
            self.bandwidth.best_gbs()
        );
        for (i, (name, col)) in series.iter().enumerate() {
            let x = label_w + i as f64 * 120.0;
            let _ = writeln!(
                s,
                r##"<rect x="{x}" y="44" width="12" height="10" fill="{col}"/><text x="{}" y="53">{}</text>"##,
                x + 16.0,
                xml(name)
            );
        }
        // Grid: 1, 2, 5 per decade.
        let mut d = l10lo as i32;
        while f64::from(d) <= l10hi {
            for m in [1.0, 2.0, 5.0] {
                let v = m * 10f64.powi(d);
                if v < 10f64.powf(l10lo) || v > 10f64.powf(l10hi) {
                    continue;
                }
                let x = x_of(v);
                let stroke = if (v - 1.0).abs() < 1e-9 {
                    "#000"
                } else {
                    "#ddd"
                };
                let _ = writeln!(
                    s,
                    r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{:.1}" stroke="{stroke}"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#555">{}</text>"##,
                    height - 30.0,
                    height - 16.0,
                    if v >= 1.0 {
                        format!("{v}")
                    } else {
                        format!("{v:.2}")
                    }
                );
            }
            d += 1;
        }
        for (k, r) in self.rows.iter().enumerate() {
            let y0 = top + k as f64 * group_h;
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                label_w - 8.0,
                y0 + group_h / 2.0,
                xml(&r.label)
            );
            let cells: Vec<&Cell> = [&r.oxicub, &r.oxicub_opt_out]
                .into_iter()
                .chain(&r.peers)
                .collect();
            for (i, ((_, col), cell)) in series.iter().zip(cells).enumerate() {
                let y = y0 + i as f64 * bar_h;
                match ratios[k][i] {
                    Some(v) => {
                        let x1 = x_of(v);
                        let _ = writeln!(
                            s,
                            r##"<rect x="{label_w}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{col}"/><text x="{:.1}" y="{:.1}" font-size="9">{} ms</text>"##,
                            (x1 - label_w).max(1.0),
                            bar_h - 2.0,
                            x1 + 3.0,
                            y + bar_h - 3.0,
                            fmt_ms(v * r.floor_ms)
                        );
                    }
                    None => {
                        let _ = writeln!(
                            s,
                            r##"<text x="{:.1}" y="{:.1}" font-size="9" fill="#999">{}</text>"##,
                            label_w + 3.0,
                            y + bar_h - 3.0,
                            xml(&cell.text())
                        );
                    }
                }
            }
        }
        let _ = writeln!(s, "</svg>");
        s
    }
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
