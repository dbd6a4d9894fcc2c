//! Per-step skip schedules and deep-feature caching: the search's dynamic programme against
//! brute force, searched schedules on a tiny U-Net's measured costs and proxy (never slower than
//! c = 0, within the proxy budget), the whole experiment at toy size, caching every call bit-
//! identical to no caching, kept features reused exactly m - 1 times (dispatches counted), and
//! the errors of bad schedules and cache settings.

use crate::common::{gpu, own_gpu, rng};
use crate::eval::pooled_pixel_tracker;
use rand::Rng as _;
use std::cell::RefCell;
use wgdiff::diffusion::{
    Denoiser, FeatureCache, NetDenoiser, Process, SampleOptions, Sampler, SkipPlan, SkipSchedule, Spacing,
};
use wgdiff::experiment::skip_search::{
    arms, compare, fastest_within, measure_depth_costs, measure_proxy, predicted_ms, search, Bench, Family,
    Origin, Plan,
};
use wgdiff::experiment::skip_search_report::Report;
use wgdiff::experiment::{write_report, ExperimentReport, Header};
use wgdiff::models::{DeepFeatures, DiffusionNet, ModelConfig, UNetConfig};
use wgdiff::ops::random::Rng;
use wgdiff::pipeline::SampleRequest;
use wgdiff::pipeline::Sampling;
use wgdiff::{Gpu, Result, Tensor};

/// The tiny U-Net (3 levels) with weights from `seed`, and its config and process.
fn tiny_unet(gpu: &Gpu, seed: u64) -> (Box<dyn DiffusionNet>, ModelConfig, Process) {
    let config = ModelConfig::UNet(UNetConfig::tiny());
    (config.build(gpu, seed).unwrap(), config, Process::ddpm())
}

fn ddim() -> Sampler {
    Sampler::Ddim {
        eta: 0.0,
        spacing: Spacing::Uniform,
    }
}

/// Every schedule of `steps` depths below `levels`, by counting in base `levels`.
fn every_schedule(steps: usize, levels: usize) -> impl Iterator<Item = Vec<usize>> {
    (0..levels.pow(steps as u32)).map(move |mut code| {
        (0..steps)
            .map(|_| {
                let k = code % levels;
                code /= levels;
                k
            })
            .collect()
    })
}

#[test]
fn the_dynamic_programme_finds_the_fastest_schedule_within_the_budget() {
    let mut r = rng();
    for _ in 0..20 {
        let (steps, levels) = (6, 3);
        // costs fall with depth (with noise that can break the order), errors grow with it
        let costs: Vec<f64> = (0..levels)
            .map(|k| 10.0 - 3.0 * k as f64 + r.random_range(-1.0..1.0))
            .collect();
        let errors: Vec<Vec<f64>> = (0..steps)
            .map(|_| (0..levels).map(|k| k as f64 * r.random_range(0.0..1.0)).collect())
            .collect();
        let error_of = |s: &[usize]| s.iter().enumerate().map(|(i, &k)| errors[i][k]).sum::<f64>();
        let best_within = |budget: f64| {
            every_schedule(steps, levels)
                .filter(|s| error_of(s) <= budget)
                .map(|s| predicted_ms(&costs, &s))
                .fold(f64::INFINITY, f64::min)
        };
        let total: f64 = errors.iter().map(|e| e.iter().cloned().fold(0.0, f64::max)).sum();
        for budget in [0.0, 0.1 * total, 0.4 * total, total, f64::INFINITY] {
            let skips = fastest_within(&costs, &errors, budget);
            assert_eq!(skips.len(), steps);
            assert!(skips.iter().all(|&k| k < levels), "{skips:?}");
            let (cost, error) = (predicted_ms(&costs, &skips), error_of(&skips));
            assert!(error <= budget, "budget {budget}: {skips:?} has proxy {error}");
            // each step's error is rounded up by at most 1/4096 of the budget, so every schedule
            // within budget (1 - steps/4096) is in reach and the programme is at least as fast
            let slack = if budget.is_finite() {
                budget * (1.0 - steps as f64 / 4096.0)
            } else {
                budget
            };
            assert!(
                cost <= best_within(slack) + 1e-9 && cost >= best_within(budget) - 1e-9,
                "budget {budget}: {skips:?} costs {cost}, brute force {} .. {}",
                best_within(budget),
                best_within(slack)
            );
        }
    }
}

#[test]
fn a_searched_schedule_is_never_slower_than_c0_and_obeys_the_proxy_budget() {
    let gpu = gpu();
    let (net, config, process) = tiny_unet(gpu, 3);
    let sampling = Sampling {
        net: net.as_ref(),
        model: &config,
        process: &process,
    };
    let request = SampleRequest::builder(&config, &process)
        .sampler(ddim())
        .steps(Some(6))
        .count(2)
        .seed(1)
        .build()
        .unwrap();
    let costs = pollster::block_on(measure_depth_costs(gpu, sampling, &request, 3)).unwrap();
    assert_eq!(costs.len(), 3);
    assert!(costs.iter().all(|&c| c > 0.0 && c.is_finite()), "{costs:?}");
    let proxy = pollster::block_on(measure_proxy(gpu, sampling, &request)).unwrap();
    assert_eq!((proxy.errors.len(), proxy.times.len()), (6, 6));
    for (i, e) in proxy.errors.iter().enumerate() {
        assert_eq!(e.len(), 3);
        assert_eq!(e[0], 0.0, "step {i}: the full network against itself");
        assert!(
            e[1..].iter().all(|&e| e > 0.0 && e.is_finite()),
            "step {i}: skipping a random network's levels changes x_0: {e:?}"
        );
    }
    assert!(proxy.times.windows(2).all(|w| w[0] > w[1]) && proxy.times[0] > 0.9);
    let unskipped = predicted_ms(&costs, &[0; 6]);
    let fastest = fastest_within(&costs, &proxy.errors, f64::INFINITY);
    let ceiling = proxy.error_of(&fastest);
    for budget in [0.0, 0.05 * ceiling, 0.3 * ceiling, ceiling, f64::INFINITY] {
        let skips = fastest_within(&costs, &proxy.errors, budget);
        assert!(
            predicted_ms(&costs, &skips) <= unskipped,
            "budget {budget}: {skips:?} predicted slower than c = 0 ({costs:?})"
        );
        assert!(proxy.error_of(&skips) <= budget, "budget {budget}: {skips:?}");
    }
    assert_eq!(fastest_within(&costs, &proxy.errors, 0.0), vec![0; 6]);
}

#[test]
fn the_skip_search_experiment_fills_its_tables_plot_and_schedule_files() {
    let gpu = gpu();
    let (net, config, process) = tiny_unet(gpu, 4);
    let tracker = pooled_pixel_tracker();
    let bench = Bench {
        sampling: Sampling {
            net: net.as_ref(),
            model: &config,
            process: &process,
        },
        features: tracker.features.as_ref(),
        reference: &tracker.reference,
    };
    let plan = Plan {
        samples: 3,
        batch: 2,
        sampler: ddim(),
        steps: 4,
        budgets: vec![1.0, 1e6],
        exponents: vec![0.0, 2.0],
        caches: vec![(2, None)],
        cost_rounds: 2,
        confirmations: 3,
        seed: 7,
    };
    plan.validate().unwrap();
    let mut events = 0;
    let mut on_event = |_: wgdiff::experiment::skip_search::SearchEvent| {
        events += 1;
        Ok(())
    };
    let (costs, proxy, fid0, searched, results) = pollster::block_on(async {
        let probe = bench.request(&plan, SkipPlan::default(), None).unwrap();
        let costs = measure_depth_costs(gpu, bench.sampling, &probe, plan.cost_rounds).await?;
        let proxy = measure_proxy(gpu, bench.sampling, &probe).await?;
        let fid0 = bench
            .fid(gpu, &plan, &[0; 4], "unskipped", &mut on_event)
            .await?
            .fid;
        let searched = search(gpu, &bench, &plan, (&costs, &proxy), fid0, &mut on_event).await?;
        let arms = arms(&plan, 3, &searched);
        let results = compare(gpu, &bench, &plan, &arms, &proxy, &mut on_event).await?;
        Ok::<_, wgdiff::Error>((costs, proxy, fid0, searched, results))
    })
    .unwrap();
    assert!(events > 0);
    assert_eq!(searched.len(), 2);
    for s in &searched {
        let mut distinct: Vec<&Vec<usize>> = s.attempts.iter().map(|a| &a.skips).collect();
        distinct.sort();
        distinct.dedup();
        assert!(
            !s.attempts.is_empty() && distinct.len() <= plan.confirmations,
            "at most {} schedules sampled per budget: {s:?}",
            plan.confirmations
        );
        let chosen = &s.chosen;
        assert!(chosen.accepted && chosen.fid <= fid0 + s.budget, "{s:?}");
        assert!(
            chosen.predicted_ms <= predicted_ms(&costs, &[0; 4]) + 1e-9,
            "{s:?}"
        );
        assert!(
            chosen.proxy_error <= chosen.proxy_budget || chosen.skips == [0; 4],
            "{s:?}"
        );
    }
    // a budget no FID can break takes the fastest schedule at its first try
    let loose = &searched[1];
    assert_eq!(loose.attempts.len(), 1);
    assert_eq!(
        loose.chosen.skips,
        fastest_within(&costs, &proxy.errors, f64::INFINITY)
    );
    // c = 0, c = 2, two searched, one cache, cache + c = 2, cache + the first schedule
    assert_eq!(results.len(), 7);
    let families: Vec<Family> = results.iter().map(|r| r.arm.family).collect();
    assert_eq!(
        families,
        [
            Family::Exponent,
            Family::Exponent,
            Family::Searched,
            Family::Searched,
            Family::Caching,
            Family::Combined,
            Family::Combined
        ]
    );
    assert_eq!(results[0].speedup_percent, 0.0);
    for r in &results {
        assert_eq!(r.batch_seconds.len(), 2, "{r:?}");
        assert!(r.scores.fid.is_finite() && r.ms_per_image > 0.0, "{r:?}");
    }
    // the searched arms draw the images their confirmation scored (same seeds and batches; the
    // autotuner may run other kernels while it measures a new shape: rounding, no more)
    assert!(
        (results[2].scores.fid - searched[0].chosen.fid).abs() <= 1e-3 * searched[0].chosen.fid.max(1.0),
        "{} vs {}",
        results[2].scores.fid,
        searched[0].chosen.fid
    );

    let out = std::env::temp_dir().join(format!("wgdiff-skip-search-{}", std::process::id()));
    let report = Report {
        header: Header {
            date: "2026-11-26".into(),
            device: "test device".into(),
            command: "test".into(),
            wall_seconds: 1.0,
        },
        plan: plan.clone(),
        origin: Origin {
            model: "tiny".into(),
            metric: "pooled-FID".into(),
            fid_unskipped: fid0,
            date: "2026-11-26".into(),
        },
        levels: 3,
        costs_ms: costs,
        proxy,
        searched: searched.clone(),
        arms: results,
    };
    let written: Vec<String> = write_report(&report, &out)
        .unwrap()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    for name in [
        "skip-search.md",
        "skip-search.json",
        "time-vs-fid.png",
        "schedule-budget-1.json",
    ] {
        assert!(written.iter().any(|w| w == name), "{written:?}");
        assert!(out.join(name).metadata().unwrap().len() > 100, "{name}");
    }
    let md = report.markdown();
    assert!(
        md.contains("Which wins where") && md.contains("searched, F = 1"),
        "{md}"
    );
    let schedule = SkipSchedule::load(&out.join("schedule-budget-1.json")).unwrap();
    assert_eq!(schedule.skips, searched[0].chosen.skips);
    assert_eq!(schedule.sampler, ddim());
    let record = schedule.search.unwrap();
    assert_eq!((record.budget, record.samples), (1.0, 3));
    std::fs::remove_dir_all(&out).ok();
}

/// Samples `count` images of the tiny U-Net with DDPM's ancestral sampler (seeded).
fn draw(
    gpu: &Gpu,
    net: &dyn DiffusionNet,
    steps: usize,
    skip: SkipPlan,
    cache: Option<FeatureCache>,
) -> Vec<f32> {
    let _g = wgdiff::no_grad();
    let options = SampleOptions {
        steps: Some(steps),
        skip,
        cache,
        on_step: None,
        clip_x0: Some(1.0),
        ..Default::default()
    };
    let out = Sampler::Ddpm
        .run(
            &Process::ddpm(),
            &NetDenoiser::new(net),
            gpu,
            &[2, 1, 28, 28],
            &mut Rng::new(11),
            options,
        )
        .unwrap();
    assert_eq!(out.cache.reuses, 0);
    out.samples.to_vec().unwrap()
}

#[test]
fn caching_every_call_gives_the_same_samples_bit_for_bit() {
    let gpu = gpu();
    let (net, _, _) = tiny_unet(gpu, 5);
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    for skip in [
        SkipPlan::default(),
        SkipPlan::Exponent(2.0),
        SkipPlan::PerStep(vec![2, 1, 0, 1, 0]),
    ] {
        let plain = bits(draw(gpu, net.as_ref(), 5, skip.clone(), None));
        for depth in [1, 2] {
            let cache = FeatureCache { interval: 1, depth };
            let cached = bits(draw(gpu, net.as_ref(), 5, skip.clone(), Some(cache)));
            assert!(
                plain == cached,
                "{skip:?} with m = 1, d = {depth} changed the samples"
            );
        }
    }
}

/// What a network call did with the deep features, and the kernels it dispatched.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Call {
    Plain(usize),
    Capture(usize),
    Reuse(usize),
}

/// Counts each network call's dispatches with the profiler.
struct CountingDenoiser<'a> {
    inner: NetDenoiser<'a>,
    gpu: &'a Gpu,
    calls: RefCell<Vec<Call>>,
}

impl CountingDenoiser<'_> {
    fn counted<T>(&self, run: impl FnOnce() -> Result<T>) -> Result<(T, usize)> {
        self.gpu.profiler().start()?;
        let out = run()?;
        let profile = self.gpu.profiler().stop_blocking()?;
        Ok((out, profile.records.len()))
    }
}

impl Denoiser for CountingDenoiser<'_> {
    fn predict(&self, x: &Tensor, t: f32, skip: usize) -> Result<Tensor> {
        let (out, n) = self.counted(|| self.inner.predict(x, t, skip))?;
        self.calls.borrow_mut().push(Call::Plain(n));
        Ok(out)
    }

    fn predict_deep(
        &self,
        x: &Tensor,
        t: f32,
        skip: usize,
        deep: DeepFeatures,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let (out, n) = self.counted(|| self.inner.predict_deep(x, t, skip, deep))?;
        self.calls.borrow_mut().push(match deep {
            DeepFeatures::None => Call::Plain(n),
            DeepFeatures::Capture(_) => Call::Capture(n),
            DeepFeatures::Reuse(_) => Call::Reuse(n),
        });
        Ok(out)
    }

    fn levels(&self) -> usize {
        self.inner.levels()
    }
}

#[test]
fn kept_features_are_reused_exactly_m_minus_one_times_by_counted_dispatches() {
    // a device of its own: the profiler would record other tests' work on the shared one
    let gpu = own_gpu();
    let (net, _, _) = tiny_unet(&gpu, 6);
    let _g = wgdiff::no_grad();
    let run = |steps: usize, skip: SkipPlan, cache: FeatureCache| {
        let denoiser = CountingDenoiser {
            inner: NetDenoiser::new(net.as_ref()),
            gpu: &gpu,
            calls: RefCell::new(Vec::new()),
        };
        let options = SampleOptions {
            steps: Some(steps),
            skip,
            cache: Some(cache),
            on_step: None,
            clip_x0: Some(1.0),
            ..Default::default()
        };
        let out = ddim()
            .run(
                &Process::ddpm(),
                &denoiser,
                &gpu,
                &[2, 1, 28, 28],
                &mut Rng::new(3),
                options,
            )
            .unwrap();
        (out.cache, denoiser.calls.take())
    };
    // one untimed pass compiles every kernel the counted runs use
    run(
        4,
        SkipPlan::default(),
        FeatureCache {
            interval: 2,
            depth: 2,
        },
    );
    for (m, depth) in [(3, 2), (2, 1), (4, 2)] {
        let steps = 10;
        let (counts, calls) = run(steps, SkipPlan::default(), FeatureCache { interval: m, depth });
        assert_eq!(calls.len(), steps);
        let full = match calls[0] {
            Call::Capture(n) => n,
            other => panic!("m = {m}: the first call must compute the features, got {other:?}"),
        };
        let shallow = match calls[1] {
            Call::Reuse(n) => n,
            other => panic!("m = {m}: the second call must reuse them, got {other:?}"),
        };
        assert!(
            shallow < full,
            "m = {m}, d = {depth}: reuse {shallow} vs full {full} dispatches"
        );
        for (i, call) in calls.iter().enumerate() {
            let want = match i % m {
                0 => Call::Capture(full),
                _ => Call::Reuse(shallow),
            };
            assert_eq!(*call, want, "m = {m}, d = {depth}, call {i}: {calls:?}");
        }
        assert_eq!(counts.refreshes, steps.div_ceil(m));
        assert_eq!(counts.reuses, steps - steps.div_ceil(m));
    }
    // with skipping on top (d = 1): a step that skips more than d levels runs as it says and
    // drops what was kept; one that skips d levels reuses; nothing kept is never reused
    let skips = vec![2, 1, 0, 2, 0, 1, 1, 0];
    let (counts, calls) = run(
        8,
        SkipPlan::PerStep(skips),
        FeatureCache {
            interval: 3,
            depth: 1,
        },
    );
    let kinds: Vec<&str> = calls
        .iter()
        .map(|c| match c {
            Call::Plain(_) => "plain",
            Call::Capture(_) => "capture",
            Call::Reuse(_) => "reuse",
        })
        .collect();
    assert_eq!(
        kinds,
        ["plain", "plain", "capture", "plain", "capture", "reuse", "reuse", "capture"]
    );
    assert_eq!((counts.refreshes, counts.reuses), (3, 2));
}

#[test]
fn bad_schedules_and_cache_settings_are_refused_with_the_fix() {
    let gpu = gpu();
    let (net, _, _) = tiny_unet(gpu, 7);
    let _g = wgdiff::no_grad();
    let attempt = |steps: usize, skip: SkipPlan, cache: Option<FeatureCache>, sampler: Sampler| {
        let options = SampleOptions {
            steps: Some(steps),
            skip,
            cache,
            on_step: None,
            clip_x0: None,
            ..Default::default()
        };
        match sampler.run(
            &Process::ddpm(),
            &NetDenoiser::new(net.as_ref()),
            gpu,
            &[1, 1, 28, 28],
            &mut Rng::new(0),
            options,
        ) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    };
    let err = attempt(5, SkipPlan::PerStep(vec![1, 0, 0]), None, Sampler::Ddpm);
    assert!(err.contains("3 steps") && err.contains("--steps 3"), "{err}");
    let err = attempt(3, SkipPlan::PerStep(vec![1, 3, 0]), None, Sampler::Ddpm);
    assert!(
        err.contains("skips 3 levels at step 1") && err.contains("skip 0..2"),
        "{err}"
    );
    let rk45 = "ode-rk45".parse().unwrap();
    let err = attempt(3, SkipPlan::PerStep(vec![1, 0, 0]), None, rk45);
    assert!(err.contains("fixed number of steps"), "{err}");
    for (cache, says) in [
        (
            FeatureCache {
                interval: 0,
                depth: 1,
            },
            "at least 1",
        ),
        (
            FeatureCache {
                interval: 2,
                depth: 0,
            },
            "between 1 and 2",
        ),
        (
            FeatureCache {
                interval: 2,
                depth: 3,
            },
            "between 1 and 2",
        ),
    ] {
        let err = attempt(3, SkipPlan::default(), Some(cache), Sampler::Ddpm);
        assert!(err.contains(says), "{cache:?}: {err}");
    }
    // reused features of the wrong shape name both shapes
    let x = Tensor::zeros(gpu, &[1, 1, 28, 28], wgdiff::DType::F32).unwrap();
    let wrong = Tensor::zeros(gpu, &[1, 3, 14, 14], wgdiff::DType::F32).unwrap();
    let err = net
        .forward_deep(&x, &[5.0], None, 1, DeepFeatures::Reuse(&wrong))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("[1, 3, 14, 14]") && err.contains("[1, 8, 14, 14]"),
        "{err}"
    );
    let err = net
        .forward_deep(&x, &[5.0], None, 2, DeepFeatures::Capture(1))
        .unwrap_err()
        .to_string();
    assert!(err.contains("skipping fewer levels"), "{err}");

    // schedule files: a wrong format, a depth past the levels, times of another length
    for (json, says) in [
        (
            r#"{"format": "x", "sampler": {"name": "ddpm"}, "levels": 3, "skips": [1]}"#,
            "expected \"wgdiff skip schedule\"",
        ),
        (
            r#"{"format": "wgdiff skip schedule", "sampler": {"name": "ddpm"}, "levels": 3, "skips": [1, 3]}"#,
            "skips 3 levels",
        ),
        (
            r#"{"format": "wgdiff skip schedule", "sampler": {"name": "ddpm"}, "levels": 3, "skips": [1, 2], "times": [1.0]}"#,
            "1 times for 2 steps",
        ),
        (
            r#"{"format": "wgdiff skip schedule", "levels": 3, "skips": [1]}"#,
            "missing field `sampler`",
        ),
        (
            r#"{"format": "wgdiff skip schedule", "sampler": {"name": "ddpm"}, "levels": 3, "skips": []}"#,
            "`skips` is empty",
        ),
    ] {
        let err = SkipSchedule::from_json(json.as_bytes(), "test.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("test.json") && err.contains(says), "{json}: {err}");
    }
    let ok = SkipSchedule::from_json(
        br#"{"format": "wgdiff skip schedule", "sampler": {"name": "ddpm"}, "levels": 3, "skips": [2, 1, 0]}"#,
        "hand.json",
    )
    .unwrap();
    assert_eq!(ok.plan(), SkipPlan::PerStep(vec![2, 1, 0]));
    let err = ok.check_levels(4, "hand.json").unwrap_err().to_string();
    assert!(
        err.contains("3 levels") && err.contains("this one has 4"),
        "{err}"
    );
}
