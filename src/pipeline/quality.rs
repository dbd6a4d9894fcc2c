//! Sample quality of a trained diffusion network: draw images batch by batch with any sampler,
//! time the sampling alone, keep the images' feature rows and score them (FID/KID) on demand.

use super::{SampleRequest, Sampling};
use crate::eval::{compare, FeatureNet, Reference, Scores};
use crate::metrics::{frechet_distance, FeatureStats};
use crate::{Error, Gpu, Result};
use web_time::Instant;

/// Feature rows of generated images, gathered batch by batch, with each batch's sampling time.
#[derive(Default)]
pub struct GeneratedFeatures {
    /// Row-major features, `dim` wide.
    pub rows: Vec<f32>,
    pub dim: usize,
    /// Images so far.
    pub count: usize,
    /// Wall-clock seconds of each batch's sampling (device idle before, synced after; the
    /// feature network's time is not included).
    pub batch_seconds: Vec<f64>,
}

impl GeneratedFeatures {
    /// Draws `request.count` images as `request` says and appends their features (with
    /// `features` None, only the batch's time: a run that measures speed alone).
    pub async fn add_batch(
        &mut self,
        gpu: &Gpu,
        sampling: Sampling<'_>,
        request: &SampleRequest,
        features: Option<&dyn FeatureNet>,
    ) -> Result<()> {
        gpu.finish().await?;
        let started = Instant::now();
        let (images, _) = sampling.sample(gpu, request, None).await?;
        gpu.finish().await?;
        self.batch_seconds.push(started.elapsed().as_secs_f64());
        if let Some(features) = features {
            let f = {
                let _g = crate::no_grad();
                features.features(&images)?
            };
            self.dim = f.shape()[f.rank() - 1];
            self.rows.extend(f.to_vec_async().await?);
        }
        self.count += request.count();
        Ok(())
    }

    /// Sampling seconds summed over the batches.
    pub fn sampling_seconds(&self) -> f64 {
        self.batch_seconds.iter().sum()
    }

    /// FID (MNIST-FID for the MNIST classifier) and KID of the images so far against
    /// `reference`, named by `features`' metric.
    pub fn scores(&self, features: &dyn FeatureNet, reference: &Reference) -> Result<Scores> {
        self.check_count(features)?;
        compare(features.metric(), &self.rows, self.dim, reference)
    }

    /// FID alone (MNIST-FID for the MNIST classifier) of the images so far against the
    /// statistics `reference`.
    pub fn fid(&self, features: &dyn FeatureNet, reference: &FeatureStats) -> Result<f64> {
        self.check_count(features)?;
        frechet_distance(&FeatureStats::from_features(&self.rows, self.dim)?, reference)
    }

    /// An error naming `features`' metric unless at least 2 images were gathered.
    fn check_count(&self, features: &dyn FeatureNet) -> Result<()> {
        match self.count {
            0 | 1 => Err(Error::Config(format!(
                "{} needs at least 2 generated images, got {}",
                features.metric(),
                self.count
            ))),
            _ => Ok(()),
        }
    }
}

/// Draws `count` images in batches of at most `batch` (batch i seeded `request.seed + i`) and
/// gathers their features; `progress(done)` after each batch (an error from it stops the
/// sampling and is returned).
pub async fn sample_features(
    gpu: &Gpu,
    sampling: Sampling<'_>,
    request: &SampleRequest,
    count: usize,
    batch: usize,
    features: &dyn FeatureNet,
    mut progress: impl FnMut(usize) -> Result<()>,
) -> Result<GeneratedFeatures> {
    let mut generated = GeneratedFeatures::default();
    let request = request.with_count(count)?;
    for part in request.chunks(batch) {
        generated.add_batch(gpu, sampling, &part, Some(features)).await?;
        progress(generated.count)?;
    }
    Ok(generated)
}
