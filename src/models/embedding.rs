//! Conditioning inputs: the DDPM sinusoidal timestep embedding and one-hot class rows
//! (computed on the CPU and uploaded), and the learned class table they look up.

use super::summary::LayerWalk;
use crate::ops::random::Rng;
use crate::{DType, Error, Gpu, Result, Tensor};
use serde::{Deserialize, Serialize};

/// How the sinusoid of a timestep is laid out (diffusers' `Timesteps(flip_sin_to_cos,
/// downscale_freq_shift)`); the default is DDPM's `get_timestep_embedding`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeSinusoid {
    /// Cosines first, then sines.
    pub flip_sin_to_cos: bool,
    /// f_i = exp(-ln(10000) i / (h - freq_shift)).
    pub freq_shift: f32,
}

impl Default for TimeSinusoid {
    /// DDPM's: sines first, f_i = exp(-ln(10000) i / (h - 1)).
    fn default() -> TimeSinusoid {
        TimeSinusoid {
            flip_sin_to_cos: false,
            freq_shift: 1.0,
        }
    }
}

/// For each t, `dim` values [sin(t f_0) .. sin(t f_{h-1}), cos(t f_0) .. cos(t f_{h-1})] with
/// h = dim / 2 and f_i as `layout` says (the halves swapped under `flip_sin_to_cos`). `dim`
/// must be even and at least 4, and the shift below h (checked by the model configs).
pub fn timestep_embedding(t: &[f32], dim: usize, layout: TimeSinusoid) -> Vec<f32> {
    let half = dim / 2;
    let step = (10000f64).ln() / (half as f64 - f64::from(layout.freq_shift));
    let freqs: Vec<f64> = (0..half).map(|i| (-step * i as f64).exp()).collect();
    let mut out = Vec::with_capacity(t.len() * dim);
    for &ti in t {
        let sines = freqs.iter().map(|f| (f64::from(ti) * f).sin() as f32);
        let cosines = freqs.iter().map(|f| (f64::from(ti) * f).cos() as f32);
        if layout.flip_sin_to_cos {
            out.extend(cosines);
            out.extend(sines);
        } else {
            out.extend(sines);
            out.extend(cosines);
        }
    }
    out
}

/// Row-major [labels.len(), rows] one-hot matrix; every label must be below `rows`.
pub fn one_hot(labels: &[u32], rows: usize) -> Result<Vec<f32>> {
    let mut out = vec![0.0; labels.len() * rows];
    for (i, &label) in labels.iter().enumerate() {
        let label = label as usize;
        if label >= rows {
            return Err(Error::Config(format!(
                "class label {label} is out of range: labels go from 0 to {} ({} is the null class)",
                rows - 1,
                rows - 1
            )));
        }
        out[i * rows + label] = 1.0;
    }
    Ok(out)
}

/// A class-conditional network's label table [classes + 1, dim]: row k is added to the time
/// embedding of images of class k; the last row is the null class (classifier-free guidance's
/// unconditional branch, and every image when no labels are given).
pub struct ClassEmbedding {
    table: Tensor,
}

impl ClassEmbedding {
    /// A table of `classes` rows plus the null row, drawn from N(0, 1).
    pub fn new(gpu: &Gpu, rng: &mut Rng, classes: usize, dim: usize) -> Result<ClassEmbedding> {
        let table = rng.normal(gpu, &[classes + 1, dim], 0.0, 1.0, DType::F32)?;
        Ok(ClassEmbedding {
            table: table.requires_grad(),
        })
    }

    /// `temb` [N, dim] plus the row of each image's label (the null row for all when `labels`
    /// is None), as one_hot(labels) @ table in `temb`'s dtype.
    pub fn add_to(&self, temb: &Tensor, labels: Option<&[u32]>) -> Result<Tensor> {
        let n = temb.shape()[0];
        let rows = self.table.shape()[0];
        let null = vec![rows as u32 - 1; n];
        let labels = labels.unwrap_or(&null);
        if labels.len() != n {
            return Err(Error::Config(format!(
                "{} class labels for a batch of {n} (give one per image)",
                labels.len()
            )));
        }
        let dtype = temb.dtype();
        let one_hot = Tensor::from_slice(temb.gpu(), &[n, rows], &one_hot(labels, rows)?, dtype)?;
        temb.add(&one_hot.matmul(&self.table.to_dtype(dtype)?)?)
    }

    /// Records the table as the layer `name` whose output is `temb`'s shape.
    pub fn walk(&self, walk: &mut LayerWalk, name: &str, temb: &[usize]) {
        let [rows, dim] = [self.table.shape()[0], self.table.shape()[1]];
        let kind = format!("Embedding({rows}, {dim})");
        walk.layer(name, kind, temb.to_vec(), &[("weight", &self.table)], true);
    }
}
