//! Running a trained classifier over image sets on the CPU side: predictions, accuracy, the
//! feature matrix, and MNIST-FID (the Fréchet distance of the classifier's feature statistics).

use super::Classifier;
use crate::eval::FeatureNet;
use crate::{
    data::Dataset,
    metrics::{frechet_distance, FeatureStats},
    Error,
};
use crate::{Result, Tensor};

/// Images per forward pass when evaluating.
pub const EVAL_BATCH: usize = 250;

/// The classifier as the feature network of `wgdiff::eval`: its penultimate layer, whose
/// Fréchet distance is reported as MNIST-FID.
impl FeatureNet for Classifier {
    fn id(&self) -> String {
        Classifier::id(self).to_string()
    }
    fn metric(&self) -> &'static str {
        "MNIST-FID"
    }
    fn features(&self, images: &Tensor) -> Result<Tensor> {
        let _g = crate::no_grad();
        Classifier::features(self, images)
    }
}

impl Classifier {
    /// Runs `f` on consecutive batches of `images` (NCHW in [-1, 1], any count), without
    /// gradients, and concatenates the read-back rows.
    fn map_batches(
        &self,
        images: &[f32],
        batch: usize,
        f: impl Fn(&Classifier, &Tensor) -> Result<Tensor>,
    ) -> Result<Vec<f32>> {
        let c = &self.config;
        let per_image = c.in_channels * c.size * c.size;
        if per_image == 0 || images.len() % per_image != 0 || images.is_empty() {
            return Err(Error::shape(
                "classifier",
                format!(
                    "{} values are not a whole number (>= 1) of {}x{}x{} images",
                    images.len(),
                    c.in_channels,
                    c.size,
                    c.size
                ),
            ));
        }
        let gpu = self.gpu();
        let _g = crate::no_grad();
        let mut out = Vec::new();
        for chunk in images.chunks(batch.max(1) * per_image) {
            let n = chunk.len() / per_image;
            let x = Tensor::from_f32(gpu, &[n, c.in_channels, c.size, c.size], chunk)?;
            out.extend(f(self, &x)?.to_vec()?);
        }
        Ok(out)
    }

    /// Penultimate-layer features of `images`, row-major [N, features].
    pub fn feature_matrix(&self, images: &[f32], batch: usize) -> Result<Vec<f32>> {
        self.map_batches(images, batch, |net, x| net.features(x))
    }

    /// The most likely class of each image.
    pub fn predict(&self, images: &[f32], batch: usize) -> Result<Vec<u32>> {
        let logits = self.map_batches(images, batch, |net, x| net.logits(x))?;
        Ok(logits.chunks(self.config.classes).map(argmax).collect())
    }

    /// Fraction of the first `limit` images of `data` (all when None) classified correctly.
    pub fn accuracy(&self, data: &Dataset, limit: Option<usize>, batch: usize) -> Result<f64> {
        let n = limit.unwrap_or(data.len()).min(data.len());
        let predicted = self.predict(&data.images[..n * data.image_len()], batch)?;
        let correct = predicted.iter().zip(&data.labels).filter(|(p, l)| p == l).count();
        Ok(correct as f64 / n.max(1) as f64)
    }

    /// Mean and covariance of the features of `images` (f64).
    pub fn feature_stats(&self, images: &[f32], batch: usize) -> Result<FeatureStats> {
        FeatureStats::from_features(&self.feature_matrix(images, batch)?, self.config.features)
    }

    /// MNIST-FID of two image sets: the Fréchet distance between the Gaussians fitted to this
    /// classifier's penultimate features (not the Inception FID; not comparable with it).
    pub fn mnist_fid(&self, images_a: &[f32], images_b: &[f32], batch: usize) -> Result<f64> {
        frechet_distance(
            &self.feature_stats(images_a, batch)?,
            &self.feature_stats(images_b, batch)?,
        )
    }
}

/// Index of the largest value (the first on ties).
pub fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as u32
}

/// The two sanity figures of a feature network: MNIST-FID between two real image sets (small)
/// and between real images and Gaussian noise (large), each over `samples` images per side.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FidChecks {
    /// Images on each side of each comparison.
    pub samples: usize,
    /// MNIST-FID(first `samples` training images, first `samples` test images).
    pub train_vs_test: f64,
    /// MNIST-FID(first `samples` training images, `samples` images of N(0, 1) noise clamped
    /// to [-1, 1]).
    pub train_vs_noise: f64,
}

impl Classifier {
    /// [`FidChecks`] of `train` and `test` with `samples` images a side (fewer when a split is
    /// smaller); the noise images are drawn from `seed`.
    pub fn fid_checks(
        &self,
        train: &Dataset,
        test: &Dataset,
        samples: usize,
        seed: u64,
    ) -> Result<FidChecks> {
        let n = samples.min(train.len()).min(test.len());
        let per_image = train.image_len();
        let train_stats = self.feature_stats(&train.images[..n * per_image], EVAL_BATCH)?;
        let test_stats = self.feature_stats(&test.images[..n * per_image], EVAL_BATCH)?;
        let noise = gaussian_noise_images(n * per_image, seed);
        let noise_stats = self.feature_stats(&noise, EVAL_BATCH)?;
        Ok(FidChecks {
            samples: n,
            train_vs_test: frechet_distance(&train_stats, &test_stats)?,
            train_vs_noise: frechet_distance(&train_stats, &noise_stats)?,
        })
    }
}

/// `len` values of N(0, 1) noise clamped to [-1, 1] (Box-Muller on a seeded CPU generator).
pub fn gaussian_noise_images(len: usize, seed: u64) -> Vec<f32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..len)
        .map(|_| {
            let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            z.clamp(-1.0, 1.0) as f32
        })
        .collect()
}
