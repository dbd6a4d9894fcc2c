//! The denoise view: sample a checkpoint step by step and watch x_t and the predicted x_0 of
//! every step (drawn on the device), scrub and play the recorded steps, branch from any step
//! with other settings (the step debugger, `branches`), export PNGs and GIFs.

use super::branches::Branches;
use super::export::{export_frames, save_samples};
use super::grid_texture::{GridLayout, GridTexture};
use super::jobs::{is_running, Event, Job, JobContext};
use super::sampling::{
    grid_layout, read_schedule, sample_job, DenoiseMessage, DenoiseSettings, Frame, LoadedSchedule, ModelInfo,
};
use super::{platform, Shared};
use crate::data::grid_columns;
use crate::diffusion::{log_snr, vp_times, Sampler, SkipSchedule, Spacing};
use crate::models::SkipType;
use crate::{DType, Result, Tensor};
use eframe::egui;
use std::path::PathBuf;

/// The denoise view's state.
pub struct DenoiseView {
    pub settings: DenoiseSettings,
    pub model: Option<ModelInfo>,
    job: Option<Job<DenoiseMessage>>,
    /// Every step of the last run, in order.
    pub frames: Vec<Frame>,
    /// The step shown (the timeline slider's value).
    pub current: usize,
    /// Show each new step as it arrives.
    follow: bool,
    playing: bool,
    last_advance: f64,
    textures: Option<(GridTexture, GridTexture, GridLayout)>,
    /// The run (None: the original, else a branch) and step drawn into the textures.
    drawn: Option<(Option<usize>, usize)>,
    /// The sampler's total step count of the run (for "step i of S").
    planned_steps: usize,
    pub message: Option<Result<String, String>>,
    export_dir: String,
    export: Option<Job<DenoiseMessage>>,
    run_seconds: Option<f64>,
    /// The last run's images.
    samples: Option<Tensor>,
    /// Save the samples once the run ends (an autorun of `wgdiff gui` or the page).
    pub save_when_done: bool,
    /// Runs still to start after this one (the `repeat` setting), and runs finished so far.
    runs_left: usize,
    pub runs_completed: usize,
    /// The step debugger: branches from the recorded steps, and which run the timeline shows.
    pub branches: Branches,
    /// The settings' schedule file as last read (its timesteps plotted beside uniform ones).
    pub schedule: Option<LoadedSchedule>,
    /// The schedule file field: a shipped searched schedule or any path.
    schedule_path: String,
}

impl DenoiseView {
    pub fn new(shared: &Shared) -> DenoiseView {
        let settings = DenoiseSettings {
            checkpoint: shared.options.checkpoint.display().to_string(),
            sampler: "ddpm".into(),
            steps: crate::diffusion::DEFAULT_SAMPLER_STEPS,
            seed: 0,
            count: 16,
            class: None,
            guidance: None,
            skip_type: None,
            skip_exponent: 0.0,
            cache_interval: 1,
            cache_depth: None,
            pause_after: None,
            precision: DType::F32,
            schedule: None,
            repeat: 1,
        };
        DenoiseView {
            settings: settings.clone(),
            model: None,
            job: None,
            frames: Vec::new(),
            current: 0,
            follow: true,
            playing: false,
            last_advance: 0.0,
            textures: None,
            drawn: None,
            planned_steps: 0,
            message: None,
            export_dir: shared.options.out.join("frames").display().to_string(),
            export: None,
            run_seconds: None,
            samples: None,
            save_when_done: false,
            runs_left: 0,
            runs_completed: 0,
            branches: Branches::new(settings.clone()),
            schedule: None,
            schedule_path: crate::diffusion::skip_schedule::SHIPPED_TIMESTEP_SCHEDULES[0].into(),
        }
    }

    /// Whether sampling (a run or a branch), or the export of its frames or samples, runs.
    pub fn is_running(&self) -> bool {
        is_running(&self.job) || is_running(&self.export) || self.branches.is_running()
    }

    /// Cancels the run (and the runs `repeat` would start after it) and any branch.
    pub fn cancel(&mut self) {
        self.runs_left = 0;
        if let Some(job) = &self.job {
            job.cancel();
        }
        self.branches.cancel();
    }

    /// The steps the timeline shows: the run's, or the shown branch's (the run's steps up to
    /// where it branched, then its own).
    pub fn shown_frames(&self) -> &[Frame] {
        self.branches.shown().map_or(&self.frames, |b| &b.frames)
    }

    /// Loads the checkpoint's description (sampler choices, classes, levels) in the background.
    pub fn load_info(&mut self, ctx: &egui::Context, shared: &Shared) {
        if self.is_running() {
            return;
        }
        let (gpu, path) = (shared.gpu.clone(), PathBuf::from(&self.settings.checkpoint));
        self.job = Some(Job::start(ctx, "load", move |job| async move {
            let loaded = platform::load_model(&gpu, &path, None).await?;
            job.send(DenoiseMessage::Loaded(Box::new(ModelInfo::of(path, &loaded))));
            Ok(())
        }));
    }

    /// Starts sampling with the current settings (`repeat` runs back to back).
    pub fn run(&mut self, ctx: &egui::Context, shared: &Shared) {
        if self.is_running() {
            return;
        }
        self.runs_left = self.settings.repeat - 1;
        self.start_run(ctx, shared);
    }

    fn start_run(&mut self, ctx: &egui::Context, shared: &Shared) {
        self.frames.clear();
        self.current = 0;
        self.drawn = None;
        self.follow = true;
        self.playing = false;
        self.run_seconds = None;
        self.samples = None;
        self.message = None;
        self.planned_steps = self.settings.steps;
        self.branches.reset(self.settings.clone());
        let gpu = shared.gpu.clone();
        let settings = self.settings.clone();
        self.job = Some(Job::start(ctx, "sampling", move |job| {
            sample_job(gpu, settings, None, job)
        }));
    }

    /// Starts a branch from the shown run's step `self.current` with the step debugger's
    /// settings.
    pub fn branch(&mut self, ctx: &egui::Context, shared: &Shared) {
        if self.is_running() {
            return;
        }
        let frames = self.shown_frames().to_vec();
        match self.branches.start(ctx, shared, &frames, self.current) {
            Ok(()) => {
                self.current = self.current.min(frames.len().saturating_sub(1));
                self.message = None;
            }
            Err(e) => self.message = Some(Err(e.to_string())),
        }
    }

    /// Takes the jobs' messages.
    pub fn poll(&mut self, ctx: &egui::Context, shared: &Shared) {
        let mut events = self.job.as_mut().map(Job::poll).unwrap_or_default();
        events.extend(self.export.as_mut().map(Job::poll).unwrap_or_default());
        for event in events {
            match event {
                Event::Message(DenoiseMessage::Loaded(info)) => {
                    let info = *info;
                    if let Some(steps) = info.distilled_steps {
                        self.settings.sampler = "ddim".into();
                        self.settings.steps = steps;
                    }
                    let fits = |name: &str| name.parse::<Sampler>().is_ok_and(|s| s.fits(&info.process));
                    if !fits(&self.settings.sampler) {
                        self.settings.sampler = crate::diffusion::default_sampler(&info.process)
                            .name()
                            .to_string();
                    }
                    if info.classes.is_none() {
                        self.settings.class = None;
                    }
                    if self.model.as_ref().is_some_and(|m| m.path != info.path) {
                        // another model: its own guidance until the slider moves
                        self.settings.guidance = None;
                    }
                    self.settings.checkpoint = info.path.display().to_string();
                    self.model = Some(info);
                }
                Event::Message(DenoiseMessage::Frame(frame)) => {
                    platform::announce(
                        "denoise",
                        &serde_json::json!({
                            "status": "running",
                            "step": frame.index + 1,
                            "steps": self.planned_steps,
                        })
                        .to_string(),
                    );
                    self.frames.push(frame);
                    if self.follow {
                        self.current = self.frames.len() - 1;
                    }
                }
                Event::Message(DenoiseMessage::Done {
                    evaluations,
                    seconds,
                    samples,
                }) => {
                    self.run_seconds = Some(seconds);
                    self.message = Some(Ok(format!(
                        "{} images, {} network evaluations in {seconds:.1} s",
                        self.settings.count, evaluations
                    )));
                    let step_ms: Vec<f64> = self.frames.iter().map(|f| f.seconds * 1e3).collect();
                    platform::announce(
                        "denoise",
                        &serde_json::json!({
                            "status": "done",
                            "images": self.settings.count,
                            "evaluations": evaluations,
                            "seconds": seconds,
                            "step_ms": step_ms,
                        })
                        .to_string(),
                    );
                    self.samples = Some(samples);
                    self.runs_completed += 1;
                    if std::mem::take(&mut self.save_when_done) {
                        self.save_samples(ctx);
                    }
                }
                Event::Message(DenoiseMessage::Paused(step)) => {
                    platform::announce(
                        "denoise",
                        &serde_json::json!({ "status": "paused", "step": step }).to_string(),
                    );
                    self.message = Some(Ok(format!(
                        "paused after step {step}: change the settings below and branch from any recorded step"
                    )));
                }
                Event::Message(DenoiseMessage::Exported(text)) => self.message = Some(Ok(text)),
                Event::Message(DenoiseMessage::Schedule(loaded)) => {
                    // the file decides the sampler and the steps
                    self.settings.sampler = loaded.schedule.sampler.name().to_string();
                    self.settings.steps = loaded.schedule.steps();
                    self.settings.schedule = Some(loaded.path.clone());
                    self.schedule_path = loaded.path.clone();
                    if self.frames.is_empty() {
                        // (a run's file arrives before its first step: the run is the file's)
                        self.planned_steps = loaded.schedule.steps();
                        self.branches.reset(self.settings.clone());
                    }
                    self.schedule = Some(*loaded);
                }
                Event::Finished(Err(e)) => {
                    self.save_when_done = false;
                    self.runs_left = 0;
                    platform::announce(
                        "denoise",
                        &serde_json::json!({ "status": "failed", "error": e }).to_string(),
                    );
                    self.message = Some(Err(e));
                }
                Event::Finished(Ok(())) => {}
            }
        }
        if self.runs_left > 0 && !self.is_running() {
            self.runs_left -= 1;
            self.start_run(ctx, shared);
        }
        match self.branches.poll(shared, &self.frames) {
            Ok(true) if self.follow => self.current = self.shown_frames().len().saturating_sub(1),
            Ok(_) => {}
            Err(e) => self.message = Some(Err(e)),
        }
        let shown = self.shown_frames().len();
        if self.playing && shown > 0 {
            let now = ctx.input(|i| i.time);
            if now - self.last_advance >= 0.12 {
                self.last_advance = now;
                self.current = (self.current + 1) % shown;
            }
            ctx.request_repaint_after(std::time::Duration::from_millis(120));
        }
        if let Err(e) = self.draw_current(shared) {
            self.message = Some(Err(e.to_string()));
        }
    }

    /// Draws the shown step into the textures when it changed (a compute pass, no readback).
    fn draw_current(&mut self, shared: &Shared) -> Result<()> {
        let key = (self.branches.shown_index(), self.current);
        let Some(frame) = self.shown_frames().get(self.current).cloned() else {
            return Ok(());
        };
        if self.drawn == Some(key) {
            return Ok(());
        }
        let shape: [usize; 4] = frame.x.shape().try_into().unwrap_or([1, 1, 1, 1]);
        let layout = grid_layout(shape, 4);
        let size = layout.size(shape);
        if self
            .textures
            .as_ref()
            .is_none_or(|(a, _, l)| a.size != size || *l != layout)
        {
            if let Some((a, b, _)) = self.textures.take() {
                a.free();
                b.free();
            }
            self.textures = Some((
                GridTexture::new(&shared.render, size),
                GridTexture::new(&shared.render, size),
                layout,
            ));
        }
        let (xt, x0, layout) = self.textures.as_ref().expect("made above");
        xt.draw(&shared.gpu, &frame.x, *layout)?;
        if let Some(pred) = &frame.x0 {
            x0.draw(&shared.gpu, pred, *layout)?;
        }
        self.drawn = Some(key);
        Ok(())
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &Shared) {
        let ctx = ui.ctx().clone();
        self.settings_ui(ui, shared);
        ui.separator();
        ui.horizontal(|ui| {
            let running = self.is_running();
            if ui.add_enabled(!running, egui::Button::new("Run")).clicked() {
                self.run(&ctx, shared);
            }
            if ui.add_enabled(running, egui::Button::new("Cancel")).clicked() {
                self.cancel();
            }
            ui.separator();
            let label = ui.label("export to");
            ui.text_edit_singleline(&mut self.export_dir)
                .labelled_by(label.id);
            let can_export = !self.shown_frames().is_empty() && !running;
            if ui
                .add_enabled(
                    can_export && self.shown_samples().is_some(),
                    egui::Button::new("Save samples PNG"),
                )
                .on_hover_text("the shown run's images as the grid `wgdiff sample` writes")
                .clicked()
            {
                self.save_samples(&ctx);
            }
            if ui
                .add_enabled(can_export, egui::Button::new("Export PNGs + GIFs"))
                .on_hover_text(
                    "every step of the shown run (a branch: the run's steps up to it, then its own)",
                )
                .clicked()
            {
                self.start_export(&ctx);
            }
        });
        super::message_label(ui, &self.message);
        self.grid_ui(ui);
        self.timeline_ui(ui);
        if !self.frames.is_empty() {
            ui.separator();
            self.debugger_ui(ui, shared);
        }
    }

    /// The step debugger: settings for the steps left, "Branch from step k", and every run
    /// side by side (pick one to show it on the timeline, export it).
    fn debugger_ui(&mut self, ui: &mut egui::Ui, shared: &Shared) {
        let ctx = ui.ctx().clone();
        ui.strong("Step debugger");
        let model = self.model.as_ref();
        let settings = &mut self.branches.settings;
        let f16 = shared.gpu.has_f16();
        ui.push_id("branch settings", |ui| {
            sampling_controls(ui, settings, model, f16)
        });
        let step = self.current + 1;
        let branchable = self
            .shown_frames()
            .get(self.current)
            .is_some_and(|f| f.resume_t.is_some());
        ui.horizontal(|ui| {
            let button = egui::Button::new(format!("Branch from step {step}"));
            if ui
                .add_enabled(branchable && !self.is_running(), button)
                .on_hover_text("sample the steps after this one with the settings above; the run is kept")
                .clicked()
            {
                self.branch(&ctx, shared);
            }
            if !branchable {
                ui.label("(the last step leaves nothing to branch)");
            }
        });
        if let Some(export) = self.branches.runs_ui(ui, &self.frames, self.run_seconds) {
            self.current = self.current.min(self.shown_frames().len().saturating_sub(1));
            self.follow = false;
            if export {
                self.start_export(&ctx);
            }
        }
    }

    fn settings_ui(&mut self, ui: &mut egui::Ui, shared: &Shared) {
        let ctx = ui.ctx().clone();
        ui.horizontal(|ui| {
            let label = ui.label("checkpoint");
            ui.add(egui::TextEdit::singleline(&mut self.settings.checkpoint).desired_width(380.0))
                .labelled_by(label.id);
            if ui
                .add_enabled(!self.is_running(), egui::Button::new("Load"))
                .clicked()
            {
                self.load_info(&ctx, shared);
            }
            if platform::IN_PAGE
                && ui
                    .add_enabled(!self.is_running(), egui::Button::new("Open a file..."))
                    .on_hover_text("load a checkpoint from this computer (e.g. one `wgdiff train` wrote)")
                    .clicked()
            {
                self.open_file(&ctx, shared);
            }
        });
        match &self.model {
            Some(info) => ui.label(info.summary()),
            None => ui.label("no model loaded"),
        };
        let model = self.model.as_ref();
        let s = &mut self.settings;
        ui.horizontal(|ui| {
            ui.add(egui::DragValue::new(&mut s.seed).prefix("seed "));
            ui.add(egui::DragValue::new(&mut s.count).range(1..=64).prefix("images "));
            if let Some(k) = model.and_then(|m| m.classes) {
                egui::ComboBox::from_label("class")
                    .selected_text(s.class.map_or("all (mixed)".to_string(), |c| c.to_string()))
                    .show_ui(ui, |ui| {
                        ui.selectable_value(&mut s.class, None, "all (mixed)");
                        for c in 0..k as u32 {
                            ui.selectable_value(&mut s.class, Some(c), c.to_string());
                        }
                    });
            }
            let mut pause = s.pause_after.is_some();
            ui.checkbox(&mut pause, "pause").on_hover_text(
                "stop after that step to branch from it with other settings (the step debugger)",
            );
            let mut step = s.pause_after.unwrap_or(s.steps / 2).max(1);
            ui.add_enabled(
                pause,
                egui::DragValue::new(&mut step)
                    .range(1..=s.steps.max(1))
                    .prefix("after step "),
            );
            s.pause_after = pause.then_some(step);
        });
        sampling_controls(ui, s, model, shared.gpu.has_f16());
        let levels = model.map_or(1, |m| m.levels);
        ui.add_enabled_ui(levels > 1, |ui| {
            egui::ComboBox::from_label("skip type")
                .selected_text(s.skip_type.map_or("as trained".to_string(), |t| t.to_string()))
                .show_ui(ui, |ui| {
                    ui.selectable_value(&mut s.skip_type, None, "as trained");
                    for t in [SkipType::Zero, SkipType::Duplicate, SkipType::Interpolate] {
                        ui.selectable_value(&mut s.skip_type, Some(t), t.to_string());
                    }
                });
        });
        self.schedule_ui(ui);
    }

    /// The schedule file a run follows (a searched timestep or skip schedule), and its
    /// timesteps on the noise-level axis beside the sampler's uniform ones.
    fn schedule_ui(&mut self, ui: &mut egui::Ui) {
        let ctx = ui.ctx().clone();
        // the sampler or steps changed by hand: the file no longer describes the run
        if let Some(loaded) = &self.schedule {
            let s = &self.settings;
            if s.schedule.is_some()
                && (s.sampler != loaded.schedule.sampler.name() || s.steps != loaded.schedule.steps())
            {
                self.settings.schedule = None;
                self.message = Some(Ok(format!(
                    "schedule {} is off: it is for {} at {} steps",
                    loaded.path,
                    loaded.schedule.sampler,
                    loaded.schedule.steps()
                )));
            }
        }
        ui.horizontal(|ui| {
            let was_on = self.settings.schedule.is_some();
            let mut on = was_on;
            let running = self.is_running();
            let mut picked = false;
            ui.add_enabled_ui(!running, |ui| {
                ui.checkbox(&mut on, "schedule file").on_hover_text(
                    "follow a schedule file's sampler, steps, timesteps (wgdiff experiment step-search) and skip \
                     depths (skip-search)",
                );
                egui::ComboBox::new("schedule file", "shipped, or")
                    .selected_text(self.schedule_path.clone())
                    .width(380.0)
                    .show_ui(ui, |ui| {
                        for path in crate::diffusion::skip_schedule::SHIPPED_TIMESTEP_SCHEDULES {
                            picked |= ui
                                .selectable_value(&mut self.schedule_path, path.to_string(), path)
                                .clicked();
                        }
                    });
                let label = ui.label("a path");
                ui.add(egui::TextEdit::singleline(&mut self.schedule_path).desired_width(260.0))
                    .labelled_by(label.id);
                picked |= ui.button("Load schedule").clicked();
            });
            if on && (picked || !was_on) {
                self.load_schedule(&ctx, self.schedule_path.clone());
            } else if !on && was_on {
                self.settings.schedule = None;
                self.schedule = None;
            }
        });
        if let (Some(loaded), Some(model)) = (&self.schedule, &self.model) {
            if self.settings.schedule.is_some() {
                ui.label(loaded.summary());
                timesteps_plot(ui, &loaded.schedule, &model.process);
            }
        }
    }

    /// Reads the schedule file at `path` in the background; the run then follows it.
    fn load_schedule(&mut self, ctx: &egui::Context, path: String) {
        self.settings.schedule = Some(path.clone());
        self.job = Some(Job::start(ctx, "schedule", move |job| async move {
            let loaded = read_schedule(std::path::Path::new(&path)).await?;
            job.send(DenoiseMessage::Schedule(Box::new(loaded)));
            Ok(())
        }));
    }

    fn grid_ui(&self, ui: &mut egui::Ui) {
        let Some((xt, x0, _)) = &self.textures else {
            ui.label("Run to see the samples form: x_t and the predicted x_0 after every step.");
            return;
        };
        ui.horizontal(|ui| {
            for (texture, caption) in [(xt, "x_t (the sampler's state)"), (x0, "predicted x_0")] {
                ui.vertical(|ui| {
                    ui.label(caption);
                    texture.show(ui);
                });
            }
        });
    }

    fn timeline_ui(&mut self, ui: &mut egui::Ui) {
        let frames = self.shown_frames();
        if frames.is_empty() {
            return;
        }
        let last = frames.len() - 1;
        let mut current = self.current.min(last);
        let planned = match self.branches.shown() {
            Some(branch) => branch.planned_steps(),
            None => self.planned_steps.max(frames.len()),
        };
        let frame = frames[current].clone();
        // the first step compiles the kernels: left out of the mean
        let mean = (last > 0).then(|| frames[1..].iter().map(|f| f.seconds).sum::<f64>() / last as f64);
        ui.horizontal(|ui| {
            if ui.button("< step").clicked() {
                current = current.saturating_sub(1);
                self.follow = false;
            }
            let play = if self.playing { "Pause" } else { "Play" };
            if ui.button(play).clicked() {
                self.playing = !self.playing;
                self.follow = false;
            }
            if ui.button("step >").clicked() {
                current = (current + 1).min(last);
                self.follow = current == last;
            }
            let slider = ui.add(egui::Slider::new(&mut current, 0..=last).text("recorded step"));
            if slider.changed() {
                self.follow = current == last;
                self.playing = false;
            }
        });
        self.current = current;
        let levels = self.model.as_ref().map_or(1, |m| m.levels);
        let mut line = format!(
            "step {} of {planned}: t = {:.1}, skipped levels {} of {}, step time {:.0} ms",
            frame.index + 1,
            frame.t,
            frame.skip,
            levels,
            frame.seconds * 1e3,
        );
        if let Some(mean) = mean {
            line += &format!(" (mean {:.0} ms over steps 2..{})", mean * 1e3, last + 1);
        }
        ui.label(line);
    }

    /// The shown run's images (the run's, or the shown branch's once it ended).
    fn shown_samples(&self) -> Option<&Tensor> {
        match self.branches.shown() {
            Some(branch) => branch.samples.as_ref(),
            None => self.samples.as_ref(),
        }
    }

    /// Where the shown run's files go: the export folder, a branch's own folder in it.
    fn export_folder(&self) -> PathBuf {
        let dir = PathBuf::from(&self.export_dir);
        match self.branches.shown_index() {
            Some(i) => dir.join(format!("branch-{}", i + 1)),
            None => dir,
        }
    }

    /// Writes the shown run's images to `<export folder>/samples.png` (a download in the page).
    fn save_samples(&mut self, ctx: &egui::Context) {
        let Some(samples) = self.shown_samples().cloned() else {
            return;
        };
        let columns = grid_columns(self.settings.count);
        let path = self.export_folder().join("samples.png");
        self.export = Some(Job::start(
            ctx,
            "save samples",
            move |job: JobContext<DenoiseMessage>| async move {
                save_samples(&samples, columns, &path).await?;
                job.send(DenoiseMessage::Exported(format!(
                    "samples saved: {}",
                    path.display()
                )));
                Ok(())
            },
        ));
    }

    /// Lets the user pick a checkpoint file (the page has no folders to type a path into)
    /// and loads it.
    fn open_file(&mut self, ctx: &egui::Context, shared: &Shared) {
        let gpu = shared.gpu.clone();
        self.job = Some(Job::start(ctx, "open", move |job| async move {
            if let Some(path) = platform::pick_file().await? {
                let loaded = platform::load_model(&gpu, &path, None).await?;
                job.send(DenoiseMessage::Loaded(Box::new(ModelInfo::of(path, &loaded))));
            }
            Ok(())
        }));
    }

    /// Exports every step of the shown run (PNGs and GIFs) to its export folder.
    fn start_export(&mut self, ctx: &egui::Context) {
        let steps: Vec<(Tensor, Option<Tensor>)> = self
            .shown_frames()
            .iter()
            .map(|f| (f.x.clone(), f.x0.clone()))
            .collect();
        let columns = grid_columns(self.settings.count);
        let dir = self.export_folder();
        self.message = Some(Ok(format!(
            "exporting {} steps to {}",
            steps.len(),
            dir.display()
        )));
        self.export = Some(Job::start(
            ctx,
            "export",
            move |job: JobContext<DenoiseMessage>| async move {
                let written = export_frames(&steps, columns, &dir, |_, _| job.check()).await?;
                job.send(DenoiseMessage::Exported(format!(
                    "exported {written} files (PNG per step, xt.gif, x0.gif) to {}",
                    dir.display()
                )));
                Ok(())
            },
        ));
    }
}

/// The controls of what a run does per step (the run's, a branch's, a compared variant's):
/// sampler, steps, guidance (conditional models), precision (`f16`: the adapter has
/// SHADER_F16), skip exponent and deep-feature cache (U-Nets).
pub(super) fn sampling_controls(
    ui: &mut egui::Ui,
    s: &mut DenoiseSettings,
    model: Option<&ModelInfo>,
    f16: bool,
) {
    let process = model.map(|m| m.process.clone());
    ui.horizontal(|ui| {
        egui::ComboBox::from_label("sampler")
            .selected_text(s.sampler.clone())
            .show_ui(ui, |ui| {
                for name in Sampler::NAMES {
                    let fits = match (&process, name.parse::<Sampler>()) {
                        (Some(p), Ok(sampler)) => sampler.fits(p),
                        _ => true,
                    };
                    if fits {
                        ui.selectable_value(&mut s.sampler, name.to_string(), name);
                    }
                }
            });
        ui.add(
            egui::DragValue::new(&mut s.steps)
                .range(1..=1000)
                .prefix("steps "),
        );
        match model {
            Some(info) if info.classes.is_some() => {
                let mut guidance = s.guidance.unwrap_or(info.guidance);
                if ui
                    .add(egui::Slider::new(&mut guidance, 0.0..=8.0).text("guidance"))
                    .changed()
                {
                    s.guidance = Some(guidance);
                }
            }
            Some(_) => {
                ui.label("unconditional model (no class or guidance)");
            }
            None => {}
        }
        ui.add_enabled_ui(f16, |ui| {
            egui::ComboBox::from_label("precision")
                .selected_text(if s.precision == DType::F16 { "f16" } else { "f32" })
                .show_ui(ui, |ui| {
                    ui.selectable_value(&mut s.precision, DType::F32, "f32");
                    ui.selectable_value(&mut s.precision, DType::F16, "f16");
                })
                .response
                .on_disabled_hover_text("this adapter has no SHADER_F16");
        });
    });
    let levels = model.map_or(1, |m| m.levels);
    ui.add_enabled_ui(levels > 1, |ui| {
        ui.horizontal(|ui| {
            ui.add(egui::Slider::new(&mut s.skip_exponent, 0.0..=5.0).text("skip exponent c"));
            ui.add(
                egui::DragValue::new(&mut s.cache_interval)
                    .range(1..=10)
                    .prefix("cache interval m "),
            )
            .on_hover_text("deep features computed every m network calls and reused between (1: no cache)");
            let deepest = levels.saturating_sub(1).max(1);
            let mut depth = s.cache_depth.unwrap_or(deepest);
            ui.add_enabled(
                s.cache_interval > 1,
                egui::DragValue::new(&mut depth)
                    .range(1..=deepest)
                    .prefix("depth d "),
            );
            s.cache_depth = (depth != deepest).then_some(depth);
        });
    });
}

/// A schedule's timesteps on the noise-level axis (log-SNR, noise on the left) beside the
/// uniform spacing's at the same steps; nothing for a schedule without timesteps or a process
/// without VP timesteps.
fn timesteps_plot(ui: &mut egui::Ui, schedule: &SkipSchedule, process: &crate::diffusion::Process) {
    let Some(alpha_bars) = process.marginals().ok().and_then(|m| m.alpha_bars().cloned()) else {
        return;
    };
    if schedule.timesteps.is_empty() {
        return;
    }
    let steps = schedule.steps();
    // DPM-Solver++ walks steps + 1 points (its last call, then 0); DDPM and DDIM steps points
    let points = match schedule.sampler {
        Sampler::DpmSolverPp { .. } | Sampler::DpmSolverPpSde { .. } => steps + 1,
        _ => steps,
    };
    let uniform: Vec<f64> = vp_times(&alpha_bars, Spacing::Uniform, points, alpha_bars.last())
        .into_iter()
        .take(steps)
        .collect();
    let row = |times: &[f64], y: f64| -> Vec<[f64; 2]> {
        times.iter().map(|&t| [log_snr(&alpha_bars, t), y]).collect()
    };
    ui.label(format!(
        "the {steps} network calls on the noise-level axis: log-SNR = log(alpha/std), noise on the left"
    ));
    egui_plot::Plot::new("timesteps on the noise-level axis")
        .height(130.0)
        .legend(egui_plot::Legend::default())
        .show_y(false)
        .include_y(-0.5)
        .include_y(2.5)
        .x_axis_label("log-SNR")
        .show(ui, |plot| {
            plot.points(
                egui_plot::Points::new("the schedule file's timesteps", row(&schedule.timesteps, 1.0))
                    .radius(4.0),
            );
            plot.points(
                egui_plot::Points::new(format!("uniform, {steps} steps"), row(&uniform, 0.0)).radius(4.0),
            );
        });
}
