//! `wgdiff eval`: FID/KID of a checkpoint's samples against a dataset split (MNIST-FID with the
//! shipped classifier by default, FID proper with `--inception`), reference statistics cached.

use super::sample::SamplingArgs;
use super::Progress;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use wgdiff::classifier::SHIPPED_MNIST_CLASSIFIER;
use wgdiff::data::{DataSource, Split};
use wgdiff::diffusion::GuidanceInterval;
use wgdiff::eval::{
    compare, real_image_features, FeatureNet, Reference, ReferenceImages, Scores, DEFAULT_STATS_CACHE,
};
use wgdiff::features::InceptionV3;
use wgdiff::metrics::IS_SPLITS;
use wgdiff::pipeline::{sample_features, GeneratedFeatures};
use wgdiff::{inception_score, Gpu, Predictions, Tensor};

/// Flags of `wgdiff eval`.
#[derive(Args)]
#[command(after_help = "Examples:
  wgdiff eval --samples 200 --steps 20          MNIST-FID and KID of the shipped model
  wgdiff eval --checkpoint runs/mnist/best.safetensors --samples 10000 --json fid.json
  wgdiff eval --inception inception.safetensors --samples 1000   FID proper and the Inception Score
  wgdiff eval --real --samples 200               what 200 real training images score: the floor
  wgdiff eval --images other-tool-samples/        score another tool's PNGs as samples

The reference statistics are computed once per dataset, split, network and image count and
kept in --cache; later runs print \"reference cached\". FID and KID fall as samples approach the
data; compare numbers only at the same --samples, sampler and steps. FID is biased upward at
small counts: --real scores that many real images in place of samples, the floor to read a
model's score against (MNIST's training images score MNIST-FID 27 at 200 images, the median of 20
draws, 21-37; 6.4 at 1,000; 3.1 at 10,000).")]
pub struct EvalArgs {
    #[command(flatten)]
    sampling: SamplingArgs,
    /// Images to generate and score (at least 2; FID is usually quoted on 10,000 or more)
    #[arg(long, default_value_t = 1000)]
    samples: usize,
    /// Images per sampling batch and per feature-network batch
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Reference data: mnist (assets/mnist), mnist:DIR, fashion:DIR, cifar10:DIR or folder:DIR
    #[arg(long, default_value = "mnist")]
    data: String,
    /// Reference split: train or test
    #[arg(long, default_value = "test")]
    split: Split,
    /// Reference images: the first N of the split [default: all]
    #[arg(long, value_name = "N")]
    reference_images: Option<usize>,
    /// MNIST-FID: the classifier whose penultimate features are compared (from `wgdiff train-classifier`)
    #[arg(long, value_name = "PATH", default_value = SHIPPED_MNIST_CLASSIFIER)]
    classifier: PathBuf,
    /// FID proper: pytorch-fid's Inception-v3 weights as safetensors (the conversion is in the
    /// error message when the file is missing); also prints the Inception Score
    #[arg(long, value_name = "PATH", conflicts_with = "classifier")]
    inception: Option<PathBuf>,
    /// Folder of cached reference statistics (per dataset, split, network and image count)
    #[arg(long, value_name = "DIR", default_value = DEFAULT_STATS_CACHE)]
    cache: PathBuf,
    /// Also write the scores and settings to this JSON file
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Score --samples real images of the other split (train against the test split), drawn
    /// at random by --seed, in place of a model's samples: the metric's floor at that count
    /// (a folder dataset, which has one split, draws from its own images)
    #[arg(long)]
    real: bool,
    /// Score the PNG/JPEG images in this folder (another tool's samples, say: diffusers' or a
    /// wgdiff grid cut into images) in place of a model's samples: every image in it, converted
    /// to the reference's channels and resized to its size
    #[arg(long, value_name = "DIR", conflicts_with = "real")]
    images: Option<PathBuf>,
}

/// What `--json` writes: the scores and what they are of.
#[derive(Serialize)]
struct EvalReport {
    #[serde(flatten)]
    scores: Scores,
    /// Inception Score (mean, std over splits), with --inception.
    inception_score: Option<(f64, f64)>,
    checkpoint: String,
    sampler: String,
    sampler_steps: usize,
    /// Classifier-free guidance scale (1: none).
    guidance: f32,
    /// The noise levels (sigma = std / alpha) guidance applied at; absent: every step.
    #[serde(skip_serializing_if = "Option::is_none")]
    guidance_interval: Option<GuidanceInterval>,
    seed: u64,
    reference: String,
    network: String,
    reference_cached: bool,
    sampling_seconds: f64,
}

/// What `--json` writes with `--real` or `--images`: the scores and which images they are of.
#[derive(Serialize)]
struct ImagesReport {
    #[serde(flatten)]
    scores: Scores,
    /// The dataset split the real images were drawn from (`--real`).
    #[serde(skip_serializing_if = "Option::is_none")]
    real_images: Option<String>,
    /// The folder whose images were scored (`--images`).
    #[serde(skip_serializing_if = "Option::is_none")]
    images: Option<String>,
    seed: u64,
    reference: String,
    network: String,
    reference_cached: bool,
}

/// The feature network the flags choose and the reference statistics of `images` under it:
/// Inception-v3 with `--inception`, else MNIST-FID's classifier; true when read from the cache.
fn scorer(
    gpu: &Gpu,
    args: &EvalArgs,
    images: ReferenceImages,
) -> Result<(Box<dyn FeatureNet>, Reference, bool)> {
    let Some(path) = &args.inception else {
        let fid = super::mnist_fid(gpu, &args.classifier, &args.data, Some(images), &args.cache)?;
        return Ok((Box::new(fid.classifier), fid.reference, fid.cached));
    };
    let net = InceptionV3::load(gpu, path)?;
    let total = images.count();
    let mut bar = None;
    let (reference, cached) = pollster::block_on(Reference::cached(
        &args.cache,
        gpu,
        &net,
        images,
        args.batch,
        |done| {
            bar.get_or_insert_with(|| {
                Progress::new(total, &format!("{} reference images", images.data.name))
            })
            .set_position(done as u64);
        },
    ))?;
    if let Some(bar) = bar {
        bar.finish();
    }
    Ok((Box::new(net), reference, cached))
}

/// The Inception Score of the generated features when the network has logits for it.
fn inception_score_of(
    gpu: &Gpu,
    net: &dyn FeatureNet,
    generated: &GeneratedFeatures,
) -> Result<Option<(f64, f64)>> {
    let features = Tensor::from_f32(gpu, &[generated.count, generated.dim], &generated.rows)?;
    let Some(logits) = net.logits(&features)? else {
        return Ok(None);
    };
    let classes = logits.shape()[1];
    let splits = IS_SPLITS.min(generated.count);
    Ok(Some(inception_score(
        Predictions::Logits(&logits.to_vec()?),
        classes,
        splits,
    )?))
}

/// `--real` and `--images DIR`: the scores of real images of the other split (`--samples` of
/// them, drawn by `--seed`) or of every image in DIR, as a model's samples are scored.
fn run_images(gpu: &Gpu, args: &EvalArgs) -> Result<()> {
    let source = args.data.parse::<DataSource>()?;
    let data = source.load(args.split)?;
    let (scored, count) = match &args.images {
        Some(dir) => {
            let folder = DataSource::Folder {
                dir: dir.clone(),
                size: None,
                channels: 3,
            };
            let scored = folder
                .fitted_to([data.channels, data.height, data.width])
                .load(Split::Test)?;
            if scored.len() < 2 {
                bail!(
                    "--images {}: FID and KID compare the statistics of at least 2 images; the folder holds {}",
                    dir.display(),
                    scored.len()
                );
            }
            let count = scored.len();
            (scored, count)
        }
        None => {
            let other = match args.split {
                Split::Test => Split::Train,
                Split::Train => Split::Test,
            };
            (source.load(other)?, args.samples)
        }
    };
    let images = ReferenceImages {
        data: &data,
        split: args.split,
        limit: args.reference_images,
    };
    let (net, reference, cached) = scorer(gpu, args, images)?;
    let seed = args.sampling.seed();
    let bar = Progress::new(count, &format!("{} images", scored.name));
    let (rows, dim) = pollster::block_on(real_image_features(
        gpu,
        net.as_ref(),
        &scored,
        count,
        seed,
        args.batch,
        |done| bar.set_position(done as u64),
    ))?;
    bar.finish();
    let scores = compare(net.metric(), &rows, dim, &reference)?;
    let kid_text = kid_text(&scores);
    let what = match &args.images {
        Some(dir) => format!("{} images of {}", scores.samples, dir.display()),
        None => format!(
            "{} real {} images, drawn by seed {seed}",
            scores.samples, scored.name
        ),
    };
    println!(
        "{} {:.2}{kid_text}  ({what}, vs {} {} images; {})",
        scores.metric,
        scores.fid,
        scores.reference_images,
        data.name,
        reference_note(cached, args)
    );
    if let Some(path) = &args.json {
        let report = ImagesReport {
            scores,
            real_images: args.images.is_none().then(|| scored.name.clone()),
            images: args.images.as_ref().map(|d| d.display().to_string()),
            seed,
            reference: data.name.clone(),
            network: net.id(),
            reference_cached: cached,
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// "  KID k ± sd" when the scores have KID, else nothing.
fn kid_text(scores: &Scores) -> String {
    scores
        .kid
        .map_or(String::new(), |(kid, sd)| format!("  KID {kid:.4} ± {sd:.4}"))
}

/// "reference cached", or where the newly computed reference was saved.
fn reference_note(cached: bool, args: &EvalArgs) -> String {
    match cached {
        true => "reference cached".to_string(),
        false => format!("reference computed, saved in {}", args.cache.display()),
    }
}

pub fn run(gpu: &Gpu, args: EvalArgs) -> Result<()> {
    if args.samples < 2 {
        bail!(
            "--samples {}: FID and KID compare the statistics of at least 2 generated images; use \
             --samples 1000 or more for numbers worth comparing",
            args.samples
        );
    }
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    if let Some(n @ 0..=1) = args.reference_images {
        bail!(
            "--reference-images {n}: the reference statistics need at least 2 images of the split (leave it out \
             to use all of them)"
        );
    }
    if args.real || args.images.is_some() {
        return run_images(gpu, &args);
    }
    let model = args.sampling.load_model(gpu)?;
    let request = args.sampling.request(&model, args.samples)?;
    let data = args
        .data
        .parse::<DataSource>()?
        .fitted_to(model.image_shape())
        .load(args.split)?;
    let data_shape = [data.channels, data.height, data.width];
    if model.image_shape() != data_shape {
        bail!(
            "the model makes {:?} images but {} holds {:?} images; pass --data with the model's kind of \
             images",
            model.image_shape(),
            data.name,
            data_shape
        );
    }
    let images = ReferenceImages {
        data: &data,
        split: args.split,
        limit: args.reference_images,
    };
    let (net, reference, cached) = scorer(gpu, &args, images)?;
    let bar = Progress::new(args.samples, "samples");
    let generated = pollster::block_on(sample_features(
        gpu,
        model.sampling(),
        &request,
        args.samples,
        args.batch,
        net.as_ref(),
        |done| {
            bar.set_position(done as u64);
            Ok(())
        },
    ))?;
    bar.finish();
    let scores = generated.scores(net.as_ref(), &reference)?;
    let inception_score = inception_score_of(gpu, net.as_ref(), &generated)?;
    let steps = request.steps();
    let reference_note = reference_note(cached, &args);
    let is_text = inception_score.map_or(String::new(), |(m, s)| format!("  IS {m:.2} ± {s:.2}"));
    let guidance = match (request.guidance(), request.guidance_interval()) {
        (1.0, _) => String::new(),
        (w, None) => format!(", guidance {w}"),
        (w, Some(interval)) => format!(", guidance {w} at sigma {interval}"),
    };
    let kid_text = kid_text(&scores);
    println!(
        "{} {:.2}{kid_text}{is_text}  ({} samples from {} {steps} steps{guidance} vs {} {} images; {reference_note})",
        scores.metric, scores.fid, scores.samples, request.sampler(),
        scores.reference_images, data.name
    );
    eprintln!(
        "sampling took {:.1} s ({:.2} s per image); features: {}",
        generated.sampling_seconds(),
        generated.sampling_seconds() / args.samples as f64,
        net.id()
    );
    if let Some(path) = &args.json {
        let report = EvalReport {
            scores,
            inception_score,
            checkpoint: args.sampling.checkpoint().display().to_string(),
            sampler: request.sampler().to_string(),
            sampler_steps: steps,
            guidance: request.guidance(),
            guidance_interval: request.guidance_interval(),
            seed: request.seed(),
            reference: data.name.clone(),
            network: net.id(),
            reference_cached: cached,
            sampling_seconds: generated.sampling_seconds(),
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
