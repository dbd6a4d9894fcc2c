//! `wgdiff compress`'s library half: unstructured pruning and int8/int4 quantisation of a
//! checkpoint's conv and linear weights, their compressed stored forms, and reading them back.
//!
//! A compressed checkpoint is a sampling export (`ema.*`, `buffer.*`) in which a weight `W` may
//! be stored as `W.int8` (I8, W's shape) or `W.int4` (U8, two values per byte) with `W.scale`
//! (F32, W's shape with 1 on every axis but the output channels', or all 1 per tensor) instead
//! of `W`, and a pruned weight has `W.mask` (U8, keep-bits, eight per byte). Its metadata
//! holds the training state it was compressed from plus a `compression` record.

pub mod prune;
pub mod quantize;

pub use prune::{PruneMethod, PruneScope};
pub use quantize::Quantized;

use crate::checkpoint::{Checkpoint, Stored, TensorData};
use crate::models::summary::{WeightInfo, WeightRole};
use crate::ops::{PackedWeights, WeightBits};
use crate::tensor::numel;
use crate::{Error, Gpu, Result, Tensor};
use serde::{Deserialize, Serialize};

/// What `compress` does: prune, quantise, or both (pruning first).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompressPlan {
    pub prune: Option<PrunePlan>,
    pub quantize: Option<QuantizePlan>,
    /// Seeds random pruning.
    pub seed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrunePlan {
    pub method: PruneMethod,
    /// The fraction of the scope's weights set to zero, in [0, 1).
    pub amount: f64,
    pub scope: PruneScope,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuantizePlan {
    pub bits: WeightBits,
    /// One scale per output channel (else one per tensor).
    pub per_channel: bool,
}

/// What a compression did, for the command's summary and the experiment's tables.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompressSummary {
    /// Conv and linear weights (tensors, elements) in the model.
    pub weight_tensors: usize,
    pub weight_elements: usize,
    /// Elements in the pruning scope and how many of them were set to zero.
    pub scope_elements: usize,
    pub pruned_elements: usize,
    /// Weights stored as integers.
    pub quantized_tensors: usize,
    /// Largest |w - dequantised w| over the quantised weights, relative to their tensor's max |w|.
    pub max_relative_error: f32,
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
        2 * t.data.len()
    } else {
        t.data.len()
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
            form.data.iter().map(|&v| v as i8).collect::<Vec<i8>>()
        }
        WeightBits::Int4 if form.stored == Stored::U8 && form.shape == [n.div_ceil(2)] => {
            let bytes: Vec<u8> = form.data.iter().map(|&v| v as u8).collect();
            quantize::unpack_int4(&bytes, n)
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
    let bytes: Vec<u8> = bits.data.iter().map(|&v| v as u8).collect();
    Ok(Some(prune::mask_from_bits(&bytes, count)))
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

/// Which of `weights` (the model's, from its layer walk) a pruning scope covers, for images of
/// side `image_side`: the middle works at a quarter of the side or less, the ends above it;
/// layers before the first conv (the time embedding) belong to neither.
pub fn in_scope(weight: &WeightInfo, scope: PruneScope, image_side: usize) -> bool {
    let middle = |side: usize| 4 * side <= image_side;
    match scope {
        PruneScope::Global | PruneScope::Layer => true,
        PruneScope::Middle => weight.side.is_some_and(middle),
        PruneScope::Ends => weight.side.is_some_and(|s| !middle(s)),
    }
}

/// The EMA weights of `ckpt` (a `wgdiff train` checkpoint or export; `origin` names it)
/// compressed by `plan` into a sampling export. `weights` are the model's conv and linear
/// weights (its layer walk) and `image_side` its images' side (for the middle/ends scopes).
pub fn compress(
    ckpt: &Checkpoint,
    origin: &str,
    weights: &[WeightInfo],
    image_side: usize,
    plan: &CompressPlan,
) -> Result<(Checkpoint, CompressSummary)> {
    let mut out = crate::train::sampling_export(ckpt, origin)?;
    let already = weights
        .iter()
        .find(|w| is_compressed(ckpt, &format!("ema.{}", w.name)));
    if let Some(w) = already {
        return Err(Error::Checkpoint {
            path: origin.to_string(),
            msg: format!(
                "is already quantised (ema.{} is stored as integers); compress the float checkpoint it came \
                 from (a pruned float checkpoint, fine-tuned or not, may be quantised)",
                w.name
            ),
        });
    }
    let mut values: Vec<TensorData> = weights
        .iter()
        .map(|w| {
            let key = format!("ema.{}", w.name);
            ckpt.values(&key, origin)?
                .map(|t| t.into_owned())
                .ok_or_else(|| Error::Checkpoint {
                    path: origin.to_string(),
                    msg: format!("has no tensor {key}; it was written for a different model"),
                })
        })
        .collect::<Result<_>>()?;
    let mut summary = CompressSummary {
        weight_tensors: weights.len(),
        weight_elements: values.iter().map(|t| t.data.len()).sum(),
        ..Default::default()
    };
    let mut masks: Vec<Option<Vec<bool>>> = weights
        .iter()
        .zip(&values)
        .map(|(w, t)| stored_mask(ckpt, &format!("ema.{}", w.name), t.data.len(), origin))
        .collect::<Result<_>>()?;
    if let Some(p) = plan.prune {
        if !(0.0..1.0).contains(&p.amount) {
            return Err(Error::Config(format!(
                "--amount {} must be a fraction in [0, 1) of the scope's weights",
                p.amount
            )));
        }
        let chosen: Vec<usize> = (0..weights.len())
            .filter(|&i| in_scope(&weights[i], p.scope, image_side))
            .collect();
        if chosen.is_empty() {
            return Err(Error::Config(format!(
                "the {:?} scope holds no weights of this model (middle and ends need a convolutional U)",
                p.scope
            )));
        }
        let slices: Vec<&[f32]> = chosen.iter().map(|&i| values[i].data.as_slice()).collect();
        let pooled = p.scope != PruneScope::Layer;
        let new_masks = prune::prune_masks(&slices, p.method, p.amount, pooled, plan.seed);
        for (&i, mask) in chosen.iter().zip(new_masks) {
            summary.scope_elements += mask.len();
            summary.pruned_elements += mask.iter().filter(|keep| !**keep).count();
            let merged = match masks[i].take() {
                Some(old) => old.iter().zip(&mask).map(|(a, b)| *a && *b).collect(),
                None => mask,
            };
            values[i]
                .data
                .iter_mut()
                .zip(&merged)
                .filter(|(_, keep)| !**keep)
                .for_each(|(v, _)| *v = 0.0);
            masks[i] = Some(merged);
        }
    }
    let mut shapes = serde_json::Map::new();
    for ((w, t), mask) in weights.iter().zip(values).zip(masks) {
        let key = format!("ema.{}", w.name);
        if let Some(mask) = mask {
            out.tensors.insert(key.clone() + ".mask", mask_data(&mask));
        }
        let Some(qp) = plan.quantize else {
            out.tensors.insert(key, t);
            continue;
        };
        let axis = qp.per_channel.then_some(w.role.out_axis());
        let q = quantize::quantize(&t.data, &t.shape, axis, qp.bits);
        let peak = t
            .data
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()))
            .max(f32::MIN_POSITIVE);
        let error = q
            .dequantize(&t.shape)
            .iter()
            .zip(&t.data)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        summary.max_relative_error = summary.max_relative_error.max(error / peak);
        summary.quantized_tensors += 1;
        let mut scale_shape = vec![1; t.shape.len()];
        if let Some(a) = axis {
            scale_shape[a] = t.shape[a];
        }
        let scales = TensorData::f32(scale_shape, q.scales.clone());
        let form = match qp.bits {
            WeightBits::Int8 => TensorData {
                shape: t.shape.clone(),
                data: q.values.iter().map(|&v| v as f32).collect(),
                stored: Stored::I8,
            },
            WeightBits::Int4 => {
                let bytes = quantize::pack_int4(&q.values);
                TensorData {
                    shape: vec![bytes.len()],
                    data: bytes.iter().map(|&b| b as f32).collect(),
                    stored: Stored::U8,
                }
            }
        };
        shapes.insert(key.clone(), serde_json::json!(t.shape));
        out.tensors.remove(&key);
        out.tensors.insert(key.clone() + "." + qp.bits.name(), form);
        out.tensors.insert(key + ".scale", scales);
    }
    let record = serde_json::json!({
        "plan": plan,
        "source": origin,
        "summary": summary,
        "shapes": shapes,
    });
    if let Some(meta) = out.meta.as_object_mut() {
        meta.insert("compression".into(), record);
    }
    Ok((out, summary))
}

/// Attaches the packed integer form of every conv and linear weight of `net` stored as
/// integers under `prefix` (the kernels then run them); returns how many were attached.
pub fn attach_packed(
    ckpt: &Checkpoint,
    prefix: &str,
    net: &dyn crate::models::DiffusionNet,
    gpu: &Gpu,
    origin: &str,
) -> Result<usize> {
    let walk = net.walk(1);
    let mut attached = 0;
    for w in &walk.weights {
        let Some((_, tensor)) = walk.params.iter().find(|(n, _)| *n == w.name) else {
            continue;
        };
        let key = format!("{prefix}{}", w.name);
        let shape = tensor.shape();
        let Some(q) = stored_quantized(ckpt, &key, shape, origin)? else {
            continue;
        };
        let out_axis = w.role.out_axis();
        if q.axis.is_some_and(|a| a != out_axis) {
            continue;
        }
        let scales = q.scales_along(shape[out_axis]);
        let packed = match w.role {
            WeightRole::Conv => PackedWeights::conv(
                gpu,
                q.bits,
                [shape[0], shape[1], shape[2], shape[3]],
                &q.values,
                &scales,
            )?,
            WeightRole::Linear => PackedWeights::matmul(gpu, q.bits, shape[0], shape[1], &q.values, &scales)?,
            WeightRole::ConvTranspose | WeightRole::Projection => continue,
        };
        tensor.attach_packed(packed)?;
        attached += 1;
    }
    Ok(attached)
}

/// A pruned parameter: its index among the trainer's parameters, its keep-mask as a 0/1
/// device tensor, and as the bits a checkpoint stores.
pub struct ParamMask {
    pub index: usize,
    pub ones: Tensor,
    pub bits: TensorData,
}

/// A keep-mask as a stored tensor (U8 keep-bits).
pub fn mask_data(mask: &[bool]) -> TensorData {
    let bits = prune::mask_to_bits(mask);
    TensorData {
        shape: vec![bits.len()],
        data: bits.iter().map(|&b| b as f32).collect(),
        stored: Stored::U8,
    }
}

/// The keep-masks stored under `prefix` for `named` parameters (a pruned model fine-tuned
/// with `--init`, or resumed, keeps its zeros).
pub fn load_masks(
    ckpt: &Checkpoint,
    prefix: &str,
    named: &[(String, Tensor)],
    origin: &str,
) -> Result<Vec<ParamMask>> {
    let mut masks = Vec::new();
    for (index, (name, t)) in named.iter().enumerate() {
        if let Some(mask) = stored_mask(ckpt, &format!("{prefix}{name}"), t.numel(), origin)? {
            let ones: Vec<f32> = mask.iter().map(|&keep| keep as u8 as f32).collect();
            masks.push(ParamMask {
                index,
                ones: Tensor::from_f32(t.gpu(), t.shape(), &ones)?,
                bits: mask_data(&mask),
            });
        }
    }
    Ok(masks)
}

/// Zeroes the pruned elements of `params` again (after an optimiser step moved them).
pub fn apply_masks(params: &[(String, Tensor)], masks: &[ParamMask]) -> Result<()> {
    let _g = crate::no_grad();
    for m in masks {
        let t = &params[m.index].1;
        t.copy_from(&t.detach().mul(&m.ones)?)?;
    }
    Ok(())
}

/// [`compress`] with the model the checkpoint's metadata describes (built on `gpu` for its
/// layer walk: which tensors are conv and linear weights, and where in the U they work).
pub fn compress_checkpoint(
    gpu: &Gpu,
    ckpt: &Checkpoint,
    origin: &str,
    plan: &CompressPlan,
) -> Result<(Checkpoint, CompressSummary)> {
    let state = crate::train::saved_state(ckpt, origin)?;
    let net = ckpt.build_within_size(origin, || state.model.build(gpu, 0))?;
    let weights = net.walk(1).weights;
    compress(ckpt, origin, &weights, state.model.image_shape()[1], plan)
}

/// The length of `bytes` gzipped at the default level (how the umass report measured sizes).
pub fn gzipped_len(bytes: &[u8]) -> u64 {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes)
        .and_then(|_| gz.finish())
        .map_or(0, |out| out.len() as u64)
}
