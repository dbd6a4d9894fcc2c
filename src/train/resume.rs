//! What a resumed run may change: the step target, the optimiser's lr, late decay, warm-up and
//! clipping, the time budget and the outputs; the rest (model, data, batch...) is the checkpoint's.

use super::TrainConfig;
use crate::{Error, Result};
use std::path::PathBuf;

/// Settings a resume changes; each `None` keeps the checkpoint's. A run that diverged resumes
/// from its last good checkpoint with a lower `lr` (and clipping or warm-up) this way.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResumeChanges {
    /// The step count to reach (more than the checkpoint's step).
    pub steps: Option<usize>,
    pub lr: Option<f32>,
    pub lr_decay: Option<f32>,
    /// Warm-up steps, counted from step 0 of the run (so a resume past them has none).
    pub warmup: Option<u32>,
    pub max_grad_norm: Option<f32>,
    pub max_minutes: Option<f32>,
    pub out: Option<PathBuf>,
    pub checkpoint_every: Option<usize>,
    pub sample_every: Option<usize>,
    pub grid_images: Option<usize>,
    pub grid_steps: Option<usize>,
}

/// The settings a resume takes from the checkpoint whatever the flags say, for messages.
pub const KEPT_ON_RESUME: &str =
    "model, process, data, batch, seed, precision, optimizer, EMA decay, class dropout, loss weighting, time sampling, \
     skip training, \
     quantisation-aware training";

impl ResumeChanges {
    /// Applies the changes to `config` (the checkpoint's, at `step`) and validates the result;
    /// returns one "setting old -> new" line per setting that changed.
    pub fn apply(&self, config: &mut TrainConfig, step: usize, origin: &str) -> Result<Vec<String>> {
        if let Some(steps) = self.steps.filter(|&s| s <= step) {
            return Err(Error::Config(format!(
                "{origin} is at step {step}; --steps is the step count to reach, so a resume needs more \
                 than {step} (e.g. --steps {}), got {steps}",
                step + 100
            )));
        }
        let mut changed = Vec::new();
        macro_rules! change {
            ($($field:ident),*) => {$(
                if let Some(new) = &self.$field {
                    if *new != config.$field {
                        changed.push(format!(
                            "{} {:?} -> {:?}",
                            stringify!($field),
                            config.$field,
                            new
                        ));
                        config.$field = new.clone();
                    }
                }
            )*};
        }
        change!(steps, lr, lr_decay, warmup, max_grad_norm, max_minutes, out);
        change!(checkpoint_every, sample_every, grid_images, grid_steps);
        config.validate()?;
        Ok(changed)
    }
}
