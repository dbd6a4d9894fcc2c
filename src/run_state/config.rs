//! `TrainConfig`: everything a training run needs, with defaults that train the speed-run MLP;
//! read from a TOML file and/or command-line flags, stored in every checkpoint.

use crate::checkpoint::compressed::WeightBits;
use crate::diffusion::{
    BetaSchedule, GuidanceInterval, Objective, Process, Sampler, TimeSampling, DEFAULT_SAMPLER_STEPS,
};
use crate::models::{preset, ModelConfig, SkipType};
use crate::optim::MomentStorage;
use crate::{DType, Error, Gpu, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Guidance scale of models trained for classifier-free guidance (see
/// [`super::TrainState::default_guidance`]); chosen by MNIST-FID (README, "The speed-run").
pub const CFG_GUIDANCE: f32 = 2.0;

/// Label-drop probability of class-conditional models when `class_dropout` is not set.
pub const DEFAULT_CLASS_DROPOUT: f32 = 0.1;

/// The share of a run's time live MNIST-FID takes by default (`fid_share`): a score and a
/// grid every ~20 s of training for the speed-run recipe on lavapipe.
pub const DEFAULT_FID_SHARE: f32 = 0.1;
/// The largest `fid_share`: half the time scoring.
pub const MAX_FID_SHARE: f32 = 0.5;

/// How training batches pick the number k of deepest U-Net levels to skip (the two schemes of
/// the adaptive U-Net paper, Giladi, Meir, Kavar and Elad).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "scheme", rename_all = "snake_case")]
pub enum SkipTraining {
    /// k uniform in {0, .., N-1} per batch, timesteps uniform over the whole process.
    Uniform,
    /// Every batch's timesteps share one k(t) of the schedule with exponent `exponent`
    /// (k(t) = min(N-1, floor(N - N(1-t)^c))), and the network skips that k: a first time
    /// drawn uniformly picks the interval, the rest are drawn inside it (so timesteps stay
    /// uniform overall). The paper's better scheme.
    Consistent { exponent: f32 },
}

impl SkipTraining {
    /// Parses `uniform` or `consistent:C` (C > 0, e.g. `consistent:2`).
    pub fn parse(text: &str) -> Result<SkipTraining> {
        let bad = || {
            Error::Config(format!(
                "skip training \"{text}\": expected `uniform` or `consistent:C` with an exponent C > 0, e.g. consistent:2"
            ))
        };
        match text.split_once(':') {
            None if text == "uniform" => Ok(SkipTraining::Uniform),
            Some(("consistent", c)) => match c.parse::<f32>() {
                Ok(exponent) if exponent > 0.0 && exponent.is_finite() => {
                    Ok(SkipTraining::Consistent { exponent })
                }
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }
}

/// A training run's settings (serde; unknown keys in a TOML file are an error).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Model preset (`wgdiff model --list`); ignored when `model` is given.
    pub preset: String,
    /// A full model configuration in place of the preset.
    pub model: Option<ModelConfig>,
    /// Fine-tune: start from the EMA weights of this `wgdiff train` checkpoint and take its
    /// model (`preset` and `model` are then ignored); step, optimiser and data start afresh.
    pub init: Option<PathBuf>,
    /// The noising process and objective (TOML `[process]`, e.g. `kind = "vp"`,
    /// `schedule = { kind = "cosine", s = 0.008 }`, `steps = 1000`, `objective = "v"`); None: the
    /// model's default ([`super::default_process`]: DDPM for U-Nets, v on the cosine schedule for
    /// the MLP, the VE SDE for the ScoreNet); with `init` or `distill`, that checkpoint's own
    /// (a distillation student's with its objective set to v).
    pub process: Option<Process>,
    /// Replace the noise schedule of that process (`process`'s, the starting checkpoint's or
    /// the model's default); None: keep it. The VP process only.
    pub schedule: Option<BetaSchedule>,
    /// Replace what the network predicts in that process, likewise; None: keep it.
    pub objective: Option<Objective>,
    /// Set the adaptive U-Net's skip type (zero, duplicate, interpolate) of the model.
    pub skip_type: Option<SkipType>,
    /// Dataset: `mnist`, `mnist:DIR`, `fashion:DIR`, `cifar10:DIR` or `folder:DIR`.
    pub data: String,
    /// Optimiser steps.
    pub steps: usize,
    /// Passes over the data; when given, sets `steps` to epochs x batches per epoch.
    pub epochs: Option<usize>,
    /// Images per step.
    pub batch: usize,
    /// Adam learning rate after warm-up.
    pub lr: f32,
    /// Linear learning-rate warm-up steps.
    pub warmup: u32,
    /// The share of the run, at its end, over which the learning rate falls linearly to 0 (the
    /// end is `steps` or `max_minutes`, whichever comes first); 0 = no decay.
    pub lr_decay: f32,
    /// Clip the global gradient norm to this (0 = no clipping).
    pub max_grad_norm: f32,
    /// EMA decay of the sampling weights (warmed up as min(decay, (1 + s) / (10 + s))).
    pub ema_decay: f32,
    /// Seed of the weights, batches, timesteps and noise.
    pub seed: u64,
    /// Output folder: checkpoint, config and sample grids.
    pub out: PathBuf,
    /// Write a sample grid every this many steps (0 = only at the end).
    pub sample_every: usize,
    /// Write a checkpoint every this many steps (0 = only at the end).
    pub checkpoint_every: usize,
    /// Images in each sample grid.
    pub grid_images: usize,
    /// Sampler steps for the grids.
    pub grid_steps: usize,
    /// Random horizontal flips of training images.
    pub flip: bool,
    /// Probability of dropping the class label of a class-conditional model (classifier-free
    /// guidance training); None: [`DEFAULT_CLASS_DROPOUT`] for class-conditional models
    /// (unconditional models take no labels).
    pub class_dropout: Option<f32>,
    /// Min-SNR-gamma loss weighting (e.g. 5); None: plain loss.
    pub min_snr_gamma: Option<f32>,
    /// How the training batches' network times are drawn (TOML `time_sampling = { kind =
    /// "logit_normal", mean = 0.0, std = 1.0 }` or `{ kind = "uniform" }`); None: uniform,
    /// and a fresh run takes its model's default ([`super::default_time_sampling`]:
    /// logit-normal (0, 1) for the MLP), which its checkpoints then record.
    pub time_sampling: Option<TimeSampling>,
    /// Train the adaptive U-Net for level skipping (the adaptive U-Net paper); None: never skip.
    pub skip_training: Option<SkipTraining>,
    /// Stop training after this many minutes of this run's training (`train_seconds`: not
    /// checkpoints, MNIST-FID or the autotuner's measuring of a fresh device) even if steps
    /// remain (then the checkpoint and grid are written as usual; `--resume` continues); 0 =
    /// no limit.
    pub max_minutes: f32,
    /// Precision of the network's forward and backward (weights, Adam and EMA stay f32).
    pub precision: Precision,
    /// The optimizer: AdamW with f32 or 8-bit moments.
    pub optimizer: Optimizer,
    /// Score MNIST-FID of the EMA network every this many steps and keep the best weights in
    /// best.safetensors (0 = off; needs 1-channel 28x28 images). Set, it replaces `fid_share`.
    pub fid_every: usize,
    /// Live MNIST-FID: when `fid_every` is 0 and the run trains on MNIST with a model of
    /// 1-channel 28x28 images, score the EMA network (and sample a grid beside it) as often as
    /// keeps that work at about this share of the run's time, keeping the best weights as
    /// `fid_every` does (0 = off; at most [`MAX_FID_SHARE`]).
    pub fid_share: f32,
    /// Images sampled for each MNIST-FID evaluation.
    pub fid_samples: usize,
    /// Sampler steps for the MNIST-FID samples (the default sampler).
    pub fid_steps: usize,
    /// Quantisation-aware training: the forward and backward see the conv and linear weights
    /// rounded to these integers as `wgdiff compress --per-channel` stores them, and the
    /// gradient updates the float weights (see [`crate::compress::qat`]); None: plain floats.
    pub qat: Option<WeightBits>,
    /// Progressive distillation: train a student that takes in one DDIM step what this
    /// teacher takes in two (see [`Distill`]); None: ordinary training.
    pub distill: Option<Distill>,
    /// The sampler of the run's grids and live MNIST-FID, which `wgdiff sample`/`eval` and the
    /// experiments then default to for its checkpoints (`SampleRequest::for_state`; the app's
    /// denoise view keeps its own sampler menu) (TOML `sampler = { name = "dpm-solver++",
    /// spacing = "log-snr" }`); None: the model's default ([`super::default_sampling`]:
    /// DPM-Solver++ for the MLP, the process's default sampler for the others). A distilled
    /// student samples with DDIM on its own grid instead.
    pub sampler: Option<Sampler>,
    /// The steps `wgdiff sample`/`eval` take with `sampler` when none are asked (the grids and
    /// live MNIST-FID take `grid_steps` and `fid_steps`); None: the sampler's own default.
    pub sampler_steps: Option<usize>,
    /// The classifier-free guidance scale of a class-conditional model trained with labels
    /// dropped, for its grids, live MNIST-FID and `wgdiff sample`/`eval`; None: the model's
    /// default ([`super::default_sampling`], else [`CFG_GUIDANCE`]).
    pub guidance: Option<f32>,
    /// The noise levels that guidance applies at (TOML `guidance_interval = { low = 0.28, high =
    /// 5.42 }`); None: the model's default with its default guidance
    /// ([`super::default_sampling`]: the paper's interval for the MLP), else every call.
    pub guidance_interval: Option<GuidanceInterval>,
}

/// A progressive-distillation round (Salimans & Ho 2022): the student starts from the teacher's
/// weights (unless `init` says otherwise) and learns to match two of the teacher's deterministic
/// DDIM steps with one, on the trailing grid of `steps` steps (`crate::diffusion::DistillGrid`).
/// The student's checkpoint samples with DDIM on that grid by default, and can teach the next
/// round (`steps` halved again).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distill {
    /// The teacher's checkpoint (a `wgdiff train` or `export` file of an unconditional VP model,
    /// or an earlier round's student).
    pub teacher: PathBuf,
    /// The student's sampling steps: the teacher walks twice as many.
    pub steps: usize,
}

/// The optimizer of a training run (AdamW either way; they differ in how the moments are kept).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Optimizer {
    /// f32 moments: 8 bytes of state per parameter.
    #[default]
    Adam,
    /// Block-wise 8-bit moments ([`MomentStorage::Int8`]): 2 bytes per parameter plus 8 per
    /// block of 256, about a quarter of Adam's.
    Adam8bit,
}

impl Optimizer {
    /// How Adam keeps the moments.
    pub fn moments(self) -> MomentStorage {
        match self {
            Optimizer::Adam => MomentStorage::F32,
            Optimizer::Adam8bit => MomentStorage::Int8,
        }
    }
}

impl std::str::FromStr for Optimizer {
    type Err = Error;

    fn from_str(name: &str) -> Result<Optimizer> {
        match name {
            "adam" => Ok(Optimizer::Adam),
            "adam8bit" => Ok(Optimizer::Adam8bit),
            _ => Err(Error::Config(format!(
                "unknown optimizer `{name}`; choose adam or adam8bit"
            ))),
        }
    }
}

impl std::fmt::Display for Optimizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Optimizer::Adam => "adam",
            Optimizer::Adam8bit => "adam8bit",
        })
    }
}

/// Precision of the network's forward and backward passes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// Everything in f32.
    #[default]
    F32,
    /// Mixed precision: activations and gradients in f16 (parameters cast at use), f32 master
    /// weights, Adam and EMA, dynamic loss scaling ([`crate::optim::LossScaler`]).
    F16,
}

impl Precision {
    /// The dtype the network runs in.
    pub fn dtype(self) -> DType {
        match self {
            Precision::F32 => DType::F32,
            Precision::F16 => DType::F16,
        }
    }

    /// The warning to print when f16 cannot run natively on `gpu` (no SHADER_F16).
    pub fn fallback_warning(self, gpu: &Gpu) -> Option<String> {
        (self == Precision::F16 && !gpu.has_f16()).then(|| {
            "warning: this adapter lacks SHADER_F16, so --precision f16 stores activations in f16 \
             but every op computes in f32 and casts back (slower than --precision f32, with f16's \
             rounding); use an adapter with SHADER_F16 (`wgdiff info` lists features) or f32"
                .to_string()
        })
    }
}

impl std::str::FromStr for Precision {
    type Err = Error;

    fn from_str(name: &str) -> Result<Precision> {
        match name {
            "f32" => Ok(Precision::F32),
            "f16" => Ok(Precision::F16),
            _ => Err(Error::Config(format!(
                "unknown precision `{name}`; choose f32 or f16"
            ))),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
        })
    }
}

impl Default for TrainConfig {
    fn default() -> Self {
        // The speed-run recipe (`wgdiff experiment speedrun`): the class-conditional residual MLP
        // (labels dropped 10% of the time, sampled by DPM-Solver++ at guidance 1.75: its
        // `default_sampling`), v on the cosine schedule (its default process) at logit-normal
        // times (its `default_time_sampling`), a high lr and a
        // short EMA, the lr falling to 0 over the run's last 30%; the time budget ends it on a CPU
        // device (10,000 steps: on Mesa 25's lavapipe the texel matmuls ran 2,000 in under 2
        // minutes, and more steps kept scoring lower), 5 minutes of it so that a fresh clone's
        // build, its first kernel measuring and the main job fit 15 (docs/training.md).
        TrainConfig {
            preset: "mnist-mlp".into(),
            model: None,
            init: None,
            process: None,
            schedule: None,
            objective: None,
            skip_type: None,
            data: "mnist".into(),
            steps: 10_000,
            epochs: None,
            batch: 128,
            lr: 4e-3,
            warmup: 50,
            lr_decay: 0.3,
            max_grad_norm: 1.0,
            ema_decay: 0.99,
            seed: 0,
            out: PathBuf::from("runs/mnist"),
            sample_every: 0,
            checkpoint_every: 200,
            grid_images: 16,
            grid_steps: DEFAULT_SAMPLER_STEPS,
            flip: false,
            class_dropout: None,
            min_snr_gamma: None,
            time_sampling: None,
            skip_training: None,
            max_minutes: 5.0,
            precision: Precision::F32,
            optimizer: Optimizer::Adam,
            fid_every: 0,
            fid_share: DEFAULT_FID_SHARE,
            fid_samples: 256,
            fid_steps: 20,
            qat: None,
            distill: None,
            sampler: None,
            sampler_steps: None,
            guidance: None,
            guidance_interval: None,
        }
    }
}

/// A setting that must be a finite number >= 0, where 0 means `zero_means`: an error naming
/// `name`, the value and what 0 does otherwise (so inf and NaN never pass as "off").
pub fn check_finite_nonnegative(name: &str, value: f32, zero_means: &str) -> Result<()> {
    if value >= 0.0 && value.is_finite() {
        return Ok(());
    }
    Err(Error::Config(format!(
        "{name} must be a finite number >= 0 (0: {zero_means}), got {value}"
    )))
}

impl TrainConfig {
    /// Reads a TOML file (any subset of the fields; the rest keep their defaults).
    pub fn from_toml_file(path: &std::path::Path) -> Result<TrainConfig> {
        let bytes =
            crate::fsio::read_io(path).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        let text = String::from_utf8(bytes).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        toml::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
    }

    /// The model this run trains.
    pub fn model_config(&self) -> Result<ModelConfig> {
        let model = match &self.model {
            Some(m) => m.clone(),
            None => preset(&self.preset)?,
        };
        self.apply_skip_type(model)
    }

    /// `model` with this run's `skip_type`, if one is set.
    pub fn apply_skip_type(&self, model: ModelConfig) -> Result<ModelConfig> {
        match self.skip_type {
            Some(skip_type) => model.with_skip_type(skip_type),
            None => Ok(model),
        }
    }

    /// The label-drop probability a run of `model` trains with: None for an unconditional
    /// model (an error if `class_dropout` is set), else `class_dropout` or
    /// [`DEFAULT_CLASS_DROPOUT`].
    pub fn label_dropout(&self, model: &ModelConfig) -> Result<Option<f32>> {
        match (self.class_dropout, model.classes()) {
            (Some(_), None) => Err(Error::Config(
                "class_dropout needs a class-conditional model (set `classes` in the model config)".into(),
            )),
            (p, Some(_)) => Ok(Some(p.unwrap_or(DEFAULT_CLASS_DROPOUT))),
            (None, None) => Ok(None),
        }
    }

    /// True when `model` learns the unconditional branch classifier-free guidance needs: it is
    /// class-conditional and this run drops labels.
    pub fn trains_for_guidance(&self, model: &ModelConfig) -> Result<bool> {
        Ok(matches!(self.label_dropout(model)?, Some(p) if p > 0.0))
    }

    /// Checks the values a run cannot start with, naming the setting and the fix.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(msg));
        if self.steps == 0 || self.batch == 0 {
            return bad("steps and batch must be at least 1".into());
        }
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return bad(format!("lr must be a positive number, got {}", self.lr));
        }
        if self.grid_images == 0 || self.grid_steps == 0 {
            return bad(format!(
                "grid_images and grid_steps must be at least 1 (every run ends with a sample grid), got {} and {}",
                self.grid_images, self.grid_steps
            ));
        }
        if self.epochs == Some(0) {
            return bad("epochs must be at least 1 (or leave it out and give steps)".into());
        }
        check_finite_nonnegative("max_minutes", self.max_minutes, "no time limit")?;
        check_finite_nonnegative("max_grad_norm", self.max_grad_norm, "no clipping")?;
        if !(0.0..=1.0).contains(&self.lr_decay) {
            return bad(format!(
                "lr_decay must be in [0, 1] (the share of the run at its end over which the lr falls to 0; \
                 0 = no decay), got {}",
                self.lr_decay
            ));
        }
        if !(0.0..1.0).contains(&self.ema_decay) {
            return bad(format!("ema_decay must be in [0, 1), got {}", self.ema_decay));
        }
        if let Some(w) = self.guidance {
            if !(w >= 0.0 && w.is_finite()) {
                return bad(format!(
                    "guidance must be a finite number >= 0 (1 = plain conditional sampling), got {w}"
                ));
            }
        }
        if let Some(interval) = self.guidance_interval {
            interval.check()?;
        }
        if let Some(sampling) = self.time_sampling {
            sampling.check()?;
        }
        if self.sampler_steps == Some(0) {
            return bad("sampler_steps must be at least 1 (or leave it out for the sampler's own)".into());
        }
        if let Some(p) = self.class_dropout {
            if !(0.0..=1.0).contains(&p) {
                return bad(format!("class_dropout must be in [0, 1], got {p}"));
            }
        }
        if !(0.0..=MAX_FID_SHARE).contains(&self.fid_share) {
            return bad(format!(
                "fid_share must be in [0, {MAX_FID_SHARE}] (the share of the run's time live MNIST-FID may \
                 take; 0 = off), got {}",
                self.fid_share
            ));
        }
        if (self.fid_every > 0 || self.fid_share > 0.0) && (self.fid_samples < 2 || self.fid_steps == 0) {
            return bad(format!(
                "MNIST-FID during training (fid_every or fid_share) needs fid_samples >= 2 and fid_steps >= 1, \
                 got {} and {}; set fid_share = 0 and fid_every = 0 to train without it",
                self.fid_samples, self.fid_steps
            ));
        }
        if let Some(SkipTraining::Consistent { exponent }) = self.skip_training {
            if !(exponent > 0.0 && exponent.is_finite()) {
                return bad(format!("skip_training exponent must be > 0, got {exponent}"));
            }
        }
        if self.init.is_none() {
            // (with `init` the model, and what `skip_type` applies to, is the checkpoint's)
            self.model_config()?;
        }
        if let Some(process) = &self.process {
            process.marginals()?;
        }
        if let Some(d) = &self.distill {
            if d.steps == 0 {
                return bad("distill steps (the student's sampling steps) must be at least 1".into());
            }
            if self.skip_training.is_some() || self.min_snr_gamma.is_some() {
                return bad(
                    "distillation has its own loss: leave skip_training and min_snr_gamma out of a --distill run"
                        .into(),
                );
            }
        }
        Ok(())
    }

    /// Fills in `sampler`, `sampler_steps`, `guidance` and `guidance_interval` where unset from
    /// the model's defaults ([`super::default_sampling`], where its sampler fits `process`; not
    /// for a distillation student, which samples with DDIM on its grid), and checks them: a
    /// sampler that fits `process`, steps only with a sampler, guidance and its interval only
    /// for a model trained for it.
    pub fn resolve_sampling(&mut self, model: &ModelConfig, process: &Process) -> Result<()> {
        let guided = self.trains_for_guidance(model)?;
        if (self.guidance.is_some() || self.guidance_interval.is_some()) && !guided {
            return Err(Error::Config(
                "guidance and its interval apply to a class-conditional model trained with labels dropped \
                 (class_dropout > 0); this run's model is not: leave them out"
                    .into(),
            ));
        }
        let default = super::default_sampling(model).filter(|d| d.sampler.fits(process));
        if let (None, None, Some(d)) = (&self.distill, self.sampler, default) {
            self.sampler = Some(d.sampler);
            self.sampler_steps = self.sampler_steps.or(Some(d.steps));
            if guided {
                self.guidance = self.guidance.or(Some(d.guidance));
                self.guidance_interval = self.guidance_interval.or(d.guidance_interval);
            }
        }
        if let Some(interval) = self.guidance_interval {
            interval.network_times(process)?;
        }
        match self.sampler {
            Some(sampler) if !sampler.fits(process) => Err(Error::Config(format!(
                "sampler {sampler} does not sample the {} process this run trains; leave sampler out for its \
                 default ({})",
                process.name(),
                crate::diffusion::default_sampler(process)
            ))),
            None if self.sampler_steps.is_some() => Err(Error::Config(
                "sampler_steps needs a sampler (the steps `wgdiff sample` and `eval` take with it)".into(),
            )),
            _ => Ok(()),
        }
    }

    /// Fills in `time_sampling` where unset from the model's default
    /// ([`super::default_time_sampling`], on a VP process, without skip training or
    /// distillation, which draw their own times), and refuses a non-uniform one where it cannot
    /// apply.
    pub fn resolve_time_sampling(&mut self, model: &ModelConfig, process: &Process) -> Result<()> {
        match (self.time_sampling, self.own_times().map(|(_, why)| why)) {
            (None, None) => {
                self.time_sampling = super::default_time_sampling(model)
                    .filter(|default| default.check_process(process).is_ok())
            }
            (Some(s), Some(why)) if s != TimeSampling::Uniform => {
                return Err(Error::Config(format!(
                    "time_sampling {s} does not apply here: {why}; leave time_sampling out"
                )))
            }
            (Some(s), None) => s.check_process(process)?,
            _ => {}
        }
        Ok(())
    }

    /// What this run draws its training times from where it draws them itself (skip training
    /// and distillation, in place of `time_sampling`), and why.
    fn own_times(&self) -> Option<(&'static str, &'static str)> {
        match (self.skip_training, &self.distill) {
            (Some(_), _) => Some((
                "times per skipped level",
                "skip training draws its times per skipped level",
            )),
            (_, Some(_)) => Some((
                "times on the student's grid",
                "distillation draws the student's steps from its grid",
            )),
            _ => None,
        }
    }

    /// How this run draws its training times, as its startup line says it: its time sampling,
    /// or what skip training or distillation draw in its place.
    pub fn times_description(&self) -> String {
        match self.own_times() {
            Some((what, _)) => what.into(),
            None => format!("{} times", self.time_sampling.unwrap_or_default()),
        }
    }

    /// The steps a sample grid or live MNIST-FID of this run samples with: a distilled
    /// student's own (on its DDIM grid), else `requested`.
    pub fn sampling_steps(&self, requested: usize) -> usize {
        self.distill.as_ref().map_or(requested, |d| d.steps)
    }
}
