//! MNIST-FID's one constructor: the MNIST classifier whose features it compares and the
//! reference statistics of a dataset split, read from the statistics cache or computed into it.

use super::{Classifier, SHIPPED_MNIST_CLASSIFIER};
use crate::data::{DataSource, Split};
use crate::eval::{Reference, ReferenceImages, DEFAULT_STATS_CACHE};
use crate::{Error, Gpu, Result};
use std::path::Path;

/// Images per feature-network batch while the reference statistics are computed.
const REFERENCE_BATCH: usize = 250;

/// The classifier and the reference it scores generated images against.
pub struct MnistFid {
    pub classifier: Classifier,
    pub reference: Reference,
    /// Whether the reference statistics came from the cache (else they were computed now).
    pub cached: bool,
}

impl MnistFid {
    /// The classifier in `classifier` against the statistics of `images` (from the cache folder
    /// `cache`, or computed and cached); `progress(done, total)` while they are computed.
    pub async fn load(
        gpu: &Gpu,
        classifier: &Path,
        images: ReferenceImages<'_>,
        cache: &Path,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<MnistFid> {
        let net = Classifier::load(gpu, classifier).map_err(|e| {
            let fix = match classifier.as_os_str() == SHIPPED_MNIST_CLASSIFIER {
                true => "it ships in assets/models/: run wgdiff from the repository folder",
                false => "train one with `wgdiff train-classifier`, or use the shipped one",
            };
            Error::Config(format!("MNIST-FID needs its classifier ({e}); {fix}"))
        })?;
        let total = images.count();
        let (reference, cached) = Reference::cached(cache, gpu, &net, images, REFERENCE_BATCH, |done| {
            progress(done, total)
        })
        .await?;
        Ok(MnistFid {
            classifier: net,
            reference,
            cached,
        })
    }

    /// MNIST-FID as training and the experiments score it: the classifier in `classifier`
    /// against the whole test split of the MNIST source `data` (`mnist` or `mnist:DIR`).
    pub async fn of_test_split(
        gpu: &Gpu,
        classifier: &Path,
        data: &str,
        cache: &Path,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<MnistFid> {
        let data = data.parse::<DataSource>()?.load(Split::Test)?;
        let images = ReferenceImages {
            data: &data,
            split: Split::Test,
            limit: None,
        };
        Self::load(gpu, classifier, images, cache, progress).await
    }

    /// [`MnistFid::of_test_split`] with the shipped classifier and the default cache.
    pub async fn shipped(gpu: &Gpu, data: &str, progress: &mut dyn FnMut(usize, usize)) -> Result<MnistFid> {
        let (classifier, cache) = (
            Path::new(SHIPPED_MNIST_CLASSIFIER),
            Path::new(DEFAULT_STATS_CACHE),
        );
        Self::of_test_split(gpu, classifier, data, cache, progress).await
    }
}
