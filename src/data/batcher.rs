//! Shuffled mini-batches of a `Dataset` that resume exactly: each epoch's order and each
//! image's flip are pure functions of (seed, epoch, position), which `BatcherState` saves.

use super::Dataset;
use crate::{Error, Gpu, Result, Tensor};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Everything that decides the batches to come; save it with a checkpoint and pass it to
/// [`Batcher::from_state`] to continue with the identical next batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatcherState {
    pub seed: u64,
    /// The epoch being read (0 first); each epoch has its own order.
    pub epoch: u64,
    /// Where the next batch starts in this epoch's order.
    pub position: usize,
    pub batch_size: usize,
    /// Mirror images left-right with probability 1/2.
    pub flip: bool,
    /// The number of images of the dataset the state belongs to (checked on resume).
    pub dataset_len: usize,
}

/// One mini-batch: images [B, C, H, W] in [-1, 1], their labels and dataset indices.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub images: Vec<f32>,
    pub labels: Vec<u32>,
    /// Which dataset image each batch entry is.
    pub indices: Vec<usize>,
    /// [B, C, H, W].
    pub shape: [usize; 4],
}

impl Batch {
    /// Uploads the images as an f32 tensor of `shape`.
    pub fn to_tensor(&self, gpu: &Gpu) -> Result<Tensor> {
        Tensor::from_f32(gpu, &self.shape, &self.images)
    }

    /// The entries `rows` of this batch (one replica's share of a batch split over devices).
    pub fn rows(&self, rows: std::ops::Range<usize>) -> Batch {
        let [_, c, h, w] = self.shape;
        let image = c * h * w;
        Batch {
            images: self.images[rows.start * image..rows.end * image].to_vec(),
            labels: self.labels[rows.clone()].to_vec(),
            indices: self.indices[rows.clone()].to_vec(),
            shape: [rows.len(), c, h, w],
        }
    }
}

/// Walks a dataset in shuffled batches of a fixed size. Each epoch is a fresh permutation; the
/// images left over after the last full batch of an epoch (`len % batch_size`) are skipped
/// in that epoch (they come up at other places in other epochs), so every batch is full.
#[derive(Clone)]
pub struct Batcher {
    data: Arc<Dataset>,
    state: BatcherState,
    /// Dataset indices in this epoch's order.
    order: Vec<usize>,
}

/// One SplitMix64 output for `x`: a bijective, well-mixed 64-bit hash.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A random 64-bit value that depends only on (key, counter).
fn mix(key: u64, counter: u64) -> u64 {
    splitmix(key ^ splitmix(counter))
}

/// Separates the flip draws from the shuffle draws of an epoch.
const FLIP_STREAM: u64 = 0x666c_6970;

impl Batcher {
    /// Starts at epoch 0; `batch_size` must be between 1 and the dataset's length.
    pub fn new(data: Arc<Dataset>, batch_size: usize, seed: u64, flip: bool) -> Result<Batcher> {
        let dataset_len = data.len();
        Batcher::from_state(
            data,
            BatcherState {
                seed,
                epoch: 0,
                position: 0,
                batch_size,
                flip,
                dataset_len,
            },
        )
    }

    /// Continues from a saved [`Batcher::state`]; `data` must be the same dataset.
    pub fn from_state(data: Arc<Dataset>, state: BatcherState) -> Result<Batcher> {
        let error = |msg: String| {
            Err(Error::Data {
                path: data.name.clone(),
                msg,
            })
        };
        if data.images.len() != data.len() * data.image_len() {
            return error(format!(
                "holds {} values for {} images of {}x{}x{}; build datasets with Dataset::from_pixels",
                data.images.len(),
                data.len(),
                data.channels,
                data.height,
                data.width
            ));
        }
        if state.dataset_len != data.len() {
            return error(format!(
                "the batcher state is for a dataset of {} images but this one has {}; resume with the \
                 data the run started with",
                state.dataset_len,
                data.len()
            ));
        }
        if state.batch_size == 0 || state.batch_size > data.len() {
            return error(format!(
                "a batch size of {} does not fit a dataset of {} images; use 1..={}",
                state.batch_size,
                data.len(),
                data.len()
            ));
        }
        if state.position > data.len() {
            return error(format!(
                "the batcher state's position {} is past the dataset's {} images; the state is damaged",
                state.position,
                data.len()
            ));
        }
        let order = shuffled_order(data.len(), mix(state.seed, state.epoch));
        Ok(Batcher { data, state, order })
    }

    /// The state to save for an exact resume.
    pub fn state(&self) -> &BatcherState {
        &self.state
    }

    pub fn dataset(&self) -> &Dataset {
        &self.data
    }

    /// Full batches per epoch: `len / batch_size`.
    pub fn batches_per_epoch(&self) -> usize {
        self.data.len() / self.state.batch_size
    }

    /// The next batch, starting a new, reshuffled epoch when the current one has no full
    /// batch left.
    pub fn next_batch(&mut self) -> Batch {
        let (b, len) = (self.state.batch_size, self.data.len());
        if self.state.position + b > len {
            self.state.epoch += 1;
            self.state.position = 0;
            self.order = shuffled_order(len, mix(self.state.seed, self.state.epoch));
        }
        let key = mix(self.state.seed, self.state.epoch) ^ FLIP_STREAM;
        let (c, h, w) = (self.data.channels, self.data.height, self.data.width);
        let mut images = Vec::with_capacity(b * c * h * w);
        let start = self.state.position;
        let indices = self.order[start..start + b].to_vec();
        for (position, &index) in (start..).zip(&indices) {
            let image = self.data.image(index);
            if self.state.flip && mix(key, position as u64) >> 63 == 1 {
                images.extend(image.chunks_exact(w).flat_map(|row| row.iter().rev()));
            } else {
                images.extend_from_slice(image);
            }
        }
        self.state.position += b;
        let labels = indices.iter().map(|&i| self.data.labels[i]).collect();
        Batch {
            images,
            labels,
            indices,
            shape: [b, c, h, w],
        }
    }
}

/// A permutation of 0..len (Fisher-Yates, draws from `mix(key, i)`).
pub(crate) fn shuffled_order(len: usize, key: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    for i in (1..len).rev() {
        let j = ((mix(key, i as u64) as u128 * (i as u128 + 1)) >> 64) as usize;
        order.swap(i, j);
    }
    order
}
