//! The `--data` argument: `mnist`, `mnist:DIR`, `fashion:DIR`, `cifar10:DIR`, `folder:DIR` or a
//! bare folder (its kind read from its files), parsed into a `DataSource` that loads a split
//! with the matching loader.

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
pub const DATA_SOURCE_FORMS: &str = "mnist (MNIST in assets/mnist), mnist:DIR, fashion:DIR, cifar10:DIR, \
     folder:DIR (PNG/JPEG images), or a folder of any of them (DIR alone)";

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
            (_, None) if looks_like_a_path(spec) => DataSource::in_folder(Path::new(spec)),
            _ => Err(error(format!(
                "unknown kind \"{kind}\"; the accepted forms are {DATA_SOURCE_FORMS}"
            ))),
        }
    }
}

/// Whether `spec` names a folder rather than a kind: it has a path separator, starts with `.`
/// or `~`, or is an existing folder.
fn looks_like_a_path(spec: &str) -> bool {
    spec.contains(['/', '\\']) || spec.starts_with(['.', '~']) || Path::new(spec).is_dir()
}

impl DataSource {
    /// The source a bare folder holds, by its files: MNIST's IDX files (or Fashion-MNIST's, the
    /// same names), CIFAR-10's binary batches, or PNG/JPEG images; anything else is refused
    /// with the forms that name the kind.
    pub fn in_folder(dir: &Path) -> Result<DataSource> {
        let refuse = |why: String| Error::Data {
            path: format!("data source \"{}\"", dir.display()),
            msg: format!("{why}; name the kind: {DATA_SOURCE_FORMS}"),
        };
        let names: Vec<String> = crate::fsio::list_dir(dir)
            .map_err(|e| refuse(format!("cannot list the folder ({e})")))?
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().to_lowercase()))
            .collect();
        let has = |test: &dyn Fn(&str) -> bool| names.iter().any(|n| test(n));
        if has(&|n| n.starts_with("train-images") && n.contains("idx3-ubyte")) {
            Ok(DataSource::Mnist(dir.to_path_buf()))
        } else if has(&|n| n.starts_with("data_batch_1.bin")) {
            Ok(DataSource::Cifar10(dir.to_path_buf()))
        } else if has(&|n| n.ends_with(".png") || n.ends_with(".jpg") || n.ends_with(".jpeg")) {
            Ok(DataSource::Folder {
                dir: dir.to_path_buf(),
                size: None,
                channels: 3,
            })
        } else {
            Err(refuse(
                "holds no MNIST IDX files, CIFAR-10 batches or PNG/JPEG images".to_string(),
            ))
        }
    }

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
        // (the shipped MNIST copy, `assets/mnist`, wherever it is found from this folder)
        let found = crate::fsio::locate(dir);
        if found.is_file() {
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
        if !found.exists() {
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
