//! Every sampler behind one serde/CLI-parseable `Sampler` enum: which processes it fits, its
//! default step count, the options shared by all (steps, skip plan, feature cache, step
//! callback), and `run`.

mod context;
mod ddim;
mod dpm_solver;
mod langevin;
mod ode;
mod sde;
mod timesteps;

use super::deep_cache::{CacheCounts, FeatureCache};
use super::denoiser::Denoiser;
use super::process::{Marginals, Process};
use super::skip::SkipPlan;
use crate::ops::random::Rng;
use crate::{Error, Gpu, Result, Tensor};
use context::Context;
use serde::{Deserialize, Serialize};
pub use timesteps::{check_timesteps, log_snr, timestep_of_log_snr, vp_times, Spacing};

/// A sampler and its own settings. `name()` / `FromStr` use the CLI names `ddpm`, `ddim`,
/// `ald`, `euler-maruyama`, `pc`, `ode-heun`, `ode-rk45`, `dpm-solver++`, `dpm-solver++-sde`
/// (parsing gives the default settings).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum Sampler {
    /// DDPM ancestral sampling (VP) with the posterior variance of each (possibly strided)
    /// step; `steps` = T runs every timestep. This is DDIM with eta = 1 on uniform steps.
    Ddpm,
    /// DDIM (VP): eta = 0 is deterministic, 1 is ancestral; timesteps rounded to integers.
    Ddim { eta: f32, spacing: Spacing },
    /// Annealed Langevin dynamics (NCSN, or VE at `steps` geometric levels):
    /// `steps_per_level` updates with step size `step_size` · sigma_i² / sigma_min².
    Ald { steps_per_level: usize, step_size: f32 },
    /// Euler–Maruyama on the reverse SDE (VP, VE).
    EulerMaruyama,
    /// Predictor–corrector (VP, VE): reverse-diffusion predictor, `corrector_steps` Langevin
    /// corrector steps with signal-to-noise ratio `snr`.
    Pc { snr: f32, corrector_steps: usize },
    /// The probability-flow ODE with Heun's method (VP, VE).
    OdeHeun,
    /// The probability-flow ODE with adaptive Dormand–Prince RK45 (VP, VE); `steps` sets the
    /// first step, `rtol`/`atol` the error control (scipy's rule).
    OdeRk45 { rtol: f32, atol: f32 },
    /// DPM-Solver++(2M) (VP): the multistep second-order data-prediction solver.
    #[serde(rename = "dpm-solver++")]
    DpmSolverPp { spacing: Spacing },
    /// DPM-Solver++(2M) SDE (VP): the same multistep solver on the reverse SDE, which adds
    /// fresh noise every step as DDPM's ancestral sampler does.
    #[serde(rename = "dpm-solver++-sde")]
    DpmSolverPpSde { spacing: Spacing },
}

/// Sampler steps of [`default_sampler`] (in `wgdiff sample` and the training grids).
pub const DEFAULT_SAMPLER_STEPS: usize = 50;

/// The sampler `wgdiff sample` and the training grids use unless told otherwise: DDPM's
/// ancestral sampler for VP models (on weakly trained models its noise gives cleaner strokes
/// than deterministic DDIM), the predictor-corrector for VE, annealed Langevin for NCSN.
pub fn default_sampler(process: &Process) -> Sampler {
    let name = match process {
        Process::Vp { .. } => "ddpm",
        Process::Ve { .. } => "pc",
        Process::Ncsn { .. } => "ald",
    };
    name.parse().expect("a sampler name")
}

/// Settings every sampler takes.
#[derive(Default)]
pub struct SampleOptions<'a> {
    /// Network evaluations / steps (DDPM, DDIM, DPM-Solver++: timesteps; ALD: noise levels;
    /// SDE and Heun: time steps; RK45: the first step is 1/steps of the time range).
    /// `None` = [`Sampler::default_steps`].
    pub steps: Option<usize>,
    /// Deep levels each step's network calls skip (default: none).
    pub skip: SkipPlan,
    /// Reuse the deep levels' features across network calls (None: compute them every call).
    pub cache: Option<FeatureCache>,
    /// Called after every step (ALD: every level; RK45: every accepted step).
    pub on_step: Option<&'a mut OnStep<'a>>,
    /// Clamp the predicted x0 to [-c, c] in DDPM, DDIM and DPM-Solver++ (images scaled to
    /// [-1, 1]: `Some(1.0)`, as DDPM's sampler does); eps is recomputed from the clamped x0.
    /// Score-based samplers ignore it.
    pub clip_x0: Option<f32>,
    /// Begin from this state instead of pure noise (a branch of an earlier run; see [`Start`]).
    pub start: Option<Start>,
    /// The VP timesteps of the steps' network calls instead of the sampler's spacing (a
    /// searched schedule; DDPM, DDIM and DPM-Solver++ only, one per step, decreasing within
    /// [0, T-1]; DPM-Solver++ steps on to 0 after the last). Not with `start`.
    pub timesteps: Option<Vec<f64>>,
}

/// A state to sample on from: `x` (the sample shape) where the sampler's first network call is
/// at network time `t` (an earlier run's [`Step::resume_t`]); the sampler walks its own grid of
/// `steps` from `t` to the end of the process's time span, as it would from pure noise.
#[derive(Clone)]
pub struct Start {
    pub x: Tensor,
    pub t: f64,
}

/// The per-step callback; an error stops sampling.
pub type OnStep<'a> = dyn FnMut(&Step) -> Result<()> + 'a;

/// One finished sampler step, as the callback sees it.
pub struct Step<'a> {
    pub index: usize,
    /// Network time input of the step's (first) network call.
    pub t: f32,
    /// Levels the network skipped at that call.
    pub skip: usize,
    /// The state after the step.
    pub x: &'a Tensor,
    /// The predicted clean data when the sampler knows it (all but RK45).
    pub x0: Option<&'a Tensor>,
    /// Where a run resumed from `x` would make its first network call ([`Start::t`]); None
    /// after the last step (nothing remains).
    pub resume_t: Option<f64>,
}

/// Samples and the number of network evaluations they took.
pub struct SampleOutput {
    pub samples: Tensor,
    pub evaluations: usize,
    /// What the deep-feature cache did (zeros without one).
    pub cache: CacheCounts,
}

impl Sampler {
    /// Every sampler's CLI name.
    pub const NAMES: [&'static str; 9] = [
        "ddpm",
        "ddim",
        "ald",
        "euler-maruyama",
        "pc",
        "ode-heun",
        "ode-rk45",
        "dpm-solver++",
        "dpm-solver++-sde",
    ];

    /// What a step count means for this sampler when it is not "this many steps": the
    /// adaptive `ode-rk45` takes its first step at span/steps and then as its tolerances say.
    pub fn steps_note(&self) -> Option<&'static str> {
        match self {
            Sampler::OdeRk45 { .. } => Some(
                "ode-rk45 is adaptive: --steps N only sizes its first step (1/N of the time span); its error \
                 tolerances (rtol, atol) decide how many steps it takes",
            ),
            _ => None,
        }
    }

    /// Errors unless every setting is one the sampler can use (a schedule file may hold any
    /// number; PC with snr 1e10 overflows its step size and samples zeros): DDIM's eta in
    /// [0, 1], ALD's steps per level 1..=10,000 and step size in (0, 1], PC's snr in (0, 1]
    /// and at most 100 corrector steps, RK45's tolerances in (0, 1).
    pub fn validate(&self) -> Result<()> {
        let within = |what: &str, value: f32, lo: f32, hi: f32, lo_open: bool| {
            let above = if lo_open { value > lo } else { value >= lo };
            match value.is_finite() && above && value <= hi {
                true => Ok(()),
                false => Err(Error::Diffusion(format!(
                    "sampler `{}`: {what} = {} is outside {}{lo}, {hi}]",
                    self.name(),
                    match value.abs() {
                        a if a >= 1e6 => format!("{value:e}"),
                        _ => value.to_string(),
                    },
                    if lo_open { "(" } else { "[" }
                ))),
            }
        };
        let count = |what: &str, value: usize, lo: usize, hi: usize| match (lo..=hi).contains(&value) {
            true => Ok(()),
            false => Err(Error::Diffusion(format!(
                "sampler `{}`: {what} = {value} is outside {lo}..={hi}",
                self.name()
            ))),
        };
        match *self {
            Sampler::Ddim { eta, .. } => within("eta", eta, 0.0, 1.0, false),
            Sampler::Ald {
                steps_per_level,
                step_size,
            } => {
                count("steps_per_level", steps_per_level, 1, 10_000)?;
                within("step_size", step_size, 0.0, 1.0, true)
            }
            Sampler::Pc { snr, corrector_steps } => {
                count("corrector_steps", corrector_steps, 0, 100)?;
                within("snr", snr, 0.0, 1.0, true)
            }
            Sampler::OdeRk45 { rtol, atol } => {
                within("rtol", rtol, 0.0, 1.0, true)?;
                within("atol", atol, 0.0, 1.0, true)
            }
            Sampler::Ddpm
            | Sampler::EulerMaruyama
            | Sampler::OdeHeun
            | Sampler::DpmSolverPp { .. }
            | Sampler::DpmSolverPpSde { .. } => Ok(()),
        }
    }

    /// The CLI name.
    pub fn name(&self) -> &'static str {
        let index = match self {
            Sampler::Ddpm => 0,
            Sampler::Ddim { .. } => 1,
            Sampler::Ald { .. } => 2,
            Sampler::EulerMaruyama => 3,
            Sampler::Pc { .. } => 4,
            Sampler::OdeHeun => 5,
            Sampler::OdeRk45 { .. } => 6,
            Sampler::DpmSolverPp { .. } => 7,
            Sampler::DpmSolverPpSde { .. } => 8,
        };
        Self::NAMES[index]
    }

    /// True when this sampler can sample `process`.
    pub fn fits(&self, process: &Process) -> bool {
        matches!(
            (self, process),
            (
                Sampler::Ddpm
                    | Sampler::Ddim { .. }
                    | Sampler::DpmSolverPp { .. }
                    | Sampler::DpmSolverPpSde { .. },
                Process::Vp { .. }
            ) | (Sampler::Ald { .. }, Process::Ve { .. } | Process::Ncsn { .. })
                | (
                    Sampler::EulerMaruyama | Sampler::Pc { .. } | Sampler::OdeHeun | Sampler::OdeRk45 { .. },
                    Process::Vp { .. } | Process::Ve { .. },
                )
        )
    }

    /// Steps when [`SampleOptions::steps`] is `None`.
    pub fn default_steps(&self, process: &Process) -> usize {
        match (self, process) {
            (Sampler::Ddpm, Process::Vp { steps, .. }) => *steps,
            (Sampler::Ald { .. }, Process::Ncsn { levels, .. }) => *levels,
            (Sampler::Ald { .. }, _) => 10,
            (Sampler::Ddim { .. }, _) => 50,
            (Sampler::DpmSolverPp { .. } | Sampler::DpmSolverPpSde { .. }, _) => 20,
            (Sampler::EulerMaruyama | Sampler::Pc { .. }, _) => 500,
            _ => 100,
        }
    }

    /// Draws samples of `shape` [N, ...] (f32) from `process` with `denoiser`; noise comes
    /// from `rng`. Works on the web (RK45 awaits one scalar readback per step).
    pub async fn run_async(
        &self,
        process: &Process,
        denoiser: &dyn Denoiser,
        gpu: &Gpu,
        shape: &[usize],
        rng: &mut Rng,
        options: SampleOptions<'_>,
    ) -> Result<SampleOutput> {
        if !self.fits(process) {
            let fitting: Vec<&str> = ALL.iter().filter(|s| s.fits(process)).map(|s| s.name()).collect();
            return Err(Error::Diffusion(format!(
                "sampler `{}` does not fit the {} process; samplers for {}: {}",
                self.name(),
                process.name(),
                process.name(),
                fitting.join(", ")
            )));
        }
        self.validate()?;
        let steps = options.steps.unwrap_or_else(|| self.default_steps(process));
        if steps == 0 {
            return Err(Error::Diffusion(format!(
                "sampler `{}` needs at least one step",
                self.name()
            )));
        }
        let fixed_steps = (!matches!(self, Sampler::OdeRk45 { .. })).then_some(steps);
        options.skip.check(denoiser.levels(), fixed_steps)?;
        if let Some(cache) = &options.cache {
            cache.check(denoiser.levels())?;
        }
        let marginals = process.marginals()?;
        if let Some(start) = &options.start {
            check_start(start, process, &marginals, shape)?;
        }
        if let Some(timesteps) = &options.timesteps {
            self.check_timesteps(timesteps, steps, &marginals, options.start.is_some())?;
        }
        let given = options.timesteps.as_deref();
        let mut ctx = Context::new(
            marginals,
            denoiser,
            (options.skip, options.cache),
            (options.start, options.on_step),
            rng,
            gpu,
            shape,
        );
        ctx.clip_x0 = options.clip_x0;
        let samples = match *self {
            Sampler::Ddpm => ddim::run(&mut ctx, steps, 1.0, Spacing::Uniform, given).await?,
            Sampler::Ddim { eta, spacing } => ddim::run(&mut ctx, steps, eta as f64, spacing, given).await?,
            Sampler::Ald {
                steps_per_level,
                step_size,
            } => langevin::run(&mut ctx, steps, steps_per_level, step_size as f64).await?,
            Sampler::EulerMaruyama => sde::euler_maruyama(&mut ctx, steps).await?,
            Sampler::Pc { snr, corrector_steps } => {
                sde::predictor_corrector(&mut ctx, steps, snr as f64, corrector_steps).await?
            }
            Sampler::OdeHeun => ode::heun(&mut ctx, steps).await?,
            Sampler::OdeRk45 { rtol, atol } => ode::rk45(&mut ctx, steps, rtol as f64, atol as f64).await?,
            Sampler::DpmSolverPp { spacing } => {
                dpm_solver::run(&mut ctx, steps, spacing, false, given).await?
            }
            Sampler::DpmSolverPpSde { spacing } => {
                dpm_solver::run(&mut ctx, steps, spacing, true, given).await?
            }
        };
        Ok(SampleOutput {
            samples,
            evaluations: ctx.evaluations,
            cache: ctx.cache.map(|c| c.counts).unwrap_or_default(),
        })
    }

    /// True for the samplers that can walk given timesteps ([`SampleOptions::timesteps`]).
    pub fn takes_timesteps(&self) -> bool {
        matches!(
            self,
            Sampler::Ddpm
                | Sampler::Ddim { .. }
                | Sampler::DpmSolverPp { .. }
                | Sampler::DpmSolverPpSde { .. }
        )
    }

    /// Errors unless this sampler can walk `timesteps` for `steps` steps of a run from noise.
    fn check_timesteps(
        &self,
        timesteps: &[f64],
        steps: usize,
        marginals: &Marginals,
        branch: bool,
    ) -> Result<()> {
        let name = self.name();
        let Some(alpha_bars) = marginals.alpha_bars().filter(|_| self.takes_timesteps()) else {
            return Err(Error::Diffusion(format!(
                "sampler `{name}` walks its own time grid; given timesteps are for ddpm, ddim and dpm-solver++ \
                 (also dpm-solver++-sde)"
            )));
        };
        if branch {
            return Err(Error::Diffusion(format!(
                "{name}: a branch from a paused step walks its own grid from there; given timesteps are for runs from noise"
            )));
        }
        check_timesteps(timesteps, steps, alpha_bars.last(), name)
    }

    /// Blocking [`Sampler::run_async`] for native programs and tests (never in a page).
    pub fn run(
        &self,
        process: &Process,
        denoiser: &dyn Denoiser,
        gpu: &Gpu,
        shape: &[usize],
        rng: &mut Rng,
        options: SampleOptions<'_>,
    ) -> Result<SampleOutput> {
        pollster::block_on(self.run_async(process, denoiser, gpu, shape, rng, options))
    }
}

/// Errors unless `start` holds a state of the sample `shape` at a time inside `process`'s span.
fn check_start(start: &Start, process: &Process, marginals: &Marginals, shape: &[usize]) -> Result<()> {
    if start.x.shape() != shape {
        return Err(Error::shape(
            "sampler start",
            format!(
                "the state to sample on from is {:?}, the run draws {shape:?}",
                start.x.shape()
            ),
        ));
    }
    let normalized = marginals.normalized_time(start.t as f32);
    if !start.t.is_finite() || !(0.0..=1.0).contains(&normalized) {
        return Err(Error::Diffusion(format!(
            "a run cannot start at network time {} (outside the {} process's time span)",
            start.t,
            process.name()
        )));
    }
    Ok(())
}

/// Every sampler with its default settings, in `NAMES` order.
const ALL: [Sampler; 9] = [
    Sampler::Ddpm,
    Sampler::Ddim {
        eta: 0.0,
        spacing: Spacing::Uniform,
    },
    Sampler::Ald {
        steps_per_level: 100,
        step_size: 2e-5,
    },
    Sampler::EulerMaruyama,
    Sampler::Pc {
        snr: 0.16,
        corrector_steps: 1,
    },
    Sampler::OdeHeun,
    Sampler::OdeRk45 {
        rtol: 1e-5,
        atol: 1e-5,
    },
    Sampler::DpmSolverPp {
        spacing: Spacing::LogSnr,
    },
    Sampler::DpmSolverPpSde {
        spacing: Spacing::LogSnr,
    },
];

impl std::str::FromStr for Sampler {
    type Err = Error;

    /// A sampler by CLI name, with its default settings (ALD: 100 steps per level, step size
    /// 2e-5 as NCSN; PC: snr 0.16, one corrector step; RK45: rtol = atol = 1e-5 as the
    /// score-SDE code; DDIM: eta 0, uniform; DPM-Solver++ and its SDE form: logSNR-uniform).
    fn from_str(name: &str) -> Result<Sampler> {
        ALL.into_iter().find(|s| s.name() == name).ok_or_else(|| {
            Error::Diffusion(format!(
                "unknown sampler `{name}`; choose one of {}",
                Sampler::NAMES.join(", ")
            ))
        })
    }
}

impl std::fmt::Display for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
