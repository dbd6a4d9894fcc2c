//! The denoise view: sample a checkpoint step by step and watch x_t and the predicted x_0 of
//! every step (drawn on the device), scrub and play the recorded steps, export PNGs and GIFs.

use super::export::{export_frames, save_samples};
use super::grid_texture::{GridLayout, GridTexture};
use super::jobs::{is_running, Event, Job, JobContext};
use super::{parse_setting, platform, Shared};
use crate::data::grid_columns;
use crate::diffusion::{Sampler, SkipPlan, Step};
use crate::models::{DiffusionNet, ModelConfig, SkipType};
use crate::pipeline::{sample_net, SampleRequest, TrainedModel};
use crate::{Gpu, Result, Tensor};
use eframe::egui;
use std::path::PathBuf;
use web_time::Instant;

/// What the views show of a loaded checkpoint.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    pub path: PathBuf,
    pub model: ModelConfig,
    pub process: crate::diffusion::Process,
    pub levels: usize,
    pub classes: Option<usize>,
    /// The guidance scale the model was trained for (`TrainState::default_guidance`).
    pub guidance: f32,
    pub parameters: usize,
    pub trained_steps: usize,
}

impl ModelInfo {
    fn of(path: PathBuf, loaded: &TrainedModel) -> ModelInfo {
        ModelInfo {
            path,
            levels: loaded.net.levels(),
            classes: loaded.state.model.classes(),
            guidance: loaded.state.default_guidance(),
            parameters: loaded.net.named_params().iter().map(|(_, t)| t.numel()).sum(),
            trained_steps: loaded.state.step,
            model: loaded.state.model.clone(),
            process: loaded.state.process.clone(),
        }
    }

    /// One line: kind, parameters, levels, process, training steps.
    pub fn summary(&self) -> String {
        let kind = match &self.model {
            ModelConfig::UNet(u) => format!("U-Net ({} skip)", u.skip_type),
            other => other.kind_name().to_string(),
        };
        format!(
            "{kind}, {} parameters, {} levels, {} process, trained {} steps{}",
            self.parameters,
            self.levels,
            self.process.name(),
            self.trained_steps,
            self.classes.map_or(String::new(), |k| format!(", {k} classes"))
        )
    }
}

/// The sampling settings of the view.
#[derive(Clone, Debug)]
pub struct DenoiseSettings {
    pub checkpoint: String,
    pub sampler: String,
    pub steps: usize,
    pub seed: u64,
    pub count: usize,
    pub class: Option<u32>,
    /// None: the guidance the model was trained for.
    pub guidance: Option<f32>,
    /// None: the checkpoint's own skip type.
    pub skip_type: Option<SkipType>,
    pub skip_exponent: f32,
}

impl DenoiseSettings {
    /// The library's request for these settings on `model`.
    pub fn request(&self, model: &TrainedModel) -> Result<SampleRequest> {
        let mut builder = SampleRequest::for_state(&model.state)
            .sampler(self.sampler.parse()?)
            .steps(Some(self.steps))
            .count(self.count)
            .seed(self.seed)
            .skip(SkipPlan::Exponent(self.skip_exponent))
            .class(self.class);
        // a guidance set for a conditional model does not carry over to an unconditional one
        if let (Some(guidance), Some(_)) = (self.guidance, model.state.model.classes()) {
            builder = builder.guidance(guidance);
        }
        builder.build()
    }

    /// The settings a page address or `wgdiff gui --set` may give.
    pub const KEYS: [&'static str; 8] = [
        "checkpoint",
        "sampler",
        "steps",
        "seed",
        "count",
        "class",
        "guidance",
        "skip-exponent",
    ];

    /// Sets `key` (one of [`Self::KEYS`]) from its text.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "checkpoint" => self.checkpoint = value.to_string(),
            "sampler" => {
                value.parse::<Sampler>()?;
                self.sampler = value.to_string();
            }
            "steps" => self.steps = parse_setting(key, value)?,
            "seed" => self.seed = parse_setting(key, value)?,
            "count" => self.count = parse_setting(key, value)?,
            "class" => self.class = Some(parse_setting(key, value)?),
            "guidance" => self.guidance = Some(parse_setting(key, value)?),
            "skip-exponent" => self.skip_exponent = parse_setting(key, value)?,
            _ => return Err(super::unknown_setting("denoise", key, &Self::KEYS)),
        }
        Ok(())
    }
}

/// One recorded sampler step.
#[derive(Clone)]
pub struct Frame {
    pub index: usize,
    /// Network time of the step.
    pub t: f32,
    /// Levels the network skipped.
    pub skip: usize,
    pub x: Tensor,
    pub x0: Option<Tensor>,
    /// Wall time of the step (its device work included).
    pub seconds: f64,
}

/// What a sampling job reports.
pub enum DenoiseMessage {
    Loaded(Box<ModelInfo>),
    Frame(Frame),
    Done {
        evaluations: usize,
        seconds: f64,
        samples: Tensor,
    },
    Exported(String),
}

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
    drawn: Option<usize>,
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
}

impl DenoiseView {
    pub fn new(shared: &Shared) -> DenoiseView {
        DenoiseView {
            settings: DenoiseSettings {
                checkpoint: shared.options.checkpoint.display().to_string(),
                sampler: "ddpm".into(),
                steps: crate::diffusion::DEFAULT_SAMPLER_STEPS,
                seed: 0,
                count: 16,
                class: None,
                guidance: None,
                skip_type: None,
                skip_exponent: 0.0,
            },
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
        }
    }

    /// Whether sampling, or the export of its frames or samples, runs.
    pub fn is_running(&self) -> bool {
        is_running(&self.job) || is_running(&self.export)
    }

    pub fn cancel(&self) {
        if let Some(job) = &self.job {
            job.cancel();
        }
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

    /// Starts sampling with the current settings.
    pub fn run(&mut self, ctx: &egui::Context, shared: &Shared) {
        if self.is_running() {
            return;
        }
        self.frames.clear();
        self.current = 0;
        self.drawn = None;
        self.follow = true;
        self.playing = false;
        self.run_seconds = None;
        self.samples = None;
        self.message = None;
        self.planned_steps = self.settings.steps;
        let gpu = shared.gpu.clone();
        let settings = self.settings.clone();
        self.job = Some(Job::start(ctx, "sampling", move |job| {
            sample_job(gpu, settings, job)
        }));
    }

    /// Takes the jobs' messages.
    pub fn poll(&mut self, ctx: &egui::Context, shared: &Shared) {
        let mut events = self.job.as_mut().map(Job::poll).unwrap_or_default();
        events.extend(self.export.as_mut().map(Job::poll).unwrap_or_default());
        for event in events {
            match event {
                Event::Message(DenoiseMessage::Loaded(info)) => {
                    let info = *info;
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
                    if std::mem::take(&mut self.save_when_done) {
                        self.save_samples(ctx);
                    }
                }
                Event::Message(DenoiseMessage::Exported(text)) => self.message = Some(Ok(text)),
                Event::Finished(Err(e)) => {
                    self.save_when_done = false;
                    platform::announce(
                        "denoise",
                        &serde_json::json!({ "status": "failed", "error": e }).to_string(),
                    );
                    self.message = Some(Err(e));
                }
                Event::Finished(Ok(())) => {}
            }
        }
        if self.playing && !self.frames.is_empty() {
            let now = ctx.input(|i| i.time);
            if now - self.last_advance >= 0.12 {
                self.last_advance = now;
                self.current = (self.current + 1) % self.frames.len();
            }
            ctx.request_repaint_after(std::time::Duration::from_millis(120));
        }
        if let Err(e) = self.draw_current(shared) {
            self.message = Some(Err(e.to_string()));
        }
    }

    /// Draws the shown step into the textures when it changed (a compute pass, no readback).
    fn draw_current(&mut self, shared: &Shared) -> Result<()> {
        let Some(frame) = self.frames.get(self.current) else {
            return Ok(());
        };
        if self.drawn == Some(self.current) {
            return Ok(());
        }
        let shape: [usize; 4] = frame.x.shape().try_into().unwrap_or([1, 1, 1, 1]);
        let layout = GridLayout {
            columns: grid_columns(shape[0]) as u32,
            scale: if shape[2] <= 32 { 4 } else { 2 },
            gap: 4,
        };
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
        self.drawn = Some(self.current);
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
            let can_export = !self.frames.is_empty() && !running && !is_running(&self.export);
            if ui
                .add_enabled(
                    can_export && self.samples.is_some(),
                    egui::Button::new("Save samples PNG"),
                )
                .on_hover_text("the last run's images as the grid `wgdiff sample` writes")
                .clicked()
            {
                self.save_samples(&ctx);
            }
            if ui
                .add_enabled(can_export, egui::Button::new("Export PNGs + GIFs"))
                .clicked()
            {
                self.start_export(&ctx);
            }
        });
        super::message_label(ui, &self.message);
        self.grid_ui(ui);
        self.timeline_ui(ui);
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
        let s = &mut self.settings;
        let process = self.model.as_ref().map(|m| m.process.clone());
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
            ui.add(egui::DragValue::new(&mut s.seed).prefix("seed "));
            ui.add(egui::DragValue::new(&mut s.count).range(1..=64).prefix("images "));
        });
        let (classes, levels) = self.model.as_ref().map_or((None, 1), |m| (m.classes, m.levels));
        ui.horizontal(|ui| {
            if let Some(k) = classes {
                egui::ComboBox::from_label("class")
                    .selected_text(s.class.map_or("all (mixed)".to_string(), |c| c.to_string()))
                    .show_ui(ui, |ui| {
                        ui.selectable_value(&mut s.class, None, "all (mixed)");
                        for c in 0..k as u32 {
                            ui.selectable_value(&mut s.class, Some(c), c.to_string());
                        }
                    });
                let trained = self.model.as_ref().map_or(1.0, |m| m.guidance);
                let mut guidance = s.guidance.unwrap_or(trained);
                if ui
                    .add(egui::Slider::new(&mut guidance, 0.0..=8.0).text("guidance"))
                    .changed()
                {
                    s.guidance = Some(guidance);
                }
            } else {
                ui.label("unconditional model (no class or guidance)");
            }
        });
        ui.add_enabled_ui(levels > 1, |ui| {
            ui.horizontal(|ui| {
                egui::ComboBox::from_label("skip type")
                    .selected_text(s.skip_type.map_or("as trained".to_string(), |t| t.to_string()))
                    .show_ui(ui, |ui| {
                        ui.selectable_value(&mut s.skip_type, None, "as trained");
                        for t in [SkipType::Zero, SkipType::Duplicate, SkipType::Interpolate] {
                            ui.selectable_value(&mut s.skip_type, Some(t), t.to_string());
                        }
                    });
                ui.add(egui::Slider::new(&mut s.skip_exponent, 0.0..=5.0).text("skip exponent c"));
            });
        });
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
        if self.frames.is_empty() {
            return;
        }
        let last = self.frames.len() - 1;
        ui.horizontal(|ui| {
            if ui.button("< step").clicked() {
                self.current = self.current.saturating_sub(1);
                self.follow = false;
            }
            let play = if self.playing { "Pause" } else { "Play" };
            if ui.button(play).clicked() {
                self.playing = !self.playing;
                self.follow = false;
            }
            if ui.button("step >").clicked() {
                self.current = (self.current + 1).min(last);
                self.follow = self.current == last;
            }
            let slider = ui.add(egui::Slider::new(&mut self.current, 0..=last).text("recorded step"));
            if slider.changed() {
                self.follow = self.current == last;
                self.playing = false;
            }
        });
        let frame = &self.frames[self.current.min(last)];
        let levels = self.model.as_ref().map_or(1, |m| m.levels);
        let mut line = format!(
            "step {} of {}: t = {:.1}, skipped levels {} of {}, step time {:.0} ms",
            frame.index + 1,
            self.planned_steps.max(self.frames.len()),
            frame.t,
            frame.skip,
            levels,
            frame.seconds * 1e3,
        );
        if last > 0 {
            // the first step compiles the kernels: left out of the mean
            let mean = self.frames[1..].iter().map(|f| f.seconds).sum::<f64>() / last as f64;
            line += &format!(" (mean {:.0} ms over steps 2..{})", mean * 1e3, self.frames.len());
        }
        ui.label(line);
    }

    /// Writes the last run's images to `<export folder>/samples.png` (a download in the page).
    fn save_samples(&mut self, ctx: &egui::Context) {
        let Some(samples) = self.samples.clone() else {
            return;
        };
        let columns = grid_columns(self.settings.count);
        let path = PathBuf::from(&self.export_dir).join("samples.png");
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

    fn start_export(&mut self, ctx: &egui::Context) {
        let steps: Vec<(Tensor, Option<Tensor>)> =
            self.frames.iter().map(|f| (f.x.clone(), f.x0.clone())).collect();
        let columns = grid_columns(self.settings.count);
        let dir = PathBuf::from(&self.export_dir);
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

/// The sampling job: loads the model, samples with a per-step callback that waits for the
/// step's device work, hands its x_t and x_0 (still on the device) to the view, and stops when
/// cancelled.
async fn sample_job(gpu: Gpu, settings: DenoiseSettings, job: JobContext<DenoiseMessage>) -> Result<()> {
    let path = PathBuf::from(&settings.checkpoint);
    let loaded = platform::load_model(&gpu, &path, settings.skip_type).await?;
    job.send(DenoiseMessage::Loaded(Box::new(ModelInfo::of(path, &loaded))));
    let request = settings.request(&loaded)?;
    let started = Instant::now();
    let mut last = Instant::now();
    let mut on_step = |step: &Step| -> Result<()> {
        let seconds = last.elapsed().as_secs_f64();
        last = Instant::now();
        job.send(DenoiseMessage::Frame(Frame {
            index: step.index,
            t: step.t,
            skip: step.skip,
            x: step.x.clone(),
            x0: step.x0.cloned(),
            seconds,
        }));
        job.check()
    };
    let net: &dyn DiffusionNet = loaded.net.as_ref();
    let (samples, evaluations) = sample_net(
        &gpu,
        net,
        &loaded.state.model,
        &loaded.state.process,
        &request,
        Some(&mut on_step),
    )
    .await?;
    job.send(DenoiseMessage::Done {
        evaluations,
        seconds: started.elapsed().as_secs_f64(),
        samples,
    });
    Ok(())
}
