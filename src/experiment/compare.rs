//! Sampling settings compared on one seed: up to four variants (a model, compressed or not, and
//! its sampler, steps, guidance, skip, cache, precision) timed in turn, scored, Pareto-ranked.

use super::round_robin::{sample_in_turn, Contender, Rounds};
use crate::checkpoint::Checkpoint;
use crate::classifier::mnist_fid_label;
use crate::diffusion::Step;
use crate::models::SkipType;
use crate::pipeline::{SampleRequest, TrainedModel};
use crate::train::FidTracker;
use crate::{Error, Gpu, Result};
use serde::Serialize;
use std::fmt::Write;
use web_time::Instant;

/// The most variants one comparison holds.
pub const MAX_VARIANTS: usize = 4;

/// One variant: a model and what to draw with it.
pub struct Variant {
    pub label: String,
    /// The model, read (built afresh for each of its turns, so that its peak device memory
    /// counts its own weights and no other variant's).
    pub checkpoint: Checkpoint,
    /// Where the checkpoint came from (named in errors).
    pub origin: String,
    /// The adaptive U-Net's skip type when not the checkpoint's own.
    pub skip_type: Option<SkipType>,
    /// What to draw (its count and seed are the plan's).
    pub request: SampleRequest,
}

/// How much a comparison measures.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Plan {
    /// Images of every run: the recorded one and each timed one.
    pub images: usize,
    /// Timed runs per variant after the recorded one, the variants taking turns in each round.
    pub rounds: usize,
    /// Images per MNIST-FID (0: no FID).
    pub fid_samples: usize,
    /// Images drawn at once for MNIST-FID.
    pub batch: usize,
    pub seed: u64,
}

impl Default for Plan {
    /// 16 images, 3 timed rounds, MNIST-FID over 100 images in batches of 50, seed 0.
    fn default() -> Plan {
        Plan {
            images: 16,
            rounds: 3,
            fid_samples: 100,
            batch: 50,
            seed: 0,
        }
    }
}

/// What a running comparison reports.
pub enum Event<'a> {
    /// The turn under way: `done` of `total`, and what it does.
    Progress {
        done: usize,
        total: usize,
        what: &'a str,
    },
    /// A step of a variant's recorded run (its first, before the timed ones), and its seconds.
    Step {
        variant: usize,
        step: &'a Step<'a>,
        seconds: f64,
    },
    /// A variant's figures so far (its times once the rounds ended, its FID once scored).
    Row { variant: usize, row: &'a Row },
}

/// One variant's figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Row {
    pub label: String,
    /// Sampler steps of the recorded run, and its network evaluations.
    pub steps: usize,
    pub evaluations: usize,
    /// Median over the timed rounds of a run's wall time per step and per image (ms).
    pub ms_per_step: f64,
    pub ms_per_image: f64,
    /// The most device memory a timed run allocated beyond what was allocated before it (its
    /// weights, activations and caches).
    pub peak_bytes: u64,
    /// The model's sampling weights as `wgdiff export` writes them (bytes).
    pub model_bytes: u64,
    pub fid: Option<f64>,
    /// On the Pareto front of time per image against MNIST-FID (no other variant is at least
    /// as fast and as good and better in one).
    pub pareto: bool,
}

/// Runs the comparison: a recorded run of every variant (`Event::Step` for each step), then
/// `plan.rounds` rounds in which each variant draws the same images once more, timed, then
/// MNIST-FID for all (the variants taking turns batch by batch) when `fid` is given.
pub async fn run(
    gpu: &Gpu,
    variants: &[Variant],
    plan: &Plan,
    fid: Option<&FidTracker>,
    on_event: &mut dyn FnMut(Event) -> Result<()>,
) -> Result<Vec<Row>> {
    check(variants, plan)?;
    let mut rows = Vec::with_capacity(variants.len());
    for v in variants {
        let export = crate::run_state::sampling_export(&v.checkpoint, &v.origin)?;
        rows.push(Row {
            label: v.label.clone(),
            model_bytes: export.to_bytes()?.len() as u64,
            ..Row::default()
        });
    }
    let scored = fid.is_some() && plan.fid_samples > 0;
    let turns = (plan.rounds + 1) * variants.len() + if scored { variants.len() } else { 0 };
    let mut seconds = vec![Vec::new(); variants.len()];
    for round in 0..=plan.rounds {
        for (i, v) in variants.iter().enumerate() {
            let what = match round {
                0 => format!("{}: recording every step", v.label),
                r => format!("{}: timed run {r} of {}", v.label, plan.rounds),
            };
            on_event(Event::Progress {
                done: round * variants.len() + i,
                total: turns,
                what: &what,
            })?;
            gpu.finish().await?;
            gpu.pool().trim();
            let before = gpu.pool().stats().live_bytes;
            gpu.pool().reset_peaks();
            let model = TrainedModel::from_checkpoint(gpu, &v.checkpoint, &v.origin, v.skip_type)?;
            let request = v.request.with_count(plan.images)?.with_seed(plan.seed);
            let started = Instant::now();
            if round == 0 {
                let (mut last, mut steps) = (Instant::now(), 0);
                let mut on_step = |step: &Step| -> Result<()> {
                    let seconds = last.elapsed().as_secs_f64();
                    last = Instant::now();
                    steps += 1;
                    on_event(Event::Step {
                        variant: i,
                        step,
                        seconds,
                    })
                };
                let (_, evaluations) = model.sampling().sample(gpu, &request, Some(&mut on_step)).await?;
                rows[i].steps = steps;
                rows[i].evaluations = evaluations;
                continue;
            }
            model.sampling().sample(gpu, &request, None).await?;
            gpu.finish().await?;
            seconds[i].push(started.elapsed().as_secs_f64());
            let peak = gpu.pool().stats().peak_live_bytes.saturating_sub(before);
            rows[i].peak_bytes = rows[i].peak_bytes.max(peak);
        }
    }
    for (row, times) in rows.iter_mut().zip(&seconds) {
        let median = crate::median::median(times);
        row.ms_per_step = 1e3 * median / row.steps.max(1) as f64;
        row.ms_per_image = 1e3 * median / plan.images as f64;
    }
    mark_pareto(&mut rows);
    for (variant, row) in rows.iter().enumerate() {
        on_event(Event::Row { variant, row })?;
    }
    let Some(fid) = fid.filter(|_| scored) else {
        return Ok(rows);
    };
    let models = variants
        .iter()
        .map(|v| TrainedModel::from_checkpoint(gpu, &v.checkpoint, &v.origin, v.skip_type))
        .collect::<Result<Vec<_>>>()?;
    let contenders: Vec<Contender> = variants
        .iter()
        .zip(&models)
        .map(|(v, model)| Contender {
            label: v.label.clone(),
            sampling: model.sampling(),
            request: v.request.clone(),
        })
        .collect();
    let rounds = Rounds {
        samples: plan.fid_samples,
        batch: plan.batch,
        seed: plan.seed,
    };
    let first = (plan.rounds + 1) * variants.len();
    let generated = sample_in_turn(
        gpu,
        &contenders,
        rounds,
        Some(fid.features.as_ref()),
        |done, total, label| {
            // the batches, counted in variants' worth of turns
            let what = format!("MNIST-FID over {} images: {label}", plan.fid_samples);
            on_event(Event::Progress {
                done: first + done * variants.len() / total.max(1),
                total: turns,
                what: &what,
            })
        },
    )
    .await?;
    for (row, features) in rows.iter_mut().zip(&generated) {
        row.fid = Some(features.fid(fid.features.as_ref(), &fid.reference.stats)?);
    }
    mark_pareto(&mut rows);
    for (variant, row) in rows.iter().enumerate() {
        on_event(Event::Row { variant, row })?;
    }
    Ok(rows)
}

/// Errors unless there are 1 to [`MAX_VARIANTS`] variants and the plan draws something.
fn check(variants: &[Variant], plan: &Plan) -> Result<()> {
    if variants.is_empty() || variants.len() > MAX_VARIANTS {
        return Err(Error::Config(format!(
            "a comparison holds 1 to {MAX_VARIANTS} variants, got {}",
            variants.len()
        )));
    }
    if plan.images == 0 || plan.rounds == 0 {
        return Err(Error::Config(format!(
            "a comparison needs at least 1 image and 1 timed round (got {} and {})",
            plan.images, plan.rounds
        )));
    }
    if plan.fid_samples == 1 {
        return Err(Error::Config(
            "MNIST-FID needs at least 2 images per variant (or 0 for none)".into(),
        ));
    }
    Ok(())
}

/// Marks the rows on the Pareto front of (ms per image, MNIST-FID), both lower is better; rows
/// without an FID are ranked by time alone (with no FID at all: the fastest).
pub fn mark_pareto(rows: &mut [Row]) {
    let point = |r: &Row| (r.ms_per_image, r.fid.unwrap_or(0.0));
    let points: Vec<(f64, f64)> = rows.iter().map(point).collect();
    for (i, row) in rows.iter_mut().enumerate() {
        let (t, f) = points[i];
        row.pareto = !points
            .iter()
            .enumerate()
            .any(|(j, &(t2, f2))| j != i && t2 <= t && f2 <= f && (t2 < t || f2 < f));
    }
}

/// The rows as a Markdown table (time, memory, size, FID, front), under a line on the plan.
pub fn markdown(rows: &[Row], plan: &Plan, device: &str) -> String {
    let mut md = format!(
        "# Comparison\n\n{} images per run, the median of {} timed runs (variants in turn, seed {}), on {device}; \
         MNIST-FID over {} images.\n\n",
        plan.images, plan.rounds, plan.seed, plan.fid_samples
    );
    md += &format!(
        "| variant | steps | evaluations | ms per step | ms per image | peak device memory | model bytes | {} | Pareto front |\n",
        mnist_fid_label(plan.fid_samples)
    );
    md += "|---|---:|---:|---:|---:|---:|---:|---:|:---:|\n";
    for r in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.1} | {:.1} | {:.2} MB | {:.2} MB | {} | {} |",
            r.label,
            r.steps,
            r.evaluations,
            r.ms_per_step,
            r.ms_per_image,
            r.peak_bytes as f64 / 1e6,
            r.model_bytes as f64 / 1e6,
            r.fid.map_or("-".to_string(), |f| format!("{f:.1}")),
            if r.pareto { "yes" } else { "" }
        );
    }
    md
}

/// The plot of MNIST-FID (over `samples` images) against ms per image, every variant labelled,
/// the Pareto front joined by a line, as PNG bytes (`name` names it in errors), the same natively
/// and in a page. Rows without FID are left out.
pub fn plot_png(rows: &[Row], samples: usize, name: &std::path::Path) -> Result<Vec<u8>> {
    use super::plots::{curves_and_points, Axes, Series};
    let scored: Vec<&Row> = rows.iter().filter(|r| r.fid.is_some()).collect();
    if scored.is_empty() {
        return Err(Error::Config(
            "the plot needs MNIST-FID: compare with FID samples above 0".into(),
        ));
    }
    let point = |r: &&Row| (r.ms_per_image, r.fid.unwrap_or(0.0), r.label.clone());
    let mut front: Vec<(f64, f64, String)> = scored.iter().filter(|r| r.pareto).map(point).collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    for p in &mut front {
        p.2.clear();
    }
    let series = [
        (
            Series {
                name: "variants".into(),
                points: scored.iter().map(point).collect(),
            },
            false,
        ),
        (
            Series {
                name: "Pareto front".into(),
                points: front,
            },
            true,
        ),
    ];
    let y = format!("{} (lower is better)", mnist_fid_label(samples));
    let axes = Axes {
        caption: "Time per image against MNIST-FID",
        x: "ms per image",
        y: &y,
    };
    curves_and_points(name, axes, &series)
}
