//! `wgdiff sample`: draws images from a trained checkpoint (by default the model shipped in
//! assets/) with any sampler, and writes a PNG grid and optionally every step as frames.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use wgdiff::diffusion::{FeatureCache, GuidanceInterval, SkipPlan, SkipSchedule, Spacing, Step};
use wgdiff::pipeline::grids::{save_grid_of, save_step_frames};
use wgdiff::pipeline::{SampleRequest, TrainedModel, DEFAULT_CHECKPOINT};
use wgdiff::Gpu;

/// How to draw images: the flags `wgdiff sample` and `wgdiff eval` share.
#[derive(Args)]
pub struct SamplingArgs {
    /// Checkpoint written by `wgdiff train`
    #[arg(long, default_value = DEFAULT_CHECKPOINT)]
    checkpoint: PathBuf,
    /// ddpm, ddim, ald, euler-maruyama, pc, ode-heun, ode-rk45, dpm-solver++ or dpm-solver++-sde
    /// (DPM-Solver++(2M) with fresh noise every step) [default: the one the checkpoint's run
    /// recorded (dpm-solver++ for the MLP since 2026-12-07), else ddpm (ancestral) for DDPM models,
    /// pc for the VE ScoreNet, ald for NCSN]
    #[arg(long)]
    sampler: Option<String>,
    /// Sampler steps [default: the run's recorded steps with its sampler (10 for the MLP), 50
    /// with the default sampler, else the sampler's own, e.g. 50 for ddim]; ode-rk45 is adaptive:
    /// N only sizes its first step
    #[arg(long)]
    steps: Option<usize>,
    /// DDIM's eta: 0 deterministic (the default), 1 as much noise as DDPM's ancestral steps
    #[arg(long)]
    eta: Option<f32>,
    /// DDIM's timestep spacing: uniform (the default), quadratic (dense near the data), log-snr or
    /// trailing (every T/steps-th from the top, as diffusers' `trailing`)
    #[arg(long)]
    spacing: Option<Spacing>,
    /// Class of every image (class-conditional models)
    #[arg(long)]
    class: Option<u32>,
    /// Classifier-free guidance scale w (class-conditional models) [default: for a model trained
    /// with labels dropped the run's recorded guidance (1.5 for the MLP), else 2; else 1]
    #[arg(long)]
    guidance: Option<f32>,
    /// Noise levels LOW,HIGH (sigma = std / alpha) between which guidance applies, or `all`;
    /// outside them the conditional output alone, at half the batch [default: the run's
    /// recorded interval (0.28,5.42 for the MLP, as Kynkäänniemi et al. guide EDM2), else all]
    #[arg(long, value_name = "LOW,HIGH|all")]
    guidance_interval: Option<GuidanceInterval>,
    /// Skip-schedule exponent c of the adaptive U-Net: k(t) = min(N-1, floor(N - N(1-t)^c)) deepest
    /// levels skipped at normalised time t [default: 0 = no skipping]
    #[arg(long, conflicts_with = "skip_schedule")]
    skip_exponent: Option<f32>,
    /// A schedule file (JSON): levels skipped per step (`wgdiff experiment skip-search`) and/or
    /// the steps' timesteps (`wgdiff experiment step-search`, which then replace --spacing); its
    /// sampler and step count are the defaults of --sampler and --steps
    #[arg(long, value_name = "FILE")]
    skip_schedule: Option<PathBuf>,
    /// Deep-feature caching (DeepCache): compute the deep levels' features at one network call
    /// and reuse them for the next m - 1 [default: off]
    #[arg(long, value_name = "M")]
    cache_interval: Option<usize>,
    /// Levels (with the middle block) whose features are reused: 1 .. levels-1 [default: the
    /// U-Net's levels - 1, only the top level runs between refreshes]
    #[arg(long, value_name = "D", requires = "cache_interval")]
    cache_depth: Option<usize>,
    /// Seed of the starting noise and the sampler's noise
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

impl SamplingArgs {
    /// Seed of the starting noise and the sampler's noise (`--seed`).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The checkpoint to sample.
    pub fn checkpoint(&self) -> &std::path::Path {
        &self.checkpoint
    }

    /// The checkpoint's model.
    pub fn load_model(&self, gpu: &Gpu) -> Result<TrainedModel> {
        let model = TrainedModel::load(gpu, &self.checkpoint)
            .with_context(|| format!("loading {}", self.checkpoint.display()))?;
        if model.packed_weights > 0 {
            eprintln!(
                "{}: {} conv and linear weights run as packed integers",
                self.checkpoint.display(),
                model.packed_weights
            );
        }
        Ok(model)
    }

    /// The request for `count` images from `model` as the flags say.
    pub fn request(&self, model: &TrainedModel, count: usize) -> Result<SampleRequest> {
        let levels = model.net.levels();
        let schedule = match &self.skip_schedule {
            Some(path) => {
                let schedule = SkipSchedule::load(path)?;
                schedule.check_levels(levels, &path.display().to_string())?;
                Some(schedule)
            }
            None => None,
        };
        let mut builder = SampleRequest::for_state(&model.state)
            .sampler_named(self.sampler.as_deref(), self.eta, self.spacing)?
            .steps(self.steps)
            .count(count)
            .seed(self.seed)
            .skip(SkipPlan::Exponent(self.skip_exponent.unwrap_or(0.0)))
            .cache(
                self.cache_interval
                    .map(|m| FeatureCache::new(m, self.cache_depth, levels)),
            )
            .class(self.class);
        if let Some(schedule) = &schedule {
            builder = builder.schedule(schedule);
        }
        if let Some(guidance) = self.guidance {
            builder = builder.guidance(guidance);
        }
        if let Some(interval) = self.guidance_interval {
            builder = builder.guidance_interval(Some(interval));
        }
        Ok(builder.build()?)
    }
}

/// Flags of `wgdiff sample`.
#[derive(Args)]
pub struct SampleArgs {
    #[command(flatten)]
    sampling: SamplingArgs,
    /// Images to draw (any number: they are drawn --batch at a time)
    #[arg(long, default_value_t = 16)]
    count: usize,
    /// Images drawn at once; batch i is seeded --seed + i, so the same seed, count and batch
    /// give the same images
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Output PNG grid
    #[arg(long, default_value = "samples.png")]
    out: PathBuf,
    /// Also write every step's x_t and predicted x_0 as PNG grids into this folder
    #[arg(long, value_name = "DIR")]
    frames: Option<PathBuf>,
    /// Time kernel variants for shapes new to this device and remember the fastest (as train
    /// and eval do). Without it, shapes an earlier run measured take its choice and the rest a
    /// fixed rule: a sampling run is too short to repay the measuring on a CPU adapter, which
    /// compiles every variant first (on lavapipe the shipped U-Net's first tuned run took 47 s
    /// on Mesa 22.3 and 201 s on Mesa 25, against 12 s and 35 s, for ~1 s saved per later run)
    #[arg(long)]
    tune: bool,
}

pub fn run(gpu: &Gpu, args: SampleArgs) -> Result<()> {
    if args.tune {
        draw(gpu, args)
    } else {
        wgdiff::gpu::without_measuring(|| draw(gpu, args))
    }
}

fn draw(gpu: &Gpu, args: SampleArgs) -> Result<()> {
    wgdiff::data::check_png_output(&args.out)?;
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    if args.frames.is_some() && args.count > args.batch {
        bail!(
            "--frames records one batch: use --count {} or less (or a --batch of at least {})",
            args.batch,
            args.count
        );
    }
    let model = args.sampling.load_model(gpu)?;
    let request = args.sampling.request(&model, args.count)?;
    if let Some(note) = request.sampler().steps_note() {
        eprintln!("{note}");
    }
    let started = std::time::Instant::now();
    let shape = model.image_shape();
    let (images, evaluations) = match &args.frames {
        Some(dir) => {
            let mut write_frames = |step: &Step| save_step_frames(dir, step);
            let (images, evaluations) =
                pollster::block_on(model.sampling().sample(gpu, &request, Some(&mut write_frames)))?;
            (images.to_vec()?, evaluations)
        }
        None => {
            let bar = (args.count > args.batch).then(|| super::Progress::new(args.count, "images"));
            let drawn = pollster::block_on(model.sampling().sample_in_batches(
                gpu,
                &request,
                args.batch,
                |done| {
                    if let Some(bar) = &bar {
                        bar.set_position(done as u64);
                    }
                },
            ))?;
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            drawn
        }
    };
    // (large grids at 1:1, so 100,000 MNIST digits stay a 9,500-pixel-wide PNG)
    let scale = if args.count > 256 { 1 } else { 2 };
    save_grid_of(
        &args.out,
        &images,
        [args.count, shape[0], shape[1], shape[2]],
        scale,
    )?;
    eprintln!(
        "{} images with {} ({} network evaluations) in {:.1} s: {}",
        args.count,
        request.sampler(),
        evaluations,
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    if let Some(dir) = &args.frames {
        eprintln!("frames (x_t and predicted x_0 per step): {}", dir.display());
    }
    super::report_pipeline_creation(gpu);
    Ok(())
}
