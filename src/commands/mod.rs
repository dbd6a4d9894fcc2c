//! The `wgdiff` subcommands, one module each; shared here: opening the device with the
//! autotuner's cache file, and printing the autotuner's choices.

pub mod bench;
pub mod bench_app;
pub mod bench_soak;
pub mod bench_step;
pub mod bench_torch;
pub mod compress;
pub mod distributed;
pub mod eval;
pub mod experiment;
pub mod export;
#[cfg(feature = "gui")]
pub mod gui;
pub mod import;
pub mod info;
pub mod model;
pub mod profile;
pub mod python_helper;
pub mod sample;
pub mod train;
pub mod train_classifier;

use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering};
use wgdiff::classifier::MnistFid;
use wgdiff::gpu::DeviceSet;
use wgdiff::{AdapterChoice, Gpu};

/// Opens the device with kernel choices remembered across runs in the user's cache folder.
pub fn open_gpu(choice: AdapterChoice) -> Result<Gpu> {
    let gpu = Gpu::new_blocking(choice.clone())?;
    configure(&gpu, &choice);
    Ok(gpu)
}

/// Seconds between the lines that say the kernel tuning goes on.
const TUNING_NOTICE_EVERY_S: u64 = 10;

/// What a terminal shows while the autotuner measures kernel variants for new shapes: a line
/// at the first measurement (why the work is slow, where the choices go, how to skip it), then
/// one every [`TUNING_NOTICE_EVERY_S`] seconds with the count so far.
fn tuning_notice(cache: &std::path::Path) -> impl Fn(&str) + Send + Sync + 'static {
    let cache = cache.display().to_string();
    let seen = std::sync::Mutex::new((0usize, None::<std::time::Instant>));
    move |key: &str| {
        let mut seen = seen.lock().unwrap();
        seen.0 += 1;
        let due = seen
            .1
            .is_none_or(|at| at.elapsed().as_secs() >= TUNING_NOTICE_EVERY_S);
        if !due {
            return;
        }
        match seen.1 {
            None => eprintln!(
                "tuning: measuring kernel variants for shapes new to this device ({key} first); the choices \
                 are saved in {cache} for later runs; --deterministic skips the measuring"
            ),
            Some(_) => eprintln!("tuning: {} shapes measured so far ({key} now)", seen.0),
        }
        seen.1 = Some(std::time::Instant::now());
    }
}

/// A count flag's value (repetitions, steps) of at least 1: a median of no runs or a profile
/// of no steps would print figures of nothing.
pub fn at_least_one(text: &str) -> std::result::Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a count ({e})")),
    }
}

/// Opens the devices of `set` (`--devices`), each set up as [`open_gpu`] sets up one.
pub fn open_gpus(choice: AdapterChoice, set: &DeviceSet) -> Result<Vec<Gpu>> {
    let gpus = pollster::block_on(wgdiff::gpu::open_devices(choice.clone(), set))?;
    for gpu in &gpus {
        configure(gpu, &choice);
    }
    Ok(gpus)
}

/// The slow-fallback warning, then deterministic kernels (`--deterministic`) or the
/// autotuner's cache file.
fn configure(gpu: &Gpu, choice: &AdapterChoice) {
    if let Some(warning) = wgdiff::gpu::slow_fallback_warning(&gpu.info, &choice.clone().or_env()) {
        eprintln!("{warning}");
    }
    if let Some(note) = wgdiff::gpu::old_lavapipe_note(&gpu.info, wgdiff::gpu::host_has_avx512()) {
        // (once per process, however many devices it opens)
        static NOTED: std::sync::Once = std::sync::Once::new();
        NOTED.call_once(|| eprintln!("{note}"));
    }
    if DETERMINISTIC.load(Ordering::Relaxed) {
        gpu.set_deterministic(true);
        return;
    }
    if let Some(path) = wgdiff::gpu::tuning_cache_path(&gpu.info) {
        gpu.tuner().on_measure(tuning_notice(&path));
        gpu.tuner().use_cache_file(path);
    }
}

/// Set by `--deterministic`: devices opened by [`open_gpu`] choose kernels by fixed rules.
static DETERMINISTIC: AtomicBool = AtomicBool::new(false);

/// Makes every device [`open_gpu`] opens use fixed kernel choices instead of timing them (see
/// `Gpu::set_deterministic`): bit-identical results from run to run on one adapter.
pub fn use_deterministic_kernels(on: bool) {
    DETERMINISTIC.store(on, Ordering::Relaxed);
}

/// The kernel choices the autotuner measured in this run or loaded from its cache.
pub fn print_tuner(gpu: &Gpu) {
    println!("kernel choices measured by the autotuner:");
    for (key, choice) in gpu.tuner().snapshot() {
        println!("  {key:<50} {choice}");
    }
}

/// Exit status after a Ctrl-C or SIGTERM (128 + SIGINT, as shells report an interrupted command).
pub const INTERRUPTED_STATUS: u8 = 130;

/// The run stopped on Ctrl-C or SIGTERM after writing its checkpoint (`main` exits with
/// [`INTERRUPTED_STATUS`]).
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("stopped by a signal")
    }
}

impl std::error::Error for Interrupted {}

/// A progress bar over `len` items of `what`, with room for a message and the time left.
pub fn progress_bar(len: usize, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{bar:30}} {{pos}}/{{len}} {what}  {{msg}}  [{{elapsed_precise}} < {{eta_precise}}]"
        ))
        .expect("valid template"),
    );
    bar
}

/// Seconds between the progress lines written where stderr is not a terminal.
const PROGRESS_LINE_EVERY_S: u64 = 10;

/// Progress over a count of items: a bar on a terminal; where stderr is not one (a log file, a
/// pipe), where a bar draws nothing, a line with the count, the elapsed time and the time left
/// at the first update and then every [`PROGRESS_LINE_EVERY_S`] seconds: long work is never
/// silent.
pub struct Progress {
    bar: indicatif::ProgressBar,
    what: String,
    started: std::time::Instant,
    last_line: std::cell::Cell<Option<std::time::Instant>>,
}

impl Progress {
    /// Progress over `len` items of `what` ("images", "samples").
    pub fn new(len: usize, what: &str) -> Progress {
        Progress {
            bar: progress_bar(len, what),
            what: what.to_string(),
            started: std::time::Instant::now(),
            last_line: std::cell::Cell::new(None),
        }
    }

    pub fn set_position(&self, done: u64) {
        self.bar.set_position(done);
        let recent = self
            .last_line
            .get()
            .is_some_and(|at| at.elapsed().as_secs() < PROGRESS_LINE_EVERY_S);
        if !self.bar.is_hidden() || recent {
            return;
        }
        let (elapsed, len) = (
            self.started.elapsed().as_secs_f64(),
            self.bar.length().unwrap_or(done),
        );
        let left = match done {
            0 => String::from("?"),
            _ => format!("{:.0}", elapsed * len.saturating_sub(done) as f64 / done as f64),
        };
        eprintln!("{done}/{len} {}  elapsed {elapsed:.0} s  eta {left} s", self.what);
        self.last_line.set(Some(std::time::Instant::now()));
    }

    pub fn finish(&self) {
        self.bar.finish();
    }

    pub fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
    }
}

/// MNIST-FID from the library's one constructor, with a progress bar while the reference
/// statistics are computed (`images`: None for the MNIST test split of `data`) and a line
/// saying where they came from.
pub fn mnist_fid(
    gpu: &Gpu,
    classifier: &std::path::Path,
    data: &str,
    images: Option<wgdiff::eval::ReferenceImages>,
    cache: &std::path::Path,
) -> Result<MnistFid> {
    let mut bar: Option<Progress> = None;
    let mut progress = |done: usize, total: usize| {
        bar.get_or_insert_with(|| Progress::new(total, "MNIST-FID reference images"))
            .set_position(done as u64)
    };
    let fid = pollster::block_on(async {
        match images {
            Some(images) => MnistFid::load(gpu, classifier, images, cache, &mut progress).await,
            None => MnistFid::of_test_split(gpu, classifier, data, cache, &mut progress).await,
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let source = &fid.reference.source;
    eprintln!(
        "MNIST-FID reference: {} {} images ({})",
        source.images,
        source.dataset,
        if fid.cached {
            "cached"
        } else {
            "computed and cached"
        }
    );
    Ok(fid)
}

/// One line on stderr: the pipelines this process created and the seconds wgpu took for them
/// (a driver may compile a kernel at its first dispatch instead, as lavapipe does: `wgdiff
/// profile` times that).
pub fn report_pipeline_creation(gpu: &Gpu) {
    let created = gpu.pipeline_creations();
    let seconds: f64 = created.iter().map(|c| c.seconds).sum();
    eprintln!(
        "{} pipelines created in {seconds:.1} s (what each kernel's first dispatch cost: `wgdiff profile sample`)",
        created.len()
    );
}
