//! The speed ladders' report: both tables in Markdown with the studies' published numbers beside
//! ours, the JSON of every measurement, and a bar chart of the time per step (ladder.png).

use super::ladder::{AblationRow, Plan, RungResult};
use super::plots::{self, Bar, BarPanel};
use super::{ExperimentReport, Header, ReportFile};
use crate::classifier::mnist_fid_label;
use crate::ops::blocks::ConvNextImpl;
use crate::Result;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// The CUDA study's overall speed-up: 383.03 s -> 70.62 s (rung 3, its last timed configuration).
pub const PUBLISHED_OVERALL_SPEEDUP: f64 = 383.03 / 70.62;

/// What the NYU study published for an ablation row (1 GPU, CIFAR-10 U-Net, PyTorch profiler).
pub fn published_ablation(row: &str) -> &'static str {
    match row {
        "baseline" => "100 steps in 428.0 s (4.28 s/step); conv backward 19.07 s, 46.5% of device time",
        "mixed precision" => "conv backward 6.9 s (2.8x less than f32); step time not reported",
        "tiled conv" => "not in the study",
        _ => "planned, no number published",
    }
}

/// Everything `wgdiff experiment ladder` measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: Header,
    pub plan: Plan,
    pub rungs: Vec<RungResult>,
    pub rows: Vec<AblationRow>,
}

/// The LayerNorm and block columns of a rung.
fn block_columns(block: ConvNextImpl) -> (&'static str, &'static str) {
    match block {
        ConvNextImpl::ComposedNorm => ("generic ops (mean, sub, square, pow, mul, add)", "separate ops"),
        ConvNextImpl::Unfused => ("norm kernel", "separate ops"),
        ConvNextImpl::Fused => (
            "norm kernel",
            "fused (depthwise 7x7 kernel, norm, one-pass MLP kernel)",
        ),
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

impl Report {
    /// The first rung's median over the last one's: the ladder's overall speed-up.
    pub fn overall_speedup(&self) -> Option<f64> {
        self.rungs.last().map(|r| r.speedup_vs_first)
    }

    /// Table 1: the ConvNeXt ladder, ours beside the study's.
    pub fn ladder_table(&self) -> String {
        let mut md = String::from(
            "| rung | conv | LayerNorm | ConvNeXt block | ms per step (median) | speed-up vs rung 1 | vs previous rung | published: total s | published speed-up |\n\
             |---|---|---|---|---:|---:|---:|---:|---:|\n",
        );
        let first_published = self.rungs.first().and_then(|r| r.published_seconds);
        let mut previous_published = None;
        for (i, r) in self.rungs.iter().enumerate() {
            let (norm, block) = block_columns(r.block);
            let (published, speedup) = match (r.published_seconds, first_published) {
                (Some(s), Some(first)) => (format!("{s:.2}"), format!("{:.2}x", first / s)),
                _ => ("not published".into(), "—".into()),
            };
            let vs_previous = match (i, r.published_seconds, previous_published) {
                (0, _, _) => "—".to_string(),
                (_, Some(s), Some(p)) => format!("{:.2}x (published {:.2}x)", r.speedup_vs_previous, p / s),
                _ => format!("{:.2}x", r.speedup_vs_previous),
            };
            previous_published = r.published_seconds;
            let _ = writeln!(
                md,
                "| {}. {} | {} | {norm} | {block} | {:.0} | {:.2}x | {vs_previous} | {published} | {speedup} |",
                i + 1,
                r.name,
                r.conv,
                r.median_ms,
                r.speedup_vs_first,
            );
        }
        md
    }

    /// Table 2: the NYU ablation, ours beside what the study published.
    pub fn ablation_table(&self) -> String {
        let seconds = self.plan.train_seconds;
        let fid = mnist_fid_label(self.plan.fid_samples);
        let mut md = format!(
            "| row | what it switches | parameters | ms per step (median) | speed-up vs baseline | peak device memory, MiB | steps (training s) | loss (last 5 steps) | {fid} after ~{seconds:.0} s | published (CIFAR-10 U-Net, 1 GPU) |\n\
             |---|---|---:|---:|---:|---:|---:|---:|---:|---|\n"
        );
        for r in &self.rows {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.0} | {:.2}x | {:.1} | {} ({:.0} s) | {:.4} | {:.1} | {} |",
                r.name,
                r.change,
                r.parameters,
                r.median_ms,
                r.speedup,
                mib(r.peak_bytes()),
                r.steps,
                r.train_seconds,
                r.final_loss,
                r.fid,
                published_ablation(&r.name)
            );
        }
        md
    }
}

impl ExperimentReport for Report {
    /// The whole report: setup, both tables, how to read them.
    fn markdown(&self) -> String {
        let p = &self.plan;
        let mut md = format!(
            "# Speed ladders of two published studies\n\n{}\n\n",
            self.header.markdown()
        );
        let _ = write!(
            md,
            "## CUDA-optimisations ladder: a ConvNeXt DDPM's training step\n\n\
             The ladder of *Accelerating Diffusion Model Computations Using CUDA Optimizations* \
             (Li Xiaolong), on this engine. The ConvNeXt denoiser (`ConvNextNet`, {} parameters: \
             ConvNeXt blocks at full and half resolution with the time embedding added) on MNIST, \
             one training step = DDPM loss, backward, Adam, batch {}. Each rung keeps the \
             optimisations above it. The rungs took turns step by step for {} rounds, after one \
             untimed warm-up step each; a speed-up is the median over rounds of the ratio of two \
             rungs' step times in the same round, all from this one run. The study's second rung \
             is a shared-memory tiled conv; ours is the engine's `auto` conv (per shape the \
             faster of the tiled implicit GEMM and im2col for dense convs, the direct kernel for \
             the depthwise 7x7, whose one output channel per group leaves the implicit GEMM's \
             32-channel tiles 1/32 used). The study timed a whole CIFAR-10 run on an RTX 3080 \
             (383.03 s -> 76.03 s -> 70.62 s, {:.1}x overall); it reports no separate total for \
             the fused block.\n\n",
            p.convnext.parameter_count(),
            p.ladder_batch,
            p.ladder_reps,
            PUBLISHED_OVERALL_SPEEDUP
        );
        md += &self.ladder_table();
        if let Some(overall) = self.overall_speedup() {
            let losses = self.rungs.iter().map(|r| r.check_loss as f64);
            let (lo, hi) = losses.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), l| {
                (lo.min(l), hi.max(l))
            });
            let _ = write!(
                md,
                "\nOverall: the last rung is **{overall:.2}x** faster than the first \
                 (the study: {:.1}x). \
                 Every rung computes the same step: the loss of one fixed batch is {lo:.6} to {hi:.6} \
                 across the rungs.\n\n",
                PUBLISHED_OVERALL_SPEEDUP
            );
        }
        let _ = write!(
            md,
            "## NYU ablation: one switch per row on the `{}` U-Net\n\n\
             The ablation of *Performance Preserving Optimization of Diffusion Networks* (Arya \
             Batra and Flavjo Xhelollari, NYU), on this engine. \
             Batch {}. Every row trained until its step time reached {:.0} s (the last step may run \
             past it), after one untimed warm-up step, the rows taking turns step by step (all \
             alive at once), so a slower row takes fewer steps; each step was timed with an idle \
             device at both ends. Speed-up = the median over rounds of the baseline's step time \
             over the row's, from this run. Peak memory = the run's tensors between steps (weights, \
             Adam moments, EMA) + the most a step allocated on top (buffer pool, size classes). \
             MNIST-FID: {} samples of the EMA weights, DDPM ancestral sampler with {} steps, the \
             same seed and kernels (f32, conv auto) for every row; after this little training the \
             values are high and noisy: compare rows, not absolute numbers. The study published a \
             profile of its baseline and its conv backward with AMP; its other techniques have no \
             numbers.\n\n",
            p.preset, p.batch, p.train_seconds, p.fid_samples, p.fid_steps
        );
        md += &self.ablation_table();
        md
    }

    /// ladder.md and ladder.json.
    fn files(&self) -> Result<Vec<ReportFile>> {
        super::text_files("ladder", &self.markdown(), self)
    }

    /// ladder.png.
    fn plots(&self) -> Result<Vec<ReportFile>> {
        let panels = [
            BarPanel {
                title: format!(
                    "CUDA-optimisations ladder: ConvNeXt DDPM training step, batch {}",
                    self.plan.ladder_batch
                ),
                axis: "ms per training step (median)".into(),
                bars: self
                    .rungs
                    .iter()
                    .enumerate()
                    .map(|(i, r)| Bar {
                        label: format!("{}. {}", i + 1, r.name),
                        value: r.median_ms,
                        note: format!("{:.0} ms, {:.2}x", r.median_ms, r.speedup_vs_first),
                    })
                    .collect(),
            },
            BarPanel {
                title: format!(
                    "NYU ablation: {} U-Net training step, batch {}",
                    self.plan.preset, self.plan.batch
                ),
                axis: "ms per training step (median)".into(),
                bars: self
                    .rows
                    .iter()
                    .map(|r| Bar {
                        label: r.name.clone(),
                        value: r.median_ms,
                        note: format!("{:.0} ms, {:.2}x, FID {:.0}", r.median_ms, r.speedup, r.fid),
                    })
                    .collect(),
            },
        ];
        let caption = format!("Time per training step, {}", self.header.device);
        let name = "ladder.png";
        Ok(vec![(
            name.into(),
            plots::bar_panels(Path::new(name), &caption, &panels)?,
        )])
    }
}
