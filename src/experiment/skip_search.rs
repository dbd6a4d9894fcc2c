//! Beyond the adaptive U-Net paper ("Accelerating Diffusion Models using Adaptive Neural Network
//! Architecture", Giladi, Meir, Kavar and Elad): the fastest per-step skip schedule under an FID
//! budget, and deep-feature caching, against the c-family on one model (`wgdiff experiment
//! skip-search`).
//!
//! 1. Cost: one network call per skip depth k, timed in interleaved rounds (median ms).
//! 2. Proxy: on one fixed batch, the unskipped sampler run; at every step's state, each depth's
//!    x_0 prediction against the full network's, their mean squared difference times the share
//!    of an x_0 error that a deterministic (DDIM / probability-flow) step carries into the next
//!    state, w_i = (alpha_{i+1} - std_{i+1} alpha_i / std_i)^2: near noise an x_0 error barely
//!    moves the state (later steps correct it), near the data it moves it one for one.
//! 3. Search: a dynamic programme over the steps finds the depths k_i of least summed cost whose
//!    summed proxy stays within a proxy budget b; b is bisected on real FIDs (the first try is
//!    the fastest schedule of all) until a schedule's FID is within F of the unskipped model's.
//! 4. Every arm (the c-family, the searched schedules, caching alone and with skipping) samples
//!    the same images in turn: sampling time and FID from one run.

use super::round_robin::{sample_in_turn, warm_up, Contender, Rounds};
use super::ExperimentPlan;
use crate::diffusion::skip_schedule::SearchRecord;
use crate::diffusion::{Denoiser, FeatureCache, Level, Marginals, Sampler, SkipPlan, SkipSchedule, Step};
use crate::eval::{FeatureNet, Reference, Scores};
use crate::median::median;
use crate::ops::random::Rng;
use crate::pipeline::sample_features;
use crate::pipeline::speedup;
use crate::pipeline::{request_denoiser, run_request, SampleRequest, Sampling};
use crate::{DType, Error, Gpu, Result, Tensor};
use serde::Serialize;
use std::cell::RefCell;
use web_time::Instant;

/// The skip-trained model the search runs on by default (trained for skipping, so skipping
/// costs it little; the untrained-for-skips model loses most of its quality at any skip).
pub const DEFAULT_SEARCH_MODEL: &str = "assets/models/mnist-small-skip-zero.safetensors";

/// How much to measure and sample.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// Images per FID (every arm's and every confirmation's).
    pub samples: usize,
    /// Images per timed sampling batch, and of the cost and proxy measurements.
    pub batch: usize,
    pub sampler: Sampler,
    pub steps: usize,
    /// FID budgets F: a schedule is searched for each (at most F above the unskipped FID).
    pub budgets: Vec<f64>,
    /// The c-family arms (0 is the unskipped reference).
    pub exponents: Vec<f32>,
    /// Caching arms: (interval m, depth d; None = the deepest).
    pub caches: Vec<(usize, Option<usize>)>,
    /// Interleaved rounds of the per-depth cost measurement.
    pub cost_rounds: usize,
    /// Schedules newly confirmed with a real FID per budget (bisection steps whose schedule was
    /// confirmed before cost nothing).
    pub confirmations: usize,
    pub seed: u64,
}

impl ExperimentPlan for Plan {
    /// `--quick`: 100 images per FID in batches of 20, DDPM at 20 steps, budgets 10 and 30
    /// (about 12 minutes on lavapipe with the shipped model; the bound is 20).
    fn quick() -> Plan {
        Plan {
            samples: 100,
            batch: 20,
            sampler: Sampler::Ddpm,
            steps: 20,
            budgets: vec![10.0, 30.0],
            exponents: vec![0.0, 1.0, 2.0, 3.0, 5.0],
            caches: vec![(2, None), (3, None), (5, None), (2, Some(1))],
            cost_rounds: 7,
            confirmations: 4,
            seed: 0,
        }
    }

    /// The full run (for a real GPU): 1,000 images per FID, 50 DDPM steps, budgets 5 and 15.
    fn full() -> Plan {
        Plan {
            samples: 1000,
            batch: 100,
            steps: 50,
            budgets: vec![5.0, 15.0],
            confirmations: 5,
            ..Plan::quick()
        }
    }
}

impl Plan {
    /// Errors on settings the search cannot run with, naming the flag.
    pub fn validate(&self) -> Result<()> {
        Rounds::from(self).check()?;
        if self.steps == 0 {
            return Err(Error::Config("--steps must be at least 1".into()));
        }
        if matches!(self.sampler, Sampler::OdeRk45 { .. }) {
            return Err(Error::Config(
                "ode-rk45 chooses its own steps; a per-step schedule needs a sampler with fixed steps".into(),
            ));
        }
        if let Some(b) = self.budgets.iter().find(|b| !b.is_finite() || **b <= 0.0) {
            return Err(Error::Config(format!(
                "every FID budget must be positive (how far above the unskipped model's FID a schedule may go), got {b}"
            )));
        }
        if self.budgets.is_empty() || self.confirmations == 0 || self.cost_rounds == 0 {
            return Err(Error::Config(
                "the search needs at least one budget, one confirmation and one cost round".into(),
            ));
        }
        Ok(())
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

/// Median milliseconds of one network call (a batch of `request.count()`) at every skip depth k
/// (index = k), measured in `rounds` interleaved rounds (the order rotates each round) after
/// one untimed call per depth.
pub async fn measure_depth_costs(
    gpu: &Gpu,
    sampling: Sampling<'_>,
    request: &SampleRequest,
    rounds: usize,
) -> Result<Vec<f64>> {
    let denoiser = request_denoiser(sampling.net, sampling.model, request);
    let levels = denoiser.levels();
    let [c, h, w] = sampling.model.image_shape();
    let x = Rng::new(request.seed()).normal(gpu, &[request.count(), c, h, w], 0.0, 1.0, DType::F32)?;
    // the network time only feeds the embedding: any valid time (VP timestep, VE time) costs the same
    let t = 0.5;
    let mut times = vec![Vec::new(); levels];
    for round in 0..=rounds {
        for i in 0..levels {
            let k = (i + round) % levels;
            gpu.finish().await?;
            let started = Instant::now();
            {
                let _g = crate::no_grad();
                denoiser.predict(&x, t, k)?;
            }
            gpu.finish().await?;
            if round > 0 {
                times[k].push(started.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    Ok(times.iter().map(|t| median(t)).collect())
}

/// The proxy of every step and depth: `errors[i][k]` is `weights[i]` times the mean squared
/// difference between the x_0 predicted (clamped to [-1, 1]) skipping k levels and the full
/// network's, at the state of step i of the unskipped run (summed over a step's network calls;
/// k = 0 is 0).
#[derive(Clone, Debug, Serialize)]
pub struct Proxy {
    pub errors: Vec<Vec<f64>>,
    /// The share of step i's x_0 error that reaches the next state (see the module doc).
    pub weights: Vec<f64>,
    /// Normalised time of each step's first call (1 = noise).
    pub times: Vec<f32>,
}

impl Proxy {
    /// Summed proxy of a schedule.
    pub fn error_of(&self, skips: &[usize]) -> f64 {
        self.errors.iter().zip(skips).map(|(e, &k)| e[k]).sum()
    }
}

/// A denoiser that runs the full network for the sampler and, beside it, every skip depth,
/// keeping each depth's x_0 difference (on the device until the run ends).
struct ProxyProbe<'a> {
    inner: &'a dyn Denoiser,
    marginals: Marginals,
    /// Per network call: the mean squared x_0 difference of depths 1.. (scalars).
    calls: RefCell<Vec<Vec<Tensor>>>,
}

impl Denoiser for ProxyProbe<'_> {
    fn predict(&self, x: &Tensor, t: f32, _skip: usize) -> Result<Tensor> {
        let level = self.marginals.level(t);
        let x0 = |raw: &Tensor| self.marginals.x0(raw, x, level)?.clamp(-1.0, 1.0);
        let full = self.inner.predict(x, t, 0)?;
        let full_x0 = x0(&full)?;
        let row = (1..self.inner.levels())
            .map(|k| {
                x0(&self.inner.predict(x, t, k)?)?
                    .sub(&full_x0)?
                    .square()?
                    .mean_all()
            })
            .collect::<Result<_>>()?;
        self.calls.borrow_mut().push(row);
        Ok(full)
    }

    fn levels(&self) -> usize {
        self.inner.levels()
    }
}

/// Measures the [`Proxy`] of `request` (its sampler, steps, count and seed) on `sampling`.
pub async fn measure_proxy(gpu: &Gpu, sampling: Sampling<'_>, request: &SampleRequest) -> Result<Proxy> {
    let denoiser = request_denoiser(sampling.net, sampling.model, request);
    let marginals = sampling.process.marginals()?;
    let probe = ProxyProbe {
        inner: &denoiser,
        marginals: marginals.clone(),
        calls: RefCell::new(Vec::new()),
    };
    // calls made by the end of each step, and each step's network time
    let ends = RefCell::new(Vec::new());
    let mut on_step = |step: &Step| -> Result<()> {
        ends.borrow_mut().push((probe.calls.borrow().len(), step.t));
        Ok(())
    };
    let unskipped = request.unskipped();
    crate::without_grad(run_request(
        gpu,
        &probe,
        sampling.model,
        sampling.process,
        &unskipped,
        None,
        Some(&mut on_step),
    ))
    .await?;
    let levels = denoiser.levels();
    let mut per_call = Vec::new();
    for row in probe.calls.take() {
        let mut errors = vec![0.0];
        for e in row {
            errors.push(e.to_vec_async().await?[0] as f64);
        }
        per_call.push(errors);
    }
    let ends = ends.take();
    let levels_at: Vec<Level> = ends.iter().map(|&(_, t)| marginals.level(t)).collect();
    let (mut errors, mut weights, mut first) = (Vec::new(), Vec::new(), 0);
    for (i, &(end, _)) in ends.iter().enumerate() {
        // the data after the last step: alpha 1, std 0
        let next = levels_at
            .get(i + 1)
            .copied()
            .unwrap_or(Level { alpha: 1.0, std: 0.0 });
        let now = levels_at[i];
        let weight = match now.std > 0.0 {
            true => (next.alpha - next.std * now.alpha / now.std).powi(2),
            false => 1.0,
        };
        let mut summed = vec![0.0; levels];
        for call in &per_call[first..end] {
            for (s, e) in summed.iter_mut().zip(call) {
                *s += weight * e;
            }
        }
        errors.push(summed);
        weights.push(weight);
        first = end;
    }
    let times = ends.iter().map(|&(_, t)| marginals.normalized_time(t)).collect();
    Ok(Proxy {
        errors,
        weights,
        times,
    })
}

/// Steps of the proxy budget in the dynamic programme: each depth's error is rounded up to a
/// whole step, so the chosen schedule's summed proxy never exceeds the budget.
const BUDGET_UNITS: usize = 4096;

/// The depths k_i (one per step of `errors`) of least summed `costs[k_i]` whose summed
/// `errors[i][k_i]` is at most `budget` (exact up to the budget's 1/4096 rounding, which only
/// tightens it); all zeros when nothing else fits. Ties go to the shallower depth.
pub fn fastest_within(costs: &[f64], errors: &[Vec<f64>], budget: f64) -> Vec<usize> {
    let unit = budget / BUDGET_UNITS as f64;
    let units_of = |e: f64| -> Option<usize> {
        if e <= 0.0 {
            return Some(0);
        }
        if unit.is_nan() || unit <= 0.0 || !e.is_finite() {
            return None;
        }
        let u = (e / unit).ceil();
        (u <= BUDGET_UNITS as f64).then_some(u as usize)
    };
    let steps = errors.len();
    // best[u]: least cost of the steps so far using u units; chosen[i][u]: step i's depth there
    let mut best = vec![f64::INFINITY; BUDGET_UNITS + 1];
    best[0] = 0.0;
    let mut chosen = vec![vec![0usize; BUDGET_UNITS + 1]; steps];
    for (i, step_errors) in errors.iter().enumerate() {
        let mut next = vec![f64::INFINITY; BUDGET_UNITS + 1];
        for u in (0..=BUDGET_UNITS).filter(|&u| best[u].is_finite()) {
            for (k, (&cost, &e)) in costs.iter().zip(step_errors).enumerate() {
                let Some(v) = units_of(e).map(|du| u + du).filter(|&v| v <= BUDGET_UNITS) else {
                    continue;
                };
                if best[u] + cost < next[v] {
                    next[v] = best[u] + cost;
                    chosen[i][v] = k;
                }
            }
        }
        best = next;
    }
    let Some(mut u) = (0..=BUDGET_UNITS)
        .filter(|&u| best[u].is_finite())
        .min_by(|&a, &b| best[a].total_cmp(&best[b]).then(a.cmp(&b)))
    else {
        return vec![0; steps];
    };
    let mut skips = vec![0; steps];
    for i in (0..steps).rev() {
        let k = chosen[i][u];
        skips[i] = k;
        u -= units_of(errors[i][k]).unwrap_or(0);
    }
    skips
}

/// Network milliseconds of one run of `skips` from the per-depth costs.
pub fn predicted_ms(costs: &[f64], skips: &[usize]) -> f64 {
    skips.iter().map(|&k| costs[k]).sum()
}

/// One schedule the search confirmed with a real FID.
#[derive(Clone, Debug, Serialize)]
pub struct Attempt {
    pub budget: f64,
    pub proxy_budget: f64,
    pub skips: Vec<usize>,
    pub proxy_error: f64,
    pub predicted_ms: f64,
    pub fid: f64,
    /// FID within the budget.
    pub accepted: bool,
}

/// What the search found for one budget: the fastest accepted attempt (the unskipped
/// schedule, at proxy 0, when none was accepted), and every attempt.
#[derive(Clone, Debug, Serialize)]
pub struct Searched {
    pub budget: f64,
    pub chosen: Attempt,
    pub attempts: Vec<Attempt>,
}

/// What the search tells its caller while it runs.
pub enum SearchEvent<'a> {
    /// A phase starts ("timing each skip depth", ...).
    Phase(&'a str),
    /// A confirming FID is being sampled (images done of total).
    Sampling {
        what: &'a str,
        done: usize,
        total: usize,
    },
    Confirmed(&'a Attempt),
    /// A batch of the final round-robin.
    Batch {
        done: usize,
        total: usize,
        arm: &'a str,
    },
}

/// The model and the FID machinery a search uses.
pub struct Bench<'a> {
    pub sampling: Sampling<'a>,
    pub features: &'a dyn FeatureNet,
    pub reference: &'a Reference,
}

impl Bench<'_> {
    /// The plan's request at `skip` / `cache` (one batch of the plan's seed).
    pub fn request(&self, plan: &Plan, skip: SkipPlan, cache: Option<FeatureCache>) -> Result<SampleRequest> {
        // a conditional model samples a mix of its classes, plainly conditional (guidance 1)
        SampleRequest::builder(self.sampling.model, self.sampling.process)
            .sampler(plan.sampler)
            .steps(Some(plan.steps))
            .count(plan.batch)
            .seed(plan.seed)
            .skip(skip)
            .cache(cache)
            .build()
    }

    /// FID of the plan's samples at per-step depths `skips` (the round-robin's images).
    pub async fn fid(
        &self,
        gpu: &Gpu,
        plan: &Plan,
        skips: &[usize],
        what: &str,
        on_event: &mut impl FnMut(SearchEvent) -> Result<()>,
    ) -> Result<Scores> {
        let request = self.request(plan, SkipPlan::PerStep(skips.to_vec()), None)?;
        let generated = sample_features(
            gpu,
            self.sampling,
            &request,
            plan.samples,
            plan.batch,
            self.features,
            |done| {
                on_event(SearchEvent::Sampling {
                    what,
                    done,
                    total: plan.samples,
                })
            },
        )
        .await?;
        generated.scores(self.features, self.reference)
    }
}

/// Bisection steps per sampled confirmation at most: a step whose schedule was confirmed
/// before (for another budget, or one the programme returns again) costs no sampling.
const BISECTION_STEPS_PER_CONFIRMATION: usize = 4;

/// Searches the fastest schedule within each of the plan's budgets over the unskipped FID
/// `fid0`: the proxy budget starts at the fastest schedule's proxy and is bisected (geometric
/// mean: proxies span orders of magnitude) on confirmed FIDs, at most `plan.confirmations`
/// newly sampled ones per budget, between the smallest proxy of any one skip and that: an
/// accepted schedule raises the lower end, a rejected one lowers the upper end to its own
/// proxy; a schedule already confirmed is not sampled again.
pub async fn search(
    gpu: &Gpu,
    bench: &Bench<'_>,
    plan: &Plan,
    (costs, proxy): (&[f64], &Proxy),
    fid0: f64,
    on_event: &mut impl FnMut(SearchEvent) -> Result<()>,
) -> Result<Vec<Searched>> {
    let steps = proxy.errors.len();
    let mut confirmed: Vec<(Vec<usize>, f64)> = vec![(vec![0; steps], fid0)];
    let fastest = fastest_within(costs, &proxy.errors, f64::INFINITY);
    // below the smallest proxy of one skipped step only the unskipped schedule fits
    let smallest = proxy
        .errors
        .iter()
        .flatten()
        .copied()
        .filter(|&e| e > 0.0)
        .fold(f64::INFINITY, f64::min);
    let mut found = Vec::new();
    for &budget in &plan.budgets {
        let (mut lo, mut hi) = (smallest, proxy.error_of(&fastest));
        let mut proxy_budget = hi;
        let mut attempts: Vec<Attempt> = Vec::new();
        // schedules sampled for this budget (re-used confirmations are free, up to a bound)
        let mut sampled = 0;
        for _ in 0..BISECTION_STEPS_PER_CONFIRMATION * plan.confirmations {
            if sampled == plan.confirmations {
                break;
            }
            // the first try is the fastest schedule itself (the programme's rounding could miss
            // it at exactly its own proxy)
            let skips = match attempts.is_empty() {
                true => fastest.clone(),
                false => fastest_within(costs, &proxy.errors, proxy_budget),
            };
            let fid = match confirmed.iter().find(|(s, _)| *s == skips) {
                Some((_, fid)) => *fid,
                None => {
                    let what = format!(
                        "budget {budget}: schedule {}",
                        crate::diffusion::join_depths(&skips)
                    );
                    let fid = bench.fid(gpu, plan, &skips, &what, on_event).await?.fid;
                    confirmed.push((skips.clone(), fid));
                    sampled += 1;
                    fid
                }
            };
            let attempt = Attempt {
                budget,
                proxy_budget,
                proxy_error: proxy.error_of(&skips),
                predicted_ms: predicted_ms(costs, &skips),
                fid,
                accepted: fid <= fid0 + budget,
                skips,
            };
            on_event(SearchEvent::Confirmed(&attempt))?;
            let (accepted, first, error) = (attempt.accepted, attempts.is_empty(), attempt.proxy_error);
            attempts.push(attempt);
            if accepted && first {
                break;
            }
            // a rejected schedule is excluded by any budget below its own proxy
            match accepted {
                true => lo = proxy_budget,
                false => hi = error.min(proxy_budget),
            }
            proxy_budget = match lo < hi && lo.is_finite() {
                true => (lo * hi).sqrt(),
                false => hi,
            };
        }
        let chosen = attempts
            .iter()
            .filter(|a| a.accepted)
            .min_by(|a, b| a.predicted_ms.total_cmp(&b.predicted_ms))
            .cloned()
            .unwrap_or_else(|| Attempt {
                budget,
                proxy_budget: 0.0,
                skips: vec![0; steps],
                proxy_error: 0.0,
                predicted_ms: predicted_ms(costs, &vec![0; steps]),
                fid: fid0,
                accepted: true,
            });
        found.push(Searched {
            budget,
            chosen,
            attempts,
        });
    }
    Ok(found)
}

/// Which family an arm of the final comparison belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// k(t) of exponent c (the adaptive U-Net paper's schedules).
    Exponent,
    /// A schedule the search found.
    Searched,
    /// Deep-feature caching alone.
    Caching,
    /// Caching on top of a skip schedule.
    Combined,
}

/// One arm of the final comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Arm {
    pub label: String,
    pub family: Family,
    pub skip: SkipPlan,
    pub cache: Option<FeatureCache>,
}

/// The arms: the c-family, each searched schedule, each caching setting, and caching combined
/// with c = 2 and with the first budget's schedule.
pub fn arms(plan: &Plan, levels: usize, searched: &[Searched]) -> Vec<Arm> {
    let mut arms: Vec<Arm> = plan
        .exponents
        .iter()
        .map(|&c| Arm {
            label: format!("c = {c}"),
            family: Family::Exponent,
            skip: SkipPlan::Exponent(c),
            cache: None,
        })
        .collect();
    for s in searched {
        arms.push(Arm {
            label: format!("searched, F = {}", s.budget),
            family: Family::Searched,
            skip: SkipPlan::PerStep(s.chosen.skips.clone()),
            cache: None,
        });
    }
    let caches: Vec<FeatureCache> = plan
        .caches
        .iter()
        .map(|&(m, d)| FeatureCache::new(m, d, levels))
        .collect();
    for &cache in &caches {
        arms.push(Arm {
            label: format!("cache {}", cache.label()),
            family: Family::Caching,
            skip: SkipPlan::default(),
            cache: Some(cache),
        });
    }
    if let Some(&cache) = caches.first() {
        arms.push(Arm {
            label: format!("cache {} + c = 2", cache.label()),
            family: Family::Combined,
            skip: SkipPlan::Exponent(2.0),
            cache: Some(cache),
        });
        if let Some(s) = searched.first() {
            arms.push(Arm {
                label: format!("cache {} + searched F = {}", cache.label(), s.budget),
                family: Family::Combined,
                skip: SkipPlan::PerStep(s.chosen.skips.clone()),
                cache: Some(cache),
            });
        }
    }
    arms
}

/// An arm's measurements.
#[derive(Clone, Debug, Serialize)]
pub struct ArmResult {
    pub arm: Arm,
    /// Mean levels skipped per step.
    pub mean_skip: f64,
    pub scores: Scores,
    /// Sampling seconds of each round's batch.
    pub batch_seconds: Vec<f64>,
    /// 1 - median over rounds of (this arm's batch time / c = 0's), in percent.
    pub speedup_percent: f64,
    /// Sampling milliseconds per image: c = 0's median batch time per image times this arm's
    /// median per-round ratio.
    pub ms_per_image: f64,
}

/// Samples every arm in turn (after a warm-up of every depth) and scores it; speed-ups are
/// against the arm with `SkipPlan::Exponent(0)` and no cache (the first arm when absent).
pub async fn compare(
    gpu: &Gpu,
    bench: &Bench<'_>,
    plan: &Plan,
    arms: &[Arm],
    proxy: &Proxy,
    on_event: &mut impl FnMut(SearchEvent) -> Result<()>,
) -> Result<Vec<ArmResult>> {
    let rounds = Rounds::from(plan);
    let net = bench.sampling.net;
    warm_up(gpu, &[(net, bench.sampling.model.image_shape())], rounds).await?;
    let contenders = arms
        .iter()
        .map(|arm| {
            Ok(Contender {
                label: arm.label.clone(),
                sampling: bench.sampling,
                request: bench.request(plan, arm.skip.clone(), arm.cache)?,
            })
        })
        .collect::<Result<Vec<Contender>>>()?;
    let generated = sample_in_turn(
        gpu,
        &contenders,
        rounds,
        Some(bench.features),
        |done, total, arm| on_event(SearchEvent::Batch { done, total, arm }),
    )
    .await?;
    let base = arms
        .iter()
        .position(|a| a.cache.is_none() && a.skip == SkipPlan::Exponent(0.0))
        .unwrap_or(0);
    let base_ms = 1e3 * median(&generated[base].batch_seconds) / plan.batch as f64;
    let levels = net.levels();
    arms.iter()
        .zip(&generated)
        .map(|(arm, g)| {
            let ratio = 1.0 - speedup(&g.batch_seconds, &generated[base].batch_seconds);
            let mean_skip = proxy
                .times
                .iter()
                .enumerate()
                .map(|(i, &t)| arm.skip.skip_at(levels, i, t) as f64)
                .sum::<f64>()
                / proxy.times.len().max(1) as f64;
            Ok(ArmResult {
                arm: arm.clone(),
                mean_skip,
                scores: g.scores(bench.features, bench.reference)?,
                batch_seconds: g.batch_seconds.clone(),
                speedup_percent: 100.0 * (1.0 - ratio),
                ms_per_image: base_ms * ratio,
            })
        })
        .collect()
}

/// Where a search ran: what its schedule files record beside the depths.
#[derive(Clone, Debug, Serialize)]
pub struct Origin {
    /// The checkpoint searched on.
    pub model: String,
    pub metric: String,
    /// The unskipped model's FID at the plan's samples.
    pub fid_unskipped: f64,
    pub date: String,
}

/// The schedule file of a search result (`costs` per depth give its predicted and unskipped
/// network times).
pub fn schedule_file(
    plan: &Plan,
    (costs, proxy): (&[f64], &Proxy),
    levels: usize,
    searched: &Searched,
    origin: &Origin,
) -> SkipSchedule {
    let chosen = &searched.chosen;
    SkipSchedule {
        search: Some(SearchRecord {
            model: origin.model.clone(),
            budget: searched.budget,
            samples: plan.samples,
            metric: origin.metric.clone(),
            fid_unskipped: origin.fid_unskipped,
            fid: chosen.fid,
            proxy_error: chosen.proxy_error,
            proxy_budget: chosen.proxy_budget,
            predicted_ms: chosen.predicted_ms,
            unskipped_ms: predicted_ms(costs, &vec![0; chosen.skips.len()]),
            date: origin.date.clone(),
        }),
        ..SkipSchedule::new(plan.sampler, levels, chosen.skips.clone(), proxy.times.clone())
    }
}
