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
    pub device: String,
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
    let reps = reps.max(1);
    for case in cases {
        for _ in 0..warmup {
            (case.run)()?;
            gpu.sync()?;
        }
    }
    let mut times = vec![Vec::with_capacity(reps); cases.len()];
    for _ in 0..reps {
        for (case, t) in cases.iter().zip(&mut times) {
            gpu.sync()?;
            let start = std::time::Instant::now();
            (case.run)()?;
            gpu.sync()?;
            t.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    let device = crate::gpu::describe(&gpu.info);
    Ok(cases
        .iter()
        .zip(times)
        .map(|(case, t)| {
            let median_ms = median(&t);
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
                device: device.clone(),
            }
        })
        .collect())
}

/// The measurements as an aligned text table.
pub fn table(rows: &[Measurement]) -> String {
    let vw = rows.iter().map(|r| r.variant.len()).max().unwrap_or(0).max(12);
    let sw = rows.iter().map(|r| r.shape.len()).max().unwrap_or(0).max(30);
    let mut out = format!(
        "{:<vw$} {:<sw$} {:<18} {:>11} {:>11} {:>10}\n",
        "variant", "shape", "pass", "median ms", "min ms", "GFLOP/s"
    );
    for r in rows {
        let rate = match (r.gflops, r.gbps, r.us_each) {
            (Some(g), _, _) => format!("{g:.2}"),
            (None, Some(b), _) => format!("{b:.2} GB/s"),
            (None, None, Some(us)) => format!("{us:.1} us each"),
            _ => "-".into(),
        };
        out += &format!(
            "{:<vw$} {:<sw$} {:<18} {:>11.3} {:>11.3} {:>10}\n",
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
