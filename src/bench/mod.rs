//! Benchmark harness shared by every `wgdiff bench ...` (interleaved repetitions, medians,
//! a table and JSON lines) and `bench conv|matmul|mac|block|train|step`.

pub mod app;
pub mod block;
pub mod conv;
pub mod mac;
pub mod matmul;
pub mod scaling;
pub mod step;
pub mod train;

use crate::median::median;
use crate::{Gpu, Result};
use serde::Serialize;

/// One measured (variant, shape) cell.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    pub bench: String,
    pub variant: String,
    pub shape: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<String>,
    pub median_ms: f64,
    pub min_ms: f64,
    pub reps: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gflops: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// Microseconds per counted item (a dispatch, a submit) of a run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub us_each: Option<f64>,
    /// Beside a [`Peer`] (PyTorch on the CPU): wgdiff's speed over the peer's on the same
    /// workload in the same rounds (the peer's median time over this row's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_torch: Option<f64>,
    pub device: String,
}

/// Another implementation that runs a case's workload, named by the case's `peer` line, and
/// times it itself: PyTorch on the CPU beside `bench matmul|conv|train --beside-torch`.
pub trait Peer {
    /// The peer's rows' variant, e.g. `torch`.
    fn name(&self) -> &str;
    /// What the peer runs on, for its rows' `device`.
    fn device(&self) -> &str;
    /// Seconds of one run of `workload`.
    fn seconds(&mut self, workload: &str) -> Result<f64>;
}

/// A workload to time: `run` records its GPU work; the harness waits for it.
pub struct Case<'a> {
    pub variant: String,
    pub shape: String,
    pub pass: Option<String>,
    /// Floating-point operations of one run (0: memory-bound, report GB/s instead).
    pub flops: f64,
    /// Bytes moved by one run.
    pub bytes: f64,
    pub run: Box<dyn Fn() -> Result<()> + 'a>,
    /// The same workload in a [`Peer`]'s words (e.g. `matmul 1024 1024 1024`), if it has one.
    pub peer: Option<String>,
}

/// Times every case `reps` times after `warmup` runs, cycling through the cases in each
/// repetition so that machine noise hits all variants alike.
pub fn run_interleaved(
    gpu: &Gpu,
    bench: &str,
    cases: &[Case],
    warmup: usize,
    reps: usize,
) -> Result<Vec<Measurement>> {
    run_interleaved_beside(gpu, bench, cases, warmup, reps, None)
}

/// [`run_interleaved`], and beside a `peer` its run of every distinct workload of the cases'
/// `peer` lines in the same repetitions, after the cases: a row each (the case's shape, pass
/// and FLOPs, the peer's name and device), and `vs_torch` on the cases that share it. Each
/// timed run then follows an untimed one of the same case (the peer does the same).
pub fn run_interleaved_beside(
    gpu: &Gpu,
    bench: &str,
    cases: &[Case],
    warmup: usize,
    reps: usize,
    mut peer: Option<&mut dyn Peer>,
) -> Result<Vec<Measurement>> {
    let reps = reps.max(1);
    let mut peer_cases: Vec<&Case> = Vec::new();
    if peer.is_some() {
        for case in cases.iter().filter(|c| c.peer.is_some()) {
            if !peer_cases.iter().any(|p| p.peer == case.peer) {
                peer_cases.push(case);
            }
        }
    }
    let peer_line = |case: &Case| case.peer.clone().unwrap_or_default();
    for case in cases {
        for _ in 0..warmup {
            (case.run)()?;
            gpu.sync()?;
        }
    }
    if let Some(peer) = peer.as_deref_mut() {
        for case in &peer_cases {
            for _ in 0..warmup {
                peer.seconds(&peer_line(case))?;
            }
        }
    }
    let mut times = vec![Vec::with_capacity(reps); cases.len()];
    let mut peer_times = vec![Vec::with_capacity(reps); peer_cases.len()];
    for _ in 0..reps {
        for (case, t) in cases.iter().zip(&mut times) {
            if !peer_cases.is_empty() {
                // Beside a peer, each side's timed run follows an untimed run of its own (the
                // peer's threads went idle meanwhile, and on a VM an idle core wakes slowly).
                (case.run)()?;
            }
            gpu.sync()?;
            let start = std::time::Instant::now();
            (case.run)()?;
            gpu.sync()?;
            t.push(start.elapsed().as_secs_f64() * 1e3);
        }
        if let Some(peer) = peer.as_deref_mut() {
            for (case, t) in peer_cases.iter().zip(&mut peer_times) {
                t.push(peer.seconds(&peer_line(case))? * 1e3);
            }
        }
    }
    let device = crate::gpu::describe(&gpu.info);
    let row = |case: &Case, t: &[f64], device: &str| {
        let median_ms = median(t);
        let per_sec = 1e3 / median_ms;
        Measurement {
            bench: bench.to_string(),
            variant: case.variant.clone(),
            shape: case.shape.clone(),
            pass: case.pass.clone(),
            median_ms,
            min_ms: t.iter().copied().fold(f64::INFINITY, f64::min),
            reps,
            gflops: (case.flops > 0.0).then(|| case.flops * per_sec / 1e9),
            gbps: (case.flops == 0.0 && case.bytes > 0.0).then(|| case.bytes * per_sec / 1e9),
            us_each: None,
            vs_torch: None,
            device: device.to_string(),
        }
    };
    let peer_rows: Vec<Measurement> = peer_cases
        .iter()
        .zip(&peer_times)
        .map(|(case, t)| Measurement {
            variant: peer.as_deref().map_or(String::new(), |p| p.name().to_string()),
            ..row(case, t, peer.as_deref().map_or("", |p| p.device()))
        })
        .collect();
    let mut rows: Vec<Measurement> = cases
        .iter()
        .zip(&times)
        .map(|(case, t)| {
            let mut r = row(case, t, &device);
            if let Some(i) = peer_cases.iter().position(|p| p.peer == case.peer) {
                r.vs_torch = Some(peer_rows[i].median_ms / r.median_ms);
            }
            r
        })
        .collect();
    rows.extend(peer_rows);
    Ok(rows)
}

/// The measurements as an aligned text table.
pub fn table(rows: &[Measurement]) -> String {
    let vw = rows.iter().map(|r| r.variant.len()).max().unwrap_or(0).max(12);
    let sw = rows.iter().map(|r| r.shape.len()).max().unwrap_or(0).max(30);
    let beside = rows.iter().any(|r| r.vs_torch.is_some());
    let mut out = format!(
        "{:<vw$} {:<sw$} {:<18} {:>11} {:>11} {:>10}{}\n",
        "variant",
        "shape",
        "pass",
        "median ms",
        "min ms",
        "GFLOP/s",
        if beside { "   vs torch" } else { "" }
    );
    for r in rows {
        let rate = match (r.gflops, r.gbps, r.us_each) {
            (Some(g), _, _) => format!("{g:.2}"),
            (None, Some(b), _) => format!("{b:.2} GB/s"),
            (None, None, Some(us)) => format!("{us:.1} us each"),
            _ => "-".into(),
        };
        let vs = match (beside, r.vs_torch) {
            (true, Some(v)) => format!(" {v:>10.2}x"),
            _ => String::new(),
        };
        out += &format!(
            "{:<vw$} {:<sw$} {:<18} {:>11.3} {:>11.3} {:>10}{vs}\n",
            r.variant,
            r.shape,
            r.pass.as_deref().unwrap_or("forward"),
            r.median_ms,
            r.min_ms,
            rate
        );
    }
    out
}

/// One JSON object per line.
pub fn json_lines(rows: &[Measurement]) -> String {
    rows.iter()
        .map(|r| serde_json::to_string(r).expect("measurement serialises"))
        .collect::<Vec<_>>()
        .join("\n")
}
