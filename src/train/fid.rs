//! FID during training: every `fid_every` steps sample the EMA network (fixed seed, default
//! sampler), score it against a cached reference, record `(step, fid)` and keep the best weights.

use super::quality::sample_features;
use super::sample::{default_sampler, Sampling};
use super::{SampleRequest, Trainer};
use crate::eval::{FeatureNet, Reference};
use crate::Result;
use serde::{Deserialize, Serialize};
#[cfg(not(target_arch = "wasm32"))]
use {
    crate::classifier::{Classifier, SHIPPED_MNIST_CLASSIFIER},
    crate::data::{DataSource, Split},
    crate::eval::{ReferenceImages, DEFAULT_STATS_CACHE},
    crate::{Error, Gpu},
    std::path::Path,
};

/// One evaluation: the step it followed and the Fréchet distance then.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FidRecord {
    pub step: usize,
    pub fid: f64,
}

/// The lowest finite record of `records`.
pub fn best_fid(records: &[FidRecord]) -> Option<FidRecord> {
    records
        .iter()
        .copied()
        .filter(|r| r.fid.is_finite())
        .min_by(|a, b| a.fid.total_cmp(&b.fid))
}

/// A feature network (the MNIST classifier for MNIST-FID) and the reference it scores against.
pub struct FidTracker {
    pub features: Box<dyn FeatureNet>,
    pub reference: Reference,
}

impl FidTracker {
    /// MNIST-FID: the shipped MNIST classifier against the test split of `data` (a `--data`
    /// source), the reference statistics read from (or computed into) the default stats cache;
    /// `progress(done, total)` while they are computed.
    #[cfg(not(target_arch = "wasm32"))]
    pub async fn mnist(gpu: &Gpu, data: &str, progress: &mut dyn FnMut(usize, usize)) -> Result<FidTracker> {
        let classifier = Classifier::load(gpu, Path::new(SHIPPED_MNIST_CLASSIFIER)).map_err(|e| {
            Error::Config(format!(
                "MNIST-FID during training scores with the MNIST classifier shipped in assets/models/ ({e}): \
                 run wgdiff from the repository folder, or set fid_every = 0"
            ))
        })?;
        let data = data.parse::<DataSource>()?.load(Split::Test)?;
        let images = ReferenceImages {
            data: &data,
            split: Split::Test,
            limit: None,
        };
        let total = images.count();
        let (reference, _) = Reference::cached(
            Path::new(DEFAULT_STATS_CACHE),
            gpu,
            &classifier,
            images,
            250,
            |done| progress(done, total),
        )
        .await?;
        Ok(FidTracker {
            features: Box::new(classifier),
            reference,
        })
    }

    /// Samples `fid_samples` images from `trainer`'s EMA network with the default sampler at
    /// `fid_steps` steps (seed = the run's seed, so evaluations compare), scores them and
    /// appends the record to the training state. Returns the record and whether it is the
    /// lowest so far (whose checkpoint the caller keeps).
    pub async fn record(&self, trainer: &mut Trainer) -> Result<(FidRecord, bool)> {
        let c = &trainer.state.config;
        let fid = self.score(trainer, c.fid_samples, c.fid_steps).await?;
        let record = FidRecord {
            step: trainer.state.step,
            fid,
        };
        let is_best =
            record.fid.is_finite() && best_fid(&trainer.state.fid).is_none_or(|b| record.fid < b.fid);
        trainer.state.fid.push(record);
        Ok((record, is_best))
    }

    /// [`FidTracker::record`], then, when it is the best, the checkpoint saved to `best`
    /// (atomically).
    #[cfg(not(target_arch = "wasm32"))]
    pub async fn evaluate(&self, trainer: &mut Trainer, best: &Path) -> Result<(FidRecord, bool)> {
        let (record, is_best) = self.record(trainer).await?;
        if is_best {
            trainer.save(best).await?;
        }
        Ok((record, is_best))
    }

    /// The Fréchet distance of `samples` images from `trainer`'s EMA network (the default
    /// sampler at `steps` steps, seed = the run's seed) to the reference.
    pub async fn score(&self, trainer: &Trainer, samples: usize, steps: usize) -> Result<f64> {
        let c = &trainer.state.config;
        let request = SampleRequest {
            sampler: default_sampler(&trainer.state.process),
            steps: Some(steps),
            count: samples,
            seed: c.seed,
            skip: crate::diffusion::SkipPlan::default(),
            cache: None,
            class: None,
            guidance: trainer.state.default_guidance(),
        };
        let net = trainer.ema_net()?;
        let sampling = Sampling {
            net: net.as_ref(),
            model: &trainer.state.model,
            process: &trainer.state.process,
        };
        let generated = sample_features(
            trainer.gpu(),
            sampling,
            &request,
            samples,
            c.batch,
            self.features.as_ref(),
            |_| {},
        )
        .await?;
        Ok(generated.scores(self.features.as_ref(), &self.reference)?.fid)
    }
}
