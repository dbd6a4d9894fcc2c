//! The app driven by egui_kittest on the engine's own device (lavapipe in CI): every view is
//! clicked through, its results checked, and snapshots compared with tests/snapshots/.

use eframe::egui;
use eframe::egui_wgpu::{WgpuSetup, WgpuSetupExisting};
use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use wgdiff::app::TrainSettings;
use wgdiff::app::{AppOptions, View, WgdiffApp};
use wgdiff::checkpoint::Checkpoint;
use wgdiff::train::{TrainConfig, TrainEvent, Trainer};
use wgdiff::{AdapterChoice, Gpu};

/// One device for every test; tests take turns (one app at a time on the device, so each
/// app's frame times and jobs are its own). Its kernels are chosen by fixed rules
/// (deterministic mode, as `wgdiff --deterministic`): no minutes of timing the candidates of
/// every new shape, and the same kernels as the commands the tests compare the app with.
fn gpu() -> (&'static Gpu, MutexGuard<'static, ()>) {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    static TURN: Mutex<()> = Mutex::new(());
    let gpu = GPU.get_or_init(|| {
        let gpu =
            Gpu::new_blocking(AdapterChoice::default()).expect("a GPU adapter (install mesa-vulkan-drivers)");
        gpu.set_deterministic(true);
        gpu
    });
    (gpu, TURN.lock().unwrap_or_else(|e| e.into_inner()))
}

/// A fresh folder under the target dir for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("app").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The shipped model (from the repository's assets).
fn shipped_model() -> PathBuf {
    // Relative, as a user types it (tests run in the package folder): the views show it,
    // and snapshots must not depend on where the repository is cloned.
    PathBuf::from("assets/models/mnist-small.safetensors")
}

/// The app in a kittest harness that renders with the engine's device.
fn harness(gpu: &Gpu, view: View, out: &Path) -> Harness<'static, WgdiffApp> {
    let options = AppOptions {
        checkpoint: shipped_model(),
        out: out.to_path_buf(),
        view,
        ..AppOptions::default()
    };
    harness_with(gpu, options, |cc, gpu, options| {
        WgdiffApp::new(cc, gpu, options).expect("the app opens")
    })
}

/// The app that `open` makes from `options` in a kittest harness on the engine's device.
fn harness_with(
    gpu: &Gpu,
    options: AppOptions,
    open: impl FnOnce(&eframe::CreationContext, Gpu, AppOptions) -> WgdiffApp + 'static,
) -> Harness<'static, WgdiffApp> {
    let setup = WgpuSetup::Existing(WgpuSetupExisting {
        instance: gpu.instance.clone(),
        adapter: gpu.adapter.clone(),
        device: gpu.device.clone(),
        queue: gpu.queue.clone(),
    });
    let gpu = gpu.clone();
    Harness::builder()
        .with_size([1280.0, 900.0])
        .wgpu_setup(setup)
        .build_eframe(move |cc| open(cc, gpu, options))
}

/// How many times its expected time a wait goes on before it calls the job hung: a wait's
/// `secs` is about what an idle two-core lavapipe machine needs, and a machine shared with
/// another build or test run took over twice that (a 120 s wait failed there), and one running
/// a release build beside a whole test run over five times (the first model load of a binary,
/// which times every kernel variant of its shapes, failed a 300 s guard there).
const HANG_GUARD: u64 = 10;

/// Steps the harness until `done` holds: a job expected to take about `secs` seconds, called
/// hung after [`HANG_GUARD`] times that.
fn step_until(harness: &mut Harness<WgdiffApp>, secs: u64, what: &str, done: impl Fn(&WgdiffApp) -> bool) {
    step_every(harness, 20, secs, what, done)
}

/// [`step_until`] with a frame every `ms` milliseconds: a long job gets the CPU the harness's
/// frames would take (each renders the window on lavapipe, on the cores the job runs on).
fn step_every(
    harness: &mut Harness<WgdiffApp>,
    ms: u64,
    secs: u64,
    what: &str,
    done: impl Fn(&WgdiffApp) -> bool,
) {
    let waited = Instant::now();
    while !done(harness.state()) {
        assert!(
            waited.elapsed() < Duration::from_secs(secs * HANG_GUARD),
            "still waiting for {what} after {} s ({HANG_GUARD} times the {secs} s it takes on an idle machine): the job hung",
            secs * HANG_GUARD
        );
        harness.step();
        std::thread::sleep(Duration::from_millis(ms));
    }
    harness.step();
}

/// Masks every widget whose label contains one of `parts` (timings that change run to run),
/// the status bar and the text fields (paths differ between clones) before a snapshot; each
/// mask reaches the right edge of the window.
fn mask_changing(harness: &mut Harness<WgdiffApp>, parts: &[&str]) {
    let mut rects: Vec<egui::Rect> = parts
        .iter()
        .chain(&["frame", "jobs:"])
        .flat_map(|p| {
            harness
                .query_all_by_label_contains(p)
                .map(|n| n.rect())
                .collect::<Vec<_>>()
        })
        .collect();
    rects.extend(
        harness
            .query_all_by_role(egui::accesskit::Role::TextInput)
            .map(|n| n.rect()),
    );
    // Masks reach the window's right edge: a changing label's width changes with its text.
    let right = harness.ctx.content_rect().right();
    for r in rects {
        harness.mask(egui::Rect::from_min_max(r.min, egui::pos2(right, r.max.y)));
    }
}

#[test]
fn broken_checkpoints_opened_in_the_denoise_view_show_an_error_and_the_app_keeps_working() {
    let (gpu, _turn) = gpu();
    let out = scratch("broken-checkpoints");
    std::fs::create_dir_all(&out).unwrap();
    let good = std::fs::read(shipped_model()).unwrap();
    let mut nan = Checkpoint::load(&shipped_model()).unwrap();
    let mut doubled = nan.clone();
    for (name, t) in nan.tensors.iter_mut().filter(|(n, _)| n.starts_with("ema.")) {
        t.data.iter_mut().for_each(|v| *v = f32::NAN);
        let scaled = doubled.tensors.get_mut(name).unwrap();
        scaled.data.iter_mut().for_each(|v| *v *= 2.0);
    }
    // (file, what the view's error says)
    let broken = [
        ("truncated.safetensors", "truncated"),
        ("nan.safetensors", "NaN or infinite"),
        ("classifier.safetensors", "classifier"),
        ("notes.safetensors", "safetensors"),
        ("diverged.safetensors", "diverged run"),
    ];
    std::fs::write(out.join(broken[0].0), &good[..good.len() / 3]).unwrap();
    nan.save(&out.join(broken[1].0)).unwrap();
    std::fs::copy(
        "assets/models/mnist-classifier.safetensors",
        out.join(broken[2].0),
    )
    .unwrap();
    std::fs::write(out.join(broken[3].0), "not a checkpoint at all\n").unwrap();
    doubled.save(&out.join(broken[4].0)).unwrap();
    let mut h = harness(gpu, View::Denoise, &out);
    step_until(&mut h, 60, "the checkpoint's description", |app| {
        app.denoise.model.is_some()
    });
    for (file, says) in broken {
        let path = out.join(file).display().to_string();
        h.state_mut().denoise.settings.checkpoint = path.clone();
        h.step();
        h.get_by_label("Load").click();
        h.step();
        step_until(&mut h, 60, "the load to fail", |app| !app.denoise.is_running());
        match &h.state().denoise.message {
            Some(Err(e)) => assert!(e.contains(&path) && e.contains(says), "{file}: {e}"),
            other => panic!("{file}: no error shown: {other:?}"),
        }
    }
    // and the app goes on: the shipped model loads and samples
    h.state_mut().denoise.settings.checkpoint = shipped_model().display().to_string();
    {
        let s = &mut h.state_mut().denoise.settings;
        s.steps = 2;
        s.count = 2;
    }
    h.step();
    h.get_by_label("Load").click();
    h.step();
    step_until(&mut h, 60, "the shipped model", |app| !app.denoise.is_running());
    h.get_by_label("Run").click();
    step_until(&mut h, 120, "2 sampler steps", |app| {
        app.denoise.frames.len() == 2 && !app.denoise.is_running()
    });
}

#[test]
fn denoise_view_records_every_step_and_scrubs_through_them() {
    let (gpu, _turn) = gpu();
    let out = scratch("denoise");
    let mut h = harness(gpu, View::Denoise, &out);
    step_until(&mut h, 60, "the checkpoint's description", |app| {
        app.denoise.model.is_some()
    });
    {
        let s = &mut h.state_mut().denoise.settings;
        s.steps = 6;
        s.count = 4;
        s.seed = 3;
    }
    h.step();
    h.get_by_label("Run").click();
    step_until(&mut h, 120, "6 sampler steps", |app| {
        app.denoise.frames.len() == 6 && !app.denoise.is_running()
    });
    let app = h.state();
    assert_eq!(app.denoise.current, 5, "the view follows the newest step");
    let indices: Vec<usize> = app.denoise.frames.iter().map(|f| f.index).collect();
    assert_eq!(indices, (0..6).collect::<Vec<_>>());
    assert!(app
        .denoise
        .frames
        .iter()
        .all(|f| f.x0.is_some() && f.seconds > 0.0));
    // Scrub back with the step button, then play through the recorded steps.
    h.get_by_label("< step").click();
    h.step();
    h.get_by_label("< step").click();
    h.step();
    assert_eq!(h.state().denoise.current, 3);
    h.get_by_label("Play").click();
    let start = h.state().denoise.current;
    step_until(&mut h, 10, "playback to move", |app| app.denoise.current != start);
    h.get_by_label("Pause").click();
    h.step();
    h.state_mut().denoise.current = 2;
    h.step();
    mask_changing(&mut h, &["step time", "network evaluations", "ms per step"]);
    h.snapshot("denoise_view");
}

#[test]
fn denoise_view_samples_without_timing_kernel_variants() {
    // As `wgdiff sample`: a sampling run is too short to repay timing kernel variants, which a
    // fresh lavapipe compiles each first (35 s for the shipped U-Net's shapes on Mesa 22.3).
    // A device of the test's own, measuring, as the app opens one without --deterministic.
    let (_, _turn) = gpu();
    let gpu = Gpu::new_blocking(AdapterChoice::default()).unwrap();
    let measured = std::sync::Arc::new(Mutex::new(Vec::new()));
    let log = measured.clone();
    gpu.tuner()
        .on_measure(move |key| log.lock().unwrap().push(key.to_string()));
    let out = scratch("denoise-untimed");
    let mut h = harness(&gpu, View::Denoise, &out);
    step_until(&mut h, 60, "the checkpoint's description", |app| {
        app.denoise.model.is_some()
    });
    {
        let s = &mut h.state_mut().denoise.settings;
        s.steps = 2;
        s.count = 2;
    }
    h.step();
    h.get_by_label("Run").click();
    step_until(&mut h, 120, "2 sampler steps", |app| {
        app.denoise.frames.len() == 2 && !app.denoise.is_running()
    });
    assert_eq!(*measured.lock().unwrap(), Vec::<String>::new());
}

/// `repeat` runs the denoise view's settings back to back (a looping demo, `wgdiff bench
/// soak`), in the shorter job slices the app gives sampling; Cancel ends the repeats too.
#[test]
fn denoise_view_repeats_runs_back_to_back_until_cancelled() {
    let (gpu, _turn) = gpu();
    let out = scratch("denoise-repeat");
    let mut h = harness(gpu, View::Denoise, &out);
    step_until(&mut h, 60, "the checkpoint's description", |app| {
        app.denoise.model.is_some()
    });
    for (key, value) in [("steps", "2"), ("count", "2"), ("repeat", "3")] {
        h.state_mut().denoise.settings.set(key, value).unwrap();
    }
    h.step();
    assert!(gpu.pacing().is_some(), "the app paces its jobs");
    h.get_by_label("Run").click();
    step_until(&mut h, 60, "3 runs", |app| {
        app.denoise.runs_completed == 3 && !app.denoise.is_running()
    });
    assert_eq!(
        h.state().denoise.frames.len(),
        2,
        "each run records its own steps"
    );
    h.state_mut().denoise.settings.set("repeat", "1000").unwrap();
    h.get_by_label("Run").click();
    step_until(&mut h, 60, "a 4th run", |app| app.denoise.runs_completed >= 4);
    h.get_by_label("Cancel").click();
    step_until(&mut h, 60, "the cancel", |app| !app.denoise.is_running());
    for _ in 0..10 {
        h.step();
    }
    let app = h.state();
    assert!(
        !app.denoise.is_running() && app.denoise.runs_completed < 8,
        "{} runs",
        app.denoise.runs_completed
    );
    let error = app
        .denoise
        .settings
        .clone()
        .set("repeat", "0")
        .unwrap_err()
        .to_string();
    assert!(error.contains("repeat") && error.contains("1 or more"), "{error}");
}

/// A searched timestep schedule in the denoise view: the run follows the file's sampler, steps
/// and timesteps, the view plots them beside the uniform ones, and a hand-changed step count
/// turns the file off.
#[test]
fn denoise_view_follows_a_searched_timestep_schedule_and_plots_it() {
    use wgdiff::diffusion::skip_schedule::SHIPPED_TIMESTEP_SCHEDULES;
    use wgdiff::diffusion::SkipSchedule;
    let (gpu, _turn) = gpu();
    let out = scratch("timesteps");
    let file = SHIPPED_TIMESTEP_SCHEDULES[1];
    let schedule = SkipSchedule::load(Path::new(file)).unwrap();
    let options = AppOptions {
        checkpoint: shipped_model(),
        out: out.clone(),
        view: View::Denoise,
        settings: vec![("schedule".into(), file.into()), ("count".into(), "4".into())],
        autorun: true,
        ..AppOptions::default()
    };
    let mut h = harness_with(gpu, options, |cc, gpu, options| {
        WgdiffApp::new(cc, gpu, options).expect("the app opens")
    });
    let steps = schedule.steps();
    step_until(&mut h, 120, "the schedule's sampler steps", |app| {
        app.denoise.frames.len() == steps && !app.denoise.is_running()
    });
    let app = h.state();
    let s = &app.denoise.settings;
    assert_eq!((s.sampler.as_str(), s.steps), ("dpm-solver++", steps));
    let times: Vec<f32> = app.denoise.frames.iter().map(|f| f.t).collect();
    let want: Vec<f32> = schedule.timesteps.iter().map(|&t| t as f32).collect();
    assert_eq!(times, want, "every step calls the network at the file's timestep");
    h.step();
    assert!(h
        .query_by_label_contains(&format!("the {steps} network calls on the noise-level axis"))
        .is_some());
    save_screenshot(&mut h, "app-timesteps");
    h.state_mut().denoise.settings.steps = steps + 2;
    h.step();
    let app = h.state();
    assert_eq!(app.denoise.settings.schedule, None);
    let says = app.denoise.message.clone().unwrap().unwrap();
    assert!(says.contains("is off: it is for dpm-solver++"), "{says}");
}

#[test]
fn denoise_view_exports_pngs_and_gifs() {
    let (gpu, _turn) = gpu();
    let out = scratch("export");
    let mut h = harness(gpu, View::Denoise, &out);
    step_until(&mut h, 60, "the checkpoint's description", |app| {
        app.denoise.model.is_some()
    });
    h.state_mut().denoise.settings.steps = 3;
    h.state_mut().denoise.settings.count = 2;
    h.step();
    h.get_by_label("Run").click();
    step_until(&mut h, 120, "3 sampler steps", |app| {
        app.denoise.frames.len() == 3 && !app.denoise.is_running()
    });
    h.get_by_label("Export PNGs + GIFs").click();
    let frames = out.join("frames");
    step_until(
        &mut h,
        60,
        "the export",
        |app| matches!(&app.denoise.message, Some(Ok(m)) if m.starts_with("exported")),
    );
    for name in ["step_0000_xt.png", "step_0002_x0.png", "xt.gif", "x0.gif"] {
        let path = frames.join(name);
        assert!(image::open(&path).is_ok(), "{} decodes", path.display());
    }
}

/// With `WGDIFF_APP_SCREENSHOTS=DIR` set, saves the harness's window as `DIR/<name>.png` (the
/// docs' pictures of views that need clicks to reach, such as the step debugger's branches).
fn save_screenshot(harness: &mut Harness<WgdiffApp>, name: &str) {
    let Ok(dir) = std::env::var("WGDIFF_APP_SCREENSHOTS") else {
        return;
    };
    let path = Path::new(&dir).join(format!("{name}.png"));
    harness
        .render()
        .expect("the window renders")
        .save(&path)
        .expect("the screenshot saves");
    eprintln!("screenshot: {}", path.display());
}

/// The values of every recorded step's x_t of a trajectory.
fn step_values(frames: &[wgdiff::app::Frame]) -> Vec<Vec<f32>> {
    frames.iter().map(|f| f.x.to_vec().unwrap()).collect()
}

/// The largest absolute difference between two steps' values.
fn largest_gap(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn step_debugger_branches_from_a_paused_step_and_differs_from_the_run_only_after_it() {
    let (gpu, _turn) = gpu();
    let out = scratch("branches");
    let mut h = harness(gpu, View::Denoise, &out);
    step_until(&mut h, 60, "the checkpoint's description", |app| {
        app.denoise.model.is_some()
    });
    {
        // deterministic DDIM: the same settings give the same steps
        let s = &mut h.state_mut().denoise.settings;
        s.sampler = "ddim".into();
        s.steps = 6;
        s.count = 4;
        s.seed = 5;
    }
    h.step();
    h.get_by_label("Run").click();
    step_until(&mut h, 120, "the whole run", |app| {
        app.denoise.frames.len() == 6 && !app.denoise.is_running()
    });
    let whole = step_values(&h.state().denoise.frames);
    // The same run paused after step 3.
    h.state_mut().denoise.settings.pause_after = Some(3);
    h.step();
    h.get_by_label("Run").click();
    step_until(&mut h, 120, "the pause after step 3", |app| {
        !app.denoise.is_running()
            && matches!(&app.denoise.message, Some(Ok(m)) if m.starts_with("paused after step 3"))
    });
    assert_eq!(h.state().denoise.frames.len(), 3, "no step after the pause");
    assert_eq!(h.state().denoise.current, 2, "the timeline shows the paused step");
    // Branch 1 keeps the run's settings for the 3 steps left: it ends as the whole run did.
    assert_eq!(h.state().denoise.branches.settings.steps, 3);
    h.get_by_label("Branch from step 3").click();
    step_until(&mut h, 120, "branch 1", |app| {
        app.denoise
            .branches
            .list
            .first()
            .is_some_and(|b| b.seconds.is_some())
    });
    let first = step_values(&h.state().denoise.branches.list[0].frames);
    assert_eq!(first.len(), 6);
    for (step, (a, b)) in whole.iter().zip(&first).enumerate() {
        let gap = largest_gap(a, b);
        assert!(
            gap < 1e-4,
            "branch 1 with the run's settings: step {} differs by {gap}",
            step + 1
        );
    }
    // Branch 2 from the same step skipping deep levels (c = 3): the same first 3 steps, then its own.
    h.get_by_label_contains("run: ddim").click();
    h.step();
    assert_eq!(
        h.state().denoise.branches.shown_index(),
        None,
        "the run is shown again"
    );
    h.state_mut().denoise.current = 2;
    h.state_mut().denoise.branches.settings.skip_exponent = 3.0;
    h.step();
    h.get_by_label("Branch from step 3").click();
    step_until(&mut h, 120, "branch 2", |app| {
        app.denoise
            .branches
            .list
            .get(1)
            .is_some_and(|b| b.seconds.is_some())
    });
    let app = h.state();
    let second = &app.denoise.branches.list[1];
    assert_eq!((second.from, second.frames.len()), (2, 6));
    assert_eq!(
        app.denoise.branches.shown_index(),
        Some(1),
        "a new branch is shown"
    );
    assert_eq!(app.denoise.shown_frames().len(), 6);
    let second = step_values(&second.frames);
    for step in 0..6 {
        let gap = largest_gap(&whole[step], &second[step]);
        match step < 3 {
            true => assert_eq!(gap, 0.0, "step {} is the run's", step + 1),
            false => assert!(gap > 0.01, "step {} skips levels: gap {gap}", step + 1),
        }
    }
    h.state_mut().denoise.current = 3;
    h.step();
    h.step();
    save_screenshot(&mut h, "app-step-debugger");
    // Any branch can be exported: branch 2 to its own folder.
    let exports: Vec<_> = h.query_all_by_label("Export").collect();
    assert_eq!(exports.len(), 3, "the run and two branches");
    exports[2].click();
    step_until(
        &mut h,
        60,
        "the export of branch 2",
        |app| matches!(&app.denoise.message, Some(Ok(m)) if m.starts_with("exported")),
    );
    for name in ["step_0000_xt.png", "step_0005_x0.png", "xt.gif"] {
        let path = out.join("frames").join("branch-2").join(name);
        assert!(image::open(&path).is_ok(), "{} decodes", path.display());
    }
}

#[test]
fn compare_view_fills_the_table_of_every_variant_on_one_seed_and_exports_it() {
    let (gpu, _turn) = gpu();
    let out = scratch("compare");
    // a third variant: the shipped model's weights as int8
    let int8 = out.join("int8.safetensors");
    let float = Checkpoint::load(&shipped_model()).unwrap();
    let plan = wgdiff::compress::CompressPlan {
        prune: None,
        quantize: Some(wgdiff::compress::QuantizePlan {
            bits: wgdiff::ops::WeightBits::Int8,
            per_channel: true,
        }),
        seed: 0,
    };
    let compressed = wgdiff::compress::compress_checkpoint(gpu, &float, "shipped", &plan)
        .unwrap()
        .0;
    std::fs::write(&int8, compressed.to_bytes().unwrap()).unwrap();
    let mut h = harness(gpu, View::Compare, &out);
    {
        let c = &mut h.state_mut().compare;
        c.plan.images = 2;
        c.plan.rounds = 1;
        c.plan.fid_samples = 4;
        c.plan.batch = 4;
        c.variants[0].steps = 3;
        c.variants[1].steps = 2;
    }
    h.step();
    h.get_by_label("Add variant").click();
    h.step();
    h.state_mut().compare.variants[2].checkpoint = int8.display().to_string();
    h.step();
    h.get_by_label("Compare").click();
    step_until(&mut h, 300, "the comparison", |app| {
        if let Some(Err(e)) = &app.compare.message {
            panic!("the comparison failed: {e}");
        }
        app.compare.scored() && !app.compare.is_running()
    });
    let app = h.state();
    let rows = app.compare.rows().unwrap();
    assert_eq!(rows.len(), 3);
    let steps: Vec<usize> = app.compare.recorded.iter().map(|r| r.frames.len()).collect();
    assert_eq!(steps, [3, 2, 2], "every step of each variant is recorded");
    assert!(rows
        .iter()
        .all(|r| r.ms_per_image > 0.0 && r.peak_bytes > 0 && r.fid.is_some()));
    assert!(
        rows[2].model_bytes < rows[1].model_bytes,
        "int8 weights are smaller"
    );
    assert!(rows.iter().any(|r| r.pareto));
    assert!(
        h.query_all_by_label_contains("Pareto front").count() >= 2,
        "the table and the plot show"
    );
    // The shared timeline moves every variant together.
    h.state_mut().compare.position = 0.0;
    h.step();
    h.step();
    let at = |h: &Harness<WgdiffApp>, text: &str| h.query_all_by_label_contains(text).count();
    assert_eq!(
        (at(&h, "step 1 of 3"), at(&h, "step 1 of 2")),
        (1, 2),
        "every variant at its first step"
    );
    h.get_by_label("Export table + plot").click();
    step_until(
        &mut h,
        60,
        "the export",
        |app| matches!(&app.compare.message, Some(Ok(m)) if m.starts_with("exported")),
    );
    let dir = out.join("compare");
    let md = std::fs::read_to_string(dir.join("compare.md")).unwrap();
    assert!(
        md.contains("int8") && md.contains("| MNIST-FID (4 samples) |"),
        "{md}"
    );
    assert!(image::open(dir.join("compare.png")).is_ok(), "the plot decodes");
}

#[test]
fn skip_view_plots_the_schedule_of_the_chosen_exponent() {
    let (gpu, _turn) = gpu();
    let out = scratch("skip");
    let mut h = harness(gpu, View::Skip, &out);
    step_until(&mut h, 120, "the FLOPs of each skip level", |app| {
        app.skip.flops.is_some()
    });
    let flops = h.state().skip.flops.clone().unwrap().1;
    assert_eq!(flops.len(), 3, "mnist-small has 3 levels");
    assert!(
        flops[0] > flops[1] && flops[1] > flops[2],
        "skipping levels removes FLOPs: {flops:?}"
    );
    // c = 0 never skips; raising c step by step on the slider makes the noisy steps skip.
    h.state_mut().skip.exponent = 0.0;
    h.step();
    assert!(h.state().skip.schedule().iter().all(|&(_, k)| k == 0));
    for _ in 0..20 {
        h.get_by_role_and_label(egui::accesskit::Role::Slider, "exponent c")
            .increment_accesskit();
        h.step();
    }
    let app = h.state();
    assert!(
        (app.skip.exponent - 2.0).abs() < 1e-4,
        "c = {}",
        app.skip.exponent
    );
    let schedule = app.skip.schedule();
    assert_eq!(
        schedule.first().map(|p| p.1),
        Some(2),
        "the first (noisiest) step skips N-1 levels"
    );
    assert_eq!(
        schedule.last().map(|p| p.1),
        Some(0),
        "the last step runs every level"
    );
    assert!(
        schedule.windows(2).all(|w| w[0].1 >= w[1].1),
        "k(t) falls as t falls"
    );
    mask_changing(&mut h, &[]);
    h.snapshot("skip_view");
}

#[test]
fn skip_view_loads_a_searched_schedule_and_draws_its_depths() {
    let (gpu, _turn) = gpu();
    let out = scratch("skip-schedule");
    // a schedule as `wgdiff experiment skip-search` writes it (with its search record)
    let path = out.join("schedule-budget-10.json");
    let json = r#"{"format": "wgdiff skip schedule", "sampler": {"name": "ddpm"}, "levels": 3,
        "skips": [2, 2, 2, 2, 1, 1, 1, 0, 0, 0],
        "search": {"model": "m.safetensors", "budget": 10.0, "samples": 100, "metric": "MNIST-FID",
          "fid_unskipped": 163.18, "fid": 170.5, "proxy_error": 0.01, "proxy_budget": 0.02,
          "predicted_ms": 1500.0, "unskipped_ms": 2500.0, "date": "2026-11-26T09:00:00Z"}}"#;
    std::fs::write(&path, json).unwrap();
    let options = AppOptions {
        checkpoint: shipped_model(),
        out: out.clone(),
        view: View::Skip,
        settings: vec![("schedule".into(), path.display().to_string())],
        ..AppOptions::default()
    };
    let mut h = harness_with(gpu, options, |cc, gpu, options| {
        WgdiffApp::new(cc, gpu, options).expect("the app opens")
    });
    step_until(&mut h, 120, "the schedule and the FLOPs of each level", |app| {
        app.skip.schedule.is_some() && app.skip.flops.is_some() && !app.skip.is_running()
    });
    let loaded = h.state().skip.schedule.clone().unwrap();
    assert_eq!(loaded.schedule.skips, [2, 2, 2, 2, 1, 1, 1, 0, 0, 0]);
    assert_eq!(h.state().skip.steps, 10, "the view follows the schedule's steps");
    let points = loaded.points();
    assert_eq!(
        (points[0].0, points[9].1),
        (1.0, 0),
        "evenly spaced times when the file has none"
    );
    assert!(h
        .query_by_label_contains("searched for MNIST-FID + 10: 170.50 against 163.18 unskipped")
        .is_some());
    mask_changing(&mut h, &["schedule "]);
    h.snapshot("skip_view_schedule");

    // a file that is not a schedule: the error is shown, the loaded schedule stays
    let bad = out.join("bad.json");
    std::fs::write(&bad, "{}").unwrap();
    h.state_mut().skip.schedule_path = bad.display().to_string();
    h.step();
    h.get_by_label("Load schedule").click();
    step_until(
        &mut h,
        30,
        "the refusal",
        |app| matches!(&app.skip.message, Some(Err(e)) if e.contains("not a skip schedule")),
    );
    assert!(h.state().skip.schedule.is_some());
}

#[test]
fn train_view_shows_a_finished_run_and_stops_a_running_one_with_a_checkpoint() {
    let (gpu, _turn) = gpu();
    let out = scratch("train");
    let mut h = harness(gpu, View::Train, &out);
    let set = |h: &mut Harness<WgdiffApp>, steps: usize, dir: &str| {
        let s = &mut h.state_mut().train.settings;
        s.preset = "tiny".into();
        s.batch = 4;
        s.steps = steps;
        s.sample_every = 2;
        s.checkpoint_every = 0;
        s.out = out.join(dir).display().to_string();
        h.step();
    };
    // A 4-step run ends by itself: the curve has every step, the grid is of step 4.
    set(&mut h, 4, "finished");
    h.get_by_label("Start").click();
    step_until(&mut h, 180, "a 4-step run", |app| {
        !app.train.is_running() && app.train.losses.len() == 4
    });
    assert!(h.state().train.losses.iter().all(|l| l[1].is_finite()));
    assert!(out.join("finished/checkpoint.safetensors").exists());
    mask_changing(&mut h, &["img/s", "checkpoint written", "finished at"]);
    h.snapshot("train_view");
    // A new run into that folder is refused, as `wgdiff train --out` without --force is
    let finished = std::fs::read(out.join("finished/checkpoint.safetensors")).unwrap();
    h.get_by_label("Start").click();
    h.step();
    assert!(!h.state().train.is_running());
    assert!(
        matches!(&h.state().train.message, Some(Err(m)) if m.contains("already holds a run")),
        "{:?}",
        h.state().train.message
    );
    assert_eq!(
        std::fs::read(out.join("finished/checkpoint.safetensors")).unwrap(),
        finished
    );
    // A long run stopped by the button writes its checkpoint, which the CLI's --resume continues.
    set(&mut h, 1000, "stopped");
    h.get_by_label("Start").click();
    step_until(&mut h, 180, "3 training steps", |app| app.train.losses.len() >= 3);
    h.get_by_label("Stop (writes the checkpoint)").click();
    step_until(&mut h, 120, "the stop", |app| !app.train.is_running());
    let app = h.state();
    let checkpoint = out.join("stopped/checkpoint.safetensors");
    assert_eq!(
        app.train.checkpoints.last(),
        Some(&checkpoint.display().to_string())
    );
    let resumed = Trainer::resume(gpu, &checkpoint, &Default::default()).expect("the checkpoint resumes");
    assert_eq!(resumed.state.step, app.train.losses.len());
    // Closing the window stops a run with its checkpoint too (the process used to end first)
    set(&mut h, 1000, "closed");
    h.get_by_label("Start").click();
    step_until(&mut h, 180, "2 training steps", |app| app.train.losses.len() >= 2);
    eframe::App::on_exit(h.state_mut());
    let closed =
        Checkpoint::load(&out.join("closed/checkpoint.safetensors")).expect("the closed run's checkpoint");
    assert!(closed.meta["step"].as_u64().unwrap() >= 2);
}

/// The train view's settings for a `tiny` run of `steps` steps writing to `out/dir`.
fn tiny_run(h: &mut Harness<WgdiffApp>, out: &Path, dir: &str, steps: usize) {
    let s = &mut h.state_mut().train.settings;
    s.preset = "tiny".into();
    s.batch = 4;
    s.steps = steps;
    s.sample_every = 0;
    s.checkpoint_every = 1;
    // (no time budget: a run of a few steps ends by its count, however busy the machine; the
    // recipe's 4.5 minutes ended a diverging run at step 1 on a loaded one)
    s.max_minutes = 0.0;
    s.out = out.join(dir).display().to_string();
    h.step();
}

#[test]
fn a_diverging_run_in_the_train_view_keeps_the_last_good_checkpoint() {
    let (gpu, _turn) = gpu();
    let out = scratch("diverge");
    let mut h = harness(gpu, View::Train, &out);
    tiny_run(&mut h, &out, "run", 60);
    // a learning rate far past any stable one: the warm-up's first steps stay finite, then
    // the weights blow up
    h.state_mut().train.settings.lr = 2e6;
    h.get_by_label("Start").click();
    h.step();
    assert!(h.state().train.is_running());
    step_until(&mut h, 240, "the run to diverge", |app| !app.train.is_running());
    let message = match &h.state().train.message {
        Some(Err(message)) => message.clone(),
        other => panic!("the run ended without an error: {other:?}"),
    };
    for part in [
        "has diverged",
        "was not overwritten",
        "last-good.safetensors",
        "--lr 2e5",
    ] {
        assert!(message.contains(part), "{message:?} does not mention {part:?}");
    }
    let checkpoint = std::fs::read(out.join("run/checkpoint.safetensors")).unwrap();
    let kept = std::fs::read(out.join("run/last-good.safetensors")).expect("last-good.safetensors");
    assert!(
        kept == checkpoint,
        "last-good.safetensors is the last checkpoint written"
    );
    let good = Checkpoint::from_bytes(&kept, "last-good").unwrap();
    assert_eq!(
        wgdiff::train::divergence(&good),
        None,
        "the kept checkpoint is healthy"
    );
    let step = good.meta["step"].as_u64().unwrap() as usize;
    assert!(
        step >= 1 && step < h.state().train.losses.len() + 1,
        "kept step {step}"
    );
    let resumed = Trainer::resume(gpu, &out.join("run/last-good.safetensors"), &Default::default());
    assert_eq!(resumed.expect("the kept checkpoint resumes").state.step, step);
}

#[test]
fn a_run_in_the_train_view_ends_at_its_time_budget_with_a_checkpoint() {
    let (gpu, _turn) = gpu();
    let out = scratch("budget");
    let mut h = harness(gpu, View::Train, &out);
    tiny_run(&mut h, &out, "run", 10_000);
    // a budget a few steps long: the run ends by itself, writes its checkpoint and grid (a
    // small one, as a page address or `--set` asks for it)
    h.state_mut().train.settings.max_minutes = 0.02;
    for (key, value) in [("grid-images", "4"), ("grid-steps", "2")] {
        h.state_mut().train.settings.set(key, value).unwrap();
    }
    assert!(h.state_mut().train.settings.set("grid-steps", "two").is_err());
    let config = h.state().train.settings.config();
    assert_eq!((config.grid_images, config.grid_steps), (4, 2));
    h.get_by_label("Start").click();
    h.step();
    assert!(h.state().train.is_running());
    step_until(&mut h, 240, "the time budget", |app| !app.train.is_running());
    let app = h.state();
    let steps = app.train.losses.len();
    assert!(
        matches!(&app.train.message, Some(Ok(m)) if m.starts_with(&format!("time budget reached at step {steps}"))),
        "{:?}",
        app.train.message
    );
    assert!((1..10_000).contains(&steps));
    assert!(app.train.has_grid(), "the final grid is shown");
    let saved = Checkpoint::load(&out.join("run/checkpoint.safetensors")).unwrap();
    assert_eq!(saved.meta["step"].as_u64(), Some(steps as u64));
    assert!(out.join("run/samples.png").exists());
}

/// The app and the page start from the library's recipe ([`TrainConfig::default`], what
/// `wgdiff train` runs); the page changes only its time budget and how many images a live
/// MNIST-FID scores.
#[test]
fn the_app_and_the_page_start_from_the_library_recipe() {
    let (gpu, _turn) = gpu();
    let out = scratch("defaults");
    let h = harness(gpu, View::Train, &out);
    let app = h.state().train.settings.config();
    let recipe = TrainConfig {
        out: app.out.clone(),
        ..TrainConfig::default()
    };
    assert_eq!(
        app, recipe,
        "the app's train view drifted from TrainConfig::default()"
    );
    let page = TrainSettings::defaults(app.out.display().to_string(), true).config();
    assert_eq!(
        page,
        TrainConfig {
            max_minutes: wgdiff::app::PAGE_MAX_MINUTES,
            fid_samples: wgdiff::app::PAGE_FID_SAMPLES,
            ..recipe
        },
        "the page may change only the time budget and the live MNIST-FID's samples"
    );
}

#[test]
fn an_app_run_gives_the_losses_of_a_cli_run_with_the_same_settings() {
    let (gpu, _turn) = gpu();
    let out = scratch("same-losses");
    let config = TrainConfig {
        preset: "tiny".into(),
        batch: 4,
        steps: 3,
        sample_every: 0,
        checkpoint_every: 0,
        out: out.join("app"),
        ..TrainConfig::default()
    };
    let ctx = egui::Context::default();
    let paused = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (gpu2, config2) = (gpu.clone(), config.clone());
    let mut job = wgdiff::app::Job::start(&ctx, "training", move |job| {
        wgdiff::app::run_training(gpu2, config2, None, paused, job)
    });
    let mut app_losses = Vec::new();
    let waited = Instant::now();
    while job.running() {
        assert!(
            waited.elapsed() < Duration::from_secs(180 * HANG_GUARD),
            "the app's run did not finish in {} s: it hung",
            180 * HANG_GUARD
        );
        for event in job.poll() {
            match event {
                wgdiff::app::Event::Message(TrainEvent::Step { loss, .. }) => app_losses.push(loss),
                wgdiff::app::Event::Finished(r) => r.expect("the app's run succeeds"),
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut cli = Trainer::new(
        gpu,
        TrainConfig {
            out: out.join("cli"),
            ..config
        },
    )
    .unwrap();
    let cli_losses: Vec<f32> = (0..3).map(|_| pollster::block_on(cli.step()).unwrap()).collect();
    assert_eq!(
        app_losses, cli_losses,
        "same settings, same seed: the same losses bit for bit"
    );
}

#[test]
fn profile_view_fills_a_sortable_table_and_the_roofline() {
    let (gpu, _turn) = gpu();
    let out = scratch("profile");
    let mut h = harness(gpu, View::Profile, &out);
    h.state_mut().profile.workload = wgdiff::app::ProfileWorkload::Training {
        preset: "tiny".into(),
        batch: 2,
    };
    h.step();
    h.get_by_label("Profile one step").click();
    step_until(&mut h, 240, "the profile and the ceilings", |app| {
        app.profile.profile.is_some() && app.profile.ceilings.is_some()
    });
    let app = h.state();
    let rows = app.profile.profile.as_ref().unwrap().rows();
    assert!(
        rows.len() > 5,
        "a training step runs many ops: {} rows",
        rows.len()
    );
    let ceilings = app.profile.ceilings.as_ref().unwrap();
    assert!(ceilings.gflops > 0.0 && ceilings.gbytes_per_s > 0.0);
    // The app profiles the step `wgdiff profile` profiles: the same ops in the same dispatches
    // with the same work (pacing, the UI's share of the device, is off while the profiler runs).
    let cli = pollster::block_on(wgdiff::profile::profile_training_step(
        gpu,
        &wgdiff::models::preset("tiny").unwrap(),
        2,
    ))
    .unwrap();
    let work = |rows: Vec<wgdiff::gpu::OpRow>| -> Vec<(String, String, usize, String)> {
        let mut rows: Vec<_> = rows
            .into_iter()
            .map(|r| (r.op, r.kernel, r.calls, format!("{:.6}", r.gflop)))
            .collect();
        rows.sort();
        rows
    };
    assert_eq!(
        work(rows.clone()),
        work(cli.rows()),
        "the app's profile and the CLI's"
    );
    assert!(
        app.profile
            .message
            .as_ref()
            .is_some_and(|m| m.as_ref().is_ok_and(|m| m.contains("% of wall"))),
        "the view says what share of the step's wall time the op times cover: {:?}",
        app.profile.message
    );
    h.get_by_label("calls").click();
    h.step();
    assert_eq!(h.state().profile.sort, wgdiff::app::SortBy::Calls);
    let sorted = h.state().profile.sorted_rows();
    assert!(
        sorted.windows(2).all(|w| w[0].calls >= w[1].calls),
        "sorted by calls"
    );
}

#[test]
fn device_view_lists_the_adapter_in_use() {
    let (gpu, _turn) = gpu();
    let out = scratch("device");
    let mut h = harness(gpu, View::Device, &out);
    step_until(&mut h, 30, "the device report", |app| app.device.report.is_some());
    let report = h.state().device.report.as_ref().unwrap();
    assert!(report.adapters.iter().any(|(a, _)| *a == report.chosen));
    assert!(h.query_by_label_contains("in use:").is_some());
}

#[test]
fn settings_from_a_page_address_or_set_flags_reach_the_first_view() {
    let (gpu, _turn) = gpu();
    let out = scratch("settings");
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let options = |view: View, settings: &[(&str, &str)]| AppOptions {
        checkpoint: shipped_model(),
        out: out.clone(),
        view,
        settings: pairs(settings),
        ..AppOptions::default()
    };
    let denoise = options(
        View::Denoise,
        &[
            ("steps", "7"),
            ("seed", "3"),
            ("guidance", "2.5"),
            ("sampler", "ddim"),
        ],
    );
    // (settings, what the error says)
    let bad = [
        (
            View::Denoise,
            ("bogus", "1"),
            "the denoise view has no setting `bogus`; it has checkpoint, sampler",
        ),
        (
            View::Denoise,
            ("steps", "many"),
            "setting `steps`: `many` is not a usize",
        ),
        (View::Train, ("preset", "huge"), "unknown model preset \"huge\""),
        (
            View::Train,
            ("lr", "-1"),
            "setting `lr`: `-1` is not a learning rate",
        ),
        (
            View::Experiments,
            ("experiment", "speed"),
            "no experiment \"speed\": the experiments are adaptive-skip, compression",
        ),
        (
            View::Experiments,
            ("samples", "0.5"),
            "experiment compression: --samples \"0.5\" is not a whole number",
        ),
        (
            View::Profile,
            ("steps", "2"),
            "the profile view takes no settings",
        ),
        (
            View::Compare,
            ("e.steps", "2"),
            "compare setting `e.steps`: `e` is not a variant (a to d)",
        ),
        (
            View::Compare,
            ("b.seed", "2"),
            "every variant samples the plan's seed; set `seed`",
        ),
        (
            View::Compare,
            ("a.repeat", "3"),
            "every variant samples the plan's repeat; set `rounds`",
        ),
        (View::Compare, ("a.sampler", "euler"), "unknown sampler `euler`"),
    ];
    let bad_options: Vec<AppOptions> = bad.iter().map(|(view, kv, _)| options(*view, &[*kv])).collect();
    let errors = std::sync::Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    let harness = harness_with(gpu, denoise, move |cc, gpu, options| {
        for options in bad_options {
            let err = WgdiffApp::new(cc, gpu.clone(), options)
                .err()
                .expect("a bad setting fails");
            seen.lock().unwrap().push(err.to_string());
        }
        WgdiffApp::new(cc, gpu, options).expect("the app opens")
    });
    let settings = &harness.state().denoise.settings;
    assert_eq!((settings.steps, settings.seed), (7, 3));
    assert_eq!(
        (settings.guidance, settings.sampler.as_str()),
        (Some(2.5), "ddim")
    );
    let errors = errors.lock().unwrap();
    assert_eq!(errors.len(), bad.len());
    for (err, (_, _, want)) in errors.iter().zip(bad) {
        assert!(err.contains(want), "{err:?} should say {want:?}");
    }

    // A variant's settings as LETTER.KEY; naming the fourth adds copies of the last up to it
    let compare = options(
        View::Compare,
        &[
            ("images", "4"),
            ("a.steps", "4"),
            ("d.sampler", "ddim"),
            ("d.steps", "3"),
        ],
    );
    let harness = harness_with(gpu, compare, |cc, gpu, options| {
        WgdiffApp::new(cc, gpu, options).expect("the app opens")
    });
    let compare = &harness.state().compare;
    let variants: Vec<(&str, usize)> = compare
        .variants
        .iter()
        .map(|v| (v.sampler.as_str(), v.steps))
        .collect();
    assert_eq!(variants, [("ddpm", 4), ("ddim", 10), ("ddim", 10), ("ddim", 3)]);
    assert_eq!(compare.plan.images, 4);

    let train = options(
        View::Train,
        &[("preset", "tiny"), ("batch", "4"), ("sample-every", "0")],
    );
    let harness = harness_with(gpu, train, |cc, gpu, options| {
        WgdiffApp::new(cc, gpu, options).expect("the app opens")
    });
    let settings = &harness.state().train.settings;
    assert_eq!(
        (settings.preset.as_str(), settings.batch, settings.sample_every),
        ("tiny", 4, 0)
    );

    // A log the app cannot write at its close is an error of the run (`wgdiff gui` exited 0)
    let blocker = out.join("a-file");
    std::fs::write(&blocker, b"in the way").unwrap();
    let unwritable = AppOptions {
        frame_log: Some(blocker.join("frames.csv")),
        ..options(View::Device, &[])
    };
    let failures = unwritable.failures.clone();
    let harness = harness_with(gpu, unwritable, |cc, gpu, options| {
        WgdiffApp::new(cc, gpu, options).expect("the app opens")
    });
    failures.check().expect("nothing failed yet");
    harness.state().write_logs();
    let err = failures.check().unwrap_err().to_string();
    assert!(err.contains("--frame-log") && err.contains("frames.csv"), "{err}");
}

/// Every number in `text` as `#` and the report's header line (the command, date and wall
/// time) dropped: what two runs of one experiment share whatever their timings.
fn numbers_masked(text: &str) -> String {
    let mut masked = String::with_capacity(text.len());
    let mut in_number = false;
    for c in text.chars() {
        let numeric = c.is_ascii_digit() || (in_number && c == '.');
        if numeric && !in_number {
            masked.push('#');
        } else if !numeric {
            masked.push(c);
        }
        in_number = numeric;
    }
    masked
        .lines()
        .filter(|l| !l.contains("s in all."))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn experiments_view_fills_tables_and_plots_live_and_writes_the_reports_wgdiff_experiment_writes() {
    let (gpu, _turn) = gpu();
    let out = scratch("experiments");
    let (app_out, cli_out, cancelled_out) = (out.join("app"), out.join("cli"), out.join("cancelled"));
    let flags = [("samples", "4"), ("steps", "1")];
    let mut settings = vec![
        ("experiment".to_string(), "compression".to_string()),
        ("quick".to_string(), "true".to_string()),
        ("out".to_string(), app_out.display().to_string()),
    ];
    settings.extend(flags.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let options = AppOptions {
        checkpoint: shipped_model(),
        out: out.clone(),
        view: View::Experiments,
        settings,
        ..AppOptions::default()
    };
    let mut h = harness_with(gpu, options, |cc, gpu, options| {
        WgdiffApp::new(cc, gpu, options).expect("the app opens")
    });
    h.step();
    assert_eq!(
        h.query_all_by_label_contains("same as: wgdiff experiment compression --quick")
            .count(),
        1,
        "the view shows the command it runs"
    );
    h.get_by_label("Start").click();
    let started = Instant::now();
    // Rows arrive while the experiment runs: the first model's rows before its timing.
    step_every(&mut h, 500, 600, "the first rows", |app| {
        if let Some(Err(e)) = &app.experiments.message {
            panic!("the experiment failed: {e}");
        }
        app.experiments.tables.first().is_some_and(|t| t.rows.len() >= 3)
    });
    assert!(h.state().experiments.is_running(), "rows fill in before the end");
    assert!(
        h.state().experiments.plots.iter().any(|p| !p.series.is_empty()),
        "the plot draws as rows arrive"
    );
    step_every(&mut h, 500, 900, "the report", |app| {
        if let Some(Err(e)) = &app.experiments.message {
            panic!("the experiment failed: {e}");
        }
        app.experiments.done()
    });
    let app = h.state();
    let rows = &app.experiments.tables[0].rows;
    assert_eq!(rows.len(), 24, "12 settings x 2 models");
    assert!(
        rows.iter().all(|(_, cells)| cells[4].parse::<f64>().is_ok()),
        "every row got its time"
    );
    assert_eq!(
        app.experiments.plots.len(),
        2,
        "MNIST-FID against size and against time"
    );

    eprintln!("the app's run: {:.0} s", started.elapsed().as_secs_f64());
    // The same experiment from the command line, into its own folder.
    let started = Instant::now();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_wgdiff"))
        .args([
            "--deterministic",
            "experiment",
            "compression",
            "--quick",
            "--samples",
            "4",
            "--steps",
            "1",
            "--out",
        ])
        .arg(&cli_out)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    eprintln!("the command's run: {:.0} s", started.elapsed().as_secs_f64());
    let files = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(files(&app_out), files(&cli_out), "the same files");
    for png in ["fid-vs-size.png", "fid-vs-ms.png"] {
        assert!(image::open(app_out.join(png)).is_ok(), "{png} decodes");
    }
    let json = |dir: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join("compression.json")).unwrap()).unwrap()
    };
    let (a, c) = (json(&app_out), json(&cli_out));
    assert_eq!(a["plan"], c["plan"]);
    let (a_rows, c_rows) = (a["rows"].as_array().unwrap(), c["rows"].as_array().unwrap());
    assert_eq!(a_rows.len(), c_rows.len());
    for (x, y) in a_rows.iter().zip(c_rows) {
        for key in [
            "model",
            "setting",
            "bytes",
            "gzipped_bytes",
            "packed_weights",
            "published",
        ] {
            assert_eq!(x[key], y[key], "{key} of {}", x["setting"]);
        }
        // (the autotuner may pick other kernels in another process: sums in another order)
        let (fa, fc) = (x["fid"].as_f64().unwrap(), y["fid"].as_f64().unwrap());
        assert!(
            (fa - fc).abs() <= 1e-4 * fc.abs(),
            "MNIST-FID of {}: {fa} and {fc}",
            x["setting"]
        );
    }
    let md = |dir: &Path| numbers_masked(&std::fs::read_to_string(dir.join("compression.md")).unwrap());
    assert_eq!(md(&app_out), md(&cli_out), "the same report but for its timings");
    assert!(a["command"]
        .as_str()
        .unwrap()
        .starts_with("wgdiff experiment compression --quick"));

    // Cancel stops a run and writes nothing.
    h.state_mut().experiments.fields.retain(|(k, _)| *k != "out");
    h.state_mut()
        .experiments
        .fields
        .push(("out", cancelled_out.display().to_string()));
    h.get_by_label("Start").click();
    step_until(&mut h, 120, "the first event", |app| {
        !app.experiments.tables.is_empty()
    });
    h.get_by_label("Cancel").click();
    step_until(&mut h, 120, "the cancelled run's end", |app| {
        !app.experiments.is_running()
    });
    assert!(
        matches!(&h.state().experiments.message, Some(Ok(m)) if m.starts_with("cancelled")),
        "{:?}",
        h.state().experiments.message
    );
    assert!(!cancelled_out.join("compression.md").exists());
}
