//! `wgdiff experiment adaptive-skip`: the technion seed's Tables 1-3 on MNIST, from the shipped
//! (or freshly fine-tuned) skip-trained models to Markdown tables, JSON and PNG plots.

use super::eval::{cached_reference, DEFAULT_STATS_CACHE};
use super::progress_bar;
use super::sample::DEFAULT_CHECKPOINT;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::time::Instant;
use wgdiff::classifier::{Classifier, SHIPPED_MNIST_CLASSIFIER};
use wgdiff::data::{DataSource, Split};
use wgdiff::eval::ReferenceImages;
use wgdiff::experiment::adaptive_skip::{self, Plan, SkipModel, EXPONENTS};
use wgdiff::experiment::plots::{self, Series};
use wgdiff::experiment::report::{ModelInfo, Report, BASELINE_LABEL};
use wgdiff::gpu::describe;
use wgdiff::models::SkipType;
use wgdiff::train::{SkipTraining, TrainConfig, TrainedModel, Trainer};
use wgdiff::Gpu;

/// `wgdiff experiment ...`
#[derive(Subcommand)]
pub enum ExperimentCommand {
    /// The adaptive U-Net (technion seed): MNIST-FID and sampling speed-up of skip-trained
    /// models per skip type and exponent c, the untrained-for-skips baseline, and DDIM
    AdaptiveSkip(AdaptiveSkipArgs),
}

/// Flags of `wgdiff experiment adaptive-skip`.
#[derive(Args)]
#[command(after_help = "Examples:\n  \
    wgdiff experiment adaptive-skip --quick     # lavapipe: < 20 min with the models in assets/models\n  \
    wgdiff experiment adaptive-skip             # real GPU: 2,000 samples per arm, 100 DDPM steps\n\n\
Models: the baseline (trained without skipping) and, in --models, <baseline>-skip-zero,\n\
-skip-duplicate, -skip-interpolate (k-consistent training, c = 2) and -skip-zero-uniform\n\
(uniform-k training); a missing one is fine-tuned from the baseline (wgdiff train --init\n\
BASELINE --skip-type T --skip-training consistent:2|uniform --steps N --batch 32 --warmup 20)\n\
and saved there. Writes adaptive-skip.md, adaptive-skip.json, fid-vs-speedup.png and\n\
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

/// The skip-trained models: (row label, skip type, training scheme, file suffix).
const SKIP_MODELS: [(&str, SkipType, SkipTraining, &str); 4] = [
    ("Zero", SkipType::Zero, CONSISTENT, "skip-zero"),
    ("Duplicate", SkipType::Duplicate, CONSISTENT, "skip-duplicate"),
    (
        "Interpolate",
        SkipType::Interpolate,
        CONSISTENT,
        "skip-interpolate",
    ),
    (
        "Zero (uniform k)",
        SkipType::Zero,
        SkipTraining::Uniform,
        "skip-zero-uniform",
    ),
];
const CONSISTENT: SkipTraining = SkipTraining::Consistent { exponent: 2.0 };

pub fn run(gpu: &Gpu, command: ExperimentCommand) -> Result<()> {
    match command {
        ExperimentCommand::AdaptiveSkip(args) => adaptive_skip_run(gpu, args),
    }
}

fn adaptive_skip_run(gpu: &Gpu, args: AdaptiveSkipArgs) -> Result<()> {
    let started = Instant::now();
    let mut plan = if args.quick { Plan::quick() } else { Plan::full() };
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
    eprintln!("device: {}", describe(&gpu.info));

    let mut models = vec![SkipModel {
        label: BASELINE_LABEL.into(),
        path: args.baseline.display().to_string(),
        model: TrainedModel::load(gpu, &args.baseline)
            .with_context(|| format!("loading the baseline {}", args.baseline.display()))?,
    }];
    let stem = args
        .baseline
        .file_stem()
        .map_or("model".into(), |s| s.to_string_lossy().to_string());
    for (label, skip_type, scheme, suffix) in SKIP_MODELS {
        let path = models_dir.join(format!("{stem}-{suffix}.safetensors"));
        if !path.exists() {
            fine_tune(gpu, &args.baseline, skip_type, scheme, train_steps, &path)?;
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

    let classifier = Classifier::load(gpu, &args.classifier).with_context(|| {
        format!(
            "loading the MNIST-FID classifier {} (train one with `wgdiff train-classifier`)",
            args.classifier.display()
        )
    })?;
    let data = "mnist"
        .parse::<DataSource>()?
        .load(Split::Test)
        .context("the MNIST test split is the reference of MNIST-FID")?;
    let images = ReferenceImages {
        data: &data,
        split: Split::Test,
        limit: None,
    };
    let (reference, cached) = cached_reference(gpu, &classifier, images, 250, &args.cache)?;
    eprintln!(
        "reference: {} {} images ({})",
        reference.source.images,
        reference.source.dataset,
        if cached { "cached" } else { "computed and cached" }
    );

    let arms = adaptive_skip::arms(&models, &plan);
    eprintln!(
        "{} arms x {} samples in batches of {} (round-robin, so every arm sees the same machine load)",
        arms.len(),
        plan.samples,
        plan.batch
    );
    let bar = progress_bar(arms.len() * plan.samples.div_ceil(plan.batch), "batches");
    let results = adaptive_skip::run(
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
    )?;
    bar.finish_and_clear();

    let report = Report {
        date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        device: describe(&gpu.info),
        plan,
        metric: "MNIST-FID".into(),
        reference: format!("{} {} images", reference.source.images, reference.source.dataset),
        models: models.iter().map(model_info).collect::<Result<_>>()?,
        arms: results,
        wall_seconds: started.elapsed().as_secs_f64(),
    };
    write_outputs(&args.out, &report, models[0].levels())?;
    println!("{}", report.markdown());
    Ok(())
}

/// Fine-tunes the baseline for `skip_type` with `scheme` and saves the checkpoint to `path`.
fn fine_tune(
    gpu: &Gpu,
    baseline: &Path,
    skip_type: SkipType,
    scheme: SkipTraining,
    steps: usize,
    path: &Path,
) -> Result<()> {
    eprintln!(
        "{} is missing: fine-tuning {} for skip type {skip_type} with {scheme:?} training ({steps} steps)",
        path.display(),
        baseline.display()
    );
    let config = TrainConfig {
        init: Some(baseline.to_path_buf()),
        skip_type: Some(skip_type),
        skip_training: Some(scheme),
        steps,
        batch: 32,
        warmup: 20,
        checkpoint_every: 0,
        max_minutes: 0.0,
        out: path.with_extension("run"),
        ..TrainConfig::default()
    };
    let mut trainer = Trainer::new(gpu, config)?;
    let bar = progress_bar(steps, "fine-tuning steps");
    while !trainer.finished() {
        let loss = trainer.step()?;
        bar.inc(1);
        bar.set_message(format!("loss {loss:.4}"));
    }
    bar.finish_and_clear();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    trainer.save(path)?;
    Ok(())
}

fn model_info(m: &SkipModel) -> Result<ModelInfo> {
    Ok(ModelInfo {
        label: m.label.clone(),
        path: m.path.clone(),
        skip_type: m.skip_type()?.to_string(),
        skip_training: match m.skip_training() {
            None => "none".into(),
            Some(SkipTraining::Uniform) => "uniform".into(),
            Some(SkipTraining::Consistent { exponent }) => format!("consistent:{exponent}"),
        },
        levels: m.levels(),
        train_steps: m.model.state.step,
    })
}

/// Writes the Markdown, the JSON and both plots into `out`.
fn write_outputs(out: &Path, report: &Report, levels: usize) -> Result<()> {
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create the output folder {}", out.display()))?;
    let write = |name: &str, bytes: &[u8]| -> Result<()> {
        wgdiff::checkpoint::write_atomic(&out.join(name), bytes)?;
        Ok(())
    };
    write("adaptive-skip.md", report.markdown().as_bytes())?;
    write(
        "adaptive-skip.json",
        serde_json::to_string_pretty(report)?.as_bytes(),
    )?;
    let series: Vec<Series> = report
        .models
        .iter()
        .map(|m| Series {
            name: m.label.clone(),
            points: report
                .arms
                .iter()
                .filter(|a| a.model == m.label && a.eta.is_none() && a.steps == report.plan.steps)
                .filter_map(|a| Some((a.speedup_percent?, a.scores.fid, format!("c={}", a.exponent))))
                .collect(),
        })
        .collect();
    let subtitle = format!(
        "{} samples, DDPM {} steps",
        report.plan.samples, report.plan.steps
    );
    plots::metric_vs_speedup(
        &out.join("fid-vs-speedup.png"),
        &report.metric,
        &subtitle,
        &series,
    )?;
    let nonzero: Vec<f32> = EXPONENTS.into_iter().filter(|&c| c > 0.0).collect();
    plots::skip_schedules(&out.join("skip-schedules.png"), levels, &nonzero)?;
    eprintln!(
        "wrote {0}/adaptive-skip.md, {0}/adaptive-skip.json, {0}/fid-vs-speedup.png, {0}/skip-schedules.png",
        out.display()
    );
    Ok(())
}
