//! The speed ladders: the ConvNeXt net computes the same outputs and gradients on every rung,
//! and `experiment ladder`'s machinery at toy size (turns, per-round ratios, report files).

use crate::common::{assert_close, download, gpu};
use crate::eval::pooled_pixel_tracker;
use wgdiff::experiment::ladder::{arms, run_ablation, run_ladder, Arm, Plan, Progress, RUNGS};
use wgdiff::experiment::ladder_report::Report;
use wgdiff::experiment::{write_report, Header};
use wgdiff::median::median;
use wgdiff::models::{ConvNextKernels, ConvNextNet, ConvNextNetConfig};
use wgdiff::ops::blocks::ConvNextImpl;
use wgdiff::ops::random::Rng;
use wgdiff::ops::ConvImpl;
use wgdiff::DType;

/// A ConvNeXt net small enough for tests: 8x8 images, widths 8 and 16.
fn small_net_config() -> ConvNextNetConfig {
    ConvNextNetConfig {
        image_size: 8,
        widths: [8, 16],
        time_sinusoid_dim: 8,
        time_embed_dim: 16,
        ..ConvNextNetConfig::mnist()
    }
}

#[test]
fn the_convnext_net_gives_the_same_outputs_and_gradients_on_every_rung() {
    let gpu = gpu();
    assert_eq!(ConvNextNetConfig::mnist().parameter_count(), 149_185);
    let config = small_net_config();
    let net = ConvNextNet::new(gpu, &config, 7).unwrap();
    let params = net.params();
    assert_eq!(
        params.iter().map(|p| p.numel()).sum::<usize>(),
        config.parameter_count()
    );
    let mut rng = Rng::new(11);
    let x = rng.normal(gpu, &[2, 1, 8, 8], 0.0, 1.0, DType::F32).unwrap();
    let dy = rng.normal(gpu, &[2, 1, 8, 8], 0.0, 1.0, DType::F32).unwrap();
    let t = [37.0, 610.0];
    // the implicit GEMM everywhere, also inside the fused block's backward
    let tiled_fused = ConvNextKernels {
        conv: ConvImpl::Tiled,
        block: ConvNextImpl::Fused,
    };
    let mut reference: Option<(Vec<f64>, Vec<Vec<f64>>)> = None;
    for kernels in RUNGS.iter().map(|r| r.kernels).chain([tiled_fused]) {
        params.iter().for_each(|p| p.set_grad(None));
        let y = net.forward(&x, &t, kernels).unwrap();
        wgdiff::backward(&y.mul(&dy).unwrap().sum_all().unwrap()).unwrap();
        let out = download(&y);
        let grads: Vec<Vec<f64>> = params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let g = download(
                    &p.grad()
                        .unwrap_or_else(|| panic!("{kernels:?}: parameter {i} has no gradient")),
                );
                assert!(
                    g.iter().all(|v| v.is_finite()) && g.iter().any(|&v| v != 0.0),
                    "{kernels:?}: parameter {i}'s gradient is zero or not finite"
                );
                g
            })
            .collect();
        match &reference {
            None => reference = Some((out, grads)),
            Some((want, want_grads)) => {
                assert_close(&format!("{kernels:?} output"), &out, want, 1e-4);
                for (i, (g, w)) in grads.iter().zip(want_grads).enumerate() {
                    assert_close(&format!("{kernels:?} gradient of parameter {i}"), g, w, 1e-3);
                }
            }
        }
    }
    let Err(wrong) = net.forward(&x, &[1.0], tiled_fused) else {
        panic!("one time for two images must be an error");
    };
    assert!(wrong.to_string().contains("one time per image"), "{wrong}");
}

#[test]
fn the_ladder_interleaves_its_rungs_and_rows_and_reports_medians_of_per_round_ratios() {
    let gpu = gpu();
    let plan = Plan {
        convnext: ConvNextNetConfig {
            widths: [8, 16],
            ..ConvNextNetConfig::mnist()
        },
        ladder_batch: 2,
        ladder_reps: 2,
        preset: "tiny".into(),
        batch: 2,
        train_seconds: 0.3,
        fid_samples: 4,
        fid_steps: 2,
    };
    let mut rung_order = Vec::new();
    let rungs = pollster::block_on(run_ladder(gpu, &RUNGS, &plan, |event| {
        if let Progress::RungStep { rung, .. } = event {
            rung_order.push(rung.to_string());
        }
        Ok(())
    }))
    .unwrap();
    let names: Vec<&str> = RUNGS.iter().map(|r| r.name).collect();
    assert_eq!(
        rung_order,
        [names.clone(), names.clone()].concat(),
        "one step per rung in turn"
    );
    assert_eq!(rungs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), names);
    for (i, r) in rungs.iter().enumerate() {
        assert_eq!(r.step_ms.len(), plan.ladder_reps, "{}", r.name);
        assert_eq!(r.median_ms, median(&r.step_ms));
        // ratios of the same round's steps, then their median
        let paired = |base: &[f64]| {
            median(
                &base
                    .iter()
                    .zip(&r.step_ms)
                    .map(|(b, t)| b / t)
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(r.speedup_vs_first, paired(&rungs[0].step_ms));
        assert_eq!(r.speedup_vs_previous, paired(&rungs[i.saturating_sub(1)].step_ms));
        let loss = rungs[0].check_loss;
        assert!(
            (r.check_loss - loss).abs() <= 1e-4 * loss.abs(),
            "{}: {} vs {loss}",
            r.name,
            r.check_loss
        );
    }
    assert_eq!(rungs[0].speedup_vs_first, 1.0);

    let tracker = pooled_pixel_tracker();
    let all = arms(&plan).unwrap();
    assert_eq!(
        all.iter().map(|a| a.name).collect::<Vec<_>>(),
        [
            "baseline",
            "mixed precision",
            "naive conv",
            "im2col conv",
            "tiled conv",
            "1x1 bottlenecks",
            "fewer levels"
        ]
    );
    let changed = |a: &Arm| {
        let base = &all[0];
        (
            a.config.precision != base.config.precision,
            a.conv != base.conv,
            a.config.model.is_some(),
        )
    };
    let switches: Vec<_> = all.iter().map(changed).collect();
    assert_eq!(switches[0], (false, false, false));
    assert_eq!(
        switches[1],
        (true, false, false),
        "mixed precision switches the precision only"
    );
    for s in &switches[2..5] {
        assert_eq!(*s, (false, true, false), "the conv rows switch the kernel only");
    }
    for s in &switches[5..] {
        assert_eq!(*s, (false, false, true), "the last rows switch the model only");
    }
    // Run the baseline, a kernel row and a model row.
    let arms = [all[0].clone(), all[2].clone(), all[6].clone()];
    let mut trained: Vec<String> = Vec::new();
    let mut scored = 0;
    let rows = pollster::block_on(run_ablation(gpu, &arms, &plan, &tracker, |event| {
        match event {
            Progress::Trained { row, .. } => trained.push(row.to_string()),
            Progress::Scored { .. } => scored += 1,
            _ => {}
        }
        Ok(())
    }))
    .unwrap();
    assert_eq!(scored, arms.len());
    assert_eq!(
        trained[..3],
        ["baseline", "naive conv", "fewer levels"],
        "a step each in turn"
    );
    assert_eq!(
        rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        arms.iter().map(|a| a.name).collect::<Vec<_>>()
    );
    let baseline = &rows[0];
    for r in &rows {
        assert_eq!(r.steps, r.step_ms.len());
        assert_eq!(r.steps, trained.iter().filter(|name| **name == r.name).count());
        assert!(
            r.steps >= 1 && r.train_seconds >= plan.train_seconds,
            "{}: {r:?}",
            r.name
        );
        assert!((r.train_seconds - r.step_ms.iter().sum::<f64>() / 1e3).abs() < 1e-9);
        assert_eq!(r.median_ms, median(&r.step_ms));
        assert_eq!(
            r.step_rounds,
            (0..r.steps).collect::<Vec<_>>(),
            "a step every round until done"
        );
        let common = r.steps.min(baseline.steps);
        let ratios: Vec<f64> = (0..common).map(|i| baseline.step_ms[i] / r.step_ms[i]).collect();
        assert_eq!(r.speedup, median(&ratios), "{}", r.name);
        // (no memory checks: the tests share the device's pool across threads)
        assert!(r.fid.is_finite() && r.final_loss.is_finite(), "{}: {r:?}", r.name);
    }
    assert_eq!(baseline.speedup, 1.0);
    assert_eq!(
        rows[1].parameters, baseline.parameters,
        "a kernel row trains the same model"
    );
    assert!(rows[2].parameters < baseline.parameters, "one level fewer");

    let report = Report {
        header: Header {
            date: "today".into(),
            device: "test".into(),
            command: "wgdiff experiment ladder".into(),
            wall_seconds: 1.0,
        },
        plan,
        rungs,
        rows,
    };
    let dir = std::env::temp_dir().join(format!("wgdiff-ladder-{}", std::process::id()));
    let written: Vec<String> = write_report(&report, &dir)
        .unwrap()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(written, ["ladder.md", "ladder.json", "ladder.png"]);
    let md = std::fs::read_to_string(dir.join("ladder.md")).unwrap();
    for (i, name) in names.iter().enumerate() {
        assert!(md.contains(&format!("| {}. {name} |", i + 1)), "{md}");
    }
    for r in &report.rows {
        assert!(md.contains(&format!("| {} |", r.name)), "{md}");
    }
    assert!(
        md.contains("383.03") && md.contains("19.07 s"),
        "the studies' numbers: {md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ladder.json")).unwrap()).unwrap();
    assert_eq!(json["rungs"].as_array().unwrap().len(), 4);
    assert_eq!(json["rows"].as_array().unwrap().len(), 3);
    let chart = image::open(dir.join("ladder.png")).unwrap().to_rgb8();
    assert_eq!(chart.width(), 1000);
    assert!(chart.pixels().any(|p| p.0 != [255, 255, 255]), "blank chart");
}
