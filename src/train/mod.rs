//! Training a diffusion network: batches -> loss -> Adam -> EMA, sample grids from the EMA
//! weights, and atomic checkpoints that resume exactly (same next batch, noise and loss).

mod distill;
pub mod fid;
mod replica;
pub mod resume;
pub mod run;
pub mod run_dir;
pub mod step_log;

pub use crate::run_state::{
    default_process, divergence, sampling_export, Distill, FidRecord, Optimizer, Precision, SkipTraining,
    TrainConfig, TrainState, CFG_GUIDANCE, DIVERGED_WEIGHT, MAX_FID_SHARE,
};
pub use fid::FidTracker;
pub use resume::{ResumeChanges, KEPT_ON_RESUME};
pub use run::{RunEnd, TrainEvent, TrainingRun, BEST_FILE, CHECKPOINT_FILE, LAST_GOOD_FILE};
pub use step_log::{StepLog, StepRow};

use crate::checkpoint::{Checkpoint, Source, TensorData};
use crate::compress::qat::QatWeights;
use crate::data::{Batcher, Dataset};
use crate::diffusion::{
    distill_loss, skip_intervals, skip_levels, Objective, Process, Role, TimeSampling, Weighting,
};
use crate::distributed::{backward_and_all_reduce, Collective, ReduceStats, ReplicaGradients};
use crate::fsio::FileStore;
use crate::models::DiffusionNet;
use crate::ops::random::{step_seed, Rng};
use crate::optim::{backward_scaled, late_decay, update, Adam, AdamConfig, Ema, LrSchedule};
use crate::pipeline::{sample_net, SampleRequest};
use crate::run_state::{is_sampling_export, saved_state, tensor_divergence};
use crate::{Error, Gpu, Result, Tensor};
use distill::Teacher;
pub use distill::{distill_round, FIRST_ROUND_STEPS};
use rand::{Rng as _, SeedableRng};
use replica::Replica;
use std::sync::Arc;
use {
    crate::data::{DataSource, Split},
    std::path::Path,
};

/// What every process of a run agreed before its next step ([`Trainer::agree`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agreed {
    /// Stop before the step, and why.
    pub stop: Option<Stop>,
    /// Score live MNIST-FID after the step (`fid_share`).
    pub scoring_due: bool,
}

/// Why every process of a run stops before its next step ([`Trainer::agree`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Ctrl-C or SIGTERM reached some process.
    Signal,
    /// The `max_minutes` budget is spent.
    OutOfTime,
}

/// A training run in progress.
pub struct Trainer {
    pub state: TrainState,
    /// One per device of this process; replica 0 is the main one (EMA, checkpoints, grids).
    replicas: Vec<Replica>,
    /// The processes of a multi-process run (None: this process trains alone).
    collective: Option<Arc<dyn Collective>>,
    /// The last data-parallel step's all-reduce (None on one device in one process).
    last_reduce: Option<ReduceStats>,
    ema: Ema,
    batcher: Batcher,
    classes: usize,
    /// Probability of dropping each label (None: the model takes no labels).
    label_dropout: Option<f32>,
    /// `state.train_seconds` when this run began: its `max_minutes` budget counts from here.
    budget_start: f64,
    /// What a resume changed ("setting old -> new"), for the shells to report; empty otherwise.
    pub resume_changes: Vec<String>,
    /// The checkpoint a resumed run came from and its step: a loss that blows up at the very
    /// next step blames the checkpoint's weights, not the learning rate.
    resumed_from: Option<(String, usize)>,
    /// The weights a quantisation-aware run rounds at every step (`qat`).
    qat: Option<QatWeights>,
    /// The teacher of a distillation run (`distill`).
    teacher: Option<Teacher>,
}

/// A training batch's network times and skipped levels: every level and times drawn as `times`
/// says without skip training; else k by `scheme` (see [`SkipTraining`]) for a network with
/// `levels` levels, and times uniform over the process or the level's interval.
pub fn skip_batch(
    process: &Process,
    times: TimeSampling,
    scheme: Option<SkipTraining>,
    levels: usize,
    batch: usize,
    rng: &mut impl rand::Rng,
) -> Result<(Vec<f32>, usize)> {
    let Some(scheme) = scheme else {
        return Ok((times.draw(process, rng, batch)?, 0));
    };
    if levels <= 1 {
        return Err(Error::Config(
            "skip_training needs a U-Net with more than one level (the adaptive U-Net); this model cannot skip"
                .into(),
        ));
    }
    match scheme {
        SkipTraining::Uniform => {
            let skip = rng.random_range(0..levels);
            Ok((process.sample_times(rng, batch, 0.0..1.0)?, skip))
        }
        SkipTraining::Consistent { exponent } => {
            let first = process.sample_times(rng, 1, 0.0..1.0)?[0];
            let skip = skip_levels(levels, process.marginals()?.normalized_time(first), exponent);
            let piece = skip_intervals(levels, exponent)[skip];
            let mut times = vec![first];
            times.extend(process.sample_times(rng, batch - 1, piece.start..piece.end)?);
            Ok((times, skip))
        }
    }
}

impl Trainer {
    /// A fresh run: loads the data, builds the model from `config.seed`; with `config.init`,
    /// the model and its starting weights come from that checkpoint (see [`Trainer::init_from`]).
    pub fn new(gpu: &Gpu, config: TrainConfig) -> Result<Trainer> {
        config.validate()?;
        let mut config = config;
        if let (Some(d), None) = (&config.distill, &config.init) {
            // a student starts from its teacher's weights
            config.init = Some(d.teacher.clone());
        }
        let init = match &config.init {
            Some(path) => Some(Checkpoint::load(path)?),
            None => None,
        };
        let data = Arc::new(load_data(&config.data, run_image_shape(&config, init.as_ref())?)?);
        Trainer::with_data(gpu, config, data, init.as_ref())
    }

    /// [`Trainer::new`] on a dataset already in memory (`config.data` only names it) and, when
    /// `config.init` is set, its checkpoint already read: what the browser, which has no files,
    /// calls.
    pub fn with_data(
        gpu: &Gpu,
        config: TrainConfig,
        data: Arc<Dataset>,
        init: Option<&Checkpoint>,
    ) -> Result<Trainer> {
        config.validate()?;
        let init = match (init, &config.init) {
            (Some(ckpt), Some(path)) => {
                let saved = saved_state(ckpt, &path.display().to_string())?;
                Some((ckpt, config.apply_skip_type(saved.model)?, saved.process))
            }
            (None, Some(path)) => {
                return Err(Error::Config(format!(
                    "init = {} is set but its checkpoint was not read",
                    path.display()
                )))
            }
            (_, None) => None,
        };
        let model = match &init {
            Some((_, model, _)) => model.clone(),
            None => config.model_config()?,
        };
        let process = match (&config.process, &config.distill, &init) {
            (Some(process), _, _) => process.clone(),
            // a student predicts v (the paper's choice: eps cannot give x0 where the first
            // step's SNR is ~0) on its starting weights' noise schedule
            (None, Some(_), Some((_, _, started))) => started.with_vp(None, Some(Objective::V))?,
            // fine-tuning keeps the process its weights learnt
            (None, None, Some((_, _, started))) => started.clone(),
            (None, _, None) => default_process(&model),
        };
        let process = match (config.schedule, config.objective) {
            (None, None) => process,
            (schedule, objective) => process.with_vp(schedule, objective)?,
        };
        let batcher = Batcher::new(data, config.batch, config.seed, config.flip)?;
        let mut config = config;
        if let Some(epochs) = config.epochs {
            config.steps = epochs.checked_mul(batcher.batches_per_epoch()).ok_or_else(|| {
                Error::Config(format!(
                    "{epochs} epochs of {} batches is more steps than can be counted; ask for fewer epochs",
                    batcher.batches_per_epoch()
                ))
            })?;
        }
        config.resolve_sampling(&model, &process)?;
        config.resolve_time_sampling(&model, &process)?;
        let state = TrainState::fresh(config, model, process, batcher.state().clone());
        let mut trainer = Trainer::build(gpu, state, batcher)?;
        if let Some((ckpt, _, _)) = init {
            trainer.init_from(ckpt)?;
        }
        Ok(trainer)
    }

    /// Sets the weights and their EMA to the EMA weights of `ckpt` (and its buffers), for
    /// fine-tuning. Parameters it lacks keep their fresh initialisation: the `interp.*` path
    /// when a model trained with another skip type is fine-tuned for `interpolate`.
    fn init_from(&mut self, ckpt: &Checkpoint) -> Result<()> {
        let origin = self
            .state
            .config
            .init
            .as_ref()
            .map_or(String::new(), |p| p.display().to_string());
        let stored = |name: &str| ckpt.contains(&format!("ema.{name}"));
        if let Some((name, _)) = self.replicas[0]
            .params
            .iter()
            .find(|(n, _)| !stored(n) && !n.starts_with("interp."))
        {
            return Err(Error::Checkpoint {
                path: origin,
                msg: format!(
                    "has no tensor ema.{name}; --init takes a `wgdiff train` checkpoint of the same model \
                     (only the interpolate skip path may be new)"
                ),
            });
        }
        let main = &mut self.replicas[0];
        let names = main.params.iter().map(|(n, _)| n.clone());
        let (weights, shadow): (Vec<_>, Vec<_>) = names
            .zip(
                main.params
                    .iter()
                    .map(|(_, t)| t.clone())
                    .zip(self.ema.shadow().to_vec()),
            )
            .filter(|(name, _)| stored(name))
            .map(|(name, (w, s))| ((name.clone(), w), (name, s)))
            .unzip();
        ckpt.restore("ema.", &weights, &origin)?;
        ckpt.restore("ema.", &shadow, &origin)?;
        main.masks = crate::compress::load_masks(ckpt, "ema.", &main.params, &origin)?;
        ckpt.restore("buffer.", &main.net.named_buffers(), &origin)
    }

    /// Parameters a compressed `--init` checkpoint pruned (kept at zero while training).
    pub fn pruned_params(&self) -> usize {
        self.replicas[0].masks.len()
    }

    /// Weights a quantisation-aware run rounds at every step (0 without `qat`).
    pub fn rounded_params(&self) -> usize {
        self.qat.as_ref().map_or(0, QatWeights::count)
    }

    /// Continues the run saved in `checkpoint` (its config, weights, optimiser, EMA and data
    /// position) with `changes` applied (the step target, lr, warm-up, clipping, outputs).
    pub fn resume(gpu: &Gpu, checkpoint: &Path, changes: &ResumeChanges) -> Result<Trainer> {
        let ckpt = Checkpoint::load(checkpoint)?;
        let origin = checkpoint.display().to_string();
        let saved = saved_state(&ckpt, &origin)?;
        let data = Arc::new(load_data(&saved.config.data, saved.model.image_shape())?);
        Trainer::resume_with_data(gpu, &ckpt, &origin, data, changes)
    }

    /// [`Trainer::resume`] from a checkpoint already read (`origin` names it in errors) on its
    /// dataset already in memory.
    pub fn resume_with_data(
        gpu: &Gpu,
        ckpt: &Checkpoint,
        origin: &str,
        data: Arc<Dataset>,
        changes: &ResumeChanges,
    ) -> Result<Trainer> {
        let mut state = saved_state(ckpt, origin)?;
        let resume_changes = changes.apply(&mut state.config, state.step, origin)?;
        if is_sampling_export(ckpt) {
            return Err(Error::Checkpoint {
                path: origin.to_string(),
                msg: "is an EMA-only export (`wgdiff export`): it samples, and `wgdiff train --init` \
                      fine-tunes from it, but it has no weights or optimizer state to resume from; \
                      resume the checkpoint it was exported from"
                    .into(),
            });
        }
        let batcher = Batcher::from_state(data, state.batcher.clone())?;
        let trainer = ckpt.build_within_size(origin, || Trainer::build(gpu, state, batcher))?;
        let mut trainer = trainer;
        let main = &mut trainer.replicas[0];
        ckpt.restore("model.", &main.params, origin)?;
        let names: Vec<String> = main.params.iter().map(|(n, _)| n.clone()).collect();
        let named = |prefix: &str, ts: Vec<Tensor>| -> Vec<(String, Tensor)> {
            names.iter().map(|n| format!("{prefix}{n}")).zip(ts).collect()
        };
        ckpt.restore("ema.", &named("", trainer.ema.shadow().to_vec()), origin)?;
        let (m, v): (Vec<Tensor>, Vec<Tensor>) = (0..names.len())
            .map(|i| main.adam.moments_f32(i))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .unzip();
        ckpt.restore("adam.m.", &named("", m.clone()), origin)?;
        ckpt.restore("adam.v.", &named("", v.clone()), origin)?;
        for (i, (m, v)) in m.iter().zip(&v).enumerate() {
            main.adam.set_moments(i, m, v)?;
        }
        ckpt.restore("buffer.", &main.net.named_buffers(), origin)?;
        main.masks = crate::compress::load_masks(ckpt, "model.", &main.params, origin)?;
        let skipped = trainer.state.scaler.as_ref().map_or(0, |s| s.skipped);
        main.adam.set_steps(trainer.state.step as u32 - skipped);
        trainer.resume_changes = resume_changes;
        trainer.resumed_from = Some((origin.to_string(), trainer.state.step));
        Ok(trainer)
    }

    fn build(gpu: &Gpu, state: TrainState, batcher: Batcher) -> Result<Trainer> {
        let c = &state.config;
        let images = state.model.image_shape();
        if c.fid_every > 0 && images != crate::classifier::MNIST_IMAGE_SHAPE {
            return Err(Error::Config(format!(
                "fid_every needs a model of 1-channel 28x28 images (MNIST-FID scores them with the MNIST \
                 classifier); this model makes {images:?} images: set fid_every = 0"
            )));
        }
        let data = batcher.dataset();
        let data_images = [data.channels, data.height, data.width];
        if data_images != images {
            let shape = |[c, h, w]: [usize; 3]| format!("{c}x{h}x{w}");
            return Err(Error::Config(format!(
                "--data {}: the dataset {} holds {} images but the {} model makes {} images; give --data \
                 of {} images (folder:DIR resizes a folder's images to the model's size) or a model for {} \
                 images (e.g. --preset mnist-small for 1x28x28)",
                c.data,
                data.name,
                shape(data_images),
                state.model.kind_name(),
                shape(images),
                shape(images),
                shape(data_images)
            )));
        }
        let mut net = state.model.build(gpu, c.seed)?;
        net.set_training(true);
        let classes = batcher.dataset().classes;
        let label_dropout = c.label_dropout(&state.model)?;
        if let Some(k) = state.model.classes().filter(|&k| k != classes) {
            return Err(Error::Config(format!(
                "the {} is class-conditional with {k} classes but the dataset {} has {classes}; train \
                 an unconditional model on it (e.g. --preset mnist-small, or `classes` unset in the \
                 model config)",
                state.model.kind_name(),
                batcher.dataset().name
            )));
        }
        let params = net.named_params();
        let qat = c
            .qat
            .map(|bits| QatWeights::new(bits, &net.walk(1).weights, &params))
            .transpose()?;
        let tensors: Vec<Tensor> = params.iter().map(|(_, t)| t.clone()).collect();
        let adam = Adam::new(
            tensors.clone(),
            AdamConfig {
                lr: c.lr,
                max_grad_norm: (c.max_grad_norm > 0.0).then_some(c.max_grad_norm),
                schedule: LrSchedule::Warmup { warmup: c.warmup },
                moments: c.optimizer.moments(),
                ..AdamConfig::default()
            },
        )?;
        let ema = Ema::new(&tensors, c.ema_decay)?;
        let teacher = match &c.distill {
            Some(d) => Some(Teacher::load(gpu, d, &state.process)?),
            None => None,
        };
        let main = Replica {
            gpu: gpu.clone(),
            net,
            params,
            adam,
            masks: Vec::new(),
            rows: 0..c.batch,
        };
        Ok(Trainer {
            budget_start: state.train_seconds,
            state,
            replicas: vec![main],
            collective: None,
            last_reduce: None,
            ema,
            batcher,
            classes,
            label_dropout,
            resume_changes: Vec::new(),
            resumed_from: None,
            qat,
            teacher,
        })
    }

    /// True once the configured number of steps is done.
    pub fn finished(&self) -> bool {
        self.state.step >= self.state.config.steps
    }

    /// Training seconds of this run so far (since it was started or resumed).
    fn run_seconds(&self) -> f64 {
        self.state.train_seconds - self.budget_start
    }

    /// The share of this run done: the larger of its steps' and its `max_minutes`' shares.
    pub fn progress(&self) -> f64 {
        let c = &self.state.config;
        let by_steps = self.state.step as f64 / c.steps.max(1) as f64;
        let by_time = match c.max_minutes {
            m if m > 0.0 => self.run_seconds() / (m as f64 * 60.0),
            _ => 0.0,
        };
        by_steps.max(by_time).min(1.0)
    }

    /// The learning rate of the next step before warm-up: `lr`, decayed over the run's last
    /// `lr_decay` share ([`late_decay`]).
    pub fn lr(&self) -> f32 {
        self.state.config.lr * late_decay(self.progress(), self.state.config.lr_decay)
    }

    /// True once this run has trained for its `max_minutes` (0: never).
    pub fn out_of_time(&self) -> bool {
        let minutes = self.state.config.max_minutes;
        minutes > 0.0 && self.run_seconds() >= minutes as f64 * 60.0
    }

    /// Device bytes of the optimizer's moment state (8 per parameter for f32 Adam).
    pub fn optimizer_state_bytes(&self) -> u64 {
        self.replicas[0].adam.state_bytes()
    }

    /// The network being trained (replica 0's).
    pub fn net(&self) -> &dyn DiffusionNet {
        self.replicas[0].net.as_ref()
    }

    /// The device of replica 0 (where the EMA weights, grids and checkpoints come from).
    pub fn gpu(&self) -> &Gpu {
        &self.replicas[0].gpu
    }

    /// Spreads the run over `devices` more devices of this process and, with a `collective`,
    /// over the processes of a multi-process run: every replica gets replica 0's weights,
    /// buffers, optimiser state and masks (each process rank 0's weights and buffers), and its
    /// share of every global batch (see [`crate::distributed::replica_rows`]). From then on a
    /// step averages the gradients of all replicas, so the run follows the one-device run of
    /// the same global batch up to float summation order.
    pub async fn distribute(
        &mut self,
        devices: &[Gpu],
        collective: Option<Arc<dyn Collective>>,
    ) -> Result<()> {
        if self.qat.is_some() || self.teacher.is_some() {
            return Err(Error::Config(
                "quantisation-aware training (qat) and distillation run on one device in one process; drop \
                 --devices and the MPI launch, or train without --qat and --distill"
                    .into(),
            ));
        }
        let (rank, ranks) = collective.as_ref().map_or((0, 1), |c| (c.rank(), c.size()));
        let rows = crate::distributed::replica_rows(self.state.config.batch, rank, ranks, 1 + devices.len())?;
        if let Some(collective) = &collective {
            let main = &self.replicas[0];
            let mut shared = main.tensors();
            shared.extend(main.net.named_buffers().into_iter().map(|(_, t)| t));
            for t in shared {
                let mut values = t.to_vec_async().await?;
                collective.broadcast(&mut values)?;
                t.copy_from(&Tensor::from_slice(t.gpu(), t.shape(), &values, t.dtype())?)?;
            }
        }
        self.replicas.truncate(1);
        let (model, seed) = (&self.state.model, self.state.config.seed);
        for (gpu, rows) in devices.iter().zip(&rows[1..]) {
            let copy = self.replicas[0].copy_to(gpu, model, seed, rows.clone()).await?;
            self.replicas.push(copy);
        }
        self.replicas[0].rows = rows[0].clone();
        self.collective = collective;
        Ok(())
    }

    /// Waits until every replica's device has run all the work recorded so far (benchmarks
    /// time whole steps with it).
    pub async fn finish(&self) -> Result<()> {
        for r in &self.replicas {
            r.gpu.finish().await?;
        }
        Ok(())
    }

    /// Replicas over all processes (devices of this process x processes).
    pub fn replica_count(&self) -> usize {
        self.replicas.len() * self.collective.as_ref().map_or(1, |c| c.size())
    }

    /// The last step's gradient all-reduce (None unless the run is data-parallel).
    pub fn last_reduce(&self) -> Option<ReduceStats> {
        self.last_reduce
    }

    /// This process's rank in a multi-process job (0 when it trains alone): rank 0 writes.
    pub fn rank(&self) -> usize {
        self.collective.as_ref().map_or(0, |c| c.rank())
    }

    /// Waits (sleeping) until every process of the run gets here (at once when it trains
    /// alone): the other ranks wait while rank 0 writes a checkpoint or a grid.
    pub fn barrier(&self) -> Result<()> {
        match &self.collective {
            Some(collective) => collective.barrier(),
            None => Ok(()),
        }
    }

    /// What every process of the run does around its next step: whether it stops before it,
    /// and why (a signal on any process, `signalled` here; else the time budget spent on any
    /// process), and whether live MNIST-FID scores after it (`scoring_due` on rank 0, which
    /// alone keeps the clock). Every process must stop and wait for the scoring at the same
    /// step, or the others would wait for it forever; one all-reduce asks all three.
    pub fn agree(&self, signalled: bool, scoring_due: bool) -> Result<Agreed> {
        let flags = [signalled, self.out_of_time(), scoring_due];
        let agreed = match &self.collective {
            Some(collective) => collective.any(&flags)?,
            None => flags.to_vec(),
        };
        Ok(Agreed {
            stop: match agreed[..2] {
                [true, _] => Some(Stop::Signal),
                [false, true] => Some(Stop::OutOfTime),
                _ => None,
            },
            scoring_due: agreed[2],
        })
    }

    /// Whether this run scores MNIST-FID: every `fid_every` steps when set, else under
    /// `fid_share` when it trains on MNIST (`mnist` or `mnist:DIR`) with a model of 1-channel
    /// 28x28 images. Only rank 0 scores.
    pub fn scores_mnist_fid(&self) -> bool {
        let c = &self.state.config;
        let on_mnist = matches!(c.data.parse::<DataSource>(), Ok(DataSource::Mnist(_)))
            && self.state.model.image_shape() == crate::classifier::MNIST_IMAGE_SHAPE;
        self.rank() == 0 && (c.fid_every > 0 || (c.fid_share > 0.0 && on_mnist))
    }

    /// The dataset's images per epoch.
    pub fn dataset(&self) -> &Dataset {
        self.batcher.dataset()
    }

    /// One optimiser step; returns its loss. A non-finite loss stops the run with an error
    /// before the weights are touched. In f16 the network runs on the batch cast to f16 and
    /// its output is cast back for the loss; a step whose scaled gradients overflow changes
    /// no weights, moments or EMA (see `state.scaler`). Async: it reads the loss back without
    /// blocking (native callers block on it with `pollster`).
    pub async fn step(&mut self) -> Result<f32> {
        let started = web_time::Instant::now();
        let measuring_before = self.seconds_measuring();
        let lr = self.lr();
        for r in &mut self.replicas {
            r.adam.config.lr = lr;
        }
        let c = &self.state.config;
        let step = self.state.step;
        let batch = self.batcher.next_batch();
        let mut cpu_rng = rand::rngs::StdRng::seed_from_u64(step_seed(c.seed, step, 1));
        let labels: Option<Vec<u32>> = self.label_dropout.map(|p| {
            batch
                .labels
                .iter()
                .map(|&l| {
                    if cpu_rng.random::<f32>() < p {
                        self.classes as u32
                    } else {
                        l
                    }
                })
                .collect()
        });
        let process = &self.state.process;
        let (times, skip) = match &self.teacher {
            // (the student's steps, drawn below)
            Some(_) => (Vec::new(), 0),
            None => skip_batch(
                process,
                c.time_sampling.unwrap_or_default(),
                c.skip_training,
                self.replicas[0].net.levels(),
                batch.shape[0],
                &mut cpu_rng,
            )?,
        };
        let picks: Vec<usize> = match &self.teacher {
            Some(teacher) => (0..batch.shape[0])
                .map(|_| cpu_rng.random_range(0..teacher.grid.steps()))
                .collect(),
            None => Vec::new(),
        };
        let weighting = match c.min_snr_gamma {
            Some(gamma) => Weighting::MinSnr { gamma },
            None => Weighting::Uniform,
        };
        let dtype = c.precision.dtype();
        let floats = match &self.qat {
            Some(qat) => Some(qat.round(&self.replicas[0].params).await?),
            None => None,
        };
        // Each replica trains on its rows of the batch, with the noise and dropout masks those
        // rows get in a one-device step.
        let mut losses = Vec::with_capacity(self.replicas.len());
        for r in &self.replicas {
            let rows = r.rows.clone();
            let x0 = batch.rows(rows.clone()).to_tensor(&r.gpu)?;
            let labels = labels.as_ref().map(|l| &l[rows.clone()]);
            r.net
                .reseed_dropout(Rng::new(step_seed(c.seed, step, 3)).from_row(rows.start));
            let mut noise = Rng::new(step_seed(c.seed, step, 2)).from_row(rows.start);
            let model = |x: &Tensor, t: &[f32]| r.net.forward_in(dtype, x, t, labels, skip);
            losses.push(match &self.teacher {
                Some(teacher) => {
                    let teacher_net = |x: &Tensor, t: &[f32]| teacher.net.forward(x, t, None, 0);
                    let marginals = process.marginals()?;
                    let roles = (
                        Role {
                            net: &teacher_net,
                            marginals: &teacher.marginals,
                        },
                        Role {
                            net: &model,
                            marginals: &marginals,
                        },
                    );
                    distill_loss(roles.0, roles.1, &teacher.grid, &x0, &picks[rows], &mut noise)?.0
                }
                None => process.loss_at(&model, &x0, &times[rows], weighting, &mut noise)?,
            });
        }
        let (value, applied) = if self.replicas.len() == 1 && self.collective.is_none() {
            let value = losses[0].to_vec_async().await?[0];
            let main = &mut self.replicas[0];
            if value.is_finite() {
                backward_scaled(&losses[0], self.state.scaler.as_ref())?;
            }
            if let (Some(qat), Some(floats)) = (&self.qat, floats) {
                qat.restore(&main.params, floats)?;
            }
            if !value.is_finite() {
                return Err(self.loss_error(value));
            }
            let applied = update(&mut main.adam, self.state.scaler.as_mut()).await?;
            (value, applied)
        } else {
            self.data_parallel_update(&losses).await?
        };
        if applied {
            for r in &self.replicas {
                crate::compress::apply_masks(&r.params, &r.masks)?;
            }
            let s = (step + 1) as f32;
            self.ema.decay = self.state.config.ema_decay.min((1.0 + s) / (10.0 + s));
            self.ema.update(&self.replicas[0].tensors());
        }
        self.state.step += 1;
        self.state.losses.push(value);
        self.state.batcher = self.batcher.state().clone();
        // kernel measuring (a fresh device's first steps) is neither training nor its budget
        let measuring = self.seconds_measuring() - measuring_before;
        self.state.train_seconds += (started.elapsed().as_secs_f64() - measuring).max(0.0);
        Ok(value)
    }

    /// Seconds the autotuners of this run's devices have spent timing kernel candidates.
    fn seconds_measuring(&self) -> f64 {
        let mut tuners: Vec<&crate::gpu::Autotuner> = Vec::new();
        for r in &self.replicas {
            if !tuners.iter().any(|t| std::ptr::eq(*t, r.gpu.tuner())) {
                tuners.push(r.gpu.tuner());
            }
        }
        tuners.iter().map(|t| t.seconds_measuring()).sum()
    }

    /// Backward on every replica, the gradient all-reduce, and the same optimiser step on every
    /// replica; returns the global loss and whether the update was applied (not on an f16
    /// overflow). A non-finite global loss stops every process alike, before any update.
    async fn data_parallel_update(&mut self, losses: &[Tensor]) -> Result<(f32, bool)> {
        let scale = self.state.scaler.as_ref().map(|s| s.scale);
        let params: Vec<Vec<Tensor>> = self.replicas.iter().map(Replica::tensors).collect();
        let batch = self.state.config.batch as f32;
        let parts: Vec<ReplicaGradients> = self
            .replicas
            .iter()
            .zip(&params)
            .zip(losses)
            .map(|((r, params), loss)| ReplicaGradients {
                params,
                loss,
                weight: r.rows.len() as f32 / batch,
            })
            .collect();
        let reduced = backward_and_all_reduce(&parts, scale, self.collective.as_deref()).await;
        let reduced = match reduced {
            Ok(reduced) if reduced.loss.is_finite() => reduced,
            failed => {
                self.replicas.iter().for_each(|r| r.adam.zero_grad());
                return Err(match failed {
                    Ok(reduced) => self.loss_error(reduced.loss),
                    Err(e) => e,
                });
            }
        };
        self.last_reduce = Some(reduced);
        let applied = match self.state.scaler.as_mut() {
            Some(scaler) => scaler.record(reduced.finite)?,
            None => true,
        };
        for r in &mut self.replicas {
            if applied {
                r.adam.step_unscaled(scale.unwrap_or(1.0), None)?;
            }
            r.adam.zero_grad();
        }
        Ok((reduced.loss, applied))
    }

    /// The error of a step whose loss is `value` (NaN or infinite): nothing was updated.
    fn loss_error(&self, value: f32) -> Error {
        if let Some((origin, step)) = self
            .resumed_from
            .as_ref()
            .filter(|(_, at)| *at == self.state.step)
        {
            return Error::Diverged(format!(
                "the loss became {value} at step {}, the first step after resuming {origin}: its weights are \
                 broken (a diverged run's), not the learning rate; resume an earlier checkpoint of the run \
                 (best.safetensors, last-good.safetensors) or start again with a lower --lr",
                step + 1
            ));
        }
        Error::Diverged(format!(
            "the loss became {value} at step {}; the weights were not updated. Lower --lr (now {}) or \
             --max-grad-norm, or resume from the last checkpoint",
            self.state.step + 1,
            self.state.config.lr
        ))
    }

    /// A network with the EMA weights (a second instance of the model), for sampling.
    pub fn ema_net(&self) -> Result<Box<dyn DiffusionNet>> {
        let main = &self.replicas[0];
        let net = self.state.model.build(&main.gpu, self.state.config.seed)?;
        for ((_, dst), src) in net.named_params().iter().zip(self.ema.shadow()) {
            dst.copy_from(src)?;
        }
        for ((_, dst), (_, src)) in net.named_buffers().iter().zip(main.net.named_buffers()) {
            dst.copy_from(&src)?;
        }
        Ok(net)
    }

    /// Samples `grid_images` images from the EMA weights with the default sampler of
    /// `wgdiff sample` at `grid_steps` steps (the run's seed), as [N, C, H, W] on the device.
    pub async fn sample_grid_images(&self) -> Result<Tensor> {
        let c = &self.state.config;
        let request = SampleRequest::for_state(&self.state)
            .steps(Some(c.sampling_steps(c.grid_steps)))
            .count(c.grid_images)
            .seed(c.seed)
            .build()?;
        let net = self.ema_net()?;
        let (images, _) = sample_net(
            self.gpu(),
            net.as_ref(),
            &self.state.model,
            &self.state.process,
            &request,
            None,
            None,
        )
        .await?;
        Ok(images)
    }

    /// The checkpoint (weights, EMA, Adam moments, buffers, training state), read back.
    pub async fn capture(&self) -> Result<Checkpoint> {
        let (named, masks, meta) = self.checkpoint_parts()?;
        let mut ckpt = Checkpoint::capture(&named, meta).await?;
        ckpt.tensors.extend(masks);
        Ok(ckpt)
    }

    /// What a checkpoint holds: the device tensors, the pruning masks and the training state.
    #[allow(clippy::type_complexity)]
    fn checkpoint_parts(
        &self,
    ) -> Result<(
        Vec<(String, Tensor)>,
        Vec<(String, TensorData)>,
        serde_json::Value,
    )> {
        let main = &self.replicas[0];
        let mut named: Vec<(String, Tensor)> = Vec::new();
        for (i, (name, t)) in main.params.iter().enumerate() {
            let (m, v) = main.adam.moments_f32(i)?;
            named.push((format!("model.{name}"), t.clone()));
            named.push((format!("ema.{name}"), self.ema.shadow()[i].clone()));
            named.push((format!("adam.m.{name}"), m));
            named.push((format!("adam.v.{name}"), v));
        }
        for (name, t) in main.net.named_buffers() {
            named.push((format!("buffer.{name}"), t));
        }
        let meta = serde_json::to_value(&self.state).map_err(|e| Error::Checkpoint {
            path: self.state.config.out.display().to_string(),
            msg: format!("training state does not serialise: {e}"),
        })?;
        let masks = main
            .masks
            .iter()
            .flat_map(|m| {
                let name = &main.params[m.index].0;
                ["model.", "ema."].map(|prefix| (format!("{prefix}{name}.mask"), m.bits.clone()))
            })
            .collect();
        Ok((named, masks, meta))
    }

    /// Writes the checkpoint as file `name` of `files`, unless the run has diverged
    /// (non-finite or blown-up weights, see [`divergence`]): then nothing is written, the good
    /// checkpoint already there is kept as [`LAST_GOOD_FILE`] too, and the
    /// [`Error::Diverged`] says how to resume it. The tensors are read back one at a time
    /// into the file's bytes ([`Checkpoint::encode_from`]).
    pub async fn save_to(&self, files: &dyn FileStore, name: &str) -> Result<()> {
        let (named, masks, meta) = self.checkpoint_parts()?;
        let sources = named
            .iter()
            .map(|(name, t)| (name.clone(), Source::Device(t)))
            .chain(masks.iter().map(|(name, t)| (name.clone(), Source::Host(t))))
            .collect();
        let mut problem = None;
        let mut judge = |name: &str, data: &[f32]| {
            if problem.is_none() {
                problem = tensor_divergence(name, data);
            }
        };
        let bytes = Checkpoint::encode_from(sources, &meta, &mut judge).await?;
        match problem {
            None => files.write(name, bytes),
            Some(problem) => Err(self.diverged(files, name, &problem)),
        }
    }

    /// [`Trainer::save_to`] the file at `path` (atomically, creating its folder).
    pub async fn save(&self, path: &Path) -> Result<()> {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let dir = path.parent().unwrap_or(Path::new(""));
        self.save_to(&crate::fsio::Folder(dir.to_path_buf()), &name).await
    }

    /// The error of a diverged run (`problem` says how), after keeping the good checkpoint
    /// `name` of `files` (the last one written) as [`LAST_GOOD_FILE`] beside it.
    pub fn diverged(&self, files: &dyn FileStore, name: &str, problem: &str) -> Error {
        let c = &self.state.config;
        let head = format!(
            "at step {}, {problem}: the run has diverged, so {} was not overwritten",
            self.state.step,
            files.describe(name)
        );
        let lower_lr = format!("--lr {:.0e}", c.lr / 10.0);
        let good = match files.read(name) {
            Ok(Some(good)) => good,
            _ => {
                return Error::Diverged(format!(
                    "{head}; no good checkpoint was written before. Train again with a lower learning \
                     rate ({lower_lr}) or gradient clipping (--max-grad-norm 1)"
                ))
            }
        };
        let good_step = Checkpoint::from_bytes(&good, "")
            .ok()
            .and_then(|ckpt| ckpt.meta.get("step").and_then(|s| s.as_u64()));
        let keep = files.describe(LAST_GOOD_FILE);
        let kept = match files.write(LAST_GOOD_FILE, good) {
            Ok(()) => format!(" and as {keep}"),
            Err(e) => format!(" (copying it to {keep} failed: {e})"),
        };
        Error::Diverged(format!(
            "{head}; the last good checkpoint{} is kept there{kept}. Resume it with a lower learning rate: \
             `wgdiff train --resume {keep} {lower_lr}` (or add --max-grad-norm 1)",
            good_step.map(|s| format!(" (step {s})")).unwrap_or_default(),
        ))
    }
}

/// [C, H, W] of the images a fresh run of `config` trains on: its model's, or with `init` (the
/// checkpoint `config.init` names, read) that checkpoint's model's.
pub fn run_image_shape(config: &TrainConfig, init: Option<&Checkpoint>) -> Result<[usize; 3]> {
    let model = match (init, &config.init) {
        (Some(ckpt), Some(path)) => saved_state(ckpt, &path.display().to_string())?.model,
        _ => config.model_config()?,
    };
    Ok(model.image_shape())
}

/// The training split of a `--data` source, as a model of `image_shape` images reads it.
pub fn load_data(spec: &str, image_shape: [usize; 3]) -> Result<Dataset> {
    spec.parse::<DataSource>()?
        .fitted_to(image_shape)
        .load(Split::Train)
}
