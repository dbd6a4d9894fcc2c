//! Training end to end on real MNIST, in f32 and mixed f16: the loss of a tiny U-Net falls,
//! f16 steps track f32, an overflowing f16 step is skipped, a resumed run repeats the next
//! step's loss bit for bit, `init` fine-tunes from EMA weights, class-conditional models drop
//! labels and default to guidance, runs from bytes (the browser's way) match runs from files,
//! and broken checkpoints give clear errors.

use crate::common::gpu;
use pollster::block_on;
use std::path::Path;
use std::sync::Arc;
use wgdiff::checkpoint::Checkpoint;
use wgdiff::classifier::{Classifier, SHIPPED_MNIST_CLASSIFIER};
use wgdiff::data::{idx_from_bytes, DataSource, Split};
use wgdiff::diffusion::{
    BetaSchedule, Denoiser, GuidanceInterval, NetDenoiser, Objective, Process, Sampler, SkipPlan,
    SkipSchedule, TimeSampling,
};
use wgdiff::eval::{Reference, ReferenceImages};
use wgdiff::models::{ModelConfig, SkipType, UNetConfig};
use wgdiff::pipeline::{SampleRequest, SampleRequestBuilder, TrainedModel};
use wgdiff::run_state::best_fid;
use wgdiff::train::{
    default_process, FidTracker, Optimizer, Precision, ResumeChanges, RunEnd, SkipTraining, TrainConfig,
    TrainEvent, Trainer, TrainingRun, CFG_GUIDANCE,
};

fn tiny_config(out: &str, steps: usize) -> TrainConfig {
    TrainConfig {
        preset: "tiny".into(),
        steps,
        batch: 8,
        lr: 3e-3,
        warmup: 0,
        out: std::env::temp_dir().join(format!("wgdiff-train-{}-{out}", std::process::id())),
        ..TrainConfig::default()
    }
}

/// `tiny_config` in `precision` (its own output folder).
fn tiny_config_in(precision: Precision, out: &str, steps: usize) -> TrainConfig {
    TrainConfig {
        precision,
        ..tiny_config(&format!("{out}-{precision}"), steps)
    }
}

/// Trains `config` to its end and checks that the mean loss of the last 4 steps is under
/// 0.8x that of the first 4.
fn assert_loss_falls(config: TrainConfig) {
    let mut trainer = Trainer::new(gpu(), config).unwrap();
    let mut losses = Vec::new();
    while !trainer.finished() {
        losses.push(block_on(trainer.step()).unwrap());
    }
    let first: f32 = losses[..4].iter().sum::<f32>() / 4.0;
    let last: f32 = losses[losses.len() - 4..].iter().sum::<f32>() / 4.0;
    assert!(
        last < 0.8 * first,
        "{}: loss did not fall: {losses:?} ({:?})",
        trainer.state.config.out.display(),
        trainer.state.scaler
    );
}

#[test]
fn tiny_unet_loss_falls_on_mnist() {
    assert_loss_falls(tiny_config_in(Precision::F32, "falls", 16));
}

#[test]
fn tiny_unet_loss_falls_on_mnist_in_f16() {
    assert_loss_falls(tiny_config_in(Precision::F16, "falls", 16));
}

#[test]
fn f16_steps_give_the_f32_loss() {
    let mut f32_run = Trainer::new(gpu(), tiny_config_in(Precision::F32, "close", 3)).unwrap();
    let mut f16_run = Trainer::new(gpu(), tiny_config_in(Precision::F16, "close", 3)).unwrap();
    for step in 0..3 {
        let (a, b) = (
            block_on(f32_run.step()).unwrap(),
            block_on(f16_run.step()).unwrap(),
        );
        assert!(
            (a - b).abs() <= 1e-2 * a.abs(),
            "step {step}: f32 loss {a} vs f16 {b}"
        );
    }
}

#[test]
fn an_overflowing_f16_step_is_skipped_and_halves_the_scale() {
    let config = tiny_config_in(Precision::F16, "overflow", 3);
    std::fs::create_dir_all(&config.out).unwrap();
    let (before, after) = (
        config.out.join("before.safetensors"),
        config.out.join("after.safetensors"),
    );
    let mut trainer = Trainer::new(gpu(), config).unwrap();
    block_on(trainer.step()).unwrap();
    let scaler = trainer.state.scaler.as_mut().unwrap();
    scaler.scale = 1e30;
    let skipped = scaler.skipped;
    block_on(trainer.save(&before)).unwrap();
    let loss = block_on(trainer.step()).unwrap();
    assert!(loss.is_finite(), "the loss itself is fine: {loss}");
    let scaler = trainer.state.scaler.clone().unwrap();
    assert_eq!((scaler.scale, scaler.skipped), (5e29, skipped + 1));
    block_on(trainer.save(&after)).unwrap();
    let (before, after) = (
        Checkpoint::load(&before).unwrap(),
        Checkpoint::load(&after).unwrap(),
    );
    assert_eq!(before.tensors.len(), after.tensors.len());
    for (name, t) in &before.tensors {
        // weights, EMA and Adam moments alike
        assert_eq!(
            Some(t),
            after.tensors.get(name),
            "{name} changed in a skipped step"
        );
    }
    // with a sane scale the next step trains again
    trainer.state.scaler.as_mut().unwrap().scale = 1024.0;
    block_on(trainer.step()).unwrap();
    let weights = pollster::block_on(Checkpoint::capture(
        &trainer.net().named_params(),
        serde_json::json!({}),
    ))
    .unwrap();
    assert!(
        weights
            .tensors
            .iter()
            .any(|(name, t)| after.tensors[&format!("model.{name}")] != *t),
        "a step with a sane scale updates the weights"
    );
}

#[test]
fn a_late_lr_decay_ends_with_the_run_s_steps_or_its_time_budget() {
    let by_steps = TrainConfig {
        lr_decay: 0.5,
        ..tiny_config("lr-decay", 4)
    };
    let mut trainer = Trainer::new(gpu(), by_steps).unwrap();
    let mut rates = Vec::new();
    while !trainer.finished() {
        rates.push(trainer.lr());
        block_on(trainer.step()).unwrap();
    }
    rates.push(trainer.lr());
    assert_eq!(rates, [3e-3, 3e-3, 3e-3, 1.5e-3, 0.0]);
    // a time budget ends the run first: 6 ms of training, spent by the first step
    let by_time = TrainConfig {
        lr_decay: 0.5,
        max_minutes: 1e-4,
        ..tiny_config("lr-decay-time", 1000)
    };
    let mut trainer = Trainer::new(gpu(), by_time).unwrap();
    assert_eq!(trainer.lr(), 3e-3);
    block_on(trainer.step()).unwrap();
    assert!(trainer.out_of_time() && trainer.lr() == 0.0, "{}", trainer.lr());
    let bad = TrainConfig {
        lr_decay: 1.5,
        ..tiny_config("lr-decay-bad", 4)
    };
    let e = Trainer::new(gpu(), bad).err().unwrap().to_string();
    assert!(e.contains("lr_decay must be in [0, 1]"), "{e}");
}

/// On a device whose autotuner has measured nothing yet, the first step times kernel
/// candidates; that measuring counts neither as training time nor against `max_minutes` (it
/// took a resumed 34-minute piece's first 12 minutes on a fresh machine).
#[test]
fn a_fresh_device_s_kernel_measuring_is_not_training_time() {
    let fresh = wgdiff::Gpu::new_blocking(wgdiff::AdapterChoice::default()).unwrap();
    let config = TrainConfig {
        preset: "mnist-mlp".into(),
        ..tiny_config("measuring", 2)
    };
    let mut trainer = Trainer::new(&fresh, config).unwrap();
    let before = fresh.tuner().seconds_measuring();
    let started = std::time::Instant::now();
    block_on(trainer.step()).unwrap();
    let wall = started.elapsed().as_secs_f64();
    let measuring = fresh.tuner().seconds_measuring() - before;
    assert!(measuring > 0.0, "a fresh device's first step measured nothing");
    assert!(
        trainer.state.train_seconds + measuring <= wall,
        "training {:.3} s + measuring {measuring:.3} s > the step's {wall:.3} s",
        trainer.state.train_seconds
    );
}

#[test]
fn resume_repeats_the_next_step_exactly() {
    resume_repeats(Precision::F32, Optimizer::Adam);
}

#[test]
fn resume_repeats_the_next_f16_step_exactly() {
    resume_repeats(Precision::F16, Optimizer::Adam);
}

/// 8-bit moments go into the checkpoint decoded to f32 and are encoded again on resume, to
/// the same codes: the resumed step is the uninterrupted one, bit for bit (the MLP preset: the
/// tiny U-Net's tensors are all too small for 8-bit moments).
#[test]
fn resume_repeats_the_next_adam8bit_step_exactly() {
    resume_repeats(Precision::F32, Optimizer::Adam8bit);
}

#[test]
fn the_configured_process_trains_is_saved_and_defaults_by_model() {
    let cosine_v = Process::vp_cosine_v();
    let config = TrainConfig {
        process: Some(cosine_v.clone()),
        ..tiny_config("process", 2)
    };
    let checkpoint = config.out.join("checkpoint.safetensors");
    let mut trainer = Trainer::new(gpu(), config).unwrap();
    assert_eq!(trainer.state.process, cosine_v);
    for _ in 0..2 {
        assert!(block_on(trainer.step()).unwrap().is_finite());
    }
    block_on(trainer.save(&checkpoint)).unwrap();
    let model = TrainedModel::load(gpu(), &checkpoint).unwrap();
    assert_eq!(
        model.state.process, cosine_v,
        "samplers read the process from the checkpoint"
    );
    // the defaults: DDPM for U-Nets, v on the cosine schedule for the MLP
    let unet = wgdiff::models::preset("tiny").unwrap();
    assert_eq!(default_process(&unet), Process::ddpm());
    let mlp = wgdiff::models::preset("mnist-mlp").unwrap();
    assert_eq!(default_process(&mlp), cosine_v);
    // flags: schedule and objective by name, on VP processes only
    let eps_cosine = Process::ddpm()
        .with_vp(Some("cosine".parse::<BetaSchedule>().unwrap()), None)
        .unwrap();
    let Process::Vp {
        schedule, objective, ..
    } = eps_cosine
    else {
        unreachable!()
    };
    assert_eq!((schedule, objective), (BetaSchedule::COSINE, Objective::Eps));
    assert_eq!("x0".parse::<Objective>().unwrap(), Objective::X0);
    assert!("vee"
        .parse::<Objective>()
        .unwrap_err()
        .to_string()
        .contains("eps, x0 or v"));
    assert!("quadratic".parse::<BetaSchedule>().is_err());
    let err = Process::ve()
        .with_vp(None, Some(Objective::V))
        .unwrap_err()
        .to_string();
    assert!(err.contains("ve"), "{err}");
    let bad = TrainConfig {
        process: Some(Process::Vp {
            schedule: BetaSchedule::COSINE,
            steps: 1,
            objective: Objective::V,
        }),
        ..tiny_config("bad-process", 1)
    };
    assert!(
        bad.validate().is_err(),
        "a one-step process is refused before training"
    );
}

#[test]
fn a_run_samples_with_its_models_default_sampler_and_guidance_unless_told() {
    let dpm: Sampler = "dpm-solver++".parse().unwrap();
    // the MLP: DPM-Solver++ at 10 steps and guidance 1.75, recorded in the run's config
    let mlp = |out: &str| TrainConfig {
        preset: "mnist-mlp".into(),
        ..tiny_config(out, 1)
    };
    let trainer = Trainer::new(gpu(), mlp("sampling-mlp")).unwrap();
    let c = &trainer.state.config;
    assert_eq!(
        (c.sampler, c.sampler_steps, c.guidance),
        (Some(dpm), Some(10), Some(1.75))
    );
    let request = SampleRequest::for_state(&trainer.state).build().unwrap();
    assert_eq!(
        (request.sampler(), request.steps(), request.guidance()),
        (&dpm, 10, 1.75)
    );
    // asked steps and sampler still win
    let request = SampleRequest::for_state(&trainer.state)
        .steps(Some(20))
        .build()
        .unwrap();
    assert_eq!((request.sampler(), request.steps()), (&dpm, 20));
    let request = SampleRequest::for_state(&trainer.state)
        .sampler_named(Some("ddpm"), None, None)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!((request.sampler(), request.steps()), (&Sampler::Ddpm, 1000));
    // a config's own choice is kept; its guidance alone leaves the model's sampler
    let chosen = TrainConfig {
        sampler: Some(Sampler::Ddpm),
        guidance: Some(3.0),
        ..mlp("sampling-chosen")
    };
    let trainer = Trainer::new(gpu(), chosen).unwrap();
    let c = &trainer.state.config;
    assert_eq!(
        (c.sampler, c.sampler_steps, c.guidance),
        (Some(Sampler::Ddpm), None, Some(3.0))
    );
    assert_eq!(trainer.state.default_guidance(), 3.0);
    // the U-Net keeps the process's default (DDPM, 50 steps; unconditional: guidance 1)
    let trainer = Trainer::new(gpu(), tiny_config("sampling-unet", 1)).unwrap();
    let c = &trainer.state.config;
    assert_eq!((c.sampler, c.sampler_steps, c.guidance), (None, None, None));
    let request = SampleRequest::for_state(&trainer.state).build().unwrap();
    assert_eq!(
        (request.sampler(), request.steps(), request.guidance()),
        (&Sampler::Ddpm, 50, 1.0)
    );
    // refused with the fix named: guidance without a guided model, a sampler of another process,
    // steps without a sampler, a negative guidance
    for (config, want) in [
        (
            TrainConfig {
                guidance: Some(2.0),
                ..tiny_config("sampling-bad", 1)
            },
            "leave them out",
        ),
        (
            TrainConfig {
                sampler: Some("ald".parse().unwrap()),
                ..tiny_config("sampling-bad", 1)
            },
            "leave sampler out",
        ),
        (
            TrainConfig {
                sampler_steps: Some(5),
                ..tiny_config("sampling-bad", 1)
            },
            "needs a sampler",
        ),
        (
            TrainConfig {
                guidance: Some(-1.0),
                ..mlp("sampling-bad")
            },
            "finite number >= 0",
        ),
    ] {
        let err = Trainer::new(gpu(), config).map(drop).unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn a_run_guides_in_its_models_interval_of_noise_levels_unless_told() {
    let mlp = |out: &str| TrainConfig {
        preset: "mnist-mlp".into(),
        ..tiny_config(out, 1)
    };
    // the MLP records the paper's interval with its guidance; requests take it, or every step
    let trainer = Trainer::new(gpu(), mlp("interval-mlp")).unwrap();
    assert_eq!(
        trainer.state.config.guidance_interval,
        Some(GuidanceInterval::PAPER)
    );
    let request = SampleRequest::for_state(&trainer.state).build().unwrap();
    assert_eq!(request.guidance_interval(), Some(GuidanceInterval::PAPER));
    let (low, high) = request.guided_times().unwrap();
    let marginals = trainer.state.process.marginals().unwrap();
    for (t, sigma) in [(low, 0.28), (high, 5.42)] {
        let level = marginals.level(t);
        let at = level.std / level.alpha;
        assert!((at / sigma - 1.0).abs() < 0.01, "t {t}: sigma {at}, not {sigma}");
    }
    let all = SampleRequest::for_state(&trainer.state)
        .guidance_interval(Some(GuidanceInterval::ALL))
        .build()
        .unwrap();
    assert_eq!((all.guidance_interval(), all.guided_times()), (None, None));
    // a checkpoint from before (no interval recorded) guides at every step
    let mut before = trainer.state.clone();
    before.config.guidance_interval = None;
    assert_eq!(
        SampleRequest::for_state(&before).build().unwrap().guided_times(),
        None
    );
    // refused with the fix named: an interval for a model without labels, or a reversed one
    let unconditional = TrainConfig {
        guidance_interval: Some(GuidanceInterval::PAPER),
        ..tiny_config("interval-bad", 1)
    };
    let err = Trainer::new(gpu(), unconditional)
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(err.contains("leave them out"), "{err}");
    let reversed = TrainConfig {
        guidance_interval: Some(GuidanceInterval { low: 5.0, high: 1.0 }),
        ..mlp("interval-bad")
    };
    let err = Trainer::new(gpu(), reversed).map(drop).unwrap_err().to_string();
    assert!(err.contains("0 <= low < high"), "{err}");
    assert_eq!(
        "0.28,5.42".parse::<GuidanceInterval>().unwrap(),
        GuidanceInterval::PAPER
    );
    assert_eq!("all".parse::<GuidanceInterval>().unwrap(), GuidanceInterval::ALL);
    for bad in ["5,1", "0.28", "x,1", "-1,2"] {
        assert!(bad.parse::<GuidanceInterval>().is_err(), "{bad}");
    }
    assert!(GuidanceInterval::PAPER.network_times(&Process::ve()).is_err());
}

#[test]
fn a_run_draws_its_training_times_as_its_models_time_sampling_says() {
    use rand::SeedableRng;
    let process = Process::vp_cosine_v();
    let marginals = process.marginals().unwrap();
    let rng = || rand::rngs::StdRng::seed_from_u64(3);
    // uniform draws exactly as the process always did (old runs resume on the same times)
    assert_eq!(
        TimeSampling::Uniform.draw(&process, &mut rng(), 64).unwrap(),
        process.sample_times(&mut rng(), 64, 0.0..1.0).unwrap()
    );
    // logit-normal (m, s): normalised time sigmoid(m + s n), so for (0, 1) 72.8% of the draws
    // fall in [0.25, 0.75] (|n| < ln 3) against uniform's 50%, centred on 0.5
    let shares = |sampling: TimeSampling| {
        let u: Vec<f32> = sampling
            .draw(&process, &mut rng(), 8000)
            .unwrap()
            .into_iter()
            .map(|t| {
                assert!(t.fract() == 0.0 && (0.0..1000.0).contains(&t), "not a step: {t}");
                marginals.normalized_time(t)
            })
            .collect();
        let middle = u.iter().filter(|&&x| (0.25..=0.75).contains(&x)).count() as f32 / u.len() as f32;
        (middle, u.iter().sum::<f32>() / u.len() as f32)
    };
    let (middle, mean) = shares(TimeSampling::LOGIT_NORMAL);
    assert!(
        (middle - 0.728).abs() < 0.02 && (mean - 0.5).abs() < 0.01,
        "{middle} {mean}"
    );
    let (middle, mean) = shares(TimeSampling::Uniform);
    assert!(
        (middle - 0.5).abs() < 0.02 && (mean - 0.5).abs() < 0.01,
        "{middle} {mean}"
    );
    // mean 1: E[sigmoid(1 + n)] = 0.697
    let (_, mean) = shares(TimeSampling::LogitNormal { mean: 1.0, std: 1.0 });
    assert!((mean - 0.697).abs() < 0.012, "{mean}");

    // a fresh MLP run records logit-normal and trains on it; the U-Net keeps uniform
    let mlp = |out: &str| TrainConfig {
        preset: "mnist-mlp".into(),
        ..tiny_config(out, 1)
    };
    let mut trainer = Trainer::new(gpu(), mlp("times-mlp")).unwrap();
    assert_eq!(
        trainer.state.config.time_sampling,
        Some(TimeSampling::LOGIT_NORMAL)
    );
    assert!(block_on(trainer.step()).unwrap().is_finite());
    let unet = Trainer::new(gpu(), tiny_config("times-unet", 1)).unwrap();
    assert_eq!(unet.state.config.time_sampling, None);
    let told = TrainConfig {
        time_sampling: Some(TimeSampling::Uniform),
        ..mlp("times-told")
    };
    assert_eq!(
        Trainer::new(gpu(), told).unwrap().state.config.time_sampling,
        Some(TimeSampling::Uniform)
    );
    // a checkpoint's config from before the setting existed resumes on uniform times
    let before: TrainConfig = serde_json::from_str(r#"{"preset": "mnist-mlp"}"#).unwrap();
    assert_eq!(before.time_sampling, None);

    // refused where it cannot apply, naming why
    let skipping = TrainConfig {
        time_sampling: Some(TimeSampling::LOGIT_NORMAL),
        skip_training: Some(SkipTraining::Uniform),
        ..tiny_config("times-skip", 1)
    };
    let err = Trainer::new(gpu(), skipping).map(drop).unwrap_err().to_string();
    assert!(err.contains("skip training draws its times"), "{err}");
    // the startup line names where the times come from
    assert_eq!(trainer.state.config.times_description(), "logit-normal:0,1 times");
    let skipping = TrainConfig {
        skip_training: Some(SkipTraining::Uniform),
        ..tiny_config("times-skip-said", 1)
    };
    assert_eq!(skipping.times_description(), "times per skipped level");
    let err = TimeSampling::LOGIT_NORMAL
        .draw(&Process::ve(), &mut rng(), 4)
        .unwrap_err()
        .to_string();
    assert!(err.contains("VP processes"), "{err}");
    assert_eq!(
        TimeSampling::parse("logit-normal").unwrap(),
        TimeSampling::LOGIT_NORMAL
    );
    assert_eq!(
        TimeSampling::parse("logit-normal:0.5,1.2").unwrap(),
        TimeSampling::LogitNormal { mean: 0.5, std: 1.2 }
    );
    assert_eq!(TimeSampling::parse("uniform").unwrap(), TimeSampling::Uniform);
    for bad in [
        "logit-normal:0,0",
        "logit-normal:0",
        "logit-normal:x,1",
        "normal",
        "logit-normal:0,inf",
    ] {
        assert!(TimeSampling::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_guided_denoiser_guides_only_at_the_network_times_of_its_interval() {
    let _g = wgdiff::no_grad();
    let net = wgdiff::models::preset("mnist-mlp")
        .unwrap()
        .build(gpu(), 3)
        .unwrap();
    let values: Vec<f32> = (0..2 * 784)
        .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
        .collect();
    let x = wgdiff::Tensor::from_f32(gpu(), &[2, 1, 28, 28], &values).unwrap();
    let labels = vec![3u32, 7];
    let conditional = NetDenoiser::conditional(net.as_ref(), labels.clone());
    let guided = NetDenoiser::guided(net.as_ref(), labels.clone(), 2.0, 10);
    let limited = NetDenoiser::guided(net.as_ref(), labels, 2.0, 10).guided_at(Some((100.0, 500.0)));
    let out = |d: &NetDenoiser, t: f32| d.predict(&x, t, 0).unwrap().to_vec().unwrap();
    for t in [50.0, 100.0, 300.0, 500.0, 900.0] {
        let inside = (100.0..=500.0).contains(&t);
        assert_ne!(
            out(&guided, t),
            out(&conditional, t),
            "guidance changes the output"
        );
        let want = if inside {
            out(&guided, t)
        } else {
            out(&conditional, t)
        };
        assert_eq!(out(&limited, t), want, "t {t}, inside {inside}");
    }
}

#[test]
fn class_conditional_models_drop_labels_by_default_and_sample_with_guidance() {
    let conditional = |classes: usize| {
        Some(ModelConfig::UNet(UNetConfig {
            classes: Some(classes),
            ..UNetConfig::tiny()
        }))
    };
    let config = TrainConfig {
        model: conditional(10),
        ..tiny_config("conditional", 2)
    };
    let model = config.model_config().unwrap();
    assert_eq!(config.label_dropout(&model).unwrap(), Some(0.1));
    let mut trainer = Trainer::new(gpu(), config.clone()).unwrap();
    assert!(block_on(trainer.step()).unwrap().is_finite());
    assert_eq!(trainer.state.default_guidance(), CFG_GUIDANCE);
    let never_dropped = TrainConfig {
        class_dropout: Some(0.0),
        ..config.clone()
    };
    let trainer = Trainer::new(gpu(), never_dropped).unwrap();
    assert_eq!(
        trainer.state.default_guidance(),
        1.0,
        "no unconditional branch learned: no guidance"
    );
    let unconditional = Trainer::new(gpu(), tiny_config("unconditional", 1)).unwrap();
    assert_eq!(unconditional.state.default_guidance(), 1.0);
    let err = |c: TrainConfig| Trainer::new(gpu(), c).err().unwrap().to_string();
    let dropout_without_classes = TrainConfig {
        class_dropout: Some(0.1),
        ..tiny_config("dropout-unconditional", 1)
    };
    assert!(err(dropout_without_classes).contains("class_dropout needs a class-conditional model"));
    let three_classes = TrainConfig {
        model: conditional(3),
        ..tiny_config("three-classes", 1)
    };
    let message = err(three_classes);
    assert!(
        message.contains("3 classes but the dataset mnist/train has 10") && message.contains("unconditional"),
        "{message}"
    );
}

#[test]
fn runs_from_bytes_match_runs_from_files() {
    // What the browser does: the dataset from the IDX files' bytes, the checkpoint captured
    // to bytes and resumed from them, with no file opened by the library.
    let dir = Path::new(wgdiff::data::DEFAULT_MNIST_DIR);
    let file = |name: &str| (dir.join(name), std::fs::read(dir.join(name)).unwrap());
    let (images, labels) = (
        file("train-images.idx3-ubyte.gz"),
        file("train-labels.idx1-ubyte.gz"),
    );
    let data = idx_from_bytes((&images.0, images.1), (&labels.0, labels.1)).unwrap();
    let from_files = wgdiff::data::mnist(dir, Split::Train).unwrap();
    assert_eq!((data.len(), data.classes), (from_files.len(), from_files.classes));
    for i in [0, 1, data.len() - 1] {
        assert_eq!(data.image(i), from_files.image(i), "image {i}");
    }
    assert_eq!(data.labels, from_files.labels);

    let config = tiny_config("bytes", 4);
    let mut from_disk = Trainer::new(gpu(), config.clone()).unwrap();
    let mut in_memory = Trainer::with_data(gpu(), config, Arc::new(data), None).unwrap();
    for _ in 0..3 {
        let (a, b) = (
            block_on(from_disk.step()).unwrap(),
            block_on(in_memory.step()).unwrap(),
        );
        assert_eq!(a.to_bits(), b.to_bits(), "step losses {a} vs {b}");
    }
    let bytes = block_on(in_memory.capture()).unwrap().to_bytes().unwrap();
    // (the checkpoint a run writes, tensor by tensor, is the captured one's encoding)
    let saved = in_memory.state.config.out.join("saved.safetensors");
    block_on(in_memory.save(&saved)).unwrap();
    assert!(std::fs::read(&saved).unwrap() == bytes, "written as captured");
    let checkpoint = Checkpoint::from_bytes(&bytes, "captured").unwrap();
    let data = Arc::new(from_files);
    let mut resumed =
        Trainer::resume_with_data(gpu(), &checkpoint, "captured", data, &Default::default()).unwrap();
    assert_eq!(resumed.state.step, 3);
    let (want, got) = (
        block_on(from_disk.step()).unwrap(),
        block_on(resumed.step()).unwrap(),
    );
    assert_eq!(
        got.to_bits(),
        want.to_bits(),
        "resumed from bytes: {got} vs {want}"
    );
}

fn resume_repeats(precision: Precision, optimizer: Optimizer) {
    let tiny = tiny_config_in(precision, &format!("resume-{optimizer}"), 4);
    let config = match optimizer {
        Optimizer::Adam => tiny,
        Optimizer::Adam8bit => TrainConfig {
            optimizer,
            preset: "mnist-mlp".into(),
            ..tiny
        },
    };
    let checkpoint = config.out.join("checkpoint.safetensors");
    let mut trainer = Trainer::new(gpu(), config).unwrap();
    let params: usize = trainer.net().named_params().iter().map(|(_, t)| t.numel()).sum();
    if optimizer == Optimizer::Adam8bit {
        let share = trainer.optimizer_state_bytes() as f64 / (8 * params) as f64;
        assert!(share <= 0.3, "8-bit moments hold {share:.2} of f32 Adam's bytes");
    }
    for _ in 0..3 {
        block_on(trainer.step()).unwrap();
    }
    block_on(trainer.save(&checkpoint)).unwrap();
    let expected = block_on(trainer.step()).unwrap();
    let uninterrupted: Vec<Vec<f32>> = trainer
        .net()
        .named_params()
        .iter()
        .map(|(_, t)| t.to_vec().unwrap())
        .collect();

    let mut resumed = Trainer::resume(gpu(), &checkpoint, &Default::default()).unwrap();
    assert_eq!(resumed.state.step, 3);
    assert_eq!(resumed.state.config.precision, precision);
    assert_eq!(resumed.state.config.optimizer, optimizer);
    let loss = block_on(resumed.step()).unwrap();
    assert_eq!(
        loss.to_bits(),
        expected.to_bits(),
        "resumed loss {loss} vs {expected}"
    );
    for ((name, t), want) in resumed.net().named_params().iter().zip(&uninterrupted) {
        let got: Vec<u32> = t.to_vec().unwrap().iter().map(|v| v.to_bits()).collect();
        let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "parameter {name} after the resumed step");
    }
}

#[test]
fn broken_checkpoints_and_settings_give_clear_errors() {
    let config = tiny_config("broken", 1);
    std::fs::create_dir_all(&config.out).unwrap();
    let path = config.out.join("cut.safetensors");
    let mut trainer = Trainer::new(gpu(), config.clone()).unwrap();
    block_on(trainer.step()).unwrap();
    block_on(trainer.save(&path)).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let msg = Trainer::resume(gpu(), &path, &Default::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("cut.safetensors") && msg.contains("truncated or corrupt"),
        "{msg}"
    );

    let msg = Trainer::new(
        gpu(),
        TrainConfig {
            preset: "nope".into(),
            ..config.clone()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        msg.contains("unknown model preset \"nope\"") && msg.contains("mnist"),
        "{msg}"
    );
    let msg = Trainer::new(
        gpu(),
        TrainConfig {
            data: "mnist:/nonexistent".into(),
            ..config
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(msg.contains("/nonexistent"), "{msg}");
}

#[test]
fn skip_training_batches_share_one_skip_count() {
    use rand::SeedableRng;
    use wgdiff::diffusion::{skip_levels, Process};
    use wgdiff::train::skip_batch;
    let process = Process::ddpm();
    let marginals = process.marginals().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let scheme = Some(SkipTraining::Consistent { exponent: 2.0 });
    let mut seen = [0usize; 3];
    for _ in 0..300 {
        let (times, skip) = skip_batch(&process, TimeSampling::Uniform, scheme, 3, 16, &mut rng).unwrap();
        assert_eq!(times.len(), 16);
        seen[skip] += 1;
        for &t in &times {
            assert_eq!(skip_levels(3, marginals.normalized_time(t), 2.0), skip, "t = {t}");
        }
    }
    // k is picked by a uniform time: P(k = 0) = 1 - (2/3)^(1/2) = 0.18, P(k = 2) = (1/3)^(1/2) = 0.58.
    let share = |k: usize| seen[k] as f64 / 300.0;
    assert!(
        (share(0) - 0.184).abs() < 0.07 && (share(2) - 0.577).abs() < 0.09,
        "{seen:?}"
    );

    // Uniform scheme: k uniform, timesteps over the whole process whatever k is.
    let mut counts = [0usize; 3];
    let mut mixed = 0;
    for _ in 0..300 {
        let (times, skip) = skip_batch(
            &process,
            TimeSampling::Uniform,
            Some(SkipTraining::Uniform),
            3,
            8,
            &mut rng,
        )
        .unwrap();
        counts[skip] += 1;
        let ks: Vec<usize> = times
            .iter()
            .map(|&t| skip_levels(3, marginals.normalized_time(t), 2.0))
            .collect();
        mixed += ks.iter().any(|&k| k != ks[0]) as usize;
    }
    assert!(counts.iter().all(|&n| n > 60), "uniform k: {counts:?}");
    assert!(
        mixed > 250,
        "only {mixed} of 300 uniform-scheme batches mix schedule intervals"
    );
    let (_, skip) = skip_batch(&process, TimeSampling::Uniform, None, 3, 8, &mut rng).unwrap();
    assert_eq!(skip, 0);
    let msg = skip_batch(&process, TimeSampling::Uniform, scheme, 1, 8, &mut rng)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("more than one level"), "{msg}");
    assert!(SkipTraining::parse("consistent:0").is_err());
    assert_eq!(SkipTraining::parse("uniform").unwrap(), SkipTraining::Uniform);
}

#[test]
fn a_skip_trained_unet_learns() {
    assert_loss_falls(TrainConfig {
        skip_training: Some(SkipTraining::Consistent { exponent: 2.0 }),
        ..tiny_config("skips", 16)
    });
}

#[test]
fn init_fine_tunes_from_the_ema_weights_with_a_new_skip_path() {
    let config = TrainConfig {
        schedule: Some(BetaSchedule::COSINE),
        objective: Some(Objective::V),
        ..tiny_config("init-source", 2)
    };
    let checkpoint = config.out.join("checkpoint.safetensors");
    let mut source = Trainer::new(gpu(), config).unwrap();
    while !source.finished() {
        block_on(source.step()).unwrap();
    }
    block_on(source.save(&checkpoint)).unwrap();
    let ema: Vec<(String, Vec<f32>)> = source
        .ema_net()
        .unwrap()
        .named_params()
        .iter()
        .map(|(n, t)| (n.clone(), t.to_vec().unwrap()))
        .collect();

    let fine_tune = |skip_type| TrainConfig {
        init: Some(checkpoint.clone()),
        skip_type,
        skip_training: Some(SkipTraining::Consistent { exponent: 2.0 }),
        preset: "mnist".into(), // ignored: the model comes from the checkpoint
        ..tiny_config("init", 1)
    };
    let mut tuned = Trainer::new(gpu(), fine_tune(Some(SkipType::Interpolate))).unwrap();
    assert_eq!(tuned.state.step, 0);
    let ModelConfig::UNet(unet) = &tuned.state.model else {
        panic!("the tiny preset is a U-Net")
    };
    assert_eq!(unet.skip_type, SkipType::Interpolate);
    let params = tuned.net().named_params();
    let new: Vec<&String> = params
        .iter()
        .map(|(n, _)| n)
        .filter(|n| n.starts_with("interp."))
        .collect();
    assert!(!new.is_empty(), "the interpolate path has parameters");
    assert_eq!(params.len(), ema.len() + new.len());
    for (name, want) in &ema {
        let (_, got) = params.iter().find(|(n, _)| n == name).unwrap();
        assert_eq!(
            &got.to_vec().unwrap(),
            want,
            "{name} starts from the source's EMA weights"
        );
    }
    assert!(block_on(tuned.step()).unwrap().is_finite());

    // the source's skip type (zero) is kept when none is given
    let same = Trainer::new(gpu(), fine_tune(None)).unwrap();
    assert_eq!(same.state.model, source.state.model);
    // and so is its process (not the preset's), unless an objective or schedule replaces it
    assert_ne!(source.state.process, Process::ddpm());
    assert_eq!(same.state.process, source.state.process);
    let eps = TrainConfig {
        objective: Some(Objective::Eps),
        ..fine_tune(None)
    };
    assert_eq!(
        Trainer::new(gpu(), eps).unwrap().state.process,
        source.state.process.with_vp(None, Some(Objective::Eps)).unwrap()
    );

    let missing = std::env::temp_dir().join("wgdiff-no-such-checkpoint.safetensors");
    let err = Trainer::new(
        gpu(),
        TrainConfig {
            init: Some(missing.clone()),
            ..fine_tune(None)
        },
    )
    .err()
    .expect("a missing --init checkpoint is an error")
    .to_string();
    assert!(err.contains(&missing.display().to_string()), "{err}");
}

#[test]
fn fid_every_records_mnist_fid_and_keeps_the_best_checkpoint() {
    let config = TrainConfig {
        fid_every: 2,
        fid_samples: 8,
        fid_steps: 2,
        ..tiny_config("fid", 4)
    };
    let best = config.out.join("best.safetensors");
    std::fs::create_dir_all(&config.out).unwrap();
    let tracker = small_mnist_fid();
    let trainer = Trainer::new(gpu(), config.clone()).unwrap();
    let files = Box::new(wgdiff::fsio::Folder(config.out.clone()));
    let mut run = TrainingRun::new(trainer, Some(tracker), files).unwrap();
    let (mut flags, mut steps, mut ends) = (Vec::new(), Vec::new(), Vec::new());
    let mut on_event = |event: TrainEvent| match event {
        TrainEvent::Step { step, .. } => steps.push(step),
        TrainEvent::Fid { record, best: file } => {
            assert_eq!(Some(&record.step), steps.last());
            flags.push(file.is_some());
        }
        TrainEvent::Ended { why, .. } => ends.push(why),
        _ => {}
    };
    while block_on(run.advance(false, &mut on_event)).unwrap() {}
    assert_eq!(steps, [1, 2, 3, 4]);
    assert_eq!(ends, [RunEnd::Completed]);
    let records = &run.trainer().state.fid;
    assert_eq!(
        records.iter().map(|r| r.step).collect::<Vec<_>>(),
        [2, 4],
        "{records:?}"
    );
    assert!(
        records.iter().all(|r| r.fid.is_finite() && r.fid > 0.0),
        "{records:?}"
    );
    assert_eq!(flags, [true, records[1].fid < records[0].fid], "{records:?}");
    let saved = TrainedModel::load(gpu(), &best).unwrap();
    let best_record = best_fid(records).unwrap();
    assert_eq!(saved.state.step, best_record.step);
    assert_eq!(saved.state.fid.last(), Some(&best_record));

    // Only MNIST-shaped models can be scored.
    let ModelConfig::UNet(mut unet) = wgdiff::models::preset("tiny").unwrap() else {
        panic!("the tiny preset is a U-Net")
    };
    unet.image_size = 32;
    let err = Trainer::new(
        gpu(),
        TrainConfig {
            model: Some(ModelConfig::UNet(unet)),
            ..config.clone()
        },
    );
    std::fs::remove_dir_all(&config.out).unwrap();
    let err = err.err().unwrap().to_string();
    assert!(
        err.contains("fid_every") && err.contains("[1, 32, 32]") && err.contains("28x28"),
        "{err}"
    );
}

/// The shipped classifier against 64 test images: MNIST-FID for short test runs.
fn small_mnist_fid() -> FidTracker {
    small_mnist_fid_on(gpu(), 64)
}

/// The shipped classifier on `gpu` against `images` test images, its reference computed
/// without timing kernels.
fn small_mnist_fid_on(gpu: &wgdiff::Gpu, images: usize) -> FidTracker {
    let classifier = Classifier::load(gpu, Path::new(SHIPPED_MNIST_CLASSIFIER)).unwrap();
    let data = "mnist".parse::<DataSource>().unwrap().load(Split::Test).unwrap();
    let reference_images = ReferenceImages {
        data: &data,
        split: Split::Test,
        limit: Some(images),
    };
    let reference = wgdiff::gpu::without_measuring(|| {
        block_on(Reference::compute(
            gpu,
            &classifier,
            reference_images,
            images,
            |_| {},
        ))
    })
    .unwrap();
    FidTracker {
        features: Box::new(classifier),
        reference,
    }
}

/// `tiny_config` scoring 8 samples of 2 steps and drawing grids of 4 at 2 steps, without
/// checkpoints between.
fn scored_config(out: &str, steps: usize) -> TrainConfig {
    TrainConfig {
        fid_samples: 8,
        fid_steps: 2,
        grid_images: 4,
        grid_steps: 2,
        checkpoint_every: 0,
        ..tiny_config(out, steps)
    }
}

#[test]
fn live_scoring_and_grids_time_no_kernel_candidates() {
    // A device that measures (not the tests' deterministic one): the training steps time their
    // new shapes, the scoring's and the grids' take the fixed rule, so the MNIST classifier's
    // convs (the MLP has none) are never timed.
    let gpu = wgdiff::Gpu::new_blocking(wgdiff::AdapterChoice::default()).unwrap();
    assert!(!gpu.is_deterministic());
    let measured = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = measured.clone();
    gpu.tuner()
        .on_measure(move |key| log.lock().unwrap().push(key.to_string()));
    let tracker = small_mnist_fid_on(&gpu, 16);
    let config = TrainConfig {
        preset: "mnist-mlp".into(),
        fid_every: 1,
        sample_every: 1,
        ..scored_config("unmeasured-scoring", 2)
    };
    std::fs::create_dir_all(&config.out).unwrap();
    let trainer = Trainer::new(&gpu, config.clone()).unwrap();
    let files = Box::new(wgdiff::fsio::Folder(config.out.clone()));
    let mut run = TrainingRun::new(trainer, Some(tracker), files).unwrap();
    let (mut scores, mut grids) = (0, 0);
    let mut on_event = |event: TrainEvent| match event {
        TrainEvent::Fid { .. } => scores += 1,
        TrainEvent::Grid { .. } => grids += 1,
        _ => {}
    };
    while block_on(run.advance(false, &mut on_event)).unwrap() {}
    std::fs::remove_dir_all(&config.out).unwrap();
    assert_eq!((scores, grids), (2, 2));
    let measured = measured.lock().unwrap();
    assert!(
        measured.iter().any(|key| key.starts_with("matmul")),
        "the training steps time their matmuls: {measured:?}"
    );
    let convs: Vec<&String> = measured.iter().filter(|key| key.starts_with("conv")).collect();
    assert!(
        convs.is_empty(),
        "scoring timed the classifier's convs: {convs:?}"
    );
}

#[test]
fn live_fid_scores_on_its_clock_with_a_grid_beside_each_score_and_only_on_mnist() {
    let config = TrainConfig {
        fid_share: wgdiff::train::MAX_FID_SHARE,
        ..scored_config("live-fid", 8)
    };
    std::fs::create_dir_all(&config.out).unwrap();
    let trainer = Trainer::new(gpu(), config.clone()).unwrap();
    assert!(trainer.scores_mnist_fid());
    let files = || Box::new(wgdiff::fsio::Folder(config.out.clone()));
    let missing = TrainingRun::new(trainer, None, files())
        .err()
        .unwrap()
        .to_string();
    assert!(missing.contains("fid_share"), "{missing}");
    let trainer = Trainer::new(gpu(), config.clone()).unwrap();
    let mut run = TrainingRun::new(trainer, Some(small_mnist_fid()), files()).unwrap();
    let mut events = Vec::new();
    let mut on_event = |event: TrainEvent| match event {
        TrainEvent::Step { step, .. } => events.push(format!("step {step}")),
        TrainEvent::Fid { record, .. } => events.push(format!("fid {}", record.step)),
        TrainEvent::Grid { step, file, .. } => events.push(format!("grid {step} {file}")),
        _ => {}
    };
    while block_on(run.advance(false, &mut on_event)).unwrap() {}
    let scored: Vec<usize> = run.trainer().state.fid.iter().map(|r| r.step).collect();
    assert!(!scored.is_empty() && !scored.contains(&1), "{events:?}");
    for step in &scored {
        let at = events.iter().position(|e| *e == format!("fid {step}")).unwrap();
        assert_eq!(events[at - 1], format!("step {step}"), "{events:?}");
        assert!(events[at + 1].starts_with(&format!("grid {step} ")), "{events:?}");
        // (the last step's grid is the run's final one, samples.png)
        assert!(*step == 8 || config.out.join(format!("samples_step{step:06}.png")).exists());
    }
    assert!(config.out.join("best.safetensors").exists());

    // fashion (or a model of other images) trains without a tracker, the live MNIST-FID off
    let fashion = TrainConfig {
        data: format!("fashion:{}", wgdiff::data::DEFAULT_MNIST_DIR),
        ..config.clone()
    };
    let trainer = Trainer::new(gpu(), fashion).unwrap();
    assert!(!trainer.scores_mnist_fid());
    assert!(TrainingRun::new(trainer, None, files()).is_ok());
    std::fs::remove_dir_all(&config.out).unwrap();
}

#[test]
fn an_ema_export_samples_like_its_checkpoint_and_only_fine_tunes() {
    let config = tiny_config("export", 2);
    let mut trainer = Trainer::new(gpu(), config.clone()).unwrap();
    for _ in 0..2 {
        block_on(trainer.step()).unwrap();
    }
    let checkpoint = block_on(trainer.capture()).unwrap();
    let export = wgdiff::run_state::sampling_export(&checkpoint, "captured").unwrap();
    assert!(
        export
            .tensors
            .keys()
            .all(|n| n.starts_with("ema.") || n.starts_with("buffer.")),
        "the export keeps EMA weights and buffers only: {:?}",
        export.tensors.keys().collect::<Vec<_>>()
    );
    let bytes = |c: &Checkpoint| c.to_bytes().unwrap().len();
    assert!(
        bytes(&export) * 3 < bytes(&checkpoint),
        "an export is about a quarter"
    );

    let export = Checkpoint::from_bytes(&export.to_bytes().unwrap(), "export").unwrap();
    let draw = |ckpt: &Checkpoint| {
        let model = TrainedModel::from_checkpoint(gpu(), ckpt, "test", None).unwrap();
        let request = SampleRequest::builder(&model.state.model, &model.state.process)
            .sampler("ddim".parse().unwrap())
            .steps(Some(3))
            .count(2)
            .seed(7)
            .build()
            .unwrap();
        let (images, _) = block_on(model.sampling().sample(gpu(), &request, None)).unwrap();
        images.to_vec().unwrap()
    };
    assert_eq!(draw(&export), draw(&checkpoint), "the same samples");

    let data =
        Arc::new(wgdiff::data::mnist(Path::new(wgdiff::data::DEFAULT_MNIST_DIR), Split::Train).unwrap());
    let err = Trainer::resume_with_data(gpu(), &export, "export", data.clone(), &Default::default())
        .err()
        .expect("an export cannot resume")
        .to_string();
    assert!(err.contains("EMA-only export") && err.contains("--init"), "{err}");
    let fine_tune = TrainConfig {
        init: Some("export".into()),
        ..config
    };
    let mut tuned = Trainer::with_data(gpu(), fine_tune, data, Some(&export)).unwrap();
    assert!(block_on(tuned.step()).unwrap().is_finite());
}

#[test]
fn sample_requests_a_model_cannot_honour_are_refused_by_name() {
    let unconditional = wgdiff::models::preset("tiny").unwrap();
    let conditional = wgdiff::models::preset("mnist-mlp").unwrap();
    assert!(conditional.classes().is_some() && unconditional.classes().is_none());
    let ddpm = Process::ddpm();
    let ok = |model| {
        SampleRequest::builder(model, &ddpm)
            .sampler("ddpm".parse().unwrap())
            .steps(Some(3))
            .count(2)
            .skip(SkipPlan::Exponent(2.0))
    };
    let built = ok(&unconditional).build().unwrap();
    assert_eq!((built.steps(), built.count(), built.guidance()), (3, 2, 1.0));
    ok(&conditional).guidance(3.0).class(Some(9)).build().unwrap();
    let refused = |builder: SampleRequestBuilder, names: &str| {
        let err = builder.clone().build().unwrap_err().to_string();
        assert!(err.contains(names), "{builder:?}: {err}");
    };
    for guidance in [f32::INFINITY, f32::NAN, 1e30, -1.0] {
        refused(ok(&conditional).guidance(guidance), "guidance scale");
    }
    refused(ok(&unconditional).guidance(2.0), "class-conditional");
    refused(ok(&unconditional).class(Some(1)), "class-conditional");
    refused(ok(&conditional).class(Some(10)), "classes 0..9");
    for c in [-1.0, f32::NAN, f32::INFINITY] {
        refused(ok(&unconditional).skip(SkipPlan::Exponent(c)), "skip exponent");
    }
    refused(ok(&unconditional).count(0), "count");
    refused(ok(&unconditional).steps(Some(0)), "steps");
    refused(ok(&unconditional).sampler("ald".parse().unwrap()), "does not fit");
}

/// Steps are decided in one place: the default sampler at 50 steps, a named sampler at its own
/// default, a schedule at its length unless steps are given.
#[test]
fn sample_requests_decide_their_steps_in_one_place() {
    let model = wgdiff::models::preset("tiny").unwrap();
    let ddpm = Process::ddpm();
    let request = |builder: SampleRequestBuilder| builder.build().unwrap();
    let default = request(SampleRequest::builder(&model, &ddpm));
    assert_eq!((default.sampler().name(), default.steps()), ("ddpm", 50));
    let named = request(
        SampleRequest::builder(&model, &ddpm)
            .sampler_named(Some("ddpm"), None, None)
            .unwrap(),
    );
    assert_eq!(named.steps(), 1000, "ddpm named: every timestep of the process");
    let dpm = request(
        SampleRequest::builder(&model, &ddpm)
            .sampler_named(Some("dpm-solver++"), None, None)
            .unwrap(),
    );
    assert_eq!(dpm.steps(), 20);
    let schedule = SkipSchedule {
        format: wgdiff::diffusion::skip_schedule::SCHEDULE_FORMAT.into(),
        sampler: "ddim".parse().unwrap(),
        levels: 2,
        skips: vec![1, 0, 0],
        times: Vec::new(),
        timesteps: Vec::new(),
        search: None,
        step_search: None,
    };
    let scheduled = request(SampleRequest::builder(&model, &ddpm).schedule(&schedule));
    assert_eq!((scheduled.sampler().name(), scheduled.steps()), ("ddim", 3));
    assert_eq!(scheduled.skip(), &SkipPlan::PerStep(vec![1, 0, 0]));
    let overridden = request(
        SampleRequest::builder(&model, &ddpm)
            .steps(Some(4))
            .schedule(&schedule),
    );
    assert_eq!(
        overridden.steps(),
        4,
        "given steps win (the sampler then refuses the mismatch)"
    );
    let eta = SampleRequest::builder(&model, &ddpm).sampler_named(None, Some(0.5), None);
    assert!(eta.unwrap_err().to_string().contains("choose --sampler ddim"));
    // a timestep schedule's timesteps reach the request, checked against the model's T
    let timed = SkipSchedule {
        timesteps: vec![999.0, 500.0, 20.0],
        ..schedule.clone()
    };
    let with_timesteps = request(SampleRequest::builder(&model, &ddpm).schedule(&timed));
    assert_eq!(with_timesteps.timesteps(), Some(&[999.0, 500.0, 20.0][..]));
    let past_t = SkipSchedule {
        timesteps: vec![5000.0, 500.0, 20.0],
        ..schedule.clone()
    };
    let err = SampleRequest::builder(&model, &ddpm)
        .schedule(&past_t)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("hold 5000, outside 0..=999"), "{err}");
    let err = SampleRequest::builder(&model, &ddpm)
        .sampler("pc".parse().unwrap())
        .timesteps(Some(vec![999.0, 20.0]))
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("for the ddpm, ddim, dpm-solver++ and dpm-solver++-sde samplers; this request uses pc"),
        "{err}"
    );
}

/// A diverged run (NaN weights, or finite ones blown up past 1e6) never writes over its good
/// checkpoint, keeps it as last-good.safetensors, and resumes from it with a lower lr, warm-up
/// and clipping, reporting what changed.
#[test]
fn divergence_keeps_the_last_good_checkpoint_and_a_resume_may_lower_the_lr() {
    let config = tiny_config("diverge", 6);
    let checkpoint = config.out.join("checkpoint.safetensors");
    let mut trainer = Trainer::new(gpu(), config).unwrap();
    block_on(trainer.step()).unwrap();
    block_on(trainer.save(&checkpoint)).unwrap();
    let good = std::fs::read(&checkpoint).unwrap();
    let (name, weight) = trainer.net().named_params()[0].clone();
    let n = weight.numel();
    for (bad, what) in [(f32::NAN, "NaN or infinite"), (3e38, "|w| = 3e38")] {
        let mut values = vec![0.1; n];
        values[n / 2] = bad;
        weight
            .copy_from(&wgdiff::Tensor::from_f32(gpu(), weight.shape(), &values).unwrap())
            .unwrap();
        let msg = block_on(trainer.save(&checkpoint)).unwrap_err().to_string();
        for part in [
            what,
            &format!("model.{name}"),
            "was not overwritten",
            "(step 1)",
            "last-good.safetensors",
            "--lr 3e-4",
        ] {
            assert!(msg.contains(part), "{msg:?} does not mention {part:?}");
        }
        assert!(
            std::fs::read(&checkpoint).unwrap() == good,
            "the good checkpoint was overwritten"
        );
        let kept = checkpoint.with_file_name("last-good.safetensors");
        assert!(
            std::fs::read(&kept).unwrap() == good,
            "last-good.safetensors is not the good one"
        );
    }
    let changes = ResumeChanges {
        lr: Some(3e-4),
        warmup: Some(20),
        max_grad_norm: Some(0.5),
        steps: Some(4),
        ..ResumeChanges::default()
    };
    let resumed = Trainer::resume(gpu(), &checkpoint, &changes).unwrap();
    let c = &resumed.state.config;
    assert_eq!((c.lr, c.warmup, c.max_grad_norm, c.steps), (3e-4, 20, 0.5, 4));
    assert_eq!(
        resumed.resume_changes,
        [
            "steps 6 -> 4",
            "lr 0.003 -> 0.0003",
            "warmup 0 -> 20",
            "max_grad_norm 1.0 -> 0.5"
        ]
    );
    let msg = Trainer::resume(
        gpu(),
        &checkpoint,
        &ResumeChanges {
            lr: Some(-1.0),
            ..changes
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(msg.contains("lr must be a positive number"), "{msg}");
}

/// Any count is drawn in batches: batch i is the request of that size seeded seed + i, and a
/// count that cannot fit in host memory is refused with the figures before anything runs.
#[test]
fn sampling_in_batches_equals_the_chunks_drawn_alone_and_refuses_what_cannot_fit() {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/assets/models/mnist-small.safetensors"
    ));
    let model = TrainedModel::load(gpu(), path).unwrap();
    let request = SampleRequest::builder(&model.state.model, &model.state.process)
        .sampler("ddim".parse().unwrap())
        .steps(Some(2))
        .count(5)
        .seed(11)
        .build()
        .unwrap();
    let (images, evaluations) =
        block_on(model.sampling().sample_in_batches(gpu(), &request, 2, |_| {})).unwrap();
    assert_eq!((images.len(), evaluations), (5 * 784, 6));
    let mut alone = Vec::new();
    for (count, seed) in [(2, 11), (2, 12), (1, 13)] {
        let part = request.with_count(count).unwrap().with_seed(seed);
        alone.extend(
            block_on(model.sampling().sample(gpu(), &part, None))
                .unwrap()
                .0
                .to_vec()
                .unwrap(),
        );
    }
    assert!(
        images == alone,
        "batched images differ from the batches drawn alone"
    );
    let huge = request.with_count(usize::MAX / 1024).unwrap();
    let msg = block_on(model.sampling().sample_in_batches(gpu(), &huge, 64, |_| {}))
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("images of 1x28x28 need") && msg.contains("GiB are free"),
        "{msg}"
    );
}
