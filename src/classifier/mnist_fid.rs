//! MNIST-FID's one type: the MNIST classifier whose features it compares and the reference
//! statistics of a dataset split, from the statistics cache (computed into it) or shipped.

use super::{Classifier, SHIPPED_MNIST_CLASSIFIER};
use crate::checkpoint::Checkpoint;
use crate::data::{DataSource, Split};
use crate::eval::{Reference, ReferenceImages};
use crate::{Error, Gpu, Result};
use std::path::Path;

/// The shipped classifier's feature statistics of the 10,000 MNIST test images (FID only),
/// written by `wgdiff eval` into its statistics cache (assets/models/README.md).
pub const SHIPPED_MNIST_TEST_STATS: &str = "assets/models/mnist-classifier-test-stats.safetensors";

/// How a table column or plot axis of MNIST-FID scores is headed: with the number of generated
/// images each score is over, since the score falls as that number grows (a score over 200
/// images is not comparable with one over 1,000).
pub fn mnist_fid_label(samples: usize) -> String {
    format!("MNIST-FID ({samples} samples)")
}

/// Images per feature-network batch while the reference statistics are computed.
const REFERENCE_BATCH: usize = 250;

/// The classifier and the reference it scores generated images against.
pub struct MnistFid {
    pub classifier: Classifier,
    pub reference: Reference,
    /// Whether the reference statistics were read (the cache, the shipped file), not computed now.
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
                true => "it ships in a wgdiff checkout's assets/models/: run wgdiff there, or set WGDIFF_ASSETS to \
                         that checkout's assets folder",
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

    /// [`shipped`](Self::shipped) from the files in `assets/models/` (relative to the working
    /// folder, or wherever `fsio::locate` finds them).
    pub fn shipped_files(gpu: &Gpu) -> Result<MnistFid> {
        let read = |path: &str| {
            crate::fsio::read_io(Path::new(path)).map_err(|e| {
                Error::Config(format!(
                    "MNIST-FID needs {path} ({e}): it ships in a wgdiff checkout's assets/models/: run wgdiff \
                     there, or set WGDIFF_ASSETS to that checkout's assets folder"
                ))
            })
        };
        Self::shipped(
            gpu,
            &read(SHIPPED_MNIST_CLASSIFIER)?,
            &read(SHIPPED_MNIST_TEST_STATS)?,
        )
    }

    /// MNIST-FID as training and the experiments score it: the shipped classifier (the bytes
    /// of [`SHIPPED_MNIST_CLASSIFIER`]) against its statistics of the 10,000 MNIST test images
    /// (the bytes of [`SHIPPED_MNIST_TEST_STATS`]; FID only, no KID rows). Bytes, so a page
    /// passes what it fetched; no reference is computed.
    pub fn shipped(gpu: &Gpu, classifier: &[u8], stats: &[u8]) -> Result<MnistFid> {
        let ckpt = Checkpoint::from_bytes(classifier, SHIPPED_MNIST_CLASSIFIER)?;
        let net = Classifier::from_checkpoint(gpu, &ckpt, SHIPPED_MNIST_CLASSIFIER)?;
        let reference = Reference::fid_only(stats, SHIPPED_MNIST_TEST_STATS)?;
        let of = &reference.source;
        if of.network != net.id() || of.dataset != "mnist/test" {
            return Err(Error::Config(format!(
                "{SHIPPED_MNIST_TEST_STATS} holds the statistics of {} {} images under {}, not of the MNIST \
                 test split under the shipped classifier ({}): remake it as assets/models/README.md says",
                of.images,
                of.dataset,
                of.network,
                net.id()
            )));
        }
        Ok(MnistFid {
            classifier: net,
            reference,
            cached: true,
        })
    }
}
