//! `wgdiff compress`'s library half: unstructured pruning and int8/int4 quantisation of a
//! checkpoint's conv and linear weights, and packing the stored integer weights for the kernels.
//!
//! A compressed checkpoint is a sampling export (`ema.*`, `buffer.*`) whose weights may be in
//! the compressed forms of `checkpoint::compressed`. Its metadata holds the training state it
//! was compressed from plus a `compression` record.

pub mod prune;
pub mod qat;

pub use prune::{PruneMethod, PruneScope};

use crate::checkpoint::compressed::WeightBits;
use crate::checkpoint::compressed::{is_compressed, mask_to_bits, pack_int4, quantize, stored_mask};
use crate::checkpoint::{Checkpoint, Stored, TensorData};
use crate::models::summary::WeightInfo;
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
    let mut out = crate::run_state::sampling_export(ckpt, origin)?;
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
        let q = quantize(&t.data, &t.shape, axis, qp.bits);
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
            WeightBits::Int8 => TensorData::integer(
                t.shape.clone(),
                Stored::I8,
                bytemuck::cast_slice::<i8, u8>(&q.values).to_vec(),
            ),
            WeightBits::Int4 => {
                let bytes = pack_int4(&q.values);
                TensorData::integer(vec![bytes.len()], Stored::U8, bytes)
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

/// A pruned parameter: its index among the trainer's parameters, its keep-mask as a 0/1
/// device tensor, and as the bits a checkpoint stores.
pub struct ParamMask {
    pub index: usize,
    pub ones: Tensor,
    pub bits: TensorData,
}

/// A keep-mask as a stored tensor (U8 keep-bits).
pub fn mask_data(mask: &[bool]) -> TensorData {
    let bits = mask_to_bits(mask);
    TensorData::integer(vec![bits.len()], Stored::U8, bits)
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
    let state = crate::run_state::saved_state(ckpt, origin)?;
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
