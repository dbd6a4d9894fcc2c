//! Progressive distillation: the grids, the student's target and loss against a plain-Rust
//! reference of the teacher's two DDIM steps, an exact teacher teaching the data itself, and
//! `Trainer` runs of two rounds whose students sample with DDIM at their own steps (in `sample`,
//! `eval` and the app's denoise view alike).

use crate::common::{assert_close, gpu, normal_vec, rng, upload};
use pollster::block_on;
use wgdiff::app::DenoiseSettings;
use wgdiff::diffusion::{
    distill_loss, vp_times, BetaSchedule, DistillGrid, Marginals, Network, Objective, Process, Role, Sampler,
    Spacing,
};
use wgdiff::ops::random::Rng;
use wgdiff::pipeline::{SampleRequest, TrainedModel};
use wgdiff::train::{distill_round, Distill, TrainConfig, Trainer};
use wgdiff::{DType, Result, Tensor};

const SHAPE: [usize; 4] = [6, 1, 3, 4];

/// A network computed on the host: `f(x, t)` per element, t the example's time input.
fn host_net(f: impl Fn(f64, f64) -> f64) -> impl Fn(&Tensor, &[f32]) -> Result<Tensor> {
    move |x, t| {
        let values = x.to_vec()?;
        let per = values.len() / t.len();
        let out: Vec<f32> = values
            .iter()
            .enumerate()
            .map(|(i, &v)| f(v as f64, t[i / per] as f64) as f32)
            .collect();
        Tensor::from_slice(x.gpu(), x.shape(), &out, DType::F32)
    }
}

fn level(m: &Marginals, t: Option<f64>) -> (f64, f64) {
    t.map_or((1.0, 0.0), |t| {
        let l = m.level(t as f32);
        (l.alpha, l.std)
    })
}

/// `distill_loss` of `student` (on `sm`) taught by `teacher` (on `tm`) at `picks`, its noise from
/// `Rng::new(seed)`.
fn distilled(
    (teacher, tm): (&Network, &Marginals),
    (student, sm): (&Network, &Marginals),
    grid: &DistillGrid,
    x0: &Tensor,
    picks: &[usize],
    seed: u64,
) -> Result<(Tensor, Tensor)> {
    let teacher = Role {
        net: teacher,
        marginals: tm,
    };
    let student = Role {
        net: student,
        marginals: sm,
    };
    distill_loss(teacher, student, grid, x0, picks, &mut Rng::new(seed))
}

#[test]
fn the_grids_nest_and_refuse_what_they_cannot_walk() {
    let marginals = Process::ddpm().marginals().unwrap();
    let grid = DistillGrid::new(&marginals, 4).unwrap();
    assert_eq!(grid.steps(), 4);
    let ab = marginals.alpha_bars().unwrap();
    // the student's grid is `ddim --spacing trailing --steps 4`'s
    assert_eq!(
        vp_times(ab, Spacing::Trailing, 4, ab.last()),
        [999.0, 749.0, 499.0, 249.0]
    );
    for steps in [0, 501] {
        let err = DistillGrid::new(&marginals, steps).unwrap_err().to_string();
        assert!(err.contains("1 to 500 steps"), "{err}");
    }
    let err = DistillGrid::new(&Process::ve().marginals().unwrap(), 4)
        .unwrap_err()
        .to_string();
    assert!(err.contains("VP"), "{err}");
}

#[test]
fn the_target_is_one_ddim_step_landing_where_the_teachers_two_land() {
    let teacher_process = Process::ddpm();
    let student_process = Process::ddpm().with_vp(None, Some(Objective::V)).unwrap();
    let (tm, sm) = (
        teacher_process.marginals().unwrap(),
        student_process.marginals().unwrap(),
    );
    let steps = 3;
    let grid = DistillGrid::new(&tm, steps).unwrap();
    let ab = tm.alpha_bars().unwrap();
    let (student_times, teacher_times) = (
        vp_times(ab, Spacing::Trailing, steps, ab.last()),
        vp_times(ab, Spacing::Trailing, 2 * steps, ab.last()),
    );
    // an eps teacher and a v student that depend on x and t; their predictions of the data
    // leave [-1, 1] at the noisiest step, so the clamp is exercised too
    let teacher_fn = |x: f64, t: f64| 0.3 * x + 0.05 * t / 1000.0 - 0.1;
    let student_fn = |x: f64, t: f64| 0.5 * x - 0.2 * t / 1000.0;
    let teacher = host_net(teacher_fn);
    let student = host_net(student_fn);
    let mut r = rng();
    let n: usize = SHAPE.iter().product();
    let x0 = normal_vec(&mut r, n)
        .iter()
        .map(|v| v.clamp(-1.0, 1.0))
        .collect::<Vec<_>>();
    let picks = [0, 1, 2, 2, 1, 0];
    let seed = 7;
    let x0_tensor = upload(&SHAPE, &x0, DType::F32);
    let (loss, target) =
        distilled((&teacher, &tm), (&student, &sm), &grid, &x0_tensor, &picks, seed).unwrap();
    // the same noise: the loss draws it first from its Rng
    let z: Vec<f64> = Rng::new(seed)
        .normal(gpu(), &SHAPE, 0.0, 1.0, DType::F32)
        .unwrap()
        .to_vec()
        .unwrap()
        .iter()
        .map(|&v| v as f64)
        .collect();
    let per = n / SHAPE[0];
    let mut want_target = vec![0.0; n];
    let mut want_loss = 0.0;
    for i in 0..n {
        let k = picks[i / per];
        let (t, t1, t2) = (
            student_times[k],
            teacher_times[2 * k + 1],
            student_times.get(k + 1).copied(),
        );
        let ((a, s), (a1, s1), (a2, s2)) = (level(&tm, Some(t)), level(&tm, Some(t1)), level(&tm, t2));
        let x_t = a * x0[i] + s * z[i];
        let x_hat = ((x_t - s * teacher_fn(x_t, t)) / a).clamp(-1.0, 1.0);
        let x_mid = a1 * x_hat + s1 * (x_t - a * x_hat) / s;
        let x_hat_mid = ((x_mid - s1 * teacher_fn(x_mid, t1)) / a1).clamp(-1.0, 1.0);
        let x_end = a2 * x_hat_mid + s2 * (x_mid - a1 * x_hat_mid) / s1;
        let target = (x_end - s2 / s * x_t) / (a2 - s2 / s * a);
        want_target[i] = target;
        let v = a * (x_t - a * target) / s - s * target;
        want_loss += (student_fn(x_t, t) - v).powi(2) / n as f64;
    }
    assert!(
        want_target.iter().any(|v| v.abs() > 0.5),
        "a target worth checking"
    );
    assert_close(
        "distillation target",
        &crate::common::download(&target),
        &want_target,
        1e-4,
    );
    assert_close(
        "distillation loss",
        &crate::common::download(&loss),
        &[want_loss],
        1e-4,
    );
}

#[test]
fn an_exact_teacher_teaches_the_data_itself() {
    // With one clean batch x*, eps = (x - alpha x*) / std is the exact teacher: every DDIM step
    // stays on x*'s path, so the target is x* at every student step, an exact v student has no
    // loss, and one off by 0.1 everywhere has a loss of 0.01.
    let teacher_process = Process::ddpm();
    let student_process = Process::ddpm().with_vp(None, Some(Objective::V)).unwrap();
    let (tm, sm) = (
        teacher_process.marginals().unwrap(),
        student_process.marginals().unwrap(),
    );
    let mut r = rng();
    let n: usize = SHAPE.iter().product();
    let x_star: Vec<f64> = normal_vec(&mut r, n).iter().map(|v| 0.8 * v.tanh()).collect();
    let per = n / SHAPE[0];
    let exact = |offset: f64, output: Objective| {
        let x_star = x_star.clone();
        let m = tm.clone();
        move |x: &Tensor, t: &[f32]| -> Result<Tensor> {
            let values = x.to_vec()?;
            let out: Vec<f32> = values
                .iter()
                .enumerate()
                .map(|(i, &xi)| {
                    let l = m.level(t[i / per]);
                    let eps = (xi as f64 - l.alpha * x_star[i]) / l.std;
                    let raw = match output {
                        Objective::V => l.alpha * eps - l.std * x_star[i],
                        _ => eps,
                    };
                    (raw + offset) as f32
                })
                .collect();
            Tensor::from_slice(x.gpu(), x.shape(), &out, DType::F32)
        }
    };
    let teacher = exact(0.0, Objective::Eps);
    let grid = DistillGrid::new(&tm, 4).unwrap();
    let x0 = upload(&SHAPE, &x_star, DType::F32);
    let picks = [0, 1, 2, 3, 0, 3];
    for (offset, want) in [(0.0, 0.0), (0.1, 0.01)] {
        let student = exact(offset, Objective::V);
        let (loss, target) = distilled((&teacher, &tm), (&student, &sm), &grid, &x0, &picks, 3).unwrap();
        assert_close(
            "exact teacher's target",
            &crate::common::download(&target),
            &x_star,
            1e-3,
        );
        let loss = loss.to_vec().unwrap()[0] as f64;
        assert!((loss - want).abs() < 1e-4, "loss {loss}, want {want}");
    }
    let err = distilled(
        (&teacher, &tm),
        (&teacher, &tm),
        &grid,
        &x0,
        &[0, 1, 4, 0, 0, 0],
        3,
    )
    .map(drop)
    .unwrap_err()
    .to_string();
    assert!(err.contains("each below 4"), "{err}");
}

/// A tiny U-Net trained `steps` steps (or distilled, with `distill`), its checkpoint saved
/// under `name`.
fn tiny_run(name: &str, steps: usize, distill: Option<Distill>) -> (Trainer, std::path::PathBuf) {
    let out = std::env::temp_dir().join(format!("wgdiff-distill-{name}-{}", std::process::id()));
    let config = TrainConfig {
        preset: "tiny".into(),
        steps,
        batch: 4,
        lr: 1e-3,
        warmup: 0,
        grid_images: 2,
        fid_share: 0.0,
        out: out.clone(),
        distill,
        ..TrainConfig::default()
    };
    let mut trainer = Trainer::new(gpu(), config).unwrap();
    while !trainer.finished() {
        let loss = block_on(trainer.step()).unwrap();
        assert!(loss.is_finite(), "{loss}");
    }
    let path = out.join("checkpoint.safetensors");
    std::fs::create_dir_all(&out).unwrap();
    block_on(trainer.save(&path)).unwrap();
    (trainer, path)
}

#[test]
fn students_of_two_rounds_sample_with_ddim_at_their_own_steps() {
    let (_, teacher) = tiny_run("teacher", 2, None);
    let round = |teacher: &std::path::Path, steps| distill_round(teacher, steps).unwrap();
    let first = round(&teacher, Some(4));
    let (student, first_path) = tiny_run("round1", 2, Some(first.clone()));
    assert_eq!(student.state.config.distill, Some(first));
    // the student predicts v on the teacher's schedule and samples DDIM on its grid by default
    assert_eq!(
        student.state.process,
        Process::ddpm().with_vp(None, Some(Objective::V)).unwrap()
    );
    let request = SampleRequest::for_state(&student.state).build().unwrap();
    let ddim = Sampler::Ddim {
        eta: 0.0,
        spacing: Spacing::Trailing,
    };
    assert_eq!((request.sampler(), request.steps()), (&ddim, 4));
    // the app's denoise view samples a student's "ddim" on its grid, any other sampler as named
    let loaded = TrainedModel::load(gpu(), &first_path).unwrap();
    let settings = |sampler: &str| DenoiseSettings {
        checkpoint: first_path.display().to_string(),
        sampler: sampler.into(),
        steps: 4,
        seed: 0,
        count: 2,
        class: None,
        guidance: None,
        skip_type: None,
        skip_exponent: 0.0,
        cache_interval: 1,
        cache_depth: None,
        pause_after: None,
        precision: DType::F32,
        schedule: None,
        repeat: 1,
    };
    let request = settings("ddim").request(&loaded, None).unwrap();
    assert_eq!((request.sampler(), request.steps()), (&ddim, 4));
    let request = settings("ddpm").request(&loaded, None).unwrap();
    assert_eq!(request.sampler(), &Sampler::Ddpm);
    // the next round halves the steps unless asked; another count is refused by name
    let second = round(&first_path, None);
    assert_eq!(second.steps, 2);
    let (student, second_path) = tiny_run("round2", 1, Some(second));
    let request = SampleRequest::for_state(&student.state).build().unwrap();
    assert_eq!(request.steps(), 2);
    let config = TrainConfig {
        preset: "tiny".into(),
        distill: Some(round(&first_path, Some(3))),
        ..TrainConfig::default()
    };
    let err = Trainer::new(gpu(), config).map(drop).unwrap_err().to_string();
    assert!(
        err.contains("student of 4 steps") && err.contains("--distill-steps 2"),
        "{err}"
    );
    // `--objective eps` alone keeps the teacher's schedule (not the preset's)
    let student = |schedule, objective| {
        let config = TrainConfig {
            preset: "mnist-mlp".into(),
            distill: Some(round(&teacher, Some(4))),
            schedule,
            objective,
            ..TrainConfig::default()
        };
        Trainer::new(gpu(), config).map(|t| t.state.process)
    };
    assert_eq!(student(None, Some(Objective::Eps)).unwrap(), Process::ddpm());
    // a student on another schedule is told which to name
    let err = student(Some(BetaSchedule::COSINE), None).unwrap_err().to_string();
    assert!(
        err.contains("another noise schedule") && err.contains("--schedule linear"),
        "{err}"
    );
    for path in [teacher, first_path, second_path] {
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
