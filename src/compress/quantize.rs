//! Symmetric linear quantisation of a weight to int8 or int4 (one scale per tensor or per
//! output channel, zero stays zero) and the two-per-byte storage of int4 values.

use crate::ops::WeightBits;

/// A weight's integer values (row-major, the weight's shape) and scales: value x scale is the
/// dequantised weight. `scales` has one entry per index along `axis` or, per tensor, one.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    pub bits: WeightBits,
    pub values: Vec<i8>,
    pub scales: Vec<f32>,
    pub axis: Option<usize>,
}

/// The channel of element `i` of `shape` along `axis` (0 per tensor).
pub fn channel_of(shape: &[usize], axis: Option<usize>, i: usize) -> usize {
    match axis {
        Some(a) => (i / shape[a + 1..].iter().product::<usize>()) % shape[a],
        None => 0,
    }
}

/// Quantises `data` of `shape`: per channel along `axis` or per tensor (`None`), each scale
/// = max |w| / max level (1 for an all-zero channel), values rounded to nearest.
pub fn quantize(data: &[f32], shape: &[usize], axis: Option<usize>, bits: WeightBits) -> Quantized {
    let channels = axis.map_or(1, |a| shape[a]);
    let mut peak = vec![0f32; channels];
    for (i, w) in data.iter().enumerate() {
        let c = channel_of(shape, axis, i);
        peak[c] = peak[c].max(w.abs());
    }
    let levels = bits.max() as f32;
    let scales: Vec<f32> = peak
        .iter()
        .map(|&p| if p > 0.0 { p / levels } else { 1.0 })
        .collect();
    let values = data
        .iter()
        .enumerate()
        .map(|(i, w)| {
            (w / scales[channel_of(shape, axis, i)])
                .round()
                .clamp(-levels, levels) as i8
        })
        .collect();
    Quantized {
        bits,
        values,
        scales,
        axis,
    }
}

impl Quantized {
    /// value x scale for every element of `shape`.
    pub fn dequantize(&self, shape: &[usize]) -> Vec<f32> {
        self.values
            .iter()
            .enumerate()
            .map(|(i, &v)| v as f32 * self.scales[channel_of(shape, self.axis, i)])
            .collect()
    }

    /// One scale per index along `axis` (a per-tensor scale repeated `channels` times).
    pub fn scales_along(&self, channels: usize) -> Vec<f32> {
        match self.axis {
            Some(_) => self.scales.clone(),
            None => vec![self.scales[0]; channels],
        }
    }
}

/// int4 values two per byte, the first in the low nibble (two's complement); an odd count
/// leaves the last high nibble 0.
pub fn pack_int4(values: &[i8]) -> Vec<u8> {
    values
        .chunks(2)
        .map(|pair| {
            let nibble = |v: i8| (v as u8) & 0x0f;
            nibble(pair[0]) | pair.get(1).map_or(0, |&v| nibble(v) << 4)
        })
        .collect()
}

/// The first `count` int4 values of `bytes` (the inverse of [`pack_int4`]).
pub fn unpack_int4(bytes: &[u8], count: usize) -> Vec<i8> {
    let signed = |nibble: u8| ((nibble << 4) as i8) >> 4;
    bytes
        .iter()
        .flat_map(|&b| [signed(b & 0x0f), signed(b >> 4)])
        .take(count)
        .collect()
}
