//! `wgdiff train`: trains a diffusion model (defaults: the speed-run MLP on assets/mnist) with a
//! progress bar, periodic sample grids and atomic checkpoints; `--resume` continues exactly.

use super::distributed::{eprint_line, Distributed, Job};
use super::Interrupted;
use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use pollster::block_on;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use wgdiff::diffusion::{BetaSchedule, Objective, TimeSampling};
use wgdiff::fsio::Folder;
use wgdiff::gpu::describe;
use wgdiff::gpu::DeviceSet;
use wgdiff::models::SkipType;
use wgdiff::nn::ConvGroups;
use wgdiff::ops::WeightBits;
use wgdiff::run_state::{best_fid, FidRecord};
use wgdiff::train::run::FINAL_GRID_FILE;
use wgdiff::train::run_dir::{run_folder, OutRequest};
use wgdiff::train::{
    distill_round, Optimizer, Precision, ResumeChanges, RunEnd, SkipTraining, StepLog, TrainConfig,
    TrainEvent, Trainer, TrainingRun, KEPT_ON_RESUME,
};
use wgdiff::AdapterChoice;

/// Flags of `wgdiff train`; each overrides the config file, which overrides the defaults.
#[derive(Args)]
pub struct TrainArgs {
    /// TOML file with any of the settings below (flags given here win)
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Continue the run saved in this checkpoint with its settings; --steps, --lr, --lr-decay,
    /// --warmup, --max-grad-norm, --max-minutes, --out, --checkpoint-every, --sample-every, --grid-images
    /// and --grid-steps may change (e.g. a lower --lr after divergence); other flags are refused
    #[arg(long, value_name = "CHECKPOINT")]
    resume: Option<PathBuf>,
    /// Fine-tune: start from the EMA weights of this checkpoint, with its model (--preset is
    /// ignored); steps, optimiser, EMA warm-up and data order start afresh
    #[arg(long, value_name = "CHECKPOINT", conflicts_with = "resume")]
    init: Option<PathBuf>,
    /// Model preset: mnist-mlp (default), mnist, mnist-small, tiny, cifar10, ncsn-mnist (see `wgdiff model`)
    #[arg(long)]
    preset: Option<String>,
    /// What the network predicts: eps, x0 or v (U-Nets and MLPs) [default: the model's: v for
    /// mnist-mlp, eps for U-Nets; with --init the checkpoint's; with --distill v]
    #[arg(long)]
    objective: Option<Objective>,
    /// Noise schedule: linear (DDPM's 1e-4..0.02), cosine or sigmoid (U-Nets and MLPs)
    /// [default: the model's: cosine for mnist-mlp, linear for U-Nets; with --init or --distill
    /// the checkpoint's]
    #[arg(long)]
    schedule: Option<BetaSchedule>,
    /// Data: mnist (assets/mnist), mnist:DIR, fashion:DIR, cifar10:DIR or folder:DIR
    #[arg(long)]
    data: Option<String>,
    /// Total optimiser steps [default: 10000; on a CPU device --max-minutes ends the run first]
    #[arg(long)]
    steps: Option<usize>,
    /// Passes over the data (sets the step count from the dataset size)
    #[arg(long, conflicts_with = "steps")]
    epochs: Option<usize>,
    /// Images per step [default: 128]
    #[arg(long)]
    batch: Option<usize>,
    /// Adam learning rate [default: 4e-3]
    #[arg(long)]
    lr: Option<f32>,
    /// Linear learning-rate warm-up steps [default: 50]
    #[arg(long)]
    warmup: Option<u32>,
    /// Decay the learning rate linearly to 0 over this share of the run at its end (its
    /// --steps or --max-minutes, whichever ends it first); 0 = no decay [default: 0.3]
    #[arg(long, value_name = "SHARE")]
    lr_decay: Option<f32>,
    /// Clip the global gradient norm (0 = off) [default: 1]
    #[arg(long)]
    max_grad_norm: Option<f32>,
    /// EMA decay of the sampling weights [default: 0.99]
    #[arg(long)]
    ema_decay: Option<f32>,
    /// Seed of weights, batches, timesteps and noise [default: 0]
    #[arg(long)]
    seed: Option<u64>,
    /// Output folder for checkpoint.safetensors, config.json and sample grids [default: runs/mnist,
    /// or runs/mnist-2, -3, ... when it holds an earlier run]
    #[arg(long)]
    out: Option<PathBuf>,
    /// Overwrite the run already in --out (without it, a folder holding another run's
    /// checkpoint is refused)
    #[arg(long)]
    force: bool,
    /// Write a sample grid every N steps (0 = only at the end) [default: 0]
    #[arg(long)]
    sample_every: Option<usize>,
    /// Write a checkpoint every N steps (0 = only at the end) [default: 200]
    #[arg(long)]
    checkpoint_every: Option<usize>,
    /// Images per sample grid [default: 16]
    #[arg(long)]
    grid_images: Option<usize>,
    /// Sampler steps for the grids [default: 50]
    #[arg(long)]
    grid_steps: Option<usize>,
    /// Score MNIST-FID of the EMA weights every N steps (shipped classifier vs the data's test
    /// split, reference cached in runs/stats-cache), keep the best in best.safetensors; 0 = off;
    /// 1-channel 28x28 models only [default: 0]
    #[arg(long, value_name = "N")]
    fid_every: Option<usize>,
    /// Live MNIST-FID when --fid-every is 0 and the run trains on MNIST with a 1-channel 28x28
    /// model: score the EMA weights (and write a grid beside it) as often as keeps that work at
    /// this share of the run's time, keep the best in best.safetensors; 0 = off [default: 0.1]
    #[arg(long, value_name = "SHARE")]
    fid_share: Option<f32>,
    /// Images sampled for each MNIST-FID evaluation [default: 256]
    #[arg(long)]
    fid_samples: Option<usize>,
    /// Sampler steps (default sampler, fixed seed) of the MNIST-FID samples [default: 20]
    #[arg(long)]
    fid_steps: Option<usize>,
    /// Randomly flip training images horizontally
    #[arg(long)]
    flip: bool,
    /// Drop class labels with this probability (classifier-free guidance; conditional models)
    #[arg(long)]
    class_dropout: Option<f32>,
    /// Min-SNR-gamma loss weighting (e.g. 5)
    #[arg(long)]
    min_snr_gamma: Option<f32>,
    /// How training draws its network times: `uniform`, `logit-normal` (mean 0, std 1) or
    /// `logit-normal:MEAN,STD` (normalised time sigmoid(MEAN + STD n), n ~ N(0, 1): more steps
    /// at the middle noise levels; VP processes) [default: logit-normal for the MLP, uniform for
    /// the U-Nets and ScoreNet]
    #[arg(long, value_parser = parse_time_sampling, value_name = "DIST")]
    time_sampling: Option<TimeSampling>,
    /// Train the adaptive U-Net to skip its deepest levels: `uniform` (k uniform in 0..N-1 per
    /// batch) or `consistent:C` (each batch's timesteps share one k(t) of the schedule
    /// k(t) = min(N-1, floor(N - N(1-t)^C)) and skip it; sample with `--skip-exponent C`)
    #[arg(long, value_parser = parse_skip_training)]
    skip_training: Option<SkipTraining>,
    /// What the U-Net's first active up level gets in place of skipped levels: zero,
    /// duplicate or interpolate (adds 1x1 convs to and from the middle block per level;
    /// with --init they start fresh) [default: the preset's or --init's, zero]
    #[arg(long)]
    skip_type: Option<SkipType>,
    /// Train with grouped convolutions: G channel groups (at most; the largest count dividing
    /// both channel counts) or max (depthwise where the channels allow) in the U-Net's 3x3 and
    /// the ScoreNet's convs, as the umass report's "depthwise" rows [default: the preset's, 1]
    #[arg(long, value_name = "G|max")]
    conv_groups: Option<ConvGroups>,
    /// Stop after this many minutes of training (checkpoints, FID evaluations and a fresh
    /// device's kernel measuring not counted) even if steps remain; 0 = no limit [default: 5]
    #[arg(long)]
    max_minutes: Option<f32>,
    /// Precision of the network's forward and backward: f32 or f16 (mixed precision) [default: f32]
    ///
    /// f16 runs the network's activations and gradients in f16 (half the memory traffic);
    /// weights, Adam moments and EMA stay f32 (each layer casts its weights at use). The loss is
    /// multiplied by a scale (2^15 at first, doubled after 1000 steps without overflow) so small
    /// gradients survive f16; gradients are divided by it before clipping and Adam. A step whose
    /// gradients overflow (inf/NaN) is skipped, changing no weights, and the scale halves; the
    /// progress line shows the scale and skipped steps. On adapters without SHADER_F16 it still
    /// runs, with a warning: ops compute in f32 and cast back.
    #[arg(long)]
    precision: Option<Precision>,
    /// Optimizer: adam (AdamW, f32 moments) or adam8bit (AdamW with 8-bit moments) [default: adam]
    ///
    /// adam8bit keeps m and v as one byte each per parameter, in blocks of 256 that share an f32
    /// scale (the block's largest value) and store a sign and an exponent step of 2^(1/8) per
    /// byte, rounded stochastically: about a quarter of adam's optimizer memory (the startup line
    /// prints both). Checkpoints hold the moments decoded to f32, so either optimizer can
    /// start from (--init) a checkpoint of the other.
    #[arg(long)]
    optimizer: Option<Optimizer>,
    /// Quantisation-aware fine-tuning for int8 or int4 weights: every step's forward and
    /// backward use the conv and linear weights rounded as `wgdiff compress --quantize BITS
    /// --per-channel` stores them, and the gradient updates the float weights (the
    /// straight-through estimator). Start from the model with --init (a float or compressed
    /// checkpoint), then compress the result: `wgdiff train --init int4.safetensors --qat int4
    /// --lr 1e-4 --steps 2000 --out runs/qat` then `wgdiff compress --checkpoint
    /// runs/qat/checkpoint.safetensors --quantize int4 --per-channel --out qat-int4.safetensors`
    #[arg(long, value_name = "BITS")]
    qat: Option<WeightBits>,
    /// Progressive distillation (Salimans & Ho 2022): train a student, starting from this
    /// teacher's weights, to take in one deterministic DDIM step what the teacher takes in two,
    /// on the trailing grid; the student predicts v (unless --objective says otherwise) and its
    /// checkpoint samples with DDIM at its own steps by default. Each round halves the steps,
    /// the last round's student teaching the next: `wgdiff train --distill
    /// assets/models/mnist-small.safetensors --distill-steps 8 --steps 2000 --out runs/pd8`, then
    /// `wgdiff train --distill runs/pd8/checkpoint.safetensors --steps 2000 --out runs/pd4`
    #[arg(long, value_name = "TEACHER")]
    distill: Option<PathBuf>,
    /// The student's sampling steps [default: half a distilled teacher's, else 32: the
    /// teacher's DDIM on 64 steps teaches]
    #[arg(long, value_name = "N", requires = "distill")]
    distill_steps: Option<usize>,
    /// Devices of this process, one replica of the network each: 1, a count N (several logical
    /// devices on one GPU when it has fewer than N), all (every GPU), or comma-separated parts
    /// of adapter names (`wgdiff info` lists them). Each replica trains on its share of every
    /// --batch and the gradients are averaged each step, so N devices follow the one-device
    /// run of the same --batch (up to float summation order); EMA, grids and checkpoints come
    /// from the first
    #[arg(long, default_value = "1", value_name = "all|N|NAME,NAME")]
    devices: DeviceSet,
    /// Train as one process of an MPI job: start it with `mpirun -n P wgdiff train
    /// --distributed mpi ...` (a build with `--features mpi`). --batch is the global batch
    /// over every process and device, each rank trains on its share (no two ranks see the same
    /// image in an epoch), gradients are all-reduced each step, rank 0 writes the checkpoint,
    /// grids and log; every rank resumes from the same --resume checkpoint, which may come
    /// from a run on any number of processes
    #[arg(long, value_enum)]
    distributed: Option<Distributed>,
    /// Write every step's loss, its seconds and the run's elapsed seconds to this CSV when the
    /// run ends (`wgdiff bench app` compares it with the app's)
    #[arg(long, value_name = "CSV")]
    step_log: Option<PathBuf>,
}

fn parse_skip_training(text: &str) -> std::result::Result<SkipTraining, String> {
    SkipTraining::parse(text).map_err(|e| e.to_string())
}

fn parse_time_sampling(text: &str) -> std::result::Result<TimeSampling, String> {
    TimeSampling::parse(text).map_err(|e| e.to_string())
}

impl TrainArgs {
    /// What `--resume` changes: the flags a resumed run may take.
    fn resume_changes(&self) -> ResumeChanges {
        ResumeChanges {
            steps: self.steps,
            lr: self.lr,
            warmup: self.warmup,
            lr_decay: self.lr_decay,
            max_grad_norm: self.max_grad_norm,
            max_minutes: self.max_minutes,
            out: self.out.clone(),
            checkpoint_every: self.checkpoint_every,
            sample_every: self.sample_every,
            grid_images: self.grid_images,
            grid_steps: self.grid_steps,
        }
    }

    /// Errors naming the first flag given with `--resume` that a resumed run cannot change.
    fn check_resume_flags(&self) -> Result<()> {
        let given = [
            ("--config", self.config.is_some()),
            ("--preset", self.preset.is_some()),
            ("--objective", self.objective.is_some()),
            ("--schedule", self.schedule.is_some()),
            ("--data", self.data.is_some()),
            ("--epochs", self.epochs.is_some()),
            ("--batch", self.batch.is_some()),
            ("--ema-decay", self.ema_decay.is_some()),
            ("--seed", self.seed.is_some()),
            ("--flip", self.flip),
            ("--class-dropout", self.class_dropout.is_some()),
            ("--min-snr-gamma", self.min_snr_gamma.is_some()),
            ("--time-sampling", self.time_sampling.is_some()),
            ("--skip-training", self.skip_training.is_some()),
            ("--skip-type", self.skip_type.is_some()),
            ("--conv-groups", self.conv_groups.is_some()),
            ("--precision", self.precision.is_some()),
            ("--optimizer", self.optimizer.is_some()),
            ("--qat", self.qat.is_some()),
            ("--distill", self.distill.is_some()),
            ("--distill-steps", self.distill_steps.is_some()),
            ("--fid-every", self.fid_every.is_some()),
            ("--fid-share", self.fid_share.is_some()),
            ("--fid-samples", self.fid_samples.is_some()),
            ("--fid-steps", self.fid_steps.is_some()),
        ];
        match given.iter().find(|(_, is_given)| *is_given) {
            Some((flag, _)) => anyhow::bail!(
                "{flag} cannot change when resuming: a resumed run continues with the checkpoint's {KEPT_ON_RESUME}; \
                 leave {flag} out, or start a new run from the checkpoint's weights with --init CHECKPOINT"
            ),
            None => Ok(()),
        }
    }

    /// The run's settings: defaults, then the config file, then these flags.
    fn config(&self) -> Result<TrainConfig> {
        let mut c = match &self.config {
            Some(path) => TrainConfig::from_toml_file(path)?,
            None => TrainConfig::default(),
        };
        macro_rules! set {
            ($($field:ident),*) => { $( if let Some(v) = &self.$field { c.$field = v.clone(); } )* };
        }
        set!(
            preset,
            data,
            steps,
            batch,
            lr,
            warmup,
            lr_decay,
            max_grad_norm,
            ema_decay,
            seed,
            out
        );
        set!(
            sample_every,
            checkpoint_every,
            grid_images,
            grid_steps,
            max_minutes,
            precision,
            optimizer
        );
        set!(fid_every, fid_share, fid_samples, fid_steps);
        if self.epochs.is_some() {
            c.epochs = self.epochs;
        }
        if self.objective.is_some() {
            c.objective = self.objective;
        }
        if self.schedule.is_some() {
            c.schedule = self.schedule;
        }
        if self.flip {
            c.flip = true;
        }
        if self.class_dropout.is_some() {
            c.class_dropout = self.class_dropout;
        }
        if self.min_snr_gamma.is_some() {
            c.min_snr_gamma = self.min_snr_gamma;
        }
        if self.time_sampling.is_some() {
            c.time_sampling = self.time_sampling;
        }
        if self.skip_training.is_some() {
            c.skip_training = self.skip_training;
        }
        if self.skip_type.is_some() {
            c.skip_type = self.skip_type;
        }
        if self.init.is_some() {
            c.init = self.init.clone();
        }
        if self.qat.is_some() {
            c.qat = self.qat;
        }
        if let Some(teacher) = &self.distill {
            c.distill = Some(distill_round(teacher, self.distill_steps)?);
        }
        if let Some(groups) = self.conv_groups {
            if c.init.is_some() {
                anyhow::bail!(
                    "--conv-groups changes the weights' shapes; it cannot fine-tune an --init checkpoint"
                );
            }
            c.model = Some(c.model_config()?.with_conv_groups(groups)?);
        }
        Ok(c)
    }
}

/// When the first Ctrl-C or SIGTERM came (milliseconds since the Unix epoch; 0: none yet):
/// the loop then writes a checkpoint after the current step and exits.
static STOP_REQUESTED_AT: AtomicU64 = AtomicU64::new(0);

/// Set once the run's last checkpoint is written: a signal then ends the final grid at once
/// (nothing is lost) with the saved stop's status.
static LAST_CHECKPOINT_WRITTEN: AtomicBool = AtomicBool::new(false);

/// Signals within this long of the first are the same request (a double press of Ctrl-C).
const SAME_REQUEST_MS: u64 = 2000;

/// Makes Ctrl-C and SIGTERM request a stop; a repeat within [`SAME_REQUEST_MS`] is the same
/// request, a later one ends the process at once without a checkpoint (exit status 1, not the
/// saved stop's 130) and says so.
fn stop_on_signals() -> Result<()> {
    ctrlc::set_handler(|| {
        if LAST_CHECKPOINT_WRITTEN.load(Ordering::SeqCst) {
            eprintln!("\nstopped by a signal during the final sample grid; the run's checkpoint was written before it");
            std::process::exit(130);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_millis() as u64);
        match STOP_REQUESTED_AT.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => {}
            Err(first) if now.saturating_sub(first) < SAME_REQUEST_MS => {}
            Err(_) => {
                eprintln!(
                    "\nerror: a second Ctrl-C/SIGTERM ended training at once: no checkpoint was written for the \
                     steps since the last one (one signal stops after the current step and writes it)"
                );
                std::process::exit(1);
            }
        }
    })
    .context("cannot install the Ctrl-C/SIGTERM handler")
}

/// Runs (or resumes) training to the configured step count, then writes the final grid and
/// checkpoint, on the devices of `--devices` and, with `--distributed mpi`, as one process
/// of an MPI job (rank 0 writes; a failing rank ends the job naming itself). Ctrl-C or
/// SIGTERM writes the checkpoint after the current step and returns [`Interrupted`].
pub fn run(choice: AdapterChoice, args: TrainArgs) -> Result<()> {
    let job = Job::join(args.distributed)?;
    let result = train(choice, args, &job);
    job.finish(result)
}

fn train(choice: AdapterChoice, args: TrainArgs, job: &Job) -> Result<()> {
    stop_on_signals()?;
    if let Some(path) = &args.step_log {
        // (before any training: a log replaces only an earlier log)
        wgdiff::fsio::check_replaceable(path, wgdiff::train::StepLog::CSV_HEADER.as_bytes(), "a step log")
            .context("--step-log")?;
    }
    let (rank, ranks) = job.place();
    if let (None, Some(devices)) = (&args.resume, args.devices.count()) {
        // (before any device is opened: every replica needs an image of the batch)
        wgdiff::distributed::replica_rows(args.config()?.batch, rank, ranks, devices)?;
    }
    let gpus = super::open_gpus(choice, &args.devices)?;
    let gpu = &gpus[0];
    let leader = rank == 0;
    // Only rank 0 of a multi-process job prints; the others report only their errors.
    macro_rules! say {
        ($($arg:tt)*) => { if leader { eprintln!($($arg)*) } };
    }
    let mut trainer = match &args.resume {
        Some(path) => {
            args.check_resume_flags()?;
            let trainer = Trainer::resume(gpu, path, &args.resume_changes())?;
            let changed = match trainer.resume_changes.as_slice() {
                [] => "nothing".to_string(),
                lines => lines.join(", "),
            };
            say!(
                "resuming {} at step {}: from the checkpoint: {KEPT_ON_RESUME}, the weights, optimiser, EMA \
                 and data order; from flags: {changed}",
                path.display(),
                trainer.state.step
            );
            trainer
        }
        None => Trainer::new(gpu, args.config()?)?,
    };
    let collective = job.collective();
    if gpus.len() > 1 || collective.is_some() {
        block_on(trainer.distribute(&gpus[1..], collective))?;
    }
    if let Some(me) = job.describe() {
        let devices: Vec<String> = gpus.iter().map(|g| describe(&g.info)).collect();
        eprint_line(&format!("{me}: {}", devices.join(", ")));
    }
    if leader {
        let requested = trainer.state.config.out.clone();
        let how = match (&args.resume, &args.out) {
            (None, None) if requested == TrainConfig::default().out => OutRequest::Default,
            _ => OutRequest::Chosen { force: args.force },
        };
        let folder = run_folder(&requested, how, args.resume.as_deref())?;
        if folder != requested {
            eprintln!(
                "{} holds an earlier run; this one writes to {} (--out DIR chooses, --force overwrites)",
                requested.display(),
                folder.display()
            );
            trainer.state.config.out = folder;
        }
    }
    let c = trainer.state.config.clone();
    let params: usize = trainer.net().named_params().iter().map(|(_, t)| t.numel()).sum();
    say!(
        "device: {}{}",
        describe(&gpu.info),
        match trainer.replica_count() {
            1 => String::new(),
            n => format!(
                " (+{} more replicas: {n} in all, each on its share of the batch)",
                n - 1
            ),
        }
    );
    if let Some(warning) = c.precision.fallback_warning(gpu) {
        say!("{warning}");
    }
    let model_name = match (&c.init, &c.model) {
        (Some(init), _) => format!("fine-tuning {}", init.display()),
        (None, Some(_)) => "custom".to_string(),
        (None, None) => c.preset.clone(),
    };
    say!(
        "model: {model_name} ({} parameters), process {} ({}), data {} ({} images), batch {}, steps {}..{}, {}",
        super::model::thousands(params),
        trainer.state.process.name(),
        c.times_description(),
        trainer.dataset().name,
        trainer.dataset().len(),
        c.batch,
        trainer.state.step,
        c.steps,
        c.precision
    );
    let state = trainer.optimizer_state_bytes();
    let f32_state = 8 * params as u64;
    say!(
        "optimizer: {}, state {:.1} MiB ({:.0}% of f32 Adam's {:.1} MiB)",
        c.optimizer,
        state as f64 / (1 << 20) as f64,
        100.0 * state as f64 / f32_state as f64,
        f32_state as f64 / (1 << 20) as f64
    );
    if let Some(bits) = c.qat {
        say!(
            "quantisation-aware: {} conv and linear weights run rounded to {} (a scale per output channel) \
             in every step; compress the result with --quantize {} --per-channel",
            trainer.rounded_params(),
            bits.name(),
            bits.name()
        );
    }
    let fid = match trainer.scores_mnist_fid() {
        true => Some(
            wgdiff::classifier::MnistFid::shipped_files(gpu)
                .context("scoring MNIST-FID during training (or train without it: --fid-share 0)")?
                .into(),
        ),
        false => None,
    };
    let mut run = TrainingRun::new(trainer, fid, Box::new(Folder(c.out.clone())))?;
    let bar = match leader {
        true => ProgressBar::new(c.steps as u64),
        false => ProgressBar::hidden(),
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:30} {pos}/{len} steps  {msg}  [{elapsed_precise} < {eta_precise}]",
        )
        .expect("valid template"),
    );
    // one line per event where the bar cannot show (a log file)
    let line = |text: String| match bar.is_hidden() {
        true => say!("{text}"),
        false => bar.println(text),
    };
    let started = std::time::Instant::now();
    let mut first_step = 0;
    let mut best = best_fid(&run.trainer().state.fid);
    let mut end = None;
    let mut show_event = |event: TrainEvent| match event {
        TrainEvent::Started {
            first_step: first, ..
        } => {
            first_step = first;
            bar.set_position(first as u64);
        }
        TrainEvent::Step {
            step,
            loss,
            all_reduce_seconds,
            scaler,
            ..
        } => {
            let per_step = started.elapsed().as_secs_f64() / (step - first_step) as f64;
            let mut status = format!(
                "loss {loss:.4}  {:.2} it/s  {:.1} img/s",
                1.0 / per_step,
                c.batch as f64 / per_step
            );
            if let Some(seconds) = all_reduce_seconds {
                status += &format!("  all-reduce {:.0}%", 100.0 * seconds / per_step);
            }
            if let Some(b) = best {
                status += &format!(
                    "  best live MNIST-FID {:.2} @ step {} ({} samples)",
                    b.fid, b.step, c.fid_samples
                );
            }
            if let Some(scaler) = scaler {
                status += &format!("  loss scale {}", scaler.scale);
                if scaler.skipped > 0 {
                    status += &format!(" ({} overflow steps skipped)", scaler.skipped);
                }
            }
            if bar.is_hidden() {
                // not a terminal (a log file): one line per step instead of the bar
                let eta = per_step * (c.steps - step) as f64;
                say!(
                    "step {step}/{}  {status}  elapsed {:.0} s  eta {eta:.0} s",
                    c.steps,
                    started.elapsed().as_secs_f64()
                );
            }
            bar.set_message(status);
            bar.set_position(step as u64);
        }
        TrainEvent::Fid { record, best: file } => {
            if best.is_none_or(|b: FidRecord| record.fid < b.fid) && record.fid.is_finite() {
                best = Some(record);
            }
            line(format!(
                "step {}: MNIST-FID {:.2} ({} samples, {} sampler steps){}",
                record.step,
                record.fid,
                c.fid_samples,
                c.sampling_steps(c.fid_steps),
                file.map(|file| format!(", the best so far: {file}"))
                    .unwrap_or_default()
            ))
        }
        TrainEvent::Grid { file, seconds, .. } if file.ends_with(FINAL_GRID_FILE) => eprintln!(
            "sample grid: {file} ({} images, {} sampler steps, {seconds:.1} s)",
            c.grid_images,
            c.sampling_steps(c.grid_steps)
        ),
        TrainEvent::Checkpoint { last: true, .. } => {
            LAST_CHECKPOINT_WRITTEN.store(true, Ordering::SeqCst);
            if c.grid_images > 0 && STOP_REQUESTED_AT.load(Ordering::SeqCst) == 0 {
                line(format!(
                    "sampling the final grid ({} images, {} sampler steps; the checkpoint is written, Ctrl-C skips the grid)",
                    c.grid_images,
                    c.sampling_steps(c.grid_steps)
                ));
            }
        }
        TrainEvent::Grid { .. } | TrainEvent::Checkpoint { .. } | TrainEvent::Diverged { .. } => {}
        TrainEvent::Ended {
            step,
            why,
            checkpoint,
        } => {
            end = Some(why);
            match why {
                RunEnd::Completed => {
                    bar.finish();
                    say!("checkpoint: {checkpoint}");
                }
                RunEnd::OutOfTime => {
                    let message = format!(
                        "time budget of {} min reached at step {step}; `wgdiff train --resume {checkpoint}` continues",
                        c.max_minutes
                    );
                    if bar.is_hidden() {
                        say!("{message}");
                    }
                    bar.abandon_with_message(message);
                    say!("checkpoint: {checkpoint}");
                }
                RunEnd::StopRequested => {
                    bar.abandon();
                    say!(
                        "stopped by a signal at step {step}; checkpoint: {checkpoint} (`wgdiff train --resume \
                         {checkpoint}` continues)"
                    );
                }
            }
        }
    };
    let mut steps = StepLog::default();
    let step_log = args.step_log.as_ref().filter(|_| leader);
    let mut show = |event: TrainEvent| {
        steps.observe(&event);
        if let (TrainEvent::Checkpoint { last: true, .. }, Some(path)) = (&event, step_log) {
            // complete now: a signal may end the final grid (a failure is reported below)
            let _ = wgdiff::fsio::write_atomic(path, steps.csv().as_bytes());
        }
        show_event(event)
    };
    let advanced = loop {
        match block_on(run.advance(STOP_REQUESTED_AT.load(Ordering::SeqCst) != 0, &mut show)) {
            Ok(true) => {}
            Ok(false) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    if let Some(path) = step_log {
        wgdiff::fsio::write_atomic(path, steps.csv().as_bytes())?;
        say!("step log: {}", path.display());
    }
    advanced?;
    if end == Some(RunEnd::StopRequested) {
        return Err(Interrupted.into());
    }
    say!("training took {:.1} s", run.trainer().state.train_seconds);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        train: TrainArgs,
    }

    /// `wgdiff train` without flags trains the library's recipe: defaults live in
    /// `TrainConfig::default`, never in the flags.
    #[test]
    fn train_without_flags_is_the_library_recipe() {
        let config = Cli::parse_from(["wgdiff"]).train.config().unwrap();
        assert_eq!(config, TrainConfig::default());
    }
}
