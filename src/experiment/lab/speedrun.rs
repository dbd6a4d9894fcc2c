//! The speed-run's live run (`wgdiff experiment speedrun`): the recipes in turn, each scored at
//! its training times; plan, recipes and report in `experiment/speedrun.rs`.

use super::common::TrainingSeconds;
use super::events::{headings, Event, LivePlot, Sink};
use crate::classifier::mnist_fid_label;
use crate::experiment::{speedrun, Header, Inputs};
use crate::{Gpu, Result};

fn fid_vs_training(samples: usize) -> LivePlot {
    LivePlot::mnist_fid(
        "MNIST-FID against training time",
        "training seconds",
        samples,
        true,
    )
}

/// Runs the experiment on `gpu` with its files from `inputs`, its rows and points as events;
/// returns its report (`header` dates it at the end).
pub(super) async fn speedrun_run(
    gpu: &Gpu,
    plan: &speedrun::Plan,
    inputs: &Inputs,
    header: impl Fn() -> Header,
    on_event: &mut Sink<'_>,
) -> Result<speedrun::Report> {
    let recipes = speedrun::choose_recipes(&plan.recipes)?;
    let tracker = inputs.shipped_mnist_fid(gpu)?.into();
    let mut training = TrainingSeconds::new(recipes.len(), plan.budget_seconds);
    let curves = speedrun::run(gpu, &recipes, plan, &tracker, |recipe, seconds, point| {
        if let Some(p) = point {
            on_event(Event::Note(format!(
                "{recipe}: {:.0} s of training, step {}, mean loss {:.4}, MNIST-FID {:.1}",
                p.train_seconds, p.step, p.loss, p.fid
            )))?;
            on_event(Event::Row {
                table: "Evaluations: MNIST-FID during training",
                columns: [
                    headings(&["recipe", "training s", "step", "mean loss"]),
                    vec![mnist_fid_label(plan.fid_samples)],
                ]
                .concat(),
                key: format!("{recipe} {}", p.step),
                cells: vec![
                    recipe.to_string(),
                    format!("{:.0}", p.train_seconds),
                    p.step.to_string(),
                    format!("{:.4}", p.loss),
                    format!("{:.1}", p.fid),
                ],
            })?;
            on_event(Event::Point {
                plot: fid_vs_training(plan.fid_samples),
                series: recipe.to_string(),
                x: p.train_seconds,
                y: p.fid,
            })?;
        }
        on_event(training.event(recipe, seconds))
    })
    .await?;
    Ok(speedrun::Report {
        header: header(),
        plan: plan.clone(),
        curves,
    })
}
