//! Trains a small MLP on the two-spirals toy task with the engine's public API: tensors,
//! GPU random init, autograd and Adam. Run: `cargo run --release --example two_spirals`.

use wgdiff::nn::Mlp;
use wgdiff::ops::random::Rng;
use wgdiff::optim::{Adam, AdamConfig, LrSchedule};
use wgdiff::{Gpu, Result, Tensor};

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

/// Trains a 2-64-64-1 tanh MLP with MSE for `steps` full-batch Adam steps; returns the
/// loss before and after training.
pub fn train(gpu: &Gpu, steps: u32, seed: u64) -> Result<(f32, f32)> {
    let (x, y) = spirals(gpu, 128)?;
    let mut rng = Rng::new(seed);
    let mlp = Mlp::new(gpu, &mut rng, &[2, 64, 64, 1])?;
    let config = AdamConfig {
        lr: 1e-2,
        schedule: LrSchedule::Warmup { warmup: 50 },
        max_grad_norm: Some(5.0),
        ..Default::default()
    };
    let mut opt = Adam::new(mlp.params(), config)?;
    let loss_of = || mlp.forward(&x)?.sub(&y)?.square()?.mean_all();
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
