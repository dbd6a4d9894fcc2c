//! Fuzz-style tests of every loader (IDX raw/gz, CIFAR-10, image-folder files, checkpoints with
//! their JSON metadata, compressed checkpoints, skip-schedule files, TOML configs, `--data`
//! strings, diffusers model folders): seeded mutations of valid inputs must
//! give a value or a clear error, never a panic. Each runs a few hundred cases here;
//! `scripts/fuzz.sh MINUTES` runs the `fuzz_long_*` forms for that long per loader and reports.

use crate::common::gpu;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wgdiff::checkpoint::Checkpoint;
use wgdiff::compress::{compress_checkpoint, CompressPlan, PruneMethod, PrunePlan, PruneScope, QuantizePlan};
use wgdiff::data::{cifar10, idx_from_bytes, image_folder, load_idx, DataSource, Dataset, Split};
use wgdiff::diffusion::SkipSchedule;
use wgdiff::ops::WeightBits;
use wgdiff::pipeline::diffusers::{import, DiffusersFiles, CONFIG_FILE, SCHEDULER_FILE, WEIGHTS_FILE};
use wgdiff::pipeline::diffusers_export::export;
use wgdiff::pipeline::TrainedModel;
use wgdiff::train::{TrainConfig, Trainer};

/// Cases per loader in `cargo test`.
const SHORT_CASES: usize = 120;

/// How long a fuzz run goes on.
#[derive(Clone, Copy)]
enum Budget {
    Cases(usize),
    Time(Duration),
}

impl Budget {
    /// `WGDIFF_FUZZ_SECONDS` (default 600) for the long forms.
    fn long() -> Budget {
        let seconds = std::env::var("WGDIFF_FUZZ_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(600);
        Budget::Time(Duration::from_secs(seconds))
    }

    fn more(self, cases: usize, start: Instant) -> bool {
        match self {
            Budget::Cases(n) => cases < n,
            Budget::Time(t) => start.elapsed() < t,
        }
    }
}

/// Mutations of valid inputs, from a seeded generator.
struct Mutator(StdRng);

/// Numbers that break naive size arithmetic, as they would appear in a binary header.
const EDGE_U32: [u32; 8] = [
    0,
    1,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x0100_0000,
    60_000,
    0xfffe,
];

/// Values that break naive parsing, as they would appear in text.
const EDGE_TEXT: [&str; 14] = [
    "0",
    "-1",
    "1e30",
    "-1e30",
    "nan",
    "inf",
    "18446744073709551615",
    "4294967296",
    "\"\"",
    "[]",
    "{}",
    "null",
    "true",
    "\u{0}",
];

impl Mutator {
    fn new(seed: u64) -> Mutator {
        Mutator(StdRng::seed_from_u64(seed))
    }

    /// One to three byte-level mutations: truncation, bit flips, an edge number written over
    /// 4 bytes (big- or little-endian), a range deleted, duplicated, zeroed or filled with noise.
    fn bytes(&mut self, valid: &[u8]) -> Vec<u8> {
        let mut out = valid.to_vec();
        for _ in 0..self.0.random_range(1..=3) {
            self.bytes_once(&mut out);
        }
        out
    }

    /// A position in `out`, biased towards its first 64 bytes (where the headers are).
    fn position(&mut self, len: usize) -> usize {
        if len == 0 {
            return 0;
        }
        if self.0.random_bool(0.6) {
            self.0.random_range(0..len.min(64))
        } else {
            self.0.random_range(0..len)
        }
    }

    fn bytes_once(&mut self, out: &mut Vec<u8>) {
        let len = out.len();
        let at = self.position(len);
        let span = self.0.random_range(1..=64).min(len - at.min(len)).max(1);
        match self.0.random_range(0..7) {
            0 => out.truncate(self.0.random_range(0..=len)),
            1 => {
                for _ in 0..self.0.random_range(1..=8) {
                    let i = self.position(len);
                    if i < out.len() {
                        out[i] ^= 1 << self.0.random_range(0..8);
                    }
                }
            }
            2 if len >= 4 => {
                let at = at.min(len - 4);
                let value = EDGE_U32[self.0.random_range(0..EDGE_U32.len())];
                let bytes = if self.0.random_bool(0.5) {
                    value.to_be_bytes()
                } else {
                    value.to_le_bytes()
                };
                out[at..at + 4].copy_from_slice(&bytes);
            }
            3 if at < len => {
                out.drain(at..(at + span).min(len));
            }
            4 if at < len => {
                let copy = out[at..(at + span).min(len)].to_vec();
                out.splice(at..at, copy);
            }
            5 if at < len => out[at..(at + span).min(len)].fill(0),
            _ => {
                let noise: Vec<u8> = (0..span).map(|_| self.0.random()).collect();
                out.splice(at.min(len)..at.min(len), noise);
            }
        }
    }

    /// One to three text mutations: a number or value replaced by an edge value, a line
    /// deleted or duplicated, or (sometimes) byte mutations; the result is valid UTF-8.
    fn text(&mut self, valid: &str) -> String {
        let mut out = valid.to_string();
        for _ in 0..self.0.random_range(1..=3) {
            out = match self.0.random_range(0..5) {
                0 | 1 => self.replace_value(&out),
                2 => self.edit_line(&out, false),
                3 => self.edit_line(&out, true),
                _ => String::from_utf8_lossy(&self.bytes(out.as_bytes())).into_owned(),
            };
        }
        out
    }

    /// Replaces a run of digits (or, if none, a random span) with an edge value.
    fn replace_value(&mut self, text: &str) -> String {
        let edge = EDGE_TEXT[self.0.random_range(0..EDGE_TEXT.len())];
        let digit_runs: Vec<(usize, usize)> = text
            .char_indices()
            .filter(|&(i, c)| c.is_ascii_digit() && (i == 0 || !text.as_bytes()[i - 1].is_ascii_digit()))
            .map(|(i, _)| {
                let end = text[i..]
                    .find(|c: char| !c.is_ascii_digit() && c != '.')
                    .map_or(text.len(), |e| i + e);
                (i, end)
            })
            .collect();
        if digit_runs.is_empty() {
            return format!("{text}{edge}");
        }
        let (start, end) = digit_runs[self.0.random_range(0..digit_runs.len())];
        format!("{}{edge}{}", &text[..start], &text[end..])
    }

    fn edit_line(&mut self, text: &str, duplicate: bool) -> String {
        let mut lines: Vec<&str> = text.lines().collect();
        if lines.is_empty() {
            return text.to_string();
        }
        let i = self.0.random_range(0..lines.len());
        if duplicate {
            lines.insert(i, lines[i]);
        } else {
            lines.remove(i);
        }
        lines.join("\n")
    }
}

/// What a fuzz run saw.
#[derive(Default)]
struct Report {
    cases: usize,
    refused: usize,
    panics: Vec<(u64, String)>,
}

impl Report {
    /// Prints the figures (one line `scripts/fuzz.sh` collects) and fails on any panic,
    /// listing the seeds that reproduce them (`WGDIFF_FUZZ_SEED=seed`).
    fn finish(self, loader: &str, start: Instant) {
        println!(
            "fuzz {loader}: {} cases in {:.0} s, {} refused with an error, {} accepted, {} panics",
            self.cases,
            start.elapsed().as_secs_f64(),
            self.refused,
            self.cases - self.refused - self.panics.len(),
            self.panics.len()
        );
        assert!(
            self.panics.is_empty(),
            "{loader}: panics (case seed, message): {:?}",
            self.panics
        );
    }
}

/// Where the seed of the running case is written before it runs, so a case that kills the
/// process (an abort, out of memory) can be replayed: `scripts/fuzz.sh` reports it.
fn current_case_file(loader: &str) -> PathBuf {
    std::env::temp_dir().join(format!("wgdiff-fuzz-{}.seed", loader.replace(' ', "-")))
}

/// Runs `case(mutator)` until `budget` ends; each case gets its own seed (from
/// `WGDIFF_FUZZ_SEED` when set, to replay one, else random) and must return, not panic.
fn fuzz<T>(loader: &str, budget: Budget, mut case: impl FnMut(&mut Mutator) -> wgdiff::Result<T>) {
    let replay: Option<u64> = std::env::var("WGDIFF_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let budget = if replay.is_some() {
        Budget::Cases(1)
    } else {
        budget
    };
    let start = Instant::now();
    let mut report = Report::default();
    let seed_file = current_case_file(loader);
    while budget.more(report.cases, start) {
        let seed = replay.unwrap_or_else(crate::common::fresh_seed);
        std::fs::write(&seed_file, seed.to_string()).unwrap();
        let mut mutator = Mutator::new(seed);
        match catch_unwind(AssertUnwindSafe(|| case(&mut mutator))) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                report.refused += 1;
                assert!(!e.to_string().is_empty(), "{loader}: an empty error message");
            }
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                report.panics.push((seed, msg));
            }
        }
        report.cases += 1;
    }
    let _ = std::fs::remove_file(&seed_file);
    report.finish(loader, start);
}

/// A fresh folder for one loader's cases.
fn fuzz_dir(loader: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wgdiff-fuzz-{}-{loader}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// 20 MNIST test images and their labels as raw IDX files.
fn valid_idx() -> (Vec<u8>, Vec<u8>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/mnist");
    let data = wgdiff::data::mnist(dir, Split::Test).unwrap();
    let n = 20u32;
    let mut images = [0x803u32, n, 28, 28].map(u32::to_be_bytes).concat();
    images.extend(
        data.images[..784 * n as usize]
            .iter()
            .map(|v| ((v + 1.0) * 127.5).round() as u8),
    );
    let mut labels = [0x801u32, n].map(u32::to_be_bytes).concat();
    labels.extend(data.labels[..n as usize].iter().map(|&l| l as u8));
    (images, labels)
}

/// Mutates one of the two files, raw or gzipped (before or after compressing).
fn mutate_maybe_gzipped(m: &mut Mutator, valid: &[u8], mutate: bool) -> Vec<u8> {
    match (mutate, m.0.random_range(0..3)) {
        (false, 0) => gzip(valid),
        (false, _) => valid.to_vec(),
        (true, 0) => m.bytes(valid),
        (true, 1) => gzip(&m.bytes(valid)),
        (true, _) => m.bytes(&gzip(valid)),
    }
}

fn fuzz_idx(budget: Budget) {
    let (images, labels) = valid_idx();
    let dir = fuzz_dir("idx");
    let (images_path, labels_path) = (dir.join("images"), dir.join("labels"));
    fuzz("idx", budget, |m| {
        let mutate_images = m.0.random_bool(0.7);
        let image_bytes = mutate_maybe_gzipped(m, &images, mutate_images);
        let label_bytes = mutate_maybe_gzipped(m, &labels, !mutate_images);
        std::fs::write(&images_path, &image_bytes).unwrap();
        std::fs::write(&labels_path, &label_bytes).unwrap();
        let from_files = load_idx(&images_path, &labels_path);
        let from_bytes = idx_from_bytes((&images_path, image_bytes), (&labels_path, label_bytes));
        assert_eq!(
            from_files.as_ref().ok(),
            from_bytes.as_ref().ok(),
            "files and bytes disagree"
        );
        from_files
    });
}

fn fuzz_cifar(budget: Budget) {
    let mut valid = Vec::new();
    for label in [3u8, 9, 0] {
        valid.push(label);
        valid.extend((0..3072).map(|i| (i * 7 + label as usize) as u8));
    }
    let dir = fuzz_dir("cifar");
    fuzz("cifar", budget, |m| {
        std::fs::write(dir.join("test_batch.bin"), mutate_maybe_gzipped(m, &valid, true)).unwrap();
        cifar10(&dir, Split::Test)
    });
}

fn encoded(img: image::DynamicImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, format).unwrap();
    out.into_inner()
}

fn fuzz_image_folder(budget: Budget) {
    let gray = image::GrayImage::from_fn(8, 6, |x, y| image::Luma([(10 * x + 3 * y) as u8]));
    let rgb = image::RgbImage::from_fn(8, 6, |x, y| image::Rgb([(20 * x) as u8, (30 * y) as u8, 90]));
    let png = encoded(gray.into(), image::ImageFormat::Png);
    let jpeg = encoded(rgb.into(), image::ImageFormat::Jpeg);
    let dir = fuzz_dir("folder");
    std::fs::write(dir.join("a.png"), &png).unwrap();
    fuzz("image folder", budget, |m| {
        let (name, valid) = if m.0.random_bool(0.5) {
            ("b.png", &png)
        } else {
            ("b.jpg", &jpeg)
        };
        let _ = std::fs::remove_file(dir.join("b.png"));
        let _ = std::fs::remove_file(dir.join("b.jpg"));
        std::fs::write(dir.join(name), m.bytes(valid)).unwrap();
        let size = m.0.random_bool(0.5).then_some((6, 8));
        let channels = if m.0.random_bool(0.5) { 1 } else { 3 };
        image_folder(&dir, size, channels)
    });
}

/// 32 MNIST images (what the checkpoint fuzzer's resumes train on).
fn small_dataset() -> Arc<Dataset> {
    let (images, labels) = valid_idx();
    Arc::new(idx_from_bytes((Path::new("images"), images), (Path::new("labels"), labels)).unwrap())
}

/// A checkpoint of `wgdiff train` (tiny preset, 1 step) as bytes, and the dataset it trained on.
fn valid_checkpoint() -> (Vec<u8>, Arc<Dataset>) {
    let data = small_dataset();
    let config = TrainConfig {
        preset: "tiny".into(),
        steps: 1,
        batch: 4,
        ..TrainConfig::default()
    };
    let mut trainer = Trainer::with_data(gpu(), config, data.clone(), None).unwrap();
    pollster::block_on(trainer.step()).unwrap();
    let ckpt = pollster::block_on(trainer.capture()).unwrap();
    (ckpt.to_bytes().unwrap(), data)
}

/// Re-encodes `bytes` (a valid checkpoint) with its JSON metadata mutated as text, so the
/// safetensors layer passes and the metadata loaders are reached.
fn with_mutated_metadata(m: &mut Mutator, bytes: &[u8]) -> Vec<u8> {
    let mut ckpt = Checkpoint::from_bytes(bytes, "valid").unwrap();
    let text = serde_json::to_string_pretty(&ckpt.meta).unwrap();
    match serde_json::from_str(&m.text(&text)) {
        Ok(meta) => {
            ckpt.meta = meta;
            ckpt.to_bytes().unwrap()
        }
        Err(_) => m.bytes(bytes),
    }
}

/// A valid checkpoint's bytes (`header_len`: its safetensors header's end) mutated one of three
/// ways: its wgdiff metadata as text, its safetensors header (names, dtypes, shapes, offsets)
/// as text with the F32 dtypes perhaps renamed, or its raw bytes.
fn mutated_checkpoint(m: &mut Mutator, valid: &[u8], header_len: usize) -> Vec<u8> {
    match m.0.random_range(0..4) {
        0 => with_mutated_metadata(m, valid),
        1 => with_mutated_header(m, valid, header_len),
        _ => m.bytes(valid),
    }
}

/// A valid safetensors file's bytes with its header (names, dtypes, shapes, offsets) mutated as
/// text, the F32 dtypes perhaps renamed.
fn with_mutated_header(m: &mut Mutator, valid: &[u8], header_len: usize) -> Vec<u8> {
    let header = String::from_utf8_lossy(&valid[8..header_len]).into_owned();
    let dtype = ["F32", "F16", "BF16", "I64", "BOOL", "I8", "U8"][m.0.random_range(0..7)];
    let header = m.text(&header.replace("F32", dtype));
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&valid[header_len..]);
    out
}

/// End of the safetensors header of `bytes` (a valid file's).
fn header_end(bytes: &[u8]) -> usize {
    8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize
}

fn fuzz_checkpoint(budget: Budget) {
    let (valid, data) = valid_checkpoint();
    let header_len = header_end(&valid);
    fuzz("checkpoint", budget, |m| {
        let bytes = mutated_checkpoint(m, &valid, header_len);
        let ckpt = Checkpoint::from_bytes(&bytes, "fuzzed.safetensors")?;
        TrainedModel::from_checkpoint(gpu(), &ckpt, "fuzzed.safetensors", None)?;
        Trainer::resume_with_data(
            gpu(),
            &ckpt,
            "fuzzed.safetensors",
            data.clone(),
            &Default::default(),
        )
    });
}

/// `wgdiff compress` outputs of the tiny checkpoint: L1-pruned (30%, global) with int8 weights
/// per channel, and int4 weights per tensor.
fn valid_compressed_checkpoints() -> Vec<Vec<u8>> {
    let (valid, _) = valid_checkpoint();
    let ckpt = Checkpoint::from_bytes(&valid, "valid").unwrap();
    let plans = [
        (
            Some(PrunePlan {
                method: PruneMethod::L1,
                amount: 0.3,
                scope: PruneScope::Global,
            }),
            WeightBits::Int8,
            true,
        ),
        (None, WeightBits::Int4, false),
    ];
    plans
        .into_iter()
        .map(|(prune, bits, per_channel)| {
            let plan = CompressPlan {
                prune,
                quantize: Some(QuantizePlan { bits, per_channel }),
                seed: 1,
            };
            compress_checkpoint(gpu(), &ckpt, "valid", &plan)
                .unwrap()
                .0
                .to_bytes()
                .unwrap()
        })
        .collect()
}

/// The compressed-checkpoint reader: integer values, scales, int4 shapes and keep-bit masks,
/// decoded and packed for the kernels as sampling loads them.
fn fuzz_compressed_checkpoint(budget: Budget) {
    let valid = valid_compressed_checkpoints();
    fuzz("compressed checkpoint", budget, |m| {
        let chosen = &valid[m.0.random_range(0..valid.len())];
        let bytes = mutated_checkpoint(m, chosen, header_end(chosen));
        let ckpt = Checkpoint::from_bytes(&bytes, "fuzzed.safetensors")?;
        TrainedModel::from_checkpoint(gpu(), &ckpt, "fuzzed.safetensors", None)
    });
}

/// A searched schedule file with every field.
const VALID_SCHEDULE: &str = r#"{
  "format": "wgdiff skip schedule",
  "sampler": {"name": "pc", "snr": 0.16, "corrector_steps": 1},
  "levels": 3,
  "skips": [2, 2, 1, 1, 0, 0],
  "times": [1.0, 0.83, 0.67, 0.5, 0.33, 0.17],
  "search": {"model": "m.safetensors", "budget": 10.0, "samples": 100, "metric": "MNIST-FID",
    "fid_unskipped": 163.18, "fid": 170.5, "proxy_error": 0.01, "proxy_budget": 0.02,
    "predicted_ms": 1500.0, "unskipped_ms": 2500.0, "date": "2026-11-26T09:00:00Z"}
}"#;

/// The schedule-file reader, and the checks a sampler makes of the plan it gives.
fn fuzz_schedule_file(budget: Budget) {
    let samplers = [
        r#"{"name": "ddim", "eta": 0.0, "spacing": "uniform"}"#,
        r#"{"name": "ald", "steps_per_level": 100, "step_size": 2e-5}"#,
        r#"{"name": "ode-rk45", "rtol": 1e-5, "atol": 1e-5}"#,
        r#"{"name": "dpm-solver++", "spacing": "log-snr"}"#,
    ];
    let pc = r#"{"name": "pc", "snr": 0.16, "corrector_steps": 1}"#;
    SkipSchedule::from_json(VALID_SCHEDULE.as_bytes(), "valid").expect("the valid schedule reads");
    fuzz("schedule file", budget, |m| {
        let valid = match m.0.random_range(0..2) {
            0 => VALID_SCHEDULE.to_string(),
            _ => VALID_SCHEDULE.replace(pc, samplers[m.0.random_range(0..samplers.len())]),
        };
        let text = m.text(&valid);
        let schedule = SkipSchedule::from_json(text.as_bytes(), "fuzzed.json")?;
        schedule.check_levels(3, "fuzzed.json")?;
        schedule.plan().check(schedule.levels, Some(schedule.steps()))?;
        schedule.sampler.validate()
    });
}

/// A training config touching every section.
const VALID_TOML: &str = r#"preset = "tiny"
data = "mnist"
steps = 40
batch = 16
lr = 0.002
warmup = 10
max_grad_norm = 1.0
ema_decay = 0.99
seed = 7
out = "runs/fuzz"
sample_every = 20
checkpoint_every = 10
grid_images = 16
grid_steps = 20
flip = false
class_dropout = 0.1
min_snr_gamma = 5.0
max_minutes = 3.5
precision = "f32"

[process]
kind = "vp"
steps = 1000
objective = "v"
schedule = { kind = "cosine", s = 0.008 }

[skip_training]
scheme = "consistent"
exponent = 1.0
"#;

fn fuzz_toml(budget: Budget) {
    let dir = fuzz_dir("toml");
    let path = dir.join("train.toml");
    std::fs::write(&path, VALID_TOML).unwrap();
    let config = TrainConfig::from_toml_file(&path).expect("the valid config parses");
    config.validate().expect("the valid config is valid");
    fuzz("toml config", budget, |m| {
        std::fs::write(&path, m.text(VALID_TOML)).unwrap();
        let config = TrainConfig::from_toml_file(&path)?;
        config.validate()?;
        config.model_config()
    });
}

fn fuzz_data_strings(budget: Budget) {
    let dir = fuzz_dir("data-strings");
    let (images, labels) = valid_idx();
    std::fs::write(dir.join("train-images-idx3-ubyte"), &images).unwrap();
    std::fs::write(dir.join("train-labels-idx1-ubyte.gz"), gzip(&labels)).unwrap();
    std::fs::write(dir.join("data_batch_1.bin"), vec![1u8; 3073]).unwrap();
    image::GrayImage::new(4, 4).save(dir.join("a.png")).unwrap();
    let d = dir.display().to_string();
    let valid = [
        "mnist".to_string(),
        format!("mnist:{d}"),
        format!("fashion:{d}"),
        format!("cifar10:{d}"),
        format!("folder:{d}"),
    ];
    fuzz("--data strings", budget, |m| {
        let pick = m.0.random_range(0..valid.len());
        let spec = m.text(&valid[pick]);
        let source: DataSource = spec.parse()?;
        // Load only from the fuzz folder (a mutated path could name any folder on the machine).
        let inside = match &source {
            DataSource::Mnist(p) | DataSource::Fashion(p) | DataSource::Cifar10(p) => p.starts_with(&dir),
            DataSource::Folder { dir: p, .. } => p.starts_with(&dir),
        };
        if inside {
            source.load(Split::Train)?;
        }
        Ok(source)
    });
}

/// A diffusers model (the committed `mnist-attn` fixture) with one of its three files mutated:
/// config.json or scheduler_config.json as text, the weights' header as text or their bytes;
/// what imports is built, restored and exported back.
fn fuzz_diffusers(budget: Budget) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/diffusers/mnist-attn");
    let [config, weights, scheduler] =
        [CONFIG_FILE, WEIGHTS_FILE, SCHEDULER_FILE].map(|f| std::fs::read(dir.join(f)).unwrap());
    let header_len = header_end(&weights);
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).unwrap();
    let (config_text, scheduler_text) = (text(&config), text(&scheduler));
    fuzz("diffusers", budget, |m| {
        let mutated = match m.0.random_range(0..4) {
            0 => (
                m.text(&config_text).into_bytes(),
                weights.clone(),
                scheduler.clone(),
            ),
            1 => (
                config.clone(),
                weights.clone(),
                m.text(&scheduler_text).into_bytes(),
            ),
            2 => (
                config.clone(),
                with_mutated_header(m, &weights, header_len),
                scheduler.clone(),
            ),
            _ => (config.clone(), m.bytes(&weights), scheduler.clone()),
        };
        let ckpt = import(&DiffusersFiles {
            config: &mutated.0,
            weights: &mutated.1,
            scheduler: &mutated.2,
            origin: "fuzzed",
        })?;
        TrainedModel::from_checkpoint(gpu(), &ckpt, "fuzzed", None)?;
        export(&ckpt, "fuzzed")
    });
}

#[test]
fn idx_loader_survives_fuzzing() {
    fuzz_idx(Budget::Cases(SHORT_CASES));
}

#[test]
fn cifar_loader_survives_fuzzing() {
    fuzz_cifar(Budget::Cases(SHORT_CASES));
}

#[test]
fn image_folder_loader_survives_fuzzing() {
    fuzz_image_folder(Budget::Cases(SHORT_CASES));
}

#[test]
fn checkpoint_loader_survives_fuzzing() {
    fuzz_checkpoint(Budget::Cases(SHORT_CASES / 2));
}

#[test]
fn compressed_checkpoint_loader_survives_fuzzing() {
    fuzz_compressed_checkpoint(Budget::Cases(SHORT_CASES / 2));
}

#[test]
fn schedule_file_loader_survives_fuzzing() {
    fuzz_schedule_file(Budget::Cases(SHORT_CASES));
}

#[test]
fn toml_config_loader_survives_fuzzing() {
    fuzz_toml(Budget::Cases(SHORT_CASES));
}

#[test]
fn data_source_strings_survive_fuzzing() {
    fuzz_data_strings(Budget::Cases(SHORT_CASES));
}

#[test]
fn diffusers_reader_survives_fuzzing() {
    fuzz_diffusers(Budget::Cases(SHORT_CASES / 2));
}

#[test]
#[ignore = "long: scripts/fuzz.sh"]
fn fuzz_long_diffusers() {
    fuzz_diffusers(Budget::long());
}

#[test]
#[ignore = "long: scripts/fuzz.sh"]
fn fuzz_long_idx() {
    fuzz_idx(Budget::long());
}

#[test]
#[ignore = "long: scripts/fuzz.sh"]
fn fuzz_long_cifar() {
    fuzz_cifar(Budget::long());
}

#[test]
#[ignore = "long: scripts/fuzz.sh"]
fn fuzz_long_image_folder() {
    fuzz_image_folder(Budget::long());
}

#[test]
#[ignore = "long: scripts/fuzz.sh"]
fn fuzz_long_checkpoint() {
    fuzz_checkpoint(Budget::long());
}

#[test]
#[ignore = "long: scripts/fuzz.sh"]
fn fuzz_long_compressed_checkpoint() {
    fuzz_compressed_checkpoint(Budget::long());
}

#[test]
#[ignore = "long: scripts/fuzz.sh"]
fn fuzz_long_schedule_file() {
    fuzz_schedule_file(Budget::long());
}

#[test]
#[ignore = "long: scripts/fuzz.sh"]
fn fuzz_long_toml_config() {
    fuzz_toml(Budget::long());
}

#[test]
#[ignore = "long: scripts/fuzz.sh"]
fn fuzz_long_data_strings() {
    fuzz_data_strings(Budget::long());
}
