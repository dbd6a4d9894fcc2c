//! A sampling run as the views run it: its settings, the checkpoint's summary, the schedule
//! file it may follow, its recorded steps, and the job that samples and reports each step.

use super::grid_texture::GridLayout;
use super::jobs::JobContext;
use super::{parse_setting, platform};
use crate::data::grid_columns;
use crate::diffusion::{FeatureCache, Sampler, SkipPlan, SkipSchedule, Start, Step};
use crate::models::{DiffusionNet, ModelConfig, SkipType};
use crate::pipeline::{sample_net, SampleRequest, TrainedModel};
use crate::{DType, Gpu, Result, Tensor};
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
    /// A distilled student's sampling steps (`wgdiff train --distill`): the view then samples
    /// with DDIM on its grid.
    pub distilled_steps: Option<usize>,
}

impl ModelInfo {
    pub(super) fn of(path: PathBuf, loaded: &TrainedModel) -> ModelInfo {
        ModelInfo {
            path,
            levels: loaded.net.levels(),
            classes: loaded.state.model.classes(),
            guidance: loaded.state.default_guidance(),
            parameters: loaded.net.named_params().iter().map(|(_, t)| t.numel()).sum(),
            trained_steps: loaded.state.step,
            distilled_steps: loaded.state.config.distill.as_ref().map(|d| d.steps),
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
    /// Deep-feature cache interval m (1: no cache) and depth d (None: the deepest).
    pub cache_interval: usize,
    pub cache_depth: Option<usize>,
    /// Stop after this step (1-based) to branch from it; None: run every step.
    pub pause_after: Option<usize>,
    /// The dtype the network runs in (f16 needs the adapter's SHADER_F16; a page has none).
    pub precision: DType,
    /// A schedule file whose sampler, steps, timesteps (`wgdiff experiment step-search`) and
    /// skip depths (`skip-search`) a run from noise follows; None: the settings above.
    pub schedule: Option<String>,
    /// Runs of these settings back to back (a looping demo, a soak); 1: one.
    pub repeat: usize,
}

impl DenoiseSettings {
    /// The library's request for these settings on `model`, following `schedule` (the
    /// settings' schedule file, read) when given: its sampler, steps, timesteps and depths.
    pub fn request(&self, model: &TrainedModel, schedule: Option<&SkipSchedule>) -> Result<SampleRequest> {
        let builder = SampleRequest::for_state(&model.state);
        let builder = match schedule {
            Some(s) => builder.sampler(s.sampler).steps(Some(s.steps())),
            // a distilled student's DDIM is its own: on the trailing grid it learned
            None if self.sampler == "ddim" && model.state.config.distill.is_some() => {
                builder.steps(Some(self.steps))
            }
            None => builder.sampler(self.sampler.parse()?).steps(Some(self.steps)),
        };
        let mut builder = builder
            .count(self.count)
            .seed(self.seed)
            .skip(SkipPlan::Exponent(self.skip_exponent))
            .cache(self.cache(model.net.levels()))
            .precision(self.precision)
            .class(self.class);
        if let Some(schedule) = schedule {
            schedule.check_levels(
                model.net.levels(),
                self.schedule.as_deref().unwrap_or("the schedule"),
            )?;
            builder = builder.schedule(schedule);
        }
        // a guidance set for a conditional model does not carry over to an unconditional one
        if let (Some(guidance), Some(_)) = (self.guidance, model.state.model.classes()) {
            builder = builder.guidance(guidance);
        }
        builder.build()
    }

    /// The deep-feature cache these settings ask for on a network of `levels` levels.
    fn cache(&self, levels: usize) -> Option<FeatureCache> {
        (self.cache_interval > 1).then(|| FeatureCache::new(self.cache_interval, self.cache_depth, levels))
    }

    /// What a run with these settings does per step: "ddim, 10 steps, guidance 3.0, skip
    /// c = 1.0, cache m = 3".
    pub fn describe(&self) -> String {
        let mut text = format!("{}, {} steps", self.sampler, self.steps);
        if let Some(g) = self.guidance {
            text += &format!(", guidance {g:.1}");
        }
        if self.skip_exponent > 0.0 {
            text += &format!(", skip c = {:.1}", self.skip_exponent);
        }
        if self.cache_interval > 1 {
            text += &format!(", cache m = {}", self.cache_interval);
            if let Some(d) = self.cache_depth {
                text += &format!(", d = {d}");
            }
        }
        if self.precision == DType::F16 {
            text += ", f16";
        }
        text
    }

    /// The settings a page address or `wgdiff gui --set` may give.
    pub const KEYS: [&'static str; 14] = [
        "checkpoint",
        "sampler",
        "steps",
        "seed",
        "count",
        "class",
        "guidance",
        "skip-exponent",
        "cache-interval",
        "cache-depth",
        "pause-after",
        "precision",
        "schedule",
        "repeat",
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
            "cache-interval" => self.cache_interval = parse_setting(key, value)?,
            "cache-depth" => self.cache_depth = Some(parse_setting(key, value)?),
            "pause-after" => self.pause_after = Some(parse_setting(key, value)?),
            "schedule" => self.schedule = (!value.is_empty()).then(|| value.to_string()),
            "repeat" => {
                self.repeat = parse_setting(key, value)?;
                if self.repeat == 0 {
                    return Err(crate::Error::Config(
                        "setting `repeat`: 0 runs; give 1 or more (the runs back to back)".into(),
                    ));
                }
            }
            "precision" => {
                self.precision = match value {
                    "f32" => DType::F32,
                    "f16" => DType::F16,
                    _ => {
                        return Err(crate::Error::Config(format!(
                            "setting `precision`: `{value}` is not f32 or f16"
                        )))
                    }
                }
            }
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
    /// Where a branch from this step starts (`Step::resume_t`; None after the last step).
    pub resume_t: Option<f64>,
    /// Wall time of the step (its device work included).
    pub seconds: f64,
}

impl Frame {
    /// The sampler's `step` recorded (its tensors stay on the device), numbered `index` in its
    /// trajectory, after `seconds` of wall time.
    pub(super) fn of_step(step: &Step, index: usize, seconds: f64) -> Frame {
        Frame {
            index,
            t: step.t,
            skip: step.skip,
            x: step.x.clone(),
            x0: step.x0.cloned(),
            resume_t: step.resume_t,
            seconds,
        }
    }
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
    /// The run stopped after this step (1-based), as `pause_after` asked.
    Paused(usize),
    Exported(String),
    /// The settings' schedule file, read.
    Schedule(Box<LoadedSchedule>),
}

/// A schedule file a view loaded.
#[derive(Clone, Debug)]
pub struct LoadedSchedule {
    pub path: String,
    pub schedule: SkipSchedule,
}

/// Reads and checks a schedule file (on the page: one picked or fetched from its site).
pub(super) async fn read_schedule(path: &std::path::Path) -> crate::Result<LoadedSchedule> {
    let bytes = platform::read_file(path).await?;
    let origin = path.display().to_string();
    let schedule = SkipSchedule::from_json(&bytes, &origin)?;
    Ok(LoadedSchedule {
        path: origin,
        schedule,
    })
}

impl LoadedSchedule {
    /// (normalised time, k_i) of every step: the file's times, else evenly spaced ones.
    pub fn points(&self) -> Vec<(f32, usize)> {
        let s = &self.schedule;
        let times = match s.times.len() == s.steps() {
            true => s.times.clone(),
            false => step_times(s.steps()),
        };
        times.into_iter().zip(s.skips.iter().copied()).collect()
    }

    /// One line: sampler, steps, mean depth and, for a searched schedule, what it promised.
    pub fn summary(&self) -> String {
        let s = &self.schedule;
        let mean = s.skips.iter().sum::<usize>() as f64 / s.steps().max(1) as f64;
        let mut line = format!(
            "schedule {}: {} at {} steps on {} levels, {mean:.2} levels skipped per step on average",
            self.path,
            s.sampler,
            s.steps(),
            s.levels
        );
        if let Some(r) = &s.search {
            line.push_str(&format!(
                "; searched for {} + {}: {:.2} against {:.2} unskipped ({} images), predicted network time {:.0}% of unskipped",
                r.metric,
                r.budget,
                r.fid,
                r.fid_unskipped,
                r.samples,
                100.0 * r.predicted_ms / r.unskipped_ms.max(f64::MIN_POSITIVE)
            ));
        }
        line
    }
}

/// Normalised network times of `steps` evenly spaced sampler steps, from noise (1) to data.
pub fn step_times(steps: usize) -> Vec<f32> {
    (0..steps).map(|i| 1.0 - i as f32 / steps as f32).collect()
}

/// The grid layout of a batch of `shape` [N, C, H, W]: images of at most 32 pixels magnified
/// `scale` times, larger ones half as much.
pub(super) fn grid_layout(shape: [usize; 4], scale: u32) -> GridLayout {
    GridLayout {
        columns: grid_columns(shape[0]) as u32,
        scale: if shape[2] <= 32 { scale } else { scale.div_ceil(2) },
        gap: 4,
    }
}

/// The sampling job: loads the model, samples (from noise, or from a branch's `start`, its
/// first step numbered `first_index`) with a per-step callback that waits for the step's device
/// work, hands its x_t and x_0 (still on the device) to the view, and stops when cancelled or
/// at the settings' `pause_after` step.
pub(super) async fn sample_job(
    gpu: Gpu,
    settings: DenoiseSettings,
    branch: Option<(Start, usize)>,
    job: JobContext<DenoiseMessage>,
) -> Result<()> {
    // A sampling run is too short to repay timing kernel variants, as in `wgdiff sample`.
    crate::gpu::without_measuring_async(draw(gpu, settings, branch, job)).await
}

async fn draw(
    gpu: Gpu,
    settings: DenoiseSettings,
    branch: Option<(Start, usize)>,
    job: JobContext<DenoiseMessage>,
) -> Result<()> {
    let path = PathBuf::from(&settings.checkpoint);
    let loaded = platform::load_model(&gpu, &path, settings.skip_type).await?;
    if branch.is_none() {
        job.send(DenoiseMessage::Loaded(Box::new(ModelInfo::of(path, &loaded))));
    }
    // (a branch walks its own grid from the paused step: a file's timesteps are for runs from noise)
    let schedule = match (&settings.schedule, &branch) {
        (Some(path), None) => {
            let loaded = read_schedule(std::path::Path::new(path)).await?;
            job.send(DenoiseMessage::Schedule(Box::new(loaded.clone())));
            Some(loaded.schedule)
        }
        _ => None,
    };
    let request = settings.request(&loaded, schedule.as_ref())?;
    let first_index = branch.as_ref().map_or(0, |(_, first)| *first);
    let started = Instant::now();
    let mut last = Instant::now();
    let mut on_step = |step: &Step| -> Result<()> {
        let seconds = last.elapsed().as_secs_f64();
        last = Instant::now();
        job.send(DenoiseMessage::Frame(Frame::of_step(
            step,
            first_index + step.index,
            seconds,
        )));
        let done = first_index + step.index + 1;
        if settings.pause_after == Some(done) && step.resume_t.is_some() {
            job.send(DenoiseMessage::Paused(done));
            return Err(crate::Error::Cancelled);
        }
        job.check()
    };
    let net: &dyn DiffusionNet = loaded.net.as_ref();
    let (samples, evaluations) = sample_net(
        &gpu,
        net,
        &loaded.state.model,
        &loaded.state.process,
        &request,
        branch.map(|(start, _)| start),
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
