//! The timestep search's live run (`wgdiff experiment step-search`): the probe runs, the
//! searched schedules, then every spacing in turn; plan and search in
//! `experiment/step_search.rs`, report in `step_search_report.rs`.

use super::common::mnist_fid;
use super::events::{headings, Event, LivePlot, Sink};
use super::setup::*;
use crate::classifier::{mnist_fid_label, MnistFid, MNIST_IMAGE_SHAPE};
use crate::experiment::{step_search, step_search_report, Header, Inputs};
use crate::{Error, Gpu, Result};

fn step_search_probes() -> LivePlot {
    LivePlot::new(
        "Step search: distance from the many-step run per probe run",
        "probe run",
        "mean squared difference",
        true,
    )
}
fn schedules_time_vs_fid(samples: usize) -> LivePlot {
    LivePlot::mnist_fid(
        "Every schedule: MNIST-FID against ms per image",
        "ms per image",
        samples,
        false,
    )
}

/// Runs the experiment on `gpu` with its files from `inputs`, its rows and points as events;
/// returns its report (`header` dates it at the end).
pub(super) async fn step_search_run(
    gpu: &Gpu,
    setup: &StepSearchSetup,
    inputs: &Inputs,
    header: impl Fn() -> Header,
    on_event: &mut Sink<'_>,
) -> Result<step_search_report::Report> {
    let plan = &setup.plan;
    let model = inputs.model(gpu, &setup.model, None).await?;
    let sampling = model.sampling();
    if model.image_shape() != MNIST_IMAGE_SHAPE {
        return Err(Error::Config(format!(
            "{} samples {:?} images; the step search scores MNIST-FID, which needs 1x28x28 MNIST digits",
            setup.model.display(),
            model.image_shape()
        )));
    }
    let MnistFid {
        classifier,
        reference,
        ..
    } = mnist_fid(gpu, inputs, (&setup.classifier, &setup.cache), on_event).await?;
    // every row: the model's own guidance, a mix of its classes
    let base = crate::pipeline::SampleRequest::for_state(&model.state)
        .count(plan.batch)
        .seed(plan.seed)
        .build()?;
    let probe = base.with_count(plan.probe_images)?;
    on_event(Event::Note(format!(
        "the reference: {} at {} steps on {} probe images",
        plan.sampler, plan.reference_steps, plan.probe_images
    )))?;
    let reference_run = probe.with_sampler(plan.sampler, plan.reference_steps)?;
    let reference_samples = step_search::probe_samples(gpu, sampling, &reference_run).await?;
    let mut searched = Vec::new();
    for &steps in &plan.steps {
        on_event(Event::Note(format!("searching {steps} timesteps")))?;
        let found = step_search::search(
            gpu,
            sampling,
            plan,
            (&probe, &reference_samples),
            steps,
            &mut |p| {
                on_event(Event::Progress {
                    done: p.done,
                    total: p.total,
                    unit: "probe runs",
                    what: format!("{steps} steps"),
                })?;
                on_event(Event::Point {
                    plot: step_search_probes(),
                    series: format!("{} steps", p.steps),
                    x: p.done as f64,
                    y: p.best,
                })
            },
        )
        .await?;
        on_event(Event::Row {
            table: "Searched timesteps: distance from the many-step run",
            columns: headings(&["steps", "start", "start's distance", "searched", "timesteps"]),
            key: steps.to_string(),
            cells: vec![
                steps.to_string(),
                found.start.clone(),
                format!("{:.2e}", found.start_discrepancy()),
                format!("{:.2e}", found.discrepancy),
                found.timesteps_text(),
            ],
        })?;
        searched.push(found);
    }
    let arms = step_search::arms(plan, &base, &searched)?;
    on_event(Event::Note(format!(
        "{} rows x {} images in batches of {}, in turn",
        arms.len(),
        plan.samples,
        plan.batch
    )))?;
    let arms = step_search::compare(
        gpu,
        sampling,
        plan,
        &arms,
        (&classifier, &reference),
        |done, total, arm| {
            on_event(Event::Progress {
                done,
                total,
                unit: "batches",
                what: arm.to_string(),
            })
        },
    )
    .await?;
    for a in &arms {
        on_event(Event::Row {
            table: "Every schedule: time and MNIST-FID, taking turns",
            columns: vec![
                "sampler, steps, schedule".into(),
                mnist_fid_label(plan.samples),
                "ms per image".into(),
            ],
            key: a.arm.label.clone(),
            cells: vec![
                a.arm.label.clone(),
                format!("{:.2}", a.scores.fid),
                format!("{:.1}", a.ms_per_image),
            ],
        })?;
        on_event(Event::Point {
            plot: schedules_time_vs_fid(plan.samples),
            series: a.arm.schedule.clone(),
            x: a.ms_per_image,
            y: a.scores.fid,
        })?;
    }
    Ok(step_search_report::Report {
        header: header(),
        plan: plan.clone(),
        model: setup.model.display().to_string(),
        levels: model.net.levels(),
        metric: mnist_fid_label(plan.samples),
        searched,
        arms,
    })
}
