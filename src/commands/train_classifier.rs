//! `wgdiff train-classifier`: trains the MNIST classifier (cross-entropy, Adam, random shifts)
//! with a progress bar and per-epoch test accuracy; `--eval` measures a checkpoint's MNIST-FID.

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use wgdiff::classifier::{
    Classifier, ClassifierConfig, ClassifierTrainConfig, ClassifierTrainer, FidChecks, EVAL_BATCH,
    SHIPPED_MNIST_CLASSIFIER,
};
use wgdiff::data::{DataSource, Split};
use wgdiff::gpu::describe;
use wgdiff::Gpu;

/// Seed of the noise images of the MNIST-FID check.
const NOISE_SEED: u64 = 12345;

/// Flags of `wgdiff train-classifier`.
#[derive(Args)]
#[command(after_help = "Examples:\n  \
    wgdiff train-classifier                 # MNIST, 3 epochs, writes runs/classifier/mnist-classifier.safetensors\n  \
    wgdiff train-classifier --eval          # the shipped classifier: test accuracy and both MNIST-FIDs\n\n\
    MNIST-FID is the Fréchet distance between Gaussians fitted to this classifier's 128 penultimate \
    features; it is not the Inception FID and its values are not comparable with FID.")]
pub struct TrainClassifierArgs {
    /// Data: mnist (assets/mnist), mnist:DIR or fashion:DIR (28x28 grey, 10 classes)
    #[arg(long, default_value = "mnist")]
    data: String,
    /// Passes over the training split
    #[arg(long, default_value_t = 3)]
    epochs: usize,
    /// Images per step
    #[arg(long, default_value_t = 128)]
    batch: usize,
    /// Peak Adam learning rate (linear warm-up, then cosine decay to 1% of it)
    #[arg(long, default_value_t = 2e-3)]
    lr: f32,
    /// Warm-up steps
    #[arg(long, default_value_t = 100)]
    warmup: u32,
    /// Decoupled (AdamW) weight decay
    #[arg(long, default_value_t = 0.0)]
    weight_decay: f32,
    /// Largest random shift of a training image in pixels, per axis (0 = no augmentation)
    #[arg(long, default_value_t = 2)]
    shift: usize,
    /// Output channels of the three 3x3 convs (stride 2; stride 1; 2x2 average pool, stride 1)
    #[arg(
        long,
        value_name = "C1,C2,C3",
        value_delimiter = ',',
        default_value = "32,32,64"
    )]
    channels: Vec<usize>,
    /// Width of the penultimate (MNIST-FID feature) layer
    #[arg(long, default_value_t = 128)]
    features: usize,
    /// Seed of the weights, batch order and shifts
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Checkpoint written after every epoch (weights + JSON metadata: config, steps, test accuracy, command)
    #[arg(long, default_value = "runs/classifier/mnist-classifier.safetensors")]
    out: PathBuf,
    /// Images per side of the MNIST-FID checks after training and with --eval (0 = skip them)
    #[arg(long, default_value_t = 10_000)]
    fid_samples: usize,
    /// Train nothing: print this checkpoint's test accuracy and MNIST-FID(train vs test) and
    /// MNIST-FID(train vs Gaussian noise) [default checkpoint: the shipped one]
    #[arg(long, value_name = "CHECKPOINT", num_args = 0..=1, default_missing_value = SHIPPED_MNIST_CLASSIFIER)]
    eval: Option<PathBuf>,
}

/// The command line as typed (stored in the checkpoint).
fn command_line() -> String {
    let args: Vec<String> = std::env::args().collect();
    let mut parts = vec!["wgdiff".to_string()];
    parts.extend(args.into_iter().skip(1));
    parts.join(" ")
}

fn print_fid(checks: &FidChecks) {
    println!(
        "MNIST-FID(train first {n} vs test first {n}) = {:.3}",
        checks.train_vs_test,
        n = checks.samples
    );
    println!(
        "MNIST-FID(train first {n} vs {n} Gaussian-noise images clamped to [-1, 1]) = {:.3}",
        checks.train_vs_noise,
        n = checks.samples
    );
}

fn evaluate(gpu: &Gpu, path: &Path, data: &str, fid_samples: usize) -> Result<()> {
    let net = Classifier::load(gpu, path).with_context(|| {
        if path.as_os_str() == SHIPPED_MNIST_CLASSIFIER {
            "the classifier ships in a wgdiff checkout's assets/models/: run wgdiff there, set WGDIFF_ASSETS to \
             that checkout's assets folder, or pass --eval PATH"
                .to_string()
        } else {
            format!("loading {}", path.display())
        }
    })?;
    let source: DataSource = data.parse()?;
    let (train, test) = (source.load(Split::Train)?, source.load(Split::Test)?);
    eprintln!("device: {}", describe(&gpu.info));
    let started = std::time::Instant::now();
    let accuracy = net.accuracy(&test, None, EVAL_BATCH)?;
    println!(
        "{}: test accuracy {:.2}% on {} {} images ({:.1} s)",
        path.display(),
        100.0 * accuracy,
        test.len(),
        test.name,
        started.elapsed().as_secs_f64()
    );
    if fid_samples > 0 {
        let started = std::time::Instant::now();
        let checks = net.fid_checks(&train, &test, fid_samples, NOISE_SEED)?;
        print_fid(&checks);
        eprintln!("MNIST-FID checks took {:.1} s", started.elapsed().as_secs_f64());
    }
    Ok(())
}

pub fn run(gpu: &Gpu, args: TrainClassifierArgs) -> Result<()> {
    if let Some(path) = &args.eval {
        return evaluate(gpu, path, &args.data, args.fid_samples);
    }
    let [c1, c2, c3] = args.channels[..] else {
        anyhow::bail!(
            "--channels takes three numbers, e.g. 32,32,64; got {:?}",
            args.channels
        );
    };
    let config = ClassifierTrainConfig {
        data: args.data.clone(),
        model: ClassifierConfig {
            channels: [c1, c2, c3],
            features: args.features,
            ..ClassifierConfig::default()
        },
        epochs: args.epochs,
        batch: args.batch,
        lr: args.lr,
        warmup: args.warmup,
        weight_decay: args.weight_decay,
        shift: args.shift,
        seed: args.seed,
    };
    let mut trainer = ClassifierTrainer::new(gpu, config)?;
    let command = command_line();
    let total = trainer.total_steps();
    let per_epoch = trainer.steps_per_epoch();
    eprintln!("device: {}", describe(&gpu.info));
    eprintln!(
        "classifier {:?}: {} parameters, {:.1} MFLOP per image forward; data {} ({} images), test {} \
         ({} images); {} epochs x {} steps of {} images",
        trainer.net.config.channels,
        super::model::thousands(trainer.net.param_count()),
        2.0 * trainer.net.config.macs_per_image() as f64 / 1e6,
        trainer.train_data().name,
        trainer.train_data().len(),
        trainer.test_data().name,
        trainer.test_data().len(),
        args.epochs,
        per_epoch,
        args.batch
    );
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:30} {pos}/{len} steps  {msg}  [{elapsed_precise} < {eta_precise}]",
        )
        .expect("valid template"),
    );
    let started = std::time::Instant::now();
    let (mut loss_avg, mut correct, mut seen) = (None::<f32>, 0usize, 0usize);
    while !trainer.finished() {
        let s = trainer.step()?;
        loss_avg = Some(loss_avg.map_or(s.loss, |a| 0.95 * a + 0.05 * s.loss));
        (correct, seen) = (correct + s.correct, seen + s.batch);
        let step = trainer.step;
        let epoch = step.div_ceil(per_epoch);
        let per_step = started.elapsed().as_secs_f64() / step as f64;
        let status = format!(
            "epoch {epoch}/{}  loss {:.4}  train acc {:.2}%  lr {:.1e}  {:.0} img/s",
            args.epochs,
            loss_avg.unwrap_or(f32::NAN),
            100.0 * correct as f64 / seen.max(1) as f64,
            trainer.current_lr(),
            args.batch as f64 / per_step
        );
        if bar.is_hidden() && (step % 50 == 0 || step == total) {
            eprintln!(
                "step {step}/{total}  {status}  elapsed {:.0} s  eta {:.0} s",
                started.elapsed().as_secs_f64(),
                per_step * (total - step) as f64
            );
        }
        bar.set_message(status);
        bar.set_position(step as u64);
        if step % per_epoch == 0 {
            let accuracy = bar.suspend(|| trainer.evaluate())?;
            let line = format!(
                "epoch {epoch}: test accuracy {:.2}% ({} images); {:.0} s of training",
                100.0 * accuracy,
                trainer.test_data().len(),
                trainer.train_seconds
            );
            bar.println(&line);
            if bar.is_hidden() {
                eprintln!("{line}");
            }
            pollster::block_on(
                trainer
                    .net
                    .save(&args.out, trainer.record(&command, serde_json::json!({}))),
            )
            .with_context(|| format!("writing {}", args.out.display()))?;
            (correct, seen) = (0, 0);
        }
    }
    bar.finish();
    if args.fid_samples > 0 {
        let checks = trainer.net.fid_checks(
            trainer.train_data(),
            trainer.test_data(),
            args.fid_samples,
            NOISE_SEED,
        )?;
        print_fid(&checks);
        pollster::block_on(trainer.net.save(
            &args.out,
            trainer.record(&command, serde_json::json!({ "mnist_fid": checks })),
        ))?;
    }
    println!(
        "checkpoint: {} (test accuracy {:.2}%, {} steps, {:.0} s of training)",
        args.out.display(),
        100.0 * trainer.epochs.last().map_or(f64::NAN, |e| e.test_accuracy),
        trainer.step,
        trainer.train_seconds
    );
    Ok(())
}
