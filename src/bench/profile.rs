//! Workloads for `wgdiff profile`: one training step of a small model, run under the
//! per-dispatch profiler (see `gpu::profiler`) after an unprofiled warm-up step.

use crate::gpu::Profile;
use crate::nn::{AttentionBlock, Mlp, ResBlock};
use crate::ops::random::Rng;
use crate::optim::{Adam, AdamConfig};
use crate::{DType, Gpu, Result};

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
    /// A training step of the `mnist` U-Net preset at batch 64: noisy images at random
    /// timesteps, predicted noise, MSE, backward, Adam step.
    UNet,
}

impl Workload {
    /// The workload `wgdiff profile` runs when none is named: the default model's step.
    pub const DEFAULT: Workload = Workload::UNet;

    /// Every workload with its name on the command line.
    pub const ALL: [(&'static str, Workload); 4] = [
        ("unet", Workload::UNet),
        ("resblocks", Workload::ResBlocks),
        ("mlp", Workload::Mlp),
        ("matmul", Workload::Matmul),
    ];

    /// One line describing the step.
    pub fn describe(self) -> &'static str {
        match self {
            Workload::Mlp => "2-64-64-1 tanh MLP on 256 points: forward, MSE, backward, Adam step",
            Workload::Matmul => "512x512 @ 512x512 matmul: forward, sum, backward",
            Workload::UNet => "U-Net preset mnist (2,287,489 parameters), batch 64 at 28x28: forward, MSE, backward, Adam step",
            Workload::ResBlocks => {
                "ResBlock 32x32, attention (4 heads) at 16x16, ResBlock; 64 channels, batch 16: forward, MSE, backward, Adam step"
            }
        }
    }

    /// Builds the model and data; the returned closure records one step on `gpu`.
    pub fn prepare(self, gpu: &Gpu) -> Result<Box<dyn FnMut() -> Result<()>>> {
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
                    let h = second.forward(&h.add(&low.upsample_nearest2x()?)?, &temb)?;
                    crate::backward(&h.square()?.mean_all()?)?;
                    opt.step()
                }))
            }
            Workload::UNet => {
                let batch = 64;
                let net = crate::models::preset("mnist")?.build(gpu, 0)?;
                let x = rng.normal(gpu, &[batch, 1, 28, 28], 0.0, 1.0, DType::F32)?;
                let noise = rng.normal(gpu, &[batch, 1, 28, 28], 0.0, 1.0, DType::F32)?;
                let t: Vec<f32> = (0..batch).map(|i| (i * 997 % 1000) as f32).collect();
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

/// One warm-up step (compiles pipelines, runs the autotuner), then `steps` steps, each
/// profiled on its own (start and stop wait for an idle device). Returns every step's
/// profile; `Profile::extend` merges them.
pub fn run(gpu: &Gpu, workload: Workload, steps: usize) -> Result<Vec<Profile>> {
    let mut step = workload.prepare(gpu)?;
    step()?;
    gpu.sync()?;
    (0..steps.max(1))
        .map(|_| {
            gpu.profiler().start()?;
            let ran = step();
            let profile = gpu.profiler().stop_blocking();
            ran.and(profile)
        })
        .collect()
}
