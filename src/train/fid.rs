//! FID during training (`fid_every`, or live under `fid_share`): sample the EMA network (fixed
//! seed, default sampler), score it against a reference, record `(step, fid)`, keep the best.

use super::Trainer;
use crate::classifier::MnistFid;
use crate::eval::{FeatureNet, Reference};
use crate::pipeline::{sample_features, SampleRequest, Sampling};
use crate::run_state::{best_fid, FidRecord};
use crate::Result;

/// A feature network (the MNIST classifier for MNIST-FID) and the reference it scores against.
pub struct FidTracker {
    pub features: Box<dyn FeatureNet>,
    pub reference: Reference,
}

impl From<MnistFid> for FidTracker {
    fn from(fid: MnistFid) -> FidTracker {
        FidTracker {
            features: Box::new(fid.classifier),
            reference: fid.reference,
        }
    }
}

impl FidTracker {
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

    /// The Fréchet distance of `samples` images from `trainer`'s EMA network (the default
    /// sampler at `steps` steps, seed = the run's seed) to the reference.
    pub async fn score(&self, trainer: &Trainer, samples: usize, steps: usize) -> Result<f64> {
        let c = &trainer.state.config;
        let request = SampleRequest::for_state(&trainer.state)
            .steps(Some(c.sampling_steps(steps)))
            .count(samples)
            .seed(c.seed)
            .build()?;
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
            |_| Ok(()),
        )
        .await?;
        generated.fid(self.features.as_ref(), &self.reference.stats)
    }
}
