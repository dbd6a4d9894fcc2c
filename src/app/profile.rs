//! The profile view: one profiled training or sampling step of a model, its per-op table
//! (sortable), a timeline of the step's dispatches, and a roofline under measured ceilings.

use super::frame_clock::Activity;
use super::jobs::{is_running, Event, Job};
use super::platform;
use super::Shared;
use crate::gpu::{OpRow, Profile};
use crate::models::{preset, PRESETS};
use crate::profile::{profile_sampling_step, profile_training_step};
use crate::roofline::{measure_ceilings, roofline_points, Ceilings};
use eframe::egui;
use egui_plot::{Legend, Line, PlotPoints, Points};
use std::path::PathBuf;

/// Below this share of the step's wall time in op times the view says where the rest went.
const COVERED_SHARE: f64 = 0.9;

/// What one profiled step runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// A training step of a preset at a batch size.
    Training { preset: String, batch: usize },
    /// A network call of a checkpoint's model at a batch size, skipping `skip` levels.
    Sampling {
        checkpoint: PathBuf,
        batch: usize,
        skip: usize,
    },
}

/// The column the op table is sorted by (largest first; op names A-Z).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    Op,
    Calls,
    Total,
    Mean,
    Share,
    Gflops,
    Bytes,
    Intensity,
}

/// What a profiling job reports.
pub enum ProfileMessage {
    Done(Profile, Ceilings),
}

/// The profile view's state.
pub struct ProfileView {
    pub workload: Workload,
    pub profile: Option<Profile>,
    pub ceilings: Option<Ceilings>,
    pub sort: SortBy,
    job: Option<Job<ProfileMessage>>,
    /// Asked for while another of the app's jobs used the device: starts when they end.
    queued: bool,
    pub message: Option<Result<String, String>>,
}

impl ProfileView {
    pub fn new(_shared: &Shared) -> ProfileView {
        ProfileView {
            workload: Workload::Training {
                preset: "mnist-small".into(),
                batch: 16,
            },
            profile: None,
            ceilings: None,
            sort: SortBy::Total,
            job: None,
            queued: false,
            message: None,
        }
    }

    pub fn is_running(&self) -> bool {
        is_running(&self.job)
    }

    /// True while a profile is asked for or running.
    pub fn is_busy(&self) -> bool {
        self.queued || self.is_running()
    }

    pub fn cancel(&mut self) {
        if self.queued {
            self.queued = false;
            self.message = Some(Err("profiling cancelled before it started".into()));
        }
        if let Some(job) = &self.job {
            job.cancel();
        }
    }

    /// Asks for one profiled step of the workload (and the ceilings, measured the first time).
    /// It starts at the first frame where the app's other jobs leave the device idle
    /// ([`ProfileView::start_when_free`]): the profiler times every dispatch on the device, and
    /// a step profiled beside another job's dispatches (the checkpoint's load, which the app
    /// starts as it opens) would count them as its own.
    pub fn run(&mut self) {
        if self.is_busy() {
            return;
        }
        self.queued = true;
    }

    /// Starts the asked-for profile if `others` (the activity of the app's other jobs) is idle,
    /// or says what it waits for.
    pub fn start_when_free(&mut self, ctx: &egui::Context, shared: &Shared, others: Activity) {
        if !self.queued {
            return;
        }
        if others != Activity::Idle {
            self.message = Some(Ok(format!(
                "profiling starts when the app's {} ends (a profiled step has the device to itself)",
                others.name()
            )));
            return;
        }
        self.queued = false;
        let gpu = shared.gpu.clone();
        let workload = self.workload.clone();
        let known = self.ceilings.clone();
        self.message = Some(Ok("profiling (one warm-up step, then one profiled step)".into()));
        self.job = Some(Job::start(ctx, "profile", move |job| async move {
            let profile = match &workload {
                Workload::Training { preset: name, batch } => {
                    profile_training_step(&gpu, &preset(name)?, *batch).await?
                }
                Workload::Sampling {
                    checkpoint,
                    batch,
                    skip,
                } => {
                    let loaded = platform::load_model(&gpu, checkpoint, None).await?;
                    profile_sampling_step(&gpu, loaded.net.as_ref(), &loaded.state.model, *batch, *skip)
                        .await?
                }
            };
            job.check()?;
            let ceilings = match known {
                Some(c) => c,
                None => measure_ceilings(&gpu).await?,
            };
            job.send(ProfileMessage::Done(profile, ceilings));
            Ok(())
        }));
    }

    pub fn poll(&mut self) {
        for event in self.job.as_mut().map(Job::poll).unwrap_or_default() {
            match event {
                Event::Message(ProfileMessage::Done(mut profile, ceilings)) => {
                    profile.roof = Some(ceilings.as_roof());
                    // the op times miss what ran between them on the device and the host
                    let why = match profile.op_share_of_wall() {
                        Some(share) if share < COVERED_SHARE => {
                            " (the rest: the host recording and submitting, and the app's frames drawn on the same device)"
                        }
                        _ => "",
                    };
                    self.message = Some(Ok(format!(
                        "{}{why}; ceilings: {:.1} GFLOP/s ({}), {:.1} GB/s ({})",
                        profile.time_line(),
                        ceilings.gflops,
                        ceilings.compute,
                        ceilings.gbytes_per_s,
                        ceilings.bandwidth
                    )));
                    let done = serde_json::json!({
                        "status": "done",
                        "wall_ms": profile.wall_ns.map(|w| w * 1e-6),
                        "op_ms": profile.op_ns() * 1e-6,
                        "roof_gflops": ceilings.gflops,
                        "rows": profile.rows(),
                    });
                    platform::announce("profile", &done.to_string());
                    self.profile = Some(profile);
                    self.ceilings = Some(ceilings);
                }
                Event::Finished(Err(e)) => self.message = Some(Err(e)),
                Event::Finished(Ok(())) => {}
            }
        }
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &Shared) {
        self.workload_ui(ui, shared);
        ui.horizontal(|ui| {
            if ui
                .add_enabled(!self.is_busy(), egui::Button::new("Profile one step"))
                .clicked()
            {
                self.run();
            }
            if ui
                .add_enabled(self.is_busy(), egui::Button::new("Cancel"))
                .clicked()
            {
                self.cancel();
            }
        });
        super::message_label(ui, &self.message);
        let Some(profile) = &self.profile else { return };
        ui.horizontal_top(|ui| {
            ui.vertical(|ui| {
                ui.set_width(560.0);
                ui.strong("roofline");
                roofline_plot(ui, profile, self.ceilings.as_ref());
            });
            ui.vertical(|ui| {
                ui.strong("dispatch timeline (hover for the op)");
                timeline(ui, profile);
            });
        });
        ui.separator();
        self.table(ui);
    }

    fn workload_ui(&mut self, ui: &mut egui::Ui, shared: &Shared) {
        let training = matches!(self.workload, Workload::Training { .. });
        ui.horizontal(|ui| {
            if ui
                .selectable_label(training, "training step of a preset")
                .clicked()
                && !training
            {
                self.workload = Workload::Training {
                    preset: "mnist-small".into(),
                    batch: 16,
                };
            }
            if ui
                .selectable_label(!training, "sampling step of the checkpoint")
                .clicked()
                && training
            {
                self.workload = Workload::Sampling {
                    checkpoint: shared.options.checkpoint.clone(),
                    batch: 16,
                    skip: 0,
                };
            }
        });
        ui.horizontal(|ui| match &mut self.workload {
            Workload::Training { preset, batch } => {
                egui::ComboBox::from_label("preset")
                    .selected_text(preset.clone())
                    .show_ui(ui, |ui| {
                        for name in PRESETS {
                            ui.selectable_value(preset, name.to_string(), name);
                        }
                    });
                ui.add(egui::DragValue::new(batch).range(1..=256).prefix("batch "));
            }
            Workload::Sampling {
                checkpoint,
                batch,
                skip,
            } => {
                ui.label(format!("checkpoint {}", checkpoint.display()));
                ui.add(egui::DragValue::new(batch).range(1..=256).prefix("batch "));
                ui.add(egui::DragValue::new(skip).range(0..=8).prefix("skipped levels "));
            }
        });
    }

    /// The profile's op rows in the table's order.
    pub fn sorted_rows(&self) -> Vec<OpRow> {
        let mut rows = self.profile.as_ref().map(Profile::rows).unwrap_or_default();
        sort_rows(&mut rows, self.sort);
        rows
    }

    /// The per-op table; clicking a header sorts by that column.
    fn table(&mut self, ui: &mut egui::Ui) {
        let rows = self.sorted_rows();
        let headers = [
            ("op", SortBy::Op),
            ("calls", SortBy::Calls),
            ("total ms", SortBy::Total),
            ("mean ms", SortBy::Mean),
            ("share %", SortBy::Share),
            ("GFLOP/s", SortBy::Gflops),
            ("GB", SortBy::Bytes),
            ("FLOP/byte", SortBy::Intensity),
        ];
        egui::Grid::new("op table")
            .striped(true)
            .num_columns(9)
            .show(ui, |ui| {
                for (name, by) in headers {
                    let title = if self.sort == by {
                        format!("{name} (sorted)")
                    } else {
                        name.to_string()
                    };
                    if ui.button(title).clicked() {
                        self.sort = by;
                    }
                }
                ui.label("kernel");
                ui.end_row();
                let opt =
                    |v: Option<f64>, digits: usize| v.map_or("—".to_string(), |v| format!("{v:.digits$}"));
                for r in &rows {
                    ui.label(&r.op);
                    ui.label(r.calls.to_string());
                    ui.label(format!("{:.3}", r.total_ms));
                    ui.label(format!("{:.3}", r.mean_ms));
                    ui.label(format!("{:.1}", r.device_pct));
                    ui.label(opt(r.gflops, 2));
                    ui.label(format!("{:.4}", r.gb));
                    ui.label(opt(r.flop_per_byte, 2));
                    ui.label(&r.kernel);
                    ui.end_row();
                }
            });
    }
}

/// Sorts op rows by a column, largest first (op names alphabetically).
pub fn sort_rows(rows: &mut [OpRow], by: SortBy) {
    let key = |r: &OpRow| -> f64 {
        match by {
            SortBy::Op => 0.0,
            SortBy::Calls => r.calls as f64,
            SortBy::Total => r.total_ms,
            SortBy::Mean => r.mean_ms,
            SortBy::Share => r.device_pct,
            SortBy::Gflops => r.gflops.unwrap_or(-1.0),
            SortBy::Bytes => r.gb,
            SortBy::Intensity => r.flop_per_byte.unwrap_or(-1.0),
        }
    };
    match by {
        SortBy::Op => rows.sort_by(|a, b| a.op.cmp(&b.op)),
        _ => rows.sort_by(|a, b| key(b).total_cmp(&key(a))),
    }
}

/// Every op at (log10 FLOP/byte, log10 GFLOP/s) under the measured compute and bandwidth roofs.
fn roofline_plot(ui: &mut egui::Ui, profile: &Profile, ceilings: Option<&Ceilings>) {
    let points = roofline_points(profile);
    let log = |v: f64| v.max(1e-6).log10();
    let roof: Vec<[f64; 2]> = match ceilings {
        Some(c) => (-30..=40)
            .map(|i| {
                let intensity = 10f64.powf(i as f64 * 0.1);
                [log(intensity), log(c.gflops.min(intensity * c.gbytes_per_s))]
            })
            .collect(),
        None => Vec::new(),
    };
    let power = |mark: egui_plot::GridMark, _: &std::ops::RangeInclusive<f64>| {
        let v = 10f64.powf(mark.value);
        if v >= 1.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    };
    super::plots::plot("roofline")
        .height(300.0)
        .legend(Legend::default())
        .x_axis_label("arithmetic intensity (FLOP/byte, log)")
        .y_axis_label("GFLOP/s (log)")
        .x_axis_formatter(power)
        .y_axis_formatter(power)
        .show(ui, |plot| {
            plot.line(Line::new("measured roof", PlotPoints::from(roof)).width(2.0));
            for p in &points {
                let xy = vec![[log(p.intensity), log(p.gflops)]];
                plot.points(
                    Points::new(p.op.clone(), PlotPoints::from(xy)).radius(3.0 + 12.0 * p.share as f32),
                );
            }
        });
}

/// The step's dispatches as bars over device time; hovering one names its op.
fn timeline(ui: &mut egui::Ui, profile: &Profile) {
    let (rect, response) = ui.allocate_exact_size(egui::vec2(560.0, 60.0), egui::Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
    let start = profile
        .records
        .iter()
        .map(|r| r.start_ns)
        .fold(f64::INFINITY, f64::min);
    let span = profile.span_ns().max(1.0);
    let x = |ns: f64| rect.left() + ((ns - start) / span) as f32 * rect.width();
    let mut hovered = None;
    for r in &profile.records {
        let bar = egui::Rect::from_x_y_ranges(
            x(r.start_ns)..=x(r.start_ns + r.duration_ns).max(x(r.start_ns) + 1.0),
            rect.top() + 4.0..=rect.bottom() - 4.0,
        );
        painter.rect_filled(bar, 0.0, op_color(&r.name));
        if response.hover_pos().is_some_and(|p| bar.x_range().contains(p.x)) {
            hovered = Some(r);
        }
    }
    let text = match hovered {
        Some(r) => format!("{} ({}): {:.3} ms", r.name, r.kernel, r.duration_ns * 1e-6),
        None => format!("{} dispatches over {:.1} ms", profile.records.len(), span * 1e-6),
    };
    ui.label(text);
}

/// A stable colour per op name.
fn op_color(name: &str) -> egui::Color32 {
    let hash = crate::fnv::Fnv1a::of(name.as_bytes());
    let hue = (hash % 360) as f32 / 360.0;
    egui::ecolor::Hsva::new(hue, 0.6, 0.85, 1.0).into()
}
