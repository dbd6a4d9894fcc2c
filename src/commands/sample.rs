//! `wgdiff sample`: draws images from a trained checkpoint (by default the model shipped in
//! assets/) with any sampler, and writes a PNG grid and optionally every step as frames.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use wgdiff::diffusion::Sampler;
use wgdiff::train::sample::write_grid;
use wgdiff::train::{SampleRequest, TrainedModel};
use wgdiff::Gpu;

/// The checkpoint `wgdiff sample` uses when none is given (trained by `wgdiff train`; the
/// command is in assets/models/README.md).
pub const DEFAULT_CHECKPOINT: &str = "assets/models/mnist-small.safetensors";

/// Flags of `wgdiff sample`.
#[derive(Args)]
pub struct SampleArgs {
    /// Checkpoint written by `wgdiff train`
    #[arg(long, default_value = DEFAULT_CHECKPOINT)]
    checkpoint: PathBuf,
    /// ddpm, ddim, ald, euler-maruyama, pc, ode-heun, ode-rk45 or dpm-solver++ [default: ddim
    /// for DDPM models, pc for the VE ScoreNet, ald for NCSN]
    #[arg(long)]
    sampler: Option<String>,
    /// Sampler steps [default: 25 with the default sampler, else the sampler's own, e.g. 50 for ddim]
    #[arg(long)]
    steps: Option<usize>,
    /// Images to draw
    #[arg(long, default_value_t = 16)]
    count: usize,
    /// Class of every image (class-conditional models)
    #[arg(long)]
    class: Option<u32>,
    /// Classifier-free guidance scale (class-conditional models)
    #[arg(long, default_value_t = 1.0)]
    guidance: f32,
    /// Skip-schedule exponent c of the adaptive U-Net: k(t) = min(N-1, floor(N - N(1-t)^c)); 0 = no skipping
    #[arg(long, default_value_t = 0.0)]
    skip_exponent: f32,
    /// Seed of the starting noise and the sampler's noise
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output PNG grid
    #[arg(long, default_value = "samples.png")]
    out: PathBuf,
    /// Also write every step's x_t and predicted x_0 as PNG grids into this folder
    #[arg(long, value_name = "DIR")]
    frames: Option<PathBuf>,
}

pub fn run(gpu: &Gpu, args: SampleArgs) -> Result<()> {
    let model = TrainedModel::load(gpu, &args.checkpoint).with_context(|| {
        if args.checkpoint.as_os_str() == DEFAULT_CHECKPOINT {
            "the default model ships in assets/models/: run wgdiff from the repository folder, or pass --checkpoint"
                .to_string()
        } else {
            format!("loading {}", args.checkpoint.display())
        }
    })?;
    let sampler: Sampler = match &args.sampler {
        Some(name) => name.parse()?,
        None => match model.state.process {
            wgdiff::diffusion::Process::Vp { .. } => "ddim",
            wgdiff::diffusion::Process::Ve { .. } => "pc",
            wgdiff::diffusion::Process::Ncsn { .. } => "ald",
        }
        .parse()?,
    };
    let request = SampleRequest {
        sampler,
        steps: args.steps.or(args.sampler.is_none().then_some(25)),
        count: args.count,
        seed: args.seed,
        skip_exponent: args.skip_exponent,
        class: args.class,
        guidance: args.guidance,
        frames: args.frames.clone(),
    };
    let started = std::time::Instant::now();
    let (images, evaluations) = model.sample(gpu, &request)?;
    write_grid(&args.out, &images, 2)?;
    eprintln!(
        "{} images with {} ({} network evaluations) in {:.1} s: {}",
        args.count,
        sampler,
        evaluations,
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    if let Some(dir) = &args.frames {
        eprintln!("frames (x_t and predicted x_0 per step): {}", dir.display());
    }
    Ok(())
}
