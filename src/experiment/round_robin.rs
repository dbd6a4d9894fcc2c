//! Sampling arms in turn: every arm draws the same images batch by batch (round r of every arm
//! seeded seed + r), so a machine that slows down slows every arm alike; each batch is timed.

use crate::eval::FeatureNet;
use crate::models::DiffusionNet;
use crate::pipeline::GeneratedFeatures;
use crate::pipeline::{SampleRequest, Sampling};
use crate::{DType, Error, Gpu, Result, Tensor};

/// One arm: what it samples and how.
pub struct Contender<'a> {
    pub label: String,
    pub sampling: Sampling<'a>,
    /// The request of one round (its count and seed are the round's).
    pub request: SampleRequest,
}

/// Images per arm and per round, and the first round's seed.
#[derive(Clone, Copy, Debug)]
pub struct Rounds {
    pub samples: usize,
    pub batch: usize,
    pub seed: u64,
}

impl Rounds {
    /// Errors unless there are at least 2 samples per arm and a batch of at least 1.
    pub fn check(&self) -> Result<()> {
        if self.samples < 2 || self.batch == 0 {
            return Err(Error::Config(format!(
                "an experiment needs at least 2 samples per arm and a batch of at least 1 (got {} and {})",
                self.samples, self.batch
            )));
        }
        Ok(())
    }

    /// Images of each round (the last may be smaller).
    pub fn counts(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.samples.div_ceil(self.batch.max(1))).map(|r| self.batch.min(self.samples - r * self.batch))
    }
}

/// Samples every contender's images round by round, `progress(done_batches, total_batches,
/// label)` before each batch; returns each contender's features (none without `features`: a
/// run that measures speed alone) and batch times in order.
pub async fn sample_in_turn(
    gpu: &Gpu,
    contenders: &[Contender<'_>],
    rounds: Rounds,
    features: Option<&dyn FeatureNet>,
    mut progress: impl FnMut(usize, usize, &str) -> Result<()>,
) -> Result<Vec<GeneratedFeatures>> {
    rounds.check()?;
    let total = rounds.counts().count() * contenders.len();
    let mut generated: Vec<GeneratedFeatures> =
        contenders.iter().map(|_| GeneratedFeatures::default()).collect();
    for (round, count) in rounds.counts().enumerate() {
        for (i, arm) in contenders.iter().enumerate() {
            progress(round * contenders.len() + i, total, &arm.label)?;
            let request = arm
                .request
                .with_count(count)?
                .with_seed(rounds.seed + round as u64);
            generated[i]
                .add_batch(gpu, arm.sampling, &request, features)
                .await?;
        }
    }
    progress(total, total, "")?;
    Ok(generated)
}

/// Runs each network once at every skip depth for every batch size of `rounds`, so the
/// autotuner's kernel measurements for new shapes happen before any timed batch (a cached
/// pass at depth d runs the kernels of skipping d levels).
pub async fn warm_up(gpu: &Gpu, nets: &[(&dyn DiffusionNet, [usize; 3])], rounds: Rounds) -> Result<()> {
    rounds.check()?;
    let mut sizes: Vec<usize> = rounds.counts().collect();
    sizes.dedup();
    {
        let _g = crate::no_grad();
        for n in sizes {
            for &(net, [c, h, w]) in nets {
                let x = Tensor::zeros(gpu, &[n, c, h, w], DType::F32)?;
                let t = vec![500.0; n];
                for skip in 0..net.levels() {
                    net.forward(&x, &t, None, skip)?;
                }
            }
        }
    }
    gpu.finish().await
}
