//! The wgdiff app (egui): denoise (with a step debugger), compare, skip-schedule, train, profile,
//! experiments and device views, drawn by eframe on the engine's own wgpu device.

mod branches;
mod compare;
mod denoise;
mod device;
mod experiments;
mod export;
mod frame_clock;
mod grid_texture;
mod jobs;
mod platform;
mod plots;
mod profile;
mod sampling;
mod skip;
mod train;

pub use branches::{Branch, Branches};
pub use frame_clock::{Activity, FrameClock, FrameSample};
pub use grid_texture::{GridLayout, GridTexture};
pub use jobs::{Event, Job, JobContext};
pub use platform::entry::*;
pub use profile::{SortBy, Workload as ProfileWorkload};
pub use sampling::{DenoiseSettings, Frame};
pub use train::{run_training, TrainSettings, PAGE_FID_SAMPLES, PAGE_MAX_MINUTES};

use crate::gpu::{Pacing, Parts};
use crate::soak::{SoakRecorder, SoakState};
use crate::{AdapterChoice, Error, Gpu, Result};
use eframe::egui;
use eframe::egui_wgpu::RenderState;
use std::path::PathBuf;

/// Device time a job's submission may hold the queue for (see `Gpu::set_pacing`): a frame
/// waits behind about two of these (one running, one queued). On lavapipe 10 ms kept the
/// 95th-percentile frame interval under 90 ms while training, 25 ms let it reach 118 ms; a
/// fixed one dispatch per submit kept frames short but gave the job 0.25x the CLI's training
/// throughput (`wgdiff bench app`, BENCHMARKS.md). 5 ms took the denoise view's frame p95 from
/// 108.6 to 102.9 ms against 10 ms for the same sampling time, and the train view's hour soak
/// missed the 100 ms target at 10 ms by a few ms in most minutes (BENCHMARKS.md, "Soak").
const JOB_SLICE_SECONDS: f64 = 0.005;

/// [`JOB_SLICE_SECONDS`] in a page, where every slice costs a round trip through the browser's
/// event loop (see `Gpu::drain`). On SwiftShader, training at the defaults: 10 ms slices gave
/// ~0.6-0.9 steps/s, 30 ms a frame p95 of ~380 ms (BENCHMARKS.md, "The page keeps drawing").
const PAGE_JOB_SLICE_SECONDS: f64 = 0.015;

/// While jobs run the UI redraws this often, showing what they sent since (the user's input
/// and a job's end wake it at once): often enough that the 95th-percentile frame interval
/// stays under 100 ms, seldom enough to leave the device (on lavapipe: the CPU, where a frame
/// of the train view costs about 15 ms of two cores) to the job. Natively frames start this
/// far apart ([`FrameClock::rest_of`]): 86 ms draws as many frames as asking 80 ms after each
/// build did, and took the train view's frame p95 from 109-110 to 96-97 ms (BENCHMARKS.md).
const BUSY_REDRAW: std::time::Duration = std::time::Duration::from_millis(match platform::IN_PAGE {
    true => PAGE_BUSY_REDRAW_MS,
    false => 86,
});

/// [`BUSY_REDRAW`] while sampling natively, with 5 ms slices: frames 75 ms apart put the
/// denoise view's frame p95 at 81-86 ms on lavapipe for the same sampling time (70 ms after
/// each build gave 99-104 ms; BENCHMARKS.md).
const SAMPLING_REDRAW: std::time::Duration = std::time::Duration::from_millis(match platform::IN_PAGE {
    true => PAGE_BUSY_REDRAW_MS,
    false => 75,
});

/// How often the UI redraws while it does `activity` (a job runs).
fn busy_redraw_for(activity: Activity) -> std::time::Duration {
    match activity {
        Activity::Sampling => SAMPLING_REDRAW,
        _ => BUSY_REDRAW,
    }
}

/// Where the app keeps its current busy cadence ([`busy_redraw_for`]) in egui's memory.
fn busy_redraw_id() -> egui::Id {
    egui::Id::unique("wgdiff busy redraw")
}

/// The cadence the UI of `ctx` keeps while its jobs run: a job that sends a message wakes it
/// on the same one ([`jobs::JobContext::send`]).
fn busy_redraw(ctx: &egui::Context) -> std::time::Duration {
    ctx.data(|d| d.get_temp(busy_redraw_id())).unwrap_or(BUSY_REDRAW)
}

/// The device time of one submission of a job (see [`JOB_SLICE_SECONDS`]).
const JOB_SLICE: f64 = match platform::IN_PAGE {
    true => PAGE_JOB_SLICE_SECONDS,
    false => JOB_SLICE_SECONDS,
};

/// [`BUSY_REDRAW`] in a page (ms): there a frame costs the device more (60-200 ms of
/// Chromium's GPU thread on SwiftShader), and the frame interval's 95th percentile stays near
/// 140 ms.
const PAGE_BUSY_REDRAW_MS: u64 = 120;

/// A `--screenshot` is taken once its view shows what it is for, or after this many seconds.
const SCREENSHOT_TIMEOUT_S: f64 = 900.0;

/// How often the page announces its frame times (seconds).
const FRAMES_ANNOUNCED_EVERY_S: f64 = 2.0;

/// One view of the app (a tab).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Denoise,
    Compare,
    Skip,
    Train,
    Profile,
    Experiments,
    Device,
}

impl View {
    /// Every view with its name (tab title and `--view` value).
    pub const ALL: [(View, &'static str); 7] = [
        (View::Denoise, "denoise"),
        (View::Compare, "compare"),
        (View::Skip, "skip"),
        (View::Train, "train"),
        (View::Profile, "profile"),
        (View::Experiments, "experiments"),
        (View::Device, "device"),
    ];

    pub fn name(self) -> &'static str {
        View::ALL.iter().find(|(v, _)| *v == self).map_or("?", |(_, n)| n)
    }
}

impl std::str::FromStr for View {
    type Err = Error;
    fn from_str(name: &str) -> Result<View> {
        View::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(v, _)| *v)
            .ok_or_else(|| {
                let names: Vec<&str> = View::ALL.iter().map(|(_, n)| *n).collect();
                Error::Config(format!(
                    "unknown view `{name}`; choose one of {}",
                    names.join(", ")
                ))
            })
    }
}

/// How the app starts.
#[derive(Clone, Debug)]
pub struct AppOptions {
    /// The checkpoint the denoise, skip and profile views load first.
    pub checkpoint: PathBuf,
    /// Folder of the app's training runs (`<out>/checkpoint.safetensors`, as `wgdiff train`)
    /// and exports.
    pub out: PathBuf,
    /// The view shown first.
    pub view: View,
    /// Settings of the first view (`key`, `value`), as a page address's query or
    /// `wgdiff gui --set key=value` give them: the denoise view's [`DenoiseSettings::KEYS`],
    /// the compare view's [`CompareView::KEYS`] (its plan, and `a.steps` etc. for variants), the train view's
    /// [`TrainSettings::KEYS`].
    pub settings: Vec<(String, String)>,
    /// Start that view's job (sampling, training, profiling, measuring) at once; a denoise
    /// run then saves its samples (`<out>/frames/samples.png`, a download in the page).
    pub autorun: bool,
    /// Write every frame's times to this CSV when the app closes.
    pub frame_log: Option<PathBuf>,
    /// Write the train view's steps (loss, seconds, elapsed) to this CSV when the app closes.
    pub step_log: Option<PathBuf>,
    /// Rewrite this CSV every minute with a line of resident memory, the buffer pool's bytes
    /// and that minute's frame times (`soak`; in a page: the `memory` announcement).
    pub soak_log: Option<PathBuf>,
    /// Close the app once the `autorun` job has ended (benchmarks and scripts).
    pub exit_when_done: bool,
    /// Save a screenshot here, then close: after `screenshot_after` seconds, once the view
    /// shows its result (denoise: 60% of the steps or a pause, compare: every variant's figures,
    /// train: 6 steps and a sample grid, profile:
    /// the profile; at most 15 minutes).
    pub screenshot: Option<PathBuf>,
    pub screenshot_after: f64,
    /// The adapter choice the device was opened with (the device view lists its adapters).
    pub choice: AdapterChoice,
    /// The outputs above that could not be written (filled as the app runs and closes).
    pub failures: OutputFailures,
}

/// The files the app was told to write (`--screenshot`, `--frame-log`, `--step-log`) that it
/// could not write: `run_native` returns them as its error, so `wgdiff gui` exits non-zero.
/// Clones share the list.
#[derive(Clone, Debug, Default)]
pub struct OutputFailures(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl OutputFailures {
    /// Notes that `what` (e.g. "--screenshot shot.png") was not written, and why.
    pub fn record(&self, what: String, error: &Error) {
        self.0.lock().unwrap().push(format!("{what}: {error}"));
    }

    /// Errors, naming every output that failed, unless all were written.
    pub fn check(&self) -> Result<()> {
        let failed = self.0.lock().unwrap();
        match failed.is_empty() {
            true => Ok(()),
            false => Err(Error::Io {
                what: "the app's outputs".into(),
                reason: format!("not written: {}", failed.join("; ")),
            }),
        }
    }
}

impl Default for AppOptions {
    fn default() -> Self {
        AppOptions {
            checkpoint: crate::pipeline::DEFAULT_CHECKPOINT.into(),
            out: "runs/app".into(),
            view: View::Denoise,
            settings: Vec::new(),
            autorun: false,
            frame_log: None,
            step_log: None,
            soak_log: None,
            exit_when_done: false,
            screenshot: None,
            screenshot_after: 2.0,
            choice: AdapterChoice::default(),
            failures: OutputFailures::default(),
        }
    }
}

/// What every view may use: the engine's device, the renderer that shares it, the options.
pub struct Shared {
    pub gpu: Gpu,
    pub render: RenderState,
    pub options: AppOptions,
}

/// The app.
pub struct WgdiffApp {
    shared: Shared,
    pub view: View,
    pub denoise: denoise::DenoiseView,
    pub compare: compare::CompareView,
    pub skip: skip::SkipView,
    pub train: train::TrainView,
    pub profile: profile::ProfileView,
    pub experiments: experiments::ExperimentsView,
    pub device: device::DeviceView,
    pub clock: FrameClock,
    screenshot_taken: bool,
    /// When the page last announced its frame times (seconds since the app opened), and what
    /// the jobs were doing then.
    frames_announced: (f64, Activity),
    /// A line a minute of memory and frame times (`--soak-log`, the page's `memory` announcement).
    soak: SoakRecorder,
}

impl WgdiffApp {
    /// The app on `gpu`, which eframe must draw with (`WgpuSetup::Existing` with the engine's
    /// instance, adapter, device and queue; see [`run_native`]).
    pub fn new(cc: &eframe::CreationContext, gpu: Gpu, options: AppOptions) -> Result<WgdiffApp> {
        let render = cc.wgpu_render_state.clone().ok_or_else(|| {
            Error::Config("the app needs eframe's wgpu renderer (it shares the engine's device)".into())
        })?;
        // Jobs submit a few dispatches at a time so the UI's frames never queue behind a
        // whole sampling or training step on the shared device.
        gpu.set_pacing(Some(Pacing {
            slice_seconds: JOB_SLICE,
            // (on a CPU adapter one dispatch may hold the queue for 150 ms; on a GPU they are short)
            parts: if gpu.is_cpu() {
                Parts::OneSlice
            } else {
                Parts::Whole
            },
        }));
        let shared = Shared { gpu, render, options };
        let denoise = denoise::DenoiseView::new(&shared);
        let mut app = WgdiffApp {
            view: shared.options.view,
            compare: compare::CompareView::new(&shared, &denoise.settings),
            denoise,
            skip: skip::SkipView::default(),
            train: train::TrainView::new(&shared),
            profile: profile::ProfileView::new(&shared),
            experiments: experiments::ExperimentsView::default(),
            device: device::DeviceView::default(),
            // (the page announces its frame times instead of writing a log)
            clock: FrameClock::new(shared.options.frame_log.is_some() || platform::IN_PAGE),
            shared,
            screenshot_taken: false,
            frames_announced: (0.0, Activity::Idle),
            soak: SoakRecorder::default(),
        };
        for (key, value) in &app.shared.options.settings {
            match app.view {
                View::Denoise => app.denoise.settings.set(key, value)?,
                View::Train => app.train.settings.set(key, value)?,
                View::Skip => app.skip.set(key, value)?,
                View::Compare => app.compare.set(key, value)?,
                View::Experiments => app.experiments.set(key, value)?,
                view => {
                    return Err(Error::Config(format!(
                        "the {} view takes no settings (got `{key}`); the denoise, compare, skip, train and experiments views do",
                        view.name()
                    )))
                }
            }
        }
        let ctx = &cc.egui_ctx;
        let autorun_sampling = app.shared.options.autorun && app.view == View::Denoise;
        if !autorun_sampling {
            // (a sampling run describes the model itself)
            app.denoise.load_info(ctx, &app.shared);
        }
        if app.shared.options.autorun {
            match app.view {
                View::Denoise => {
                    app.denoise.save_when_done = true;
                    app.denoise.run(ctx, &app.shared);
                }
                View::Skip => app.skip.measure(ctx, &app.shared),
                View::Compare => app.compare.run(ctx, &app.shared),
                View::Train => app.train.start(ctx, &app.shared, false),
                View::Profile => app.profile.run(),
                View::Experiments => app.experiments.start(ctx, &app.shared),
                View::Device => {}
            }
        }
        Ok(app)
    }

    /// What the app's jobs are doing (the frame log's activity column).
    pub fn activity(&self) -> Activity {
        match self.others_activity() {
            Activity::Measuring | Activity::Idle if self.profile.is_running() => Activity::Profiling,
            others => others,
        }
    }

    /// What the app's jobs besides the profile view's are doing.
    fn others_activity(&self) -> Activity {
        if self.train.is_running() {
            Activity::Training
        } else if self.denoise.is_running() || self.compare.is_running() {
            Activity::Sampling
        } else if self.skip.is_running() || self.experiments.is_running() {
            Activity::Measuring
        } else {
            Activity::Idle
        }
    }

    fn tabs(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.heading("wgdiff");
            ui.separator();
            for (view, name) in View::ALL {
                ui.selectable_value(&mut self.view, view, name);
            }
        });
    }

    fn status(&self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.label(crate::gpu::describe(&self.shared.gpu.info));
            ui.separator();
            ui.label(format!("jobs: {}", self.activity().name()));
            ui.separator();
            match self.clock.readout() {
                Some((last, median, p95)) => ui.label(format!(
                    "frame {last:.0} ms (median {median:.0} ms, 95th percentile {p95:.0} ms)"
                )),
                None => ui.label("frame time: measuring"),
            };
        });
    }

    /// Takes the `--screenshot` once its time has come, then closes the app.
    fn screenshot(&mut self, ctx: &egui::Context) {
        let Some(path) = self.shared.options.screenshot.clone() else {
            return;
        };
        let now = ctx.input(|i| i.time);
        let shown = match self.view {
            View::Denoise => {
                let recorded = self.denoise.frames.len();
                // (60% of the steps, or a run paused before them)
                recorded * 5 >= self.denoise.settings.steps * 3
                    || (recorded > 0 && !self.denoise.is_running())
            }
            View::Train => self.train.losses.len() >= 6 && self.train.has_grid(),
            View::Profile => self.profile.profile.is_some() && !self.profile.is_busy(),
            View::Skip => self.skip.settled(),
            View::Compare => !self.compare.is_running() && self.compare.scored(),
            View::Experiments => self.experiments.done(),
            View::Device => true,
        };
        let after = self.shared.options.screenshot_after;
        let due = now >= after && (shown || now >= after + SCREENSHOT_TIMEOUT_S);
        if self.screenshot_taken || !due {
            ctx.request_repaint_after(std::time::Duration::from_millis(200));
            return;
        }
        self.screenshot_taken = true;
        let closer = ctx.clone();
        let failures = self.shared.options.failures.clone();
        let callback = egui::ScreenshotCallback::new(move |image: std::sync::Arc<egui::ColorImage>| {
            let [w, h] = image.size;
            let bytes: Vec<u8> = image.pixels.iter().flat_map(|c| c.to_array()).collect();
            let written = export::png_bytes(w as u32, h as u32, bytes)
                .and_then(|png| platform::write_file(&path, &png));
            match written {
                Ok(()) => eprintln!("screenshot: {}", path.display()),
                Err(e) => failures.record(format!("--screenshot {}", path.display()), &e),
            }
            closer.send_viewport_cmd(egui::ViewportCommand::Close);
        });
        ctx.send_viewport_cmd(egui::ViewportCommand::Screenshot(callback));
    }

    /// In the page, every [`FRAMES_ANNOUNCED_EVERY_S`] and when the jobs' `activity` changes: the
    /// frame times per activity since the page opened (`data-wgdiff-frames`, what the page's
    /// test reads).
    fn announce_frames(&mut self, ctx: &egui::Context, activity: Activity) {
        let now = ctx.input(|i| i.time);
        let due =
            now >= self.frames_announced.0 + FRAMES_ANNOUNCED_EVERY_S || activity != self.frames_announced.1;
        if !platform::IN_PAGE || !due {
            return;
        }
        self.frames_announced = (now, activity);
        platform::announce(
            "frames",
            &serde_json::to_string(&self.clock.per_activity()).unwrap_or_default(),
        );
    }

    /// Notes the frame just ended for the soak log, and once a minute writes its line (the
    /// `--soak-log` CSV rewritten; in the page the `memory` announcement).
    fn soak(&mut self, activity: Activity) {
        let Some(frame) = self.clock.last() else {
            return;
        };
        let (logging, at_s) = (self.shared.options.soak_log.clone(), frame.at_s);
        if !(logging.is_some() || platform::IN_PAGE) || !self.soak.frame(at_s, frame.interval_ms) {
            return;
        }
        let pool = self.shared.gpu.pool().stats();
        let line = self.soak.line(
            at_s,
            SoakState {
                activity: activity.name(),
                rss_bytes: platform::resident_bytes(),
                pool_live_bytes: pool.live_bytes,
                pool_pooled_bytes: pool.pooled_bytes,
                runs: self.denoise.runs_completed,
                steps: self.train.losses.len(),
            },
        );
        platform::announce("memory", &serde_json::to_string(line).unwrap_or_default());
        if let Some(path) = logging {
            if let Err(e) = platform::write_file(&path, self.soak.csv().as_bytes()) {
                self.shared
                    .options
                    .failures
                    .record(format!("--soak-log {}", path.display()), &e);
                self.shared.options.soak_log = None;
            }
        }
    }

    /// Writes the `--frame-log` and `--step-log` CSVs (when the app closes); a log that cannot
    /// be written goes to the options' [`OutputFailures`].
    pub fn write_logs(&self) {
        let failures = &self.shared.options.failures;
        if let Some(path) = &self.shared.options.frame_log {
            match platform::write_file(path, self.clock.csv().as_bytes()) {
                Ok(()) => eprintln!("frame log: {}\n{}", path.display(), self.clock.summary()),
                Err(e) => failures.record(format!("--frame-log {}", path.display()), &e),
            }
        }
        if let Some(path) = &self.shared.options.step_log {
            match platform::write_file(path, self.train.steps.csv().as_bytes()) {
                Ok(()) => eprintln!("step log: {}", path.display()),
                Err(e) => failures.record(format!("--step-log {}", path.display()), &e),
            }
        }
    }

    /// With `exit_when_done`, closes the app once its autorun job has ended (and a
    /// `--screenshot` was taken).
    fn exit_when_done(&self, ctx: &egui::Context, activity: Activity) {
        let o = &self.shared.options;
        let screenshot_pending = o.screenshot.is_some() && !self.screenshot_taken;
        if o.exit_when_done && o.autorun && activity == Activity::Idle && !screenshot_pending {
            ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }
}

impl eframe::App for WgdiffApp {
    fn clear_color(&self, visuals: &egui::Visuals) -> [f32; 4] {
        visuals.panel_fill.to_normalized_gamma_f32()
    }

    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        self.clock.begin();
        let ctx = ui.ctx().clone();
        self.denoise.poll(&ctx, &self.shared);
        self.compare.poll(&self.shared);
        self.skip.poll(&self.shared);
        self.train.poll(&ctx, &self.shared);
        self.profile.poll();
        self.experiments.poll();
        self.device.poll();
        let others = self.others_activity();
        self.profile.start_when_free(&ctx, &self.shared, others);
        egui::Panel::top("tabs").show(ui, |ui| self.tabs(ui));
        egui::Panel::bottom("status").show(ui, |ui| self.status(ui));
        // The central panel paints no fill: the frame is cleared to the panel colour instead
        // (`clear_color`). On a CPU adapter every shaded pixel costs, and a window-sized fill
        // quad doubled the frame time (lavapipe, 1280x860, idle: 69 -> 33 ms median).
        let central = egui::Frame::central_panel(ui.style()).fill(egui::Color32::TRANSPARENT);
        egui::CentralPanel::default().frame(central).show(ui, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| match self.view {
                View::Denoise => self.denoise.ui(ui, &self.shared),
                View::Compare => self.compare.ui(ui, &self.shared, self.denoise.model.as_ref()),
                View::Skip => self.skip.ui(ui, &self.shared, self.denoise.model.as_ref()),
                View::Train => self.train.ui(ui, &self.shared),
                View::Profile => self.profile.ui(ui, &self.shared),
                View::Experiments => self.experiments.ui(ui, &self.shared),
                View::Device => self.device.ui(ui, &self.shared),
            });
        });
        self.screenshot(&ctx);
        let activity = self.activity();
        self.exit_when_done(&ctx, activity);
        match activity {
            Activity::Idle => {}
            // A profiled step has the device to itself (its figures are `wgdiff profile`'s):
            // the app draws again when the job ends.
            Activity::Profiling => {}
            // Keep drawing while jobs run, so progress shows and frame times are measured.
            _ => {
                let redraw = busy_redraw_for(activity);
                ctx.data_mut(|d| d.insert_temp(busy_redraw_id(), redraw));
                // Natively frames start a cadence apart, whatever each took to build; a page
                // asks a cadence after the build, as its cadence was measured.
                let wait = match platform::IN_PAGE {
                    true => redraw,
                    false => self.clock.rest_of(redraw),
                };
                ctx.request_repaint_after(wait);
            }
        }
        let previous_frame_ms = frame.info().cpu_usage.map(|s| s as f64 * 1e3);
        self.clock.end(activity, previous_frame_ms);
        self.announce_frames(&ctx, activity);
        self.soak(activity);
    }

    fn on_exit(&mut self) {
        self.denoise.cancel();
        self.compare.cancel();
        self.skip.cancel();
        self.train.stop();
        #[cfg(not(target_arch = "wasm32"))]
        self.train.wait_for_checkpoint();
        self.profile.cancel();
        self.experiments.cancel();
        self.write_logs();
    }
}

/// A setting's value parsed from its text, or an error naming the setting.
fn parse_setting<T: std::str::FromStr>(key: &str, value: &str) -> Result<T> {
    value.parse().map_err(|_| {
        Error::Config(format!(
            "setting `{key}`: `{value}` is not a {}",
            std::any::type_name::<T>()
        ))
    })
}

/// The error for a setting `view` does not have.
fn unknown_setting(view: &str, key: &str, keys: &[&str]) -> Error {
    Error::Config(format!(
        "the {view} view has no setting `{key}`; it has {}",
        keys.join(", ")
    ))
}

/// A view's last message: its text, or an error in red (an empty line when there is none).
fn message_label(ui: &mut egui::Ui, message: &Option<std::result::Result<String, String>>) {
    match message {
        Some(Ok(text)) => ui.label(text),
        Some(Err(text)) => ui.colored_label(egui::Color32::LIGHT_RED, format!("error: {text}")),
        None => ui.label(""),
    };
}

/// eframe's wgpu setup on `gpu`'s instance, adapter, device and queue: one device for the
/// engine and the UI, no copies between GPU contexts.
pub(crate) fn shared_device(gpu: &Gpu) -> eframe::egui_wgpu::WgpuSetup {
    eframe::egui_wgpu::WgpuSetup::Existing(eframe::egui_wgpu::WgpuSetupExisting {
        instance: gpu.instance.clone(),
        adapter: gpu.adapter.clone(),
        device: gpu.device.clone(),
        queue: gpu.queue.clone(),
    })
}
