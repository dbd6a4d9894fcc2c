//! A checkpoint's compressed weight forms: `W.int8` / `W.int4` values with `W.scale` (symmetric
//! linear quantisation per tensor or output channel) and `W.mask` keep-bits; encoding and decoding.
//!
//! A compressed checkpoint stores a weight `W` as `W.int8` (I8, W's shape) or `W.int4` (U8, two
//! values per byte) with `W.scale` (F32, W's shape with 1 on every axis but the output
//! channels', or all 1 per tensor) instead of `W`, and a pruned weight has `W.mask` (U8,
//! keep-bits, eight per byte); an int4 weight's shape is in the metadata's
//! `compression.shapes`.

use super::{Checkpoint, Stored, TensorData};
use crate::tensor::numel;
use crate::{Error, Result};

/// Bits per stored weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightBits {
    Int8,
    Int4,
}

impl WeightBits {
    pub fn bits(self) -> usize {
        match self {
            WeightBits::Int8 => 8,
            WeightBits::Int4 => 4,
        }
    }

    /// The largest magnitude stored (symmetric range, so -max..=max).
    pub fn max(self) -> i8 {
        match self {
            WeightBits::Int8 => 127,
            WeightBits::Int4 => 7,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WeightBits::Int8 => "int8",
            WeightBits::Int4 => "int4",
        }
    }

    /// Weights per u32 word.
    pub fn per_word(self) -> usize {
        32 / self.bits()
    }

    /// The multiple a packed row's length is padded to: runs of 4 start on a word (int8) or
    /// half-word (int4) boundary, so a 4-bit row holds whole words.
    pub fn row_multiple(self) -> usize {
        match self {
            WeightBits::Int8 => 4,
            WeightBits::Int4 => 8,
        }
    }
}

impl std::str::FromStr for WeightBits {
    type Err = Error;

    fn from_str(name: &str) -> Result<WeightBits> {
        match name {
            "int8" => Ok(WeightBits::Int8),
            "int4" => Ok(WeightBits::Int4),
            _ => Err(Error::Config(format!(
                "unknown weight format `{name}`; choose int8 or int4"
            ))),
        }
    }
}

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

/// A keep-mask as bits, eight per byte, the first element in the lowest bit.
pub fn mask_to_bits(mask: &[bool]) -> Vec<u8> {
    mask.chunks(8)
        .map(|bits| {
            bits.iter()
                .enumerate()
                .fold(0u8, |b, (i, &keep)| b | ((keep as u8) << i))
        })
        .collect()
}

/// The first `count` flags of `bits` (the inverse of [`mask_to_bits`]).
pub fn mask_from_bits(bits: &[u8], count: usize) -> Vec<bool> {
    bits.iter()
        .flat_map(|&b| (0..8).map(move |i| b >> i & 1 == 1))
        .take(count)
        .collect()
}

/// Whether `key` is stored in a compressed form (`key.int8` or `key.int4`).
pub fn is_compressed(ckpt: &Checkpoint, key: &str) -> bool {
    ["int8", "int4"]
        .iter()
        .any(|form| ckpt.tensors.contains_key(&format!("{key}.{form}")))
}

/// Elements `t` (stored as `name`) decodes to: two per byte of an int4 form.
pub fn stored_elements(name: &str, t: &TensorData) -> usize {
    if name.ends_with(".int4") {
        2 * t.len()
    } else {
        t.len()
    }
}

/// The compressed form of weight `key` of `shape`: its integer values and scales, when stored
/// as integers; `origin` names the checkpoint in errors.
pub fn stored_quantized(
    ckpt: &Checkpoint,
    key: &str,
    shape: &[usize],
    origin: &str,
) -> Result<Option<Quantized>> {
    let broken = |msg: String| Error::Checkpoint {
        path: origin.to_string(),
        msg: format!("{msg}; the file is damaged or was not written by `wgdiff compress` — compress again"),
    };
    let (bits, form) = match (
        ckpt.tensors.get(&format!("{key}.int8")),
        ckpt.tensors.get(&format!("{key}.int4")),
    ) {
        (Some(t), None) => (WeightBits::Int8, t),
        (None, Some(t)) => (WeightBits::Int4, t),
        (None, None) => return Ok(None),
        (Some(_), Some(_)) => return Err(broken(format!("tensor {key} is stored both as int8 and int4"))),
    };
    let n = numel(shape);
    let values = match bits {
        WeightBits::Int8 if form.stored == Stored::I8 && form.shape == shape => {
            bytemuck::cast_slice::<u8, i8>(&form.bytes).to_vec()
        }
        WeightBits::Int4 if form.stored == Stored::U8 && form.shape == [n.div_ceil(2)] => {
            unpack_int4(&form.bytes, n)
        }
        _ => {
            return Err(broken(format!(
                "tensor {key}.{} is {:?} {:?}, not the packed form of a {shape:?} weight",
                bits.name(),
                form.stored,
                form.shape
            )))
        }
    };
    if let Some(v) = values.iter().find(|v| v.unsigned_abs() > bits.max() as u8) {
        return Err(broken(format!(
            "tensor {key}.{} holds {v}, outside its range",
            bits.name()
        )));
    }
    let scale = ckpt
        .tensors
        .get(&format!("{key}.scale"))
        .ok_or_else(|| broken(format!("tensor {key} has integer values but no {key}.scale")))?;
    let axis = scale_axis(shape, &scale.shape).ok_or_else(|| {
        broken(format!(
            "{key}.scale has shape {:?}, which fits no channel axis of {shape:?}",
            scale.shape
        ))
    })?;
    if let Some(s) = scale.data.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
        return Err(broken(format!(
            "{key}.scale holds {s}, not a finite positive scale"
        )));
    }
    Ok(Some(Quantized {
        bits,
        values,
        scales: scale.data.clone(),
        axis,
    }))
}

/// The channel axis a scale of `scale_shape` belongs to (`Some(None)` per tensor).
fn scale_axis(shape: &[usize], scale_shape: &[usize]) -> Option<Option<usize>> {
    if scale_shape.len() != shape.len() {
        return None;
    }
    let wide: Vec<usize> = (0..shape.len()).filter(|&a| scale_shape[a] != 1).collect();
    match wide.as_slice() {
        [] => Some(None),
        [a] if scale_shape[*a] == shape[*a] => Some(Some(*a)),
        _ => None,
    }
}

/// The stored keep-mask of weight `key` (`numel` flags), if it was pruned.
pub fn stored_mask(ckpt: &Checkpoint, key: &str, count: usize, origin: &str) -> Result<Option<Vec<bool>>> {
    let Some(bits) = ckpt.tensors.get(&format!("{key}.mask")) else {
        return Ok(None);
    };
    if bits.stored != Stored::U8 || bits.shape != [count.div_ceil(8)] {
        return Err(Error::Checkpoint {
            path: origin.to_string(),
            msg: format!(
                "{key}.mask is {:?} {:?}, not the keep-bits of {count} weights; the file is damaged — compress again",
                bits.stored, bits.shape
            ),
        });
    }
    Ok(Some(mask_from_bits(&bits.bytes, count)))
}

/// The f32 values of a weight stored compressed as `key` (dequantised, pruned elements 0), or
/// `None` when it has no compressed form.
pub fn decode(ckpt: &Checkpoint, key: &str, origin: &str) -> Result<Option<TensorData>> {
    if !is_compressed(ckpt, key) {
        return Ok(None);
    }
    // An int8 form has the weight's shape; an int4 form's is in the metadata.
    let shape = match ckpt.tensors.get(&format!("{key}.int8")) {
        Some(t) => t.shape.clone(),
        None => weight_shape(ckpt, key, origin)?,
    };
    let Some(q) = stored_quantized(ckpt, key, &shape, origin)? else {
        return Ok(None);
    };
    let mut data = q.dequantize(&shape);
    if let Some(mask) = stored_mask(ckpt, key, data.len(), origin)? {
        data.iter_mut()
            .zip(mask)
            .filter(|(_, keep)| !keep)
            .for_each(|(v, _)| *v = 0.0);
    }
    Ok(Some(TensorData::f32(shape, data)))
}

/// The shape of compressed weight `key`, from the metadata's `compression.shapes`.
fn weight_shape(ckpt: &Checkpoint, key: &str, origin: &str) -> Result<Vec<usize>> {
    ckpt.meta
        .pointer("/compression/shapes")
        .and_then(|shapes| shapes.get(key))
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .ok_or_else(|| Error::Checkpoint {
            path: origin.to_string(),
            msg: format!(
                "tensor {key} is stored as int4 but the metadata has no compression.shapes entry for it; \
                 the file is damaged — compress again"
            ),
        })
}
