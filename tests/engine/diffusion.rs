//! The diffusion pieces around the samplers: training losses against their exact targets,
//! time sampling, skip counts seen by the network and callback, guidance, configs and errors.

use crate::common::{gpu, normal_vec, rng, upload};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::cell::RefCell;
use wgdiff::diffusion::{
    guide, skip_intervals, skip_levels, BetaSchedule, Denoiser, Guided, Objective, Process, SampleOptions,
    Sampler, SkipPlan, Spacing, Step, Weighting,
};
use wgdiff::ops::random::Rng;
use wgdiff::{DType, Error, Result, Tensor};

const B: usize = 512;

fn processes() -> Vec<Process> {
    let vp = |objective| Process::Vp {
        schedule: BetaSchedule::COSINE,
        steps: 1000,
        objective,
    };
    vec![
        vp(Objective::Eps),
        vp(Objective::X0),
        vp(Objective::V),
        Process::ve(),
        Process::ncsn(),
    ]
}

/// A network that knows the clean batch: it returns the exact target of each objective, so
/// the loss must vanish.
fn oracle<'a>(process: &'a Process, x0: &'a Tensor) -> impl Fn(&Tensor, &[f32]) -> Result<Tensor> + 'a {
    move |x_t, t| {
        let marginals = process.marginals()?;
        let (x0v, xtv) = (x0.to_vec()?, x_t.to_vec()?);
        let per = x0v.len() / t.len();
        let out: Vec<f32> = (0..x0v.len())
            .map(|i| {
                let level = marginals.level(t[i / per]);
                let (a, s) = (level.alpha, level.std);
                let (x0, xt) = (x0v[i] as f64, xtv[i] as f64);
                let eps = (xt - a * x0) / s;
                (match process {
                    Process::Vp {
                        objective: Objective::Eps,
                        ..
                    } => eps,
                    Process::Vp {
                        objective: Objective::X0,
                        ..
                    } => x0,
                    Process::Vp {
                        objective: Objective::V,
                        ..
                    } => a * eps - s * x0,
                    _ => -eps / s,
                }) as f32
            })
            .collect();
        Tensor::from_f32(x_t.gpu(), x_t.shape(), &out)
    }
}

#[test]
fn losses_vanish_for_the_exact_target_and_match_the_noise_energy_for_zero() {
    let mut r = rng();
    let x0 = upload(&[B, 1, 2, 2], &normal_vec(&mut r, B * 4), DType::F32);
    for process in processes() {
        let mut times = StdRng::seed_from_u64(1);
        let exact = process
            .loss(
                &oracle(&process, &x0),
                &x0,
                Weighting::Uniform,
                &mut times,
                &mut Rng::new(2),
            )
            .unwrap()
            .item()
            .unwrap();
        assert!(
            exact.abs() < 1e-3,
            "{process:?}: loss of the exact target {exact}"
        );
        // zero output, eps objective: E z² = 1; score processes: E |z|² = 4 per example (x½ for NCSN)
        let zero = |x: &Tensor, _: &[f32]| Tensor::zeros(x.gpu(), x.shape(), DType::F32);
        let loss = process
            .loss(&zero, &x0, Weighting::Uniform, &mut times, &mut Rng::new(3))
            .unwrap()
            .item()
            .unwrap();
        let want = match process {
            Process::Vp {
                objective: Objective::Eps,
                ..
            } => Some(1.0),
            Process::Ve { .. } => Some(4.0),
            Process::Ncsn { .. } => Some(2.0),
            _ => None,
        };
        if let Some(want) = want {
            // 4 standard errors of a mean of B*4 squared normals (variance 2 each)
            let tol = 4.0 * want * (2.0 / (B * 4) as f32).sqrt();
            assert!(
                (loss - want).abs() < tol,
                "{process:?}: zero-network loss {loss}, want {want}"
            );
        }
    }
}

#[test]
fn min_snr_weighting_scales_each_timestep() {
    // x0 = 0 and an identity network: every objective's squared error is c² z² for a
    // nonzero c, and the same noise makes the weighted / unweighted ratio exactly the weight
    let x0 = Tensor::zeros(gpu(), &[B, 2], DType::F32).unwrap();
    let identity = |x: &Tensor, _: &[f32]| Ok(x.clone());
    let gamma = 5.0;
    for (objective, weight) in [
        (
            Objective::Eps,
            Box::new(|snr: f64| snr.min(gamma) / snr) as Box<dyn Fn(f64) -> f64>,
        ),
        (Objective::X0, Box::new(|snr: f64| snr.min(gamma))),
        (Objective::V, Box::new(|snr: f64| snr.min(gamma) / (snr + 1.0))),
    ] {
        let process = Process::Vp {
            schedule: BetaSchedule::LINEAR,
            steps: 1000,
            objective,
        };
        let marginals = process.marginals().unwrap();
        for t in [10.0f32, 300.0, 900.0] {
            let level = marginals.level(t);
            let snr = (level.alpha / level.std).powi(2);
            let times = vec![t; B];
            let loss = |w| {
                process
                    .loss_at(&identity, &x0, &times, w, &mut Rng::new(5))
                    .unwrap()
                    .item()
                    .unwrap()
            };
            let ratio = loss(Weighting::MinSnr { gamma: gamma as f32 }) / loss(Weighting::Uniform);
            let want = weight(snr) as f32;
            assert!(
                (ratio - want).abs() <= 1e-4 * want.max(1.0),
                "{objective:?} t={t}: {ratio} vs {want}"
            );
        }
    }
    let err = Process::ve().loss_at(
        &identity,
        &x0,
        &[0.5; B],
        Weighting::MinSnr { gamma: 5.0 },
        &mut Rng::new(5),
    );
    assert!(matches!(err, Err(Error::Diffusion(m)) if m.contains("VP")));
}

#[test]
fn loss_gradients_reach_the_network() {
    let w = Tensor::from_f32(gpu(), &[1, 2], &[0.5, -0.25])
        .unwrap()
        .requires_grad();
    let net = |x: &Tensor, _: &[f32]| x.mul(&w);
    let x0 = Tensor::from_f32(gpu(), &[4, 2], &[0.1, 0.2, 0.3, 0.4, -0.1, -0.2, -0.3, -0.4]).unwrap();
    let loss = Process::ddpm().loss_at(
        &net,
        &x0,
        &[0.0, 10.0, 500.0, 999.0],
        Weighting::Uniform,
        &mut Rng::new(1),
    );
    wgdiff::backward(&loss.unwrap()).unwrap();
    let grad = w.grad().unwrap().to_vec().unwrap();
    assert!(grad.iter().all(|g| g.is_finite() && *g != 0.0), "{grad:?}");
}

#[test]
fn times_are_reproducible_and_stay_in_their_skip_interval() {
    for process in processes() {
        let marginals = process.marginals().unwrap();
        let draw = |seed| {
            process
                .sample_times(&mut StdRng::seed_from_u64(seed), 256, 0.0..1.0)
                .unwrap()
        };
        assert_eq!(draw(9), draw(9));
        for interval in skip_intervals(3, 2.0) {
            let t = process
                .sample_times(&mut StdRng::seed_from_u64(1), 256, interval.start..interval.end)
                .unwrap();
            for ti in t {
                let k = skip_levels(3, marginals.normalized_time(ti), 2.0);
                assert_eq!(k, interval.skip, "{process:?}: t = {ti} in {interval:?}");
            }
        }
    }
    let empty = Process::ncsn().sample_times(&mut StdRng::seed_from_u64(1), 4, 0.3..0.31);
    assert!(matches!(empty, Err(Error::Diffusion(_))));
    let wrong_len = Process::ddpm().loss_at(
        &|x: &Tensor, _: &[f32]| Ok(x.clone()),
        &Tensor::zeros(gpu(), &[4, 2], DType::F32).unwrap(),
        &[1.0],
        Weighting::Uniform,
        &mut Rng::new(0),
    );
    assert!(matches!(wrong_len, Err(Error::Shape { .. })));
}

/// Records the skip count of every call; predicts zero noise.
struct SkipRecorder {
    seen: RefCell<Vec<usize>>,
}

impl Denoiser for SkipRecorder {
    fn predict(&self, x: &Tensor, _t: f32, skip: usize) -> Result<Tensor> {
        self.seen.borrow_mut().push(skip);
        Tensor::zeros(x.gpu(), x.shape(), DType::F32)
    }
    fn levels(&self) -> usize {
        3
    }
}

#[test]
fn skip_schedule_reaches_the_network_and_the_callback() {
    // DDIM, 10 uniform steps: timesteps 999, 888, ..., 111, 0 -> normalised t = 1, 8/9, ..., 0;
    // k = min(2, floor(3 - 3 (1-t)²)): 2 down to t = 4/9 (3 - 3·25/81 = 2.07), then 1 at
    // 3/9 (1.67) and 2/9 (1.19), 0 at 1/9 (0.63) and 0.
    let want = vec![2, 2, 2, 2, 2, 2, 1, 1, 0, 0];
    let recorder = SkipRecorder {
        seen: RefCell::new(Vec::new()),
    };
    let mut reported = Vec::new();
    let mut on_step = |step: &Step| -> Result<()> {
        assert!(step.x0.is_some());
        reported.push(step.skip);
        Ok(())
    };
    let options = SampleOptions {
        steps: Some(10),
        skip: SkipPlan::Exponent(2.0),
        cache: None,
        on_step: Some(&mut on_step),
        clip_x0: None,
        ..Default::default()
    };
    let ddim = Sampler::Ddim {
        eta: 0.0,
        spacing: Spacing::Uniform,
    };
    let out = ddim
        .run(
            &Process::ddpm(),
            &recorder,
            gpu(),
            &[8, 2],
            &mut Rng::new(0),
            options,
        )
        .unwrap();
    assert_eq!(out.evaluations, 10);
    assert_eq!(recorder.seen.borrow().clone(), want);
    assert_eq!(reported, want);
    // without an exponent nothing is skipped
    recorder.seen.borrow_mut().clear();
    let options = SampleOptions {
        steps: Some(10),
        ..Default::default()
    };
    ddim.run(
        &Process::ddpm(),
        &recorder,
        gpu(),
        &[8, 2],
        &mut Rng::new(0),
        options,
    )
    .unwrap();
    assert!(recorder.seen.borrow().iter().all(|&k| k == 0));
}

#[test]
fn guidance_combines_conditional_and_unconditional_outputs() {
    let constant =
        |v: f32| move |x: &Tensor, _t: f32, _skip: usize| Tensor::full(x.gpu(), x.shape(), v, DType::F32);
    let x = Tensor::zeros(gpu(), &[3, 2], DType::F32).unwrap();
    for (w, want) in [(0.0, 1.0), (1.0, 3.0), (3.0, 7.0)] {
        let guided = Guided {
            conditional: constant(3.0),
            unconditional: constant(1.0),
            scale: w,
        };
        let out = guided.predict(&x, 0.5, 0).unwrap().to_vec().unwrap();
        assert!(out.iter().all(|&v| (v - want).abs() < 1e-6), "w = {w}: {out:?}");
    }
    let u = Tensor::from_f32(gpu(), &[2], &[1.0, -1.0]).unwrap();
    let c = Tensor::from_f32(gpu(), &[2], &[2.0, 0.0]).unwrap();
    assert_eq!(guide(&u, &c, 2.0).unwrap().to_vec().unwrap(), vec![3.0, 1.0]);
}

#[test]
fn configs_round_trip_and_names_parse() {
    for process in processes() {
        let json = serde_json::to_string(&process).unwrap();
        assert_eq!(serde_json::from_str::<Process>(&json).unwrap(), process, "{json}");
    }
    let json = serde_json::to_string(&Process::ddpm()).unwrap();
    assert!(
        json.contains("\"kind\":\"vp\"") && json.contains("\"objective\":\"eps\""),
        "{json}"
    );
    for name in Sampler::NAMES {
        let sampler: Sampler = name.parse().unwrap();
        assert_eq!(sampler.name(), name);
        let json = serde_json::to_string(&sampler).unwrap();
        assert!(json.contains(&format!("\"name\":\"{name}\"")), "{json}");
        assert_eq!(serde_json::from_str::<Sampler>(&json).unwrap(), sampler);
    }
    let unknown = "ddim2".parse::<Sampler>().unwrap_err().to_string();
    assert!(unknown.contains("dpm-solver++"), "{unknown}");
}

#[test]
fn samplers_name_the_processes_they_fit() {
    let zero = |x: &Tensor, _t: f32, _skip: usize| Tensor::zeros(x.gpu(), x.shape(), DType::F32);
    let err = Sampler::Ddim {
        eta: 0.0,
        spacing: Spacing::Uniform,
    }
    .run(
        &Process::ve(),
        &zero,
        gpu(),
        &[4, 2],
        &mut Rng::new(0),
        SampleOptions::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("`ddim`") && err.contains("ve") && err.contains("ode-rk45") && err.contains("ald"),
        "{err}"
    );
    let err = Sampler::Ald {
        steps_per_level: 1,
        step_size: 1e-5,
    }
    .run(
        &Process::ncsn(),
        &zero,
        gpu(),
        &[4, 2],
        &mut Rng::new(0),
        SampleOptions {
            steps: Some(3),
            ..Default::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("10 trained levels"), "{err}");
    let bad = Process::Ve {
        sigma: 0.5,
        eps: 1e-5,
    }
    .marginals()
    .err()
    .unwrap()
    .to_string();
    assert!(bad.contains("sigma > 1"), "{bad}");
}

#[test]
fn clip_x0_keeps_data_predictions_in_range() {
    // A denoiser whose noise prediction is far off: unclipped DDIM leaves [-1, 1], clipped
    // DDIM / DPM-Solver++ end on a clamped x0.
    let wild = |x: &Tensor, _t: f32, _skip: usize| x.mul_scalar(-3.0);
    let process = Process::ddpm();
    let run = |sampler: &str, clip: Option<f32>| -> Vec<f32> {
        let sampler: Sampler = sampler.parse().unwrap();
        let options = SampleOptions {
            steps: Some(8),
            clip_x0: clip,
            ..SampleOptions::default()
        };
        let mut noise = Rng::new(5);
        let out = sampler
            .run(&process, &wild, gpu(), &[64, 4], &mut noise, options)
            .unwrap();
        out.samples.to_vec().unwrap()
    };
    let free = run("ddim", None);
    assert!(
        free.iter().any(|v| v.abs() > 1.5),
        "the unclipped run should leave [-1, 1]"
    );
    for sampler in ["ddim", "ddpm"] {
        let clipped = run(sampler, Some(1.0));
        assert!(
            clipped.iter().all(|v| v.abs() <= 1.0 + 1e-6),
            "{sampler}: {:?}",
            &clipped[..8]
        );
    }
    // DPM-Solver++(2M) extrapolates from two clamped predictions, so it may overshoot a little.
    let multistep = run("dpm-solver++", Some(1.0));
    assert!(multistep.iter().all(|v| v.abs() <= 1.2), "{:?}", &multistep[..8]);
}
