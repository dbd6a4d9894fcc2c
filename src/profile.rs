//! Profiled steps (async, so the web and the app can run them too): the `wgdiff profile`
//! workloads, and one training or sampling step of any model, each after an unprofiled warm-up.

use crate::gpu::Profile;
use crate::models::{DiffusionNet, ModelConfig};
use crate::nn::{AttentionBlock, Mlp, ResBlock};
use crate::ops::random::Rng;
use crate::optim::{Adam, AdamConfig};
use crate::{DType, Error, Gpu, Result, Tensor};

/// Records one step's GPU work (the device runs it later).
type Step<'a> = Box<dyn FnMut() -> Result<()> + 'a>;

/// What one profiled step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// A training step (forward, backward, Adam) of the two-spirals 2-64-64-1 tanh MLP on
    /// 256 points.
    Mlp,
    /// A 512x512x512 matmul forward and backward (loss = sum of the product).
    Matmul,
    /// A training step of ResBlock (32x32) -> 2x average pool -> self-attention block (4 heads,
    /// 16x16) -> nearest upsample, added back -> ResBlock, 64 channels, batch 16 (the U-Net's
    /// layers until the U-Net exists): forward, MSE, backward, Adam step.
    ResBlocks,
    /// A training step of a model preset (default `mnist`, batch 64; see [`ModelSetup`]), as
    /// [`profile_training_step`] runs it.
    UNet,
    /// One sampling step's network call of a model preset (default `mnist`, batch 16): the
    /// forward without gradients at a mid-range time, as [`profile_sampling_step`] runs it.
    Sample,
}

impl Workload {
    /// The workload `wgdiff profile` runs when none is named: the default model's step.
    pub const DEFAULT: Workload = Workload::UNet;

    /// Every workload with its name on the command line.
    pub const ALL: [(&'static str, Workload); 5] = [
        ("unet", Workload::UNet),
        ("sample", Workload::Sample),
        ("resblocks", Workload::ResBlocks),
        ("mlp", Workload::Mlp),
        ("matmul", Workload::Matmul),
    ];

    /// The workload's name on the command line.
    pub fn name(self) -> &'static str {
        Workload::ALL
            .iter()
            .find(|(_, w)| *w == self)
            .map_or("?", |(n, _)| n)
    }

    /// One line describing the step.
    pub fn describe(self) -> &'static str {
        match self {
            Workload::Mlp => "2-64-64-1 tanh MLP on 256 points: forward, MSE, backward, Adam step",
            Workload::Matmul => "512x512 @ 512x512 matmul: forward, sum, backward",
            Workload::UNet => "a model preset's training step: forward, MSE, backward, Adam step",
            Workload::Sample => "a model preset's network call without gradients (one sampling step)",
            Workload::ResBlocks => {
                "ResBlock 32x32, attention (4 heads) at 16x16, ResBlock; 64 channels, batch 16: forward, MSE, backward, Adam step"
            }
        }
    }

    /// Images per step when the user names none: a training batch, or a sampling grid of 16.
    pub fn default_batch(self) -> usize {
        match self {
            Workload::Sample => 16,
            _ => 64,
        }
    }

    /// True when the step runs a model preset (`--preset`, `--batch` apply).
    pub fn uses_model(self) -> bool {
        matches!(self, Workload::UNet | Workload::Sample)
    }

    /// Builds the model and data; the returned closure records one step on `gpu`.
    pub fn prepare(self, gpu: &Gpu, model: &ModelSetup) -> Result<Box<dyn FnMut() -> Result<()>>> {
        let mut rng = Rng::new(0);
        match self {
            Workload::Mlp => {
                let x = rng.normal(gpu, &[256, 2], 0.0, 1.0, DType::F32)?;
                let y = rng.uniform(gpu, &[256, 1], -1.0, 1.0, DType::F32)?;
                let mlp = Mlp::new(gpu, &mut rng, &[2, 64, 64, 1])?;
                let config = AdamConfig {
                    lr: 1e-2,
                    max_grad_norm: Some(5.0),
                    ..Default::default()
                };
                let mut opt = Adam::new(mlp.params(), config)?;
                Ok(Box::new(move || {
                    opt.zero_grad();
                    let loss = mlp.forward(&x)?.sub(&y)?.square()?.mean_all()?;
                    crate::backward(&loss)?;
                    opt.step()
                }))
            }
            Workload::ResBlocks => {
                let x = rng.normal(gpu, &[16, 64, 32, 32], 0.0, 1.0, DType::F32)?;
                let temb = rng.normal(gpu, &[16, 128], 0.0, 1.0, DType::F32)?;
                let first = ResBlock::new(gpu, &mut rng, 64, 64, 128, 8)?;
                let attention = AttentionBlock::new(gpu, &mut rng, 64, 4, 8)?;
                let second = ResBlock::new(gpu, &mut rng, 64, 64, 128, 8)?;
                let mut params = first.params();
                params.extend(attention.params());
                params.extend(second.params());
                let mut opt = Adam::new(params, AdamConfig::default())?;
                Ok(Box::new(move || {
                    opt.zero_grad();
                    let h = first.forward(&x, &temb)?;
                    // attention at the half-resolution level, as in the DDPM U-Net
                    let low = attention.forward(&h.avg_pool2d(2, 2)?)?;
                    let h = second.forward(&h.add(&low.upsample_nearest(2, 2)?)?, &temb)?;
                    crate::backward(&h.square()?.mean_all()?)?;
                    opt.step()
                }))
            }
            Workload::UNet => training_step(gpu, &crate::models::preset(&model.preset)?, model.batch),
            Workload::Sample => {
                let (net, config) = match &model.checkpoint {
                    Some(path) => {
                        let trained = crate::pipeline::TrainedModel::load(gpu, path)?;
                        (trained.net, trained.state.model)
                    }
                    None => {
                        let config = crate::models::preset(&model.preset)?;
                        (config.build(gpu, 0)?, config)
                    }
                };
                let forward = move |x: &Tensor, t: &[f32]| net.forward(x, t, None, 0);
                sampling_step(gpu, forward, &config, model.batch)
            }
            Workload::Matmul => {
                let a = rng
                    .normal(gpu, &[512, 512], 0.0, 1.0, DType::F32)?
                    .requires_grad();
                let b = rng
                    .normal(gpu, &[512, 512], 0.0, 1.0, DType::F32)?
                    .requires_grad();
                Ok(Box::new(move || {
                    a.zero_grad();
                    b.zero_grad();
                    crate::backward(&a.matmul(&b)?.sum_all()?)
                }))
            }
        }
    }
}

/// The model the `unet` workload trains and the `sample` workload calls.
pub struct ModelSetup {
    /// Model preset (`wgdiff model`).
    pub preset: String,
    /// Images per step.
    pub batch: usize,
    /// The `sample` workload calls this checkpoint's model (a compressed one in its packed
    /// kernels) instead of the preset's, built from seed 0.
    pub checkpoint: Option<std::path::PathBuf>,
}

impl std::str::FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Workload, String> {
        Workload::ALL
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, w)| *w)
            .ok_or_else(|| {
                let names: Vec<&str> = Workload::ALL.iter().map(|(n, _)| *n).collect();
                format!("unknown workload \"{s}\"; choose one of: {}", names.join(", "))
            })
    }
}

fn check_batch(batch: usize) -> Result<()> {
    if batch == 0 {
        return Err(Error::Config(
            "a profiled step needs a batch of at least 1 image".into(),
        ));
    }
    Ok(())
}

/// `batch` fixed network time inputs spread over the model's range: DDPM timestep indices
/// in [0, 1000) for a U-Net, continuous t in (0, 1] for the score network.
fn spread_times(model: &ModelConfig, batch: usize) -> Vec<f32> {
    let index = |i: usize| i * 997 % 1000;
    match model {
        ModelConfig::UNet(_) | ModelConfig::Mlp(_) => (0..batch).map(|i| index(i) as f32).collect(),
        ModelConfig::ScoreNet(_) => (0..batch).map(|i| (index(i) + 1) as f32 / 1000.0).collect(),
    }
}

/// A training step of `model` (weights from seed 0) on `batch` random images: noisy images
/// at fixed timesteps, predicted noise, MSE to the noise, backward, Adam step.
fn training_step(gpu: &Gpu, model: &ModelConfig, batch: usize) -> Result<Step<'static>> {
    check_batch(batch)?;
    let mut rng = Rng::new(0);
    let [c, h, w] = model.image_shape();
    let net = model.build(gpu, 0)?;
    let x = rng.normal(gpu, &[batch, c, h, w], 0.0, 1.0, DType::F32)?;
    let noise = rng.normal(gpu, &[batch, c, h, w], 0.0, 1.0, DType::F32)?;
    let t = spread_times(model, batch);
    let params = net.named_params().into_iter().map(|(_, p)| p).collect();
    let mut opt = Adam::new(params, AdamConfig::default())?;
    Ok(Box::new(move || {
        opt.zero_grad();
        let x_t = x.mul_scalar(0.6)?.add(&noise.mul_scalar(0.8)?)?;
        let loss = net
            .forward(&x_t, &t, None, 0)?
            .sub(&noise)?
            .square()?
            .mean_all()?;
        crate::backward(&loss)?;
        opt.step()
    }))
}

/// One warm-up run of `step` (compiles pipelines, runs the autotuner), a wait for the device,
/// then `steps` runs, each profiled on its own (start and stop wait for an idle device).
async fn profile_steps(
    gpu: &Gpu,
    step: &mut dyn FnMut() -> Result<()>,
    steps: usize,
) -> Result<Vec<Profile>> {
    step()?;
    gpu.finish().await?;
    profile_each(gpu, step, steps).await
}

/// `steps` runs of `step`, each profiled on its own.
async fn profile_each(gpu: &Gpu, step: &mut dyn FnMut() -> Result<()>, steps: usize) -> Result<Vec<Profile>> {
    let mut profiles = Vec::with_capacity(steps);
    for _ in 0..steps {
        profiles.push(profile_one(gpu, step).await?);
    }
    Ok(profiles)
}

/// One profiled run of `step`.
async fn profile_one(gpu: &Gpu, step: &mut dyn FnMut() -> Result<()>) -> Result<Profile> {
    gpu.profiler().start()?;
    let ran = step();
    // stop even when the step failed, so the profiler is off again
    let profile = gpu.profiler().stop().await;
    ran.and(profile)
}

/// The profiles of [`run`]: the first step, which pays for every kernel's first use, and the
/// steps after it.
pub struct Profiled {
    pub first: Profile,
    pub steps: Vec<Profile>,
}

/// What one kernel's first use cost beyond a later use: a driver that compiles a pipeline when
/// it first runs (lavapipe: LLVM, at the first dispatch, not at pipeline creation) spends it
/// there, inside the dispatch's timestamps.
#[derive(Clone, Debug)]
pub struct FirstUse {
    pub kernel: String,
    /// The first step's time in this kernel less a later step's (their mean), in seconds.
    pub extra_s: f64,
}

impl Profiled {
    /// Every kernel's first-use cost, the largest first.
    pub fn first_use(&self) -> Vec<FirstUse> {
        let per_kernel = |p: &Profile| {
            let mut sums = std::collections::HashMap::<String, f64>::new();
            for r in &p.records {
                *sums.entry(r.kernel.clone()).or_default() += r.duration_ns * 1e-9;
            }
            sums
        };
        let later: Vec<_> = self.steps.iter().map(per_kernel).collect();
        let mut rows: Vec<FirstUse> = per_kernel(&self.first)
            .into_iter()
            .map(|(kernel, first)| {
                let mean = later
                    .iter()
                    .map(|l| l.get(&kernel).copied().unwrap_or(0.0))
                    .sum::<f64>()
                    / later.len().max(1) as f64;
                FirstUse {
                    kernel,
                    extra_s: first - mean,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.extra_s.total_cmp(&a.extra_s));
        rows
    }

    /// The first-use table `wgdiff profile` prints: the first step's wall time against a later
    /// one's, and the `top` kernels whose first use cost most.
    pub fn first_use_table(&self, top: usize) -> String {
        let rows = self.first_use();
        let wall = |p: &Profile| {
            p.wall_ns
                .map_or("?".to_string(), |ns| format!("{:.2} s", ns * 1e-9))
        };
        let mut out = format!(
            "first step (kernels used for the first time): {}, a later step {}; first use beyond a later use, per kernel \
             (a driver that compiles a kernel at its first dispatch, as lavapipe does, spends it here; Mesa's shader \
             cache keeps the result for later processes):\n",
            wall(&self.first),
            self.steps.first().map_or("?".to_string(), wall),
        );
        for r in rows.iter().take(top) {
            out += &format!("  {:>8.3} s  {}\n", r.extra_s, r.kernel);
        }
        let total: f64 = rows.iter().map(|r| r.extra_s.max(0.0)).sum();
        out += &format!("  {total:>8.3} s  in all, over {} kernels", rows.len());
        out
    }
}

/// The single profile of a one-step run.
fn only(mut profiles: Vec<Profile>) -> Result<Profile> {
    profiles
        .pop()
        .ok_or_else(|| Error::Profiler("no step was profiled".into()))
}

/// A first step of `workload`, then `steps` (at least 1) steps, each profiled on its own.
/// `Profile::extend` merges the later steps' profiles.
pub async fn run(gpu: &Gpu, workload: Workload, model: &ModelSetup, steps: usize) -> Result<Profiled> {
    let mut step = workload.prepare(gpu, model)?;
    gpu.finish().await?;
    let first = profile_one(gpu, &mut *step).await?;
    let steps = profile_each(gpu, &mut *step, steps.max(1)).await?;
    Ok(Profiled { first, steps })
}

/// One warm-up and one profiled training step of `model` (built from seed 0) on `batch`
/// random images: noisy images at fixed timesteps, MSE to the noise, backward, Adam step.
pub async fn profile_training_step(gpu: &Gpu, model: &ModelConfig, batch: usize) -> Result<Profile> {
    let mut step = training_step(gpu, model, batch)?;
    only(profile_steps(gpu, &mut *step, 1).await?)
}

/// A network call `forward(x, t)` (no gradients) on `batch` random [C, H, W] images of
/// `model`'s shape at one mid-range time.
fn sampling_step<'a>(
    gpu: &Gpu,
    forward: impl Fn(&Tensor, &[f32]) -> Result<Tensor> + 'a,
    model: &ModelConfig,
    batch: usize,
) -> Result<Step<'a>> {
    check_batch(batch)?;
    let [c, h, w] = model.image_shape();
    let x = Rng::new(0).normal(gpu, &[batch, c, h, w], 0.0, 1.0, DType::F32)?;
    let t = match model {
        ModelConfig::UNet(_) | ModelConfig::Mlp(_) => vec![500.0; batch],
        ModelConfig::ScoreNet(_) => vec![0.5; batch],
    };
    Ok(Box::new(move || {
        let _no_grad = crate::no_grad();
        forward(&x, &t).map(drop)
    }))
}

/// One warm-up and one profiled call of `net` (no gradients) on `batch` random
/// [C, H, W] images of `model`'s shape at one mid-range time, skipping the `skip` deepest
/// levels. The summed `flops` of the records are the FLOPs of one network evaluation.
pub async fn profile_sampling_step(
    gpu: &Gpu,
    net: &dyn DiffusionNet,
    model: &ModelConfig,
    batch: usize,
    skip: usize,
) -> Result<Profile> {
    let forward = |x: &Tensor, t: &[f32]| net.forward(x, t, None, skip);
    let mut step = sampling_step(gpu, forward, model, batch)?;
    only(profile_steps(gpu, &mut *step, 1).await?)
}
