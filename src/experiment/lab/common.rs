//! What several experiments' live runs share: the MNIST-FID reference with its progress, and the
//! progress of runs that take turns ([`TrainingSeconds`]).

use super::events::{Event, Sink};
use crate::classifier::MnistFid;
use crate::experiment::Inputs;
use crate::{Gpu, Result};
use std::path::Path;

/// MNIST-FID of the classifier in `classifier` against the MNIST test split, with the
/// reference's progress as events: natively its statistics cached in `cache` (computed once);
/// with fetched inputs the shipped classifier's shipped statistics ([`Setup::page_inputs`]).
pub(super) async fn mnist_fid(
    gpu: &Gpu,
    inputs: &Inputs,
    (classifier, cache): (&Path, &Path),
    on_event: &mut Sink<'_>,
) -> Result<MnistFid> {
    if let Inputs::Fetched(_) = inputs {
        return inputs.shipped_mnist_fid(gpu);
    }
    let mut failed = None;
    let fid = MnistFid::of_test_split(gpu, classifier, "mnist", cache, &mut |done, total| {
        if let Err(e) = on_event(Event::Progress {
            done,
            total,
            unit: "reference images",
            what: "MNIST-FID reference".into(),
        }) {
            failed.get_or_insert(e);
        }
    })
    .await?;
    if let Some(e) = failed {
        return Err(e);
    }
    let source = &fid.reference.source;
    on_event(Event::Note(format!(
        "MNIST-FID reference: {} {} images",
        source.images, source.dataset
    )))?;
    Ok(fid)
}

/// Progress over the training seconds of runs that take turns (the speed-run's recipes, the
/// ladder's ablation rows), each counted up to the budget of one.
pub(super) struct TrainingSeconds {
    budget: f64,
    runs: usize,
    trained: Vec<(String, f64)>,
}

impl TrainingSeconds {
    pub(super) fn new(runs: usize, budget: f64) -> TrainingSeconds {
        TrainingSeconds {
            budget,
            runs,
            trained: Vec::new(),
        }
    }

    /// `name` has trained `seconds` in all: the progress event.
    pub(super) fn event(&mut self, name: &str, seconds: f64) -> Event {
        match self.trained.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = seconds,
            None => self.trained.push((name.to_string(), seconds)),
        }
        let done: f64 = self.trained.iter().map(|(_, s)| s.min(self.budget)).sum();
        Event::Progress {
            done: done as usize,
            total: (self.budget * self.runs as f64).ceil() as usize,
            unit: "training seconds",
            what: name.to_string(),
        }
    }
}
