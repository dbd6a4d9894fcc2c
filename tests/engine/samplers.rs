//! Every sampler run on the exact score of a 2-D Gaussian and of a two-mode mixture: the
//! output's mean, covariance and mode weights must match the data within statistical tolerance.
//!
//! Allowances come from running each sampler's update as a moment recursion on the Gaussian's
//! eigen-directions (variances 0.29 and 1.51, mean 1) with the exact score, at the step
//! counts used here, rounded up by ~1.5x. The largest: DDPM (posterior variance, 1000 steps)
//! -1.5% variance, DDIM (200 quadratic steps) -1.7%, PC +2.4% (the corrector's step size
//! rule), ALD +1.2%. VP samplers start from N(0, I) although x_{T-1} has mean
//! sqrt(alpha-bar) mu = 0.0064 mu: the deterministic ones keep up to 0.008 of that in the
//! mean. With 8192 samples 4 standard errors are ~6% of a variance. Scaling the exact score
//! by 0.9 moves the variance by +13% (PC, ALD), +23% (EM, DDPM) or +165% (the deterministic
//! flows), which every test here rejects (checked by hand).
//!
//! VE uses sigma = 1000, not the tutorial's 25: sampling starts from N(0, std(1)² I) while the
//! true x_1 is N(mu, Sigma + std(1)² I); the probability-flow ODE carries that offset to the
//! data scaled by sqrt(Sigma / (Sigma + std(1)²)), 0.12 |mu| for sigma = 25 (well beyond
//! the statistical tolerance) but 0.005 |mu| for sigma = 1000 (std(1) = 269).

use crate::common::gpu;
use crate::exact::{check_moments, gaussian, two_modes, Allowance, Exact};
use std::time::Instant;
use wgdiff::diffusion::{
    BetaSchedule, Objective, Process, SampleOptions, Sampler, SkipSchedule, Spacing, Start, Step,
};
use wgdiff::ops::random::Rng;
use wgdiff::Tensor;

const N: usize = 8192;

fn vp(objective: Objective) -> Process {
    Process::Vp {
        schedule: BetaSchedule::LINEAR,
        steps: 1000,
        objective,
    }
}

fn ve() -> Process {
    Process::Ve {
        sigma: 1000.0,
        eps: 1e-5,
    }
}

fn sample(
    process: &Process,
    sampler: Sampler,
    steps: usize,
    exact: &Exact,
    shape: &[usize],
    seed: u64,
) -> (Tensor, usize) {
    let options = SampleOptions {
        steps: Some(steps),
        ..Default::default()
    };
    let out = sampler
        .run(process, exact, gpu(), shape, &mut Rng::new(seed), options)
        .unwrap();
    (out.samples, out.evaluations)
}

/// Samples the Gaussian and the mixture with `sampler` and checks both.
fn check_sampler(process: &Process, sampler: Sampler, steps: usize, allowance: Allowance) {
    check_sampler_shaped(process, sampler, steps, allowance, &[N, 2]);
}

fn check_sampler_shaped(
    process: &Process,
    sampler: Sampler,
    steps: usize,
    allowance: Allowance,
    shape: &[usize],
) {
    for (name, data) in [("gaussian", gaussian()), ("two modes", two_modes())] {
        let start = Instant::now();
        let exact = Exact::new(process, data.clone());
        let (samples, evaluations) = sample(process, sampler, steps, &exact, shape, 7);
        eprintln!(
            "{sampler} on {} ({name}): {evaluations} network evaluations, {:.1} s",
            process.name(),
            start.elapsed().as_secs_f32()
        );
        check_moments(
            &format!("{sampler} on {} ({name})", process.name()),
            &samples,
            &data,
            allowance,
        );
    }
}

#[test]
fn ddpm_ancestral_over_all_timesteps() {
    check_sampler(
        &vp(Objective::Eps),
        Sampler::Ddpm,
        1000,
        Allowance {
            mean: 0.01,
            cov: 0.025,
        },
    );
}

#[test]
fn ddim_deterministic_quadratic_steps_on_an_x0_network() {
    let ddim = Sampler::Ddim {
        eta: 0.0,
        spacing: Spacing::Quadratic,
    };
    check_sampler(
        &vp(Objective::X0),
        ddim,
        200,
        Allowance {
            mean: 0.012,
            cov: 0.025,
        },
    );
}

#[test]
fn ddim_eta_zero_repeats_for_a_seed_and_differs_across_seeds() {
    let process = vp(Objective::Eps);
    let exact = Exact::new(&process, two_modes());
    let ddim = Sampler::Ddim {
        eta: 0.0,
        spacing: Spacing::Uniform,
    };
    let draw = |seed| {
        sample(&process, ddim, 20, &exact, &[256, 2], seed)
            .0
            .to_vec()
            .unwrap()
    };
    let first = draw(3);
    assert_eq!(first, draw(3));
    let other = draw(4);
    assert!(first.iter().zip(&other).filter(|(a, b)| a != b).count() > 500);
}

#[test]
fn euler_maruyama_on_vp_v_network_and_ve() {
    let allowance = Allowance {
        mean: 0.006,
        cov: 0.015,
    };
    check_sampler(&vp(Objective::V), Sampler::EulerMaruyama, 200, allowance);
    check_sampler(&ve(), Sampler::EulerMaruyama, 200, allowance);
}

#[test]
fn predictor_corrector_on_vp_and_ve_images() {
    let pc = Sampler::Pc {
        snr: 0.16,
        corrector_steps: 1,
    };
    let allowance = Allowance {
        mean: 0.004,
        cov: 0.035,
    };
    // [N, 1, 1, 2]: a batch of 1x1 "images" with two channels in the last axis
    check_sampler_shaped(&vp(Objective::Eps), pc, 100, allowance, &[N, 1, 1, 2]);
    check_sampler_shaped(&ve(), pc, 100, allowance, &[N, 1, 1, 2]);
}

#[test]
fn probability_flow_heun_on_vp_and_ve() {
    let allowance = Allowance {
        mean: 0.012,
        cov: 0.015,
    };
    check_sampler(&vp(Objective::Eps), Sampler::OdeHeun, 100, allowance);
    check_sampler(&ve(), Sampler::OdeHeun, 100, allowance);
}

#[test]
fn probability_flow_rk45_on_vp_and_ve() {
    let rk45 = Sampler::OdeRk45 {
        rtol: 1e-4,
        atol: 1e-4,
    };
    let allowance = Allowance {
        mean: 0.012,
        cov: 0.01,
    };
    check_sampler(&vp(Objective::Eps), rk45, 20, allowance);
    check_sampler(&ve(), rk45, 20, allowance);
}

#[test]
fn dpm_solver_pp_2m_in_50_log_snr_steps() {
    let dpm = Sampler::DpmSolverPp {
        spacing: Spacing::LogSnr,
    };
    check_sampler(
        &vp(Objective::Eps),
        dpm,
        50,
        Allowance {
            mean: 0.012,
            cov: 0.01,
        },
    );
}

#[test]
fn dpm_solver_pp_2m_sde_in_100_log_snr_steps() {
    let dpm_sde = Sampler::DpmSolverPpSde {
        spacing: Spacing::LogSnr,
    };
    assert_eq!(dpm_sde.name(), "dpm-solver++-sde");
    assert_eq!("dpm-solver++-sde".parse::<Sampler>().unwrap(), dpm_sde);
    check_sampler(
        &vp(Objective::Eps),
        dpm_sde,
        100,
        Allowance {
            mean: 0.012,
            cov: 0.03,
        },
    );
}

#[test]
fn annealed_langevin_on_ncsn_levels() {
    let process = Process::Ncsn {
        sigma_max: 20.0,
        sigma_min: 0.01,
        levels: 10,
    };
    let ald = Sampler::Ald {
        steps_per_level: 100,
        step_size: 3e-4,
    };
    check_sampler(
        &process,
        ald,
        10,
        Allowance {
            mean: 0.004,
            cov: 0.02,
        },
    );
}

/// Runs `sampler` for `steps` steps and stops after step `pause` (0-based): the state there.
fn paused_state(process: &Process, sampler: Sampler, steps: usize, pause: usize, exact: &Exact) -> Start {
    let mut state = None;
    let mut on_step = |step: &Step| -> wgdiff::Result<()> {
        if step.index < pause {
            return Ok(());
        }
        let t = step
            .resume_t
            .expect("a step before the last has a time to resume at");
        state = Some(Start { x: step.x.clone(), t });
        Err(wgdiff::Error::Cancelled)
    };
    let options = SampleOptions {
        steps: Some(steps),
        on_step: Some(&mut on_step),
        ..Default::default()
    };
    let stopped = sampler.run(process, exact, gpu(), &[N, 2], &mut Rng::new(11), options);
    assert!(matches!(stopped, Err(wgdiff::Error::Cancelled)));
    state.expect("the run reached the pause")
}

/// Samples on from `start` with `sampler` for `steps` steps.
fn branch(
    process: &Process,
    sampler: Sampler,
    steps: usize,
    start: &Start,
    exact: &Exact,
) -> (Tensor, usize) {
    let options = SampleOptions {
        steps: Some(steps),
        start: Some(start.clone()),
        ..Default::default()
    };
    let out = sampler
        .run(process, exact, gpu(), &[N, 2], &mut Rng::new(12), options)
        .unwrap();
    (out.samples, out.evaluations)
}

#[test]
fn a_branch_from_a_paused_run_samples_the_data_with_any_sampler_for_the_steps_left() {
    // Paused half-way, each branch walks only the rest of the time span: its evaluations are
    // its own steps, and the moments still match the data (a branch that restarted from noise
    // at the pause's time, or walked the whole span again, would miss them by far).
    let vp = vp(Objective::Eps);
    let ddim = Sampler::Ddim {
        eta: 0.0,
        spacing: Spacing::Quadratic,
    };
    let allowance = Allowance {
        mean: 0.012,
        cov: 0.035,
    };
    for (name, data) in [("gaussian", gaussian()), ("two modes", two_modes())] {
        let exact = Exact::new(&vp, data.clone());
        let start = paused_state(&vp, ddim, 200, 99, &exact);
        assert!(
            start.t > 10.0 && start.t < 990.0,
            "half-way (quadratic): t = {}",
            start.t
        );
        let dpm = Sampler::DpmSolverPp {
            spacing: Spacing::LogSnr,
        };
        let pc = Sampler::Pc {
            snr: 0.16,
            corrector_steps: 1,
        };
        for (sampler, steps, evaluations) in [(dpm, 25, 25), (Sampler::Ddpm, 100, 100), (pc, 60, 120)] {
            let (samples, evals) = branch(&vp, sampler, steps, &start, &exact);
            assert_eq!(evals, evaluations, "{sampler}: evaluations of the branch");
            check_moments(&format!("ddim -> {sampler} ({name})"), &samples, &data, allowance);
        }
    }
    // NCSN: annealed Langevin paused after level 3 runs on over the 6 levels left.
    let ncsn = Process::Ncsn {
        sigma_max: 20.0,
        sigma_min: 0.01,
        levels: 10,
    };
    let ald = Sampler::Ald {
        steps_per_level: 100,
        step_size: 3e-4,
    };
    let data = gaussian();
    let exact = Exact::new(&ncsn, data.clone());
    let start = paused_state(&ncsn, ald, 10, 3, &exact);
    assert_eq!(start.t, 4.0, "the next level");
    let wrong = SampleOptions {
        steps: Some(10),
        start: Some(start.clone()),
        ..Default::default()
    };
    let refused = ald.run(&ncsn, &exact, gpu(), &[N, 2], &mut Rng::new(1), wrong);
    let message = refused
        .err()
        .expect("10 levels from level 4 are refused")
        .to_string();
    assert!(message.contains("6 of the NCSN process's 10"), "{message}");
    let (samples, evals) = branch(&ncsn, ald, 6, &start, &exact);
    assert_eq!(evals, 600);
    check_moments(
        "ald paused at level 4 -> ald",
        &samples,
        &data,
        Allowance {
            mean: 0.004,
            cov: 0.02,
        },
    );
}

#[test]
fn a_deterministic_branch_with_the_run_s_own_settings_ends_where_the_run_ends() {
    let process = vp(Objective::Eps);
    let exact = Exact::new(&process, two_modes());
    let ddim = Sampler::Ddim {
        eta: 0.0,
        spacing: Spacing::Uniform,
    };
    let whole = SampleOptions {
        steps: Some(40),
        ..Default::default()
    };
    let original = ddim
        .run(&process, &exact, gpu(), &[N, 2], &mut Rng::new(11), whole)
        .unwrap()
        .samples
        .to_vec()
        .unwrap();
    let start = paused_state(&process, ddim, 40, 19, &exact);
    let resumed = branch(&process, ddim, 20, &start, &exact).0.to_vec().unwrap();
    let gap = original
        .iter()
        .zip(&resumed)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    eprintln!("largest gap between the run and its resumed second half: {gap}");
    // (the resumed grid rounds its 20 timesteps from the pause on, the run its 40 from T-1:
    // they differ by at most one timestep)
    assert!(gap < 0.005, "the resumed run drifts from the original by {gap}");
}

#[test]
fn a_start_of_the_wrong_shape_or_time_is_refused_by_name() {
    let process = vp(Objective::Eps);
    let exact = Exact::new(&process, gaussian());
    let x = Tensor::zeros(gpu(), &[4, 2], wgdiff::DType::F32).unwrap();
    for (start, says) in [
        (
            Start {
                x: x.clone(),
                t: 500.0,
            },
            "the run draws [8, 2]",
        ),
        (Start { x, t: 5000.0 }, "outside the vp process's time span"),
    ] {
        let shape = if says.contains("outside") { [4, 2] } else { [8, 2] };
        let options = SampleOptions {
            steps: Some(5),
            start: Some(start),
            ..Default::default()
        };
        let refused = Sampler::Ddpm.run(&process, &exact, gpu(), &shape, &mut Rng::new(1), options);
        let message = refused.err().expect("refused").to_string();
        assert!(message.contains(says), "{message}");
    }
}

/// `timesteps` as given (a searched schedule): the spacing's own grid given one by one samples
/// exactly what the spacing samples, another grid samples something else, and grids a sampler
/// cannot walk are refused by name.
#[test]
fn given_timesteps_replace_the_sampler_s_spacing() {
    let process = vp(Objective::Eps);
    let exact = Exact::new(&process, two_modes());
    let draw = |sampler: Sampler, steps: usize, timesteps: Option<Vec<f64>>| {
        let options = SampleOptions {
            steps: Some(steps),
            timesteps,
            ..Default::default()
        };
        sampler
            .run(&process, &exact, gpu(), &[256, 2], &mut Rng::new(7), options)
            .and_then(|out| out.samples.to_vec())
    };
    // uniform spacing: DDIM's 5 calls at round(999 u) for u = 1, 3/4, .., 0; DPM-Solver++'s 4
    // calls at 999 u (fractional) for u = 1, .., 1/4, then on to 0
    let ddim = Sampler::Ddim {
        eta: 0.0,
        spacing: Spacing::Uniform,
    };
    let dpm = Sampler::DpmSolverPp {
        spacing: Spacing::Uniform,
    };
    let ddim_grid = vec![999.0, 749.0, 500.0, 250.0, 0.0];
    let dpm_grid = vec![999.0, 749.25, 499.5, 249.75];
    assert_eq!(
        draw(ddim, 5, None).unwrap(),
        draw(ddim, 5, Some(ddim_grid)).unwrap()
    );
    let spaced = draw(dpm, 4, None).unwrap();
    assert_eq!(spaced, draw(dpm, 4, Some(dpm_grid)).unwrap());
    let other = draw(dpm, 4, Some(vec![999.0, 400.0, 100.0, 20.0])).unwrap();
    assert!(spaced.iter().zip(&other).filter(|(a, b)| a != b).count() > 400);

    for (sampler, steps, timesteps, says) in [
        (
            dpm,
            4,
            vec![999.0, 500.0, 100.0],
            "the given timesteps are 3, for 4 steps",
        ),
        (
            dpm,
            3,
            vec![999.0, 100.0, 500.0],
            "must decrease from noise to data, but 500 follows 100",
        ),
        (dpm, 2, vec![1500.0, 10.0], "hold 1500, outside 0..=999"),
        (dpm, 2, vec![500.0, f64::NAN], "hold NaN"),
        (dpm, 2, vec![500.0, 0.0], "its last timestep lies above 0"),
        (
            Sampler::OdeHeun,
            2,
            vec![500.0, 10.0],
            "given timesteps are for ddpm, ddim and dpm-solver++",
        ),
    ] {
        let message = draw(sampler, steps, Some(timesteps))
            .expect_err("refused")
            .to_string();
        assert!(message.contains(says), "{message:?} should say {says:?}");
    }
    let branch = SampleOptions {
        steps: Some(2),
        timesteps: Some(vec![300.0, 100.0]),
        start: Some(paused_state(&process, ddim, 4, 2, &exact)),
        ..Default::default()
    };
    let message = dpm
        .run(&process, &exact, gpu(), &[N, 2], &mut Rng::new(7), branch)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        message.contains("given timesteps are for runs from noise"),
        "{message}"
    );

    // in a schedule file: read back as written, refused by name where the sampler cannot walk them
    let file = |sampler: &str, timesteps: &str| {
        format!(
            r#"{{"format": "wgdiff skip schedule", "sampler": {sampler}, "levels": 2, "skips": [0, 0, 0], "timesteps": {timesteps}}}"#
        )
    };
    let dpm_file = r#"{"name": "dpm-solver++", "spacing": "log-snr"}"#;
    let schedule = SkipSchedule::from_json(file(dpm_file, "[999, 310.5, 42]").as_bytes(), "s.json").unwrap();
    assert_eq!(schedule.timesteps, [999.0, 310.5, 42.0]);
    assert_eq!(
        SkipSchedule::from_json(&schedule.to_json(), "again").unwrap(),
        schedule
    );
    for (sampler, timesteps, says) in [
        (dpm_file, "[999, 42]", "the given timesteps are 2, for 3 steps"),
        (dpm_file, "[999, 42, 310]", "but 310 follows 42"),
        (dpm_file, "[999, 42, -1]", "hold -1, outside 0..=T-1"),
        (
            r#"{"name": "ode-heun"}"#,
            "[999, 310, 42]",
            "`timesteps` are for the ddpm, ddim and dpm-solver++ samplers; ode-heun walks its own time grid",
        ),
    ] {
        let err = SkipSchedule::from_json(file(sampler, timesteps).as_bytes(), "s.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("s.json") && err.contains(says),
            "{err:?} should say {says:?}"
        );
    }
}
