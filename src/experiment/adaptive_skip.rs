//! The experiment of the adaptive U-Net paper ("Accelerating Diffusion Models using Adaptive
//! Neural Network Architecture", Giladi, Meir, Kavar and Elad): MNIST-FID and interleaved
//! sampling speed-up of skip-trained models against an untrained-for-skips baseline, per skip
//! type and exponent c.
//!
//! Every arm (model, c, sampler, steps) draws the same number of images in batches; the batches
//! run round-robin over the arms (round r of every arm uses seed + r), so the machine's drift
//! hits all arms alike, and the speed-up of (model, c) is one minus the median over rounds of
//! its batch time over the same model's c = 0 batch time in that round.

use super::round_robin::{sample_in_turn, warm_up, Contender, Rounds};
use super::ExperimentPlan;
use crate::diffusion::{Sampler, SkipPlan, Spacing};
use crate::eval::{FeatureNet, Reference, Scores};
use crate::models::SkipType;
use crate::pipeline::speedup;
use crate::pipeline::{SampleRequest, TrainedModel};
use crate::train::{SkipTraining, TrainConfig, Trainer};
use crate::{Error, Gpu, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Skip exponents c of the paper's tables (0 = the whole network at every step).
pub const EXPONENTS: [f32; 5] = [0.0, 1.0, 2.0, 3.0, 5.0];
/// The exponent of the paper's Table 3 (its chosen trade-off).
pub const TABLE3_EXPONENT: f32 = 2.0;
/// DDIM etas of the paper's Table 3.
pub const ETAS: [f32; 3] = [0.0, 0.5, 1.0];

/// How much to sample.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// Images per arm (every MNIST-FID in the report is of this many samples).
    pub samples: usize,
    /// Images per sampling batch (one timed unit of the round-robin).
    pub batch: usize,
    /// DDPM ancestral steps of Tables 1 and 2.
    pub steps: usize,
    /// The baseline's step counts in Table 3; the skipping model runs twice as many (one of
    /// its steps costs about half of the baseline's at c = 2).
    pub table3_steps: Vec<usize>,
    pub seed: u64,
}

impl ExperimentPlan for Plan {
    /// `--quick`: 100 images per arm in 5 timed rounds of 20, 10 DDPM steps, Table 3 at 5 and 10
    /// baseline steps (about 10 minutes on lavapipe with the shipped models; the bound is 20).
    fn quick() -> Plan {
        Plan {
            samples: 100,
            batch: 20,
            steps: 10,
            table3_steps: vec![5, 10],
            seed: 0,
        }
    }

    /// The full run (for a real GPU): 2,000 images per arm, 100 DDPM steps, Table 3 at 10, 20,
    /// 50 and 100 baseline steps.
    fn full() -> Plan {
        Plan {
            samples: 2000,
            batch: 250,
            steps: 100,
            table3_steps: vec![10, 20, 50, 100],
            seed: 0,
        }
    }
}

/// One model of the experiment.
pub struct SkipModel {
    /// Row name: "DDPM (no training for skips)", "Zero", "Duplicate", "Interpolate", "Zero (uniform k)".
    pub label: String,
    /// Where it was loaded from.
    pub path: String,
    pub model: TrainedModel,
}

impl SkipModel {
    /// The model's skip type (what replaces the skipped levels).
    pub fn skip_type(&self) -> Result<SkipType> {
        match &self.model.state.model {
            crate::models::ModelConfig::UNet(u) => Ok(u.skip_type),
            other => Err(Error::Config(format!(
                "{}: the adaptive-skip experiment needs U-Net checkpoints; this is a {}",
                self.path,
                other.kind_name()
            ))),
        }
    }

    /// How it was trained for skipping (None: never skipped in training).
    pub fn skip_training(&self) -> Option<SkipTraining> {
        self.model.state.config.skip_training
    }

    /// The U-Net's spatial levels N of k(t) = min(N-1, floor(N - N(1-t)^c)).
    pub fn levels(&self) -> usize {
        self.model.net.levels()
    }
}

/// One measured configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Arm {
    /// Index into the experiment's models.
    pub model: usize,
    pub exponent: f32,
    pub sampler: Sampler,
    pub steps: usize,
}

/// An arm's measurements.
#[derive(Clone, Debug, Serialize)]
pub struct ArmResult {
    pub model: String,
    pub exponent: f32,
    pub sampler: String,
    pub eta: Option<f32>,
    pub steps: usize,
    /// None in a run that measures speed alone (a model MNIST-FID cannot score).
    pub scores: Option<Scores>,
    /// Sampling seconds of each round's batch (feature extraction excluded).
    pub batch_seconds: Vec<f64>,
    /// 1 - median over rounds of (this arm's batch time / the same model's and sampler's
    /// c = 0 batch time), in percent; None when that arm was not run.
    pub speedup_percent: Option<f64>,
}

/// The arms of Tables 1-3 for `models` (models[0] is the baseline, models[1] the skip-trained
/// zero model of Table 3 when present), without duplicates.
pub fn arms(models: &[SkipModel], plan: &Plan) -> Vec<Arm> {
    let mut arms: Vec<Arm> = Vec::new();
    let mut add = |arm: Arm| {
        if !arms.contains(&arm) {
            arms.push(arm);
        }
    };
    for model in 0..models.len() {
        for exponent in EXPONENTS {
            add(Arm {
                model,
                exponent,
                sampler: Sampler::Ddpm,
                steps: plan.steps,
            });
        }
    }
    let table3 = [(table3_model(models), TABLE3_EXPONENT, 2), (0, 0.0, 1)];
    for (model, exponent, factor) in table3 {
        for &steps in &plan.table3_steps {
            for sampler in table3_samplers() {
                add(Arm {
                    model,
                    exponent,
                    sampler,
                    steps: steps * factor,
                });
            }
        }
    }
    arms
}

/// The rows of Table 3: DDIM at each eta (our DDPM ancestral sampler is DDIM with eta = 1,
/// so the paper's DDPM row, which uses the larger variance beta_t, has no separate row here).
fn table3_samplers() -> impl Iterator<Item = Sampler> {
    ETAS.into_iter().map(|eta| Sampler::Ddim {
        eta,
        spacing: Spacing::Uniform,
    })
}

/// The model of Table 3's "our model": the first skip-trained `zero` model (else the baseline).
fn table3_model(models: &[SkipModel]) -> usize {
    (1..models.len())
        .find(|&i| models[i].skip_type().ok() == Some(SkipType::Zero))
        .unwrap_or(0)
}

/// Runs every arm round-robin, `progress(done_batches, total_batches, arm_label)` before each
/// batch; returns the results in `arms` order, scored by `scoring` (features and the
/// reference set; without it the arms are timed only).
pub async fn run(
    gpu: &Gpu,
    models: &[SkipModel],
    arms: &[Arm],
    plan: &Plan,
    scoring: Option<(&dyn FeatureNet, &Reference)>,
    progress: impl FnMut(usize, usize, &str) -> Result<()>,
) -> Result<Vec<ArmResult>> {
    let rounds = Rounds {
        samples: plan.samples,
        batch: plan.batch,
        seed: plan.seed,
    };
    let nets: Vec<_> = models
        .iter()
        .map(|m| (m.model.net.as_ref(), m.model.image_shape()))
        .collect();
    warm_up(gpu, &nets, rounds).await?;
    let contenders = arms
        .iter()
        .map(|arm| {
            let model = &models[arm.model];
            let state = &model.model.state;
            Ok(Contender {
                label: arm_label(model, arm),
                sampling: model.model.sampling(),
                request: SampleRequest::builder(&state.model, &state.process)
                    .sampler(arm.sampler)
                    .steps(Some(arm.steps))
                    .count(plan.batch)
                    .seed(plan.seed)
                    .skip(SkipPlan::Exponent(arm.exponent))
                    .build()?,
            })
        })
        .collect::<Result<Vec<Contender>>>()?;
    let features = scoring.map(|(features, _)| features);
    let generated = sample_in_turn(gpu, &contenders, rounds, features, progress).await?;
    arms.iter()
        .zip(&generated)
        .map(|(arm, g)| {
            let base = arms.iter().position(|a| {
                a.model == arm.model && a.sampler == arm.sampler && a.steps == arm.steps && a.exponent == 0.0
            });
            let speedup_percent =
                base.map(|b| 100.0 * speedup(&g.batch_seconds, &generated[b].batch_seconds));
            Ok(ArmResult {
                model: models[arm.model].label.clone(),
                exponent: arm.exponent,
                sampler: arm.sampler.to_string(),
                eta: match arm.sampler {
                    Sampler::Ddim { eta, .. } => Some(eta),
                    _ => None,
                },
                steps: arm.steps,
                scores: scoring
                    .map(|(features, reference)| g.scores(features, reference))
                    .transpose()?,
                batch_seconds: g.batch_seconds.clone(),
                speedup_percent,
            })
        })
        .collect()
}

/// "Zero c=2 ddim eta 0.5 20 steps" for progress lines.
fn arm_label(model: &SkipModel, arm: &Arm) -> String {
    let sampler = match arm.sampler {
        Sampler::Ddim { eta, .. } => format!("ddim eta {eta}"),
        other => other.to_string(),
    };
    format!("{} c={} {sampler} {} steps", model.label, arm.exponent, arm.steps)
}

/// The skip-trained models of the experiment: (row label, skip type, training scheme, file
/// suffix); `<baseline stem>-<suffix>.safetensors` in the models folder.
pub const SKIP_MODELS: [(&str, SkipType, SkipTraining, &str); 4] = [
    ("Zero", SkipType::Zero, CONSISTENT, "skip-zero"),
    ("Duplicate", SkipType::Duplicate, CONSISTENT, "skip-duplicate"),
    (
        "Interpolate",
        SkipType::Interpolate,
        CONSISTENT,
        "skip-interpolate",
    ),
    (
        "Zero (uniform k)",
        SkipType::Zero,
        SkipTraining::Uniform,
        "skip-zero-uniform",
    ),
];
const CONSISTENT: SkipTraining = SkipTraining::Consistent { exponent: 2.0 };

/// Where the skip-trained model with file suffix `suffix` of `baseline` lives in `dir`.
pub fn skip_model_path(dir: &Path, baseline: &Path, suffix: &str) -> PathBuf {
    let stem = baseline
        .file_stem()
        .map_or("model".into(), |s| s.to_string_lossy().to_string());
    dir.join(format!("{stem}-{suffix}.safetensors"))
}

/// Fine-tunes `baseline` for `skip_type` with `scheme` for `steps` steps (batch 32, 20 warm-up
/// steps, no live MNIST-FID) and saves its sampling-only export (`wgdiff export`, as the shipped
/// `mnist-small-skip-*` files are) to `path`; `progress(step, loss)` after each step.
pub async fn fine_tune(
    gpu: &Gpu,
    baseline: &Path,
    (skip_type, scheme): (SkipType, SkipTraining),
    steps: usize,
    path: &Path,
    mut progress: impl FnMut(usize, f32) -> Result<()>,
) -> Result<()> {
    let config = TrainConfig {
        init: Some(baseline.to_path_buf()),
        skip_type: Some(skip_type),
        skip_training: Some(scheme),
        steps,
        batch: 32,
        lr: 1e-3,
        warmup: 20,
        ema_decay: 0.999,
        checkpoint_every: 0,
        max_minutes: 0.0,
        fid_share: 0.0,
        out: path.with_extension("run"),
        ..TrainConfig::default()
    };
    let mut trainer = Trainer::new(gpu, config)?;
    while !trainer.finished() {
        let loss = trainer.step().await?;
        progress(trainer.state.step, loss)?;
    }
    let origin = path.display().to_string();
    crate::run_state::sampling_export(&trainer.capture().await?, &origin)?.save(path)
}
