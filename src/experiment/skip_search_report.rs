//! The skip search's report: per-depth costs, the searched schedules and their confirmations,
//! every arm's time and FID from one interleaved run, which arm wins within each budget, the
//! time-vs-FID plot and one schedule file per budget.

use super::plots::{self, Axes, Series};
use super::skip_search::{schedule_file, ArmResult, Family, Origin, Plan, Proxy, Searched};
use super::{ExperimentReport, Header, ReportFile};
use crate::diffusion::join_depths;
use crate::Result;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// Everything the experiment measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: Header,
    pub plan: Plan,
    pub origin: Origin,
    pub levels: usize,
    /// Median ms of one network call (one batch) per skip depth k.
    pub costs_ms: Vec<f64>,
    pub proxy: Proxy,
    pub searched: Vec<Searched>,
    pub arms: Vec<ArmResult>,
}

/// The fastest arm of the final run within one budget.
#[derive(Clone, Debug)]
pub struct Winner<'a> {
    pub budget: f64,
    pub arm: &'a ArmResult,
}

impl Report {
    /// The c = 0 arm of the final run (the reference of every budget there).
    pub fn unskipped(&self) -> Option<&ArmResult> {
        self.arms
            .iter()
            .find(|a| a.arm.family == Family::Exponent && a.arm.skip.is_none())
    }

    /// For each budget, the fastest arm whose final-run FID is within it of c = 0's.
    pub fn winners(&self) -> Vec<Winner<'_>> {
        let Some(base) = self.unskipped() else {
            return Vec::new();
        };
        self.plan
            .budgets
            .iter()
            .filter_map(|&budget| {
                self.arms
                    .iter()
                    .filter(|a| a.scores.fid <= base.scores.fid + budget)
                    .min_by(|a, b| a.ms_per_image.total_cmp(&b.ms_per_image))
                    .map(|arm| Winner { budget, arm })
            })
            .collect()
    }

    /// The schedule file name of a budget.
    pub fn schedule_name(budget: f64) -> String {
        format!("schedule-budget-{budget}.json")
    }

    /// One sentence per family: its fastest arm and its best FID, for the verdict.
    fn family_summary(&self) -> String {
        let mut lines = String::new();
        for family in [
            Family::Exponent,
            Family::Searched,
            Family::Caching,
            Family::Combined,
        ] {
            let arms: Vec<&ArmResult> = self.arms.iter().filter(|a| a.arm.family == family).collect();
            let fastest = arms
                .iter()
                .min_by(|a, b| a.ms_per_image.total_cmp(&b.ms_per_image));
            let best = arms.iter().min_by(|a, b| a.scores.fid.total_cmp(&b.scores.fid));
            if let (Some(f), Some(b)) = (fastest, best) {
                let _ = writeln!(
                    lines,
                    "- {}: fastest {} ({:.1}% faster than c = 0, {} {:.2}); best {} {} ({:.1}% faster).",
                    family_name(family),
                    f.arm.label,
                    f.speedup_percent,
                    self.origin.metric,
                    f.scores.fid,
                    self.origin.metric,
                    b.arm.label,
                    b.speedup_percent
                );
            }
        }
        lines
    }
}

impl ExperimentReport for Report {
    fn markdown(&self) -> String {
        let mut md = String::new();
        let p = &self.plan;
        let metric = &self.origin.metric;
        let _ = writeln!(md, "# Skip-schedule search and deep-feature caching\n");
        let _ = writeln!(
            md,
            "{} Model `{}` ({} levels), {} at {} steps, {} images per {metric} in batches of {}.\n",
            self.header.markdown(),
            self.origin.model,
            self.levels,
            p.sampler,
            p.steps,
            p.samples,
            p.batch
        );
        let _ = writeln!(
            md,
            "## Every arm, sampled in turn\n\nEach round every arm draws the same {} images (round r seeded {} + r); \
             a speed-up is one minus the median over rounds of the arm's batch time over c = 0's; ms per image is \
             c = 0's median batch time per image times that ratio. Δ is the {metric} above c = 0's in this run.\n",
            p.batch, p.seed
        );
        let _ = writeln!(
            md,
            "| arm | family | mean levels skipped | ms per image | speed-up | {metric} | Δ | KID |\n|---|---|---|---|---|---|---|---|"
        );
        let base_fid = self.unskipped().map_or(f64::NAN, |a| a.scores.fid);
        for a in &self.arms {
            let _ = writeln!(
                md,
                "| {} | {} | {:.2} | {:.1} | {:.1}% | {:.2} | {:+.1} | {} |",
                a.arm.label,
                family_name(a.arm.family),
                a.mean_skip,
                a.ms_per_image,
                a.speedup_percent,
                a.scores.fid,
                a.scores.fid - base_fid,
                a.scores
                    .kid
                    .map_or("-".into(), |(kid, sd)| format!("{kid:.2} ± {sd:.2}"))
            );
        }
        let _ = writeln!(md, "\n![time vs {metric}](time-vs-fid.png)\n");
        let _ = writeln!(md, "## Which wins where\n");
        for w in self.winners() {
            let _ = writeln!(
                md,
                "- Within {metric} + {}: **{}** ({}), {:.1} ms per image, {:.1}% faster than c = 0, {metric} {:.2}.",
                w.budget,
                w.arm.arm.label,
                family_name(w.arm.arm.family),
                w.arm.ms_per_image,
                w.arm.speedup_percent,
                w.arm.scores.fid
            );
        }
        let _ = writeln!(md, "{}", self.family_summary());
        let _ = writeln!(
            md,
            "\n## Cost of one network call per skip depth\n\nMedian of {} interleaved rounds, a batch of {} images.\n\n\
             | levels skipped k | ms per call | of k = 0 |\n|---|---|---|",
            p.cost_rounds, p.batch
        );
        for (k, ms) in self.costs_ms.iter().enumerate() {
            let _ = writeln!(md, "| {k} | {ms:.1} | {:.0}% |", 100.0 * ms / self.costs_ms[0]);
        }
        let _ = writeln!(
            md,
            "\n## Searched schedules\n\nThe proxy of step i at depth k is the mean squared difference between the \
             clamped x_0 the network predicts skipping k levels and the full network's, at step i's state of the \
             unskipped run on one batch, times the share of an x_0 error a deterministic step carries into the next \
             state, (alpha_next - std_next alpha / std)^2 (from {:.2e} at the first step to {:.2} at the last). The dynamic programme picks the depths of least predicted time whose summed \
             proxy is within the proxy budget; the proxy budget starts at the fastest schedule's proxy and is \
             bisected (geometrically) on confirmed {metric}s (the unskipped model's: {:.2}), at most {} per budget.\n",
            self.proxy.weights.first().copied().unwrap_or(f64::NAN),
            self.proxy.weights.last().copied().unwrap_or(f64::NAN),
            self.origin.fid_unskipped,
            p.confirmations
        );
        let _ = writeln!(
            md,
            "| budget F | proxy budget | k_i per step (noise first) | proxy | predicted ms per run | {metric} | within F |\n|---|---|---|---|---|---|---|"
        );
        for s in &self.searched {
            for a in &s.attempts {
                let chosen = a.skips == s.chosen.skips && a.accepted;
                let _ = writeln!(
                    md,
                    "| {} | {:.2e} | {}{}{} | {:.2e} | {:.0} | {:.2} | {} |",
                    a.budget,
                    a.proxy_budget,
                    if chosen { "**" } else { "" },
                    join_depths(&a.skips),
                    if chosen { "**" } else { "" },
                    a.proxy_error,
                    a.predicted_ms,
                    a.fid,
                    if a.accepted { "yes" } else { "no" }
                );
            }
            if !s.attempts.iter().any(|a| a.accepted) {
                let _ = writeln!(
                    md,
                    "| {} | — | no skipping fits: {} | 0 | {:.0} | {:.2} | yes |",
                    s.budget,
                    join_depths(&s.chosen.skips),
                    s.chosen.predicted_ms,
                    s.chosen.fid
                );
            }
        }
        let _ = writeln!(
            md,
            "\nThe bold schedule of each budget is saved as `schedule-budget-F.json` (use it with `wgdiff sample \
             --skip-schedule FILE` or load it in the app's skip view)."
        );
        md
    }

    /// skip-search.md, .json and a schedule file per budget.
    fn files(&self) -> Result<Vec<ReportFile>> {
        let mut files = super::text_files("skip-search", &self.markdown(), self)?;
        for s in &self.searched {
            let costs = (&self.costs_ms[..], &self.proxy);
            let file = schedule_file(&self.plan, costs, self.levels, s, &self.origin);
            files.push((Report::schedule_name(s.budget), file.to_json()));
        }
        Ok(files)
    }

    /// time-vs-fid.png.
    fn plots(&self) -> Result<Vec<ReportFile>> {
        let series = |family: Family, name: &str, line: bool| {
            let points = self
                .arms
                .iter()
                .filter(|a| a.arm.family == family)
                .map(|a| (a.ms_per_image, a.scores.fid, short_label(&a.arm.label)))
                .collect();
            (
                Series {
                    name: name.into(),
                    points,
                },
                line,
            )
        };
        let axes = Axes {
            caption: &format!(
                "{} at {} steps: sampling time vs {} ({} images each)",
                self.plan.sampler, self.plan.steps, self.origin.metric, self.plan.samples
            ),
            x: "sampling ms per image (interleaved, median ratio to c = 0)",
            y: &self.origin.metric,
        };
        let name = "time-vs-fid.png";
        let plot = plots::curves_and_points(
            Path::new(name),
            axes,
            &[
                series(Family::Exponent, "k(t), exponent c", true),
                series(Family::Searched, "searched schedule (budget F)", false),
                series(Family::Caching, "deep-feature cache (m, d)", false),
                series(Family::Combined, "cache + skipping", false),
            ],
        )?;
        Ok(vec![(name.into(), plot)])
    }
}

fn family_name(family: Family) -> &'static str {
    match family {
        Family::Exponent => "k(t), exponent c",
        Family::Searched => "searched",
        Family::Caching => "deep-feature cache",
        Family::Combined => "cache + skipping",
    }
}

/// A point's label on the plot: "c = 2" -> "c=2", "cache m = 2, d = 2" -> "m=2,d=2".
fn short_label(label: &str) -> String {
    label
        .replace("searched, ", "")
        .replace("cache ", "")
        .replace("searched ", "")
        .replace(" = ", "=")
        .replace(", ", ",")
}
