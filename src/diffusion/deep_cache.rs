//! Deep-feature caching across sampler steps (DeepCache, training-free): the features that the
//! deep levels hand to the shallow ones are computed at one network call and reused by the next.
//!
//! With interval m and depth d, a refresh call runs the network at its step's skip depth k < d
//! and keeps the tensor entering up level L-d-1 (what skipping d levels would replace); the next
//! m - 1 calls whose step skips at most d levels run only levels 0..L-d and take that tensor in
//! place of the deep levels. A call that skips d levels or more runs as its skip depth says
//! (skipping drops at least as much) and leaves nothing to reuse.

use super::denoiser::Denoiser;
use crate::models::DeepFeatures;
use crate::{Error, Result, Tensor};
use serde::{Deserialize, Serialize};

/// How often deep features are computed, and how deep the reused part reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureCache {
    /// m: one call computes the deep features, the next m - 1 reuse them (1: never reuse).
    pub interval: usize,
    /// d: the d deepest levels and the middle block are reused (1..levels-1).
    pub depth: usize,
}

impl FeatureCache {
    /// Interval m at depth d, by default the deepest a network of `levels` levels allows (only
    /// level 0 runs between refreshes, as DeepCache does by default).
    pub fn new(interval: usize, depth: Option<usize>, levels: usize) -> FeatureCache {
        FeatureCache {
            interval,
            depth: depth.unwrap_or(levels.saturating_sub(1).max(1)),
        }
    }

    /// Errors unless the interval is at least 1 and the depth fits a network of `levels` levels.
    pub fn check(&self, levels: usize) -> Result<()> {
        if self.interval == 0 {
            return Err(Error::Config(
                "the cache interval must be at least 1 (1 computes every step, m reuses deep features for m - 1 steps)"
                    .into(),
            ));
        }
        if levels < 2 {
            return Err(Error::Config(
                "deep-feature caching needs a network with levels to cache (a U-Net); this network has one level"
                    .into(),
            ));
        }
        if !(1..levels).contains(&self.depth) {
            return Err(Error::Config(format!(
                "the cache depth must be between 1 and {} (levels of this U-Net minus one), got {}",
                levels - 1,
                self.depth
            )));
        }
        Ok(())
    }

    /// "m = 3, d = 2".
    pub fn label(&self) -> String {
        format!("m = {}, d = {}", self.interval, self.depth)
    }
}

/// Network calls of one sampling run by what they did with the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CacheCounts {
    /// Calls that computed and kept the deep features.
    pub refreshes: usize,
    /// Calls that reused kept features instead of running the deep levels.
    pub reuses: usize,
}

/// The cache of one sampling run.
pub(super) struct CacheState {
    plan: FeatureCache,
    /// The kept features and the calls that have reused them.
    kept: Option<(Tensor, usize)>,
    pub counts: CacheCounts,
}

impl CacheState {
    pub fn new(plan: FeatureCache) -> CacheState {
        CacheState {
            plan,
            kept: None,
            counts: CacheCounts::default(),
        }
    }

    /// The denoiser's output for `x` at `t` for a step that skips `skip` levels, refreshing or
    /// reusing the deep features as the module doc says.
    pub fn predict(&mut self, denoiser: &dyn Denoiser, x: &Tensor, t: f32, skip: usize) -> Result<Tensor> {
        let depth = self.plan.depth;
        if let Some((features, uses)) = &mut self.kept {
            if *uses + 1 < self.plan.interval && skip <= depth {
                *uses += 1;
                self.counts.reuses += 1;
                return Ok(denoiser
                    .predict_deep(x, t, depth, DeepFeatures::Reuse(features))?
                    .0);
            }
        }
        if skip >= depth {
            self.kept = None;
            return denoiser.predict(x, t, skip);
        }
        let (out, features) = denoiser.predict_deep(x, t, skip, DeepFeatures::Capture(depth))?;
        let features = features.ok_or_else(|| {
            Error::Config("the network did not return the deep features it was asked to keep".into())
        })?;
        self.kept = Some((features, 0));
        self.counts.refreshes += 1;
        Ok(out)
    }
}
