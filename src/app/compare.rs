//! The compare view: up to four variants (model, sampler, steps, guidance, skip, cache,
//! precision) on one seed, side by side on a shared timeline, with the library's figures.

use super::denoise::sampling_controls;
use super::grid_texture::GridTexture;
use super::jobs::{is_running, Event, Job, JobContext};
use super::sampling::{grid_layout, read_schedule, DenoiseSettings, Frame, ModelInfo};
use super::{parse_setting, platform, Shared};
use crate::classifier::mnist_fid_label;
use crate::experiment::compare::{self, Plan, Row, Variant, MAX_VARIANTS};
use crate::pipeline::TrainedModel;
use crate::Result;
use eframe::egui;
use egui_plot::{Legend, Line, PlotPoints, Points};
use std::path::{Path, PathBuf};
use web_time::Instant;

/// What a comparison job reports.
pub enum CompareMessage {
    Step { variant: usize, frame: Frame },
    Progress { done: usize, total: usize, what: String },
    Row { variant: usize, row: Row },
    Exported(String),
}

/// One variant's recorded run and its picture at the timeline's position.
#[derive(Default)]
pub struct Recorded {
    pub frames: Vec<Frame>,
    pub row: Option<Row>,
    texture: Option<GridTexture>,
    /// The frame drawn into the texture.
    drawn: Option<usize>,
}

/// The compare view's state.
pub struct CompareView {
    /// The variants' settings (their seed, images and class are the plan's).
    pub variants: Vec<DenoiseSettings>,
    pub plan: Plan,
    /// Per variant of the last comparison.
    pub recorded: Vec<Recorded>,
    /// The shared timeline: how far through sampling (0 to 1) every variant is shown.
    pub position: f32,
    job: Option<Job<CompareMessage>>,
    /// (done, total, what) of the running comparison, and when it started.
    pub progress: Option<(usize, usize, String)>,
    started: Option<Instant>,
    pub message: Option<std::result::Result<String, String>>,
    export_dir: String,
    export: Option<Job<CompareMessage>>,
}

impl CompareView {
    /// Two variants of the app's checkpoint to start from: DDPM at 20 steps, DDIM at 10.
    pub fn new(shared: &Shared, first: &DenoiseSettings) -> CompareView {
        let variant = |sampler: &str, steps: usize| DenoiseSettings {
            sampler: sampler.into(),
            steps,
            pause_after: None,
            ..first.clone()
        };
        CompareView {
            variants: vec![variant("ddpm", 20), variant("ddim", 10)],
            plan: Plan::default(),
            recorded: Vec::new(),
            position: 1.0,
            job: None,
            progress: None,
            started: None,
            message: None,
            export_dir: shared.options.out.join("compare").display().to_string(),
            export: None,
        }
    }

    /// The settings a page address or `wgdiff gui --set` may give: the plan's, and every
    /// variant's as `LETTER.KEY` (`a.steps=4`, `c.checkpoint=int8.safetensors`: KEY one of the
    /// denoise view's [`DenoiseSettings::KEYS`]; naming a variant past the last adds copies of
    /// the last up to it; their seed and image count are the plan's).
    pub const KEYS: [&'static str; 5] = ["seed", "images", "rounds", "fid-samples", "a.KEY .. d.KEY"];

    /// Sets `key` (one of [`Self::KEYS`]) from its text.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        if let Some((letter, setting)) = key.split_once('.') {
            let index = variant_index(letter).ok_or_else(|| {
                crate::Error::Config(format!(
                    "compare setting `{key}`: `{letter}` is not a variant (a to {})",
                    variant_letter(MAX_VARIANTS - 1).to_lowercase()
                ))
            })?;
            if let Some(plan_key) = match setting {
                "seed" => Some("seed"),
                "count" => Some("images"),
                "repeat" => Some("rounds"),
                _ => None,
            } {
                return Err(crate::Error::Config(format!(
                    "compare setting `{key}`: every variant samples the plan's {setting}; set `{plan_key}`"
                )));
            }
            while self.variants.len() <= index {
                let copy = self.variants.last().cloned().expect("at least one variant");
                self.variants.push(copy);
            }
            return self.variants[index].set(setting, value);
        }
        let p = &mut self.plan;
        match key {
            "seed" => p.seed = parse_setting(key, value)?,
            "images" => p.images = parse_setting(key, value)?,
            "rounds" => p.rounds = parse_setting(key, value)?,
            "fid-samples" => p.fid_samples = parse_setting(key, value)?,
            _ => return Err(super::unknown_setting("compare", key, &Self::KEYS)),
        }
        Ok(())
    }

    pub fn is_running(&self) -> bool {
        is_running(&self.job) || is_running(&self.export)
    }

    pub fn cancel(&self) {
        if let Some(job) = &self.job {
            job.cancel();
        }
    }

    /// Whether every variant has all its figures (MNIST-FID too, when the plan scores it).
    pub fn scored(&self) -> bool {
        let want_fid = self.plan.fid_samples > 0;
        self.rows()
            .is_some_and(|rows| !rows.is_empty() && rows.iter().all(|r| r.fid.is_some() || !want_fid))
    }

    /// Every variant's figures, once the comparison has them all.
    pub fn rows(&self) -> Option<Vec<Row>> {
        self.recorded.iter().map(|r| r.row.clone()).collect()
    }

    /// Starts the comparison of the variants.
    pub fn run(&mut self, ctx: &egui::Context, shared: &Shared) {
        if self.is_running() {
            return;
        }
        self.free_textures();
        self.recorded = self.variants.iter().map(|_| Recorded::default()).collect();
        self.message = None;
        self.progress = Some((0, 1, "loading the models".into()));
        self.started = Some(Instant::now());
        let (gpu, variants, plan) = (shared.gpu.clone(), self.variants.clone(), self.plan);
        self.job = Some(Job::start(ctx, "compare", move |job| {
            compare_job(gpu, variants, plan, job)
        }));
    }

    /// Takes the job's messages and draws every variant's step at the timeline's position.
    pub fn poll(&mut self, shared: &Shared) {
        let mut events = self.job.as_mut().map(Job::poll).unwrap_or_default();
        events.extend(self.export.as_mut().map(Job::poll).unwrap_or_default());
        for event in events {
            match event {
                Event::Message(CompareMessage::Step { variant, frame }) => {
                    if let Some(r) = self.recorded.get_mut(variant) {
                        r.frames.push(frame);
                    }
                }
                Event::Message(CompareMessage::Progress { done, total, what }) => {
                    self.progress = Some((done, total, what));
                }
                Event::Message(CompareMessage::Row { variant, row }) => {
                    if let Some(r) = self.recorded.get_mut(variant) {
                        r.row = Some(row);
                    }
                }
                Event::Message(CompareMessage::Exported(text)) => self.message = Some(Ok(text)),
                Event::Finished(Err(e)) => {
                    self.progress = None;
                    let failed = serde_json::json!({ "status": "failed", "error": e });
                    platform::announce("compare", &failed.to_string());
                    self.message = Some(Err(e));
                }
                Event::Finished(Ok(())) => {
                    if self.progress.take().is_some() {
                        let seconds = self.started.map_or(0.0, |s| s.elapsed().as_secs_f64());
                        self.message = Some(Ok(format!("compared in {seconds:.0} s")));
                        let done =
                            serde_json::json!({ "status": "done", "seconds": seconds, "rows": self.rows() });
                        platform::announce("compare", &done.to_string());
                    }
                }
            }
        }
        let position = self.position;
        for r in &mut self.recorded {
            if let Err(e) = r.draw(shared, position) {
                self.message = Some(Err(e.to_string()));
            }
        }
    }

    fn free_textures(&mut self) {
        for r in &mut self.recorded {
            if let Some(t) = r.texture.take() {
                t.free();
            }
        }
    }

    /// `model`: the denoise view's checkpoint description (samplers that fit, classes, levels).
    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &Shared, model: Option<&ModelInfo>) {
        let ctx = ui.ctx().clone();
        ui.label(
            "Up to four sampling settings on one seed: every step side by side, times (variants in turn), \
             peak device memory, model size and MNIST-FID.",
        );
        self.variants_ui(ui, shared, model);
        ui.separator();
        ui.horizontal(|ui| {
            let p = &mut self.plan;
            ui.add(egui::DragValue::new(&mut p.seed).prefix("seed "));
            ui.add(
                egui::DragValue::new(&mut p.images)
                    .range(1..=64)
                    .prefix("images "),
            );
            ui.add(
                egui::DragValue::new(&mut p.rounds)
                    .range(1..=20)
                    .prefix("timed runs "),
            );
            ui.add(
                egui::DragValue::new(&mut p.fid_samples)
                    .range(0..=10_000)
                    .prefix("MNIST-FID images "),
            )
            .on_hover_text("0: no MNIST-FID");
            let running = self.is_running();
            if ui.add_enabled(!running, egui::Button::new("Compare")).clicked() {
                self.run(&ctx, shared);
            }
            if ui.add_enabled(running, egui::Button::new("Cancel")).clicked() {
                self.cancel();
            }
        });
        if let Some((done, total, what)) = &self.progress {
            let fraction = *done as f32 / (*total).max(1) as f32;
            let elapsed = self.started.map_or(0.0, |s| s.elapsed().as_secs_f64());
            let eta = match *done {
                0 => String::new(),
                d => format!(", about {:.0} s left", elapsed / d as f64 * (total - d) as f64),
            };
            ui.add(egui::ProgressBar::new(fraction).text(format!("{what} ({done} of {total}{eta})")));
        }
        super::message_label(ui, &self.message);
        if self.recorded.iter().any(|r| !r.frames.is_empty()) {
            self.timeline_ui(ui);
        }
        if self.recorded.iter().any(|r| r.row.is_some()) {
            ui.horizontal_top(|ui| {
                self.table_ui(ui);
                self.plot_ui(ui);
            });
            ui.horizontal(|ui| {
                let label = ui.label("export to");
                ui.text_edit_singleline(&mut self.export_dir)
                    .labelled_by(label.id);
                let ready = self.rows().is_some() && !self.is_running();
                if ui
                    .add_enabled(ready, egui::Button::new("Export table + plot"))
                    .on_hover_text("compare.md (the table), compare.png (the plot), compare.json")
                    .clicked()
                {
                    self.export(&ctx, shared);
                }
            });
        }
    }

    fn variants_ui(&mut self, ui: &mut egui::Ui, shared: &Shared, model: Option<&ModelInfo>) {
        let running = self.is_running();
        let mut removed = None;
        let f16 = shared.gpu.has_f16();
        let can_remove = self.variants.len() > 1;
        for (i, v) in self.variants.iter_mut().enumerate() {
            ui.push_id(("variant", i), |ui| {
                ui.horizontal(|ui| {
                    ui.strong(variant_letter(i));
                    let label = ui.label("checkpoint");
                    ui.add(egui::TextEdit::singleline(&mut v.checkpoint).desired_width(380.0))
                        .labelled_by(label.id)
                        .on_hover_text(
                            "any wgdiff checkpoint of this model: compressed (int8, int4, pruned) too",
                        );
                    if ui
                        .add_enabled(can_remove && !running, egui::Button::new("Remove"))
                        .clicked()
                    {
                        removed = Some(i);
                    }
                });
                sampling_controls(ui, v, model, f16);
            });
        }
        if let Some(i) = removed {
            self.variants.remove(i);
        }
        let can_add = self.variants.len() < MAX_VARIANTS && !running;
        if ui
            .add_enabled(can_add, egui::Button::new("Add variant"))
            .clicked()
        {
            let copy = self.variants.last().cloned().expect("at least one variant");
            self.variants.push(copy);
        }
    }

    fn timeline_ui(&mut self, ui: &mut egui::Ui) {
        ui.add(
            egui::Slider::new(&mut self.position, 0.0..=1.0)
                .text("through sampling (every variant at the same fraction of its steps)"),
        );
        ui.horizontal_top(|ui| {
            for (i, r) in self.recorded.iter().enumerate() {
                ui.vertical(|ui| {
                    ui.set_max_width(270.0);
                    let settings = self
                        .variants
                        .get(i)
                        .map_or(String::new(), DenoiseSettings::describe);
                    ui.strong(format!("{}: {settings}", variant_letter(i)));
                    if let Some(texture) = &r.texture {
                        texture.show(ui);
                    }
                    if let Some(frame) = r.drawn.and_then(|k| r.frames.get(k)) {
                        ui.label(format!(
                            "step {} of {}, t = {:.0}, {:.0} ms",
                            frame.index + 1,
                            r.frames.len(),
                            frame.t,
                            frame.seconds * 1e3
                        ));
                    }
                });
            }
        });
    }

    fn table_ui(&self, ui: &mut egui::Ui) {
        egui::Grid::new("compare table").striped(true).show(ui, |ui| {
            let fid = mnist_fid_label(self.plan.fid_samples);
            for heading in [
                "variant",
                "steps",
                "ms per step",
                "ms per image",
                "peak device memory",
                "model size",
                &fid,
                "Pareto front",
            ] {
                ui.strong(heading);
            }
            ui.end_row();
            for (i, r) in self.recorded.iter().enumerate() {
                let Some(row) = &r.row else { continue };
                ui.label(variant_letter(i));
                ui.label(row.steps.to_string());
                ui.label(format!("{:.1}", row.ms_per_step));
                ui.label(format!("{:.1}", row.ms_per_image));
                ui.label(format!("{:.2} MB", row.peak_bytes as f64 / 1e6));
                ui.label(format!("{:.2} MB", row.model_bytes as f64 / 1e6));
                ui.label(row.fid.map_or("scoring".to_string(), |f| format!("{f:.1}")));
                ui.label(if row.pareto { "yes" } else { "" });
                ui.end_row();
            }
        });
    }

    /// MNIST-FID against ms per image, the Pareto front joined.
    fn plot_ui(&mut self, ui: &mut egui::Ui) {
        let scored: Vec<(usize, &Row)> = self
            .recorded
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.row.as_ref().filter(|row| row.fid.is_some()).map(|row| (i, row)))
            .collect();
        if scored.is_empty() {
            return;
        }
        let mut front: Vec<[f64; 2]> = scored
            .iter()
            .filter(|(_, r)| r.pareto)
            .map(|(_, r)| [r.ms_per_image, r.fid.unwrap_or(0.0)])
            .collect();
        front.sort_by(|a, b| a[0].total_cmp(&b[0]));
        super::plots::plot("compare plot")
            .height(200.0)
            .width(ui.available_width().clamp(240.0, 520.0))
            .x_axis_label("ms per image")
            .y_axis_label(mnist_fid_label(self.plan.fid_samples))
            .legend(Legend::default())
            .show(ui, |plot| {
                plot.line(Line::new("Pareto front", PlotPoints::new(front)));
                for (i, r) in scored {
                    let point = vec![[r.ms_per_image, r.fid.unwrap_or(0.0)]];
                    plot.points(Points::new(variant_letter(i), PlotPoints::new(point)).radius(5.0));
                }
            });
    }

    /// Writes compare.md, compare.png and compare.json into the export folder (downloads in
    /// the page).
    fn export(&mut self, ctx: &egui::Context, shared: &Shared) {
        let Some(rows) = self.rows() else {
            return;
        };
        let (plan, dir) = (self.plan, PathBuf::from(&self.export_dir));
        let device = crate::gpu::describe(&shared.gpu.info);
        self.export = Some(Job::start(
            ctx,
            "export comparison",
            move |job: JobContext<CompareMessage>| async move {
                let written = write_report(&rows, &plan, &device, &dir)?;
                job.send(CompareMessage::Exported(format!(
                    "exported {} to {}",
                    written.join(", "),
                    dir.display()
                )));
                Ok(())
            },
        ));
    }
}

impl Recorded {
    /// Draws the step at `position` (0 to 1 through the recorded steps) when it changed.
    fn draw(&mut self, shared: &Shared, position: f32) -> Result<()> {
        let Some(last) = self.frames.len().checked_sub(1) else {
            return Ok(());
        };
        let k = (position * last as f32).round() as usize;
        if self.drawn == Some(k) {
            return Ok(());
        }
        let x = &self.frames[k].x;
        let shape: [usize; 4] = x.shape().try_into().unwrap_or([1, 1, 1, 1]);
        let layout = grid_layout(shape, 2);
        let size = layout.size(shape);
        if self.texture.as_ref().is_none_or(|t| t.size != size) {
            if let Some(t) = self.texture.take() {
                t.free();
            }
            self.texture = Some(GridTexture::new(&shared.render, size));
        }
        self.texture
            .as_ref()
            .expect("made above")
            .draw(&shared.gpu, x, layout)?;
        self.drawn = Some(k);
        Ok(())
    }
}

/// "A", "B", ...
/// The variant a lower-case letter of a `--set` key names (`a` is the first), if any.
fn variant_index(letter: &str) -> Option<usize> {
    match letter.as_bytes() {
        [c @ b'a'..=b'z'] => Some(usize::from(c - b'a')).filter(|&i| i < MAX_VARIANTS),
        _ => None,
    }
}

fn variant_letter(i: usize) -> String {
    char::from(b'A' + (i as u8 % 26)).to_string()
}

/// The comparison job: reads every variant's checkpoint, builds its request on its model, then
/// runs the library's comparison, forwarding its events.
async fn compare_job(
    gpu: crate::Gpu,
    settings: Vec<DenoiseSettings>,
    plan: Plan,
    job: JobContext<CompareMessage>,
) -> Result<()> {
    let fid = match plan.fid_samples {
        0 => None,
        _ => Some(platform::mnist_fid(&gpu).await?),
    };
    let mut variants = Vec::new();
    for (i, s) in settings.iter().enumerate() {
        let path = PathBuf::from(&s.checkpoint);
        let checkpoint = platform::read_checkpoint(&path).await?;
        let origin = path.display().to_string();
        let model = TrainedModel::from_checkpoint(&gpu, &checkpoint, &origin, s.skip_type)?;
        let schedule = match &s.schedule {
            Some(file) => Some(read_schedule(Path::new(file)).await?.schedule),
            None => None,
        };
        let request = s.request(&model, schedule.as_ref())?;
        variants.push(Variant {
            label: variant_label(i, s),
            checkpoint,
            origin,
            skip_type: s.skip_type,
            request,
        });
    }
    compare::run(&gpu, &variants, &plan, fid.as_ref(), &mut |event| {
        match event {
            compare::Event::Step {
                variant,
                step,
                seconds,
            } => job.send(CompareMessage::Step {
                variant,
                frame: Frame::of_step(step, step.index, seconds),
            }),
            compare::Event::Progress { done, total, what } => job.send(CompareMessage::Progress {
                done,
                total,
                what: what.to_string(),
            }),
            compare::Event::Row { variant, row } => job.send(CompareMessage::Row {
                variant,
                row: row.clone(),
            }),
        }
        job.check()
    })
    .await?;
    Ok(())
}

/// "A (mnist-small): ddim, 10 steps".
fn variant_label(i: usize, s: &DenoiseSettings) -> String {
    let stem = Path::new(&s.checkpoint)
        .file_stem()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    format!("{} ({stem}): {}", variant_letter(i), s.describe())
}

/// Writes the table (Markdown), the plot (when scored) and the rows as JSON into `dir`;
/// returns the file names.
fn write_report(rows: &[Row], plan: &Plan, device: &str, dir: &Path) -> Result<Vec<String>> {
    let md = compare::markdown(rows, plan, device);
    let json = serde_json::json!({ "plan": plan, "device": device, "rows": rows }).to_string();
    let mut files = vec![
        ("compare.md", md.into_bytes()),
        ("compare.json", json.into_bytes()),
    ];
    if rows.iter().any(|r| r.fid.is_some()) {
        files.push((
            "compare.png",
            compare::plot_png(rows, plan.fid_samples, &dir.join("compare.png"))?,
        ));
    }
    let mut written = Vec::new();
    for (name, bytes) in files {
        let path = dir.join(name);
        platform::write_file(&path, &bytes)?;
        platform::deliver(&path)?;
        written.push(name.to_string());
    }
    Ok(written)
}
