//! What every sampler shares while it runs: network calls at the step's skip depth (counted,
//! through the deep-feature cache when one is on), conversions to eps / x0 / score, Gaussian
//! noise, and the per-step callback.

use super::{OnStep, Start, Step};
use crate::diffusion::deep_cache::{CacheState, FeatureCache};
use crate::diffusion::denoiser::Denoiser;
use crate::diffusion::process::{combine, Level, Marginals};
use crate::diffusion::skip::SkipPlan;
use crate::ops::random::Rng;
use crate::{DType, Error, Gpu, Result, Tensor};

pub(super) struct Context<'a, 'b> {
    pub marginals: Marginals,
    denoiser: &'a dyn Denoiser,
    skip: SkipPlan,
    /// The sampler step under way (steps reported so far).
    step: usize,
    pub cache: Option<CacheState>,
    /// Network evaluations so far.
    pub evaluations: usize,
    /// Clamp predicted x0 to [-c, c] (and recompute eps from it) in the data-prediction
    /// samplers (DDPM, DDIM, DPM-Solver++).
    pub clip_x0: Option<f32>,
    on_step: Option<&'a mut OnStep<'b>>,
    /// The state the run begins from instead of pure noise (taken by [`Context::initial`]).
    start: Option<Start>,
    rng: &'a mut Rng,
    gpu: &'a Gpu,
    shape: &'a [usize],
}

impl<'a, 'b> Context<'a, 'b> {
    pub fn new(
        marginals: Marginals,
        denoiser: &'a dyn Denoiser,
        (skip, cache): (SkipPlan, Option<FeatureCache>),
        (start, on_step): (Option<Start>, Option<&'a mut OnStep<'b>>),
        rng: &'a mut Rng,
        gpu: &'a Gpu,
        shape: &'a [usize],
    ) -> Self {
        Context {
            marginals,
            denoiser,
            skip,
            step: 0,
            cache: cache.map(CacheState::new),
            evaluations: 0,
            clip_x0: None,
            on_step,
            start,
            rng,
            gpu,
            shape,
        }
    }

    /// Levels skipped by a network call of the current step at network time `t`.
    pub fn skip_at(&self, t: f64) -> usize {
        let normalized = self.marginals.normalized_time(t as f32);
        self.skip.skip_at(self.denoiser.levels(), self.step, normalized)
    }

    /// The raw network output at `t`, and the marginal there.
    pub fn raw(&mut self, x: &Tensor, t: f64) -> Result<(Tensor, Level)> {
        let skip = self.skip_at(t);
        let out = match &mut self.cache {
            Some(cache) => cache.predict(self.denoiser, x, t as f32, skip)?,
            None => self.denoiser.predict(x, t as f32, skip)?,
        };
        self.evaluations += 1;
        if out.shape() != x.shape() {
            return Err(Error::shape(
                "sampler",
                format!(
                    "the denoiser returned {:?} for a batch of {:?}",
                    out.shape(),
                    x.shape()
                ),
            ));
        }
        Ok((out, self.marginals.level(t as f32)))
    }

    /// (eps, x0) predicted at `t` (x0 clamped, and eps made consistent with it, under `clip_x0`).
    pub fn eps_and_x0(&mut self, x: &Tensor, t: f64) -> Result<(Tensor, Tensor)> {
        let (raw, level) = self.raw(x, t)?;
        let x0 = self.marginals.x0(&raw, x, level)?;
        match self.clip_x0 {
            Some(c) => {
                let x0 = x0.clamp(-c, c)?;
                let eps = combine(x, 1.0 / level.std, &x0, -level.alpha / level.std)?;
                Ok((eps, x0))
            }
            None => Ok((self.marginals.eps(&raw, x, level)?, x0)),
        }
    }

    /// x0 predicted at `t` (clamped under `clip_x0`).
    pub fn x0(&mut self, x: &Tensor, t: f64) -> Result<Tensor> {
        let (raw, level) = self.raw(x, t)?;
        let x0 = self.marginals.x0(&raw, x, level)?;
        match self.clip_x0 {
            Some(c) => x0.clamp(-c, c),
            None => Ok(x0),
        }
    }

    /// The score of x_t's marginal at `t`.
    pub fn score(&mut self, x: &Tensor, t: f64) -> Result<Tensor> {
        let (raw, level) = self.raw(x, t)?;
        self.marginals.score(&raw, x, level)
    }

    /// The network time of the first call: the start's, or `from_noise` for a run from noise.
    pub fn first_time(&self, from_noise: f64) -> f64 {
        self.start.as_ref().map_or(from_noise, |s| s.t)
    }

    /// The state the run begins from: the start's, or noise of std `prior_std`.
    pub fn initial(&mut self, prior_std: f64) -> Result<Tensor> {
        match self.start.take() {
            Some(start) => Ok(start.x),
            None => self.noise(prior_std),
        }
    }

    /// Standard normal noise of the sample shape, times `std`.
    pub fn noise(&mut self, std: f64) -> Result<Tensor> {
        self.rng.normal(self.gpu, self.shape, 0.0, std as f32, DType::F32)
    }

    /// True when a step callback wants to see the steps (so samplers compute x0 only then).
    pub fn watched(&self) -> bool {
        self.on_step.is_some()
    }

    /// Tweedie's x0 = (x + std² score) / alpha at `t`, for callbacks of score-based samplers.
    pub fn x0_from_score(&self, x: &Tensor, score: &Tensor, t: f64) -> Result<Tensor> {
        let Level { alpha, std } = self.marginals.level(t as f32);
        combine(x, 1.0 / alpha, score, std * std / alpha)
    }

    /// Reports step `index`, whose network call was at `t` and whose state `x` a run would
    /// resume from at `resume_t`, to the callback, after the device has run the step (awaited,
    /// so a watched run's step times are real and, in a browser, the page's event loop runs
    /// between steps: there every step is awaited).
    pub async fn report(
        &mut self,
        index: usize,
        (t, resume_t): (f64, Option<f64>),
        x: &Tensor,
        x0: Option<&Tensor>,
    ) -> Result<()> {
        let skip = self.skip_at(t);
        self.step = index + 1;
        if self.on_step.is_none() && !crate::gpu::IN_BROWSER {
            return Ok(());
        }
        self.gpu.finish().await?;
        let Some(f) = self.on_step.as_mut() else {
            return Ok(());
        };
        f(&Step {
            index,
            t: t as f32,
            skip,
            x,
            x0,
            resume_t,
        })
    }
}
