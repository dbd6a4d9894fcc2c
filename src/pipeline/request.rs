//! `SampleRequest`: what to draw from a trained model (sampler, steps, count, seed, skipping,
//! caching, class, guidance), built once by `SampleRequestBuilder`, which decides every default.

use crate::diffusion::{
    check_timesteps, default_sampler, FeatureCache, GuidanceInterval, Process, Sampler, SkipPlan,
    SkipSchedule, Spacing, DEFAULT_SAMPLER_STEPS,
};
use crate::models::ModelConfig;
use crate::run_state::{check_finite_nonnegative, TrainState};
use crate::{DType, Error, Result};

/// The largest classifier-free guidance scale a request may ask for: far past it every
/// pixel saturates.
pub const MAX_GUIDANCE: f32 = 50.0;

/// What to draw, checked against the model it samples when it was built
/// ([`SampleRequest::builder`]); the pieces of a request are requests too
/// ([`SampleRequest::chunks`], [`SampleRequest::with_count`], [`SampleRequest::unskipped`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SampleRequest {
    sampler: Sampler,
    steps: usize,
    count: usize,
    seed: u64,
    skip: SkipPlan,
    cache: Option<FeatureCache>,
    class: Option<u32>,
    guidance: f32,
    /// The noise levels guidance applies at (None: every call) and their network times.
    guidance_interval: Option<GuidanceInterval>,
    guided_times: Option<(f32, f32)>,
    precision: DType,
    timesteps: Option<Vec<f64>>,
}

impl SampleRequest {
    /// A request for a model of `model` trained on `process`: by default one image, seed 0,
    /// the process's default sampler at [`DEFAULT_SAMPLER_STEPS`], no skipping or caching, a
    /// mix of all classes, guidance 1.
    pub fn builder<'a>(model: &'a ModelConfig, process: &'a Process) -> SampleRequestBuilder<'a> {
        SampleRequestBuilder {
            model,
            process,
            sampler: None,
            steps: None,
            count: 1,
            seed: 0,
            skip: SkipPlan::default(),
            cache: None,
            class: None,
            guidance: 1.0,
            guidance_interval: None,
            precision: DType::F32,
            timesteps: None,
            default_sampler: None,
        }
    }

    /// [`SampleRequest::builder`] for the model a training state describes, at the guidance it
    /// was trained for ([`TrainState::default_guidance`], in the run's guidance interval) and
    /// with the sampler its run chose (`TrainConfig::sampler` and `sampler_steps`); a distilled
    /// student's default sampler is deterministic DDIM on the trailing grid of the steps it
    /// learned.
    pub fn for_state(state: &TrainState) -> SampleRequestBuilder<'_> {
        let mut builder = Self::builder(&state.model, &state.process)
            .guidance(state.default_guidance())
            .guidance_interval(state.default_guidance_interval());
        let c = &state.config;
        if let Some(d) = &c.distill {
            let ddim = Sampler::Ddim {
                eta: 0.0,
                spacing: Spacing::Trailing,
            };
            builder.default_sampler = Some((ddim, d.steps));
        } else if let Some(sampler) = c.sampler {
            let steps = c
                .sampler_steps
                .unwrap_or_else(|| sampler.default_steps(&state.process));
            builder.default_sampler = Some((sampler, steps));
        }
        builder
    }

    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    /// Sampler steps (network evaluations per image for one-call-per-step samplers).
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Images drawn.
    pub fn count(&self) -> usize {
        self.count
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Deep levels skipped at each step (the c-family or a searched schedule).
    pub fn skip(&self) -> &SkipPlan {
        &self.skip
    }

    /// Deep features reused across steps (None: computed at every network call).
    pub fn cache(&self) -> Option<FeatureCache> {
        self.cache
    }

    /// Class of every image, or None for a mix of all classes / unconditional sampling.
    pub fn class(&self) -> Option<u32> {
        self.class
    }

    /// Classifier-free guidance scale w (1 = plain conditional).
    pub fn guidance(&self) -> f32 {
        self.guidance
    }

    /// The noise levels guidance applies at (None: every call).
    pub fn guidance_interval(&self) -> Option<GuidanceInterval> {
        self.guidance_interval
    }

    /// The network times guidance applies at (None: every call; [`NetDenoiser::guided_at`]).
    ///
    /// [`NetDenoiser::guided_at`]: crate::diffusion::NetDenoiser::guided_at
    pub fn guided_times(&self) -> Option<(f32, f32)> {
        self.guided_times
    }

    /// The dtype the network runs in (f16 needs the adapter's SHADER_F16).
    pub fn precision(&self) -> DType {
        self.precision
    }

    /// The VP timesteps of the steps' network calls, when given (a searched schedule) instead
    /// of the sampler's spacing.
    pub fn timesteps(&self) -> Option<&[f64]> {
        self.timesteps.as_deref()
    }

    /// This request split into requests of at most `batch` images (batch 0 counts as 1), the
    /// i-th seeded `seed + i`: how `wgdiff sample --batch` and `eval` draw any count in memory
    /// that fits (the same seed, count and batch give the same images).
    pub fn chunks(&self, batch: usize) -> impl Iterator<Item = SampleRequest> + '_ {
        let batch = batch.max(1);
        (0..self.count)
            .step_by(batch)
            .enumerate()
            .map(move |(i, start)| SampleRequest {
                count: batch.min(self.count - start),
                seed: self.seed.wrapping_add(i as u64),
                ..self.clone()
            })
    }

    /// The same request for `count` images (at least 1).
    pub fn with_count(&self, count: usize) -> Result<SampleRequest> {
        check_count(count)?;
        Ok(SampleRequest {
            count,
            ..self.clone()
        })
    }

    /// The same request for `seed`.
    pub fn with_seed(&self, seed: u64) -> SampleRequest {
        SampleRequest { seed, ..self.clone() }
    }

    /// The same request on `sampler` for `steps` steps at its own spacing (no given timesteps;
    /// the sampler refuses a process it does not fit when it runs).
    pub fn with_sampler(&self, sampler: Sampler, steps: usize) -> Result<SampleRequest> {
        if steps == 0 {
            return Err(Error::Config("sampler steps must be at least 1".into()));
        }
        Ok(SampleRequest {
            sampler,
            steps,
            timesteps: None,
            ..self.clone()
        })
    }

    /// The same request walking `timesteps` (one step each; the sampler checks them when it
    /// runs).
    pub fn with_timesteps(&self, timesteps: Vec<f64>) -> SampleRequest {
        SampleRequest {
            steps: timesteps.len(),
            timesteps: Some(timesteps),
            ..self.clone()
        }
    }

    /// The same request with the whole network at every call (no skipping, no caching).
    pub fn unskipped(&self) -> SampleRequest {
        SampleRequest {
            skip: SkipPlan::default(),
            cache: None,
            ..self.clone()
        }
    }
}

fn check_count(count: usize) -> Result<()> {
    match count {
        0 => Err(Error::Config("the image count must be at least 1".into())),
        _ => Ok(()),
    }
}

/// Collects a request's settings; [`SampleRequestBuilder::build`] decides the defaults and
/// checks everything against the model once.
#[derive(Clone, Debug)]
pub struct SampleRequestBuilder<'a> {
    model: &'a ModelConfig,
    process: &'a Process,
    sampler: Option<Sampler>,
    steps: Option<usize>,
    count: usize,
    seed: u64,
    skip: SkipPlan,
    cache: Option<FeatureCache>,
    class: Option<u32>,
    guidance: f32,
    guidance_interval: Option<GuidanceInterval>,
    precision: DType,
    timesteps: Option<Vec<f64>>,
    /// The sampler and steps when none is named (None: the process's default sampler at
    /// [`DEFAULT_SAMPLER_STEPS`]).
    default_sampler: Option<(Sampler, usize)>,
}

impl<'a> SampleRequestBuilder<'a> {
    pub fn sampler(mut self, sampler: Sampler) -> Self {
        self.sampler = Some(sampler);
        self
    }

    /// The sampler a user named (None: the default), with DDIM's `eta` and `spacing` when
    /// given (an error for any other sampler).
    pub fn sampler_named(
        mut self,
        name: Option<&str>,
        eta: Option<f32>,
        spacing: Option<Spacing>,
    ) -> Result<Self> {
        let Some(name) = name else {
            return match (eta, spacing, self.default_sampler) {
                (None, None, _) => Ok(self),
                // (a distilled student's default is DDIM)
                (_, _, Some((sampler, steps))) => {
                    self.default_sampler = Some((with_ddim_settings(sampler, eta, spacing)?, steps));
                    Ok(self)
                }
                _ => Err(eta_needs_ddim(&default_sampler(self.process))),
            };
        };
        let sampler: Sampler = name.parse()?;
        self.sampler = Some(with_ddim_settings(sampler, eta, spacing)?);
        Ok(self)
    }

    /// Sampler steps (None: the default; see [`SampleRequestBuilder::build`]).
    pub fn steps(mut self, steps: Option<usize>) -> Self {
        self.steps = steps;
        self
    }

    pub fn count(mut self, count: usize) -> Self {
        self.count = count;
        self
    }

    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub fn skip(mut self, skip: SkipPlan) -> Self {
        self.skip = skip;
        self
    }

    /// A searched schedule: its per-step depths and timesteps (when it has them), and its
    /// sampler and steps unless set.
    pub fn schedule(mut self, schedule: &SkipSchedule) -> Self {
        self.sampler = self.sampler.or(Some(schedule.sampler));
        self.steps = self.steps.or(Some(schedule.steps()));
        self.skip = schedule.plan();
        if !schedule.timesteps.is_empty() {
            self.timesteps = Some(schedule.timesteps.clone());
        }
        self
    }

    /// The VP timesteps of the steps' network calls instead of the sampler's spacing (DDPM,
    /// DDIM, DPM-Solver++; the step count is theirs unless set).
    pub fn timesteps(mut self, timesteps: Option<Vec<f64>>) -> Self {
        self.timesteps = timesteps;
        self
    }

    pub fn cache(mut self, cache: Option<FeatureCache>) -> Self {
        self.cache = cache;
        self
    }

    pub fn class(mut self, class: Option<u32>) -> Self {
        self.class = class;
        self
    }

    pub fn guidance(mut self, guidance: f32) -> Self {
        self.guidance = guidance;
        self
    }

    /// Guide only at the noise levels of `interval` (None or [`GuidanceInterval::ALL`]: at
    /// every call).
    pub fn guidance_interval(mut self, interval: Option<GuidanceInterval>) -> Self {
        self.guidance_interval = interval.filter(|i| *i != GuidanceInterval::ALL);
        self
    }

    /// Run the network in f16 (activations; float weights cast at use) or f32 (the default).
    pub fn precision(mut self, precision: DType) -> Self {
        self.precision = precision;
        self
    }

    /// The request, every value checked against the model, naming the value and the fix.
    /// Steps, when not given, are decided here and only here: [`DEFAULT_SAMPLER_STEPS`] for
    /// the default sampler, else the named sampler's own default
    /// ([`Sampler::default_steps`]).
    pub fn build(self) -> Result<SampleRequest> {
        let bad = |msg: String| Err(Error::Config(msg));
        check_count(self.count)?;
        let (sampler, default_steps) = match self.sampler {
            Some(sampler) => {
                let steps = sampler.default_steps(self.process);
                (sampler, steps)
            }
            None => self
                .default_sampler
                .unwrap_or((default_sampler(self.process), DEFAULT_SAMPLER_STEPS)),
        };
        let given = self.timesteps.as_ref().map(Vec::len);
        let steps = self.steps.or(given).unwrap_or(default_steps);
        if steps == 0 {
            return bad("sampler steps must be at least 1".into());
        }
        if !sampler.fits(self.process) {
            return bad(format!(
                "sampler `{}` does not fit the {} process this model was trained on",
                sampler.name(),
                self.process.name()
            ));
        }
        if let Some(timesteps) = &self.timesteps {
            let last = match (sampler.takes_timesteps(), self.process) {
                (true, Process::Vp { steps, .. }) => *steps as f64 - 1.0,
                _ => {
                    return bad(format!(
                        "given timesteps (a timestep schedule) are for the ddpm, ddim, dpm-solver++ and dpm-solver++-sde samplers; \
                         this request uses {}",
                        sampler.name()
                    ))
                }
            };
            check_timesteps(timesteps, steps, last, sampler.name())?;
        }
        if let SkipPlan::Exponent(c) = self.skip {
            check_finite_nonnegative("the skip exponent c", c, "never skip levels")?;
        }
        if !(0.0..=MAX_GUIDANCE).contains(&self.guidance) {
            return bad(format!(
                "the guidance scale must be between 0 and {MAX_GUIDANCE} (1: plain conditional, 2-4: sharper digits), got {}",
                self.guidance
            ));
        }
        match (self.model.classes(), self.class) {
            (None, _) if self.guidance != 1.0 => {
                return bad(format!(
                    "guidance {} needs a class-conditional model; this one was trained without labels (leave out --guidance)",
                    self.guidance
                ))
            }
            (None, Some(_)) => {
                return bad("a class needs a class-conditional model; this one was trained without labels".into())
            }
            (Some(k), Some(class)) if class as usize >= k => {
                return bad(format!("class {class}: the model has classes 0..{}", k - 1))
            }
            _ => {}
        }
        let guided_times = match self.guidance_interval {
            Some(_) if self.model.classes().is_none() => return bad(
                "a guidance interval needs a class-conditional model; this one was trained without labels \
                     (leave out --guidance-interval)"
                    .into(),
            ),
            Some(interval) => interval.network_times(self.process)?,
            None => None,
        };
        Ok(SampleRequest {
            sampler,
            steps,
            count: self.count,
            seed: self.seed,
            skip: self.skip,
            cache: self.cache,
            class: self.class,
            guidance: self.guidance,
            guidance_interval: self.guidance_interval,
            guided_times,
            precision: self.precision,
            timesteps: self.timesteps,
        })
    }
}

/// `sampler` with DDIM's `eta` and `spacing` applied when given: an error for other samplers.
fn with_ddim_settings(sampler: Sampler, eta: Option<f32>, spacing: Option<Spacing>) -> Result<Sampler> {
    match (sampler, eta, spacing) {
        (Sampler::Ddim { eta, spacing }, e, s) => Ok(Sampler::Ddim {
            eta: e.unwrap_or(eta),
            spacing: s.unwrap_or(spacing),
        }),
        (other, None, None) => Ok(other),
        (other, _, _) => Err(eta_needs_ddim(&other)),
    }
}

fn eta_needs_ddim(sampler: &Sampler) -> Error {
    Error::Config(format!(
        "eta and spacing (--eta, --spacing) set the ddim sampler; this run uses {sampler} (choose --sampler ddim)"
    ))
}
