//! The compression study's live run (`wgdiff experiment compression`): every setting of both
//! shipped models; plan, measurement and report in `experiment/compression.rs`.

use super::events::{headings, Event, LivePlot, Sink};
use super::setup::*;
use crate::classifier::mnist_fid_label;
use crate::experiment::{compression, Header, Inputs};
use crate::{Gpu, Result};

fn fid_vs_size(samples: usize) -> LivePlot {
    LivePlot::mnist_fid("MNIST-FID against size", "MB (sampling export)", samples, false)
}
fn fid_vs_ms(samples: usize) -> LivePlot {
    LivePlot::mnist_fid("MNIST-FID against ms per image", "ms per image", samples, false)
}

/// Runs the experiment on `gpu` with its files from `inputs`, its rows and points as events;
/// returns its report (`header` dates it at the end).
pub(super) async fn compression_run(
    gpu: &Gpu,
    setup: &CompressionSetup,
    inputs: &Inputs,
    header: impl Fn() -> Header,
    on_event: &mut Sink<'_>,
) -> Result<compression::Report> {
    use compression::Progress;
    let (unet, scorenet) = (
        inputs.checkpoint(&setup.unet)?,
        inputs.checkpoint(&setup.scorenet)?,
    );
    let subjects = [
        compression::Subject {
            label: "DDPM U-Net",
            checkpoint: &unet,
            origin: setup.unet.display().to_string(),
            published: &compression::PUBLISHED_DDPM,
        },
        compression::Subject {
            label: "NCSN ScoreNet",
            checkpoint: &scorenet,
            origin: setup.scorenet.display().to_string(),
            published: &compression::PUBLISHED_NCSN,
        },
    ];
    let tracker = inputs.shipped_mnist_fid(gpu)?.into();
    let total = subjects.len() * compression::settings().len();
    let mut measured = 0;
    let rows = compression::run(gpu, &subjects, &setup.plan, &tracker, |event| match event {
        Progress::Started(what) => {
            on_event(Event::Note(what.to_string()))?;
            on_event(Event::Progress {
                done: measured,
                total,
                unit: "rows",
                what: what.to_string(),
            })
        }
        Progress::Measured(row) => {
            let timed = row.ms_per_image > 0.0;
            if !timed {
                measured += 1;
            }
            on_event(Event::Row {
                table: "Compression: size, speed and MNIST-FID per setting",
                columns: [
                    headings(&["model", "setting", "MB", "gzipped MB", "ms per image", "peak MiB"]),
                    vec![mnist_fid_label(setup.plan.samples)],
                ]
                .concat(),
                key: format!("{}: {}", row.model, row.setting),
                cells: vec![
                    row.model.clone(),
                    row.setting.clone(),
                    format!("{:.2}", row.bytes as f64 / 1e6),
                    format!("{:.2}", row.gzipped_bytes as f64 / 1e6),
                    match timed {
                        true => format!("{:.1}", row.ms_per_image),
                        false => "timed with its model's rows".into(),
                    },
                    format!("{:.1}", row.peak_bytes as f64 / (1 << 20) as f64),
                    format!("{:.1}", row.fid),
                ],
            })?;
            let (plot, x) = match timed {
                true => (fid_vs_ms(setup.plan.samples), row.ms_per_image),
                false => (fid_vs_size(setup.plan.samples), row.bytes as f64 / 1e6),
            };
            on_event(Event::Point {
                plot,
                series: row.model.clone(),
                x,
                y: row.fid,
            })
        }
    })
    .await?;
    Ok(compression::Report {
        header: header(),
        plan: setup.plan.clone(),
        rows,
    })
}
