//! The `wgdiff` binary: `info` without a Vulkan driver fails cleanly, `bench --json` rows are
//! well formed, `profile --trace` writes a Chrome trace and `--roofline` a PNG, train -> sample
//! writes its files, outputs never replace inputs or earlier runs, bad settings fail first.

use crate::common::wgdiff;

/// Two training steps of the tiny preset with a one-image final grid: the quickest whole run.
const TINY_TRAIN: [&str; 11] = [
    "train",
    "--preset",
    "tiny",
    "--steps",
    "2",
    "--batch",
    "4",
    "--grid-images",
    "1",
    "--grid-steps",
    "1",
];
#[test]
fn info_without_a_vulkan_driver_names_the_fix() {
    let out = wgdiff()
        .arg("info")
        .env("WGPU_BACKEND", "vulkan")
        .env("VK_DRIVER_FILES", "/nonexistent.json")
        .env("VK_ICD_FILENAMES", "/nonexistent.json")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "info should fail without a Vulkan driver");
    assert!(stderr.contains("mesa-vulkan-drivers"), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("stack backtrace"),
        "{stderr}"
    );
}

#[test]
fn adapter_errors_and_the_gl_fallback_say_what_to_do() {
    let out = wgdiff()
        .args(["info", "--adapter", "nosuchgpu"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("choose one of the adapters found") && !stderr.contains("install a Vulkan driver"),
        "{stderr}"
    );
    // Without a Vulkan driver wgpu falls back to GL: said, not silent.
    let out = wgdiff()
        .args([
            "bench",
            "matmul",
            "--shapes",
            "8x8x8",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--variants",
            "naive",
        ])
        .env("VK_DRIVER_FILES", "/nonexistent.json")
        .env("VK_ICD_FILENAMES", "/nonexistent.json")
        .env_remove("WGPU_BACKEND")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // (a machine without an OpenGL driver gets the no-adapter error instead, same fix)
    assert!(stderr.contains("mesa-vulkan-drivers"), "{stderr}");
    if out.status.success() {
        assert!(stderr.contains("slow fallback"), "{stderr}");
    }
}

#[test]
fn info_lists_the_chosen_adapter() {
    let out = wgdiff().arg("info").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("chosen:") && stdout.contains("max_storage_buffer_binding_size"),
        "{stdout}"
    );
    // The chosen adapter's driver by name and version (lavapipe: "driver: llvmpipe Mesa 25.0.7 ...").
    let driver = stdout
        .lines()
        .find(|l| l.starts_with("driver: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(driver.len() > "driver: ".len() + 1, "{driver}");
}

#[test]
fn bench_matmul_json_has_the_documented_keys() {
    let out = wgdiff()
        .args([
            "bench", "matmul", "--json", "--shapes", "48x40x36", "--reps", "1", "--warmup", "0",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(rows.len() >= 2, "{stdout}");
    for row in &rows {
        for key in ["bench", "variant", "shape", "median_ms", "gflops", "device"] {
            assert!(row.get(key).is_some(), "missing {key} in {row}");
        }
        assert_eq!(row["shape"], "48x40x36");
        assert!(row["median_ms"].as_f64().unwrap() > 0.0);
    }
}

/// A folder of its own for a test's files.
fn scratch_dir(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("wgdiff-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A stand-in for a Python with torch (not a test dependency) that speaks the protocol of
/// scripts/torch_bench.py: ready, then 2 ms for every workload, writing down what it ran. Returns
/// its path and that of its list of workloads.
#[cfg(unix)]
fn fake_torch_python(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let asked = dir.join("asked.txt");
    let python = dir.join("python");
    let script = format!(
        // ($3: the device the helper is asked to run on, after `-c SOURCE`)
        "#!/bin/sh\necho \"ready PyTorch 9.9 on $3, 3 threads\"\nwhile read line; do echo \"$line\" >> '{}'; echo 0.002; done\n",
        asked.display()
    );
    std::fs::write(&python, script).unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    (python, asked)
}

/// `wgdiff bench ARGS --reps 1 --warmup 0 --beside-torch PYTHON`.
fn bench_beside(python: &std::path::Path, args: &[&str]) -> std::process::Output {
    wgdiff()
        .arg("bench")
        .args(args)
        .args([
            "--reps",
            "1",
            "--warmup",
            "0",
            "--beside-torch",
            python.to_str().unwrap(),
        ])
        .output()
        .unwrap()
}

/// The JSON rows of a `bench` run, which must succeed.
fn json_rows(out: std::process::Output) -> Vec<serde_json::Value> {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[cfg(unix)]
#[test]
fn bench_beside_torch_gives_each_row_its_ratio_from_the_same_rounds() {
    let dir = scratch_dir("fake-torch");
    let (python, asked) = fake_torch_python(&dir);
    let out = wgdiff()
        .args([
            "bench",
            "matmul",
            "--json",
            "--shapes",
            "48x40x36",
            "--variants",
            "naive,blocked",
        ])
        .args([
            "--reps",
            "3",
            "--warmup",
            "1",
            "--beside-torch",
            python.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let rows = json_rows(out);
    let row = |variant: &str| {
        rows.iter()
            .find(|r| r["variant"] == variant)
            .unwrap_or_else(|| panic!("{rows:?}"))
    };
    for variant in ["naive", "blocked"] {
        let r = row(variant);
        let ratio = r["vs_torch"].as_f64().unwrap();
        assert!(
            (ratio - 2.0 / r["median_ms"].as_f64().unwrap()).abs() < 1e-9 * ratio,
            "{r}"
        );
    }
    let torch = row("torch");
    assert_eq!(torch["device"], "PyTorch 9.9 on cpu, 3 threads");
    assert_eq!(torch["shape"], "48x40x36");
    assert!(torch.get("vs_torch").is_none());
    let gflops = 2.0 * 48.0 * 40.0 * 36.0 / 2e-3 / 1e9;
    assert!(
        (torch["gflops"].as_f64().unwrap() - gflops).abs() < 1e-9,
        "{torch}"
    );
    // The shape's workload once per round (a warm-up and 3 timed), not once per variant.
    assert_eq!(
        std::fs::read_to_string(&asked).unwrap(),
        "matmul 48 40 36\n".repeat(4)
    );
    // The table gives the ratio too.
    let out = wgdiff()
        .args([
            "bench",
            "matmul",
            "--shapes",
            "48x40x36",
            "--variants",
            "naive",
            "--reps",
            "1",
        ])
        .args(["--beside-torch", python.to_str().unwrap()])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("vs torch") && table.lines().any(|l| l.starts_with("torch ")),
        "{table}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[test]
fn bench_conv_times_each_backward_pass_alone_beside_torch() {
    let dir = scratch_dir("fake-torch-conv");
    let (python, asked) = fake_torch_python(&dir);
    let bench = |pass: &str| {
        bench_beside(
            &python,
            &["conv", "--json", "--variants", "direct", "--pass", pass],
        )
    };
    let rows = json_rows(bench("weight-grad,input-grad"));
    let cells: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["variant"].as_str().unwrap(), r["pass"].as_str().unwrap()))
        .collect();
    // Four shapes, each pass in table order, wgdiff's rows then PyTorch's.
    let shape = [
        ("direct", "input-grad"),
        ("direct", "weight-grad"),
        ("torch", "input-grad"),
        ("torch", "weight-grad"),
    ];
    assert_eq!(cells, shape.repeat(4), "{rows:?}");
    assert!(rows
        .iter()
        .filter(|r| r["variant"] == "direct")
        .all(|r| r["vs_torch"].as_f64().is_some()));
    let asked = std::fs::read_to_string(&asked).unwrap();
    assert!(
        asked.starts_with("conv 16 64 32 32 64 3 3 1 1 1 1 1 1 1 input-grad\nconv 16 64 32 32 64 3 3 1 1 1 1 1 1 1 weight-grad\n"),
        "{asked}"
    );
    assert!(
        asked.contains("conv 16 64 32 32 64 7 7 1 1 3 3 1 1 64 weight-grad\n"),
        "{asked}"
    );
    let refused = bench("sideways");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("--pass sideways: use forward, input-grad"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[test]
fn bench_train_beside_torch_times_the_presets_twin() {
    let dir = scratch_dir("fake-torch-train");
    let (python, asked) = fake_torch_python(&dir);
    let bench = |preset: &str| {
        let batches = ["--batch", "2", "--sample-batch", "1", "--torch-device", "cuda"];
        bench_beside(
            &python,
            &[&["train", "--json", "--preset", preset][..], &batches].concat(),
        )
    };
    let rows = json_rows(bench("mnist"));
    // The helper was asked to run on the GPU, and its rows say so.
    assert!(rows
        .iter()
        .filter(|r| r["variant"] == "torch")
        .all(|r| r["device"] == "PyTorch 9.9 on cuda, 3 threads"));
    let ratio = |variant: &str| {
        rows.iter()
            .find(|r| r["variant"] == variant)
            .map(|r| r["vs_torch"].clone())
    };
    assert!(ratio("train-step").unwrap().as_f64().unwrap() > 0.0, "{rows:?}");
    assert!(
        ratio("sample-step skip 0").unwrap().as_f64().unwrap() > 0.0,
        "{rows:?}"
    );
    // (the twin has no skips: only skip 0 is compared)
    assert!(ratio("sample-step skip 1").unwrap().is_null(), "{rows:?}");
    assert_eq!(rows.iter().filter(|r| r["variant"] == "torch").count(), 2);
    assert_eq!(
        std::fs::read_to_string(&asked).unwrap(),
        "unet-train mnist 2\nunet-sample mnist 1\n"
    );
    let refused = bench("tiny");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("no twin of preset tiny"),
        "{stderr}"
    );
    let alone = wgdiff()
        .args(["bench", "train", "--torch-device", "cuda"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&alone.stderr);
    assert!(
        !alone.status.success() && stderr.contains("--beside-torch"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn beside_torch_without_torch_says_how_to_install_it() {
    // A Python whose `import torch` fails: a torch.py that raises ImportError, first on its path.
    let dir = scratch_dir("no-torch");
    std::fs::write(dir.join("torch.py"), "raise ImportError('no torch here')\n").unwrap();
    let bench = |python: &str| {
        let out = wgdiff()
            .args([
                "bench",
                "conv",
                "--variants",
                "direct",
                "--reps",
                "1",
                "--warmup",
                "0",
            ])
            .args(["--beside-torch", python])
            .env("PYTHONPATH", &dir)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    for python in ["python3", "/nonexistent/python"] {
        let stderr = bench(python);
        assert!(
            stderr.contains("pip install torch") && !stderr.contains("panicked"),
            "{stderr}"
        );
    }
    assert!(bench("python3").contains("has no PyTorch"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_block_json_has_variant_pass_and_shape() {
    let out = wgdiff()
        .args([
            "bench", "block", "--json", "--shapes", "2x8x5x6", "--reps", "1", "--warmup", "0",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let cells: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["variant"].as_str().unwrap(), r["pass"].as_str().unwrap()))
        .collect();
    for variant in ["fused", "unfused"] {
        for pass in ["forward", "forward+backward"] {
            assert!(
                cells.contains(&(variant, pass)),
                "{variant} {pass} missing: {stdout}"
            );
        }
    }
    assert!(rows.iter().all(|r| r["shape"] == "B2 C8 5x6"), "{stdout}");
}

#[test]
fn profile_writes_a_chrome_trace() {
    let path = std::env::temp_dir().join(format!("wgdiff-trace-{}.json", std::process::id()));
    let out = wgdiff()
        .args(["profile", "mlp", "--steps", "1", "--json", "--trace"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(row["calls"].as_u64().unwrap() > 0, "{row}");
    }
    let trace: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    assert!(!events.is_empty());
    for e in events {
        assert!(e["name"].is_string() && e["ph"] == "X", "{e}");
        assert!(e["ts"].is_number() && e["dur"].is_number(), "{e}");
    }
}

#[test]
fn profile_writes_a_roofline_png() {
    let path = std::env::temp_dir().join(format!("wgdiff-roofline-cli-{}.png", std::process::id()));
    let out = wgdiff()
        .args([
            "profile",
            "unet",
            "--preset",
            "tiny",
            "--batch",
            "2",
            "--steps",
            "1",
            "--roofline",
        ])
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for said in [
        "roof:",
        "us an empty dispatch",
        "of bound",
        "ridge point",
        "GFLOP/s",
        "GB/s",
    ] {
        assert!(stdout.contains(said), "{said} missing: {stdout}");
    }
    assert!(stdout.contains(&path.display().to_string()), "{stdout}");
    let decoded = image::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(decoded.width() > 100 && decoded.height() > 100);
}

#[test]
fn profile_names_an_unwritable_trace_path() {
    let out = wgdiff()
        .args([
            "profile",
            "--steps",
            "1",
            "--trace",
            "/nonexistent-dir/trace.json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("/nonexistent-dir/trace.json") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

#[test]
fn train_then_sample_write_checkpoint_grids_and_frames() {
    let dir = std::env::temp_dir().join(format!("wgdiff-cli-train-{}", std::process::id()));
    let run = |args: &[&str]| {
        let out = wgdiff().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let out = dir.join("run");
    let log = run(&[
        "train",
        "--preset",
        "tiny",
        "--steps",
        "2",
        "--batch",
        "4",
        "--grid-images",
        "4",
        "--grid-steps",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--step-log",
        dir.join("steps.csv").to_str().unwrap(),
    ]);
    assert!(log.contains("step 2/2") && log.contains("loss"), "{log}");
    for file in ["checkpoint.safetensors", "config.json", "samples.png"] {
        assert!(out.join(file).exists(), "{file} missing; log: {log}");
    }
    // the step log holds both steps, their losses as the checkpoint keeps them, rising times
    let steps = std::fs::read_to_string(dir.join("steps.csv")).expect("the step log");
    let steps = wgdiff::train::StepLog::parse(&steps, "steps.csv").unwrap();
    let saved = wgdiff::checkpoint::Checkpoint::load(&out.join("checkpoint.safetensors")).unwrap();
    let losses = wgdiff::run_state::saved_state(&saved, "checkpoint")
        .unwrap()
        .losses;
    assert_eq!(steps.rows.iter().map(|r| r.step).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(steps.rows.iter().map(|r| r.loss).collect::<Vec<_>>(), losses);
    assert!(steps.rows[1].elapsed > steps.rows[0].elapsed && steps.rows[0].seconds > 0.0);
    let grid = dir.join("grid.png");
    let frames = dir.join("frames");
    let checkpoint = out.join("checkpoint.safetensors");
    let log = run(&[
        "sample",
        "--checkpoint",
        checkpoint.to_str().unwrap(),
        "--count",
        "4",
        "--steps",
        "3",
        "--out",
        grid.to_str().unwrap(),
        "--frames",
        frames.to_str().unwrap(),
    ]);
    assert!(log.contains("3 network evaluations"), "{log}");
    let decoded = image::open(&grid).unwrap();
    // 2 x 2 digits upscaled twice, with padding.
    assert!(
        decoded.width() == decoded.height() && decoded.width() > 4 * 28,
        "{}x{}",
        decoded.width(),
        decoded.height()
    );
    for step in 0..3 {
        assert!(frames.join(format!("step_{step:04}_xt.png")).exists());
        assert!(frames.join(format!("step_{step:04}_x0.png")).exists());
    }
    // DDIM's eta and spacing from the command line; they need the ddim sampler.
    let ddim = [
        "sample",
        "--checkpoint",
        checkpoint.to_str().unwrap(),
        "--count",
        "2",
        "--steps",
        "2",
        "--out",
        grid.to_str().unwrap(),
        "--eta",
        "0.5",
    ];
    let log = run(&[&ddim[..], &["--sampler", "ddim", "--spacing", "quadratic"]].concat());
    assert!(
        log.contains("2 images with ddim (2 network evaluations)"),
        "{log}"
    );
    let wrong = wgdiff().args(ddim).output().unwrap();
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        !wrong.status.success() && stderr.contains("--sampler ddim"),
        "{stderr}"
    );
    let bad = wgdiff()
        .args(["sample", "--checkpoint", "/nonexistent.safetensors"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && stderr.contains("/nonexistent.safetensors"),
        "{stderr}"
    );
}

#[test]
fn outputs_never_replace_inputs_or_earlier_runs_and_bad_settings_fail_first() {
    let dir = std::env::temp_dir().join(format!("wgdiff-cli-outputs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mnist = format!("mnist:{}/assets/mnist", env!("CARGO_MANIFEST_DIR"));
    let call = |cwd: &std::path::Path, args: &[&str]| {
        std::fs::create_dir_all(cwd).unwrap();
        let out = wgdiff().args(args).current_dir(cwd).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        (out.status.success(), stderr)
    };
    // (no live MNIST-FID: these runs check files, not scores)
    let tiny = [&TINY_TRAIN[..], &["--fid-share", "0"]].concat();
    let run = dir.join("run");
    let train_into = |folder: &std::path::Path, extra: &[&str]| {
        let args = [
            &tiny[..],
            &["--data", &mnist, "--out", folder.to_str().unwrap()],
            extra,
        ]
        .concat();
        call(&dir, &args)
    };
    let (ok, log) = train_into(&run, &[]);
    assert!(ok, "{log}");
    let checkpoint = run.join("checkpoint.safetensors");
    let saved = std::fs::read(&checkpoint).unwrap();

    // A chosen folder holding a run is refused without --force, and kept.
    let (ok, log) = train_into(&run, &["--seed", "5"]);
    assert!(
        !ok && log.contains("already holds a run") && log.contains("--force"),
        "{log}"
    );
    assert_eq!(
        std::fs::read(&checkpoint).unwrap(),
        saved,
        "the earlier run's checkpoint changed"
    );
    let (ok, log) = train_into(&run, &["--seed", "5", "--force"]);
    assert!(ok, "{log}");
    assert_ne!(
        std::fs::read(&checkpoint).unwrap(),
        saved,
        "--force did not overwrite"
    );

    // The default folder moves on to a numbered one.
    let work = dir.join("work");
    std::fs::create_dir_all(work.join("runs/mnist")).unwrap();
    std::fs::copy(&checkpoint, work.join("runs/mnist/checkpoint.safetensors")).unwrap();
    let (ok, log) = call(&work, &[&tiny[..], &["--data", &mnist]].concat());
    assert!(ok && log.contains("runs/mnist-2"), "{log}");
    assert!(work.join("runs/mnist-2/checkpoint.safetensors").exists());

    // A grid never replaces a checkpoint or any file that is not a PNG, and is only PNG.
    let sample = |out: &std::path::Path| {
        let args = [
            "sample",
            "--checkpoint",
            checkpoint.to_str().unwrap(),
            "--count",
            "1",
            "--steps",
            "1",
            "--out",
            out.to_str().unwrap(),
        ];
        call(&dir, &args)
    };
    let before = std::fs::read(&checkpoint).unwrap();
    let (ok, log) = sample(&checkpoint);
    assert!(!ok && log.contains(".png"), "{log}");
    assert_eq!(std::fs::read(&checkpoint).unwrap(), before);
    let (ok, log) = sample(&dir.join("grid.jpg"));
    assert!(
        !ok && log.contains(".png") && !dir.join("grid.jpg").exists(),
        "{log}"
    );
    let notes = dir.join("notes.png");
    std::fs::write(&notes, "my notes").unwrap();
    let (ok, log) = sample(&notes);
    assert!(!ok && log.contains("not a PNG"), "{log}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes");
    let (ok, log) = sample(&dir.join("grid.png"));
    assert!(ok, "{log}");
    let (ok, log) = sample(&dir.join("grid.png"));
    assert!(ok, "an earlier grid is replaced: {log}");

    // The MNIST-FID classifier is not a diffusion model: said so, not "unknown field".
    let classifier = format!(
        "{}/assets/models/mnist-classifier.safetensors",
        env!("CARGO_MANIFEST_DIR")
    );
    let grid = dir.join("from-classifier.png");
    let (ok, log) = call(
        &dir,
        &[
            "sample",
            "--checkpoint",
            &classifier,
            "--out",
            grid.to_str().unwrap(),
        ],
    );
    assert!(
        !ok && log.contains("classifier") && log.contains("wgdiff eval --classifier"),
        "{log}"
    );

    // Settings a run cannot use fail before the first step, naming the setting.
    let (ok, log) = call(&dir, &["eval", "--reference-images", "0", "--samples", "2"]);
    assert!(
        !ok && log.contains("--reference-images 0") && log.contains("at least 2"),
        "{log}"
    );
    let (ok, log) = call(
        &dir,
        &["train", "--resume", checkpoint.to_str().unwrap(), "--steps", "1"],
    );
    assert!(
        !ok && log.contains("at step 2") && log.contains("more than 2"),
        "{log}"
    );
    for (flag, value, name) in [
        ("--max-minutes", "inf", "max_minutes"),
        ("--max-minutes", "NaN", "max_minutes"),
        ("--max-minutes=-1", "", "max_minutes"),
        ("--max-grad-norm", "NaN", "max_grad_norm"),
        ("--max-grad-norm=-1", "", "max_grad_norm"),
    ] {
        let fresh = dir.join("never");
        let mut args = vec![flag];
        if !value.is_empty() {
            args.push(value);
        }
        let (ok, log) = train_into(&fresh, &args);
        assert!(!ok && log.contains(name), "{flag} {value}: {log}");
        assert!(!fresh.exists(), "{flag} {value} made its output folder");
    }
    for (flag, value, name) in [
        ("--grid-images", "0", "grid_images"),
        ("--grid-steps", "0", "grid_steps"),
        ("--epochs", "18446744073709551615", "fewer epochs"),
    ] {
        let fresh = dir.join("never");
        let args = [
            "train",
            "--preset",
            "tiny",
            "--data",
            &mnist,
            "--out",
            fresh.to_str().unwrap(),
            flag,
            value,
        ];
        let (ok, log) = call(&dir, &args);
        assert!(!ok && log.contains(name), "{flag} {value}: {log}");
        assert!(!fresh.exists(), "{flag} {value} made its output folder");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn eval_scores_a_checkpoint_and_caches_the_reference() {
    let dir = std::env::temp_dir().join(format!("wgdiff-cli-eval-{}", std::process::id()));
    let run = |args: &[&str]| {
        let out = wgdiff().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            stderr,
        )
    };
    let out = dir.join("run");
    let (ok, _, log) = run(&[
        "train",
        "--preset",
        "tiny",
        "--steps",
        "1",
        "--batch",
        "4",
        "--grid-images",
        "1",
        "--grid-steps",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{log}");
    let checkpoint = out.join("checkpoint.safetensors");
    let json = dir.join("eval.json");
    let cache = dir.join("stats");
    let eval = [
        "eval",
        "--checkpoint",
        checkpoint.to_str().unwrap(),
        "--samples",
        "8",
        "--batch",
        "4",
        "--steps",
        "2",
        "--reference-images",
        "64",
        "--cache",
        cache.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    for (attempt, reference) in [(1, "reference computed"), (2, "reference cached")] {
        let (ok, stdout, log) = run(&eval);
        assert!(ok, "run {attempt}: {log}");
        assert!(
            stdout.starts_with("MNIST-FID ")
                && stdout.contains("(8 samples from ddpm 2 steps vs 64 mnist/test images")
                && stdout.contains(reference),
            "run {attempt}: {stdout}"
        );
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert!(doc["fid"].as_f64().is_some_and(f64::is_finite), "{doc}");
        assert_eq!(
            (doc["metric"].as_str(), doc["samples"].as_u64()),
            (Some("MNIST-FID"), Some(8))
        );
        assert_eq!(doc["reference_cached"], attempt == 2, "{doc}");
    }
    let model_fid = serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&json).unwrap())
        .unwrap()["fid"]
        .as_f64()
        .unwrap();

    // --real: real training images in place of samples, the same ones for the same seed, and
    // far closer to the test split than a one-step model's samples.
    let real = |seed: &str, samples: &str, split: &str| {
        run(&[
            "eval",
            "--real",
            "--samples",
            samples,
            "--batch",
            "16",
            "--seed",
            seed,
            "--split",
            split,
            "--reference-images",
            "64",
            "--cache",
            cache.to_str().unwrap(),
        ])
    };
    let score = |stdout: &str| -> f64 { stdout.split_whitespace().nth(1).unwrap().parse().unwrap() };
    let (ok, first, log) = real("0", "32", "test");
    assert!(
        ok && first.contains("(32 real mnist/train images, drawn by seed 0, vs 64 mnist/test images"),
        "{first}{log}"
    );
    let (_, again, _) = real("0", "32", "test");
    let (_, other, _) = real("1", "32", "test");
    assert_eq!(score(&first), score(&again), "{first}{again}");
    assert_ne!(score(&first), score(&other), "{first}{other}");
    assert!(
        score(&first) < model_fid / 2.0,
        "real {first} against the model's {model_fid}"
    );
    let (ok, _, log) = real("0", "20000", "train");
    assert!(
        !ok && log.contains("mnist/test") && log.contains("10000"),
        "{log}"
    );

    // --images: a folder of PNGs scored as samples, every image in it. MNIST's first 32
    // training digits score near the real draw above and far below 32 images of noise.
    let train = wgdiff::data::DataSource::Mnist(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/mnist").into())
        .load(wgdiff::data::Split::Train)
        .unwrap();
    let folder = |name: &str, pixel: &dyn Fn(usize, usize) -> u8| {
        let at = dir.join(name);
        std::fs::create_dir_all(&at).unwrap();
        for i in 0..32 {
            let png =
                image::GrayImage::from_fn(28, 28, |x, y| image::Luma([pixel(i, (y * 28 + x) as usize)]));
            png.save(at.join(format!("{i:03}.png"))).unwrap();
        }
        at
    };
    let digits = folder("digits", &|i, p| {
        ((train.images[i * 784 + p] + 1.0) * 127.5).round() as u8
    });
    let noise = folder("noise", &|i, p| ((i * 7919 + p * 104_729) % 251) as u8);
    let images = |at: &std::path::Path| {
        let json = dir.join("images.json");
        let args = [
            "eval",
            "--images",
            at.to_str().unwrap(),
            "--reference-images",
            "64",
            "--cache",
            cache.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ];
        let (ok, stdout, log) = run(&args);
        assert!(ok, "{log}");
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(doc["images"].as_str(), at.to_str(), "{doc}");
        assert_eq!(doc["samples"].as_u64(), Some(32), "{doc}");
        stdout
    };
    let (digits_out, noise_out) = (images(&digits), images(&noise));
    assert!(
        digits_out.contains(&format!(
            "(32 images of {}, vs 64 mnist/test images",
            digits.display()
        )),
        "{digits_out}"
    );
    assert!(
        score(&digits_out) < 2.0 * score(&first) && 4.0 * score(&digits_out) < score(&noise_out),
        "digits {digits_out} real {first} noise {noise_out}"
    );
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (ok, _, log) = run(&["eval", "--images", empty.to_str().unwrap()]);
    assert!(!ok && log.contains("no .png, .jpg or .jpeg images"), "{log}");

    // One sample has no covariance; missing files are named with the fix.
    let (ok, _, log) = run(&[
        "eval",
        "--checkpoint",
        checkpoint.to_str().unwrap(),
        "--samples",
        "1",
    ]);
    assert!(
        !ok && log.contains("--samples 1") && log.contains("at least 2"),
        "{log}"
    );
    let (ok, _, log) = run(&["eval", "--checkpoint", "/nonexistent.safetensors"]);
    assert!(!ok && log.contains("/nonexistent.safetensors"), "{log}");
    let (ok, _, log) = run(&[
        &eval[..],
        &["--classifier", "/nonexistent-classifier.safetensors"],
    ]
    .concat());
    assert!(
        !ok && log.contains("/nonexistent-classifier.safetensors") && log.contains("train-classifier"),
        "{log}"
    );
    let (ok, _, log) = run(&[&eval[..], &["--inception", "/nonexistent-inception.safetensors"]].concat());
    assert!(
        !ok && log.contains("/nonexistent-inception.safetensors") && log.contains("save_file"),
        "{log}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn model_summary_reports_the_preset_parameter_counts() {
    for (preset, trainable, fixed) in [("mnist", 2_238_337, 0), ("ncsn-mnist", 1_115_297, 128)] {
        let out = wgdiff()
            .args(["model", "--preset", preset, "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["trainable_params"], trainable, "{preset}");
        assert_eq!(doc["fixed_params"], fixed, "{preset}");
    }
    let out = wgdiff().args(["model", "--preset", "mnist"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Trainable params: 2,238,337"));
}

#[test]
fn resume_changes_only_what_it_may_and_says_where_each_setting_comes_from() {
    let out = std::env::temp_dir().join(format!("wgdiff-cli-{}-resume-flags", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let grid = ["--grid-images", "1", "--grid-steps", "1"];
    let first = wgdiff()
        .args([
            "train", "--preset", "tiny", "--batch", "8", "--steps", "1", "--out",
        ])
        .arg(&out)
        .args(grid)
        .output()
        .unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let checkpoint = out.join("checkpoint.safetensors");
    let refused = wgdiff()
        .args(["train", "--resume"])
        .arg(&checkpoint)
        .args(["--steps", "2", "--batch", "16"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("--batch cannot change when resuming") && stderr.contains("--init"),
        "{stderr}"
    );
    let resumed = wgdiff()
        .args(["train", "--resume"])
        .arg(&checkpoint)
        .args(["--steps", "2", "--lr", "1e-4", "--max-grad-norm", "0.5"])
        .args(grid)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert!(
        stderr.contains("from the checkpoint: model, process, data, batch")
            && stderr.contains("from flags: steps 1 -> 2, lr 0.004 -> 0.0001, max_grad_norm 1.0 -> 0.5"),
        "{stderr}"
    );
    // ode-rk45 is adaptive: a step count sizes only its first step, and sampling says so.
    let sampled = wgdiff()
        .args([
            "sample",
            "--sampler",
            "ode-rk45",
            "--steps",
            "1",
            "--count",
            "1",
            "--checkpoint",
        ])
        .arg(&checkpoint)
        .arg("--out")
        .arg(out.join("rk45.png"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&sampled.stderr);
    assert!(
        sampled.status.success() && stderr.contains("--steps N only sizes its first step"),
        "{stderr}"
    );
}

#[test]
fn deterministic_runs_write_identical_samples() {
    let dir = std::env::temp_dir().join(format!("wgdiff-cli-{}-deterministic", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let grids: Vec<Vec<u8>> = (0..2)
        .map(|run| {
            let path = dir.join(format!("run{run}.png"));
            let out = wgdiff()
                .args([
                    "--deterministic",
                    "sample",
                    "--count",
                    "2",
                    "--steps",
                    "3",
                    "--out",
                ])
                .arg(&path)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            std::fs::read(&path).unwrap()
        })
        .collect();
    assert!(
        grids[0] == grids[1],
        "two --deterministic runs drew different images"
    );
}

#[test]
fn sample_draws_any_count_in_batches() {
    let dir = std::env::temp_dir().join(format!("wgdiff-cli-{}-batches", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("five.png");
    let out = wgdiff()
        .args([
            "sample",
            "--count",
            "5",
            "--batch",
            "2",
            "--sampler",
            "ddim",
            "--steps",
            "1",
            "--out",
        ])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("5 images"), "{stderr}");
    // 5 images in a 3x3 grid of 28x28 images at 2x with 2-pixel padding
    assert_eq!(
        image::image_dimensions(&path).unwrap(),
        (3 * 56 + 4 * 2, 2 * 56 + 3 * 2)
    );
    let out = wgdiff()
        .args(["sample", "--count", "5", "--batch", "2", "--frames"])
        .arg(dir.join("frames"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("--frames records one batch"),
        "{stderr}"
    );
}

#[test]
fn an_image_folder_is_read_at_the_models_channels_and_size() {
    let dir = std::env::temp_dir().join(format!("wgdiff-cli-{}-folder", std::process::id()));
    let images = dir.join("images");
    std::fs::create_dir_all(&images).unwrap();
    for i in 0..3u8 {
        image::RgbImage::from_pixel(40, 30, image::Rgb([80 * i, 40, 200]))
            .save(images.join(format!("{i}.png")))
            .unwrap();
    }
    let out = wgdiff()
        .args([
            "train",
            "--preset",
            "tiny",
            "--steps",
            "1",
            "--batch",
            "2",
            "--grid-images",
            "1",
        ])
        .args(["--grid-steps", "1", "--data"])
        .arg(format!("folder:{}", images.display()))
        .arg("--out")
        .arg(dir.join("run"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("(3 images)"), "{stderr}");
}

#[test]
fn app_outputs_over_other_files_and_zero_sized_bench_shapes_are_refused_before_any_work() {
    let dir = std::env::temp_dir().join(format!("wgdiff-cli-refusals-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let precious = dir.join("checkpoint.png");
    std::fs::write(&precious, b"safetensors bytes").unwrap();
    let log = dir.join("weights.csv");
    std::fs::write(&log, b"not a frame log").unwrap();
    let refused = |args: &[&str], says: &str| {
        let out = wgdiff().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    };
    let (precious_arg, log_arg) = (precious.to_str().unwrap(), log.to_str().unwrap());
    // (no display is needed: the outputs are checked before the window opens)
    refused(&["gui", "--screenshot", precious_arg], "is not a PNG image");
    refused(&["gui", "--screenshot", "shot.jpg"], "give it a .png name");
    refused(&["gui", "--frame-log", log_arg], "is not a frame log");
    refused(&["gui", "--step-log", log_arg], "is not a step log");
    refused(
        &["gui", "--screenshot-after", "nan"],
        "is not a number of seconds",
    );
    refused(&["train", "--step-log", log_arg], "is not a step log");
    assert_eq!(std::fs::read(&precious).unwrap(), b"safetensors bytes");
    assert_eq!(std::fs::read(&log).unwrap(), b"not a frame log");
    for shape in ["0x0x0", "8x8x0", "0x8x8"] {
        refused(
            &["bench", "matmul", "--shapes", shape, "--reps", "1"],
            "has a size of 0",
        );
    }
    refused(
        &["bench", "block", "--shapes", "2x0x5x6", "--reps", "1"],
        "has a size of 0",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A binary outside its checkout (as `cargo install --path .` leaves one: no `assets/` beside it),
/// run from an empty folder: the main job's command (a few steps of it) trains on the shipped
/// MNIST with live MNIST-FID from the shipped classifier, and `eval` scores its checkpoint; the
/// shipped files are found in the checkout the binary was built from. `--data` takes a bare
/// folder, and `WGDIFF_ASSETS` is looked in first.
#[test]
fn a_binary_outside_its_checkout_trains_and_evaluates_from_an_empty_folder() {
    let root = std::env::temp_dir().join(format!("wgdiff-cli-anywhere-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (bin, work, elsewhere) = (root.join("bin"), root.join("work"), root.join("elsewhere"));
    for dir in [&bin, &work, &elsewhere.join("models")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let exe = bin.join("wgdiff");
    std::fs::copy(env!("CARGO_BIN_EXE_wgdiff"), &exe).unwrap();
    let call = |args: &[&str], assets: Option<&std::path::Path>| {
        let mut command = std::process::Command::new(&exe);
        command
            .env("WGDIFF_DETERMINISTIC", "1")
            .env_remove("WGDIFF_ASSETS")
            .args(args)
            .current_dir(&work);
        if let Some(dir) = assets {
            command.env("WGDIFF_ASSETS", dir);
        }
        let out = command.output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    let tiny = TINY_TRAIN;
    let live_fid = [
        "--fid-every",
        "2",
        "--fid-samples",
        "8",
        "--fid-steps",
        "2",
        "--out",
        "run",
    ];
    let (ok, stdout, log) = call(&[&tiny[..], &live_fid].concat(), None);
    assert!(ok, "{log}");
    assert!(
        format!("{stdout}{log}").contains("MNIST-FID") && work.join("run/checkpoint.safetensors").is_file(),
        "{stdout}{log}"
    );
    let eval = [
        "eval",
        "--checkpoint",
        "run/checkpoint.safetensors",
        "--samples",
        "8",
        "--batch",
        "4",
        "--steps",
        "2",
        "--reference-images",
        "64",
    ];
    let (ok, stdout, log) = call(&eval, None);
    assert!(ok && stdout.starts_with("MNIST-FID "), "{stdout}{log}");
    assert!(
        !work.join("assets").exists(),
        "nothing was copied into the working folder"
    );

    // A bare folder for --data, read as what its files are.
    let mnist = format!("{}/assets/mnist", env!("CARGO_MANIFEST_DIR"));
    let bare = ["--data", &mnist, "--fid-share", "0", "--out", "bare"];
    let (ok, _, log) = call(&[&tiny[..], &bare].concat(), None);
    assert!(ok, "{log}");

    // WGDIFF_ASSETS comes first: a classifier there that is not one is what eval reads, and
    // the error names it.
    let fake = elsewhere.join("models/mnist-classifier.safetensors");
    std::fs::write(&fake, b"not a checkpoint").unwrap();
    let (ok, _, log) = call(&eval, Some(&elsewhere));
    assert!(!ok && log.contains(&fake.display().to_string()), "{log}");
    std::fs::remove_dir_all(&root).unwrap();
}
