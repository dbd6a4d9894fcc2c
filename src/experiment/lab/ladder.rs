//! The speed ladders' live run (`wgdiff experiment ladder`): the ConvNeXt rungs, then the
//! ablation rows; plan and measurement in `experiment/ladder.rs`, report in `ladder_report.rs`.

use super::common::TrainingSeconds;
use super::events::{headings, Event, LivePlot, Sink};
use crate::classifier::mnist_fid_label;
use crate::experiment::{ladder, ladder_report, Header, Inputs};
use crate::{Gpu, Result};

fn rung_steps() -> LivePlot {
    LivePlot::new("ConvNeXt training step per rung", "round", "ms per step", true)
}
fn ablation(samples: usize) -> LivePlot {
    LivePlot::mnist_fid(
        "Ablation: MNIST-FID against ms per step",
        "ms per training step",
        samples,
        false,
    )
}

/// Runs the experiment on `gpu` with its files from `inputs`, its rows and points as events;
/// returns its report (`header` dates it at the end).
pub(super) async fn ladder_run(
    gpu: &Gpu,
    plan: &ladder::Plan,
    inputs: &Inputs,
    header: impl Fn() -> Header,
    on_event: &mut Sink<'_>,
) -> Result<ladder_report::Report> {
    use ladder::Progress;
    let arms = ladder::arms(plan)?;
    let rungs_count = ladder::RUNGS.len();
    let rungs = ladder::run_ladder(gpu, &ladder::RUNGS, plan, |event| match event {
        Progress::WarmingUp(rung) => on_event(Event::Note(format!("ladder: warm-up step of {rung}"))),
        Progress::RungStep {
            rung,
            done,
            total,
            ms,
        } => {
            on_event(Event::Progress {
                done,
                total,
                unit: "ConvNeXt steps",
                what: rung.to_string(),
            })?;
            on_event(Event::Point {
                plot: rung_steps(),
                series: rung.to_string(),
                x: ((done - 1) / rungs_count + 1) as f64,
                y: ms,
            })
        }
        Progress::Trained { .. } | Progress::Scored { .. } => Ok(()),
    })
    .await?;
    for r in &rungs {
        on_event(Event::Row {
            table: "Table 1: a ConvNeXt DDPM training step, rung by rung",
            columns: headings(&["rung", "conv", "median ms", "speed-up vs first", "vs previous"]),
            key: r.name.clone(),
            cells: vec![
                r.name.clone(),
                r.conv.clone(),
                format!("{:.0}", r.median_ms),
                format!("{:.2}x", r.speedup_vs_first),
                format!("{:.2}x", r.speedup_vs_previous),
            ],
        })?;
    }

    let tracker = inputs.shipped_mnist_fid(gpu)?.into();
    let mut training = TrainingSeconds::new(arms.len(), plan.train_seconds);
    let rows = ladder::run_ablation(gpu, &arms, plan, &tracker, |event| match event {
        Progress::WarmingUp(row) => on_event(Event::Note(format!("ablation: warm-up step of {row}"))),
        Progress::Trained { row, seconds } => on_event(training.event(row, seconds)),
        Progress::Scored { row, fid } => {
            on_event(Event::Note(format!("ablation: {row}: MNIST-FID {fid:.1}")))
        }
        Progress::RungStep { .. } => Ok(()),
    })
    .await?;
    for r in &rows {
        on_event(Event::Row {
            table: "Table 2: the mnist-small U-Net, one switch per row",
            columns: [
                headings(&["row", "steps", "median ms", "speed-up", "peak MiB"]),
                vec![mnist_fid_label(plan.fid_samples)],
            ]
            .concat(),
            key: r.name.clone(),
            cells: vec![
                r.name.clone(),
                r.steps.to_string(),
                format!("{:.0}", r.median_ms),
                format!("{:.2}x", r.speedup),
                format!("{:.1}", r.step_peak_bytes as f64 / (1 << 20) as f64),
                format!("{:.1}", r.fid),
            ],
        })?;
        on_event(Event::Point {
            plot: ablation(plan.fid_samples),
            series: r.name.clone(),
            x: r.median_ms,
            y: r.fid,
        })?;
    }
    Ok(ladder_report::Report {
        header: header(),
        plan: plan.clone(),
        rungs,
        rows,
    })
}
