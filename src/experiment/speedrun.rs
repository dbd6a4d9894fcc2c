//! The speed-run search behind `wgdiff train`'s default: candidate recipes trained side by side
//! in interleaved time slices, each scored by MNIST-FID at fixed points of its training time.

use super::plots::{self, Axes, Series};
use super::{ExperimentPlan, ExperimentReport, Header, ReportFile};
use crate::classifier::mnist_fid_label;
use crate::diffusion::{Process, TimeSampling};
use crate::models::{MlpNetConfig, ModelConfig};
use crate::train::{FidTracker, TrainConfig, Trainer};
use crate::{Error, Gpu, Result};
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// One candidate: its key (`--recipes`), a name, why it is in the race, and the run's settings.
pub struct Recipe {
    pub key: &'static str,
    pub name: &'static str,
    pub idea: &'static str,
    pub config: TrainConfig,
}

/// `wgdiff train`'s default before the speed-run (commit 8fe798f): the MNIST U-Net at batch 64,
/// lr 1e-3 after 10 warm-up steps, EMA 0.999, DDPM (linear betas, eps), 40 steps or 7 minutes.
pub fn previous_default() -> TrainConfig {
    TrainConfig {
        preset: "mnist".into(),
        steps: 40,
        batch: 64,
        lr: 1e-3,
        warmup: 10,
        ema_decay: 0.999,
        checkpoint_every: 20,
        max_minutes: 7.0,
        ..TrainConfig::default()
    }
}

/// The candidates, the previous default first and today's default (`TrainConfig::default()`) second.
pub fn recipes() -> Vec<Recipe> {
    let mlp = TrainConfig::default();
    vec![
        Recipe {
            key: "previous",
            name: "previous default",
            idea: "the MNIST U-Net (2.3M parameters) as `wgdiff train` ran it before",
            config: previous_default(),
        },
        Recipe {
            key: "default",
            name: "MLP, v, cosine, classes (default)",
            idea: "the residual MLP on pixels, 512 wide (all matmuls: ~40x the U-Net's images per \
                   second on a CPU), predicting v on the cosine schedule at logit-normal times, \
                   class-conditional (10% of labels dropped) and sampled with classifier-free \
                   guidance 1.75, lr 4e-3 falling to 0 over the last 30%",
            config: mlp.clone(),
        },
        Recipe {
            key: "unconditional",
            name: "MLP, unconditional",
            idea: "the first speed-run's winner: the default without classes or guidance, lr 2e-3",
            config: TrainConfig {
                model: Some(ModelConfig::Mlp(MlpNetConfig {
                    classes: None,
                    ..MlpNetConfig::mnist()
                })),
                lr: 2e-3,
                ..mlp.clone()
            },
        },
        Recipe {
            key: "eps-linear",
            name: "MLP, eps, linear",
            idea: "the default MLP with DDPM's process (eps on linear betas)",
            config: TrainConfig {
                process: Some(Process::ddpm()),
                ..mlp.clone()
            },
        },
        Recipe {
            key: "unet-small",
            name: "U-Net small, fast",
            idea: "the 541k-parameter U-Net with the MLP's short EMA and higher lr, batch 32",
            config: TrainConfig {
                preset: "mnist-small".into(),
                batch: 32,
                ..mlp.clone()
            },
        },
        Recipe {
            key: "mlp-1024",
            name: "MLP 1024 wide",
            idea: "the default at twice the width: 2.7x the parameters, half the steps per second",
            config: TrainConfig {
                model: Some(ModelConfig::Mlp(MlpNetConfig {
                    hidden: 1024,
                    ..MlpNetConfig::mnist()
                })),
                ..mlp.clone()
            },
        },
        Recipe {
            key: "min-snr",
            name: "MLP, min-SNR 5",
            idea: "the default with min-SNR-gamma loss weighting (Hang et al., \"Efficient Diffusion \
                   Training via Min-SNR Weighting Strategy\"), gamma 5: less weight on the nearly \
                   clean timesteps",
            config: TrainConfig {
                min_snr_gamma: Some(5.0),
                ..mlp.clone()
            },
        },
        Recipe {
            key: "lr-decay",
            name: "MLP, lr decays late",
            idea: "the default with the learning rate falling linearly to 0 over the last 30% of \
                   the budget",
            config: TrainConfig {
                lr_decay: 0.3,
                ..mlp.clone()
            },
        },
        Recipe {
            key: "ema-999",
            name: "MLP, EMA 0.999",
            idea: "the default with EMA decay 0.999 (after the same warm-up, min(decay, (1 + step) / \
                   (10 + step))): the sampled weights average ~1,000 steps instead of ~100 once the \
                   loss has levelled off",
            config: TrainConfig {
                ema_decay: 0.999,
                ..mlp.clone()
            },
        },
        Recipe {
            key: "conv-head",
            name: "MLP, conv head 16",
            idea: "the default with two 3x3 convs (1 -> 16 -> 1, time-conditioned, starting as \
                   the identity) over its output: neighbouring pixels for a model that predicts \
                   each pixel alone (its grids are speckled)",
            config: TrainConfig {
                model: Some(ModelConfig::Mlp(MlpNetConfig {
                    conv_head: Some(16),
                    ..MlpNetConfig::mnist()
                })),
                ..mlp.clone()
            },
        },
        Recipe {
            key: "batch-256",
            name: "MLP, batch 256",
            idea: "the default at twice the batch and 1.5x the lr: fewer, less noisy steps",
            config: TrainConfig {
                batch: 256,
                lr: 6e-3,
                ..mlp.clone()
            },
        },
        Recipe {
            key: "uniform-times",
            name: "MLP, uniform times",
            idea: "the default drawing its training times uniformly over the process, as every run \
                   did before logit-normal time sampling (Esser et al., \"Scaling Rectified Flow \
                   Transformers for High-Resolution Image Synthesis\") became the MLP's default",
            config: TrainConfig {
                time_sampling: Some(TimeSampling::Uniform),
                ..mlp
            },
        },
    ]
}

/// Every recipe's key, in [`recipes`]' order.
fn all_keys() -> Vec<String> {
    recipes().iter().map(|r| r.key.to_string()).collect()
}

/// The recipes of `keys` (in that order; empty: every recipe), or an error naming an unknown
/// (or repeated) key and listing the known ones.
pub fn choose_recipes(keys: &[String]) -> Result<Vec<Recipe>> {
    let mut left = recipes();
    if keys.is_empty() {
        return Ok(left);
    }
    let known = left.iter().map(|r| r.key).collect::<Vec<_>>().join(", ");
    keys.iter()
        .map(|key| {
            let i = left.iter().position(|r| r.key == key).ok_or_else(|| {
                Error::Config(format!(
                    "the speed-run has no recipe `{key}` (or it is named twice); its recipes are {known}"
                ))
            })?;
            Ok(left.remove(i))
        })
        .collect()
}

/// Which recipes, how long each trains and how it is scored.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The recipes' keys ([`choose_recipes`]): every recipe unless `--recipes` says.
    pub recipes: Vec<String>,
    /// Training seconds per recipe (time spent in `Trainer::step`).
    pub budget_seconds: f64,
    /// Training seconds a recipe runs before the next one takes over.
    pub slice_seconds: f64,
    /// MNIST-FID evaluations per recipe, evenly spaced over its budget.
    pub evals: usize,
    /// Samples of each evaluation, and its sampler steps for a recipe without steps of its own:
    /// each recipe samples with its own sampler, steps and guidance (`TrainConfig::sampler`,
    /// `sampler_steps`, else its model's default: DPM-Solver++ at 10 steps for the MLP, DDPM's
    /// ancestral sampler at `fid_steps` for the U-Nets).
    pub fid_samples: usize,
    pub fid_steps: usize,
}

impl ExperimentPlan for Plan {
    /// `--quick`: 4 training minutes per recipe, 3 evaluations of 200 samples (a U-Net's at 20
    /// sampler steps).
    fn quick() -> Plan {
        Plan {
            recipes: all_keys(),
            budget_seconds: 240.0,
            slice_seconds: 20.0,
            evals: 3,
            fid_samples: 200,
            fid_steps: 20,
        }
    }

    /// The full search: 30 training minutes per recipe, 6 evaluations of 1,000 samples (a
    /// U-Net's at 50 sampler steps).
    fn full() -> Plan {
        Plan {
            recipes: all_keys(),
            budget_seconds: 1800.0,
            slice_seconds: 30.0,
            evals: 6,
            fid_samples: 1000,
            fid_steps: 50,
        }
    }
}

impl Plan {
    /// The training time of evaluation `i` (1-based).
    fn eval_time(&self, i: usize) -> f64 {
        self.budget_seconds * i as f64 / self.evals as f64
    }
}

/// One evaluation of a recipe.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub train_seconds: f64,
    pub step: usize,
    pub images: usize,
    /// Mean loss of the steps since the previous point.
    pub loss: f64,
    pub fid: f64,
}

/// A recipe's curve.
#[derive(Clone, Debug, Serialize)]
pub struct Curve {
    pub recipe: String,
    pub idea: String,
    pub config: TrainConfig,
    pub parameters: usize,
    pub points: Vec<Point>,
}

impl Curve {
    /// The lowest FID of the curve.
    pub fn best_fid(&self) -> f64 {
        self.points.iter().map(|p| p.fid).fold(f64::INFINITY, f64::min)
    }
}

/// Trains every recipe for `plan.budget_seconds` after one untimed warm-up step, round-robin
/// in slices of `plan.slice_seconds` (so machine-speed drift hits every recipe alike), and
/// scores each at its evaluation times with `tracker`. `progress(recipe, train_seconds, point)` after every
/// step, with the point when the step was followed by an evaluation.
pub async fn run(
    gpu: &Gpu,
    recipes: &[Recipe],
    plan: &Plan,
    tracker: &FidTracker,
    mut progress: impl FnMut(&str, f64, Option<&Point>) -> Result<()>,
) -> Result<Vec<Curve>> {
    if plan.evals == 0 || !(plan.budget_seconds > 0.0 && plan.slice_seconds > 0.0) {
        return Err(Error::Config(
            "the speed-run needs a positive budget and slice and at least one evaluation".into(),
        ));
    }
    let mut runs = Vec::with_capacity(recipes.len());
    for recipe in recipes {
        // (the budget as the run's time limit: a late lr decay knows where the run ends)
        let config = TrainConfig {
            steps: usize::MAX / 2,
            max_minutes: (plan.budget_seconds / 60.0) as f32,
            ..recipe.config.clone()
        };
        let mut trainer = Trainer::new(gpu, config)?;
        // The first step builds pipelines and autotunes kernels (cached per machine after
        // that): it runs off the clock, or a U-Net's first step eats most of its budget.
        trainer.step().await?;
        trainer.state.train_seconds = 0.0;
        let parameters = trainer.net().named_params().iter().map(|(_, t)| t.numel()).sum();
        let curve = Curve {
            recipe: recipe.name.to_string(),
            idea: recipe.idea.to_string(),
            config: recipe.config.clone(),
            parameters,
            points: Vec::new(),
        };
        runs.push((trainer, curve, 0usize));
    }
    while runs.iter().any(|(_, curve, _)| curve.points.len() < plan.evals) {
        for (trainer, curve, losses_seen) in runs.iter_mut() {
            let slice_end = trainer.state.train_seconds + plan.slice_seconds;
            while curve.points.len() < plan.evals && trainer.state.train_seconds < slice_end {
                trainer.step().await?;
                if trainer.state.train_seconds < plan.eval_time(curve.points.len() + 1) {
                    progress(&curve.recipe, trainer.state.train_seconds, None)?;
                } else {
                    let losses = &trainer.state.losses[*losses_seen..];
                    let loss = losses.iter().map(|&l| l as f64).sum::<f64>() / losses.len() as f64;
                    *losses_seen = trainer.state.losses.len();
                    let steps = trainer.state.config.sampler_steps.unwrap_or(plan.fid_steps);
                    let fid = tracker.score(trainer, plan.fid_samples, steps).await?;
                    curve.points.push(Point {
                        train_seconds: trainer.state.train_seconds,
                        step: trainer.state.step,
                        images: trainer.state.step * trainer.state.config.batch,
                        loss,
                        fid,
                    });
                    progress(&curve.recipe, trainer.state.train_seconds, curve.points.last())?;
                }
            }
        }
    }
    Ok(runs.into_iter().map(|(_, curve, _)| curve).collect())
}

/// The speed-run's report: its header, the plan and every curve.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: Header,
    pub plan: Plan,
    pub curves: Vec<Curve>,
}

impl Report {
    /// The recipe with the lowest final FID.
    pub fn winner(&self) -> Option<&Curve> {
        self.curves
            .iter()
            .filter(|c| c.points.last().is_some_and(|p| p.fid.is_finite()))
            .min_by(|a, b| {
                let last = |c: &Curve| c.points.last().map_or(f64::INFINITY, |p| p.fid);
                last(a).total_cmp(&last(b))
            })
    }
}

impl ExperimentReport for Report {
    /// The Markdown table: one row per recipe and evaluation, the winner named.
    fn markdown(&self) -> String {
        let p = &self.plan;
        let mut md = format!(
            "# Speed-run: MNIST-FID against training time\n\n{} Every recipe trained {:.0} s \
             (time inside the training step, after one untimed warm-up step), round-robin in \
             {:.0} s slices; MNIST-FID of the EMA weights from {} samples, each recipe's own sampler \
             and steps (DPM-Solver++ at 10 for the MLP; DDPM's ancestral sampler at {} for the \
             U-Nets), at {} points.\n\n",
            self.header.markdown(),
            p.budget_seconds,
            p.slice_seconds,
            p.fid_samples,
            p.fid_steps,
            p.evals,
        );
        md += &format!(
            "| recipe | parameters | training s | steps | images | mean loss | {} |\n",
            mnist_fid_label(p.fid_samples)
        );
        md += "|---|---:|---:|---:|---:|---:|---:|\n";
        for c in &self.curves {
            for pt in &c.points {
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.0} | {} | {} | {:.4} | {:.1} |",
                    c.recipe, c.parameters, pt.train_seconds, pt.step, pt.images, pt.loss, pt.fid
                );
            }
        }
        md += "\n";
        for c in &self.curves {
            let _ = writeln!(md, "- **{}**: {}.", c.recipe, c.idea);
        }
        if let Some(best) = self.winner() {
            let _ = writeln!(
                md,
                "\nLowest MNIST-FID at the end of the budget: **{}** ({:.1}).",
                best.recipe,
                best.points.last().map_or(f64::NAN, |p| p.fid)
            );
        }
        md
    }

    /// speedrun.md and speedrun.json.
    fn files(&self) -> Result<Vec<ReportFile>> {
        super::text_files("speedrun", &self.markdown(), self)
    }

    /// fid-vs-time.png.
    fn plots(&self) -> Result<Vec<ReportFile>> {
        let series: Vec<Series> = self
            .curves
            .iter()
            .map(|c| Series {
                name: c.recipe.clone(),
                points: c
                    .points
                    .iter()
                    .map(|p| (p.train_seconds, p.fid, format!("{}", p.step)))
                    .collect(),
            })
            .collect();
        let caption = format!(
            "MNIST-FID vs training time ({} samples, each recipe's sampler; labels: step)",
            self.plan.fid_samples
        );
        let y = mnist_fid_label(self.plan.fid_samples);
        let axes = Axes {
            caption: &caption,
            x: "training time (s)",
            y: &y,
        };
        let name = "fid-vs-time.png";
        Ok(vec![(
            name.into(),
            plots::curves(Path::new(name), axes, &series)?,
        )])
    }
}
