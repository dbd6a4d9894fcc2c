//! Network inputs computed on the CPU and uploaded: the DDPM sinusoidal timestep embedding
//! and one-hot class rows (whose product with an embedding table is the class lookup).

use crate::{Error, Result};

/// DDPM's `get_timestep_embedding`: for each t, `dim` values [sin(t f_0) .. sin(t f_{h-1}),
/// cos(t f_0) .. cos(t f_{h-1})] with h = dim / 2 and f_i = exp(-ln(10000) i / (h - 1)).
/// `dim` must be even and at least 4 (checked by the model configs).
pub fn timestep_embedding(t: &[f32], dim: usize) -> Vec<f32> {
    let half = dim / 2;
    let step = (10000f64).ln() / (half as f64 - 1.0);
    let freqs: Vec<f64> = (0..half).map(|i| (-step * i as f64).exp()).collect();
    let mut out = Vec::with_capacity(t.len() * dim);
    for &ti in t {
        out.extend(freqs.iter().map(|f| (f64::from(ti) * f).sin() as f32));
        out.extend(freqs.iter().map(|f| (f64::from(ti) * f).cos() as f32));
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
