//! `wgdiff bench train`: img/s and GFLOP/s of one training step of a model preset (f32, and
//! mixed f16 when asked), ms per sampling step for each number of skipped U-Net levels, memory.

use super::{run_interleaved_beside, Case, Measurement, Peer};
use crate::diffusion::{Process, Weighting};
use crate::gpu::PoolStats;
use crate::models::preset;
use crate::ops::random::Rng;
use crate::optim::{backward_and_step, Adam, AdamConfig, LossScaler};
use crate::train::Precision;
use crate::{DType, Gpu, Result, Tensor};
use rand::SeedableRng;
use std::cell::RefCell;

/// What `run` measured besides the timings: FLOPs and dispatches counted by the profiler,
/// and memory.
pub struct TrainBenchCounts {
    /// FLOPs of one training step (forward, backward, Adam) as the kernels count them.
    pub train_flops: f64,
    /// Dispatches of one sampling step for skip = 0, 1, ... levels.
    pub sample_dispatches: Vec<usize>,
    /// The buffer pool's counters after the run (peak live and peak held device bytes).
    pub pool: PoolStats,
    /// The process's peak resident set (VmHWM) after the run, where the OS reports it.
    pub peak_rss_bytes: Option<u64>,
}

/// Records `f` under the profiler and returns (FLOPs, dispatches).
fn count(gpu: &Gpu, f: impl FnOnce() -> Result<()>) -> Result<(f64, usize)> {
    gpu.sync()?;
    gpu.profiler().start()?;
    let ran = f();
    let profile = gpu.profiler().stop_blocking()?;
    ran?;
    Ok((
        profile.records.iter().map(|r| r.flops).sum(),
        profile.records.len(),
    ))
}

/// The presets PyTorch has a twin of (scripts/torch_bench.py): a [`Peer`]'s `unet-train` and
/// `unet-sample` workloads.
pub const TORCH_TWINS: [&str; 1] = ["mnist"];

/// What `bench train` times: a training step of `preset` at `batch`, in f32 and also in mixed
/// precision with loss scaling when `precision` is f16, and sampling steps at `sample_batch`.
pub struct Steps<'a> {
    pub preset: &'a str,
    pub batch: usize,
    pub sample_batch: usize,
    pub precision: Precision,
}

/// Times a training step (DDPM loss, backward, Adam) and one sampling step for every skip
/// count the model allows, interleaved. Beside a `peer` with a twin of the preset
/// ([`TORCH_TWINS`]), its f32 training step and its sampling step without skips too.
pub fn run(
    gpu: &Gpu,
    steps: Steps,
    warmup: usize,
    reps: usize,
    peer: Option<&mut dyn Peer>,
) -> Result<(Vec<Measurement>, TrainBenchCounts)> {
    let Steps {
        preset: preset_name,
        batch,
        sample_batch,
        precision,
    } = steps;
    let twin = TORCH_TWINS.contains(&preset_name);
    let config = preset(preset_name)?;
    let [c, h, w] = config.image_shape();
    let mut net = config.build(gpu, 0)?;
    net.set_training(true);
    let process = Process::ddpm();
    let mut rng = Rng::new(1);
    let x0 = rng.uniform(gpu, &[batch, c, h, w], -1.0, 1.0, DType::F32)?;
    let params: Vec<Tensor> = net.named_params().into_iter().map(|(_, t)| t).collect();
    let adam = RefCell::new(Adam::new(params, AdamConfig::default())?);
    let step_rng = RefCell::new((rand::rngs::StdRng::seed_from_u64(0), Rng::new(2)));
    let scaler = RefCell::new(LossScaler::default());
    let net_ref = &net;
    let train_step = |precision: Precision| -> Result<()> {
        let mut adam = adam.borrow_mut();
        let (times, noise) = &mut *step_rng.borrow_mut();
        let dtype = precision.dtype();
        let model = |x: &Tensor, t: &[f32]| net_ref.forward_in(dtype, x, t, None, 0);
        let loss = process.loss(&model, &x0, Weighting::Uniform, times, noise)?;
        let mut scaler = scaler.borrow_mut();
        let scaler = (precision == Precision::F16).then_some(&mut *scaler);
        pollster::block_on(backward_and_step(&loss, &mut adam, scaler)).map(drop)
    };
    let precisions = match precision {
        Precision::F32 => vec![Precision::F32],
        Precision::F16 => vec![Precision::F32, Precision::F16],
    };
    for &p in &precisions {
        train_step(p)?;
    }
    let (train_flops, _) = count(gpu, || train_step(Precision::F32))?;

    let xs = rng.normal(gpu, &[sample_batch, c, h, w], 0.0, 1.0, DType::F32)?;
    let t = vec![500.0; sample_batch];
    // One DDIM (eta 0) update around the network call: x' = a x + b eps.
    let sample_step = |skip: usize| -> Result<()> {
        let _g = crate::no_grad();
        let eps = net_ref.forward(&xs, &t, None, skip)?;
        xs.mul_scalar(1.01)?.add(&eps.mul_scalar(-0.1)?).map(drop)
    };
    let levels = net.levels();
    let mut sample_dispatches = Vec::new();
    for skip in 0..levels {
        sample_step(skip)?;
        sample_dispatches.push(count(gpu, || sample_step(skip))?.1);
    }
    let shape = format!("{preset_name} B{batch} {h}x{w}");
    let mut cases: Vec<Case> = precisions
        .into_iter()
        .map(|p| Case {
            peer: (twin && p == Precision::F32).then(|| format!("unet-train {preset_name} {batch}")),
            variant: match p {
                Precision::F32 => "train-step".into(),
                Precision::F16 => "train-step f16".into(),
            },
            shape: shape.clone(),
            pass: Some("forward+backward".into()),
            flops: train_flops,
            bytes: 0.0,
            run: Box::new(move || train_step(p)),
        })
        .collect();
    for skip in 0..levels {
        cases.push(Case {
            peer: (twin && skip == 0).then(|| format!("unet-sample {preset_name} {sample_batch}")),
            variant: format!("sample-step skip {skip}"),
            shape: format!("{preset_name} B{sample_batch} {h}x{w}"),
            pass: Some("forward".into()),
            flops: 0.0,
            bytes: 0.0,
            run: Box::new(move || sample_step(skip)),
        });
    }
    let rows = run_interleaved_beside(gpu, "train", &cases, warmup, reps, peer)?;
    Ok((
        rows,
        TrainBenchCounts {
            train_flops,
            sample_dispatches,
            pool: gpu.pool().stats(),
            peak_rss_bytes: crate::host_memory::peak_resident_bytes(),
        },
    ))
}
