//! `wgdiff experiment adaptive-skip` (the adaptive U-Net paper's Tables 1-3 on MNIST),
//! `skip-search` (schedules searched under an FID budget, and deep-feature caching), `speedrun`
//! (the recipe search behind `wgdiff train`'s default), `ladder` (the speed ladders of the CUDA
//! and NYU studies), `compression` (the UMass MNIST report's tables) and `step-search` (few-step
//! timestep schedules): Markdown, JSON, PNG.

use super::progress_bar;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use indicatif::ProgressBar;
use pollster::block_on;
use std::path::PathBuf;
use std::time::Instant;
use wgdiff::classifier::SHIPPED_MNIST_CLASSIFIER;
use wgdiff::eval::DEFAULT_STATS_CACHE;
use wgdiff::experiment::lab::{self, Event, Kind, Setup};
use wgdiff::experiment::{compression, skip_search, Inputs};
use wgdiff::gpu::describe;
use wgdiff::pipeline::DEFAULT_CHECKPOINT;
use wgdiff::Gpu;

/// `wgdiff experiment ...`
#[derive(Subcommand)]
pub enum ExperimentCommand {
    /// The adaptive U-Net paper (Giladi, Meir, Kavar, Elad): MNIST-FID and sampling speed-up of skip-trained
    /// models per skip type and exponent c, the untrained-for-skips baseline, and DDIM
    AdaptiveSkip(AdaptiveSkipArgs),
    /// The speed-run: MNIST-FID against training time for candidate training recipes (the
    /// search that chose `wgdiff train`'s default), one curve each
    Speedrun(SpeedrunArgs),
    /// The speed ladders: a ConvNeXt DDPM step from naive conv to fused blocks (the CUDA
    /// optimisations study), and the MNIST U-Net with one technique switched per row (the NYU study)
    Ladder(LadderArgs),
    /// The UMass MNIST report's compression tables: pruning and int8/int4 weights on the shipped
    /// DDPM U-Net and NCSN ScoreNet, with size, gzipped size, ms per image, memory and MNIST-FID
    Compression(CompressionArgs),
    /// Beyond the adaptive U-Net paper: the fastest per-step skip schedule within an MNIST-FID budget
    /// (searched on measured per-level times and a cheap proxy, confirmed by real FIDs), and
    /// deep-feature caching, against the k(t) family on one model
    SkipSearch(SkipSearchArgs),
    /// Few-step timestep schedules: for DPM-Solver++ (or DDIM) at 10 and 5 steps, the timesteps whose
    /// samples land closest to the sampler's many-step run from the same noise (after "Align Your
    /// Steps", Sabour, Fidler and Kreis), then every spacing timed and scored beside 50-step DDPM
    StepSearch(StepSearchArgs),
}

/// Flags of `wgdiff experiment step-search`.
#[derive(Args)]
#[command(after_help = "Examples:\n  \
    wgdiff experiment step-search --quick                    # lavapipe, the shipped U-Net: ~25 minutes\n  \
    wgdiff experiment step-search --quick --model runs/mnist/checkpoint.safetensors\n  \
    wgdiff sample --skip-schedule runs/step-search/schedule-dpm-solver++-10-searched.json\n\n\
1. Samples the probe batch (--probe-images, seed --seed) with the sampler at --reference-steps\n\
   on its own spacing: the reference.\n\
2. For each step count N: starts from the log-SNR-uniform grid and moves each interior timestep\n\
   (in log-SNR) toward a neighbour, keeping the move when the probe batch's mean squared\n\
   difference from the reference falls (--sweeps sweeps, each moving half as far).\n\
3. Samples every row in turn (DDPM at --baseline-steps, the bar; per N the sampler on uniform,\n\
   quadratic and log-SNR spacing and on the searched timesteps, and for dpm-solver++ also its\n\
   stochastic form dpm-solver++-sde on them): ms per image and MNIST-FID from one run; the\n\
   verdict takes the better of the searched rows. Writes step-search.md, step-search.json,\n\
   time-vs-fid.png and schedule-SAMPLER-N-searched.json per N to --out.")]
pub struct StepSearchArgs {
    /// Small run for lavapipe: 16 probe images, a 100-step reference, 2 sweeps, 200 images per
    /// MNIST-FID
    #[arg(long)]
    quick: bool,
    /// The checkpoint to search on (a VP model of MNIST digits)
    #[arg(long, default_value = DEFAULT_CHECKPOINT)]
    model: PathBuf,
    /// Step counts to search, comma-separated [default: 10,5]
    #[arg(long, value_delimiter = ',')]
    steps: Option<Vec<usize>>,
    /// dpm-solver++ or ddim (deterministic: runs from the same noise are compared) [default: dpm-solver++]
    #[arg(long)]
    sampler: Option<String>,
    /// Steps of the reference run [default: 100 with --quick, else 200]
    #[arg(long)]
    reference_steps: Option<usize>,
    /// Images every candidate schedule samples [default: 16 with --quick, else 64]
    #[arg(long)]
    probe_images: Option<usize>,
    /// Coordinate-descent sweeps [default: 2 with --quick, else 4]
    #[arg(long)]
    sweeps: Option<usize>,
    /// Steps of the DDPM bar [default: 50]
    #[arg(long)]
    baseline_steps: Option<usize>,
    /// Images per MNIST-FID [default: 200 with --quick, else 1000]
    #[arg(long)]
    samples: Option<usize>,
    /// Images per timed batch [default: 50 with --quick, else 100]
    #[arg(long)]
    batch: Option<usize>,
    /// Seed of the sampling noise (the probe batch's; round r of the final run uses seed + r)
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The MNIST classifier whose features give MNIST-FID
    #[arg(long, default_value = SHIPPED_MNIST_CLASSIFIER)]
    classifier: PathBuf,
    /// Folder of cached reference statistics
    #[arg(long, default_value = DEFAULT_STATS_CACHE)]
    cache: PathBuf,
    /// Output folder
    #[arg(long, default_value = "runs/step-search")]
    out: PathBuf,
}

/// Flags of `wgdiff experiment skip-search`.
#[derive(Args)]
#[command(after_help = "Examples:\n  \
    wgdiff experiment skip-search --quick               # lavapipe: under 20 minutes, 100 images per FID\n  \
    wgdiff experiment skip-search --budget 5,15         # real GPU: 1,000 images per FID, 50 steps\n  \
    wgdiff sample --checkpoint assets/models/mnist-small-skip-zero.safetensors \\\n      \
    --skip-schedule runs/skip-search/schedule-budget-10.json\n\n\
1. Times one network call at every skip depth k (interleaved rounds, median).\n\
2. Runs the unskipped sampler on one batch and, at every step, compares each depth's x_0\n\
   prediction with the full network's (the proxy e_i(k): their mean squared difference times\n\
   the share of an x_0 error that reaches the next state, small near noise, 1 near the data).\n\
3. For each budget F: a dynamic programme picks the per-step depths k_i of least time whose\n\
   summed proxy is within a proxy budget; the proxy budget is bisected on real MNIST-FIDs\n\
   until the schedule is within F of the unskipped model's (--confirmations per budget).\n\
4. Samples every arm in turn (k(t) for c = 0, 1, 2, 3, 5; each searched schedule; deep-feature\n\
   caching at intervals 2, 3, 5 and depth 1; caching with c = 2 and with the first schedule):\n\
   time and MNIST-FID from one run. Writes skip-search.md, skip-search.json, time-vs-fid.png\n\
   and schedule-budget-F.json per budget to --out.")]
pub struct SkipSearchArgs {
    /// Small run for lavapipe (under 20 minutes): 100 images per FID in batches of 20, DDPM 20
    /// steps, budgets 10 and 30
    #[arg(long)]
    quick: bool,
    /// The checkpoint to search on (a U-Net; one trained for skipping loses least)
    #[arg(long, default_value = skip_search::DEFAULT_SEARCH_MODEL)]
    model: PathBuf,
    /// MNIST-FID budgets F, comma-separated: each searched schedule stays within F of the
    /// unskipped model's FID [default: 10,30 with --quick, else 5,15]
    #[arg(long, value_delimiter = ',')]
    budget: Option<Vec<f64>>,
    /// ddpm, ddim or dpm-solver++ (any sampler with fixed steps) [default: ddpm]
    #[arg(long)]
    sampler: Option<String>,
    /// Sampler steps [default: 20 with --quick, else 50]
    #[arg(long)]
    steps: Option<usize>,
    /// Images per MNIST-FID [default: 100 with --quick, else 1000]
    #[arg(long)]
    samples: Option<usize>,
    /// Images per timed batch, cost measurement and proxy batch [default: 20 with --quick, else 100]
    #[arg(long)]
    batch: Option<usize>,
    /// Real-FID confirmations (bisection steps) per budget [default: 4 with --quick, else 5]
    #[arg(long)]
    confirmations: Option<usize>,
    /// Seed of the sampling noise (round r uses seed + r)
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The MNIST classifier whose features give MNIST-FID
    #[arg(long, default_value = SHIPPED_MNIST_CLASSIFIER)]
    classifier: PathBuf,
    /// Folder of cached reference statistics
    #[arg(long, default_value = DEFAULT_STATS_CACHE)]
    cache: PathBuf,
    /// Output folder
    #[arg(long, default_value = "runs/skip-search")]
    out: PathBuf,
}

/// Flags of `wgdiff experiment compression`.
#[derive(Args)]
#[command(after_help = "Examples:\n  \
    wgdiff experiment compression --quick     # lavapipe: under 25 minutes, 100 samples x 10 steps per row\n  \
    wgdiff experiment compression             # 1,000 samples x 50 steps per row\n\n\
Rows (each model): the float baseline; int8 and int4 weights (a scale per output channel, run\n\
by the int8/int4 conv and matmul kernels); random and L1 pruning, global at 10/30/70%; random\n\
30% in the middle (layers at a quarter of the image's side or less) and at the ends of the U;\n\
L1 30% with int8 and int4 weights. Each row is a compressed sampling export (`wgdiff compress`\n\
writes the same file) whose bytes, gzipped bytes, sampling ms per image (network evaluations\n\
timed interleaved across the rows), peak device memory and MNIST-FID are measured; the\n\
report's published (bytes, ms, FID) stand beside. Writes compression.md, compression.json,\n\
fid-vs-size.png and fid-vs-ms.png to --out.")]
pub struct CompressionArgs {
    /// Small run for lavapipe (under 25 minutes): 100 samples at 10 steps per row
    #[arg(long)]
    quick: bool,
    /// The DDPM U-Net to compress
    #[arg(long, default_value = DEFAULT_CHECKPOINT)]
    unet: PathBuf,
    /// The NCSN ScoreNet to compress
    #[arg(long, default_value = compression::SHIPPED_SCORENET)]
    scorenet: PathBuf,
    /// Images per MNIST-FID [default: 100 with --quick, else 1000]
    #[arg(long)]
    samples: Option<usize>,
    /// Sampler steps [default: 10 with --quick, else 50]
    #[arg(long)]
    steps: Option<usize>,
    /// Output folder
    #[arg(long, default_value = "runs/compression")]
    out: PathBuf,
}

/// Flags of `wgdiff experiment ladder`.
#[derive(Args)]
#[command(after_help = "Examples:\n  \
    wgdiff experiment ladder --quick     # lavapipe: under 20 minutes\n  \
    wgdiff experiment ladder             # batch 32, 20 training minutes per ablation row, 1,000-sample FIDs\n  \
    wgdiff experiment ladder --quick --ladder-batch 32 --reps 6   # table 1 at the full run's batch\n\n\
Table 1 (Li Xiaolong's CUDA optimisations study): one training step of a small ConvNeXt DDPM on MNIST,\n\
rung by rung: 1. naive conv + a LayerNorm composed of generic ops + unfused blocks;\n\
2. + fast conv (auto: tiled implicit GEMM or im2col per dense shape, direct for depthwise);\n\
3. + the LayerNorm kernel; 4. + the fused ConvNeXt block. The rungs take turns step by step\n\
(A, B, C, D, A, B, ...); a speed-up is the median of the per-round time ratios of this one\n\
run, beside the study's 383.03 s -> 76.03 s -> 70.62 s (5.4x).\n\
Table 2 (the NYU performance-preserving training study): the mnist-small U-Net with one switch per row: mixed precision (f16),\n\
naive / im2col / tiled conv, 1x1 bottlenecks, one level fewer. The rows take turns step by\n\
step until each has trained the same seconds; columns: ms per step, speed-up, peak device\n\
memory, parameters, and MNIST-FID after that training (compare rows: minutes of training\n\
leave FIDs high).\n\
Writes ladder.md, ladder.json and ladder.png to --out.")]
pub struct LadderArgs {
    /// Small run for lavapipe (under 20 minutes): batch 8, 4 steps per rung, 45 training seconds per row, 64-sample FIDs
    #[arg(long)]
    quick: bool,
    /// Images per ConvNeXt training step in table 1 [default: 8 with --quick, else 32]
    #[arg(long)]
    ladder_batch: Option<usize>,
    /// Training seconds per ablation row [default: 45 with --quick, else 1200]
    #[arg(long)]
    train_seconds: Option<f64>,
    /// Timed ConvNeXt steps per rung [default: 4 with --quick, else 20]
    #[arg(long)]
    reps: Option<usize>,
    /// Output folder
    #[arg(long, default_value = "runs/ladder")]
    out: PathBuf,
}

/// Flags of `wgdiff experiment speedrun`.
#[derive(Args)]
#[command(after_help = "Examples:\n  \
    wgdiff experiment speedrun --quick     # lavapipe: 4 training minutes per recipe (~1 h with the U-Nets' evaluations)\n  \
    wgdiff experiment speedrun             # 30 training minutes per recipe, 1,000 samples per evaluation\n  \
    wgdiff experiment speedrun --quick --recipes default,uniform-times --budget 300 --samples 1000\n\n\
Recipes (--recipes keys): previous (the MNIST U-Net, batch 64, EMA 0.999, the default before\n\
the speed-run), default (today's: the class-conditional residual MLP, v on the cosine schedule,\n\
logit-normal training times, the lr decaying over the last 30%, guidance 1.75), the same MLP\n\
without classes (unconditional), with eps on linear betas (eps-linear), at double width\n\
(mlp-1024), with min-SNR-5 loss weighting (min-snr), with the lr decaying over the last 30%\n\
(lr-decay), with EMA 0.999 (ema-999), with a 3x3 conv head over its output (conv-head), at\n\
batch 256 (batch-256), with uniform training times (uniform-times), and the small U-Net with\n\
the new optimiser settings (unet-small). Each first takes one untimed warm-up step (pipelines,\n\
kernel autotuning). They train round-robin in time slices, so a machine that slows down slows\n\
every recipe alike; only time inside the training step counts. Writes\n\
speedrun.md, speedrun.json and fid-vs-time.png to --out.")]
pub struct SpeedrunArgs {
    /// Small run for lavapipe: 240 training seconds per recipe, 3 evaluations of 200 samples (the MLP's sampler at its 10 steps, the U-Nets' DDPM at 20)
    #[arg(long)]
    quick: bool,
    /// Training seconds per recipe [default: 240 with --quick, else 1800]
    #[arg(long)]
    budget: Option<f64>,
    /// Images sampled for each MNIST-FID evaluation [default: 200 with --quick, else 1000]
    #[arg(long)]
    samples: Option<usize>,
    /// Comma-separated recipe keys to race, in that order (see below) [default: all]
    #[arg(long, value_name = "KEY,KEY")]
    recipes: Option<String>,
    /// Output folder
    #[arg(long, default_value = "runs/speedrun")]
    out: PathBuf,
}

/// Flags of `wgdiff experiment adaptive-skip`.
#[derive(Args)]
#[command(after_help = "Examples:\n  \
    wgdiff experiment adaptive-skip --quick     # lavapipe: < 20 min with the models in assets/models\n  \
    wgdiff experiment adaptive-skip             # real GPU: 2,000 samples per arm, 100 DDPM steps\n  \
    wgdiff experiment adaptive-skip --checkpoint DIR --samples 2 --batch 2 --steps 2 --quick\n  \
                                                # an imported diffusers U-Net (not MNIST): timings only\n\n\
Models: the baseline (trained without skipping) and, in --models, <baseline>-skip-zero,\n\
-skip-duplicate, -skip-interpolate (k-consistent training, c = 2) and -skip-zero-uniform\n\
(uniform-k training); a missing one is fine-tuned from the baseline (wgdiff train --init\n\
BASELINE --skip-type T --skip-training consistent:2|uniform --steps N --batch 32 --lr 1e-3\n\
--warmup 20 --ema-decay 0.999) and saved there. Writes adaptive-skip.md, adaptive-skip.json, fid-vs-speedup.png and\n\
skip-schedules.png to --out.")]
pub struct AdaptiveSkipArgs {
    /// Small run for lavapipe (about 10 minutes): 100 samples per arm in batches of 20, 10 DDPM steps, Table 3
    /// at 5 and 10 steps, models from assets/models
    #[arg(long)]
    quick: bool,
    /// The model trained without skipping (Table 1's first row): a checkpoint or a diffusers
    /// folder. A model that is not 1x28x28 MNIST is timed only, under each skip type untrained
    #[arg(long, visible_alias = "checkpoint", default_value = DEFAULT_CHECKPOINT)]
    baseline: PathBuf,
    /// Folder of the skip-trained models [default: assets/models with --quick, else runs/adaptive-skip/models]
    #[arg(long, value_name = "DIR")]
    models: Option<PathBuf>,
    /// Fine-tuning steps of a missing skip-trained model [default: 300 with --quick, else 3000]
    #[arg(long)]
    train_steps: Option<usize>,
    /// Images per arm [default: 100 with --quick, else 2000]
    #[arg(long)]
    samples: Option<usize>,
    /// Images per timed sampling batch [default: 20 with --quick, else 250]
    #[arg(long)]
    batch: Option<usize>,
    /// DDPM ancestral steps of Tables 1 and 2 [default: 10 with --quick, else 100]
    #[arg(long)]
    steps: Option<usize>,
    /// Seed of the sampling noise (round r of every arm uses seed + r)
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The MNIST classifier whose features give MNIST-FID
    #[arg(long, default_value = SHIPPED_MNIST_CLASSIFIER)]
    classifier: PathBuf,
    /// Folder of cached reference statistics
    #[arg(long, default_value = DEFAULT_STATS_CACHE)]
    cache: PathBuf,
    /// Output folder
    #[arg(long, default_value = "runs/adaptive-skip")]
    out: PathBuf,
}

pub fn run(gpu: &Gpu, command: ExperimentCommand) -> Result<()> {
    let setup = match command {
        ExperimentCommand::AdaptiveSkip(a) => {
            let mut setup = Setup::new(Kind::AdaptiveSkip, a.quick);
            set(&mut setup, "samples", a.samples)?;
            set(&mut setup, "batch", a.batch)?;
            set(&mut setup, "steps", a.steps)?;
            set(&mut setup, "seed", Some(a.seed))?;
            set(&mut setup, "train-steps", a.train_steps)?;
            set(&mut setup, "baseline", Some(a.baseline.display()))?;
            set(&mut setup, "models", a.models.as_ref().map(|m| m.display()))?;
            set(&mut setup, "classifier", Some(a.classifier.display()))?;
            set(&mut setup, "cache", Some(a.cache.display()))?;
            set(&mut setup, "out", Some(a.out.display()))?;
            setup
        }
        ExperimentCommand::Speedrun(a) => {
            let mut setup = Setup::new(Kind::Speedrun, a.quick);
            set(&mut setup, "recipes", a.recipes.as_ref())?;
            set(&mut setup, "budget", a.budget)?;
            set(&mut setup, "samples", a.samples)?;
            set(&mut setup, "out", Some(a.out.display()))?;
            setup
        }
        ExperimentCommand::Compression(a) => {
            let mut setup = Setup::new(Kind::Compression, a.quick);
            set(&mut setup, "samples", a.samples)?;
            set(&mut setup, "steps", a.steps)?;
            set(&mut setup, "unet", Some(a.unet.display()))?;
            set(&mut setup, "scorenet", Some(a.scorenet.display()))?;
            set(&mut setup, "out", Some(a.out.display()))?;
            setup
        }
        ExperimentCommand::Ladder(a) => {
            let mut setup = Setup::new(Kind::Ladder, a.quick);
            set(&mut setup, "ladder-batch", a.ladder_batch)?;
            set(&mut setup, "train-seconds", a.train_seconds)?;
            set(&mut setup, "reps", a.reps)?;
            set(&mut setup, "out", Some(a.out.display()))?;
            setup
        }
        ExperimentCommand::SkipSearch(a) => {
            let mut setup = Setup::new(Kind::SkipSearch, a.quick);
            set(&mut setup, "samples", a.samples)?;
            set(&mut setup, "batch", a.batch)?;
            set(&mut setup, "steps", a.steps)?;
            set(&mut setup, "seed", Some(a.seed))?;
            let budgets = a
                .budget
                .map(|b| b.iter().map(f64::to_string).collect::<Vec<_>>().join(","));
            set(&mut setup, "budget", budgets)?;
            set(&mut setup, "sampler", a.sampler)?;
            set(&mut setup, "confirmations", a.confirmations)?;
            set(&mut setup, "model", Some(a.model.display()))?;
            set(&mut setup, "classifier", Some(a.classifier.display()))?;
            set(&mut setup, "cache", Some(a.cache.display()))?;
            set(&mut setup, "out", Some(a.out.display()))?;
            setup
        }
        ExperimentCommand::StepSearch(a) => {
            let mut setup = Setup::new(Kind::StepSearch, a.quick);
            let steps = a
                .steps
                .map(|s| s.iter().map(usize::to_string).collect::<Vec<_>>().join(","));
            set(&mut setup, "steps", steps)?;
            set(&mut setup, "sampler", a.sampler)?;
            set(&mut setup, "reference-steps", a.reference_steps)?;
            set(&mut setup, "probe-images", a.probe_images)?;
            set(&mut setup, "sweeps", a.sweeps)?;
            set(&mut setup, "baseline-steps", a.baseline_steps)?;
            set(&mut setup, "samples", a.samples)?;
            set(&mut setup, "batch", a.batch)?;
            set(&mut setup, "seed", Some(a.seed))?;
            set(&mut setup, "model", Some(a.model.display()))?;
            set(&mut setup, "classifier", Some(a.classifier.display()))?;
            set(&mut setup, "cache", Some(a.cache.display()))?;
            set(&mut setup, "out", Some(a.out.display()))?;
            setup
        }
    };
    eprintln!("device: {}", describe(&gpu.info));
    let command = std::iter::once("wgdiff".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    let mut terminal = Terminal::new();
    let finished = block_on(lab::run(gpu, &setup, &Inputs::Disk, &command, &mut |event| {
        terminal.show(event);
        Ok(())
    }));
    terminal.bar.finish_and_clear();
    let finished = finished.with_context(|| format!("experiment {}", setup.kind().name()))?;
    let written: Vec<String> = finished
        .names()
        .iter()
        .map(|name| setup.out.join(name).display().to_string())
        .collect();
    eprintln!("wrote {}", written.join(", "));
    println!("{}", finished.markdown);
    Ok(())
}

/// Sets flag `key` of `setup` to `value` when the flag was given.
fn set(setup: &mut Setup, key: &str, value: Option<impl std::fmt::Display>) -> Result<()> {
    match value {
        Some(value) => Ok(setup.set(key, &value.to_string())?),
        None => Ok(()),
    }
}

/// An experiment's events on a terminal: a progress bar per phase, notes and finished rows as
/// lines above it (or, when stderr is not a terminal, as lines with the seconds since the start
/// and the progress every few seconds).
struct Terminal {
    bar: ProgressBar,
    unit: &'static str,
    started: Instant,
    last_line: Instant,
}

impl Terminal {
    fn new() -> Terminal {
        Terminal {
            bar: ProgressBar::hidden(),
            unit: "",
            started: Instant::now(),
            last_line: Instant::now(),
        }
    }

    fn line(&mut self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("[{:5.0} s] {line}", self.started.elapsed().as_secs_f64());
            self.last_line = Instant::now();
        } else {
            self.bar.println(line);
        }
    }

    fn show(&mut self, event: Event) {
        match event {
            Event::Note(note) => self.line(&note),
            Event::Progress {
                done,
                total,
                unit,
                what,
            } => {
                if unit != self.unit {
                    self.bar.finish_and_clear();
                    self.bar = progress_bar(total, unit);
                    self.unit = unit;
                }
                self.bar.set_length(total as u64);
                self.bar.set_position(done as u64);
                self.bar.set_message(what.clone());
                if self.bar.is_hidden() && self.last_line.elapsed().as_secs_f64() > 10.0 {
                    self.line(&format!("{done}/{total} {unit}: {what}"));
                }
            }
            Event::Row { cells, .. } => self.line(&cells.join(" | ")),
            Event::Point { .. } => {}
        }
    }
}
