//! `TrainingRun`: the one training loop under every shell. It steps a `Trainer` and decides when
//! to sample a grid, score MNIST-FID, write checkpoints, keep the last good one and stop.
//!
//! A shell starts a run with the files it keeps them in (a folder, the page's memory) and calls
//! [`TrainingRun::advance`] until it returns false, passing whether the user asked to stop (a
//! signal, a button) and showing the [`TrainEvent`]s it reports; it decides none of them. In a
//! data-parallel job every process advances in lockstep and only rank 0 writes and scores.
//!
//! Scoring and grids measure no kernels ([`without_measuring_async`]): shapes new to the device
//! (the sampler's batch, the classifier's convs) take their family's fixed rule, as a short
//! `wgdiff sample` does. On a fresh machine timing them cost the main job ~100 s of wall time
//! at its first live MNIST-FID, for scorings that take a tenth of the run.

use super::{FidTracker, Stop, TrainConfig, Trainer};
use crate::data::{grid_columns, grid_png, GridLayout};
use crate::fsio::FileStore;
use crate::gpu::without_measuring_async;
use crate::optim::LossScaler;
use crate::run_state::FidRecord;
use crate::{Error, Result, Tensor};
use web_time::Instant;

/// The run's checkpoint: written every `checkpoint_every` steps and when the run ends.
pub const CHECKPOINT_FILE: &str = "checkpoint.safetensors";
/// The checkpoint with the lowest MNIST-FID so far (`fid_every`).
pub const BEST_FILE: &str = "best.safetensors";
/// The last good checkpoint, kept when the run diverges.
pub const LAST_GOOD_FILE: &str = "last-good.safetensors";
/// The run's settings as JSON, written when it starts.
pub const CONFIG_FILE: &str = "config.json";
/// The sample grid written when the run ends (`samples_stepNNNNNN.png` every `sample_every`).
pub const FINAL_GRID_FILE: &str = "samples.png";

/// What happened in a run, in the order it happened.
pub enum TrainEvent {
    /// The run is set up (the first event): its parameters, first and last step, batch, and
    /// the losses of the steps before `first_step` (a resumed run).
    Started {
        parameters: usize,
        first_step: usize,
        steps: usize,
        batch: usize,
        earlier_losses: Vec<f32>,
    },
    /// One optimiser step: the step number after it, its loss and wall time, the wall seconds
    /// since this run began (`elapsed`: grids, scoring and checkpoints included), the FLOPs of a
    /// step (counted by the profiler on the run's first step; None where it cannot run), the
    /// seconds its gradient all-reduce took (data-parallel runs) and the loss scaler (f16).
    Step {
        step: usize,
        loss: f32,
        seconds: f64,
        elapsed: f64,
        flops: Option<f64>,
        all_reduce_seconds: Option<f64>,
        scaler: Option<LossScaler>,
    },
    /// A sample grid of the EMA weights after `step` ([N, C, H, W] on the device), written as
    /// `file`; sampling it took `seconds`.
    Grid {
        step: usize,
        images: Tensor,
        file: String,
        seconds: f64,
    },
    /// An MNIST-FID evaluation; `best` names the checkpoint written when it is the lowest yet.
    Fid { record: FidRecord, best: Option<String> },
    /// A checkpoint was written: a periodic one, or (`last`) the run's own at its end, before
    /// its final grid.
    Checkpoint { step: usize, file: String, last: bool },
    /// The loss or the weights blew up: nothing was overwritten and the last good checkpoint
    /// is kept (`message` says where and how to resume); the run ends with that error.
    Diverged { step: usize, message: String },
    /// The run ended (the last event) and its checkpoint was written.
    Ended {
        step: usize,
        why: RunEnd,
        checkpoint: String,
    },
}

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// Every configured step is done.
    Completed,
    /// The `max_minutes` time budget is spent; `--resume` continues.
    OutOfTime,
    /// The user asked to stop (Ctrl-C, SIGTERM, the app's stop button); `--resume` continues.
    StopRequested,
}

/// A training run: the trainer, the optional MNIST-FID tracker and the run's files.
pub struct TrainingRun<'f> {
    trainer: Trainer,
    fid: Option<FidTracker>,
    files: Box<dyn FileStore + 'f>,
    leader: bool,
    /// When the run's first advance began (None before it).
    began: Option<Instant>,
    ended: bool,
    /// Steps this run has taken (a resumed run starts at 0).
    steps_taken: u64,
    flops: Option<f64>,
    live: LiveScoring,
}

/// When live MNIST-FID is next due under `fid_share` (rank 0 keeps this clock): once the run
/// has trained, since the last scoring ended, long enough that the last scoring's cost is
/// `share` of the two together. Until a second scoring its cost is estimated from the step
/// time: sampling `samples` images at `steps` steps in batches of `batch` is about
/// `samples x steps / (3 x batch)` training steps (a step's backward costs twice its forward).
/// The first scoring's own time is no measure of the later ones': it compiles (and on a new
/// device tunes) the sampler's and the classifier's kernels, which on Mesa 25's lavapipe took
/// long enough that the main job scored once, at step 4, in 2,000 steps.
#[derive(Clone, Copy, Debug, Default)]
pub struct LiveScoring {
    /// Seconds into the run when the last scoring ended (0 before the first).
    pub last_end: f64,
    /// Seconds the last scoring (MNIST-FID and its grid) took, from the second on.
    pub last_cost: Option<f64>,
    /// Scorings so far.
    pub scorings: u64,
    /// Seconds of the latest training step after the run's first (which compiles kernels).
    pub step_seconds: Option<f64>,
}

impl LiveScoring {
    /// Whether scoring is due at `now` seconds into a run of `config`.
    pub fn due(&self, now: f64, config: &TrainConfig) -> bool {
        let share = config.fid_share as f64;
        if config.fid_every > 0 || share <= 0.0 {
            return false;
        }
        let cost = self.last_cost.or_else(|| {
            self.step_seconds
                .map(|step| step * (config.fid_samples * config.fid_steps) as f64 / (3 * config.batch) as f64)
        });
        cost.is_some_and(|cost| now - self.last_end >= cost * (1.0 - share) / share)
    }

    /// Records a scoring that ran from `start` to `end` seconds into the run.
    pub fn scored(&mut self, start: f64, end: f64) {
        if self.scorings > 0 {
            self.last_cost = Some(end - start);
        }
        self.scorings += 1;
        self.last_end = end;
    }
}

impl<'f> TrainingRun<'f> {
    /// A run of `trainer` writing to `files`; `fid` scores the run every `fid_every` steps and
    /// must be given exactly when `fid_every` is set (processes other than rank 0 of a
    /// data-parallel job give none: they neither score nor write). Rank 0 writes the
    /// configuration file at once.
    pub fn new(trainer: Trainer, fid: Option<FidTracker>, files: Box<dyn FileStore + 'f>) -> Result<Self> {
        let leader = trainer.rank() == 0;
        let c = &trainer.state.config;
        if trainer.scores_mnist_fid() != fid.is_some() && leader {
            return Err(Error::Config(match fid {
                None if c.fid_every > 0 => format!(
                    "fid_every = {} needs an MNIST-FID tracker (the shipped classifier and the reference \
                     statistics); set fid_every = 0 to train without it",
                    c.fid_every
                ),
                None => format!(
                    "live MNIST-FID (fid_share = {}) needs an MNIST-FID tracker (the shipped classifier and \
                     the reference statistics); set fid_share = 0 to train without it",
                    c.fid_share
                ),
                Some(_) => "an MNIST-FID tracker was given but this run scores no MNIST-FID (fid_every and \
                            fid_share are 0, or it does not train on MNIST)"
                    .into(),
            }));
        }
        if leader {
            let json = serde_json::to_string_pretty(c).map_err(|e| Error::Config(e.to_string()))?;
            files.write(CONFIG_FILE, json.into_bytes())?;
        }
        Ok(TrainingRun {
            trainer,
            fid: fid.filter(|_| leader),
            files,
            leader,
            began: None,
            ended: false,
            steps_taken: 0,
            flops: None,
            live: LiveScoring::default(),
        })
    }

    /// The trainer (its state, network and device).
    pub fn trainer(&self) -> &Trainer {
        &self.trainer
    }

    /// Takes one step (or ends the run) and reports what it caused through `on_event`:
    /// grids, MNIST-FID and the best checkpoint, periodic checkpoints on their steps; at the
    /// end (all steps, the time budget, or `stop_requested` on any process) the checkpoint
    /// and, unless stopped, the final grid. Returns whether the run goes on. A diverged run
    /// reports [`TrainEvent::Diverged`] and returns its error.
    pub async fn advance(
        &mut self,
        stop_requested: bool,
        on_event: &mut dyn FnMut(TrainEvent),
    ) -> Result<bool> {
        if self.ended {
            return Ok(false);
        }
        if self.began.is_none() {
            self.began = Some(Instant::now());
            on_event(self.started_event());
        }
        if self.trainer.finished() {
            self.end(RunEnd::Completed, on_event).await?;
            return Ok(false);
        }
        let scoring_due = self.fid.is_some() && self.live.due(self.seconds(), &self.trainer.state.config);
        let agreed = self.trainer.agree(stop_requested, scoring_due)?;
        if let Some(stop) = agreed.stop {
            let why = match stop {
                Stop::Signal => RunEnd::StopRequested,
                Stop::OutOfTime => RunEnd::OutOfTime,
            };
            self.end(why, on_event).await?;
            return Ok(false);
        }
        self.step(on_event).await?;
        let step = self.trainer.state.step;
        let c = self.trainer.state.config.clone();
        let due = |every: usize| every > 0 && step % every == 0;
        let finished = self.trainer.finished();
        let score = due(c.fid_every) || agreed.scoring_due;
        if self.leader {
            let scoring_start = self.seconds();
            if let Some(tracker) = self.fid.as_ref().filter(|_| score) {
                let (record, is_best) = without_measuring_async(tracker.record(&mut self.trainer)).await?;
                let best = match is_best {
                    true => {
                        self.save(BEST_FILE, on_event).await?;
                        Some(self.files.describe(BEST_FILE))
                    }
                    false => None,
                };
                on_event(TrainEvent::Fid { record, best });
            }
            // live scoring shows the grid of the weights it scored
            if (due(c.sample_every) || agreed.scoring_due) && !finished {
                self.grid(&format!("samples_step{step:06}.png"), on_event).await?;
            }
            if agreed.scoring_due {
                self.live.scored(scoring_start, self.seconds());
            }
            if due(c.checkpoint_every) && !finished {
                self.save(CHECKPOINT_FILE, on_event).await?;
                on_event(TrainEvent::Checkpoint {
                    step,
                    file: self.files.describe(CHECKPOINT_FILE),
                    last: false,
                });
            }
        }
        if score || (!finished && (due(c.checkpoint_every) || due(c.sample_every))) {
            // the other processes wait while rank 0 scores and writes
            self.trainer.barrier()?;
        }
        if finished {
            self.end(RunEnd::Completed, on_event).await?;
        }
        Ok(!self.ended)
    }

    /// Seconds since the run's first advance began.
    fn seconds(&self) -> f64 {
        self.began.map_or(0.0, |b| b.elapsed().as_secs_f64())
    }

    fn started_event(&self) -> TrainEvent {
        let t = &self.trainer;
        TrainEvent::Started {
            parameters: t.net().named_params().iter().map(|(_, p)| p.numel()).sum(),
            first_step: t.state.step,
            steps: t.state.config.steps,
            batch: t.state.config.batch,
            earlier_losses: t.state.losses.clone(),
        }
    }

    /// One optimiser step, its FLOPs counted on the run's second step (the first compiles and
    /// tunes the kernels, and the tuner's candidate runs would count); a non-finite loss ends
    /// the run as diverged.
    async fn step(&mut self, on_event: &mut dyn FnMut(TrainEvent)) -> Result<()> {
        let gpu = self.trainer.gpu().clone();
        let started = Instant::now();
        let counting = self.steps_taken == 1 && gpu.profiler().start().is_ok();
        self.steps_taken += 1;
        let stepped = self.trainer.step().await;
        let seconds = started.elapsed().as_secs_f64();
        // (the profiler is stopped whatever the step's outcome: it is the device's, shared)
        match counting {
            true => {
                let profile = gpu.profiler().stop().await?;
                self.flops = Some(profile.records.iter().map(|r| r.flops).sum());
            }
            false => self.live.step_seconds = Some(seconds),
        }
        let loss = match stepped {
            Ok(loss) => loss,
            Err(Error::Diverged(problem)) => {
                let error = match self.leader {
                    true => self
                        .trainer
                        .diverged(self.files.as_ref(), CHECKPOINT_FILE, &problem),
                    false => Error::Diverged(problem),
                };
                return Err(self.diverge(error, on_event));
            }
            Err(e) => return Err(e),
        };
        on_event(TrainEvent::Step {
            step: self.trainer.state.step,
            loss,
            seconds,
            elapsed: self.seconds(),
            flops: self.flops,
            all_reduce_seconds: self.trainer.last_reduce().map(|r| r.seconds),
            scaler: self.trainer.state.scaler.clone(),
        });
        Ok(())
    }

    /// Writes the checkpoint as `name`; a diverged run ends (see [`Trainer::save_to`]).
    async fn save(&mut self, name: &str, on_event: &mut dyn FnMut(TrainEvent)) -> Result<()> {
        match self.trainer.save_to(self.files.as_ref(), name).await {
            Err(error @ Error::Diverged(_)) => Err(self.diverge(error, on_event)),
            other => other,
        }
    }

    /// Ends the run as diverged: the event, then the error to return.
    fn diverge(&mut self, error: Error, on_event: &mut dyn FnMut(TrainEvent)) -> Error {
        self.ended = true;
        on_event(TrainEvent::Diverged {
            step: self.trainer.state.step,
            message: error.to_string(),
        });
        error
    }

    /// Samples the run's grid of the EMA weights and writes it as `name`.
    async fn grid(&mut self, name: &str, on_event: &mut dyn FnMut(TrainEvent)) -> Result<()> {
        let started = Instant::now();
        let images = without_measuring_async(self.trainer.sample_grid_images()).await?;
        let shape: [usize; 4] = images.shape().try_into().map_err(|_| {
            Error::shape(
                "sample grid",
                format!("images must be [N, C, H, W], got {:?}", images.shape()),
            )
        })?;
        let layout = GridLayout {
            columns: grid_columns(shape[0]),
            scale: 2,
            ..GridLayout::default()
        };
        let png = grid_png(&images.to_vec_async().await?, shape, layout)?;
        let seconds = started.elapsed().as_secs_f64();
        self.files.write(name, png)?;
        on_event(TrainEvent::Grid {
            step: self.trainer.state.step,
            images,
            file: self.files.describe(name),
            seconds,
        });
        Ok(())
    }

    /// Writes the checkpoint (rank 0) and, unless stopped, the final grid; every process waits
    /// until rank 0 is done.
    async fn end(&mut self, why: RunEnd, on_event: &mut dyn FnMut(TrainEvent)) -> Result<()> {
        if self.leader {
            self.save(CHECKPOINT_FILE, on_event).await?;
            on_event(TrainEvent::Checkpoint {
                step: self.trainer.state.step,
                file: self.files.describe(CHECKPOINT_FILE),
                last: true,
            });
            if why != RunEnd::StopRequested {
                self.grid(FINAL_GRID_FILE, on_event).await?;
            }
        }
        self.ended = true;
        self.trainer.barrier()?;
        on_event(TrainEvent::Ended {
            step: self.trainer.state.step,
            why,
            checkpoint: self.files.describe(CHECKPOINT_FILE),
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{LiveScoring, TrainConfig};

    #[test]
    fn live_scoring_waits_until_its_cost_is_its_share() {
        let config = TrainConfig {
            fid_share: 0.1,
            fid_samples: 256,
            fid_steps: 20,
            batch: 128,
            ..TrainConfig::default()
        };
        let mut clock = LiveScoring::default();
        assert!(!clock.due(1e6, &config), "no estimate before a step is timed");
        // estimate: 0.3 s x 256 x 20 / (3 x 128) = 4 s of scoring, so 36 s of training first
        clock.step_seconds = Some(0.3);
        assert!(!clock.due(35.9, &config));
        assert!(clock.due(36.1, &config));
        // the first scoring, from 40 s to 70 s, compiled its kernels: the estimate still holds
        clock.scored(40.0, 70.0);
        assert!(!clock.due(105.9, &config));
        assert!(clock.due(106.1, &config));
        // a later scoring from 110 s to 112 s: the next after 18 s more of training
        clock.scored(110.0, 112.0);
        assert!(!clock.due(129.9, &config));
        assert!(clock.due(130.1, &config));
        // fid_every replaces it; 0 turns it off
        for (fid_every, fid_share) in [(5, 0.1), (0, 0.0)] {
            let off = TrainConfig {
                fid_every,
                fid_share,
                ..config.clone()
            };
            assert!(!clock.due(1e6, &off));
        }
    }
}
