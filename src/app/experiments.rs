//! The experiments view: starts `wgdiff experiment`'s runs (the library's `experiment::lab`) and
//! shows their tables filling in, their plots drawing live, progress with ETA, and the report.

use super::jobs::{is_running, Event, Job, JobContext};
use super::platform;
use super::train::clock;
use super::Shared;
use crate::experiment::lab::{self, Kind, LivePlot, Setup};
use crate::experiment::Inputs;
use crate::{Gpu, Result};
use eframe::egui;
use egui_plot::{Legend, Line, PlotPoints, Points};
use web_time::Instant;

/// What an experiment's job reports: the library's events, then what it made.
pub enum ExperimentMessage {
    Event(lab::Event),
    Finished(lab::Finished),
}

/// A table as its rows arrive.
pub struct Table {
    pub title: &'static str,
    pub columns: Vec<String>,
    /// (key, cells) in the order the rows first arrived.
    pub rows: Vec<(String, Vec<String>)>,
}

/// A live plot: its axes and each series' points in arrival order.
pub struct Plot {
    pub axes: LivePlot,
    pub series: Vec<(String, Vec<[f64; 2]>)>,
}

/// The current phase's progress, and where and when the phase began (for its ETA).
struct Phase {
    done: usize,
    total: usize,
    unit: &'static str,
    what: String,
    began: (usize, Instant),
}

/// Notes kept for the log.
const NOTES_KEPT: usize = 200;

/// The experiments view's state.
pub struct ExperimentsView {
    pub kind: Kind,
    pub quick: bool,
    /// The experiment's flags as text (key, value), starting from its plan's values.
    pub fields: Vec<(&'static str, String)>,
    /// Flags set by `--set` (kept when the experiment or its size changes).
    given: Vec<(String, String)>,
    job: Option<Job<ExperimentMessage>>,
    phase: Option<Phase>,
    started: Option<Instant>,
    pub notes: Vec<String>,
    pub tables: Vec<Table>,
    pub plots: Vec<Plot>,
    pub finished: Option<lab::Finished>,
    /// The folder of the last run's report (a page's files to download).
    report_dir: std::path::PathBuf,
    /// The report file handed to the user once a run ends (`download`: a download in a page).
    download: Option<String>,
    pub message: Option<std::result::Result<String, String>>,
}

impl Default for ExperimentsView {
    fn default() -> ExperimentsView {
        let mut view = ExperimentsView {
            kind: Kind::Compression,
            quick: true,
            fields: Vec::new(),
            given: Vec::new(),
            job: None,
            phase: None,
            started: None,
            notes: Vec::new(),
            tables: Vec::new(),
            plots: Vec::new(),
            finished: None,
            report_dir: Default::default(),
            download: None,
            message: None,
        };
        view.reset_fields();
        view
    }
}

impl ExperimentsView {
    /// Sets `experiment` (a name), `quick` (true or false), `download` (a report file's name,
    /// handed to the user when the run ends: a download in a page) or one of the experiment's
    /// flags (`--set samples=50`), as `wgdiff gui --set` and a page address give them.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "experiment" => self.kind = Kind::parse(value)?,
            "download" => self.download = Some(value.into()),
            "quick" => self.quick = super::parse_setting(key, value)?,
            _ => {
                // refused now, by name, if the experiment has no such flag or value
                self.setup_with(&[(key, value)])?;
                self.given.retain(|(k, _)| k != key);
                self.given.push((key.into(), value.into()));
            }
        }
        self.reset_fields();
        Ok(())
    }

    /// The fields of the chosen experiment and size: the plan's values, with `--set` ones on top.
    fn reset_fields(&mut self) {
        let setup = Setup::new(self.kind, self.quick);
        self.fields = setup
            .keys()
            .iter()
            .map(|&key| {
                let given = self.given.iter().find(|(k, _)| k == key);
                (key, given.map_or_else(|| setup.get(key), |(_, v)| v.clone()))
            })
            .collect();
    }

    /// The chosen experiment with `changes` set where they differ from its plan.
    fn setup_with(&self, changes: &[(&str, &str)]) -> Result<Setup> {
        let mut setup = Setup::new(self.kind, self.quick);
        let plan = setup.clone();
        for &(key, value) in changes {
            if plan.get(key) != value {
                setup.set(key, value)?;
            }
        }
        Ok(setup)
    }

    /// The setup the fields describe.
    pub fn setup(&self) -> Result<Setup> {
        let changes: Vec<(&str, &str)> = self.fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.setup_with(&changes)
    }

    pub fn is_running(&self) -> bool {
        is_running(&self.job)
    }

    pub fn cancel(&self) {
        if let Some(job) = &self.job {
            job.cancel();
        }
    }

    /// Whether the last experiment ended with its report written.
    pub fn done(&self) -> bool {
        self.finished.is_some() && !self.is_running()
    }

    /// Starts the experiment the fields describe.
    pub fn start(&mut self, ctx: &egui::Context, shared: &Shared) {
        if self.is_running() {
            return;
        }
        let setup = match self.setup() {
            Ok(setup) => setup,
            Err(e) => {
                self.message = Some(Err(e.to_string()));
                return;
            }
        };
        self.tables.clear();
        self.plots.clear();
        self.notes.clear();
        self.finished = None;
        self.message = None;
        self.phase = None;
        self.started = Some(Instant::now());
        self.report_dir = setup.out.clone();
        let gpu = shared.gpu.clone();
        self.job = Some(Job::start(ctx, "experiment", move |job| {
            experiment_job(gpu, setup, job)
        }));
    }

    /// Takes the job's messages into the tables, plots and progress.
    pub fn poll(&mut self) {
        let events = self.job.as_mut().map(Job::poll).unwrap_or_default();
        for event in events {
            match event {
                Event::Message(message) => self.take(message),
                Event::Finished(Err(e)) => {
                    self.phase = None;
                    let announced = serde_json::json!({ "status": "failed", "error": e });
                    platform::announce("experiment", &announced.to_string());
                    self.message = Some(Err(e));
                }
                Event::Finished(Ok(())) => {
                    self.phase = None;
                    let seconds = self.started.map_or(0.0, |s| s.elapsed().as_secs_f64());
                    let kept = match platform::IN_PAGE {
                        true => "kept in the page (download below)",
                        false => "wrote",
                    };
                    self.message = Some(Ok(match &self.finished {
                        Some(f) => format!("done in {seconds:.0} s; {kept} {}", f.names().join(", ")),
                        None => format!("cancelled after {seconds:.0} s; no report written"),
                    }));
                    let announced = serde_json::json!({
                        "status": if self.finished.is_some() { "done" } else { "cancelled" },
                        "seconds": seconds,
                        "files": self.finished.as_ref().map(|f| f.names()),
                        "markdown": self.finished.as_ref().map(|f| &f.markdown),
                        "tables": self.tables.iter().map(|t| serde_json::json!({
                            "title": t.title,
                            "columns": t.columns,
                            "rows": t.rows.iter().map(|(_, cells)| cells).collect::<Vec<_>>(),
                        })).collect::<Vec<_>>(),
                    });
                    platform::announce("experiment", &announced.to_string());
                    self.deliver_requested();
                }
            }
        }
    }

    fn take(&mut self, message: ExperimentMessage) {
        let event = match message {
            ExperimentMessage::Event(event) => event,
            ExperimentMessage::Finished(finished) => {
                self.finished = Some(finished);
                return;
            }
        };
        match event {
            lab::Event::Note(note) => {
                self.notes.push(note);
                let over = self.notes.len().saturating_sub(NOTES_KEPT);
                self.notes.drain(..over);
            }
            lab::Event::Progress {
                done,
                total,
                unit,
                what,
            } => {
                let began = match &self.phase {
                    Some(p) if p.unit == unit && p.total == total && done >= p.began.0 => p.began,
                    _ => (done, Instant::now()),
                };
                self.phase = Some(Phase {
                    done,
                    total,
                    unit,
                    what,
                    began,
                });
            }
            lab::Event::Row {
                table,
                columns,
                key,
                cells,
            } => {
                let index = match self.tables.iter().position(|t| t.title == table) {
                    Some(i) => i,
                    None => {
                        self.tables.push(Table {
                            title: table,
                            columns,
                            rows: Vec::new(),
                        });
                        self.tables.len() - 1
                    }
                };
                let rows = &mut self.tables[index].rows;
                match rows.iter_mut().find(|(k, _)| *k == key) {
                    Some(row) => row.1 = cells,
                    None => rows.push((key, cells)),
                }
            }
            lab::Event::Point { plot, series, x, y } => {
                let index = match self.plots.iter().position(|p| p.axes == plot) {
                    Some(i) => i,
                    None => {
                        self.plots.push(Plot {
                            axes: plot,
                            series: Vec::new(),
                        });
                        self.plots.len() - 1
                    }
                };
                let all = &mut self.plots[index].series;
                match all.iter_mut().find(|(name, _)| *name == series) {
                    Some((_, points)) => points.push([x, y]),
                    None => all.push((series, vec![[x, y]])),
                }
            }
        }
    }

    /// Hands the report file `download` names to the user, or says the report has none such.
    fn deliver_requested(&mut self) {
        let (Some(name), Some(finished)) = (&self.download, &self.finished) else {
            return;
        };
        let delivered = match finished.names().contains(&name.as_str()) {
            true => platform::deliver(&self.report_dir.join(name)).map_err(|e| e.to_string()),
            false => Err(format!(
                "download: the report has no file {name} (it has {})",
                finished.names().join(", ")
            )),
        };
        if let Err(e) = delivered {
            self.message = Some(Err(e));
        }
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, shared: &Shared) {
        let ctx = ui.ctx().clone();
        ui.label(match platform::IN_PAGE {
            false => {
                "The experiments that reproduce the studies' tables, run by the same library code as \
                 `wgdiff experiment`: rows fill in and plots draw as they are measured, and the report files \
                 are the ones the command writes. Its work is not paced: its times are the command's, and the \
                 app draws between its submissions."
            }
            true => {
                "The experiments whose files this site holds, run by the same library code as `wgdiff \
                 experiment`: rows fill in and plots draw as they are measured, and the report's files \
                 (Markdown, JSON, schedules and the PNG plots the command writes) are kept here to download. \
                 Its work is paced like every job in the page, so its times are the page's."
            }
        });
        let running = self.is_running();
        ui.add_enabled_ui(!running, |ui| self.settings_ui(ui));
        ui.horizontal(|ui| {
            if ui.add_enabled(!running, egui::Button::new("Start")).clicked() {
                self.start(&ctx, shared);
            }
            if ui.add_enabled(running, egui::Button::new("Cancel")).clicked() {
                self.cancel();
            }
            if let (true, Some(s)) = (running, self.started) {
                ui.label(format!("{} running", clock(s.elapsed().as_secs_f64())));
            }
        });
        if let Some(p) = &self.phase {
            let fraction = p.done as f32 / p.total.max(1) as f32;
            let (since, at) = (
                p.done.saturating_sub(p.began.0),
                p.began.1.elapsed().as_secs_f64(),
            );
            let eta = match since {
                0 => String::new(),
                n => format!(
                    ", about {} left",
                    clock(at / n as f64 * p.total.saturating_sub(p.done) as f64)
                ),
            };
            let text = format!("{} ({} of {} {}{eta})", p.what, p.done, p.total, p.unit);
            ui.add(egui::ProgressBar::new(fraction).text(text));
        }
        super::message_label(ui, &self.message);
        if let (true, Some(f)) = (platform::IN_PAGE, &self.finished) {
            ui.horizontal_wrapped(|ui| {
                ui.label("download:");
                for name in f.names() {
                    if ui.button(name).clicked() {
                        if let Err(e) = platform::deliver(&self.report_dir.join(name)) {
                            self.message = Some(Err(e.to_string()));
                        }
                    }
                }
            });
        }
        if !self.notes.is_empty() {
            egui::CollapsingHeader::new(format!("log ({} lines)", self.notes.len()))
                .default_open(true)
                .show(ui, |ui| {
                    for note in self.notes.iter().rev().take(6).rev() {
                        ui.monospace(note);
                    }
                });
        }
        self.plots_ui(ui);
        for table in &self.tables {
            table_ui(ui, table);
        }
        if let Some(f) = &self.finished {
            egui::CollapsingHeader::new("report (Markdown, as `wgdiff experiment` prints it)")
                .default_open(false)
                .show(ui, |ui| {
                    ui.monospace(&f.markdown);
                });
        }
    }

    fn settings_ui(&mut self, ui: &mut egui::Ui) {
        let (kind, quick) = (self.kind, self.quick);
        ui.horizontal(|ui| {
            egui::ComboBox::from_label("experiment")
                .selected_text(self.kind.name())
                .show_ui(ui, |ui| {
                    // (a page lists the experiments whose files its site holds)
                    for k in Kind::ALL.into_iter().filter(|&k| runs_here(k)) {
                        ui.selectable_value(&mut self.kind, k, k.name());
                    }
                });
            ui.checkbox(&mut self.quick, "quick (sized for lavapipe)")
                .on_hover_text("the experiment's --quick plan; off: the full plan for a real GPU");
        });
        if (kind, quick) != (self.kind, self.quick) {
            self.reset_fields();
        }
        ui.label(self.kind.about());
        egui::Grid::new("experiment flags").num_columns(4).show(ui, |ui| {
            for (i, (key, value)) in self.fields.iter_mut().enumerate() {
                let label = ui.label(format!("--{key}"));
                ui.add_sized([320.0, 20.0], egui::TextEdit::singleline(value))
                    .labelled_by(label.id);
                if i % 2 == 1 {
                    ui.end_row();
                }
            }
        });
        match self.setup() {
            Ok(setup) => ui.monospace(format!("same as: {}", setup.command())),
            Err(e) => ui.colored_label(egui::Color32::LIGHT_RED, e.to_string()),
        };
    }

    fn plots_ui(&self, ui: &mut egui::Ui) {
        if self.plots.is_empty() {
            return;
        }
        ui.horizontal_wrapped(|ui| {
            for p in &self.plots {
                ui.vertical(|ui| {
                    ui.strong(p.axes.title);
                    super::plots::plot(p.axes.title)
                        .width(420.0)
                        .height(220.0)
                        .x_axis_label(p.axes.x)
                        .y_axis_label(p.axes.y.as_str())
                        .legend(Legend::default())
                        .show(ui, |plot| {
                            for (name, points) in &p.series {
                                if p.axes.joined {
                                    let line = PlotPoints::from(points.clone());
                                    plot.line(Line::new(name.as_str(), line));
                                }
                                let dots = PlotPoints::from(points.clone());
                                plot.points(Points::new(name.as_str(), dots).radius(3.0));
                            }
                        });
                });
            }
        });
    }
}

/// A table with its title, striped.
fn table_ui(ui: &mut egui::Ui, table: &Table) {
    ui.strong(table.title);
    egui::Grid::new(table.title).striped(true).show(ui, |ui| {
        for c in &table.columns {
            ui.label(egui::RichText::new(c).strong());
        }
        ui.end_row();
        for (_, cells) in &table.rows {
            for cell in cells {
                ui.label(cell);
            }
            ui.end_row();
        }
    });
    ui.add_space(6.0);
}

/// The device's pacing switched off until dropped, then put back: an experiment's work goes to
/// the device in the command's submissions, so its times are the command's (paced, the
/// compression experiment at a toy size took 4.5x the command's time on lavapipe), and the app's
/// frames wait behind them.
struct Unpaced<'a> {
    gpu: &'a Gpu,
    paced: Option<crate::gpu::Pacing>,
}

impl<'a> Unpaced<'a> {
    fn new(gpu: &'a Gpu) -> Unpaced<'a> {
        let paced = gpu.pacing();
        gpu.set_pacing(None);
        Unpaced { gpu, paced }
    }
}

impl Drop for Unpaced<'_> {
    fn drop(&mut self) {
        self.gpu.set_pacing(self.paced);
    }
}

/// Whether experiment `kind` runs here: natively all do; a page runs those whose files its site
/// holds ([`Setup::page_inputs`]).
fn runs_here(kind: Kind) -> bool {
    !platform::IN_PAGE || Setup::new(kind, true).page_inputs().is_ok()
}

/// Runs `setup` with the library's experiment runner, sending its events; Cancel stops it at
/// its next event. Natively unpaced, reading its files from disk and writing its report there;
/// in a page (paced, as every job there) its files are fetched from the site first, and the
/// report's files are kept as the page's files under the setup's folder, to download.
async fn experiment_job(gpu: Gpu, setup: Setup, job: JobContext<ExperimentMessage>) -> Result<()> {
    let _unpaced = (!platform::IN_PAGE).then(|| Unpaced::new(&gpu));
    let inputs = match platform::IN_PAGE {
        true => {
            let mut files = Vec::new();
            for path in setup.page_inputs()? {
                job.send(ExperimentMessage::Event(lab::Event::Note(format!(
                    "fetching {}",
                    path.display()
                ))));
                let bytes = platform::read_file(&path).await?;
                files.push((path, bytes));
            }
            Inputs::Fetched(files)
        }
        false => Inputs::Disk,
    };
    let command = format!("{} (from wgdiff gui)", setup.command());
    let finished = lab::run(&gpu, &setup, &inputs, &command, &mut |event| {
        job.check()?;
        job.send(ExperimentMessage::Event(event));
        Ok(())
    })
    .await?;
    if platform::IN_PAGE {
        for (name, bytes) in &finished.files {
            platform::write_file(&setup.out.join(name), bytes)?;
        }
    }
    job.send(ExperimentMessage::Finished(finished));
    Ok(())
}
