//! `wgdiff profile [workload]`: per-dispatch GPU timestamps of training steps, summed per op
//! into a PyTorch-profiler-like table, JSON rows, or a Chrome trace.

use super::open_gpu;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;
use wgdiff::bench::profile::{ModelSetup, Workload};
use wgdiff::gpu::describe;
use wgdiff::AdapterChoice;

/// Profiles `steps` steps of `workload` (after one warm-up step).
pub fn run(
    choice: AdapterChoice,
    workload: Workload,
    model: &ModelSetup,
    steps: usize,
    json: bool,
    trace: Option<&Path>,
) -> Result<()> {
    // Open the trace file first so a bad path fails before the run.
    let trace_file = trace
        .map(|p| {
            std::fs::File::create(p).with_context(|| format!("cannot write the trace file {}", p.display()))
        })
        .transpose()?;
    let gpu = open_gpu(choice)?;
    let log = |line: String| {
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    log(format!("device: {}", describe(&gpu.info)));
    log(format!(
        "workload: {} ({}), 1 warm-up step, {} profiled",
        Workload::ALL
            .iter()
            .find(|(_, w)| *w == workload)
            .map_or("?", |(n, _)| n),
        if workload == Workload::UNet {
            format!(
                "{}: preset {}, batch {}",
                workload.describe(),
                model.preset,
                model.batch
            )
        } else {
            workload.describe().to_string()
        },
        steps.max(1)
    ));
    let profiles = wgdiff::bench::profile::run(&gpu, workload, model, steps)?;
    for (i, p) in profiles.iter().enumerate() {
        let wall_ms = p.wall_ns.unwrap_or(0.0) * 1e-6;
        let ops_ms = p.op_ns() * 1e-6;
        log(format!(
            "step {}: wall {wall_ms:.3} ms (synced before and after); sum of op times {ops_ms:.3} ms ({:.0}% of wall); \
             first op start to last op end {:.3} ms; {} dispatches",
            i + 1,
            100.0 * ops_ms / wall_ms.max(f64::MIN_POSITIVE),
            p.span_ns() * 1e-6,
            p.records.len()
        ));
    }
    let total = profiles
        .into_iter()
        .reduce(|mut all, p| {
            all.extend(p);
            all
        })
        .context("no step was profiled")?;
    if json {
        println!("{}", total.json_lines());
    } else {
        print!("{}", total.table());
    }
    if let (Some(mut file), Some(path)) = (trace_file, trace) {
        file.write_all(total.chrome_trace().as_bytes())
            .with_context(|| format!("cannot write the trace file {}", path.display()))?;
        log(format!("trace written to {}", path.display()));
    }
    Ok(())
}
