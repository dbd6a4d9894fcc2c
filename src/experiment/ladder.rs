//! The speed ladders of two published studies (`wgdiff experiment ladder`): the
//! CUDA-optimisations ladder ("Accelerating Diffusion Model Computations Using CUDA
//! Optimizations", Li Xiaolong; a ConvNeXt DDPM's training step, one kernel change per rung) and
//! the NYU ablation ("Performance Preserving Optimization of Diffusion Networks", Batra and
//! Xhelollari; the MNIST U-Net, one change per row: step time, memory, parameters, MNIST-FID
//! after equal training time).

use super::ExperimentPlan;
use crate::data::{Batcher, DataSource, Split};
use crate::diffusion::{Process, Weighting};
use crate::median::median;
use crate::models::{
    preset, AttentionAt, ConvNextKernels, ConvNextNet, ConvNextNetConfig, ModelConfig, UNetConfig,
};
use crate::ops::blocks::ConvNextImpl;
use crate::ops::conv::use_conv_impl;
use crate::ops::random::{step_seed, Rng};
use crate::ops::ConvImpl;
use crate::optim::{backward_and_step, Adam, AdamConfig};
use crate::train::{FidTracker, Precision, TrainConfig, Trainer};
use crate::{Error, Gpu, Result, Tensor};
use rand::SeedableRng;
use serde::Serialize;
use std::sync::Arc;

/// Width divisor of the ablation's 1x1 bottlenecks (ResNet's 4x: 1x1 C -> C/4, 3x3, 1x1 -> C).
pub const BOTTLENECK_FACTOR: usize = 4;

/// Sizes and budgets of both tables.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The ConvNeXt net of the ladder and its images per training step.
    pub convnext: ConvNextNetConfig,
    pub ladder_batch: usize,
    /// Timed steps per rung, after one untimed warm-up step each; rungs take turns step by step.
    pub ladder_reps: usize,
    /// The ablation's U-Net preset and training batch.
    pub preset: String,
    pub batch: usize,
    /// Training seconds of every ablation row (time inside its steps); rows take turns step by step.
    pub train_seconds: f64,
    /// MNIST-FID of every row after training: samples and DDPM ancestral-sampler steps.
    pub fid_samples: usize,
    pub fid_steps: usize,
}

impl ExperimentPlan for Plan {
    /// `--quick` (lavapipe, under 20 minutes): ladder batch 8 x 4 steps per rung; the
    /// `mnist-small` U-Net at batch 8, 45 training seconds per row, MNIST-FID of 64 samples x
    /// 10 steps.
    fn quick() -> Plan {
        Plan {
            convnext: ConvNextNetConfig::mnist(),
            ladder_batch: 8,
            ladder_reps: 4,
            preset: "mnist-small".into(),
            batch: 8,
            train_seconds: 45.0,
            fid_samples: 64,
            fid_steps: 10,
        }
    }

    /// The full run (a real GPU or hours on a CPU): batch 32, 20 steps per rung, 20 training
    /// minutes per row, MNIST-FID of 1,000 samples x 50 steps.
    fn full() -> Plan {
        Plan {
            convnext: ConvNextNetConfig::mnist(),
            ladder_batch: 32,
            ladder_reps: 20,
            preset: "mnist-small".into(),
            batch: 32,
            train_seconds: 1200.0,
            fid_samples: 1000,
            fid_steps: 50,
        }
    }
}

impl Plan {
    /// Errors naming the first value the run cannot start with.
    pub fn validate(&self) -> Result<()> {
        self.convnext.validate()?;
        if self.ladder_batch == 0 || self.ladder_reps == 0 || self.batch == 0 {
            return Err(Error::Config(
                "the ladder needs a batch and at least one timed step per rung".into(),
            ));
        }
        if self.train_seconds.is_nan()
            || self.train_seconds <= 0.0
            || self.fid_samples < 2
            || self.fid_steps == 0
        {
            return Err(Error::Config(
                "the ablation needs positive training seconds, 2+ FID samples and 1+ sampler steps".into(),
            ));
        }
        Ok(())
    }
}

/// One rung of the CUDA-optimisations ladder: the kernels its step runs and the study's time.
#[derive(Clone, Copy, Debug)]
pub struct Rung {
    pub name: &'static str,
    pub kernels: ConvNextKernels,
    /// The study's total execution time with this optimisation (CIFAR-10, RTX 3080), if published.
    pub published_seconds: Option<f64>,
}

/// The CUDA study's ladder: naive conv + composed LayerNorm + unfused block, then fast conv
/// kernels, then the norm kernel, then the fused block (each rung keeps the ones before it). The
/// study's second rung is a tiled conv; ours is `auto`, the tiled implicit GEMM or im2col per
/// dense shape and the direct kernel for the depthwise 7x7, whose single output channel per group
/// leaves the implicit GEMM's 32-channel weight-gradient tile 1/32 used (forcing the implicit GEMM
/// there made the step ~1.8x slower).
pub const RUNGS: [Rung; 4] = [
    Rung {
        name: "naive conv",
        kernels: ConvNextKernels {
            conv: ConvImpl::Naive,
            block: ConvNextImpl::ComposedNorm,
        },
        published_seconds: Some(383.03),
    },
    Rung {
        name: "+ fast conv",
        kernels: ConvNextKernels {
            conv: ConvImpl::Auto,
            block: ConvNextImpl::ComposedNorm,
        },
        published_seconds: Some(76.03),
    },
    Rung {
        name: "+ fast norm",
        kernels: ConvNextKernels {
            conv: ConvImpl::Auto,
            block: ConvNextImpl::Unfused,
        },
        published_seconds: Some(70.62),
    },
    Rung {
        name: "+ fused block",
        kernels: ConvNextKernels {
            conv: ConvImpl::Auto,
            block: ConvNextImpl::Fused,
        },
        published_seconds: None,
    },
];

/// A rung as measured.
#[derive(Clone, Debug, Serialize)]
pub struct RungResult {
    pub name: String,
    pub conv: String,
    pub block: ConvNextImpl,
    /// Wall time of the timed training step of every round (forward, backward, Adam; idle
    /// device before and after).
    pub step_ms: Vec<f64>,
    pub median_ms: f64,
    /// The median over rounds of the first rung's step time over this one's, and of the
    /// previous rung's over this one's (a machine that changes speed between rounds cancels out).
    pub speedup_vs_first: f64,
    pub speedup_vs_previous: f64,
    pub published_seconds: Option<f64>,
    /// The loss of one fixed batch, noise and timesteps before training (equal on every rung).
    pub check_loss: f32,
}

/// What a run reports while it works.
pub enum Progress<'a> {
    /// An untimed first step (pipelines, autotuning) of a rung or row.
    WarmingUp(&'a str),
    /// A timed ConvNeXt step: rung, steps done of all rungs, steps in all, its milliseconds.
    RungStep {
        rung: &'a str,
        done: usize,
        total: usize,
        ms: f64,
    },
    /// A training step of an ablation row and that row's training seconds so far.
    Trained { row: &'a str, seconds: f64 },
    /// A row's MNIST-FID after its training.
    Scored { row: &'a str, fid: f64 },
}

/// Times a training step of `plan.convnext` (DDPM loss on MNIST, backward, Adam) on every
/// rung of `rungs`: one warm-up step each, then `plan.ladder_reps` rounds in which every rung
/// takes one step in turn; speed-ups are medians of the per-round ratios of this run.
pub async fn run_ladder(
    gpu: &Gpu,
    rungs: &[Rung],
    plan: &Plan,
    mut progress: impl FnMut(Progress) -> Result<()>,
) -> Result<Vec<RungResult>> {
    plan.validate()?;
    let data = Arc::new("mnist".parse::<DataSource>()?.load(Split::Train)?);
    let mut batcher = Batcher::new(data, plan.ladder_batch, 0, false)?;
    let net = ConvNextNet::new(gpu, &plan.convnext, 0)?;
    let mut adam = Adam::new(
        net.params(),
        AdamConfig {
            lr: 1e-3,
            ..AdamConfig::default()
        },
    )?;
    let process = Process::ddpm();
    // The loss of step `seed`'s times and noise on `x0` with `kernels`.
    let loss_of = |x0: &Tensor, kernels: ConvNextKernels, seed: u64| {
        let model = |x: &Tensor, t: &[f32]| net.forward(x, t, kernels);
        let mut times = rand::rngs::StdRng::seed_from_u64(step_seed(seed, 0, 1));
        let mut noise = Rng::new(step_seed(seed, 0, 2));
        process.loss(&model, x0, Weighting::Uniform, &mut times, &mut noise)
    };

    let fixed = batcher.next_batch().to_tensor(gpu)?;
    let mut check = Vec::with_capacity(rungs.len());
    for rung in rungs {
        let loss = {
            let _g = crate::no_grad();
            loss_of(&fixed, rung.kernels, 0)?
        };
        check.push(loss.to_vec_async().await?[0]);
    }

    let total = rungs.len() * plan.ladder_reps;
    let mut times = vec![Vec::with_capacity(plan.ladder_reps); rungs.len()];
    let (mut step, mut done) = (0u64, 0usize);
    for round in 0..=plan.ladder_reps {
        for (rung, rung_times) in rungs.iter().zip(&mut times) {
            if round == 0 {
                progress(Progress::WarmingUp(rung.name))?;
            }
            let x0 = batcher.next_batch().to_tensor(gpu)?;
            step += 1;
            gpu.finish().await?;
            let started = web_time::Instant::now();
            let loss = loss_of(&x0, rung.kernels, step)?;
            backward_and_step(&loss, &mut adam, None).await?;
            gpu.finish().await?;
            let ms = started.elapsed().as_secs_f64() * 1e3;
            if round > 0 {
                rung_times.push(ms);
                done += 1;
                progress(Progress::RungStep {
                    rung: rung.name,
                    done,
                    total,
                    ms,
                })?;
            }
        }
    }
    let rounds: Vec<Vec<(usize, f64)>> = times
        .iter()
        .map(|t| t.iter().copied().enumerate().collect())
        .collect();
    Ok(rungs
        .iter()
        .enumerate()
        .map(|(i, rung)| RungResult {
            name: rung.name.to_string(),
            conv: rung.kernels.conv.name().to_string(),
            block: rung.kernels.block,
            step_ms: times[i].clone(),
            median_ms: median(&times[i]),
            speedup_vs_first: paired_speedup(&rounds[0], &rounds[i]),
            speedup_vs_previous: paired_speedup(&rounds[i.saturating_sub(1)], &rounds[i]),
            published_seconds: rung.published_seconds,
            check_loss: check[i],
        })
        .collect())
}

/// The median over the rounds both took a step in of `base`'s step time over `other`'s, from
/// (round, ms) pairs; NaN without a common round.
pub fn paired_speedup(base: &[(usize, f64)], other: &[(usize, f64)]) -> f64 {
    let ratios: Vec<f64> = other
        .iter()
        .filter_map(|&(round, ms)| {
            base.iter()
                .find(|&&(r, _)| r == round)
                .map(|&(_, base_ms)| base_ms / ms)
        })
        .collect();
    median(&ratios)
}

/// One row of the NYU ablation: a training run that differs from the baseline in one thing.
#[derive(Clone, Debug)]
pub struct Arm {
    pub name: &'static str,
    /// What this row changes, for the table.
    pub change: String,
    pub config: TrainConfig,
    /// What `auto` convolutions run during its training steps.
    pub conv: ConvImpl,
}

/// The baseline (the plan's U-Net preset in f32 with measured conv kernels) and one row per
/// technique of the NYU study: mixed precision, naive / im2col / tiled conv, 1x1 bottlenecks,
/// one level (one down- and one up-sampling) fewer.
pub fn arms(plan: &Plan) -> Result<Vec<Arm>> {
    let ModelConfig::UNet(unet) = preset(&plan.preset)? else {
        return Err(Error::Config(format!(
            "the ablation switches U-Net parts; preset `{}` is not a U-Net (try mnist-small)",
            plan.preset
        )));
    };
    let levels = unet.levels();
    if levels < 2 {
        return Err(Error::Config(format!(
            "the `fewer levels` row drops a level; preset `{}` has only {levels}",
            plan.preset
        )));
    }
    let baseline = TrainConfig {
        preset: plan.preset.clone(),
        batch: plan.batch,
        lr: 2e-3,
        warmup: 10,
        ema_decay: 0.99,
        steps: usize::MAX / 2,
        max_minutes: 0.0,
        checkpoint_every: 0,
        ..TrainConfig::default()
    };
    let with_model = |u: UNetConfig| TrainConfig {
        model: Some(ModelConfig::UNet(u)),
        ..baseline.clone()
    };
    let arm = |name, change: String, config, conv| Arm {
        name,
        change,
        config,
        conv,
    };
    Ok(vec![
        arm(
            "baseline",
            format!("f32, conv auto (fastest kernel per shape), {levels} levels"),
            baseline.clone(),
            ConvImpl::Auto,
        ),
        arm(
            "mixed precision",
            "f16 activations and gradients, f32 master weights, loss scaling".into(),
            TrainConfig {
                precision: Precision::F16,
                ..baseline.clone()
            },
            ConvImpl::Auto,
        ),
        arm(
            "naive conv",
            "every conv one output per invocation".into(),
            baseline.clone(),
            ConvImpl::Naive,
        ),
        arm(
            "im2col conv",
            "every conv as im2col + blocked matmul".into(),
            baseline.clone(),
            ConvImpl::Im2col,
        ),
        arm(
            "tiled conv",
            "every conv as the tiled implicit GEMM".into(),
            baseline.clone(),
            ConvImpl::Tiled,
        ),
        arm(
            "1x1 bottlenecks",
            format!("every ResBlock 3x3 conv as 1x1 (C -> C/{BOTTLENECK_FACTOR}), 3x3, 1x1 (-> C)"),
            with_model(UNetConfig {
                bottleneck: Some(BOTTLENECK_FACTOR),
                ..unet.clone()
            }),
            ConvImpl::Auto,
        ),
        arm(
            "fewer levels",
            format!("{} levels: one down- and one up-sampling fewer", levels - 1),
            with_model(without_deepest_level(unet)),
            ConvImpl::Auto,
        ),
    ])
}

/// `unet` with its lowest-resolution level (and any attention there) removed.
fn without_deepest_level(unet: UNetConfig) -> UNetConfig {
    let levels = unet.levels() - 1;
    let attention = match unet.attention {
        AttentionAt::Resolutions(r) => {
            let lowest = unet.image_size >> (levels - 1);
            AttentionAt::Resolutions(r.into_iter().filter(|&res| res >= lowest).collect())
        }
        AttentionAt::Levels(l) => AttentionAt::Levels(l.into_iter().filter(|&i| i < levels).collect()),
    };
    UNetConfig {
        channel_mult: unet.channel_mult[..levels].to_vec(),
        attention,
        ..unet
    }
}

/// A row as measured.
#[derive(Clone, Debug, Serialize)]
pub struct AblationRow {
    pub name: String,
    pub change: String,
    pub parameters: usize,
    /// Timed training steps (after the untimed warm-up step) and their seconds in all.
    pub steps: usize,
    pub train_seconds: f64,
    /// Wall time of every timed step (idle device before and after) and the round it ran in.
    pub step_ms: Vec<f64>,
    pub step_rounds: Vec<usize>,
    pub median_ms: f64,
    /// The median over the rounds both rows took a step in of the baseline's step time over
    /// this row's.
    pub speedup: f64,
    /// Device bytes this run keeps between steps (weights, Adam moments, EMA).
    pub state_bytes: u64,
    /// Most device bytes a training step allocated on top of those.
    pub step_peak_bytes: u64,
    /// Mean loss of the last (up to) 5 steps.
    pub final_loss: f64,
    pub fid: f64,
}

impl AblationRow {
    /// Peak device memory of this row's training: its state plus a step's peak.
    pub fn peak_bytes(&self) -> u64 {
        self.state_bytes + self.step_peak_bytes
    }
}

/// A row in training.
struct Running<'a> {
    arm: &'a Arm,
    trainer: Trainer,
    state_bytes: u64,
    step_ms: Vec<f64>,
    step_rounds: Vec<usize>,
    step_peak_bytes: u64,
    losses: Vec<f32>,
}

impl Running<'_> {
    fn trained_seconds(&self) -> f64 {
        self.step_ms.iter().sum::<f64>() / 1e3
    }
}

/// Trains every arm until its step time reaches `plan.train_seconds`, after an untimed warm-up
/// step, in rounds in which every arm with time left takes one step (all runs alive; each step
/// timed with an idle device at both ends and its pool peak taken; the pool counts every
/// thread's tensors, so other work on the device would show up), then scores each with
/// `tracker`: MNIST-FID of `plan.fid_samples` images of its EMA weights (f32, default kernels,
/// the same seed for all).
pub async fn run_ablation(
    gpu: &Gpu,
    arms: &[Arm],
    plan: &Plan,
    tracker: &FidTracker,
    mut progress: impl FnMut(Progress) -> Result<()>,
) -> Result<Vec<AblationRow>> {
    plan.validate()?;
    let mut runs = Vec::with_capacity(arms.len());
    for arm in arms {
        progress(Progress::WarmingUp(arm.name))?;
        gpu.finish().await?;
        let before = gpu.pool().stats().live_bytes;
        let mut trainer = Trainer::new(gpu, arm.config.clone())?;
        {
            let _conv = use_conv_impl(arm.conv);
            trainer.step().await?;
        }
        gpu.finish().await?;
        let state_bytes = gpu.pool().stats().live_bytes.saturating_sub(before);
        runs.push(Running {
            arm,
            trainer,
            state_bytes,
            step_ms: Vec::new(),
            step_rounds: Vec::new(),
            step_peak_bytes: 0,
            losses: Vec::new(),
        });
    }
    for round in 0.. {
        if runs.iter().all(|r| r.trained_seconds() >= plan.train_seconds) {
            break;
        }
        for run in runs.iter_mut() {
            if run.trained_seconds() < plan.train_seconds {
                gpu.finish().await?;
                let before = gpu.pool().stats().live_bytes;
                gpu.pool().reset_peaks();
                let started = web_time::Instant::now();
                let loss = {
                    let _conv = use_conv_impl(run.arm.conv);
                    run.trainer.step().await?
                };
                gpu.finish().await?;
                run.step_ms.push(started.elapsed().as_secs_f64() * 1e3);
                run.step_rounds.push(round);
                let peak = gpu.pool().stats().peak_live_bytes.saturating_sub(before);
                run.step_peak_bytes = run.step_peak_bytes.max(peak);
                run.losses.push(loss);
                progress(Progress::Trained {
                    row: run.arm.name,
                    seconds: run.trained_seconds(),
                })?;
            }
        }
    }
    let mut rows = Vec::with_capacity(runs.len());
    for run in &runs {
        let fid = tracker
            .score(&run.trainer, plan.fid_samples, plan.fid_steps)
            .await?;
        progress(Progress::Scored {
            row: run.arm.name,
            fid,
        })?;
        let last = &run.losses[run.losses.len().saturating_sub(5)..];
        rows.push(AblationRow {
            name: run.arm.name.to_string(),
            change: run.arm.change.clone(),
            parameters: run
                .trainer
                .net()
                .named_params()
                .iter()
                .map(|(_, t)| t.numel())
                .sum(),
            steps: run.step_ms.len(),
            train_seconds: run.trained_seconds(),
            median_ms: median(&run.step_ms),
            step_ms: run.step_ms.clone(),
            step_rounds: run.step_rounds.clone(),
            speedup: 0.0,
            state_bytes: run.state_bytes,
            step_peak_bytes: run.step_peak_bytes,
            final_loss: last.iter().map(|&l| l as f64).sum::<f64>() / last.len().max(1) as f64,
            fid,
        });
    }
    let rounds = |r: &AblationRow| -> Vec<(usize, f64)> {
        r.step_rounds
            .iter()
            .copied()
            .zip(r.step_ms.iter().copied())
            .collect()
    };
    let baseline = rows.first().map(rounds).unwrap_or_default();
    for row in &mut rows {
        row.speedup = paired_speedup(&baseline, &rounds(row));
    }
    Ok(rows)
}
