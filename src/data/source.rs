//! The `--data` argument: `mnist`, `mnist:DIR`, `fashion:DIR`, `cifar10:DIR` or `folder:DIR`,
//! parsed into a `DataSource` that loads a split with the matching loader.

use super::{cifar10, image_folder, mnist, Dataset, Split, DEFAULT_MNIST_DIR};
use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Where training data comes from. Parse one from a string (`"cifar10:data/cifar".parse()`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataSource {
    /// MNIST IDX files in this folder (`mnist` alone = [`DEFAULT_MNIST_DIR`]).
    Mnist(PathBuf),
    /// Fashion-MNIST IDX files (the same file names as MNIST) in this folder.
    Fashion(PathBuf),
    /// The CIFAR-10 binary batches in this folder.
    Cifar10(PathBuf),
    /// PNG/JPEG images in this folder (see [`image_folder`]); it has no splits, so every split
    /// is all of it. Parsed from `folder:DIR` as RGB (3 channels) at the first image's size;
    /// training and evaluation read it as their model needs ([`DataSource::fitted_to`]).
    Folder {
        dir: PathBuf,
        size: Option<(u32, u32)>,
        channels: usize,
    },
}

/// The forms `DataSource::from_str` accepts, for help texts and errors.
pub const DATA_SOURCE_FORMS: &str =
    "mnist (MNIST in assets/mnist), mnist:DIR, fashion:DIR, cifar10:DIR, folder:DIR (PNG/JPEG images)";

impl FromStr for DataSource {
    type Err = Error;

    fn from_str(spec: &str) -> Result<DataSource> {
        let (kind, dir) = match spec.split_once(':') {
            Some((kind, dir)) => (kind, Some(dir).filter(|d| !d.is_empty()).map(PathBuf::from)),
            None => (spec, None),
        };
        let error = |msg: String| Error::Data {
            path: format!("data source \"{spec}\""),
            msg,
        };
        match (kind, dir) {
            ("mnist", dir) => Ok(DataSource::Mnist(dir.unwrap_or_else(|| DEFAULT_MNIST_DIR.into()))),
            ("fashion", Some(dir)) => Ok(DataSource::Fashion(dir)),
            ("cifar10", Some(dir)) => Ok(DataSource::Cifar10(dir)),
            ("folder", Some(dir)) => Ok(DataSource::Folder {
                dir,
                size: None,
                channels: 3,
            }),
            ("fashion" | "cifar10" | "folder", None) => Err(error(format!(
                "needs a folder: write {kind}:DIR (accepted forms: {DATA_SOURCE_FORMS})"
            ))),
            _ => Err(error(format!(
                "unknown kind \"{kind}\"; the accepted forms are {DATA_SOURCE_FORMS}"
            ))),
        }
    }
}

impl DataSource {
    /// This source as a model of `[channels, height, width]` images reads it: an image folder
    /// (which has no size or channel count of its own) is converted to the model's channels
    /// and resized to its size; the other sources are what they are.
    pub fn fitted_to(self, [channels, height, width]: [usize; 3]) -> DataSource {
        match self {
            DataSource::Folder { dir, .. } => DataSource::Folder {
                dir,
                size: Some((height as u32, width as u32)),
                channels,
            },
            other => other,
        }
    }

    /// The folder this source reads, and its `--data` kind.
    fn folder(&self) -> (&Path, &'static str) {
        match self {
            DataSource::Mnist(dir) => (dir, "mnist"),
            DataSource::Fashion(dir) => (dir, "fashion"),
            DataSource::Cifar10(dir) => (dir, "cifar10"),
            DataSource::Folder { dir, .. } => (dir, "folder"),
        }
    }

    /// Loads `split` (named e.g. `fashion/train`). A file given for the folder is refused with
    /// the folder that holds it, a folder that does not exist as such.
    pub fn load(&self, split: Split) -> Result<Dataset> {
        let (dir, kind) = self.folder();
        if dir.is_file() {
            let parent = dir
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            return Err(Error::data(
                dir,
                format!(
                    "is a file, and --data {kind}:DIR takes the folder that holds the dataset's files: \
                     --data {kind}:{}",
                    parent.display()
                ),
            ));
        }
        if !dir.exists() {
            return Err(Error::data(
                dir,
                format!("no such folder: --data {kind}:DIR takes the folder that holds the dataset's files"),
            ));
        }
        match self {
            DataSource::Mnist(dir) => mnist(dir, split),
            DataSource::Fashion(dir) => {
                let mut data = mnist(dir, split)?;
                data.name = format!("fashion/{split}");
                Ok(data)
            }
            DataSource::Cifar10(dir) => cifar10(dir, split),
            DataSource::Folder { dir, size, channels } => image_folder(dir, *size, *channels),
        }
    }
}
