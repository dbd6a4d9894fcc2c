//! The compression tables of the UMass report ("Optimizing Diffusion Models for MNIST", CS 682
//! final project, Peterson, Himel and Patel) regenerated: pruning and int8/int4 weights applied to
//! a trained DDPM U-Net and NCSN ScoreNet, each row with its file size (raw and gzipped),
//! sampling ms per image, peak device memory and MNIST-FID, the report's numbers beside.

use super::plots::{self, Axes, Series};
use super::{ExperimentPlan, ExperimentReport, Header, ReportFile};
use crate::checkpoint::Checkpoint;
use crate::classifier::mnist_fid_label;
use crate::compress::{
    compress_checkpoint, gzipped_len, CompressPlan, PruneMethod, PrunePlan, PruneScope, QuantizePlan,
};
use crate::ops::random::Rng;
use crate::ops::WeightBits;
use crate::pipeline::sample_features;
use crate::pipeline::{SampleRequest, TrainedModel};
use crate::train::FidTracker;
use crate::{DType, Gpu, Result};
use rand::SeedableRng;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// The NCSN ScoreNet shipped for the compression tables (trained by `wgdiff train --preset
/// ncsn-mnist`, see assets/models/README.md).
pub const SHIPPED_SCORENET: &str = "assets/models/ncsn-mnist.safetensors";

/// How much each row samples and times.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// Images per MNIST-FID.
    pub samples: usize,
    /// Sampler steps (each model's default sampler).
    pub steps: usize,
    /// Images drawn at once.
    pub batch: usize,
    /// Interleaved timing rounds of a network evaluation on a batch of 16, per row.
    pub timing_reps: usize,
    pub seed: u64,
}

impl ExperimentPlan for Plan {
    /// Under 25 minutes on lavapipe: 100 samples at 10 steps per row.
    fn quick() -> Plan {
        Plan {
            samples: 100,
            steps: 10,
            batch: 100,
            timing_reps: 5,
            seed: 0,
        }
    }

    /// 1,000 samples at 50 steps per row.
    fn full() -> Plan {
        Plan {
            samples: 1000,
            steps: 50,
            batch: 100,
            timing_reps: 9,
            seed: 0,
        }
    }
}

/// A row's compression (none for the baseline) and the report's row it mirrors.
pub struct Setting {
    pub name: &'static str,
    pub plan: Option<CompressPlan>,
    /// The report's label of the matching row (its NCSN tables; the DDPM tables hold a subset).
    pub report_row: Option<&'static str>,
}

/// The report's published rows: (label, size in bytes, inference ms per image, FID) for its
/// NCSN (Tables 1-3, 9) and its CFG DDPM (Tables 4-6; sizes and times given with ~).
pub const PUBLISHED_NCSN: [(&str, f64, f64, f64); 13] = [
    ("baseline", 4_147_037.0, 25.60, 182.1),
    ("8BitLin", 4_147_464.0, 24.631, 182.233),
    ("4BitLin", 4_146_973.0, 24.726, 174.099),
    ("Rand 10 Global", 4_021_665.0, 24.85, 162.357),
    ("Rand 30 Global", 3_676_115.0, 24.94, 326.117),
    ("Rand 50 Global", 2_596_545.0, 24.96, 265.807),
    ("L1 10 Global", 4_002_980.0, 25.06, 163.601),
    ("L1 30 Global", 3_639_353.0, 25.03, 170.784),
    ("L1 70 Global", 2_781_940.0, 25.11, 206.551),
    ("Rand 30 Middle", 3_775_050.0, 25.35, 183.64),
    ("Rand 30 Extremes", 4_097_460.0, 25.20, 346.27),
    ("Rand 50 Middle", 3_456_117.0, 25.45, 208.063),
    ("Rand 50 Extremes", 4_054_127.0, 25.49, 377.001),
];
pub const PUBLISHED_DDPM: [(&str, f64, f64, f64); 6] = [
    ("baseline", 66_538_096.0, 5400.0, 150.38),
    ("8BitLin", 66_244_000.0, 5400.0, 161.22),
    ("Rand 10 Global", 62_981_643.0, 5300.0, 486.27),
    ("Rand 30 Global", 53_349_095.0, 5200.0, 494.35),
    ("L1 10 Global", 62_448_687.0, 5400.0, 157.89),
    ("L1 30 Global", 52_029_548.0, 5300.0, 141.13),
];

fn prune(method: PruneMethod, amount: f64, scope: PruneScope) -> Option<PrunePlan> {
    Some(PrunePlan {
        method,
        amount,
        scope,
    })
}

fn quantize(bits: WeightBits) -> Option<QuantizePlan> {
    Some(QuantizePlan {
        bits,
        per_channel: true,
    })
}

/// The rows of both tables: the baseline, int8 and int4 weights (a scale per output channel),
/// the report's global, middle and ends pruning, and L1 pruning with int8 weights.
pub fn settings() -> Vec<Setting> {
    use PruneMethod::{Random, L1};
    use PruneScope::{Ends, Global, Middle};
    let row = |name, prune, quantize, report_row| Setting {
        name,
        plan: (prune, quantize).ne(&(None, None)).then_some(CompressPlan {
            prune,
            quantize,
            seed: 0,
        }),
        report_row,
    };
    vec![
        row("f32 (baseline)", None, None, Some("baseline")),
        row("int8", None, quantize(WeightBits::Int8), Some("8BitLin")),
        row("int4", None, quantize(WeightBits::Int4), Some("4BitLin")),
        row(
            "random 10% global",
            prune(Random, 0.1, Global),
            None,
            Some("Rand 10 Global"),
        ),
        row(
            "random 30% global",
            prune(Random, 0.3, Global),
            None,
            Some("Rand 30 Global"),
        ),
        row(
            "L1 10% global",
            prune(L1, 0.1, Global),
            None,
            Some("L1 10 Global"),
        ),
        row(
            "L1 30% global",
            prune(L1, 0.3, Global),
            None,
            Some("L1 30 Global"),
        ),
        row(
            "L1 70% global",
            prune(L1, 0.7, Global),
            None,
            Some("L1 70 Global"),
        ),
        row(
            "random 30% middle",
            prune(Random, 0.3, Middle),
            None,
            Some("Rand 30 Middle"),
        ),
        row(
            "random 30% ends",
            prune(Random, 0.3, Ends),
            None,
            Some("Rand 30 Extremes"),
        ),
        row(
            "L1 30% global + int8",
            prune(L1, 0.3, Global),
            quantize(WeightBits::Int8),
            None,
        ),
        row(
            "L1 30% global + int4",
            prune(L1, 0.3, Global),
            quantize(WeightBits::Int4),
            None,
        ),
    ]
}

/// A model the tables compress: its label, checkpoint (read) and where it came from.
pub struct Subject<'a> {
    pub label: &'static str,
    pub checkpoint: &'a Checkpoint,
    pub origin: String,
    pub published: &'static [(&'static str, f64, f64, f64)],
}

/// One measured row.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub model: String,
    pub setting: String,
    /// The compressed checkpoint (a sampling export) in bytes, and gzipped.
    pub bytes: u64,
    pub gzipped_bytes: u64,
    /// Conv and linear weights run by the int8/int4 kernels.
    pub packed_weights: usize,
    /// Median ms per image of sampling at the plan's steps: a network evaluation on a batch of
    /// 16 (rows interleaved) x the evaluations the sampler makes per image.
    pub ms_per_image: f64,
    /// Peak device memory the buffer pool held while drawing the FID samples.
    pub peak_bytes: u64,
    pub fid: f64,
    /// The report's (label, bytes, ms per image, FID) for this setting, if it published one.
    pub published: Option<(String, f64, f64, f64)>,
}

/// What the measurement reports while it works.
pub enum Progress<'a> {
    /// A row (or a model's timing round) starts: "DDPM U-Net: int8".
    Started(&'a str),
    /// A row is measured: first without its time (`ms_per_image` 0), then again with it once
    /// its model's rows are timed together.
    Measured(&'a Row),
}

/// Measures every setting on every subject, telling `progress` what starts and what was
/// measured (an error from it stops the run and is returned). Each
/// row's model is alone on the device while it draws its FID samples (its peak memory is its
/// own); the models are then built again side by side for the interleaved timing.
pub async fn run(
    gpu: &Gpu,
    subjects: &[Subject<'_>],
    plan: &Plan,
    tracker: &FidTracker,
    mut progress: impl FnMut(Progress) -> Result<()>,
) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for subject in subjects {
        warm_up(gpu, subject, plan).await?;
        let (mut files, mut evaluations) = (Vec::new(), Vec::new());
        for setting in settings() {
            progress(Progress::Started(&format!("{}: {}", subject.label, setting.name)))?;
            let compressed = match &setting.plan {
                Some(p) => compress_checkpoint(gpu, subject.checkpoint, &subject.origin, p)?.0,
                None => crate::run_state::sampling_export(subject.checkpoint, &subject.origin)?,
            };
            let bytes = compressed.to_bytes()?;
            gpu.pool().trim();
            gpu.pool().reset_peaks();
            let model = TrainedModel::from_checkpoint(gpu, &compressed, &subject.origin, None)?;
            let request = SampleRequest::for_state(&model.state)
                .steps(Some(plan.steps))
                .count(plan.samples)
                .seed(plan.seed)
                .build()?;
            let features = tracker.features.as_ref();
            let generated = sample_features(
                gpu,
                model.sampling(),
                &request,
                plan.samples,
                plan.batch,
                features,
                |_| Ok(()),
            )
            .await?;
            let peak_bytes = gpu.pool().stats().peak_held_bytes;
            let fid = generated.fid(features, &tracker.reference.stats)?;
            let one = request.with_count(1)?;
            evaluations.push(model.sampling().sample(gpu, &one, None).await?.1);
            let published = setting.report_row.and_then(|label| {
                subject
                    .published
                    .iter()
                    .find(|p| p.0 == label)
                    .map(|p| (p.0.to_string(), p.1, p.2, p.3))
            });
            rows.push(Row {
                model: subject.label.to_string(),
                setting: setting.name.to_string(),
                bytes: bytes.len() as u64,
                gzipped_bytes: gzipped_len(&bytes),
                packed_weights: model.packed_weights,
                ms_per_image: 0.0,
                peak_bytes,
                fid,
                published,
            });
            progress(Progress::Measured(&rows[rows.len() - 1]))?;
            files.push(compressed);
        }
        progress(Progress::Started(&format!("{}: timing", subject.label)))?;
        let models = files
            .iter()
            .map(|f| TrainedModel::from_checkpoint(gpu, f, &subject.origin, None))
            .collect::<Result<Vec<_>>>()?;
        let seconds = time_evaluations(gpu, &models, plan.timing_reps).await?;
        let first = rows.len() - models.len();
        for ((row, s), evals) in rows[first..].iter_mut().zip(seconds).zip(&evaluations) {
            row.ms_per_image = 1e3 * s * *evals as f64;
            progress(Progress::Measured(row))?;
        }
    }
    Ok(rows)
}

/// One untimed sampling step of the float model at the plan's batch, so that kernel
/// autotuning (and its scratch buffers) falls before the first row's peak memory is taken.
async fn warm_up(gpu: &Gpu, subject: &Subject<'_>, plan: &Plan) -> Result<()> {
    let export = crate::run_state::sampling_export(subject.checkpoint, &subject.origin)?;
    let model = TrainedModel::from_checkpoint(gpu, &export, &subject.origin, None)?;
    let request = SampleRequest::for_state(&model.state)
        .steps(Some(1))
        .count(plan.batch.min(plan.samples))
        .seed(plan.seed)
        .build()?;
    model.sampling().sample(gpu, &request, None).await?;
    Ok(())
}

/// Median seconds per image of one network evaluation of each model on a batch of 16 (noise
/// at mid-process times), timed `reps` times with the models interleaved in each round.
async fn time_evaluations(gpu: &Gpu, models: &[TrainedModel], reps: usize) -> Result<Vec<f64>> {
    const BATCH: usize = 16;
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let mut seconds = vec![Vec::new(); models.len()];
    // round 0 warms each model up (pipelines, pooled buffers) untimed
    for round in 0..=reps {
        for (model, times) in models.iter().zip(&mut seconds) {
            let [c, h, w] = model.image_shape();
            let x = Rng::new(round as u64).normal(gpu, &[BATCH, c, h, w], 0.0, 1.0, DType::F32)?;
            let t = model.state.process.sample_times(&mut rng, BATCH, 0.4..0.6)?;
            gpu.finish().await?;
            let started = web_time::Instant::now();
            let y = {
                let _g = crate::no_grad();
                model.net.forward(&x, &t, None, 0)?
            };
            y.to_vec_async().await?;
            if round > 0 {
                times.push(started.elapsed().as_secs_f64() / BATCH as f64);
            }
        }
    }
    Ok(seconds.iter().map(|t| crate::median::median(t)).collect())
}

/// The measured rows, the plan, and when and where they ran.
#[derive(Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub header: Header,
    pub plan: Plan,
    pub rows: Vec<Row>,
}

impl Report {
    /// The row of `model` with the smallest gzipped file whose MNIST-FID is within 10% of its
    /// baseline's.
    pub fn best(&self, model: &str) -> Option<(&Row, &Row)> {
        let rows: Vec<&Row> = self.rows.iter().filter(|r| r.model == model).collect();
        let baseline = *rows.first()?;
        let best = rows
            .iter()
            .filter(|r| r.fid <= 1.1 * baseline.fid)
            .min_by_key(|r| r.gzipped_bytes)?;
        Some((best, baseline))
    }
}

impl ExperimentReport for Report {
    fn markdown(&self) -> String {
        let mut md = String::new();
        let p = &self.plan;
        let _ = writeln!(
            md,
            "# Compression (the tables of *Optimizing Diffusion Models for MNIST*, Peterson, \
             Himel and Patel, UMass)\n\n{} MNIST-FID of {} samples (each model's \
             default sampler, {} steps, seed {}); ms per image = median of {} interleaved network \
             evaluations on a batch of 16 x the sampler's evaluations per image; \
             peak = the device memory the buffer pool held while drawing the FID samples. Sizes are the \
             sampling export (EMA weights), raw and gzipped as the report measured. The report's \
             numbers (NCSN: Tables 1-3; DDPM with CFG: Tables 4-6, a 23M-parameter U-Net on a V100/A100) \
             stand beside ours; their FID module is not MNIST-FID, so compare trends, not values.\n",
            self.header.markdown(),
            p.samples,
            p.steps,
            p.seed,
            p.timing_reps
        );
        let mut models: Vec<&str> = self.rows.iter().map(|r| r.model.as_str()).collect();
        models.dedup();
        for model in models {
            let _ = writeln!(
                md,
                "## {model}\n\n| setting | bytes | gzipped | int weights | ms/image | peak MiB | {} | report: bytes, ms, FID |\n|---|---:|---:|---:|---:|---:|---:|---|",
                mnist_fid_label(self.plan.samples)
            );
            for r in self.rows.iter().filter(|r| r.model == model) {
                let published = r
                    .published
                    .as_ref()
                    .map_or("—".to_string(), |(label, b, ms, fid)| {
                        format!("{label}: {b:.0}, {ms}, {fid}")
                    });
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {published} |",
                    r.setting,
                    r.bytes,
                    r.gzipped_bytes,
                    r.packed_weights,
                    r.ms_per_image,
                    r.peak_bytes as f64 / (1 << 20) as f64,
                    r.fid
                );
            }
            if let Some((best, base)) = self.best(model) {
                let _ = writeln!(
                    md,
                    "\nBest (smallest gzipped file within 10% of the baseline's MNIST-FID): **{}**, {} bytes \
                     gzipped ({:.0}% of {}), {:.1} ms per image ({:.2}x the baseline's {:.1}), MNIST-FID \
                     {:.1} (baseline {:.1}).\n",
                    best.setting,
                    best.gzipped_bytes,
                    100.0 * best.gzipped_bytes as f64 / base.gzipped_bytes as f64,
                    base.gzipped_bytes,
                    best.ms_per_image,
                    best.ms_per_image / base.ms_per_image,
                    base.ms_per_image,
                    best.fid,
                    base.fid
                );
            }
        }
        md
    }

    /// compression.md and compression.json.
    fn files(&self) -> Result<Vec<ReportFile>> {
        super::text_files("compression", &self.markdown(), self)
    }

    /// fid-vs-size.png and fid-vs-ms.png.
    fn plots(&self) -> Result<Vec<ReportFile>> {
        let mut models: Vec<&str> = self.rows.iter().map(|r| r.model.as_str()).collect();
        models.dedup();
        let series = |x: &dyn Fn(&Row) -> f64| -> Vec<Series> {
            models
                .iter()
                .map(|m| Series {
                    name: m.to_string(),
                    points: self
                        .rows
                        .iter()
                        .filter(|r| r.model == *m)
                        .map(|r| (x(r), r.fid, r.setting.clone()))
                        .collect(),
                })
                .collect()
        };
        let y = mnist_fid_label(self.plan.samples);
        let size = plots::scatter(
            Path::new("fid-vs-size.png"),
            Axes {
                caption: "MNIST-FID against the gzipped checkpoint",
                x: "gzipped size (KB)",
                y: &y,
            },
            &series(&|r| r.gzipped_bytes as f64 / 1e3),
        )?;
        let time = plots::scatter(
            Path::new("fid-vs-ms.png"),
            Axes {
                caption: "MNIST-FID against sampling time",
                x: "ms per image",
                y: &y,
            },
            &series(&|r| r.ms_per_image),
        )?;
        Ok(vec![
            ("fid-vs-size.png".into(), size),
            ("fid-vs-ms.png".into(), time),
        ])
    }
}
