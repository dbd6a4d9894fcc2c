//! The skip-schedule search's live run (`wgdiff experiment skip-search`): per-depth costs,
//! the proxy, the search per budget, then every arm in turn; plan and search in
//! `experiment/skip_search.rs`, report in `skip_search_report.rs`.

use super::common::mnist_fid;
use super::events::{headings, Event, LivePlot, Sink};
use super::setup::*;
use crate::classifier::{mnist_fid_label, MnistFid};
use crate::experiment::{skip_search, skip_search_report, Header, Inputs};
use crate::{Error, Gpu, Result};

fn searched(samples: usize) -> LivePlot {
    LivePlot::mnist_fid(
        "Searched schedules: MNIST-FID against predicted time",
        "predicted ms per run",
        samples,
        false,
    )
}
fn arms_time_vs_fid(samples: usize) -> LivePlot {
    LivePlot::mnist_fid(
        "Arms: MNIST-FID against ms per image",
        "ms per image",
        samples,
        false,
    )
}

/// Runs the experiment on `gpu` with its files from `inputs`, its rows and points as events;
/// returns its report (`header` dates it at the end).
pub(super) async fn skip_search_run(
    gpu: &Gpu,
    setup: &SkipSearchSetup,
    inputs: &Inputs,
    header: impl Fn() -> Header,
    on_event: &mut Sink<'_>,
) -> Result<skip_search_report::Report> {
    use skip_search::{Bench, Origin, SearchEvent};
    let plan = &setup.plan;
    let model = inputs.model(gpu, &setup.model, None).await?;
    let levels = model.net.levels();
    if levels < 2 {
        return Err(Error::Config(format!(
            "{} has no levels to skip (a {}); the search needs a U-Net",
            setup.model.display(),
            model.state.model.kind_name()
        )));
    }
    let MnistFid {
        classifier,
        reference,
        ..
    } = mnist_fid(gpu, inputs, (&setup.classifier, &setup.cache), on_event).await?;
    let bench = Bench {
        sampling: model.sampling(),
        features: &classifier,
        reference: &reference,
    };
    let mut search_event = |event: SearchEvent| match event {
        SearchEvent::Phase(what) => on_event(Event::Note(what.to_string())),
        SearchEvent::Sampling { what, done, total } => on_event(Event::Progress {
            done,
            total,
            unit: "images",
            what: what.to_string(),
        }),
        SearchEvent::Confirmed(a) => {
            let schedule = crate::diffusion::join_depths(&a.skips);
            on_event(Event::Note(format!(
                "budget {}: proxy budget {:.2e} -> [{schedule}], predicted {:.0} ms per run, MNIST-FID {:.2} ({})",
                a.budget,
                a.proxy_budget,
                a.predicted_ms,
                a.fid,
                if a.accepted { "within budget" } else { "over budget" }
            )))?;
            on_event(Event::Row {
                table: "Confirmations: schedules scored on the way to each budget",
                columns: vec![
                    "budget".into(),
                    "proxy budget".into(),
                    "schedule".into(),
                    "predicted ms".into(),
                    mnist_fid_label(plan.samples),
                    "within".into(),
                ],
                key: format!("{} {:e}", a.budget, a.proxy_budget),
                cells: vec![
                    a.budget.to_string(),
                    format!("{:.2e}", a.proxy_budget),
                    schedule,
                    format!("{:.0}", a.predicted_ms),
                    format!("{:.2}", a.fid),
                    if a.accepted { "yes" } else { "no" }.into(),
                ],
            })?;
            on_event(Event::Point {
                plot: searched(plan.samples),
                series: format!("budget {}", a.budget),
                x: a.predicted_ms,
                y: a.fid,
            })
        }
        SearchEvent::Batch { done, total, arm } => on_event(Event::Progress {
            done,
            total,
            unit: "batches",
            what: arm.to_string(),
        }),
    };
    search_event(SearchEvent::Phase("timing one network call at every skip depth"))?;
    let probe = bench.request(plan, Default::default(), None)?;
    let costs = skip_search::measure_depth_costs(gpu, bench.sampling, &probe, plan.cost_rounds).await?;
    search_event(SearchEvent::Phase(
        "measuring the proxy (x_0 difference per step and depth)",
    ))?;
    let proxy = skip_search::measure_proxy(gpu, bench.sampling, &probe).await?;
    let zeros = vec![0; plan.steps];
    let fid0 = bench
        .fid(gpu, plan, &zeros, "unskipped", &mut search_event)
        .await?
        .fid;
    search_event(SearchEvent::Phase(&format!("unskipped MNIST-FID {fid0:.2}")))?;
    let searched = skip_search::search(gpu, &bench, plan, (&costs, &proxy), fid0, &mut search_event).await?;
    let arms = skip_search::arms(plan, levels, &searched);
    search_event(SearchEvent::Phase(&format!(
        "{} arms x {} images in batches of {}, in turn",
        arms.len(),
        plan.samples,
        plan.batch
    )))?;
    let arms = skip_search::compare(gpu, &bench, plan, &arms, &proxy, &mut search_event).await?;
    for a in &arms {
        on_event(Event::Row {
            table: "Arms: time and MNIST-FID, taking turns",
            columns: [
                headings(&["arm", "mean skip", "ms per image", "speed-up"]),
                vec![mnist_fid_label(plan.samples)],
            ]
            .concat(),
            key: a.arm.label.clone(),
            cells: vec![
                a.arm.label.clone(),
                format!("{:.2}", a.mean_skip),
                format!("{:.1}", a.ms_per_image),
                format!("{:.1}%", a.speedup_percent),
                format!("{:.2}", a.scores.fid),
            ],
        })?;
        on_event(Event::Point {
            plot: arms_time_vs_fid(plan.samples),
            series: a.arm.label.clone(),
            x: a.ms_per_image,
            y: a.scores.fid,
        })?;
    }
    let header = header();
    Ok(skip_search_report::Report {
        origin: Origin {
            model: setup.model.display().to_string(),
            metric: mnist_fid_label(plan.samples),
            fid_unskipped: fid0,
            date: header.date.clone(),
        },
        header,
        plan: plan.clone(),
        levels,
        costs_ms: costs,
        proxy,
        searched,
        arms,
    })
}
