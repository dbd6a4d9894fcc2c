//! Trains a small MLP on the two-spirals toy task with the engine's public API: tensors,
//! GPU random init, autograd and Adam. Run: `cargo run --release --example two_spirals`.

use wgdiff::ops::random::Rng;
use wgdiff::optim::{Adam, AdamConfig, LrSchedule};
use wgdiff::{DType, Gpu, Result, Tensor};

/// Points of two interleaved spirals, labelled +1 and -1: (x [n, 2], y [n, 1]).
pub fn spirals(gpu: &Gpu, per_arm: usize) -> Result<(Tensor, Tensor)> {
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for arm in 0..2 {
        for i in 0..per_arm {
            let t = i as f32 / per_arm as f32 * 3.0 * std::f32::consts::PI;
            let r = 0.15 + t / (3.0 * std::f32::consts::PI);
            let sign = if arm == 0 { 1.0 } else { -1.0 };
            xs.extend([sign * r * t.cos(), sign * r * t.sin()]);
            ys.push(sign);
        }
    }
    let n = 2 * per_arm;
    Ok((
        Tensor::from_f32(gpu, &[n, 2], &xs)?,
        Tensor::from_f32(gpu, &[n, 1], &ys)?,
    ))
}

/// A fully connected layer's weight [fan_in, fan_out] and bias [fan_out].
struct Linear {
    weight: Tensor,
    bias: Tensor,
}

impl Linear {
    fn new(gpu: &Gpu, rng: &mut Rng, fan_in: usize, fan_out: usize) -> Result<Linear> {
        let std = (1.0 / fan_in as f32).sqrt();
        Ok(Linear {
            weight: rng
                .normal(gpu, &[fan_in, fan_out], 0.0, std, DType::F32)?
                .requires_grad(),
            bias: Tensor::zeros(gpu, &[fan_out], DType::F32)?.requires_grad(),
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.weight)?.add(&self.bias)
    }
}

/// Trains a 2-64-64-1 tanh MLP with MSE for `steps` full-batch Adam steps; returns the
/// loss before and after training.
pub fn train(gpu: &Gpu, steps: u32, seed: u64) -> Result<(f32, f32)> {
    let (x, y) = spirals(gpu, 128)?;
    let mut rng = Rng::new(seed);
    let layers = [
        Linear::new(gpu, &mut rng, 2, 64)?,
        Linear::new(gpu, &mut rng, 64, 64)?,
        Linear::new(gpu, &mut rng, 64, 1)?,
    ];
    let params: Vec<Tensor> = layers
        .iter()
        .flat_map(|l| [l.weight.clone(), l.bias.clone()])
        .collect();
    let config = AdamConfig {
        lr: 1e-2,
        schedule: LrSchedule::Warmup { warmup: 50 },
        max_grad_norm: Some(5.0),
        ..Default::default()
    };
    let mut opt = Adam::new(params, config)?;
    let loss_of = || -> Result<Tensor> {
        let mut h = x.clone();
        for (i, layer) in layers.iter().enumerate() {
            h = layer.forward(&h)?;
            if i + 1 < layers.len() {
                h = h.tanh()?;
            }
        }
        h.sub(&y)?.square()?.mean_all()
    };
    let first = loss_of()?.item()?;
    for _ in 0..steps {
        opt.zero_grad();
        let loss = loss_of()?;
        wgdiff::backward(&loss)?;
        opt.step()?;
    }
    let last = loss_of()?.item()?;
    Ok((first, last))
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let gpu = Gpu::new_blocking(Default::default())?;
    println!("device: {}", wgdiff::gpu::describe(&gpu.info));
    let start = std::time::Instant::now();
    let (first, last) = train(&gpu, 1500, 0)?;
    println!(
        "MSE loss {first:.4} -> {last:.4} ({:.1}x lower) in {:.1} s",
        first / last,
        start.elapsed().as_secs_f32()
    );
    Ok(())
}
