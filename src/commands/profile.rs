//! `wgdiff profile [workload]`: per-dispatch GPU timestamps of training steps, summed per op
//! into a PyTorch-profiler-like table, JSON rows, a Chrome trace, or a roofline PNG.

use super::open_gpu;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;
use wgdiff::gpu::{describe, PipelineCreation};
use wgdiff::profile::{ModelSetup, Workload};
use wgdiff::roofline::{measure_ceilings, plot_png, roofline_points};
use wgdiff::AdapterChoice;

/// Profiles a first step of `workload` (its kernels' first use) and `steps` more, measures the device's roof
/// and shows every op against it; with `roofline`, also plots the ops under the roof.
pub fn run(
    choice: AdapterChoice,
    workload: Workload,
    model: &ModelSetup,
    steps: usize,
    json: bool,
    trace: Option<&Path>,
    roofline: Option<&Path>,
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
        "workload: {} ({}), a first step and {} more, each profiled",
        workload.name(),
        if workload.uses_model() {
            let model_name = match &model.checkpoint {
                Some(path) => format!("checkpoint {}", path.display()),
                None => format!("preset {}", model.preset),
            };
            format!("{}: {model_name}, batch {}", workload.describe(), model.batch)
        } else {
            workload.describe().to_string()
        },
        steps.max(1)
    ));
    let profiled = pollster::block_on(wgdiff::profile::run(&gpu, workload, model, steps))?;
    log(format!("first step: {}", profiled.first.time_line()));
    for (i, p) in profiled.steps.iter().enumerate() {
        log(format!("step {}: {}", i + 1, p.time_line()));
    }
    let first_use = profiled.first_use_table(12);
    let mut total = profiled
        .steps
        .into_iter()
        .reduce(|mut all, p| {
            all.extend(p);
            all
        })
        .context("no step was profiled")?;
    log("measuring the device's roof with bench mac's probes (the fastest of 5 runs each)".into());
    let ceilings = pollster::block_on(measure_ceilings(&gpu))?;
    log(format!(
        "roof: {:.2} GFLOP/s ({}); {:.2} GB/s ({}); {:.1} us an empty dispatch",
        ceilings.gflops, ceilings.compute, ceilings.gbytes_per_s, ceilings.bandwidth, ceilings.dispatch_us
    ));
    total.roof = Some(ceilings.as_roof());
    if json {
        println!("{}", total.json_lines());
    } else {
        print!("{}", total.table());
    }
    // (with --json, stdout holds only the op rows; these tables go to stderr with the log)
    log(PipelineCreation::table(&gpu.pipeline_creations(), 12));
    log(first_use);
    if let (Some(mut file), Some(path)) = (trace_file, trace) {
        file.write_all(total.chrome_trace().as_bytes())
            .with_context(|| format!("cannot write the trace file {}", path.display()))?;
        log(format!("trace written to {}", path.display()));
    }
    if let Some(path) = roofline {
        log(format!(
            "ridge point: {:.2} FLOP/byte (ops of lower intensity are bandwidth bound at best)",
            ceilings.ridge()
        ));
        let points = roofline_points(&total);
        let what = match workload {
            Workload::UNet => format!("{} training step, batch {}", model.preset, model.batch),
            _ => format!("{} workload", workload.name()),
        };
        let title = format!("roofline: {what} on {}", gpu.info.name);
        wgdiff::fsio::write_atomic(path, &plot_png(path, &title, &points, &ceilings)?)?;
        log(format!(
            "roofline of {} ops written to {}",
            points.len(),
            path.display()
        ));
    }
    Ok(())
}
