//! The adaptive U-Net study's live run (`wgdiff experiment adaptive-skip`): the skip-trained
//! models (fine-tuned where missing), then every arm in turn; plan and measurement in
//! `experiment/adaptive_skip.rs`, report in `experiment/report.rs`.

use super::common::mnist_fid;
use super::events::{headings, Event, LivePlot, Sink};
use super::setup::*;
use crate::classifier::{mnist_fid_label, MNIST_IMAGE_SHAPE};
use crate::experiment::adaptive_skip::{self, skip_model_path, SkipModel, SKIP_MODELS};
use crate::experiment::report::{ModelInfo, BASELINE_LABEL};
use crate::experiment::{Header, Inputs};
use crate::models::SkipType;
use crate::{Gpu, Result};

fn fid_vs_speedup(samples: usize) -> LivePlot {
    LivePlot::mnist_fid(
        "MNIST-FID against sampling speed-up",
        "speed-up (%)",
        samples,
        true,
    )
}

/// Runs the experiment on `gpu` with its files from `inputs`, its rows and points as events;
/// returns its report (`header` dates it at the end).
pub(super) async fn adaptive_skip_run(
    gpu: &Gpu,
    setup: &AdaptiveSkipSetup,
    inputs: &Inputs,
    header: impl Fn() -> Header,
    on_event: &mut Sink<'_>,
) -> Result<crate::experiment::report::Report> {
    let (baseline, plan) = (&setup.baseline, &setup.plan);
    let mut models = vec![SkipModel {
        label: BASELINE_LABEL.into(),
        path: baseline.display().to_string(),
        model: inputs.model(gpu, baseline, None).await?,
    }];
    let own_skip_type = models[0].skip_type()?;
    let [c, h, w] = models[0].model.image_shape();
    let timings_only = [c, h, w] != MNIST_IMAGE_SHAPE;
    if timings_only {
        on_event(Event::Note(format!(
            "{} is a {c}x{h}x{w} model, not MNIST's 1x28x28: timings only (MNIST-FID cannot score it, and \
             skip-trained models would need its training data); the rows are its own weights under each skip \
             type, untrained for skips (interpolate's 1x1 convs start fresh)",
            baseline.display()
        )))?;
        for skip_type in [SkipType::Zero, SkipType::Duplicate, SkipType::Interpolate] {
            if skip_type != own_skip_type {
                let title = SKIP_MODELS.iter().find(|m| m.1 == skip_type).map_or("", |m| m.0);
                models.push(SkipModel {
                    label: format!("{title} (no training for skips)"),
                    path: baseline.display().to_string(),
                    model: inputs.model(gpu, baseline, Some(skip_type)).await?,
                });
            }
        }
    }
    for (label, skip_type, scheme, suffix) in SKIP_MODELS.into_iter().filter(|_| !timings_only) {
        let path = skip_model_path(&setup.models, baseline, suffix);
        if !crate::fsio::exists(&path) {
            let what = format!(
                "{} is missing: fine-tuning {} for skip type {skip_type} with {scheme:?} training ({} steps)",
                path.display(),
                baseline.display(),
                setup.train_steps
            );
            on_event(Event::Note(what.to_string()))?;
            adaptive_skip::fine_tune(
                gpu,
                baseline,
                (skip_type, scheme),
                setup.train_steps,
                &path,
                |step, loss| {
                    on_event(Event::Progress {
                        done: step,
                        total: setup.train_steps,
                        unit: "fine-tuning steps",
                        what: format!("{label}: loss {loss:.4}"),
                    })
                },
            )
            .await?;
        }
        models.push(SkipModel {
            label: label.into(),
            path: path.display().to_string(),
            model: inputs.model(gpu, &path, None).await?,
        });
    }
    for m in &models {
        m.skip_type()?;
    }
    let mnist_fid = match timings_only {
        true => None,
        false => Some(mnist_fid(gpu, inputs, (&setup.classifier, &setup.cache), on_event).await?),
    };
    let scoring = mnist_fid
        .as_ref()
        .map(|m| (&m.classifier as &dyn crate::eval::FeatureNet, &m.reference));
    let arms = adaptive_skip::arms(&models, plan);
    on_event(Event::Note(format!(
        "{} arms x {} samples in batches of {} (round-robin, so every arm sees the same machine load)",
        arms.len(),
        plan.samples,
        plan.batch
    )))?;
    let results = adaptive_skip::run(gpu, &models, &arms, plan, scoring, |done, total, label| {
        on_event(Event::Progress {
            done,
            total,
            unit: "batches",
            what: label.to_string(),
        })
    })
    .await?;
    for a in &results {
        let sampler = match a.eta {
            Some(eta) => format!("ddim eta {eta}"),
            None => a.sampler.clone(),
        };
        let speedup = a.speedup_percent.map_or("-".into(), |s| format!("{s:.1}%"));
        let fid = a.scores.as_ref().map(|s| s.fid);
        on_event(Event::Row {
            table: "Arms: MNIST-FID and speed-up per model, exponent c and sampler",
            columns: [
                headings(&["model", "c", "sampler", "steps", "speed-up"]),
                vec![mnist_fid_label(plan.samples)],
            ]
            .concat(),
            key: format!("{} {} {sampler} {}", a.model, a.exponent, a.steps),
            cells: vec![
                a.model.clone(),
                a.exponent.to_string(),
                sampler,
                a.steps.to_string(),
                speedup,
                fid.map_or("-".into(), |f| format!("{f:.1}")),
            ],
        })?;
        if let (None, Some(s), true, Some(fid)) = (a.eta, a.speedup_percent, a.steps == plan.steps, fid) {
            on_event(Event::Point {
                plot: fid_vs_speedup(plan.samples),
                series: a.model.clone(),
                x: s,
                y: fid,
            })?;
        }
    }
    let (metric, reference) = match &mnist_fid {
        Some(m) => (
            mnist_fid_label(plan.samples),
            format!(
                "{} {} images",
                m.reference.source.images, m.reference.source.dataset
            ),
        ),
        None => (
            "quality not scored (timings only)".to_string(),
            "nothing".to_string(),
        ),
    };
    Ok(crate::experiment::report::Report {
        header: header(),
        plan: plan.clone(),
        metric,
        reference,
        models: models.iter().map(ModelInfo::of).collect::<Result<_>>()?,
        arms: results,
    })
}
