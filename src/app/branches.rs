//! The denoise view's step debugger: from any recorded step, a branch samples the steps left
//! with other settings (sampler, steps, guidance, skip, cache); runs are kept side by side.

use super::grid_texture::GridTexture;
use super::jobs::{is_running, Event, Job};
use super::sampling::{grid_layout, sample_job, DenoiseMessage, DenoiseSettings, Frame};
use super::Shared;
use crate::diffusion::Start;
use crate::{Error, Result, Tensor};
use eframe::egui;

/// A branch of a run (or of another branch).
pub struct Branch {
    /// What it samples its own steps with (the run's checkpoint, seed, images and class).
    pub settings: DenoiseSettings,
    /// The step (0-based) of the trajectory it branched from.
    pub from: usize,
    /// The whole trajectory: the branched-from steps 0..=from, then its own.
    pub frames: Vec<Frame>,
    /// Its own steps' wall time (s), once it ended.
    pub seconds: Option<f64>,
    /// Its images, once it ended.
    pub samples: Option<Tensor>,
    thumbnail: Thumbnail,
}

impl Branch {
    /// Steps of the whole trajectory once it ends.
    pub fn planned_steps(&self) -> usize {
        self.from + 1 + self.settings.steps
    }

    /// Its own steps.
    pub fn own_frames(&self) -> &[Frame] {
        &self.frames[(self.from + 1).min(self.frames.len())..]
    }
}

/// The newest state of a trajectory, drawn small for the side-by-side row.
#[derive(Default)]
struct Thumbnail {
    texture: Option<GridTexture>,
    /// Steps of the trajectory when it was drawn.
    drawn: usize,
}

impl Thumbnail {
    /// Draws the newest of `frames` when there are more than at the last draw.
    fn update(&mut self, shared: &Shared, frames: &[Frame]) -> Result<()> {
        let Some(last) = frames.last() else {
            return Ok(());
        };
        if frames.len() == self.drawn {
            return Ok(());
        }
        let shape: [usize; 4] = last.x.shape().try_into().unwrap_or([1, 1, 1, 1]);
        let layout = grid_layout(shape, 2);
        let size = layout.size(shape);
        if self.texture.as_ref().is_none_or(|t| t.size != size) {
            self.free();
            self.texture = Some(GridTexture::new(&shared.render, size));
        }
        self.texture
            .as_ref()
            .expect("made above")
            .draw(&shared.gpu, &last.x, layout)?;
        self.drawn = frames.len();
        Ok(())
    }

    fn free(&mut self) {
        if let Some(texture) = self.texture.take() {
            texture.free();
        }
        self.drawn = 0;
    }
}

/// The branches of the view's run and what the timeline shows.
pub struct Branches {
    /// The settings the next branch samples its steps with.
    pub settings: DenoiseSettings,
    /// The run's settings (None before the first run).
    run: Option<DenoiseSettings>,
    pub list: Vec<Branch>,
    /// The run the timeline shows: None the original, else a branch.
    shown: Option<usize>,
    job: Option<Job<DenoiseMessage>>,
    /// The branch the job samples.
    sampling: usize,
    run_thumbnail: Thumbnail,
}

impl Branches {
    /// No branches yet; the next one samples with `settings` until they are changed.
    pub fn new(settings: DenoiseSettings) -> Branches {
        Branches {
            settings,
            run: None,
            list: Vec::new(),
            shown: None,
            job: None,
            sampling: 0,
            run_thumbnail: Thumbnail::default(),
        }
    }

    /// A new run with `settings`: the branches of the last one go; the next branch starts
    /// from the run's settings, for the steps a pause leaves (else half of them).
    pub fn reset(&mut self, settings: DenoiseSettings) {
        self.cancel();
        for mut branch in self.list.drain(..) {
            branch.thumbnail.free();
        }
        self.run_thumbnail.free();
        self.shown = None;
        let left = settings
            .pause_after
            .map_or(settings.steps / 2, |done| settings.steps.saturating_sub(done));
        self.settings = DenoiseSettings {
            steps: left.max(1),
            pause_after: None,
            ..settings.clone()
        };
        self.run = Some(settings);
    }

    pub fn is_running(&self) -> bool {
        is_running(&self.job)
    }

    pub fn cancel(&self) {
        if let Some(job) = &self.job {
            job.cancel();
        }
    }

    /// The branch the timeline shows (None: the run).
    pub fn shown(&self) -> Option<&Branch> {
        self.shown.and_then(|i| self.list.get(i))
    }

    pub fn shown_index(&self) -> Option<usize> {
        self.shown
    }

    /// Starts a branch after step `from` of `frames` (the shown trajectory) with
    /// [`Branches::settings`], and shows it.
    pub fn start(
        &mut self,
        ctx: &egui::Context,
        shared: &Shared,
        frames: &[Frame],
        from: usize,
    ) -> Result<()> {
        let Some(branched) = self.shown().map(|b| &b.settings).or(self.run.as_ref()) else {
            return Err(Error::Config(
                "run first: a branch starts from a recorded step".into(),
            ));
        };
        let frame = frames
            .get(from)
            .ok_or_else(|| Error::Config(format!("step {} was not recorded", from + 1)))?;
        let t = frame.resume_t.ok_or_else(|| {
            Error::Config(format!(
                "step {} is the last of its run: no steps are left to branch",
                from + 1
            ))
        })?;
        let b = &self.settings;
        let settings = DenoiseSettings {
            sampler: b.sampler.clone(),
            steps: b.steps,
            guidance: b.guidance,
            skip_exponent: b.skip_exponent,
            cache_interval: b.cache_interval,
            cache_depth: b.cache_depth,
            precision: b.precision,
            pause_after: None,
            ..branched.clone()
        };
        self.list.push(Branch {
            settings: settings.clone(),
            from,
            frames: frames[..=from].to_vec(),
            seconds: None,
            samples: None,
            thumbnail: Thumbnail::default(),
        });
        self.sampling = self.list.len() - 1;
        self.shown = Some(self.sampling);
        let gpu = shared.gpu.clone();
        let start = Start {
            x: frame.x.clone(),
            t,
        };
        self.job = Some(Job::start(ctx, "branch", move |job| {
            sample_job(gpu, settings, Some((start, from + 1)), job)
        }));
        Ok(())
    }

    /// Takes the branch job's steps and result and draws the thumbnails of `run_frames` and
    /// every branch; true when the shown branch got new steps. An error is the job's message.
    pub fn poll(&mut self, shared: &Shared, run_frames: &[Frame]) -> std::result::Result<bool, String> {
        let mut grew = false;
        let events = self.job.as_mut().map(Job::poll).unwrap_or_default();
        let mut failed = None;
        if let Some(branch) = self.list.get_mut(self.sampling) {
            for event in events {
                match event {
                    Event::Message(DenoiseMessage::Frame(frame)) => {
                        branch.frames.push(frame);
                        grew |= self.shown == Some(self.sampling);
                    }
                    Event::Message(DenoiseMessage::Done { seconds, samples, .. }) => {
                        branch.seconds = Some(seconds);
                        branch.samples = Some(samples);
                    }
                    Event::Finished(Err(e)) => failed = Some(e),
                    _ => {}
                }
            }
        }
        if failed.is_some()
            && self
                .list
                .get(self.sampling)
                .is_some_and(|b| b.own_frames().is_empty())
        {
            // a branch that never ran a step is not kept
            let mut branch = self.list.remove(self.sampling);
            branch.thumbnail.free();
            self.shown = None;
        }
        let drawn = self.run_thumbnail.update(shared, run_frames).and_then(|()| {
            self.list
                .iter_mut()
                .try_for_each(|b| b.thumbnail.update(shared, &b.frames))
        });
        match (failed, drawn) {
            (Some(e), _) => Err(e),
            (None, Err(e)) => Err(e.to_string()),
            (None, Ok(())) => Ok(grew),
        }
    }

    /// The run and every branch side by side: newest state, settings, times. Returns
    /// `Some(export)` when the user picked a run to show (`export`: and asked to export it).
    pub fn runs_ui(
        &mut self,
        ui: &mut egui::Ui,
        run_frames: &[Frame],
        run_seconds: Option<f64>,
    ) -> Option<bool> {
        let mut picked = None;
        let run_label = self.run.as_ref().map_or(String::new(), DenoiseSettings::describe);
        egui::ScrollArea::horizontal().id_salt("runs").show(ui, |ui| {
            ui.horizontal_top(|ui| {
                let run_times = times(run_frames, run_seconds);
                let runs =
                    std::iter::once((None, format!("run: {run_label}"), run_times, &self.run_thumbnail))
                        .chain(self.list.iter().enumerate().map(|(i, b)| {
                            let title = format!(
                                "branch {} from step {}: {}",
                                i + 1,
                                b.from + 1,
                                b.settings.describe()
                            );
                            (Some(i), title, times(b.own_frames(), b.seconds), &b.thumbnail)
                        }));
                for (index, title, times, thumbnail) in runs {
                    ui.vertical(|ui| {
                        ui.set_max_width(260.0);
                        if ui.selectable_label(self.shown == index, title).clicked() {
                            picked = Some((index, false));
                        }
                        if let Some(texture) = &thumbnail.texture {
                            texture.show(ui);
                        }
                        ui.label(times);
                        if ui.button("Export").clicked() {
                            picked = Some((index, true));
                        }
                    });
                }
            });
        });
        let (index, export) = picked?;
        self.shown = index;
        Some(export)
    }
}

/// "12 steps, 0.84 s (70 ms per step)" for a trajectory's own `frames` and, once it ended, its
/// wall time.
fn times(frames: &[Frame], seconds: Option<f64>) -> String {
    let steps = frames.len();
    let mean_ms = match steps {
        0 => 0.0,
        n => frames.iter().map(|f| f.seconds).sum::<f64>() * 1e3 / n as f64,
    };
    match seconds {
        Some(seconds) => format!("{steps} steps, {seconds:.2} s ({mean_ms:.0} ms per step)"),
        None => format!("{steps} steps recorded ({mean_ms:.0} ms per step)"),
    }
}
