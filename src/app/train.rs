//! The train view: set up a run like `wgdiff train`, start, pause, resume and stop it (stop
//! writes the checkpoint), and watch the loss, speed, ETA, sample grids and MNIST-FID live.

use super::grid_texture::{GridLayout, GridTexture};
use super::jobs::{is_running, Event, Job, JobContext};
use super::plots::{thinned, MAX_SERIES_POINTS};
use super::{parse_setting, platform, Shared};
use crate::classifier::mnist_fid_label;
use crate::data::grid_columns;
use crate::models::PRESETS;
use crate::train::run_dir::{run_folder, OutRequest};
use crate::train::{
    FidRecord, Precision, RunEnd, SkipTraining, StepLog, TrainConfig, TrainEvent, TrainingRun,
    CHECKPOINT_FILE,
};
use crate::{Gpu, Result, Tensor};
use eframe::egui;
use egui_plot::{Legend, Line, PlotPoints, Points};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The time budget of a run in a page (minutes): the page's device is often a software one,
/// where the recipe reaches MNIST-FID ~100 in about 6 minutes (SwiftShader, `web/test.sh`).
pub const PAGE_MAX_MINUTES: f32 = 10.0;

/// Images a live MNIST-FID scores in a page: as `wgdiff eval` by default, fewer than a native
/// run's (the scoring's share of the time stays the same; each is shorter).
pub const PAGE_FID_SAMPLES: usize = 200;

/// The run's settings in the view (the rest of [`TrainConfig`] keeps its defaults).
#[derive(Clone, Debug)]
pub struct TrainSettings {
    pub preset: String,
    pub data: String,
    pub batch: usize,
    pub lr: f32,
    pub warmup: u32,
    pub steps: usize,
    pub seed: u64,
    pub precision: Precision,
    pub skip_training: Option<SkipTraining>,
    pub sample_every: usize,
    pub checkpoint_every: usize,
    pub fid_every: usize,
    pub fid_share: f32,
    pub fid_samples: usize,
    pub max_minutes: f32,
    /// The sample grid every run ends with: its images and sampler steps.
    pub grid_images: usize,
    pub grid_steps: usize,
    pub out: String,
}

impl TrainSettings {
    /// The library's default recipe ([`TrainConfig::default`], what `wgdiff train` runs)
    /// writing to `out`; in a page (`page`) with the time budget [`PAGE_MAX_MINUTES`] and live
    /// MNIST-FID over [`PAGE_FID_SAMPLES`] images (and the page trains on MNIST's test split,
    /// the data it fetches).
    pub fn defaults(out: String, page: bool) -> TrainSettings {
        let c = TrainConfig::default();
        TrainSettings {
            preset: c.preset,
            data: c.data,
            batch: c.batch,
            lr: c.lr,
            warmup: c.warmup,
            steps: c.steps,
            seed: c.seed,
            precision: c.precision,
            skip_training: c.skip_training,
            sample_every: c.sample_every,
            checkpoint_every: c.checkpoint_every,
            fid_every: c.fid_every,
            fid_share: c.fid_share,
            fid_samples: if page { PAGE_FID_SAMPLES } else { c.fid_samples },
            max_minutes: if page { PAGE_MAX_MINUTES } else { c.max_minutes },
            grid_images: c.grid_images,
            grid_steps: c.grid_steps,
            out,
        }
    }

    /// The run's configuration (as `wgdiff train` with the same flags would make it).
    pub fn config(&self) -> TrainConfig {
        TrainConfig {
            preset: self.preset.clone(),
            data: self.data.clone(),
            batch: self.batch,
            lr: self.lr,
            warmup: self.warmup,
            steps: self.steps,
            seed: self.seed,
            precision: self.precision,
            skip_training: self.skip_training,
            sample_every: self.sample_every,
            checkpoint_every: self.checkpoint_every,
            fid_every: self.fid_every,
            fid_share: self.fid_share,
            fid_samples: self.fid_samples,
            max_minutes: self.max_minutes,
            grid_images: self.grid_images,
            grid_steps: self.grid_steps,
            out: PathBuf::from(&self.out),
            ..TrainConfig::default()
        }
    }

    /// The settings a page address or `wgdiff gui --set` may give.
    pub const KEYS: [&'static str; 15] = [
        "preset",
        "data",
        "batch",
        "lr",
        "warmup",
        "steps",
        "seed",
        "sample-every",
        "checkpoint-every",
        "fid-every",
        "fid-share",
        "max-minutes",
        "grid-images",
        "grid-steps",
        "out",
    ];

    /// Sets `key` (one of [`Self::KEYS`]) from its text.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "preset" => {
                crate::models::preset(value)?;
                self.preset = value.to_string();
            }
            "data" => self.data = value.to_string(),
            "batch" => self.batch = parse_setting(key, value)?,
            "lr" => {
                let lr: f32 = parse_setting(key, value)?;
                if !(lr > 0.0 && lr.is_finite()) {
                    return Err(crate::Error::Config(format!(
                        "setting `lr`: `{value}` is not a learning rate (a positive number, e.g. 4e-3)"
                    )));
                }
                self.lr = lr;
            }
            "warmup" => self.warmup = parse_setting(key, value)?,
            "steps" => self.steps = parse_setting(key, value)?,
            "seed" => self.seed = parse_setting(key, value)?,
            "sample-every" => self.sample_every = parse_setting(key, value)?,
            "checkpoint-every" => self.checkpoint_every = parse_setting(key, value)?,
            "fid-every" => self.fid_every = parse_setting(key, value)?,
            "fid-share" => self.fid_share = parse_setting(key, value)?,
            "max-minutes" => self.max_minutes = parse_setting(key, value)?,
            "grid-images" => self.grid_images = parse_setting(key, value)?,
            "grid-steps" => self.grid_steps = parse_setting(key, value)?,
            "out" => self.out = value.to_string(),
            _ => return Err(super::unknown_setting("train", key, &Self::KEYS)),
        }
        Ok(())
    }
}

/// Runs (or, with `resume`, continues) training as `wgdiff train` does: a [`TrainingRun`]
/// advanced one step at a time, its events sent to the view; while `paused` it idles; a
/// cancelled job asks the run to stop (it writes the checkpoint, so `wgdiff train --resume`
/// continues), and the checkpoint is handed to the user (a download in a page).
pub async fn run_training(
    gpu: Gpu,
    config: TrainConfig,
    resume: Option<PathBuf>,
    paused: Arc<AtomicBool>,
    job: JobContext<TrainEvent>,
) -> Result<()> {
    let out = config.out.clone();
    let mut trainer = platform::start_training(&gpu, config, resume.as_deref()).await?;
    trainer.state.config.out = out.clone();
    let fid = match trainer.scores_mnist_fid() {
        true => Some(platform::mnist_fid(&gpu).await?),
        false => None,
    };
    let mut run = TrainingRun::new(trainer, fid, platform::run_files(&out))?;
    loop {
        if paused.load(Ordering::Relaxed) && job.check().is_ok() {
            platform::sleep(50).await;
            continue;
        }
        let going = run
            .advance(job.check().is_err(), &mut |event| job.send(event))
            .await?;
        // the step's work runs before the next (its times are real; in a page, the event loop runs)
        gpu.finish().await?;
        if !going {
            break;
        }
    }
    platform::deliver(&out.join(CHECKPOINT_FILE))
}

/// How long a closing window waits for a stopped run to write its checkpoint (a step of the
/// largest preset on a CPU adapter takes under a minute).
#[cfg(not(target_arch = "wasm32"))]
pub const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(180);

/// The train view's state.
pub struct TrainView {
    pub settings: TrainSettings,
    job: Option<Job<TrainEvent>>,
    paused: Arc<AtomicBool>,
    /// (step, loss) of the run shown.
    pub losses: Vec<[f64; 2]>,
    /// The steps of this run (`--step-log`).
    pub steps: StepLog,
    /// Wall seconds of recent steps (the first step, which compiles kernels and counts FLOPs,
    /// is left out).
    step_seconds: Vec<f64>,
    flops_per_step: Option<f64>,
    planned: usize,
    batch: usize,
    parameters: usize,
    pub fid: Vec<FidRecord>,
    grid: Option<(Tensor, usize)>,
    texture: Option<(GridTexture, GridLayout)>,
    drawn: bool,
    /// The checkpoints the run wrote, as the run's files name them.
    pub checkpoints: Vec<String>,
    pub message: Option<Result<String, String>>,
}

impl TrainView {
    pub fn new(shared: &Shared) -> TrainView {
        TrainView {
            settings: TrainSettings::defaults(
                shared.options.out.join("train").display().to_string(),
                platform::IN_PAGE,
            ),
            job: None,
            paused: Arc::new(AtomicBool::new(false)),
            losses: Vec::new(),
            steps: StepLog::default(),
            step_seconds: Vec::new(),
            flops_per_step: None,
            planned: 0,
            batch: 0,
            parameters: 0,
            fid: Vec::new(),
            grid: None,
            texture: None,
            drawn: false,
            checkpoints: Vec::new(),
            message: None,
        }
    }

    pub fn is_running(&self) -> bool {
        is_running(&self.job)
    }

    /// Whether a sample grid of the run is shown.
    pub fn has_grid(&self) -> bool {
        self.grid.is_some()
    }

    /// Stops the run at its next step boundary; the job then writes the checkpoint.
    pub fn stop(&self) {
        self.paused.store(false, Ordering::Relaxed);
        if let Some(job) = &self.job {
            job.cancel();
        }
    }

    /// After [`TrainView::stop`], waits (at most [`CLOSE_WAIT`]) for the run to write its
    /// checkpoint: the window is closing, and the process would end before the run's worker
    /// wrote it.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait_for_checkpoint(&mut self) {
        let Some(job) = self.job.as_mut().filter(|job| job.running()) else {
            return;
        };
        eprintln!("the window closed: the training run writes its checkpoint after the current step");
        match job.wait_until_ended(CLOSE_WAIT) {
            Some(Ok(())) => {}
            Some(Err(e)) => eprintln!("error: the training run: {e}"),
            None => eprintln!(
                "error: the training run did not end within {} s of the window closing; its checkpoint is \
                 the last one written before",
                CLOSE_WAIT.as_secs()
            ),
        }
    }

    /// Starts a run with the view's settings (`resume`: continue `<out>/checkpoint.safetensors`).
    pub fn start(&mut self, ctx: &egui::Context, shared: &Shared, resume: bool) {
        if self.is_running() {
            return;
        }
        let mut config = self.settings.config();
        if !resume {
            // As `wgdiff train`: the default folder moves on to a free numbered one, a chosen
            // folder holding another run is refused (never replaced).
            let how = match config.out == shared.options.out.join("train") {
                true => OutRequest::Default,
                false => OutRequest::Chosen { force: false },
            };
            match run_folder(&config.out, how, None) {
                Ok(folder) => {
                    config.out = folder;
                    self.settings.out = config.out.display().to_string();
                }
                Err(_) => {
                    self.message = Some(Err(format!(
                        "{} already holds a run ({}): choose another out folder, or Resume it",
                        config.out.display(),
                        config.out.join(CHECKPOINT_FILE).display()
                    )));
                    return;
                }
            }
        }
        let from = resume.then(|| config.out.join(CHECKPOINT_FILE));
        if let Some(path) = from.as_ref().filter(|p| !platform::exists(p)) {
            self.message = Some(Err(format!(
                "no checkpoint to resume at {}: start a run first",
                path.display()
            )));
            return;
        }
        self.losses.clear();
        self.steps = StepLog::default();
        self.step_seconds.clear();
        self.fid.clear();
        self.checkpoints.clear();
        self.message = Some(Ok("starting: loading data and building the model".into()));
        self.paused.store(false, Ordering::Relaxed);
        let (gpu, paused) = (shared.gpu.clone(), self.paused.clone());
        self.job = Some(Job::start(ctx, "training", move |job| {
            run_training(gpu, config, from, paused, job)
        }));
    }

    pub fn poll(&mut self, _ctx: &egui::Context, shared: &Shared) {
        for event in self.job.as_mut().map(Job::poll).unwrap_or_default() {
            if let Event::Message(e) = &event {
                self.steps.observe(e);
            }
            match event {
                Event::Message(TrainEvent::Started {
                    parameters,
                    first_step,
                    steps,
                    batch,
                    earlier_losses,
                }) => {
                    self.parameters = parameters;
                    self.planned = steps;
                    self.batch = batch;
                    self.losses = earlier_losses
                        .iter()
                        .enumerate()
                        .map(|(i, &l)| [(i + 1) as f64, l as f64])
                        .collect();
                    self.message = Some(Ok(format!("training from step {first_step}")));
                }
                Event::Message(TrainEvent::Step {
                    step,
                    loss,
                    seconds,
                    elapsed,
                    flops,
                    ..
                }) => {
                    if !self.losses.is_empty() || step > 1 {
                        self.step_seconds.push(seconds);
                    }
                    self.losses.push([step as f64, loss as f64]);
                    self.flops_per_step = flops;
                    platform::announce(
                        "train",
                        &serde_json::json!({
                            "status": "running",
                            "step": step,
                            "steps": self.planned,
                            "loss": loss,
                            "seconds": seconds,
                            "elapsed": elapsed,
                            "fid": self.fid,
                        })
                        .to_string(),
                    );
                }
                Event::Message(TrainEvent::Grid { step, images, .. }) => {
                    self.grid = Some((images, step));
                    self.drawn = false;
                }
                Event::Message(TrainEvent::Fid { record, .. }) => self.fid.push(record),
                Event::Message(TrainEvent::Checkpoint { file, last, .. }) => {
                    self.message = Some(Ok(match last {
                        true => format!("checkpoint written: {file}; sampling the final grid"),
                        false => format!("checkpoint written: {file}"),
                    }));
                    // (the run's last checkpoint is listed by its end)
                    if !last {
                        self.checkpoints.push(file);
                    }
                }
                Event::Message(TrainEvent::Diverged { message, .. }) => {
                    self.message = Some(Err(message));
                }
                Event::Message(TrainEvent::Ended {
                    step,
                    why,
                    checkpoint,
                }) => {
                    let why = match why {
                        RunEnd::Completed => "finished",
                        RunEnd::OutOfTime => "time budget reached",
                        RunEnd::StopRequested => "stopped",
                    };
                    self.message = Some(Ok(format!(
                        "{why} at step {step}; checkpoint {checkpoint} (`wgdiff train --resume {checkpoint}` \
                         continues it)"
                    )));
                    self.checkpoints.push(checkpoint);
                }
                Event::Finished(Ok(())) => {
                    let losses: Vec<f64> = self.losses.iter().map(|l| l[1]).collect();
                    let step_seconds = &self.step_seconds;
                    platform::announce(
                        "train",
                        &serde_json::json!({
                            "status": "done",
                            "step": self.step(),
                            "batch": self.batch,
                            "losses": losses,
                            "step_seconds": step_seconds,
                            "fid": self.fid,
                            "checkpoint": self.checkpoints.last(),
                        })
                        .to_string(),
                    );
                }
                Event::Finished(Err(e)) => {
                    platform::announce(
                        "train",
                        &serde_json::json!({ "status": "failed", "error": e }).to_string(),
                    );
                    self.message = Some(Err(e));
                }
            }
        }
        if let Err(e) = self.draw_grid(shared) {
            self.message = Some(Err(e.to_string()));
        }
    }

    fn step(&self) -> usize {
        self.losses.last().map_or(0, |l| l[0] as usize)
    }

    fn draw_grid(&mut self, shared: &Shared) -> Result<()> {
        let Some((images, _)) = &self.grid else {
            return Ok(());
        };
        if self.drawn {
            return Ok(());
        }
        let shape: [usize; 4] = images.shape().try_into().unwrap_or([1, 1, 1, 1]);
        let layout = GridLayout {
            columns: grid_columns(shape[0]) as u32,
            scale: 3,
            gap: 3,
        };
        let size = layout.size(shape);
        if self
            .texture
            .as_ref()
            .is_none_or(|(t, l)| t.size != size || *l != layout)
        {
            if let Some((t, _)) = self.texture.take() {
                t.free();
            }
            self.texture = Some((GridTexture::new(&shared.render, size), layout));
        }
        let (texture, layout) = self.texture.as_ref().expect("made above");
        texture.draw(&shared.gpu, images, *layout)?;
        self.drawn = true;
        Ok(())
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &Shared) {
        let ctx = ui.ctx().clone();
        let running = self.is_running();
        ui.add_enabled_ui(!running, |ui| self.settings_ui(ui, &shared.gpu));
        ui.horizontal(|ui| {
            if ui.add_enabled(!running, egui::Button::new("Start")).clicked() {
                self.start(&ctx, shared, false);
            }
            let paused = self.paused.load(Ordering::Relaxed);
            let label = if paused { "Resume" } else { "Pause" };
            if ui.add_enabled(running, egui::Button::new(label)).clicked() {
                self.paused.store(!paused, Ordering::Relaxed);
            }
            if ui
                .add_enabled(running, egui::Button::new("Stop (writes the checkpoint)"))
                .clicked()
            {
                self.stop();
            }
            if ui
                .add_enabled(!running, egui::Button::new("Continue from checkpoint"))
                .clicked()
            {
                self.start(&ctx, shared, true);
            }
        });
        super::message_label(ui, &self.message);
        ui.label(self.progress_line());
        ui.horizontal_top(|ui| {
            ui.vertical(|ui| {
                ui.set_width(620.0);
                self.loss_plot(ui);
                if !self.fid.is_empty() {
                    self.fid_plot(ui);
                }
            });
            if let (Some((texture, _)), Some((_, step))) = (&self.texture, &self.grid) {
                ui.vertical(|ui| {
                    ui.label(format!("EMA samples after step {step}"));
                    texture.show(ui);
                });
            }
        });
    }

    /// Step, loss, img/s, GFLOP/s and ETA.
    fn progress_line(&self) -> String {
        let Some(&[step, loss]) = self.losses.last() else {
            return "no run yet".into();
        };
        let mut recent: Vec<f64> = self.step_seconds.iter().rev().take(20).copied().collect();
        recent.sort_by(f64::total_cmp);
        let per_step = crate::median::percentile(&recent, 0.5);
        let mut line = format!("step {step}/{}  loss {loss:.4}", self.planned);
        if per_step.is_finite() && per_step > 0.0 {
            let left = self.planned.saturating_sub(step as usize) as f64 * per_step;
            line += &format!("  {:.1} img/s", self.batch as f64 / per_step);
            if let Some(flops) = self.flops_per_step {
                line += &format!("  {:.2} GFLOP/s", flops * 1e-9 / per_step);
            }
            line += &format!("  {per_step:.2} s/step  ETA {}", clock(left));
        }
        if self.parameters > 0 {
            line += &format!("  ({} parameters)", self.parameters);
        }
        line
    }

    fn loss_plot(&self, ui: &mut egui::Ui) {
        let mut smoothed = Vec::with_capacity(self.losses.len());
        let mut average = None;
        for &[step, loss] in &self.losses {
            let a = average.map_or(loss, |a: f64| 0.9 * a + 0.1 * loss);
            average = Some(a);
            smoothed.push([step, a]);
        }
        super::plots::plot("loss")
            .height(260.0)
            .legend(Legend::default())
            .x_axis_label("step")
            .y_axis_label("loss")
            .include_y(0.0)
            .show(ui, |plot| {
                let thin = |points: &[[f64; 2]]| PlotPoints::from(thinned(points, MAX_SERIES_POINTS));
                plot.line(Line::new("loss", thin(&self.losses)));
                plot.line(Line::new("smoothed (EMA 0.9)", thin(&smoothed)).width(2.0));
            });
    }

    fn fid_plot(&self, ui: &mut egui::Ui) {
        let points: Vec<[f64; 2]> = self.fid.iter().map(|r| [r.step as f64, r.fid]).collect();
        super::plots::plot("fid")
            .height(160.0)
            .x_axis_label("step")
            .y_axis_label(format!("live {}", mnist_fid_label(self.settings.fid_samples)))
            .show(ui, |plot| {
                plot.line(Line::new("MNIST-FID", PlotPoints::from(points.clone())));
                plot.points(Points::new("evaluations", PlotPoints::from(points)).radius(3.0));
            });
    }

    fn settings_ui(&mut self, ui: &mut egui::Ui, gpu: &Gpu) {
        let s = &mut self.settings;
        ui.horizontal(|ui| {
            egui::ComboBox::from_label("preset")
                .selected_text(s.preset.clone())
                .show_ui(ui, |ui| {
                    for name in PRESETS {
                        ui.selectable_value(&mut s.preset, name.to_string(), name);
                    }
                });
            let label = ui.label("data");
            ui.add(egui::TextEdit::singleline(&mut s.data).desired_width(120.0))
                .labelled_by(label.id);
            ui.add(egui::DragValue::new(&mut s.batch).range(1..=512).prefix("batch "));
            // (dragging stays in a sensible range; a value given with --set or the page's
            // address is kept, however large)
            ui.add(
                egui::DragValue::new(&mut s.lr)
                    .range(1e-6..=1.0)
                    .clamp_existing_to_range(false)
                    .speed(1e-5)
                    .prefix("lr "),
            );
            ui.add(
                egui::DragValue::new(&mut s.warmup)
                    .range(0..=100_000)
                    .prefix("warm-up ")
                    .suffix(" steps"),
            );
            ui.add(
                egui::DragValue::new(&mut s.steps)
                    .range(1..=1_000_000)
                    .prefix("steps "),
            );
            ui.add(egui::DragValue::new(&mut s.seed).prefix("seed "));
        });
        ui.horizontal(|ui| {
            ui.selectable_value(&mut s.precision, Precision::F32, "f32");
            let f16 = ui.add_enabled(
                gpu.has_f16(),
                egui::Button::selectable(s.precision == Precision::F16, "f16 (mixed)"),
            );
            if f16.clicked() {
                s.precision = Precision::F16;
            }
            ui.separator();
            let mut consistent = matches!(s.skip_training, Some(SkipTraining::Consistent { .. }));
            egui::ComboBox::from_label("skip training")
                .selected_text(match s.skip_training {
                    None => "off".to_string(),
                    Some(SkipTraining::Uniform) => "uniform".to_string(),
                    Some(SkipTraining::Consistent { exponent }) => format!("consistent:{exponent}"),
                })
                .show_ui(ui, |ui| {
                    ui.selectable_value(&mut s.skip_training, None, "off");
                    ui.selectable_value(&mut s.skip_training, Some(SkipTraining::Uniform), "uniform");
                    if ui.selectable_label(consistent, "consistent:2").clicked() {
                        s.skip_training = Some(SkipTraining::Consistent { exponent: 2.0 });
                        consistent = true;
                    }
                });
            if let (true, Some(SkipTraining::Consistent { exponent })) = (consistent, &mut s.skip_training) {
                ui.add(egui::Slider::new(exponent, 0.5..=5.0).text("c"));
            }
        });
        ui.horizontal(|ui| {
            ui.add(
                egui::DragValue::new(&mut s.sample_every)
                    .prefix("grid every ")
                    .suffix(" steps"),
            );
            ui.add(
                egui::DragValue::new(&mut s.checkpoint_every)
                    .prefix("checkpoint every ")
                    .suffix(" steps"),
            );
            ui.add(
                egui::DragValue::new(&mut s.fid_every)
                    .prefix("MNIST-FID every ")
                    .suffix(" steps"),
            );
            ui.add_enabled(
                s.fid_every == 0,
                egui::DragValue::new(&mut s.fid_share)
                    .range(0.0..=crate::train::MAX_FID_SHARE)
                    .speed(0.01)
                    .prefix("else live, at most ")
                    .custom_formatter(|v, _| format!("{:.0}", 100.0 * v))
                    .custom_parser(|t| {
                        t.trim_end_matches('%')
                            .trim()
                            .parse::<f64>()
                            .ok()
                            .map(|v| v / 100.0)
                    })
                    .suffix("% of the time"),
            )
            .on_hover_text(
                "Live MNIST-FID: score the EMA network (and show its grid) as often as keeps that work at \
                 this share of the run's time; 0 = off. \"MNIST-FID every N steps\" replaces it.",
            );
            ui.add(
                egui::DragValue::new(&mut s.fid_samples)
                    .range(2..=10_000)
                    .prefix("FID samples "),
            );
            ui.add(
                egui::DragValue::new(&mut s.max_minutes)
                    .range(0.0..=100_000.0)
                    .speed(0.1)
                    .prefix("at most ")
                    .suffix(" min"),
            );
            let label = ui.label("out");
            ui.add(egui::TextEdit::singleline(&mut s.out).desired_width(160.0))
                .labelled_by(label.id);
        });
        if platform::IN_PAGE {
            ui.label(format!(
                "In the page a run trains on MNIST's test split (the data the page fetches) for at most \
                 {PAGE_MAX_MINUTES} min by default; `wgdiff train` runs the same recipe on the training \
                 split for {} min.",
                TrainConfig::default().max_minutes
            ));
        }
    }
}

/// Seconds as h:mm:ss.
pub(super) fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}
