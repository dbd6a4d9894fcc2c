//! `wgdiff experiment adaptive-skip` (the adaptive U-Net paper's Tables 1-3 on MNIST),
//! `skip-search` (schedules searched under an FID budget, and deep-feature caching), `speedrun`
//! (the recipe search behind `wgdiff train`'s default), `ladder` (the speed ladders of the CUDA
//! and NYU studies) and `compression` (the UMass MNIST report's tables): Markdown, JSON, PNG.

use super::progress_bar;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use indicatif::ProgressBar;
use pollster::block_on;
use std::path::{Path, PathBuf};
use std::time::Instant;
use wgdiff::classifier::{MnistFid, SHIPPED_MNIST_CLASSIFIER};
use wgdiff::eval::DEFAULT_STATS_CACHE;
use wgdiff::experiment::adaptive_skip::{self, skip_model_path, Plan, SkipModel, SKIP_MODELS};
use wgdiff::experiment::ladder::{self, Progress, RUNGS};
use wgdiff::experiment::ladder_report;
use wgdiff::experiment::report::{ModelInfo, Report, BASELINE_LABEL};
use wgdiff::experiment::{compression, skip_search, speedrun, ExperimentPlan, ExperimentReport, Header};
use wgdiff::gpu::describe;
use wgdiff::pipeline::{TrainedModel, DEFAULT_CHECKPOINT};
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
    wgdiff experiment ladder             # batch 32, 20 training minutes per ablation row, 1,000-sample FIDs\n\n\
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
    wgdiff experiment speedrun             # 30 training minutes per recipe, 1,000 samples per evaluation\n\n\
Recipes: the previous default (the MNIST U-Net, batch 64, EMA 0.999), today's default (the\n\
class-conditional residual MLP, v on the cosine schedule, guidance 2), the same MLP without\n\
classes, with eps on linear betas, at double width, and the small U-Net with the new optimiser\n\
settings. Each first takes one untimed\n\
warm-up step (pipelines, kernel autotuning). They train round-robin in time slices, so a machine that\n\
slows down slows every recipe alike; only time inside the training step counts. Writes\n\
speedrun.md, speedrun.json and fid-vs-time.png to --out.")]
pub struct SpeedrunArgs {
    /// Small run for lavapipe: 240 training seconds per recipe, 3 evaluations of 200 samples x 20 DDPM steps
    #[arg(long)]
    quick: bool,
    /// Training seconds per recipe [default: 240 with --quick, else 1800]
    #[arg(long)]
    budget: Option<f64>,
    /// Output folder
    #[arg(long, default_value = "runs/speedrun")]
    out: PathBuf,
}

/// Flags of `wgdiff experiment adaptive-skip`.
#[derive(Args)]
#[command(after_help = "Examples:\n  \
    wgdiff experiment adaptive-skip --quick     # lavapipe: < 20 min with the models in assets/models\n  \
    wgdiff experiment adaptive-skip             # real GPU: 2,000 samples per arm, 100 DDPM steps\n\n\
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
    /// The model trained without skipping (Table 1's first row)
    #[arg(long, default_value = DEFAULT_CHECKPOINT)]
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
    match command {
        ExperimentCommand::AdaptiveSkip(args) => adaptive_skip_run(gpu, args),
        ExperimentCommand::Speedrun(args) => speedrun_run(gpu, args),
        ExperimentCommand::Compression(args) => compression_run(gpu, args),
        ExperimentCommand::Ladder(args) => ladder_run(gpu, args),
        ExperimentCommand::SkipSearch(args) => skip_search_run(gpu, args),
    }
}

/// One experiment under way: the device it runs on and when it started.
struct ExperimentRun {
    device: String,
    started: Instant,
}

impl ExperimentRun {
    /// The report's header: made now, with the seconds since the start.
    fn header(&self) -> Header {
        Header::new(self.device.clone(), self.started)
    }

    /// Prints `line` above the bar, or on its own with the seconds since the start when the bar
    /// is hidden (output to a file).
    fn bar_line(&self, bar: &ProgressBar, line: String) {
        if bar.is_hidden() {
            eprintln!("[{:5.0} s] {line}", self.started.elapsed().as_secs_f64());
        } else {
            bar.println(line);
        }
    }
}

/// The scaffold of every experiment: prints the device and starts the clock, runs `body` (which
/// measures and builds the report with [`ExperimentRun::header`]), then writes the report's files
/// into `out`, says which and prints its Markdown.
fn run_experiment<R: ExperimentReport>(
    gpu: &Gpu,
    out: &Path,
    body: impl FnOnce(&ExperimentRun) -> Result<R>,
) -> Result<()> {
    let run = ExperimentRun {
        device: describe(&gpu.info),
        started: Instant::now(),
    };
    eprintln!("device: {}", run.device);
    let report = body(&run)?;
    let written = report
        .write_files(out)
        .with_context(|| format!("writing the report into {}", out.display()))?;
    eprintln!("wrote {}", written.join(", "));
    println!("{}", report.markdown());
    Ok(())
}

/// A progress bar over the training seconds of runs that take turns (the speed-run's recipes,
/// the ladder's ablation rows), each counted up to the budget of one.
struct TrainingBar {
    bar: ProgressBar,
    budget: f64,
    /// The seconds each run has trained so far, in the order they first reported.
    trained: Vec<(String, f64)>,
}

impl TrainingBar {
    fn new(runs: usize, budget: f64) -> TrainingBar {
        TrainingBar {
            bar: progress_bar((budget * runs as f64).ceil() as usize, "training seconds"),
            budget,
            trained: Vec::new(),
        }
    }

    /// `name` has trained `seconds` in all: moves the bar and names the run.
    fn trained(&mut self, name: &str, seconds: f64) {
        match self.trained.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = seconds,
            None => self.trained.push((name.to_string(), seconds)),
        }
        let done: f64 = self.trained.iter().map(|(_, s)| s.min(self.budget)).sum();
        self.bar.set_position(done as u64);
        self.bar.set_message(name.to_string());
    }
}

fn ladder_run(gpu: &Gpu, args: LadderArgs) -> Result<()> {
    let mut plan = ladder::Plan::choose(args.quick);
    plan.train_seconds = args.train_seconds.unwrap_or(plan.train_seconds);
    plan.ladder_reps = args.reps.unwrap_or(plan.ladder_reps);
    plan.validate()?;
    let arms = ladder::arms(&plan)?;
    run_experiment(gpu, &args.out, |run| {
        let bar = progress_bar(RUNGS.len() * plan.ladder_reps, "ConvNeXt steps");
        let rungs = block_on(ladder::run_ladder(gpu, &RUNGS, &plan, |event| match event {
            Progress::WarmingUp(rung) => run.bar_line(&bar, format!("ladder: warm-up step of {rung}")),
            Progress::RungStep {
                rung,
                done,
                total,
                ms,
            } => {
                bar.set_position(done as u64);
                bar.set_message(rung.to_string());
                if bar.is_hidden() {
                    run.bar_line(&bar, format!("ladder: step {done}/{total} {rung}: {ms:.0} ms"));
                }
            }
            Progress::Trained { .. } | Progress::Scored { .. } => {}
        }))?;
        bar.finish_and_clear();

        let tracker = super::shipped_mnist_fid(gpu)?;
        let mut training = TrainingBar::new(arms.len(), plan.train_seconds);
        let rows = block_on(ladder::run_ablation(
            gpu,
            &arms,
            &plan,
            &tracker,
            |event| match event {
                Progress::WarmingUp(row) => {
                    run.bar_line(&training.bar, format!("ablation: warm-up step of {row}"))
                }
                Progress::Trained { row, seconds } => {
                    training.trained(row, seconds);
                    if training.bar.is_hidden() {
                        let line = format!(
                            "ablation: {row}: {seconds:.1} s of {:.0} s trained",
                            plan.train_seconds
                        );
                        run.bar_line(&training.bar, line);
                    }
                }
                Progress::Scored { row, fid } => {
                    run.bar_line(&training.bar, format!("ablation: {row}: MNIST-FID {fid:.1}"))
                }
                Progress::RungStep { .. } => {}
            },
        ))?;
        training.bar.finish_and_clear();
        Ok(ladder_report::Report {
            header: run.header(),
            plan,
            rungs,
            rows,
        })
    })
}

fn compression_run(gpu: &Gpu, args: CompressionArgs) -> Result<()> {
    let mut plan = compression::Plan::choose(args.quick);
    plan.samples = args.samples.unwrap_or(plan.samples);
    plan.steps = args.steps.unwrap_or(plan.steps);
    run_experiment(gpu, &args.out, |run| {
        let read = |path: &PathBuf| {
            wgdiff::checkpoint::Checkpoint::load(path).with_context(|| format!("reading {}", path.display()))
        };
        let (unet, scorenet) = (read(&args.unet)?, read(&args.scorenet)?);
        let subjects = [
            compression::Subject {
                label: "DDPM U-Net",
                checkpoint: &unet,
                origin: args.unet.display().to_string(),
                published: &compression::PUBLISHED_DDPM,
            },
            compression::Subject {
                label: "NCSN ScoreNet",
                checkpoint: &scorenet,
                origin: args.scorenet.display().to_string(),
                published: &compression::PUBLISHED_NCSN,
            },
        ];
        let tracker = super::shipped_mnist_fid(gpu)?;
        let rows_total = subjects.len() * (compression::settings().len() + 1);
        let bar = progress_bar(rows_total, "rows");
        let rows = block_on(compression::run(gpu, &subjects, &plan, &tracker, |row| {
            if bar.is_hidden() {
                eprintln!("{row}");
            }
            bar.set_message(row.to_string());
            bar.inc(1);
        }))?;
        bar.finish_and_clear();
        Ok(compression::Report {
            header: run.header(),
            plan,
            rows,
        })
    })
}

fn speedrun_run(gpu: &Gpu, args: SpeedrunArgs) -> Result<()> {
    let mut plan = speedrun::Plan::choose(args.quick);
    plan.budget_seconds = args.budget.unwrap_or(plan.budget_seconds);
    let recipes = speedrun::recipes();
    run_experiment(gpu, &args.out, |run| {
        let tracker = super::shipped_mnist_fid(gpu)?;
        let mut training = TrainingBar::new(recipes.len(), plan.budget_seconds);
        let curves = block_on(speedrun::run(
            gpu,
            &recipes,
            &plan,
            &tracker,
            |recipe, seconds, point| {
                if let Some(p) = point {
                    let line = format!(
                        "{recipe}: {:.0} s of training, step {}, mean loss {:.4}, MNIST-FID {:.1}",
                        p.train_seconds, p.step, p.loss, p.fid
                    );
                    if training.bar.is_hidden() {
                        eprintln!("{line}");
                    } else {
                        training.bar.println(line);
                    }
                }
                training.trained(recipe, seconds);
            },
        ))?;
        training.bar.finish_and_clear();
        Ok(speedrun::Report {
            header: run.header(),
            plan,
            curves,
        })
    })
}

fn adaptive_skip_run(gpu: &Gpu, args: AdaptiveSkipArgs) -> Result<()> {
    let mut plan = Plan::choose(args.quick);
    plan.samples = args.samples.unwrap_or(plan.samples);
    plan.batch = args.batch.unwrap_or(plan.batch);
    plan.steps = args.steps.unwrap_or(plan.steps);
    plan.seed = args.seed;
    let models_dir = args.models.clone().unwrap_or_else(|| {
        PathBuf::from(if args.quick {
            "assets/models"
        } else {
            "runs/adaptive-skip/models"
        })
    });
    let train_steps = args.train_steps.unwrap_or(if args.quick { 300 } else { 3000 });
    run_experiment(gpu, &args.out, |run| {
        let mut models = vec![SkipModel {
            label: BASELINE_LABEL.into(),
            path: args.baseline.display().to_string(),
            model: TrainedModel::load(gpu, &args.baseline)
                .with_context(|| format!("loading the baseline {}", args.baseline.display()))?,
        }];
        for (label, skip_type, scheme, suffix) in SKIP_MODELS {
            let path = skip_model_path(&models_dir, &args.baseline, suffix);
            if !path.exists() {
                eprintln!(
                    "{} is missing: fine-tuning {} for skip type {skip_type} with {scheme:?} training ({train_steps} steps)",
                    path.display(),
                    args.baseline.display()
                );
                let bar = progress_bar(train_steps, "fine-tuning steps");
                block_on(adaptive_skip::fine_tune(
                    gpu,
                    &args.baseline,
                    (skip_type, scheme),
                    train_steps,
                    &path,
                    |step, loss| {
                        bar.set_position(step as u64);
                        bar.set_message(format!("loss {loss:.4}"));
                    },
                ))?;
                bar.finish_and_clear();
            }
            let model = TrainedModel::load(gpu, &path)
                .with_context(|| format!("loading {label} from {}", path.display()))?;
            models.push(SkipModel {
                label: label.into(),
                path: path.display().to_string(),
                model,
            });
        }
        for m in &models {
            m.skip_type()?;
        }

        let MnistFid {
            classifier,
            reference,
            ..
        } = super::mnist_fid(gpu, &args.classifier, "mnist", None, &args.cache)?;

        let arms = adaptive_skip::arms(&models, &plan);
        eprintln!(
            "{} arms x {} samples in batches of {} (round-robin, so every arm sees the same machine load)",
            arms.len(),
            plan.samples,
            plan.batch
        );
        let bar = progress_bar(arms.len() * plan.samples.div_ceil(plan.batch), "batches");
        let results = block_on(adaptive_skip::run(
            gpu,
            &models,
            &arms,
            &plan,
            &classifier,
            &reference,
            |done, _, label| {
                bar.set_position(done as u64);
                bar.set_message(label.to_string());
            },
        ))?;
        bar.finish_and_clear();

        Ok(Report {
            header: run.header(),
            plan,
            metric: "MNIST-FID".into(),
            reference: format!("{} {} images", reference.source.images, reference.source.dataset),
            models: models.iter().map(ModelInfo::of).collect::<wgdiff::Result<_>>()?,
            arms: results,
        })
    })
}

fn skip_search_run(gpu: &Gpu, args: SkipSearchArgs) -> Result<()> {
    use wgdiff::experiment::skip_search::{Bench, Origin, SearchEvent};
    let mut plan = skip_search::Plan::choose(args.quick);
    plan.samples = args.samples.unwrap_or(plan.samples);
    plan.batch = args.batch.unwrap_or(plan.batch);
    plan.steps = args.steps.unwrap_or(plan.steps);
    plan.budgets = args.budget.clone().unwrap_or(plan.budgets);
    plan.confirmations = args.confirmations.unwrap_or(plan.confirmations);
    plan.seed = args.seed;
    if let Some(name) = &args.sampler {
        plan.sampler = name.parse()?;
    }
    plan.validate()?;
    run_experiment(gpu, &args.out, |run| {
        let model = TrainedModel::load(gpu, &args.model)
            .with_context(|| format!("loading the model to search on, {}", args.model.display()))?;
        let levels = model.net.levels();
        if levels < 2 {
            anyhow::bail!(
                "{} has no levels to skip (a {}); the search needs a U-Net",
                args.model.display(),
                model.state.model.kind_name()
            );
        }
        let MnistFid {
            classifier,
            reference,
            ..
        } = super::mnist_fid(gpu, &args.classifier, "mnist", None, &args.cache)?;
        let bench = Bench {
            sampling: model.sampling(),
            features: &classifier,
            reference: &reference,
        };
        let bar = progress_bar(plan.samples, "images");
        let mut on_event = |event: SearchEvent| {
            match event {
            SearchEvent::Phase(what) => run.bar_line(&bar, what.to_string()),
            SearchEvent::Sampling { what, done, total } => {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
                bar.set_message(what.to_string());
            }
            SearchEvent::Confirmed(a) => run.bar_line(
                &bar,
                format!(
                    "budget {}: proxy budget {:.2e} -> [{}], predicted {:.0} ms per run, MNIST-FID {:.2} ({})",
                    a.budget,
                    a.proxy_budget,
                    wgdiff::diffusion::join_depths(&a.skips),
                    a.predicted_ms,
                    a.fid,
                    if a.accepted { "within budget" } else { "over budget" }
                ),
            ),
            SearchEvent::Batch { done, total, arm } => {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
                bar.set_message(arm.to_string());
            }
        }
        };
        let (fid0, costs, proxy, searched, arms) = block_on(async {
            on_event(SearchEvent::Phase("timing one network call at every skip depth"));
            let probe = bench.request(&plan, Default::default(), None)?;
            let costs =
                skip_search::measure_depth_costs(gpu, bench.sampling, &probe, plan.cost_rounds).await?;
            on_event(SearchEvent::Phase(
                "measuring the proxy (x_0 difference per step and depth)",
            ));
            let proxy = skip_search::measure_proxy(gpu, bench.sampling, &probe).await?;
            let zeros = vec![0; plan.steps];
            let fid0 = bench
                .fid(gpu, &plan, &zeros, "unskipped", &mut on_event)
                .await?
                .fid;
            on_event(SearchEvent::Phase(&format!("unskipped MNIST-FID {fid0:.2}")));
            let searched =
                skip_search::search(gpu, &bench, &plan, (&costs, &proxy), fid0, &mut on_event).await?;
            let arms = skip_search::arms(&plan, levels, &searched);
            on_event(SearchEvent::Phase(&format!(
                "{} arms x {} images in batches of {}, in turn",
                arms.len(),
                plan.samples,
                plan.batch
            )));
            let results = skip_search::compare(gpu, &bench, &plan, &arms, &proxy, &mut on_event).await?;
            Ok::<_, wgdiff::Error>((fid0, costs, proxy, searched, results))
        })?;
        bar.finish_and_clear();
        let header = run.header();
        Ok(wgdiff::experiment::skip_search_report::Report {
            origin: Origin {
                model: args.model.display().to_string(),
                metric: "MNIST-FID".into(),
                fid_unskipped: fid0,
                date: header.date.clone(),
            },
            header,
            plan,
            levels,
            costs_ms: costs,
            proxy,
            searched,
            arms,
        })
    })
}
