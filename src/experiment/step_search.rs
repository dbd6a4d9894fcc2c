//! The timestep-schedule search: for a model and a deterministic sampler, the N timesteps whose
//! samples from fixed noise lie closest to a many-step run's from the same noise.
//!
//! "Align Your Steps" (Sabour, Fidler and Kreis, 2024) chooses a few-step schedule by bounding
//! how far its samples land from the many-step ones; here that distance is measured directly
//! (mean squared difference over a probe batch) and minimised by coordinate descent on the
//! schedule's interior points in log-SNR, starting from the nearest of the uniform, quadratic
//! and log-SNR-uniform grids. The
//! experiment then samples every spacing (uniform, quadratic, log-SNR, searched) and the DDPM
//! bar in turn, timed and scored by MNIST-FID in one run.

use super::round_robin::{sample_in_turn, warm_up, Contender, Rounds};
use super::ExperimentPlan;
use crate::diffusion::{
    log_snr, timestep_of_log_snr, vp_times, AlphaBars, Sampler, SkipSchedule, Spacing, StepSearchRecord,
};
use crate::eval::{FeatureNet, Reference, Scores};
use crate::median::median;
use crate::pipeline::{SampleRequest, Sampling};
use crate::{Error, Gpu, Result};
use serde::{Deserialize, Serialize};

/// What to search and how to score it.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The sampler whose timesteps are searched: `dpm-solver++` or `ddim` (eta 0), whose runs
    /// from given noise are deterministic.
    pub sampler: Sampler,
    /// Step counts to search a schedule for.
    pub steps: Vec<usize>,
    /// Steps of the reference run (the same sampler on its own spacing).
    pub reference_steps: usize,
    /// Images of the probe batch every candidate schedule samples.
    pub probe_images: usize,
    /// Coordinate-descent sweeps; sweep s moves each point 2^-s of the way to a neighbour.
    pub sweeps: usize,
    /// The quality bar: DDPM's ancestral sampler at this many steps.
    pub baseline_steps: usize,
    /// Images per MNIST-FID, drawn in batches of `batch` (round r seeded `seed + r`).
    pub samples: usize,
    pub batch: usize,
    pub seed: u64,
}

impl ExperimentPlan for Plan {
    /// Sized for lavapipe (~25 minutes on the shipped U-Net): 10 and 5 steps, a 100-step
    /// reference, 16 probe images, 2 sweeps, 200 images per MNIST-FID.
    fn quick() -> Plan {
        Plan {
            sampler: dpm_solver(),
            steps: vec![10, 5],
            reference_steps: 100,
            probe_images: 16,
            sweeps: 2,
            baseline_steps: 50,
            samples: 200,
            batch: 50,
            seed: 0,
        }
    }

    /// 1,000 images per MNIST-FID, a 200-step reference, 64 probe images, 4 sweeps.
    fn full() -> Plan {
        Plan {
            reference_steps: 200,
            probe_images: 64,
            sweeps: 4,
            samples: 1000,
            batch: 100,
            ..Plan::quick()
        }
    }
}

fn dpm_solver() -> Sampler {
    Sampler::DpmSolverPp {
        spacing: Spacing::LogSnr,
    }
}

impl Plan {
    /// Refuses a plan that cannot run, before any work.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("step search: {msg}")));
        match self.sampler {
            Sampler::DpmSolverPp { .. } | Sampler::Ddim { eta: 0.0, .. } => {}
            other => {
                return bad(format!(
                    "--sampler {other}: the search compares runs from the same noise, so it needs a deterministic \
                     sampler: dpm-solver++ or ddim (eta 0)"
                ))
            }
        }
        let fewest = self.fewest_steps();
        if self.steps.is_empty() || self.steps.iter().any(|&n| n < fewest) {
            return bad(format!(
                "--steps {:?}: {} needs at least {fewest} steps to have a timestep to move",
                self.steps, self.sampler
            ));
        }
        let most = self.steps.iter().max().copied().unwrap_or(0);
        if self.reference_steps <= most {
            return bad(format!(
                "--reference-steps {} must exceed the most steps searched ({most})",
                self.reference_steps
            ));
        }
        if self.probe_images == 0 || self.baseline_steps == 0 {
            return bad("--probe-images and --baseline-steps must be at least 1".into());
        }
        Rounds::from(self).check()
    }

    /// Steps below which a grid has no interior point: DPM-Solver++ walks steps + 1 points
    /// (on to 0), DDIM steps points (its last call at 0).
    fn fewest_steps(&self) -> usize {
        match self.sampler {
            Sampler::DpmSolverPp { .. } => 2,
            _ => 3,
        }
    }

    /// Points of the grid a run of `steps` walks, both ends included.
    fn grid_points(&self, steps: usize) -> usize {
        match self.sampler {
            Sampler::DpmSolverPp { .. } => steps + 1,
            _ => steps,
        }
    }

    /// The sampler on `spacing`.
    pub fn spaced(&self, spacing: Spacing) -> Sampler {
        match self.sampler {
            Sampler::Ddim { eta, .. } => Sampler::Ddim { eta, spacing },
            _ => Sampler::DpmSolverPp { spacing },
        }
    }
}

impl From<&Plan> for Rounds {
    fn from(plan: &Plan) -> Rounds {
        Rounds {
            samples: plan.samples,
            batch: plan.batch,
            seed: plan.seed,
        }
    }
}

/// The spacings a search may start from, by name.
const STARTS: [(&str, Spacing); 3] = [
    ("uniform", Spacing::Uniform),
    ("quadratic", Spacing::Quadratic),
    ("log-snr", Spacing::LogSnr),
];

/// A searched schedule.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Searched {
    pub steps: usize,
    /// The sampler's network-call timesteps (DPM-Solver++ then steps on to 0).
    pub timesteps: Vec<f64>,
    /// Mean squared difference of the probe batch from the reference run's: the searched
    /// schedule's, and each spacing's (uniform, quadratic, log-snr: the nearest was the start).
    pub discrepancy: f64,
    pub spacings: Vec<(String, f64)>,
    /// The spacing the search started from.
    pub start: String,
    /// Probe runs the search took.
    pub runs: usize,
}

impl Searched {
    /// The distance of the spacing the search started from.
    pub fn start_discrepancy(&self) -> f64 {
        self.spacings
            .iter()
            .find(|(name, _)| *name == self.start)
            .map_or(f64::NAN, |(_, d)| *d)
    }

    /// The timesteps as text: whole ones as integers, others to one decimal.
    pub fn timesteps_text(&self) -> String {
        let text: Vec<String> = self
            .timesteps
            .iter()
            .map(|&t| match t.fract() == 0.0 {
                true => format!("{t:.0}"),
                false => format!("{t:.1}"),
            })
            .collect();
        text.join(", ")
    }
}

/// How the search goes: `done` of `total` probe runs for `steps`, and the best so far.
pub struct Probe {
    pub steps: usize,
    pub done: usize,
    pub total: usize,
    pub best: f64,
}

/// The probe batch's samples of `request` on the host.
pub async fn probe_samples(gpu: &Gpu, sampling: Sampling<'_>, request: &SampleRequest) -> Result<Vec<f32>> {
    let (samples, _) = crate::without_grad(sampling.sample(gpu, request, None)).await?;
    samples.to_vec_async().await
}

/// Mean squared difference of two sample sets.
pub fn discrepancy(samples: &[f32], reference: &[f32]) -> f64 {
    let sum: f64 = samples
        .iter()
        .zip(reference)
        .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
        .sum();
    sum / samples.len().max(1) as f64
}

/// Searches `steps` timesteps for `probe`'s sampler (its count and seed the probe batch's)
/// against `reference` (the same batch's samples of the reference run), telling `progress`
/// after every probe run.
pub async fn search(
    gpu: &Gpu,
    sampling: Sampling<'_>,
    plan: &Plan,
    (probe, reference): (&SampleRequest, &[f32]),
    steps: usize,
    progress: &mut dyn FnMut(Probe) -> Result<()>,
) -> Result<Searched> {
    let alpha_bars = vp_alpha_bars(sampling)?;
    let points = plan.grid_points(steps);
    let total = STARTS.len() + plan.sweeps * 2 * (points - 2);
    let measure = |request: SampleRequest| async move {
        let samples = probe_samples(gpu, sampling, &request).await?;
        Ok::<f64, Error>(discrepancy(&samples, reference))
    };
    let runs_of = probe.with_sampler(plan.sampler, steps)?;
    // every spacing's grid (its ends T-1 and 0), the nearest the start
    let mut spacings = Vec::new();
    let mut best: Option<(f64, Vec<f64>, &str)> = None;
    for (name, spacing) in STARTS {
        let grid = vp_times(&alpha_bars, spacing, points, alpha_bars.last());
        let d = measure(runs_of.with_timesteps(calls_of(plan, &grid))).await?;
        spacings.push((name.to_string(), d));
        if best.as_ref().is_none_or(|b| d < b.0) {
            best = Some((d, grid, name));
        }
        let so_far = best.as_ref().map_or(d, |b| b.0);
        progress(Probe {
            steps,
            done: spacings.len(),
            total,
            best: so_far,
        })?;
    }
    let (mut best, mut grid, start) = best.expect("three spacings measured");
    let mut runs = spacings.len();
    let lambda = |t: f64| log_snr(&alpha_bars, t);
    for sweep in 0..plan.sweeps {
        let share = 0.5f64.powi(sweep as i32 + 1);
        for i in 1..points - 1 {
            for neighbour in [i - 1, i + 1] {
                let mut trial = grid.clone();
                let moved = lambda(grid[i]) + share * (lambda(grid[neighbour]) - lambda(grid[i]));
                trial[i] = timestep_of_log_snr(&alpha_bars, moved);
                let d = measure(runs_of.with_timesteps(calls_of(plan, &trial))).await?;
                runs += 1;
                if d < best {
                    (best, grid) = (d, trial);
                }
                progress(Probe {
                    steps,
                    done: runs,
                    total,
                    best,
                })?;
            }
        }
    }
    Ok(Searched {
        steps,
        timesteps: calls_of(plan, &grid),
        discrepancy: best,
        spacings,
        start: start.to_string(),
        runs,
    })
}

/// The sampler's network-call timesteps of a grid from T-1 to 0: DPM-Solver++ calls at all
/// but the last point, DDIM at every one.
fn calls_of(plan: &Plan, grid: &[f64]) -> Vec<f64> {
    match plan.sampler {
        Sampler::DpmSolverPp { .. } => grid[..grid.len() - 1].to_vec(),
        _ => grid.to_vec(),
    }
}

fn vp_alpha_bars(sampling: Sampling<'_>) -> Result<AlphaBars> {
    sampling
        .process
        .marginals()?
        .alpha_bars()
        .cloned()
        .ok_or_else(|| {
            Error::Config(format!(
                "the step search needs a VP model (DDPM-style timesteps); this one is {}",
                sampling.process.name()
            ))
        })
}

/// One row of the final run: a sampler, its steps and schedule.
#[derive(Clone, Debug, Serialize)]
pub struct Arm {
    pub label: String,
    /// "uniform", "quadratic", "log-snr", "searched", "searched-sde" or "ddpm" (the bar).
    pub schedule: String,
    pub steps: usize,
    #[serde(skip)]
    pub request: SampleRequest,
}

/// An arm's measurements.
#[derive(Clone, Debug, Serialize)]
pub struct ArmResult {
    pub arm: Arm,
    pub scores: Scores,
    /// Sampling seconds of each round's batch.
    pub batch_seconds: Vec<f64>,
    /// Median over rounds of the batch's seconds per image, in ms.
    pub ms_per_image: f64,
}

/// The final run's arms: DDPM at the baseline steps, then for every searched step count the
/// sampler on uniform, quadratic and log-SNR spacing and on the searched timesteps, and for
/// DPM-Solver++ also its SDE form on the searched timesteps (schedule "searched-sde": the search
/// needs a deterministic solver, the timesteps serve the stochastic one too).
pub fn arms(plan: &Plan, base: &SampleRequest, searched: &[Searched]) -> Result<Vec<Arm>> {
    let ddpm = base.with_sampler(Sampler::Ddpm, plan.baseline_steps)?;
    let mut arms = vec![Arm {
        label: format!("ddpm, {} steps", plan.baseline_steps),
        schedule: "ddpm".into(),
        steps: plan.baseline_steps,
        request: ddpm,
    }];
    for s in searched {
        for (name, spacing) in [
            ("uniform", Spacing::Uniform),
            ("quadratic", Spacing::Quadratic),
            ("log-snr", Spacing::LogSnr),
        ] {
            arms.push(Arm {
                label: format!("{}, {} steps, {name}", plan.sampler.name(), s.steps),
                schedule: name.into(),
                steps: s.steps,
                request: base.with_sampler(plan.spaced(spacing), s.steps)?,
            });
        }
        arms.push(Arm {
            label: format!("{}, {} steps, searched", plan.sampler.name(), s.steps),
            schedule: "searched".into(),
            steps: s.steps,
            request: base
                .with_sampler(plan.sampler, s.steps)?
                .with_timesteps(s.timesteps.clone()),
        });
        if let Sampler::DpmSolverPp { spacing } = plan.sampler {
            let sde = Sampler::DpmSolverPpSde { spacing };
            arms.push(Arm {
                label: format!("{sde}, {} steps, searched", s.steps),
                schedule: "searched-sde".into(),
                steps: s.steps,
                request: base
                    .with_sampler(sde, s.steps)?
                    .with_timesteps(s.timesteps.clone()),
            });
        }
    }
    Ok(arms)
}

/// Samples every arm in turn (after a warm-up), scores each and times it.
pub async fn compare(
    gpu: &Gpu,
    sampling: Sampling<'_>,
    plan: &Plan,
    arms: &[Arm],
    (features, reference): (&dyn FeatureNet, &Reference),
    progress: impl FnMut(usize, usize, &str) -> Result<()>,
) -> Result<Vec<ArmResult>> {
    let rounds = Rounds::from(plan);
    warm_up(gpu, &[(sampling.net, sampling.model.image_shape())], rounds).await?;
    let contenders: Vec<Contender> = arms
        .iter()
        .map(|arm| Contender {
            label: arm.label.clone(),
            sampling,
            request: arm.request.clone(),
        })
        .collect();
    let generated = sample_in_turn(gpu, &contenders, rounds, Some(features), progress).await?;
    arms.iter()
        .zip(&generated)
        .map(|(arm, g)| {
            let per_image: Vec<f64> = g
                .batch_seconds
                .iter()
                .zip(rounds.counts())
                .map(|(s, n)| 1e3 * s / n as f64)
                .collect();
            Ok(ArmResult {
                arm: arm.clone(),
                scores: g.scores(features, reference)?,
                batch_seconds: g.batch_seconds.clone(),
                ms_per_image: median(&per_image),
            })
        })
        .collect()
}

/// The schedule file of a searched schedule for a network of `levels` levels (nothing skipped).
pub fn schedule_file(
    plan: &Plan,
    levels: usize,
    searched: &Searched,
    record: StepSearchRecord,
) -> SkipSchedule {
    let last = searched.timesteps.first().copied().unwrap_or(1.0).max(1.0);
    let times = searched.timesteps.iter().map(|&t| (t / last) as f32).collect();
    SkipSchedule {
        timesteps: searched.timesteps.clone(),
        step_search: Some(record),
        ..SkipSchedule::new(plan.sampler, levels.max(1), vec![0; searched.steps], times)
    }
}
