//! The files an experiment reads, by the paths its setup names: natively read from disk as the
//! run needs them; in a page fetched from its site before the run (a page has no file system).

use crate::checkpoint::Checkpoint;
use crate::classifier::{MnistFid, SHIPPED_MNIST_CLASSIFIER, SHIPPED_MNIST_TEST_STATS};
use crate::models::SkipType;
use crate::pipeline::TrainedModel;
use crate::{Error, Gpu, Result};
use std::path::{Path, PathBuf};

/// Where an experiment's input files come from.
pub enum Inputs {
    /// Read from disk as the run goes, the report written there (`wgdiff experiment`, the
    /// desktop app).
    Disk,
    /// Fetched before the run, the report kept by the caller (a page): (path, bytes) of every file
    /// [`Setup::page_inputs`](super::lab::Setup::page_inputs) names.
    Fetched(Vec<(PathBuf, Vec<u8>)>),
}

/// The fetched bytes of `path`, or an error naming it.
fn fetched<'a>(files: &'a [(PathBuf, Vec<u8>)], path: &Path) -> Result<&'a [u8]> {
    files
        .iter()
        .find(|(p, _)| p == path)
        .map(|(_, bytes)| bytes.as_slice())
        .ok_or_else(|| Error::Io {
            what: path.display().to_string(),
            reason: "was not fetched before the run (a page fetches the files its setup names)".into(),
        })
}

impl Inputs {
    /// The checkpoint at `path`.
    pub fn checkpoint(&self, path: &Path) -> Result<Checkpoint> {
        match self {
            Inputs::Disk => Checkpoint::load(path),
            Inputs::Fetched(files) => {
                Checkpoint::from_bytes(fetched(files, path)?, &path.display().to_string())
            }
        }
    }

    /// The model at `path` with its EMA weights, its skip type replaced when `skip_type` is
    /// given ([`TrainedModel::load_with_skip_type`]: a diverged run's weights are refused).
    pub async fn model(&self, gpu: &Gpu, path: &Path, skip_type: Option<SkipType>) -> Result<TrainedModel> {
        if let Inputs::Disk = self {
            return TrainedModel::load_with_skip_type(gpu, path, skip_type);
        }
        let origin = path.display().to_string();
        let model = TrainedModel::from_checkpoint(gpu, &self.checkpoint(path)?, &origin, skip_type)?;
        model.sampling().check_output_scale(gpu, &origin).await?;
        Ok(model)
    }

    /// MNIST-FID as training scores it: the shipped classifier against its statistics of the
    /// MNIST test split ([`MnistFid::shipped`]).
    pub fn shipped_mnist_fid(&self, gpu: &Gpu) -> Result<MnistFid> {
        match self {
            Inputs::Disk => MnistFid::shipped_files(gpu),
            Inputs::Fetched(files) => MnistFid::shipped(
                gpu,
                fetched(files, Path::new(SHIPPED_MNIST_CLASSIFIER))?,
                fetched(files, Path::new(SHIPPED_MNIST_TEST_STATS))?,
            ),
        }
    }
}
