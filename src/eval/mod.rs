//! Sample quality of a trained model: features of generated and real images from a feature
//! network, the reference statistics cached per (dataset, split, network), FID and KID.
//!
//! A [`FeatureNet`] (the MNIST classifier gives "MNIST-FID", Inception-v3 gives FID) maps image
//! batches to feature rows. [`Reference`] holds a dataset split's statistics and a subset of its
//! features for KID; [`Reference::cached`] computes them once and keeps them in a file named by
//! the dataset, split and network. [`compare`] scores generated features against a reference.

use crate::data::{Dataset, Split};
use crate::metrics::{frechet_distance, kid, FeatureStats, KID_SUBSETS};
use crate::{Error, Gpu, Result, Tensor};
use serde::{Deserialize, Serialize};

/// Where reference statistics are cached unless told otherwise (`wgdiff eval --cache`, the
/// experiments, MNIST-FID during training).
pub const DEFAULT_STATS_CACHE: &str = "runs/stats-cache";

/// Features of a reference set kept for KID (its subsets draw from these).
pub const KID_REFERENCE_ROWS: usize = 10_000;

/// A network whose activations serve as image features for FID and KID.
pub trait FeatureNet {
    /// Identifies the network and its weights in cache keys and reports (changes when the
    /// weights change).
    fn id(&self) -> String;
    /// The name of the Fréchet distance on these features: "MNIST-FID" for the MNIST
    /// classifier, "FID" for Inception-v3.
    fn metric(&self) -> &'static str;
    /// Feature rows [N, D] of images [N, C, H, W] in [-1, 1], computed without gradients.
    fn features(&self, images: &Tensor) -> Result<Tensor>;
    /// Class logits [N, K] of feature rows [N, D] for the Inception Score, when the network
    /// is scored that way (Inception-v3); None otherwise (the default).
    fn logits(&self, _features: &Tensor) -> Result<Option<Tensor>> {
        Ok(None)
    }
}

/// Feature rows of `count` images produced batch by batch by `images(start, len)`, with
/// `progress(done)` after each batch; returns the row-major values and the feature dimension.
/// Async (readback), so it runs in the browser too.
pub async fn collect_features(
    net: &dyn FeatureNet,
    count: usize,
    batch: usize,
    mut images: impl FnMut(usize, usize) -> Result<Tensor>,
    mut progress: impl FnMut(usize),
) -> Result<(Vec<f32>, usize)> {
    let batch = batch.max(1);
    let mut rows = Vec::new();
    let mut dim = 0;
    for start in (0..count).step_by(batch) {
        let len = batch.min(count - start);
        let f = net.features(&images(start, len)?)?;
        dim = f.shape()[f.rank() - 1];
        rows.extend(f.to_vec_async().await?);
        progress(start + len);
    }
    Ok((rows, dim))
}

/// Feature rows of `count` different real images of `data` drawn at random by `seed`, in
/// batches of `batch`, with `progress(done)` after each: scored against a reference, what a
/// generator whose images were the data's own would score at that count. FID's estimate is
/// biased upward at small counts, so this is the floor to read a model's score against (200 of
/// MNIST's training images score MNIST-FID 21-37 against its test split; docs/evaluation.md).
pub async fn real_image_features(
    gpu: &Gpu,
    net: &dyn FeatureNet,
    data: &Dataset,
    count: usize,
    seed: u64,
    batch: usize,
    progress: impl FnMut(usize),
) -> Result<(Vec<f32>, usize)> {
    if count > data.len() {
        return Err(Error::Config(format!(
            "{count} real images asked of {}, which holds {}; ask for at most that many",
            data.name,
            data.len()
        )));
    }
    let chosen = data.random_indices(count, seed);
    let shape = [data.channels, data.height, data.width];
    collect_features(
        net,
        count,
        batch,
        |start, len| {
            let pixels: Vec<f32> = chosen[start..start + len]
                .iter()
                .flat_map(|&i| data.image(i).iter().copied())
                .collect();
            Tensor::from_slice(
                gpu,
                &[len, shape[0], shape[1], shape[2]],
                &pixels,
                crate::DType::F32,
            )
        },
        progress,
    )
    .await
}

/// Which real images a reference is of: the first `limit` images (all when None) of a split.
#[derive(Clone, Copy)]
pub struct ReferenceImages<'a> {
    pub data: &'a Dataset,
    pub split: Split,
    pub limit: Option<usize>,
}

impl ReferenceImages<'_> {
    /// Images of the split used (the first `limit`, or all).
    pub fn count(&self) -> usize {
        self.limit.unwrap_or(self.data.len()).min(self.data.len())
    }

    fn source(&self, net: &dyn FeatureNet) -> ReferenceSource {
        ReferenceSource {
            dataset: self.data.name.clone(),
            split: self.split.to_string(),
            network: net.id(),
            images: self.count(),
        }
    }
}

/// A dataset split's feature statistics and up to [`KID_REFERENCE_ROWS`] of its features.
pub struct Reference {
    pub stats: FeatureStats,
    /// Row-major features for KID.
    pub kid_rows: Vec<f32>,
    /// What the statistics are of (dataset, split, network, image count).
    pub source: ReferenceSource,
}

/// The identity of a reference set; stored in the cache file and compared on load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReferenceSource {
    pub dataset: String,
    pub split: String,
    pub network: String,
    pub images: usize,
}

impl Reference {
    /// A reference of FID statistics alone (no KID rows: [`compare`] refuses it), from the bytes
    /// of a statistics file (`origin` names it in errors) as [`Reference::cached`] writes them.
    pub fn fid_only(bytes: &[u8], origin: &str) -> Result<Reference> {
        let (stats, source) = FeatureStats::from_bytes(bytes, origin)?;
        let source: ReferenceSource = serde_json::from_value(source).map_err(|e| {
            Error::Config(format!(
                "{origin}: its metadata does not say what the statistics are of ({e})"
            ))
        })?;
        Ok(Reference {
            stats,
            kid_rows: Vec::new(),
            source,
        })
    }

    /// Statistics of `images`' features, computed in batches of `batch`.
    pub async fn compute(
        gpu: &Gpu,
        net: &dyn FeatureNet,
        images: ReferenceImages<'_>,
        batch: usize,
        progress: impl FnMut(usize),
    ) -> Result<Reference> {
        let (data, count) = (images.data, images.count());
        let shape = |len: usize| [len, data.channels, data.height, data.width];
        let (rows, dim) = collect_features(
            net,
            count,
            batch,
            |start, len| {
                let pixels = &data.images[start * data.image_len()..(start + len) * data.image_len()];
                Tensor::from_slice(gpu, &shape(len), pixels, crate::DType::F32)
            },
            progress,
        )
        .await?;
        let stats = FeatureStats::from_features(&rows, dim)?;
        let kid_rows = rows[..KID_REFERENCE_ROWS.min(count) * dim].to_vec();
        Ok(Reference {
            stats,
            kid_rows,
            source: images.source(net),
        })
    }

    /// The cached reference in `dir` for (dataset, split, network, image count), computed and
    /// stored (atomically) when missing or written for something else; true when it was
    /// read from the cache.
    pub async fn cached(
        dir: &std::path::Path,
        gpu: &Gpu,
        net: &dyn FeatureNet,
        images: ReferenceImages<'_>,
        batch: usize,
        progress: impl FnMut(usize),
    ) -> Result<(Reference, bool)> {
        let wanted = images.source(net);
        let stem: String = format!(
            "{}-{}-{}-{}",
            wanted.dataset, wanted.split, wanted.network, wanted.images
        )
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
        let stats_path = dir.join(format!("{stem}.stats.safetensors"));
        let rows_path = dir.join(format!("{stem}.kid.f32"));
        if let Some(found) = Self::load(&stats_path, &rows_path, &wanted) {
            return Ok((found, true));
        }
        let reference = Self::compute(gpu, net, images, batch, progress).await?;
        let source = serde_json::to_value(&reference.source).expect("serialisable source");
        reference.stats.save(&stats_path, &source)?;
        crate::fsio::write_atomic(&rows_path, bytemuck::cast_slice(&reference.kid_rows))?;
        Ok((reference, false))
    }

    /// The cached reference if both files are there and were written for `wanted`.
    fn load(
        stats_path: &std::path::Path,
        rows_path: &std::path::Path,
        wanted: &ReferenceSource,
    ) -> Option<Reference> {
        let (stats, source) = FeatureStats::load(stats_path).ok()?;
        let source: ReferenceSource = serde_json::from_value(source).ok()?;
        let bytes = crate::fsio::read(rows_path).ok()?;
        let kid_rows: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes);
        let rows = KID_REFERENCE_ROWS.min(wanted.images);
        (source == *wanted && kid_rows.len() == rows * stats.dim()).then_some(Reference {
            stats,
            kid_rows,
            source,
        })
    }
}

/// FID (or MNIST-FID) and KID of generated features against a reference.
#[derive(Clone, Debug, Serialize)]
pub struct Scores {
    /// "FID" or "MNIST-FID".
    pub metric: String,
    pub fid: f64,
    /// Mean and standard deviation of KID over subsets; None against a reference of FID
    /// statistics only (the shipped MNIST test statistics a page scores with).
    pub kid: Option<(f64, f64)>,
    /// Generated images the scores are of.
    pub samples: usize,
    /// Reference images (statistics) and the reference rows KID drew from.
    pub reference_images: usize,
}

/// Scores of generated feature rows (`dim` wide) against `reference`; KID (when the reference
/// has its feature rows) uses subsets of min(1000, both sizes) rows with a fixed seed.
pub fn compare(metric: &str, rows: &[f32], dim: usize, reference: &Reference) -> Result<Scores> {
    let stats = FeatureStats::from_features(rows, dim)?;
    let fid = frechet_distance(&stats, &reference.stats)?;
    let kid = match reference.kid_rows.is_empty() {
        true => None,
        false => Some(kid(rows, &reference.kid_rows, dim, KID_SUBSETS, None, 0)?),
    };
    Ok(Scores {
        metric: metric.to_string(),
        fid,
        kid,
        samples: stats.count,
        reference_images: reference.source.images,
    })
}
