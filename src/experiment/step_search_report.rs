//! The step search's report: each searched schedule and how close it came to the reference,
//! every spacing's time and MNIST-FID from one interleaved run beside the DDPM bar, the verdict
//! per step count, the time-vs-FID plot and one schedule file per step count.

use super::plots::{self, Axes, Series};
use super::step_search::{schedule_file, ArmResult, Plan, Searched};
use super::{ExperimentReport, Header, ReportFile};
use crate::diffusion::StepSearchRecord;
use crate::Result;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// How far above the bar's MNIST-FID a few-step schedule may score and still count as "at
/// many-step quality", and how much faster per image it must be (the issue's figures).
pub const FID_MARGIN: f64 = 5.0;
pub const SPEED_FACTOR: f64 = 4.0;

/// Everything the experiment measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: Header,
    pub plan: Plan,
    /// The checkpoint searched on, and its network's levels (the schedule files').
    pub model: String,
    pub levels: usize,
    pub metric: String,
    pub searched: Vec<Searched>,
    /// The bar first, then per step count the spacings and the searched schedule (with
    /// DPM-Solver++ also its SDE form on it).
    pub arms: Vec<ArmResult>,
}

/// A step count's searched schedule against the bar.
pub struct Verdict<'a> {
    pub steps: usize,
    /// The better scoring of the rows on the searched timesteps (the searched sampler's, and
    /// for DPM-Solver++ its SDE form's).
    pub searched: &'a ArmResult,
    /// The best of the sampler's own spacings at these steps.
    pub best_spacing: Option<&'a ArmResult>,
    /// MNIST-FID above the bar's, and how many times faster per image.
    pub fid_above: f64,
    pub faster: f64,
}

impl Verdict<'_> {
    /// Within [`FID_MARGIN`] of the bar and at least [`SPEED_FACTOR`] times faster.
    pub fn holds(&self) -> bool {
        self.fid_above <= FID_MARGIN && self.faster >= SPEED_FACTOR
    }
}

impl Report {
    /// The DDPM bar.
    pub fn bar(&self) -> &ArmResult {
        &self.arms[0]
    }

    /// The schedule file name of a step count.
    pub fn schedule_name(&self, steps: usize) -> String {
        format!("schedule-{}-{steps}-searched.json", self.plan.sampler.name())
    }

    /// One verdict per searched step count.
    pub fn verdicts(&self) -> Vec<Verdict<'_>> {
        let bar = self.bar();
        self.searched
            .iter()
            .filter_map(|s| {
                let at_steps = self.arms.iter().filter(|a| a.arm.steps == s.steps);
                let searched = at_steps
                    .clone()
                    .filter(|a| a.arm.schedule.starts_with("searched"))
                    .min_by(|a, b| a.scores.fid.total_cmp(&b.scores.fid))?;
                let best_spacing = at_steps
                    .filter(|a| ["uniform", "quadratic", "log-snr"].contains(&a.arm.schedule.as_str()))
                    .min_by(|a, b| a.scores.fid.total_cmp(&b.scores.fid));
                Some(Verdict {
                    steps: s.steps,
                    searched,
                    best_spacing,
                    fid_above: searched.scores.fid - bar.scores.fid,
                    faster: bar.ms_per_image / searched.ms_per_image,
                })
            })
            .collect()
    }

    fn record(&self, s: &Searched) -> StepSearchRecord {
        StepSearchRecord {
            model: self.model.clone(),
            reference_steps: self.plan.reference_steps,
            probe_images: self.plan.probe_images,
            discrepancy: s.discrepancy,
            start: s.start.clone(),
            start_discrepancy: s.start_discrepancy(),
            date: self.header.date.clone(),
        }
    }
}

impl ExperimentReport for Report {
    fn markdown(&self) -> String {
        let mut md = String::new();
        let p = &self.plan;
        let metric = &self.metric;
        let bar = self.bar();
        let _ = writeln!(md, "# Timestep schedules: few steps at many-step quality\n");
        let _ = writeln!(
            md,
            "{} Model `{}`, {} searched at {} steps against its own {}-step run; {} images per {metric} in batches \
             of {}, every row sampled in turn.\n",
            self.header.markdown(),
            self.model,
            p.sampler,
            join(&p.steps),
            p.reference_steps,
            p.samples,
            p.batch
        );
        let _ = writeln!(
            md,
            "## The search\n\n\"Align Your Steps\" (Sabour, Fidler and Kreis, 2024) picks a few-step schedule by bounding \
             how far its samples land from the many-step ones. Here that distance is measured: the mean squared \
             difference between {} probe images drawn with the candidate timesteps and the same images (same noise) \
             from the {}-step run, minimised by coordinate descent on the interior timesteps in log-SNR \
             ({} sweeps; sweep s moves a point 2^-s of the way to a neighbour and keeps the move if the distance \
             falls), starting from the nearest of the three spacings' grids.\n",
            p.probe_images, p.reference_steps, p.sweeps
        );
        let _ = writeln!(
            md,
            "| steps | uniform | quadratic | log-SNR | searched (from) | probe runs | searched timesteps |\n|---|---|---|---|---|---|---|"
        );
        for s in &self.searched {
            let spacings: Vec<String> = s.spacings.iter().map(|(_, d)| format!("{d:.2e}")).collect();
            let _ = writeln!(
                md,
                "| {} | {} | {:.2e} ({}) | {} | {} |",
                s.steps,
                spacings.join(" | "),
                s.discrepancy,
                s.start,
                s.runs,
                s.timesteps_text()
            );
        }
        let _ = writeln!(
            md,
            "\n## Every schedule, sampled in turn\n\nEach round every row draws the same {} images (round r seeded \
             {} + r); ms per image is the median over rounds of the batch's time per image. Δ is the {metric} above \
             the bar's ({}).\n",
            p.batch, p.seed, bar.arm.label
        );
        let _ = writeln!(
            md,
            "| sampler, steps, schedule | {metric} | Δ | ms per image | times faster than the bar |\n|---|---|---|---|---|"
        );
        for a in &self.arms {
            let bold = if a.arm.schedule.starts_with("searched") {
                "**"
            } else {
                ""
            };
            let _ = writeln!(
                md,
                "| {bold}{}{bold} | {:.2} | {:+.2} | {:.1} | {:.2} |",
                a.arm.label,
                a.scores.fid,
                a.scores.fid - bar.scores.fid,
                a.ms_per_image,
                bar.ms_per_image / a.ms_per_image
            );
        }
        let _ = writeln!(md, "\n![time vs {metric}](time-vs-fid.png)\n\n## Verdict\n");
        for v in self.verdicts() {
            let spacing = v.best_spacing.map_or(String::new(), |b| {
                format!(
                    "; the best spacing at {} steps, {}, scores {:.2}",
                    v.steps, b.arm.schedule, b.scores.fid
                )
            });
            let _ = writeln!(
                md,
                "- {} steps: the searched schedule ({}) scores {metric} {:.2}, {:+.2} against {} ({:.2}), and is \
                 {:.2}x faster per image{spacing}: {} (within +{FID_MARGIN} and at least {SPEED_FACTOR}x faster).",
                v.steps,
                v.searched.arm.label,
                v.searched.scores.fid,
                v.fid_above,
                bar.arm.label,
                bar.scores.fid,
                v.faster,
                if v.holds() { "holds" } else { "does not hold" }
            );
        }
        let _ = writeln!(
            md,
            "\nEach searched schedule is saved as `{}` (N the steps; use it with `wgdiff sample --skip-schedule \
             FILE`, `wgdiff eval --skip-schedule FILE`, or load it in the app).",
            self.schedule_name(0).replace("-0-", "-N-")
        );
        md
    }

    /// step-search.md, .json and a schedule file per step count.
    fn files(&self) -> Result<Vec<ReportFile>> {
        let mut files = super::text_files("step-search", &self.markdown(), self)?;
        for s in &self.searched {
            let file = schedule_file(&self.plan, self.levels, s, self.record(s));
            files.push((self.schedule_name(s.steps), file.to_json()));
        }
        Ok(files)
    }

    /// time-vs-fid.png.
    fn plots(&self) -> Result<Vec<ReportFile>> {
        let series = |schedule: &str, name: &str| {
            let points = self
                .arms
                .iter()
                .filter(|a| a.arm.schedule == schedule)
                .map(|a| (a.ms_per_image, a.scores.fid, format!("{}", a.arm.steps)))
                .collect();
            (
                Series {
                    name: name.into(),
                    points,
                },
                false,
            )
        };
        let axes = Axes {
            caption: &format!(
                "{}: time per image vs {} ({} images each; labels: steps)",
                self.plan.sampler, self.metric, self.plan.samples
            ),
            x: "sampling ms per image (median over rounds)",
            y: &self.metric,
        };
        let name = "time-vs-fid.png";
        let plot = plots::curves_and_points(
            Path::new(name),
            axes,
            &[
                series("ddpm", "ddpm (the bar)"),
                series("uniform", "uniform"),
                series("quadratic", "quadratic"),
                series("log-snr", "log-SNR uniform"),
                series("searched", "searched"),
                series("searched-sde", "searched, SDE solver"),
            ],
        )?;
        Ok(vec![(name.into(), plot)])
    }
}

fn join(values: &[usize]) -> String {
    values
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(" and ")
}
