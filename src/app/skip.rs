//! The skip-schedule view: k(t) of the adaptive U-Net for N levels and exponent c, a loaded
//! per-step schedule (`wgdiff experiment skip-search`) over it, the share of the network's FLOPs
//! each step costs, the predicted speed-up, and a measured one.

use super::jobs::{is_running, Event, Job};
use super::platform;
use super::sampling::{read_schedule, step_times, LoadedSchedule, ModelInfo};
use super::Shared;
use crate::diffusion::{skip_intervals, skip_levels, Sampler, SkipPlan};
use crate::models::SkipType;
use crate::pipeline::{measure_skip_speedup, SampleRequest, SkipTiming};
use crate::Gpu;
use eframe::egui;
use egui_plot::{Legend, Line, PlotPoints, Points};
use std::path::PathBuf;

/// Colour of the k(t) segments.
const K_COLOR: egui::Color32 = egui::Color32::from_rgb(230, 90, 80);
/// Colour of a loaded schedule's k_i.
const SCHEDULE_COLOR: egui::Color32 = egui::Color32::from_rgb(60, 170, 90);

/// A measured speed-up against c = 0 at one exponent.
#[derive(Clone, Debug)]
pub struct Measured {
    pub exponent: f32,
    pub timing: SkipTiming,
    /// The FLOP-based prediction at the same exponent and steps.
    pub predicted: Option<f64>,
}

/// What the view's jobs report.
pub enum SkipMessage {
    /// FLOPs of one network call for every number of skipped levels (index = k), of `path`.
    Flops(PathBuf, Vec<f64>),
    Measured(Measured),
    Schedule(Box<LoadedSchedule>),
    Progress(String),
}

/// The skip view's state.
pub struct SkipView {
    /// Levels of the U-Net (the loaded model's, else chosen here).
    pub levels: usize,
    pub exponent: f32,
    /// Sampler steps the schedule is applied to.
    pub steps: usize,
    pub skip_type: Option<SkipType>,
    /// FLOPs per call by skipped levels, for the model at that path.
    pub flops: Option<(PathBuf, Vec<f64>)>,
    pub measured: Vec<Measured>,
    /// Rounds of the interleaved measurement and images per sampling run.
    pub rounds: usize,
    pub images: usize,
    /// The schedule file field, and the schedule loaded from it.
    pub schedule_path: String,
    pub schedule: Option<LoadedSchedule>,
    /// A schedule given by `--set schedule=...`, loaded once the view is idle.
    load_pending: bool,
    job: Option<Job<SkipMessage>>,
    pub message: Option<Result<String, String>>,
}

impl Default for SkipView {
    fn default() -> Self {
        SkipView {
            levels: 3,
            exponent: 2.0,
            steps: 20,
            skip_type: None,
            flops: None,
            measured: Vec::new(),
            rounds: 3,
            images: 4,
            schedule_path: crate::diffusion::SHIPPED_SCHEDULE.into(),
            schedule: None,
            load_pending: false,
            job: None,
            message: None,
        }
    }
}

/// The FLOP-based speed-up of sampling `steps` steps at exponent `c` over c = 0, from the
/// FLOPs of one network call per skipped-level count.
pub fn predicted_speedup(flops: &[f64], c: f32, steps: usize) -> Option<f64> {
    let full = *flops.first()?;
    let levels = flops.len();
    let used: f64 = step_times(steps)
        .iter()
        .map(|&t| flops[skip_levels(levels, t, c).min(levels - 1)])
        .sum();
    (full > 0.0 && steps > 0).then(|| 1.0 - used / (full * steps as f64))
}

impl SkipView {
    pub fn is_running(&self) -> bool {
        is_running(&self.job)
    }

    /// Nothing left to load or count: the schedule asked for is in and the FLOPs are counted.
    pub fn settled(&self) -> bool {
        !self.load_pending && !self.is_running() && self.flops.is_some()
    }

    pub fn cancel(&self) {
        if let Some(job) = &self.job {
            job.cancel();
        }
    }

    pub fn poll(&mut self, _shared: &Shared) {
        for event in self.job.as_mut().map(Job::poll).unwrap_or_default() {
            match event {
                Event::Message(SkipMessage::Flops(path, flops)) => {
                    self.flops = Some((path, flops));
                    self.message = None;
                }
                Event::Message(SkipMessage::Measured(m)) => {
                    self.message = Some(Ok(format!(
                        "measured at c = {}: {:.1}% faster than c = 0 (median of {} interleaved rounds)",
                        m.exponent,
                        100.0 * m.timing.speedup(),
                        m.timing.rounds()
                    )));
                    self.measured.push(m);
                }
                Event::Message(SkipMessage::Schedule(loaded)) => {
                    self.steps = loaded.schedule.steps();
                    self.message = Some(Ok(format!("loaded {}", loaded.path)));
                    self.schedule = Some(*loaded);
                }
                Event::Message(SkipMessage::Progress(text)) => self.message = Some(Ok(text)),
                Event::Finished(Err(e)) => self.message = Some(Err(e)),
                Event::Finished(Ok(())) => {}
            }
        }
    }

    /// The view's settings from `wgdiff gui --view skip --set KEY=VALUE` (or a page address):
    /// `schedule` = a schedule file to load.
    pub fn set(&mut self, key: &str, value: &str) -> crate::Result<()> {
        match key {
            "schedule" => {
                self.schedule_path = value.to_string();
                self.load_pending = true;
            }
            _ => return Err(super::unknown_setting("skip", key, &["schedule"])),
        }
        Ok(())
    }

    /// Reads and checks the schedule file at `path` in the background.
    pub fn load_schedule(&mut self, ctx: &egui::Context, path: PathBuf) {
        self.message = Some(Ok(format!("loading {}", path.display())));
        self.job = Some(Job::start(ctx, "schedule", move |job| async move {
            job.send(SkipMessage::Schedule(Box::new(read_schedule(&path).await?)));
            Ok(())
        }));
    }

    /// Lets the user pick a schedule file (the page has no folders to type a path into).
    fn open_schedule(&mut self, ctx: &egui::Context) {
        self.job = Some(Job::start(ctx, "open schedule", move |job| async move {
            if let Some(path) = platform::pick_file().await? {
                job.send(SkipMessage::Schedule(Box::new(read_schedule(&path).await?)));
            }
            Ok(())
        }));
    }

    /// Counts the FLOPs of one network call per skipped-level count of the loaded model.
    fn count_flops(&mut self, ctx: &egui::Context, shared: &Shared, path: PathBuf) {
        let gpu = shared.gpu.clone();
        let skip_type = self.skip_type;
        self.message = Some(Ok("counting the FLOPs of each skip level".into()));
        self.job = Some(Job::start(ctx, "flops", move |job| async move {
            let loaded = platform::load_model(&gpu, &path, skip_type).await?;
            let mut flops = Vec::new();
            for skip in 0..loaded.net.levels() {
                job.check()?;
                let profile = crate::profile::profile_sampling_step(
                    &gpu,
                    loaded.net.as_ref(),
                    &loaded.state.model,
                    1,
                    skip,
                )
                .await?;
                flops.push(profile.records.iter().map(|r| r.flops).sum());
            }
            job.send(SkipMessage::Flops(path, flops));
            Ok(())
        }));
    }

    /// Times sampling at c against c = 0, interleaved (the view's settings, the denoise view's
    /// checkpoint).
    pub fn measure(&mut self, ctx: &egui::Context, shared: &Shared) {
        if self.is_running() {
            return;
        }
        let gpu: Gpu = shared.gpu.clone();
        let path = shared.options.checkpoint.clone();
        let (exponent, rounds, skip_type) = (self.exponent, self.rounds, self.skip_type);
        let predicted = self
            .flops
            .as_ref()
            .and_then(|(_, f)| predicted_speedup(f, exponent, self.steps));
        let (steps, images) = (self.steps, self.images);
        self.message = Some(Ok(format!("measuring c = {exponent} against c = 0")));
        self.job = Some(Job::start(ctx, "measure", move |job| async move {
            let loaded = platform::load_model(&gpu, &path, skip_type).await?;
            let request = SampleRequest::builder(&loaded.state.model, &loaded.state.process)
                .sampler(Sampler::Ddpm)
                .steps(Some(steps))
                .count(images)
                .skip(SkipPlan::Exponent(exponent))
                .build()?;
            let timing = measure_skip_speedup(&gpu, loaded.sampling(), &request, rounds, |done, total| {
                job.send(SkipMessage::Progress(format!("measuring: run {done} of {total}")));
                job.check()
            })
            .await?;
            job.send(SkipMessage::Measured(Measured {
                exponent,
                timing,
                predicted,
            }));
            Ok(())
        }));
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &Shared, model: Option<&ModelInfo>) {
        let ctx = ui.ctx().clone();
        if self.load_pending && !self.is_running() {
            self.load_pending = false;
            self.load_schedule(&ctx, PathBuf::from(&self.schedule_path));
        }
        if let Some(info) = model {
            self.levels = info.levels;
            let counted = self.flops.as_ref().is_some_and(|(p, _)| *p == info.path);
            if !counted && !self.is_running() && info.levels > 1 {
                self.count_flops(&ctx, shared, info.path.clone());
            }
            ui.label(format!("model: {} ({})", info.path.display(), info.summary()));
        } else {
            ui.label("no model loaded (load one in the denoise view); the schedule below is for N levels");
        }
        ui.horizontal(|ui| {
            ui.add_enabled(
                model.is_none(),
                egui::Slider::new(&mut self.levels, 1..=6).text("levels N"),
            );
            ui.add(
                egui::Slider::new(&mut self.exponent, 0.0..=5.0)
                    .step_by(0.1)
                    .text("exponent c"),
            );
            ui.add(
                egui::DragValue::new(&mut self.steps)
                    .range(1..=1000)
                    .prefix("sampler steps "),
            );
            egui::ComboBox::from_label("skip type")
                .selected_text(self.skip_type.map_or("as trained".to_string(), |t| t.to_string()))
                .show_ui(ui, |ui| {
                    ui.selectable_value(&mut self.skip_type, None, "as trained");
                    for t in [SkipType::Zero, SkipType::Duplicate, SkipType::Interpolate] {
                        ui.selectable_value(&mut self.skip_type, Some(t), t.to_string());
                    }
                });
        });
        ui.horizontal(|ui| {
            let label = ui.label("schedule file");
            ui.add(egui::TextEdit::singleline(&mut self.schedule_path).desired_width(340.0))
                .labelled_by(label.id);
            if ui
                .add_enabled(!self.is_running(), egui::Button::new("Load schedule"))
                .on_hover_text(
                    "a per-step schedule (JSON) from `wgdiff experiment skip-search`, drawn over k(t)",
                )
                .clicked()
            {
                self.load_schedule(&ctx, PathBuf::from(&self.schedule_path));
            }
            if platform::IN_PAGE
                && ui
                    .add_enabled(!self.is_running(), egui::Button::new("Open a file..."))
                    .clicked()
            {
                self.open_schedule(&ctx);
            }
        });
        if let Some(loaded) = &self.schedule {
            ui.label(loaded.summary());
        }
        let levels = self.levels.max(1);
        let schedule = self.schedule();
        let mean_k = schedule.iter().map(|&(_, k)| k).sum::<usize>() as f64 / schedule.len().max(1) as f64;
        ui.label(format!(
            "k(t) = min(N-1, floor(N - N(1-t)^c)): over {} steps the network skips {:.2} of {} levels on average",
            self.steps, mean_k, levels
        ));
        self.schedule_plot(ui, levels);
        self.flops_ui(ui);
        ui.horizontal(|ui| {
            ui.add(
                egui::DragValue::new(&mut self.rounds)
                    .range(1..=20)
                    .prefix("rounds "),
            );
            ui.add(
                egui::DragValue::new(&mut self.images)
                    .range(1..=64)
                    .prefix("images "),
            );
            let can = !self.is_running() && model.is_some_and(|m| m.levels > 1);
            if ui
                .add_enabled(can, egui::Button::new("Measure c against c = 0"))
                .clicked()
            {
                self.measure(&ctx, shared);
            }
            if ui
                .add_enabled(self.is_running(), egui::Button::new("Cancel"))
                .clicked()
            {
                self.cancel();
            }
        });
        super::message_label(ui, &self.message);
        self.speedup_plot(ui);
    }

    /// (t, k(t)) at the sampler's steps for the view's N, c and step count.
    pub fn schedule(&self) -> Vec<(f32, usize)> {
        step_times(self.steps)
            .into_iter()
            .map(|t| (t, skip_levels(self.levels.max(1), t, self.exponent)))
            .collect()
    }

    /// k(t) as a step function over t, with the sampler's steps as points.
    fn schedule_plot(&self, ui: &mut egui::Ui, levels: usize) {
        let pieces = skip_intervals(levels, self.exponent);
        let points: Vec<[f64; 2]> = self
            .schedule()
            .into_iter()
            .map(|(t, k)| [t as f64, k as f64])
            .collect();
        super::plots::plot("skip schedule")
            .height(220.0)
            // bottom right: near noise the schedules skip deep levels, nothing is drawn at k = 0
            .legend(Legend::default().position(egui_plot::Corner::RightBottom))
            .x_axis_label("normalised time t (1 = noise)")
            .y_axis_label("skipped levels k(t)")
            .include_y(0.0)
            .include_y(levels as f64 - 0.5)
            .include_x(0.0)
            .include_x(1.0)
            .show(ui, |plot| {
                // One horizontal segment per piece (a polyline with right-angle turns draws as a band).
                let name = format!("k(t), c = {}", self.exponent);
                for piece in &pieces {
                    let segment = vec![
                        [piece.start as f64, piece.skip as f64],
                        [piece.end as f64, piece.skip as f64],
                    ];
                    plot.line(
                        Line::new(name.clone(), PlotPoints::from(segment))
                            .width(2.5)
                            .color(K_COLOR),
                    );
                }
                plot.points(
                    Points::new("sampler steps", PlotPoints::from(points))
                        .radius(3.0)
                        .color(egui::Color32::from_rgb(90, 160, 240)),
                );
                if let Some(loaded) = &self.schedule {
                    // each step's k_i from its time to the next step's (the last to t = 0)
                    let steps = loaded.points();
                    let name = "k_i of the loaded schedule".to_string();
                    for (i, &(t, k)) in steps.iter().enumerate() {
                        let end = steps.get(i + 1).map_or(0.0, |p| p.0);
                        let segment = vec![[t as f64, k as f64 + 0.05], [end as f64, k as f64 + 0.05]];
                        plot.line(
                            Line::new(name.clone(), PlotPoints::from(segment))
                                .width(2.5)
                                .color(SCHEDULE_COLOR),
                        );
                    }
                    // (the last step's piece has no length: its point shows it)
                    let marks: Vec<[f64; 2]> =
                        steps.iter().map(|&(t, k)| [t as f64, k as f64 + 0.05]).collect();
                    plot.points(
                        Points::new(name, PlotPoints::from(marks))
                            .radius(3.0)
                            .color(SCHEDULE_COLOR),
                    );
                }
            });
    }

    /// The FLOP share of a call per k and the predicted speed-up.
    fn flops_ui(&self, ui: &mut egui::Ui) {
        let Some((_, flops)) = &self.flops else {
            ui.label("FLOPs per level: load a U-Net in the denoise view (counted by the profiler)");
            return;
        };
        let full = flops.first().copied().unwrap_or(0.0).max(f64::MIN_POSITIVE);
        let shares: Vec<String> = flops
            .iter()
            .enumerate()
            .map(|(k, f)| format!("k = {k}: {:.1} MFLOP ({:.0}%)", f * 1e-6, 100.0 * f / full))
            .collect();
        ui.label(format!(
            "FLOPs of one network call per image: {}",
            shares.join(", ")
        ));
        if let Some(p) = predicted_speedup(flops, self.exponent, self.steps) {
            ui.label(format!(
                "predicted speed-up at c = {} over {} steps: {:.1}% (FLOPs only)",
                self.exponent,
                self.steps,
                100.0 * p
            ));
        }
    }

    /// Predicted speed-up over c, and the measured points.
    fn speedup_plot(&self, ui: &mut egui::Ui) {
        let predicted: Vec<[f64; 2]> = match &self.flops {
            Some((_, flops)) => (0..=50)
                .filter_map(|i| {
                    let c = i as f32 * 0.1;
                    predicted_speedup(flops, c, self.steps).map(|p| [c as f64, 100.0 * p])
                })
                .collect(),
            None => Vec::new(),
        };
        let measured: Vec<[f64; 2]> = self
            .measured
            .iter()
            .map(|m| [m.exponent as f64, 100.0 * m.timing.speedup()])
            .collect();
        super::plots::plot("speed-up")
            .height(200.0)
            .legend(Legend::default())
            .x_axis_label("exponent c")
            .y_axis_label("speed-up over c = 0 (%)")
            .include_y(0.0)
            .show(ui, |plot| {
                plot.line(Line::new("predicted (FLOPs)", PlotPoints::from(predicted)));
                plot.points(Points::new("measured", PlotPoints::from(measured)).radius(4.0));
            });
    }
}
