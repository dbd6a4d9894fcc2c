//! The saved training state's schema: the recipe (`TrainConfig`) and what a checkpoint's
//! JSON holds besides tensors (`TrainState`), read by training, sampling and compression alike.

pub mod config;

pub use config::{
    check_finite_nonnegative, Distill, Optimizer, Precision, SkipTraining, TrainConfig, CFG_GUIDANCE,
    DEFAULT_CLASS_DROPOUT, DEFAULT_FID_SHARE, MAX_FID_SHARE,
};

use crate::checkpoint::{Checkpoint, Stored};
use crate::data::BatcherState;
use crate::diffusion::{GuidanceInterval, Process, Sampler, TimeSampling};
use crate::models::ModelConfig;
use crate::optim::LossScaler;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// Everything besides tensors that a checkpoint stores (its JSON metadata).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrainState {
    pub config: TrainConfig,
    pub model: ModelConfig,
    pub process: Process,
    /// Optimiser steps taken.
    pub step: usize,
    pub batcher: BatcherState,
    /// Loss of every step so far.
    pub losses: Vec<f32>,
    /// Training seconds so far (summed over resumed runs; the autotuner's measuring not counted).
    pub train_seconds: f64,
    /// The loss scale of an f16 run (None in f32).
    #[serde(default)]
    pub scaler: Option<LossScaler>,
    /// FID evaluations so far (`fid_every`), in step order.
    #[serde(default)]
    pub fid: Vec<FidRecord>,
}

impl TrainState {
    /// The state of a run about to take its first step: no steps, losses or FID records yet;
    /// an f16 run's loss scale at its start.
    pub fn fresh(
        config: TrainConfig,
        model: ModelConfig,
        process: Process,
        batcher: BatcherState,
    ) -> TrainState {
        TrainState {
            scaler: (config.precision == Precision::F16).then(LossScaler::default),
            batcher,
            config,
            model,
            process,
            step: 0,
            losses: Vec::new(),
            train_seconds: 0.0,
            fid: Vec::new(),
        }
    }

    /// The state of a model trained elsewhere (an imported one): no steps, no losses, no data
    /// read; the recipe is the default one, which fine-tuning (`--init`) starts from.
    pub fn imported(model: ModelConfig, process: Process) -> TrainState {
        let config = TrainConfig::default();
        let batcher = BatcherState {
            seed: config.seed,
            epoch: 0,
            position: 0,
            batch_size: config.batch,
            flip: false,
            dataset_len: 0,
        };
        TrainState::fresh(config, model, process, batcher)
    }

    /// The classifier-free guidance scale the run's grids and FID evaluations use and
    /// `wgdiff sample`/`eval` default to: [`CFG_GUIDANCE`] for a class-conditional model
    /// trained with labels dropped (it learned the unconditional branch guidance needs),
    /// else 1.
    pub fn default_guidance(&self) -> f32 {
        match self.config.trains_for_guidance(&self.model) {
            Ok(true) => self.config.guidance.unwrap_or(CFG_GUIDANCE),
            _ => 1.0,
        }
    }

    /// The noise levels [`TrainState::default_guidance`] applies at: the run's recorded
    /// interval for a model trained for guidance (None: every call, as in runs before
    /// 2026-12-07).
    pub fn default_guidance_interval(&self) -> Option<GuidanceInterval> {
        match self.config.trains_for_guidance(&self.model) {
            Ok(true) => self.config.guidance_interval,
            _ => None,
        }
    }
}

/// One evaluation: the step it followed and the Fréchet distance then.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FidRecord {
    pub step: usize,
    pub fid: f64,
}

/// The lowest finite record of `records`.
pub fn best_fid(records: &[FidRecord]) -> Option<FidRecord> {
    records
        .iter()
        .copied()
        .filter(|r| r.fid.is_finite())
        .min_by(|a, b| a.fid.total_cmp(&b.fid))
}

/// Largest |weight| of a healthy network: past it a run has blown up even while every value is
/// still finite (Adam can carry diverging weights up to 3e38).
pub const DIVERGED_WEIGHT: f32 = 1e6;

/// Why the weights or EMA weights of a training checkpoint show a diverged run (a tensor with
/// NaN/infinite values or |w| > [`DIVERGED_WEIGHT`]), or None when they are healthy.
pub fn divergence(ckpt: &Checkpoint) -> Option<String> {
    ckpt.tensors
        .iter()
        .filter(|(_, t)| t.stored == Stored::F32)
        .find_map(|(name, t)| tensor_divergence(name, &t.data))
}

/// Why the f32 checkpoint tensor `name` holding `data` shows a diverged run (see
/// [`divergence`]; only weights and EMA weights are judged), or None.
pub fn tensor_divergence(name: &str, data: &[f32]) -> Option<String> {
    if !(name.starts_with("model.") || name.starts_with("ema.")) {
        return None;
    }
    let broken = data.iter().filter(|v| !v.is_finite()).count();
    if broken > 0 {
        return Some(format!("tensor {name} holds {broken} NaN or infinite values"));
    }
    let largest = data.iter().fold(0f32, |m, v| m.max(v.abs()));
    (largest > DIVERGED_WEIGHT).then(|| {
        format!("tensor {name} reached |w| = {largest:e} (healthy weights stay below {DIVERGED_WEIGHT:e})")
    })
}

/// The process a model is trained with by default: DDPM (VP, linear betas, eps) for U-Nets,
/// VP with the cosine schedule predicting v for the MLP (`wgdiff experiment speedrun`),
/// the tutorial's VE SDE for the ScoreNet (whose output is divided by its std(t)).
pub fn default_process(model: &ModelConfig) -> Process {
    match model {
        ModelConfig::UNet(_) => Process::ddpm(),
        ModelConfig::Mlp(_) => Process::vp_cosine_v(),
        ModelConfig::ScoreNet(_) => Process::ve(),
    }
}

/// How a fresh run of a model samples unless its config says otherwise: the sampler, its steps
/// for `wgdiff sample`/`eval`, and the guidance of a model trained for classifier-free guidance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DefaultSampling {
    pub sampler: Sampler,
    pub steps: usize,
    pub guidance: f32,
    /// The noise levels guidance applies at (None: every call).
    pub guidance_interval: Option<GuidanceInterval>,
}

/// The MLP's ([`DefaultSampling`]): DPM-Solver++ at 10 steps, against DDPM's ancestral sampler
/// at 50 steps and guidance 2 before (MNIST-FID at 1,000 samples of the main job,
/// docs/training.md, "The main job's sampler and budget"), guided in
/// [`GuidanceInterval::PAPER`] (1.8-2.7 lower again: "Guidance in a limited interval"), at
/// guidance 1.75 since the MLP trains at logit-normal times (0.1-0.5 lower than 1.5 on three
/// such checkpoints: "Time sampling"); None
/// for the other models, which keep the process's default sampler at [`crate::diffusion::DEFAULT_SAMPLER_STEPS`] and
/// [`CFG_GUIDANCE`] (the U-Net measured better with DDPM).
pub fn default_sampling(model: &ModelConfig) -> Option<DefaultSampling> {
    match model {
        ModelConfig::Mlp(_) => Some(DefaultSampling {
            sampler: "dpm-solver++".parse().expect("a sampler name"),
            steps: 10,
            guidance: 1.75,
            guidance_interval: Some(GuidanceInterval::PAPER),
        }),
        ModelConfig::UNet(_) | ModelConfig::ScoreNet(_) => None,
    }
}

/// How a fresh run of a model draws its training times unless its config says otherwise:
/// logit-normal (0, 1) for the MLP (MNIST-FID 17.1 -> 11.7 at 1,000 samples on the main job,
/// docs/training.md, "Time sampling"); None (uniform) for the other models, not measured.
pub fn default_time_sampling(model: &ModelConfig) -> Option<TimeSampling> {
    match model {
        ModelConfig::Mlp(_) => Some(TimeSampling::LOGIT_NORMAL),
        ModelConfig::UNet(_) | ModelConfig::ScoreNet(_) => None,
    }
}

/// What sampling needs of the `wgdiff train` checkpoint `ckpt`: its EMA weights, buffers and
/// training state, without the raw weights and Adam's moments (a quarter of the file, for a
/// web page or sharing). It samples, and fine-tunes with `--init`, like the checkpoint.
/// Weights of a diverged run ([`divergence`]) are refused.
pub fn sampling_export(ckpt: &Checkpoint, origin: &str) -> Result<Checkpoint> {
    saved_state(ckpt, origin)?;
    if let Some(why) = divergence(ckpt) {
        // (a NaN quantised to int8 becomes an ordinary integer: refused here, before any copy)
        return Err(Error::Checkpoint {
            path: origin.to_string(),
            msg: format!(
                "{why}: the run had diverged when it was written, and an exported or compressed copy would \
                 sample black or saturated images; use an earlier checkpoint (best.safetensors, \
                 last-good.safetensors) or train again with a lower --lr"
            ),
        });
    }
    if !ckpt.tensors.keys().any(|name| name.starts_with("ema.")) {
        return Err(Error::Checkpoint {
            path: origin.to_string(),
            msg: "has no EMA weights (ema.*) to export".into(),
        });
    }
    let tensors = ckpt
        .tensors
        .iter()
        .filter(|(name, _)| name.starts_with("ema.") || name.starts_with("buffer."))
        .map(|(name, t)| (name.clone(), t.clone()))
        .collect();
    Ok(Checkpoint {
        tensors,
        meta: ckpt.meta.clone(),
    })
}

/// Whether `ckpt` is a [`sampling_export`] (no raw weights).
pub fn is_sampling_export(ckpt: &Checkpoint) -> bool {
    !ckpt.tensors.keys().any(|name| name.starts_with("model."))
}

/// The training state stored in a `wgdiff train` checkpoint's metadata.
pub fn saved_state(ckpt: &Checkpoint, origin: &str) -> Result<TrainState> {
    if ckpt.meta.get("kind").and_then(|k| k.as_str()) == Some(crate::checkpoint::CLASSIFIER_KIND) {
        return Err(Error::Checkpoint {
            path: origin.to_string(),
            msg: "is an MNIST-FID classifier (`wgdiff train-classifier`), not a diffusion model: it scores \
                  samples (`wgdiff eval --classifier`); give sample, train or the app a checkpoint of \
                  `wgdiff train`"
                .into(),
        });
    }
    serde_json::from_value(ckpt.meta.clone()).map_err(|e| Error::Checkpoint {
        path: origin.to_string(),
        msg: format!("its training state does not parse ({e}); it was not written by `wgdiff train`"),
    })
}
