//! The experiments end to end at toy size: adaptive-skip (tiny U-Nets, a baseline and a
//! skip-fine-tuned zero model, every arm sampled round-robin, tables, verdict and plots) and
//! the speed-run (a tiny U-Net and a small MLP trained in interleaved slices, scored, reported).

use crate::common::gpu;
use crate::eval::{pooled_pixel_tracker, PooledPixels};
use std::path::Path;
use wgdiff::checkpoint::Checkpoint;
use wgdiff::data::{mnist, Split, DEFAULT_MNIST_DIR};
use wgdiff::eval::{Reference, ReferenceImages};
use wgdiff::experiment::adaptive_skip::{arms, fine_tune, run, Plan, SkipModel, EXPONENTS};
use wgdiff::experiment::plots::{curves, skip_schedules, Axes, Series};
use wgdiff::experiment::report::{ModelInfo, Report, BASELINE_LABEL};
use wgdiff::experiment::speedrun::{self, Recipe};
use wgdiff::experiment::{write_report, ExperimentReport, Header, Inputs};
use wgdiff::median::median;
use wgdiff::models::SkipType;
use wgdiff::models::{MlpNetConfig, ModelConfig};
use wgdiff::pipeline::TrainedModel;
use wgdiff::run_state::is_sampling_export;
use wgdiff::train::{SkipTraining, TrainConfig, Trainer};

#[test]
fn the_adaptive_skip_experiment_times_a_model_mnist_fid_cannot_score() {
    use wgdiff::experiment::lab::{self, Event, Kind, Setup};
    // (an imported diffusers U-Net on 3x64x64 images: its own weights under every skip type)
    let out = std::env::temp_dir().join(format!("wgdiff-experiment-timings-{}", std::process::id()));
    let mut setup = Setup::new(Kind::AdaptiveSkip, true);
    for (key, value) in [
        ("baseline", "tests/fixtures/diffusers/rgb64"),
        ("samples", "2"),
        ("batch", "2"),
        ("steps", "1"),
        ("out", out.to_str().unwrap()),
    ] {
        setup.set(key, value).unwrap();
    }
    let mut notes = Vec::new();
    let finished = pollster::block_on(lab::run(
        gpu(),
        &setup,
        &Inputs::Disk,
        "wgdiff experiment",
        &mut |event| {
            if let Event::Note(note) = event {
                notes.push(note);
            }
            Ok(())
        },
    ))
    .unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("3x64x64") && n.contains("timings only")),
        "{notes:?}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("adaptive-skip.json")).unwrap()).unwrap();
    let skip_types: Vec<&str> = report["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["skip_type"].as_str().unwrap())
        .collect();
    assert_eq!(skip_types, ["zero", "duplicate", "interpolate"]);
    let arms = report["arms"].as_array().unwrap();
    assert_eq!(
        arms.len(),
        3 * EXPONENTS.len() + 2 * 2 * 3,
        "Tables 1-2, and Table 3 at 5 and 10 steps"
    );
    for arm in arms {
        assert!(arm["scores"].is_null(), "{arm}");
        let seconds = arm["batch_seconds"].as_array().unwrap();
        assert!(seconds.len() == 1 && seconds[0].as_f64().unwrap() > 0.0, "{arm}");
        if arm["eta"].is_null() {
            assert!(arm["speedup_percent"].as_f64().unwrap().is_finite(), "{arm}");
        }
    }
    assert!(
        finished.markdown.contains("Timings only") && finished.markdown.contains("no comparison of quality")
    );
    let written = finished.names();
    assert_eq!(
        written,
        ["adaptive-skip.md", "adaptive-skip.json", "skip-schedules.png"]
    );
    std::fs::remove_dir_all(&out).unwrap();
}

/// A tiny-preset checkpoint trained for `steps` steps as `config` says, saved under `name`.
fn tiny_checkpoint(name: &str, config: TrainConfig) -> std::path::PathBuf {
    let out = std::env::temp_dir().join(format!("wgdiff-experiment-{}-{name}", std::process::id()));
    let path = out.join("checkpoint.safetensors");
    let mut trainer = Trainer::new(gpu(), TrainConfig { out, ..config }).unwrap();
    while !trainer.finished() {
        pollster::block_on(trainer.step()).unwrap();
    }
    pollster::block_on(trainer.save(&path)).unwrap();
    path
}

#[test]
fn the_adaptive_skip_experiment_fills_every_table_and_plot() {
    let gpu = gpu();
    let base = TrainConfig {
        preset: "tiny".into(),
        steps: 2,
        batch: 4,
        ..TrainConfig::default()
    };
    let baseline = tiny_checkpoint("baseline", base);
    // the skip-trained model as the experiment makes a missing one: its sampling-only export
    let zero = baseline.with_file_name("zero.safetensors");
    let mut steps = Vec::new();
    pollster::block_on(fine_tune(
        gpu,
        &baseline,
        (SkipType::Zero, SkipTraining::Consistent { exponent: 2.0 }),
        2,
        &zero,
        |step, _| {
            steps.push(step);
            Ok(())
        },
    ))
    .unwrap();
    assert_eq!(steps, [1, 2]);
    assert!(is_sampling_export(&Checkpoint::load(&zero).unwrap()));
    let load = |label: &str, path: &std::path::Path| SkipModel {
        label: label.into(),
        path: path.display().to_string(),
        model: TrainedModel::load(gpu, path).unwrap(),
    };
    let models = vec![load(BASELINE_LABEL, &baseline), load("Zero", &zero)];
    assert_eq!(
        models[1].skip_training(),
        Some(SkipTraining::Consistent { exponent: 2.0 })
    );
    let plan = Plan {
        samples: 3,
        batch: 2,
        steps: 3,
        table3_steps: vec![2],
        seed: 5,
    };
    let arms = arms(&models, &plan);
    // Tables 1-2: 2 models x 5 exponents; Table 3: 3 etas for each of the two models
    assert_eq!(arms.len(), 2 * EXPONENTS.len() + 2 * 3);
    let test = mnist(DEFAULT_MNIST_DIR, Split::Test).unwrap();
    let images = ReferenceImages {
        data: &test,
        split: Split::Test,
        limit: Some(200),
    };
    let reference = pollster::block_on(Reference::compute(gpu, &PooledPixels, images, 100, |_| {})).unwrap();
    let mut calls = 0;
    let results = pollster::block_on(run(
        gpu,
        &models,
        &arms,
        &plan,
        Some((&PooledPixels, &reference)),
        |done, total, _| {
            assert_eq!(total, 2 * arms.len(), "two rounds (2 + 1 images) per arm");
            assert_eq!(done, calls);
            calls += 1;
            Ok(())
        },
    ))
    .unwrap();
    assert_eq!(calls, 2 * arms.len() + 1);
    assert_eq!(results.len(), arms.len());
    for (arm, result) in arms.iter().zip(&results) {
        let scores = result.scores.as_ref().expect("every arm scored");
        assert_eq!(scores.samples, 3, "{result:?}");
        assert!(scores.fid.is_finite() && scores.fid >= 0.0, "{result:?}");
        assert_eq!(result.batch_seconds.len(), 2);
        // a speed-up exists where the same model and sampler ran at c = 0 with the same steps
        let has_base = arms.iter().any(|a| {
            a.model == arm.model && a.sampler == arm.sampler && a.steps == arm.steps && a.exponent == 0.0
        });
        assert_eq!(result.speedup_percent.is_some(), has_base, "{result:?}");
        if arm.exponent == 0.0 {
            assert_eq!(result.speedup_percent, Some(0.0));
        }
    }
    assert!(
        results
            .iter()
            .filter(|r| r.model == "Zero" && r.exponent == 2.0)
            .any(|r| r.speedup_percent.is_none()),
        "Table 3's c = 2 DDIM arms of the skipping model have no c = 0 counterpart"
    );

    let info = |m: &SkipModel, skip_training: &str| ModelInfo {
        label: m.label.clone(),
        path: m.path.clone(),
        skip_type: "zero".into(),
        skip_training: skip_training.into(),
        levels: m.levels(),
        train_steps: m.model.state.step,
    };
    let report = Report {
        header: header(),
        plan: plan.clone(),
        metric: "pooled-FID".into(),
        reference: "200 mnist/test images".into(),
        models: vec![info(&models[0], "none"), info(&models[1], "consistent:2")],
        arms: results,
    };
    let md = report.markdown();
    for needle in [
        "## Table 1",
        "## Table 2",
        "## Table 3",
        "47.52%",
        "3.17",
        "## Verdict",
        BASELINE_LABEL,
    ] {
        assert!(md.contains(needle), "report lacks {needle}:\n{md}");
    }
    let zero_fid = |label: &str| {
        report
            .arms
            .iter()
            .find(|a| a.model == label && a.exponent == 2.0 && a.eta.is_none())
            .unwrap()
            .scores
            .as_ref()
            .unwrap()
            .fid
    };
    let verdict = report.verdict();
    let expected = if zero_fid("Zero") < zero_fid(BASELINE_LABEL) {
        "lower, as the paper claims"
    } else {
        "NOT lower"
    };
    assert!(verdict.contains(expected), "{verdict}");
    for needle in [
        "KID at c = 2",
        "combined standard deviation",
        "From c = 0 to c = 2",
    ] {
        assert!(verdict.contains(needle), "verdict lacks {needle}:\n{verdict}");
    }

    let series = vec![Series {
        name: "Zero".into(),
        points: vec![(0.0, 10.0, "c=0".into()), (40.0, 12.0, "c=2".into())],
    }];
    let axes = Axes {
        caption: "pooled-FID vs speed-up (test)",
        x: "speed-up (%)",
        y: "pooled-FID",
    };
    let curves = curves(Path::new("a.png"), axes, &series).unwrap();
    let schedules = skip_schedules(Path::new("b.png"), models[0].levels(), &[1.0, 2.0]).unwrap();
    for (name, png) in [("a.png", curves), ("b.png", schedules)] {
        let image = image::load_from_memory(&png).unwrap().to_rgb8();
        assert_eq!(image.dimensions(), (900, 600));
        assert!(image.pixels().any(|p| p.0 != [255, 255, 255]), "{name} is blank");
    }
}

/// A plot's text is drawn by the library from its embedded font (as in a page, where plotters
/// draws none): the caption, the rotated y title and the legend leave dark pixels where they
/// stand, and the same plot is the same bytes.
#[test]
fn plot_text_is_drawn_from_the_embedded_font() {
    let series = vec![
        Series {
            name: "first series".into(),
            points: vec![(0.0, 10.0, "a".into()), (40.0, 12.0, "b".into())],
        },
        Series {
            name: "second".into(),
            points: vec![(10.0, 3.0, "c".into())],
        },
    ];
    let axes = || Axes {
        caption: "MNIST-FID against time",
        x: "seconds",
        y: "MNIST-FID",
    };
    let png = curves(Path::new("t.png"), axes(), &series).unwrap();
    assert_eq!(
        png,
        curves(Path::new("t.png"), axes(), &series).unwrap(),
        "not the same bytes"
    );
    let image = image::load_from_memory(&png).unwrap().to_rgb8();
    let dark = |xs: std::ops::Range<u32>, ys: std::ops::Range<u32>| {
        ys.flat_map(|y| xs.clone().map(move |x| (x, y)))
            .filter(|&(x, y)| image.get_pixel(x, y).0.iter().all(|&c| c < 128))
            .count()
    };
    assert!(dark(300..600, 0..40) > 100, "no caption");
    assert!(dark(0..30, 200..400) > 40, "no y title");
    // the legend sits in the middle of the plotting area's right edge
    assert!(dark(650..890, 250..380) > 100, "no legend");
}

#[test]
fn the_speedrun_interleaves_its_recipes_and_scores_each_at_its_training_times() {
    let gpu = gpu();
    let base = TrainConfig {
        preset: "tiny".into(),
        batch: 4,
        ..TrainConfig::default()
    };
    let small_mlp = MlpNetConfig {
        hidden: 32,
        norm_groups: 4,
        ..MlpNetConfig::mnist()
    };
    let recipes = [
        Recipe {
            key: "unet",
            name: "tiny U-Net",
            idea: "test",
            config: base.clone(),
        },
        Recipe {
            key: "mlp",
            name: "small MLP",
            idea: "test",
            config: TrainConfig {
                model: Some(ModelConfig::Mlp(small_mlp)),
                ..base
            },
        },
    ];
    let plan = speedrun::Plan {
        recipes: Vec::new(),
        budget_seconds: 0.4,
        slice_seconds: 0.1,
        evals: 2,
        fid_samples: 4,
        fid_steps: 2,
    };
    let tracker = pooled_pixel_tracker();
    let mut order: Vec<String> = Vec::new();
    let mut reported = 0;
    let curves = pollster::block_on(speedrun::run(
        gpu,
        &recipes,
        &plan,
        &tracker,
        |recipe, _, point| {
            if order.last().map(String::as_str) != Some(recipe) {
                order.push(recipe.to_string());
            }
            reported += usize::from(point.is_some());
            Ok(())
        },
    ))
    .unwrap();
    assert_eq!(reported, 4, "every evaluation is reported as it happens");
    assert!(order.len() >= 3, "the recipes take turns in slices: {order:?}");
    assert_eq!(curves.len(), 2);
    for (curve, recipe) in curves.iter().zip(&recipes) {
        assert_eq!(curve.recipe, recipe.name);
        assert!(curve.parameters > 0);
        assert_eq!(curve.points.len(), 2, "{}", curve.recipe);
        for (i, p) in curve.points.iter().enumerate() {
            assert!(p.train_seconds >= 0.2 * (i + 1) as f64, "{}: {p:?}", curve.recipe);
            assert!(p.fid.is_finite() && p.loss.is_finite(), "{p:?}");
            assert_eq!(p.images, p.step * 4);
        }
        assert!(curve.points[1].step > curve.points[0].step);
    }
    let report = speedrun::Report {
        header: header(),
        plan,
        curves,
    };
    let dir = std::env::temp_dir().join(format!("wgdiff-speedrun-{}", std::process::id()));
    let written: Vec<String> = write_report(&report, &dir)
        .unwrap()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(written, ["speedrun.md", "speedrun.json", "fid-vs-time.png"]);
    let md = std::fs::read_to_string(dir.join("speedrun.md")).unwrap();
    assert!(
        md.contains("| tiny U-Net |") && md.contains("| small MLP |"),
        "{md}"
    );
    let winner = report.winner().unwrap();
    assert!(md.contains(&format!("**{}**", winner.recipe)), "{md}");
    let plot = image::open(dir.join("fid-vs-time.png")).unwrap().to_rgb8();
    assert!(plot.pixels().any(|p| p.0 != [255, 255, 255]), "blank plot");
    // the candidates of `wgdiff experiment speedrun`: the previous default, then today's
    let candidates = speedrun::recipes();
    assert_eq!(candidates[0].config, speedrun::previous_default());
    assert_eq!(candidates[1].config, TrainConfig::default());
    assert!(candidates.len() >= 4);
    // `--recipes` picks them by key, in the order given, and names an unknown or repeated key
    let keys = |list: &[&str]| list.iter().map(|k| k.to_string()).collect::<Vec<_>>();
    let chosen = speedrun::choose_recipes(&keys(&["lr-decay", "default"])).unwrap();
    assert_eq!(
        chosen.iter().map(|r| r.key).collect::<Vec<_>>(),
        ["lr-decay", "default"]
    );
    assert_eq!(chosen[0].config.lr_decay, 0.3);
    for bad in [&["nope"][..], &["default", "default"]] {
        let e = speedrun::choose_recipes(&keys(bad)).err().unwrap().to_string();
        assert!(
            e.contains("has no recipe") && e.contains("min-snr, lr-decay"),
            "{e}"
        );
    }
}

#[test]
fn median_takes_the_middle_or_the_mean_of_the_middle_two() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    assert!(median(&[]).is_nan());
}

/// The compression tables at toy size: a tiny U-Net as both subjects, every setting a row
/// with sizes, int weights where quantised, a time, a peak and a finite FID; the report's rows
/// found for every setting that names one; the tables and both plots written.
#[test]
fn the_compression_experiment_measures_every_setting_of_both_models() {
    use wgdiff::experiment::compression::{self, Subject, PUBLISHED_DDPM, PUBLISHED_NCSN};
    let gpu = gpu();
    let path = tiny_checkpoint(
        "compression",
        TrainConfig {
            preset: "tiny".into(),
            steps: 1,
            batch: 4,
            ..TrainConfig::default()
        },
    );
    let ckpt = wgdiff::checkpoint::Checkpoint::load(&path).unwrap();
    let subject = |label, published: &'static [(&'static str, f64, f64, f64)]| Subject {
        label,
        checkpoint: &ckpt,
        origin: path.display().to_string(),
        published,
    };
    let subjects = [
        subject("U-Net", &PUBLISHED_DDPM),
        subject("ScoreNet", &PUBLISHED_NCSN),
    ];
    let plan = compression::Plan {
        samples: 4,
        steps: 2,
        batch: 4,
        timing_reps: 1,
        seed: 0,
    };
    let tracker = pooled_pixel_tracker();
    let (mut started, mut measured) = (Vec::new(), Vec::new());
    let rows = pollster::block_on(compression::run(gpu, &subjects, &plan, &tracker, |event| {
        match event {
            compression::Progress::Started(what) => started.push(what.to_string()),
            compression::Progress::Measured(row) => measured.push((row.setting.clone(), row.ms_per_image)),
        }
        Ok(())
    }))
    .unwrap();
    let settings = compression::settings();
    assert_eq!(rows.len(), 2 * settings.len());
    assert_eq!(
        started.len(),
        2 * (settings.len() + 1),
        "each row and each timing is announced"
    );
    // every row is reported when scored (no time yet), then again with its time
    assert_eq!(measured.len(), 2 * rows.len());
    let untimed = measured.iter().filter(|(_, ms)| *ms == 0.0).count();
    assert_eq!(untimed, rows.len(), "{measured:?}");
    for (row, setting) in rows.iter().zip(settings.iter().cycle()) {
        assert_eq!(row.setting, setting.name);
        let quantised = setting.plan.as_ref().is_some_and(|p| p.quantize.is_some());
        assert_eq!(row.packed_weights > 0, quantised, "{}", row.setting);
        assert!(
            row.bytes > 0 && row.gzipped_bytes > 0 && row.peak_bytes > 0,
            "{row:?}"
        );
        assert!(row.ms_per_image > 0.0 && row.fid.is_finite(), "{row:?}");
        if row.model == "ScoreNet" {
            assert_eq!(
                row.published.is_some(),
                setting.report_row.is_some(),
                "{}",
                row.setting
            );
        }
    }
    let report = compression::Report {
        header: header(),
        plan,
        rows,
    };
    let out = path.parent().unwrap().join("report");
    let written: Vec<String> = write_report(&report, &out)
        .unwrap()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    for name in &written {
        assert!(out.join(name).exists(), "{name}");
    }
    let md = report.markdown();
    assert!(
        md.contains("## U-Net") && md.contains("## ScoreNet") && md.contains("Rand 30 Extremes"),
        "{md}"
    );
}

/// The header of a report made by hand.
fn header() -> Header {
    Header {
        date: "2026-11-22T09:00:00Z".into(),
        device: "test device".into(),
        command: "wgdiff experiment".into(),
        wall_seconds: 1.0,
    }
}

#[test]
fn a_comparison_times_every_variant_on_one_seed_and_marks_the_pareto_front() {
    use wgdiff::compress::{compress_checkpoint, CompressPlan, QuantizePlan};
    use wgdiff::diffusion::Sampler;
    use wgdiff::experiment::compare::{self, Event, Variant};
    use wgdiff::ops::WeightBits;
    use wgdiff::pipeline::SampleRequest;
    use wgdiff::DType;
    // (a device of its own: peak device memory is read from its pool, which other tests
    // allocating and freeing on the shared device would move; a variant read 0 bytes so)
    let gpu = &crate::common::own_gpu();
    gpu.set_poison(true);
    let path = tiny_checkpoint(
        "compare",
        TrainConfig {
            preset: "tiny".into(),
            steps: 1,
            batch: 4,
            ..TrainConfig::default()
        },
    );
    let origin = path.display().to_string();
    let float = wgdiff::checkpoint::Checkpoint::load(&path).unwrap();
    let int8 = CompressPlan {
        prune: None,
        quantize: Some(QuantizePlan {
            bits: WeightBits::Int8,
            per_channel: true,
        }),
        seed: 0,
    };
    let int8 = compress_checkpoint(gpu, &float, &origin, &int8).unwrap().0;
    let state = TrainedModel::from_checkpoint(gpu, &float, &origin, None)
        .unwrap()
        .state;
    let request = |sampler: &str, steps: usize, precision: DType| {
        SampleRequest::for_state(&state)
            .sampler(sampler.parse::<Sampler>().unwrap())
            .steps(Some(steps))
            .precision(precision)
            .build()
            .unwrap()
    };
    let variant =
        |label: &str, checkpoint: &wgdiff::checkpoint::Checkpoint, request: SampleRequest| Variant {
            label: label.into(),
            checkpoint: checkpoint.clone(),
            origin: origin.clone(),
            skip_type: None,
            request,
        };
    let variants = [
        variant("ddpm 4", &float, request("ddpm", 4, DType::F32)),
        variant("ddim 2", &float, request("ddim", 2, DType::F32)),
        variant("ddpm 4 int8", &int8, request("ddpm", 4, DType::F32)),
        variant("ddim 2 f16", &float, request("ddim", 2, DType::F16)),
    ];
    let plan = compare::Plan {
        images: 2,
        rounds: 1,
        fid_samples: 4,
        batch: 4,
        seed: 3,
    };
    let tracker = pooled_pixel_tracker();
    let (mut steps, mut last_x, mut progress, mut row_events) =
        (vec![0; 4], vec![Vec::new(); 4], Vec::new(), 0);
    let rows = pollster::block_on(compare::run(
        gpu,
        &variants,
        &plan,
        Some(&tracker),
        &mut |event| {
            match event {
                Event::Step {
                    variant,
                    step,
                    seconds,
                } => {
                    assert!(seconds >= 0.0);
                    steps[variant] += 1;
                    last_x[variant] = step.x.to_vec()?;
                }
                Event::Progress { done, total, .. } => progress.push((done, total)),
                Event::Row { .. } => row_events += 1,
            }
            Ok(())
        },
    ))
    .unwrap();
    assert_eq!(steps, [4, 2, 4, 2], "every step of each recorded run is reported");
    assert_eq!(row_events, 8, "every row once timed and once scored");
    assert!(progress.windows(2).all(|w| w[0].0 <= w[1].0), "{progress:?}");
    assert_eq!(
        progress.first(),
        Some(&(0, 4 * 3)),
        "2 rounds and the FID of 4 variants"
    );
    let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["ddpm 4", "ddim 2", "ddpm 4 int8", "ddim 2 f16"]);
    for (row, want) in rows.iter().zip([4, 2, 4, 2]) {
        assert_eq!((row.steps, row.evaluations), (want, want), "{row:?}");
        assert!(row.ms_per_step > 0.0 && row.ms_per_image > 0.0, "{row:?}");
        assert!(
            row.peak_bytes > 0 && row.fid.is_some_and(f64::is_finite),
            "{row:?}"
        );
    }
    assert_eq!(rows[0].model_bytes, rows[1].model_bytes, "one model");
    assert!(
        rows[2].model_bytes < rows[0].model_bytes,
        "int8 weights are smaller: {} vs {}",
        rows[2].model_bytes,
        rows[0].model_bytes
    );
    // The f16 run is not the f32 run of the same settings (its accuracy is the f16 ops' tests').
    let gap = last_x[1]
        .iter()
        .zip(&last_x[3])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        gap > 0.0 && last_x[3].iter().all(|v| v.is_finite()),
        "f16 against f32: largest gap {gap}"
    );
    // The front: a row is on it exactly when no other is as fast and as good and better in one.
    for (i, row) in rows.iter().enumerate() {
        let dominated = rows.iter().enumerate().any(|(j, o)| {
            let (t, f, to, fo) = (row.ms_per_image, row.fid.unwrap(), o.ms_per_image, o.fid.unwrap());
            j != i && to <= t && fo <= f && (to < t || fo < f)
        });
        assert_eq!(row.pareto, !dominated, "{row:?}");
    }
    let md = compare::markdown(&rows, &plan, "lavapipe");
    let fid_heading = format!("| MNIST-FID ({} samples) |", plan.fid_samples);
    assert!(
        md.contains("| ddpm 4 int8 |") && md.contains("Pareto front") && md.contains(&fid_heading),
        "{md}"
    );
    let png = compare::plot_png(&rows, plan.fid_samples, std::path::Path::new("compare.png")).unwrap();
    assert!(image::load_from_memory(&png).is_ok(), "the plot is a PNG");
}

#[test]
fn the_pareto_front_keeps_what_no_other_variant_beats_in_time_and_fid() {
    use wgdiff::experiment::compare::{mark_pareto, Row};
    let row = |ms: f64, fid: Option<f64>| Row {
        ms_per_image: ms,
        fid,
        ..Row::default()
    };
    let mut rows = [
        row(10.0, Some(50.0)),
        row(20.0, Some(40.0)),
        row(25.0, Some(45.0)),
        row(10.0, Some(60.0)),
    ];
    mark_pareto(&mut rows);
    let front: Vec<bool> = rows.iter().map(|r| r.pareto).collect();
    assert_eq!(front, [true, true, false, false]);
    // without FID only time ranks
    let mut rows = [row(10.0, None), row(5.0, None)];
    mark_pareto(&mut rows);
    assert_eq!([rows[0].pareto, rows[1].pareto], [false, true]);
}

/// The step search at toy size: the searched timesteps land closer to the many-step run than the
/// log-SNR grid they start from, the schedule file reproduces the distance the search measured
/// and samples from the command line, and every spacing is timed and scored beside the bar.
#[test]
fn the_step_search_finds_timesteps_nearer_the_many_step_run_and_scores_every_spacing() {
    use wgdiff::diffusion::SkipSchedule;
    use wgdiff::experiment::lab::{self, Kind, Setup};
    use wgdiff::experiment::step_search::{discrepancy, probe_samples};
    use wgdiff::pipeline::SampleRequest;
    let model = tiny_checkpoint(
        "step-search",
        TrainConfig {
            preset: "tiny".into(),
            steps: 2,
            batch: 4,
            ..TrainConfig::default()
        },
    );
    let out = std::env::temp_dir().join(format!("wgdiff-experiment-step-search-{}", std::process::id()));
    let mut setup = Setup::new(Kind::StepSearch, true);
    for (key, value) in [
        ("model", model.to_str().unwrap()),
        ("steps", "3"),
        ("reference-steps", "8"),
        ("probe-images", "4"),
        ("sweeps", "1"),
        ("baseline-steps", "3"),
        ("samples", "4"),
        ("batch", "4"),
        ("out", out.to_str().unwrap()),
    ] {
        setup.set(key, value).unwrap();
    }
    let finished = pollster::block_on(lab::run(
        gpu(),
        &setup,
        &Inputs::Disk,
        "wgdiff experiment",
        &mut |_| Ok(()),
    ))
    .unwrap();
    let name = "schedule-dpm-solver++-3-searched.json";
    let written = finished.names();
    assert_eq!(
        written,
        ["step-search.md", "step-search.json", name, "time-vs-fid.png"]
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("step-search.json")).unwrap()).unwrap();
    let searched = &report["searched"][0];
    let figure = |key: &str| searched[key].as_f64().unwrap();
    assert_eq!(
        searched["runs"],
        3 + 2 * 2,
        "3 spacings, then 2 moves of 2 interior points"
    );
    let nearest_spacing = searched["spacings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[1].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    // (no worse than the nearest spacing; the start here is uniform, not the sampler's own
    // log-SNR spacing, so the file's reproduction below fails if its timesteps are not walked)
    assert!(figure("discrepancy") <= nearest_spacing, "{searched}");
    assert_ne!(searched["start"], "log-snr", "{searched}");
    let arms: Vec<(&str, f64, f64)> = report["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let (fid, ms) = (
                a["scores"]["fid"].as_f64().unwrap(),
                a["ms_per_image"].as_f64().unwrap(),
            );
            (a["arm"]["schedule"].as_str().unwrap(), fid, ms)
        })
        .collect();
    let schedules: Vec<&str> = arms.iter().map(|a| a.0).collect();
    assert_eq!(
        schedules,
        [
            "ddpm",
            "uniform",
            "quadratic",
            "log-snr",
            "searched",
            "searched-sde"
        ]
    );
    assert!(
        arms.iter().all(|&(_, fid, ms)| fid.is_finite() && ms > 0.0),
        "{arms:?}"
    );
    assert!(finished.markdown.contains("Align Your Steps") && finished.markdown.contains("## Verdict"));

    // the file's timesteps give the probe batch the distance the search reported
    let schedule = SkipSchedule::load(&out.join(name)).unwrap();
    assert_eq!((schedule.timesteps.len(), schedule.timesteps[0]), (3, 999.0));
    let record = schedule.step_search.as_ref().expect("the search's record");
    assert_eq!(record.discrepancy, figure("discrepancy"));
    let trained = TrainedModel::load(gpu(), &model).unwrap();
    let probe = SampleRequest::for_state(&trained.state).count(4).seed(0);
    let reference_run = probe
        .clone()
        .build()
        .unwrap()
        .with_sampler(schedule.sampler, 8)
        .unwrap();
    let sample = |request| pollster::block_on(probe_samples(gpu(), trained.sampling(), &request)).unwrap();
    let again = discrepancy(
        &sample(probe.schedule(&schedule).build().unwrap()),
        &sample(reference_run),
    );
    assert!(
        (again - record.discrepancy).abs() <= 1e-9 * record.discrepancy,
        "{again} vs {}",
        record.discrepancy
    );

    let samples = out.join("samples.png");
    let status = crate::common::wgdiff()
        .args(["sample", "--count", "2", "--checkpoint", model.to_str().unwrap()])
        .args([
            "--skip-schedule",
            out.join(name).to_str().unwrap(),
            "--out",
            samples.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(status.success() && samples.exists());
    std::fs::remove_dir_all(&out).unwrap();
}
