//! Training data on the CPU: the in-memory `Dataset` (NCHW images in [-1, 1] plus class ids),
//! its loaders (MNIST IDX, CIFAR-10, image folders), shuffled batches and PNG image grids.

pub mod batcher;
pub mod cifar;
pub mod folder;
pub mod grid;
pub mod idx;
mod read;
pub mod source;

pub use batcher::{Batch, Batcher, BatcherState};
pub use cifar::cifar10;
pub use folder::image_folder;
pub use grid::{check_png_output, grid_columns, grid_image, grid_png, save_grid, GridLayout};
pub use idx::{idx_from_bytes, load_idx, mnist, DEFAULT_MNIST_DIR};
pub use source::{DataSource, DATA_SOURCE_FORMS};

use crate::{Error, Result};
use std::fmt;

/// Which part of a dataset to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Split {
    Train,
    Test,
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Split::Train => "train",
            Split::Test => "test",
        })
    }
}

impl std::str::FromStr for Split {
    type Err = crate::Error;

    fn from_str(name: &str) -> crate::Result<Split> {
        match name {
            "train" => Ok(Split::Train),
            "test" => Ok(Split::Test),
            _ => Err(crate::Error::Config(format!(
                "unknown split `{name}`; choose train or test"
            ))),
        }
    }
}

/// Images and labels held in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// Name for logs and errors, e.g. `mnist/train`.
    pub name: String,
    /// All images, NCHW, scaled from bytes 0..=255 to [-1, 1].
    pub images: Vec<f32>,
    /// One class id per image (all 0 for an unlabeled folder).
    pub labels: Vec<u32>,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    /// Number of classes: every label is below it (10 for MNIST and CIFAR-10, 1 for a folder).
    pub classes: usize,
}

impl Dataset {
    /// A dataset from 8-bit pixels (NCHW, one image per label), scaled to [-1, 1]; errors
    /// when the pixel count does not match or a label is not below `classes`.
    pub fn from_pixels(
        name: impl Into<String>,
        pixels: &[u8],
        labels: Vec<u32>,
        [channels, height, width]: [usize; 3],
        classes: usize,
    ) -> Result<Dataset> {
        let name = name.into();
        if channels == 0 || height == 0 || width == 0 {
            let msg =
                format!("images of {channels}x{height}x{width} hold no pixels; every dimension must be >= 1");
            return Err(Error::Data { path: name, msg });
        }
        if labels.is_empty() {
            return Err(Error::Data {
                path: name,
                msg: "holds no images; a dataset needs at least one".into(),
            });
        }
        let expected = labels.len() * channels * height * width;
        if pixels.len() != expected {
            return Err(Error::Data {
                path: name,
                msg: format!(
                    "expected {} images of {channels}x{height}x{width} ({expected} pixels), found {} pixels",
                    labels.len(),
                    pixels.len()
                ),
            });
        }
        if let Some((i, &label)) = labels.iter().enumerate().find(|&(_, &l)| l as usize >= classes) {
            return Err(Error::Data {
                path: name,
                msg: format!(
                    "image {i} has label {label}, but there are only {classes} classes (0..{classes})"
                ),
            });
        }
        let images = pixels.iter().map(|&p| p as f32 / 127.5 - 1.0).collect();
        Ok(Dataset {
            name,
            images,
            labels,
            channels,
            height,
            width,
            classes,
        })
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there are no images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Values per image: channels x height x width.
    pub fn image_len(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// `count` different image indices (all of them when `count >= len()`), drawn at random by
    /// `seed`: the same seed gives the same images.
    pub fn random_indices(&self, count: usize, seed: u64) -> Vec<usize> {
        let mut order = batcher::shuffled_order(self.len(), seed);
        order.truncate(count);
        order
    }

    /// Image `i` (CHW, in [-1, 1]); panics when `i >= len()`, like slice indexing.
    pub fn image(&self, i: usize) -> &[f32] {
        let n = self.image_len();
        &self.images[i * n..(i + 1) * n]
    }
}
