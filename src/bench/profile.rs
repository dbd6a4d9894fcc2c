//! Workloads for `wgdiff profile`: one training step of a small model, run under the
//! per-dispatch profiler (see `gpu::profiler`) after an unprofiled warm-up step.

use crate::gpu::Profile;
use crate::nn::Mlp;
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
}

impl Workload {
    /// The workload `wgdiff profile` runs when none is named. (The U-Net training step
    /// replaces this default once the U-Net exists.)
    pub const DEFAULT: Workload = Workload::Mlp;

    /// Every workload with its name on the command line.
    pub const ALL: [(&'static str, Workload); 2] = [("mlp", Workload::Mlp), ("matmul", Workload::Matmul)];

    /// One line describing the step.
    pub fn describe(self) -> &'static str {
        match self {
            Workload::Mlp => "2-64-64-1 tanh MLP on 256 points: forward, MSE, backward, Adam step",
            Workload::Matmul => "512x512 @ 512x512 matmul: forward, sum, backward",
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
