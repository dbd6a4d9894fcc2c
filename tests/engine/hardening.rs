//! The second hardening round's findings, each a test that failed before its fix: sampler
//! settings a schedule file cannot use, non-finite samples as images, a diverged run's finite
//! weights, device counts without bound, errors that point at the wrong input, counts of zero,
//! and a display probe's noise on a machine without a display.

use crate::common::{gpu, wgdiff};
use pollster::block_on;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wgdiff::checkpoint::Checkpoint;
use wgdiff::data::{grid_png, mnist, save_grid, GridLayout, Split, DEFAULT_MNIST_DIR};
use wgdiff::diffusion::{Objective, SkipSchedule};
use wgdiff::pipeline::DEFAULT_CHECKPOINT;
use wgdiff::train::{ResumeChanges, TrainConfig, Trainer};

/// A fresh folder for one test.
fn fresh_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wgdiff-hardening-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `wgdiff args`, which must fail without a panic and say `says`; returns its stderr.
fn refused(args: &[&str], says: &str) -> String {
    let out = wgdiff().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} succeeded: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert!(stderr.contains(says), "{args:?} should say {says:?}: {stderr}");
    stderr
}

fn schedule_json(sampler: &str) -> String {
    format!(r#"{{"format": "wgdiff skip schedule", "sampler": {sampler}, "levels": 3, "skips": [2, 1, 0]}}"#)
}

#[test]
fn a_schedule_file_with_settings_its_sampler_cannot_use_is_refused_when_read() {
    for (sampler, says) in [
        (
            r#"{"name": "pc", "snr": 1e30, "corrector_steps": 1}"#,
            "snr = 1e30 is outside (0, 1]",
        ),
        (
            r#"{"name": "pc", "snr": 1e10, "corrector_steps": 1}"#,
            "snr = 1e10",
        ),
        (
            r#"{"name": "pc", "snr": 0.16, "corrector_steps": 100000}"#,
            "corrector_steps = 100000",
        ),
        (
            r#"{"name": "ddim", "eta": -1, "spacing": "uniform"}"#,
            "eta = -1 is outside [0, 1]",
        ),
        (
            r#"{"name": "ald", "steps_per_level": 0, "step_size": 2e-5}"#,
            "steps_per_level = 0",
        ),
        (
            r#"{"name": "ode-rk45", "rtol": 0, "atol": 1e-5}"#,
            "rtol = 0 is outside (0, 1]",
        ),
    ] {
        let err = SkipSchedule::from_json(schedule_json(sampler).as_bytes(), "s.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("s.json") && err.contains(says), "{sampler}: {err}");
    }
    let fine = r#"{"name": "pc", "snr": 0.16, "corrector_steps": 1}"#;
    SkipSchedule::from_json(schedule_json(fine).as_bytes(), "s.json").unwrap();
    // `wgdiff sample` refuses it when it reads the file: no image of zeros is written
    let dir = fresh_dir("schedule");
    let (file, out) = (dir.join("pc.json"), dir.join("samples.png"));
    std::fs::write(
        &file,
        schedule_json(r#"{"name": "pc", "snr": 1e30, "corrector_steps": 1}"#),
    )
    .unwrap();
    let args = [
        "sample",
        "--skip-schedule",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    refused(&args, "snr = 1e30");
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn non_finite_samples_are_never_written_as_an_image() {
    let dir = fresh_dir("nan-grid");
    let path = dir.join("samples.png");
    let mut images = vec![0.5f32; 2 * 4 * 4];
    images[7] = f32::NAN;
    images[9] = f32::INFINITY;
    let shape = [2, 1, 4, 4];
    let err = grid_png(&images, shape, GridLayout::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("2 of its 32 values are NaN or infinite"), "{err}");
    let err = save_grid(&path, &images, shape, GridLayout::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(path.to_str().unwrap()) && err.contains("no image was written"),
        "{err}"
    );
    assert!(!path.exists());
    images[7] = 0.0;
    images[9] = 0.0;
    save_grid(&path, &images, shape, GridLayout::default()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ckpt` with every EMA weight multiplied by `factor`, written to `path`.
fn save_scaled(mut ckpt: Checkpoint, factor: f32, path: &Path) {
    for (name, t) in ckpt.tensors.iter_mut() {
        if name.starts_with("ema.") {
            t.data.iter_mut().for_each(|v| *v *= factor);
        }
    }
    ckpt.save(path).unwrap();
}

/// `wgdiff sample` of `model` (2 images, 2 steps, to `out`), refused as a diverged run: its stderr.
fn sampling_refused_as_diverged(model: &Path, out: &Path) -> String {
    let args = [
        "sample",
        "--checkpoint",
        model.to_str().unwrap(),
        "--count",
        "2",
        "--steps",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    refused(&args, "diverged run")
}

#[test]
fn blown_up_finite_weights_are_refused_at_load_instead_of_sampling_black_images() {
    let dir = fresh_dir("blown-up");
    let out = dir.join("samples.png");
    // (doubled weights pass every NaN and size check; those of the eps U-Net shipped until
    // 2026-12-07, |w| <= 2.7, sampled 86% black pixels. The shipped U-Net predicts v, which at
    // pure noise converts to about x as noise whatever the network says: judged as noise, its
    // doubled weights passed)
    for factor in [2.0, 10.0] {
        let model = dir.join(format!("x{factor}.safetensors"));
        save_scaled(
            Checkpoint::load(Path::new(DEFAULT_CHECKPOINT)).unwrap(),
            factor,
            &model,
        );
        let stderr = sampling_refused_as_diverged(&model, &out);
        assert!(
            stderr.contains(model.to_str().unwrap())
                && stderr.contains("predicts v of RMS")
                && stderr.contains("largest weight: |w| ="),
            "{stderr}"
        );
        assert!(!out.exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An eps network is judged by the noise it predicts (the shipped U-Net above, a v network, by
/// its v): a one-step `tiny` eps run with its EMA weights times 10 is refused naming noise.
#[test]
fn blown_up_eps_weights_are_judged_as_noise() {
    let dir = fresh_dir("blown-up-eps");
    let config = TrainConfig {
        preset: "tiny".into(),
        steps: 1,
        batch: 4,
        objective: Some(Objective::Eps),
        out: dir.clone(),
        ..TrainConfig::default()
    };
    let mut trainer = Trainer::new(gpu(), config).unwrap();
    block_on(trainer.step()).unwrap();
    let model = dir.join("x10.safetensors");
    save_scaled(block_on(trainer.capture()).unwrap(), 10.0, &model);
    let stderr = sampling_refused_as_diverged(&model, &dir.join("samples.png"));
    assert!(stderr.contains("predicts noise of RMS"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resuming_broken_weights_blames_the_checkpoint_not_the_learning_rate() {
    let config = TrainConfig {
        preset: "tiny".into(),
        steps: 3,
        batch: 4,
        out: fresh_dir("resume-broken"),
        ..TrainConfig::default()
    };
    let mut trainer = Trainer::new(gpu(), config.clone()).unwrap();
    block_on(trainer.step()).unwrap();
    let mut ckpt = block_on(trainer.capture()).unwrap();
    let output = ckpt
        .tensors
        .iter_mut()
        .find(|(name, _)| name.starts_with("model.") && name.contains("out") && name.ends_with("weight"))
        .expect("the U-Net's output conv");
    output.1.data.iter_mut().for_each(|v| *v = 1e30);
    let data = Arc::new(mnist(DEFAULT_MNIST_DIR, Split::Train).unwrap());
    let mut resumed = Trainer::resume_with_data(
        gpu(),
        &ckpt,
        "broken.safetensors",
        data,
        &ResumeChanges::default(),
    )
    .unwrap();
    let err = block_on(resumed.step()).unwrap_err().to_string();
    assert!(
        err.contains("first step after resuming broken.safetensors") && err.contains("weights are broken"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&config.out);
}

#[test]
fn device_counts_beyond_the_batch_or_any_machine_are_refused_before_a_device_opens() {
    let started = std::time::Instant::now();
    refused(
        &["train", "--preset", "tiny", "--batch", "4", "--devices", "100000"],
        "at most 64 devices",
    );
    refused(
        &[
            "train",
            "--preset",
            "tiny",
            "--batch",
            "4",
            "--devices",
            "8",
            "--steps",
            "1",
        ],
        "cannot give every one of 8 replicas",
    );
    // (opening 100,000 devices took 19 s and 4 GB before; this guard is minutes wide)
    assert!(started.elapsed().as_secs() < 600);
}

#[test]
fn data_errors_name_the_data_flag_and_the_folder_to_give() {
    let dir = fresh_dir("data-errors");
    let out = dir.join("run");
    let out_arg = out.to_str().unwrap();
    let stderr = refused(
        &[
            "train", "--preset", "cifar10", "--data", "mnist", "--steps", "1", "--batch", "2", "--out",
            out_arg,
        ],
        "--data mnist",
    );
    assert!(
        stderr.contains("1x28x28") && stderr.contains("3x32x32"),
        "{stderr}"
    );
    let file = format!("mnist:{DEFAULT_MNIST_DIR}/train-images.idx3-ubyte.gz");
    let stderr = refused(&["train", "--data", &file, "--out", out_arg], "is a file");
    assert!(
        stderr.contains(&format!("--data mnist:{DEFAULT_MNIST_DIR}")),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn counts_of_zero_are_refused_instead_of_printing_figures_of_nothing() {
    refused(
        &["bench", "matmul", "--shapes", "8x8x8", "--reps", "0"],
        "must be at least 1",
    );
    refused(
        &["profile", "--preset", "tiny", "--batch", "2", "--steps", "0"],
        "must be at least 1",
    );
}

#[test]
fn a_checkpoint_for_a_workload_that_builds_its_preset_is_refused() {
    refused(
        &[
            "profile",
            "unet",
            "--checkpoint",
            "assets/models/mnist-small.safetensors",
        ],
        "--checkpoint is for the sample workload",
    );
}

#[test]
fn a_machine_without_a_display_prints_no_error_line() {
    let out = wgdiff()
        .arg("info")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("NODEVICE_SELECT")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn a_report_that_fails_half_way_replaces_none_of_the_earlier_one() {
    let dir = fresh_dir("all-or-none");
    std::fs::write(dir.join("report.md"), b"earlier").unwrap();
    let entries = |dir: &Path| std::fs::read_dir(dir).unwrap().count();
    // (what a full disk did: the Markdown written, then the plot failing)
    let failed = wgdiff::fsio::write_all_or_none(&dir, |staging| {
        std::fs::write(staging.join("report.md"), b"new").unwrap();
        Err(wgdiff::Error::Io {
            what: "writing plot.png".into(),
            reason: "No space left on device".into(),
        })
    });
    assert!(failed.unwrap_err().to_string().contains("No space left"));
    assert_eq!(std::fs::read(dir.join("report.md")).unwrap(), b"earlier");
    assert_eq!(entries(&dir), 1, "the staging folder is gone");
    let names = wgdiff::fsio::write_all_or_none(&dir, |staging| {
        std::fs::write(staging.join("report.md"), b"new").unwrap();
        std::fs::write(staging.join("plot.png"), b"png").unwrap();
        Ok(vec!["report.md".into(), "plot.png".into()])
    })
    .unwrap();
    assert_eq!(names, ["report.md", "plot.png"]);
    assert_eq!(std::fs::read(dir.join("report.md")).unwrap(), b"new");
    assert_eq!(entries(&dir), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kernel_tuning_is_announced_and_sample_measures_only_with_tune() {
    // (a fresh cache: the first sampling step measures kernel variants, which took minutes in
    // silence on a CPU adapter; a tiny U-Net's few shapes keep this test short)
    let cache = fresh_dir("tuning-cache");
    let out = cache.join("samples.png");
    let checkpoint = cache.join("tiny.safetensors");
    let trainer = Trainer::new(
        gpu(),
        TrainConfig {
            preset: "tiny".into(),
            steps: 1,
            batch: 2,
            out: cache.clone(),
            ..TrainConfig::default()
        },
    )
    .unwrap();
    block_on(trainer.save(&checkpoint)).unwrap();
    let run = |global: &[&str], sample: &[&str]| {
        let output = wgdiff()
            .env_remove("WGDIFF_DETERMINISTIC")
            .args(global)
            .args(["sample", "--checkpoint", checkpoint.to_str().unwrap()])
            .args(["--count", "2", "--steps", "1", "--out", out.to_str().unwrap()])
            .args(sample)
            .env("WGDIFF_CACHE_DIR", &cache)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{stderr}");
        stderr
    };
    let cache_files = || {
        std::fs::read_dir(&cache)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("autotune-")
            })
            .count()
    };
    // A sampling run is too short to repay the measuring: only --tune measures.
    let untuned = run(&[], &[]);
    assert!(!untuned.contains("tuning:"), "{untuned}");
    assert_eq!(
        cache_files(),
        0,
        "sample without --tune wrote an autotune cache file"
    );
    let tuned = run(&[], &["--tune"]);
    assert!(
        tuned.contains("tuning: measuring kernel variants") && tuned.contains("--deterministic skips"),
        "{tuned}"
    );
    assert_eq!(cache_files(), 1);
    assert!(!run(&["--deterministic"], &["--tune"]).contains("tuning:"));
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn long_sampling_shows_progress_where_stderr_is_not_a_terminal() {
    // (a bar draws nothing into a pipe or a log file: `sample --count 100000` ran 400 s silent)
    let dir = fresh_dir("progress-lines");
    let out = dir.join("samples.png");
    let output = wgdiff()
        .args([
            "sample",
            "--count",
            "24",
            "--batch",
            "8",
            "--steps",
            "1",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("8/24 images  elapsed"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
