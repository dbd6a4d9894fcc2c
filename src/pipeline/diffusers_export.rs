//! A wgdiff U-Net checkpoint in the Hugging Face diffusers layout: `UNet2DModel`'s config.json
//! and weights and a `DDPMScheduler`'s scheduler_config.json, or a refusal naming the feature
//! diffusers has no counterpart for. The inverse of [`super::diffusers::import`]: every tensor's
//! diffusers name is checked to import back to the same wgdiff tensor.

use super::diffusers::{target, transposed, Target};
use crate::checkpoint::{Checkpoint, Stored, TensorData};
use crate::diffusion::{BetaSchedule, Objective, Process};
use crate::models::{ModelConfig, SkipType, UNetConfig};
use crate::run_state::{sampling_export, saved_state};
use crate::{Error, Result};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

/// A model in the diffusers layout: the bytes of its three files.
pub struct DiffusersModel {
    /// config.json of the `UNet2DModel`.
    pub config: Vec<u8>,
    /// diffusion_pytorch_model.safetensors (F32).
    pub weights: Vec<u8>,
    /// scheduler_config.json of a `DDPMScheduler`.
    pub scheduler: Vec<u8>,
    /// Said to the user about the export (the null class of a guided model), if anything.
    pub notes: Vec<String>,
}

/// The sampling weights (EMA) of checkpoint `ckpt` as a diffusers `UNet2DModel` with its
/// scheduler; `origin` names it in errors. Refused: other models than the U-Net, processes
/// other than VP with linear, scaled-linear or cosine betas, compressed weights, and U-Net
/// features `UNet2DModel` lacks (each by name).
pub fn export(ckpt: &Checkpoint, origin: &str) -> Result<DiffusersModel> {
    let state = saved_state(ckpt, origin)?;
    let fail = |msg: String| Error::Checkpoint {
        path: origin.to_string(),
        msg,
    };
    let ModelConfig::UNet(unet) = &state.model else {
        return Err(fail(format!(
            "holds a {} model; diffusers' UNet2DModel holds U-Nets (the mnist, mnist-small and cifar10 presets, \
             imported models)",
            state.model.kind_name()
        )));
    };
    let sampling = sampling_export(ckpt, origin)?;
    if let Some((name, t)) = sampling.tensors.iter().find(|(_, t)| t.stored != Stored::F32) {
        return Err(fail(format!(
            "tensor {name} is stored as {:?} (a `wgdiff compress` checkpoint); export the float model it was \
             compressed from",
            t.stored
        )));
    }
    let mut notes = Vec::new();
    let mut config =
        unet_json(unet).map_err(|why| fail(format!("cannot be a diffusers UNet2DModel: {why}")))?;
    let mut tensors = BTreeMap::new();
    for (name, t) in &sampling.tensors {
        let Some(layer) = name.strip_prefix("ema.") else {
            return Err(fail(format!(
                "tensor {name} has no place in a diffusers UNet2DModel"
            )));
        };
        for (key, data) in placed(layer, t, unet).map_err(|why| fail(format!("tensor {name}: {why}")))? {
            tensors.insert(key, data);
        }
    }
    if let Some(classes) = unet.classes {
        let table = tensors
            .get("class_embedding.weight")
            .ok_or_else(|| fail("has no class table (ema.class_embed.weight) for its classes".into()))?;
        let (rows, dim) = match table.shape[..] {
            [rows, dim] => (rows, dim),
            _ => (0, 0),
        };
        if rows != classes + 1 {
            return Err(fail(format!(
                "its class table is {:?}, not [{}, dim] ({classes} classes and the null class)",
                table.shape,
                classes + 1
            )));
        }
        if table.data[classes * dim..].iter().all(|&v| v == 0.0) {
            // (an imported model's null row: diffusers' table has none)
            let mut data = table.data.clone();
            data.truncate(classes * dim);
            tensors.insert(
                "class_embedding.weight".into(),
                TensorData::f32(vec![classes, dim], data),
            );
        } else {
            config["num_class_embeds"] = json!(classes + 1);
            notes.push(format!(
                "class label {classes} is the null class (no label: classifier-free guidance's unconditional \
                 half), so the diffusers model has {} classes",
                classes + 1
            ));
        }
    }
    let scheduler = scheduler_json(&state.process)
        .map_err(|why| fail(format!("cannot be a diffusers scheduler: {why}")))?;
    let json_bytes = |v: &Value| serde_json::to_vec_pretty(v).map_err(|e| Error::Config(e.to_string()));
    Ok(DiffusersModel {
        config: json_bytes(&config)?,
        weights: safetensors_bytes(&tensors, origin)?,
        scheduler: json_bytes(&scheduler)?,
        notes,
    })
}

/// `value` (an f32 setting) as the JSON number it reads as (1e-4, not 9.999999747378752e-5).
fn number(value: f32) -> Value {
    json!(value.to_string().parse::<f64>().unwrap_or(value as f64))
}

/// The `UNet2DModel` config of `unet`, or which of its features diffusers lacks.
fn unet_json(unet: &UNetConfig) -> std::result::Result<Value, String> {
    let base = unet.base_channels;
    if unet.time_sinusoid_dim != base {
        return Err(format!(
            "its time sinusoid has {} features and its first level {base} channels; UNet2DModel's sinusoid is as \
             wide as block_out_channels[0]. A U-Net whose time_sinusoid_dim is its base_channels exports: every \
             wgdiff preset's since 2026-12-01 (train one with `wgdiff train --preset NAME`)",
            unet.time_sinusoid_dim
        ));
    }
    if unet.conv_groups != Default::default() {
        return Err(format!(
            "its convs are grouped ({:?}); UNet2DModel's are dense",
            unet.conv_groups
        ));
    }
    if let Some(factor) = unet.bottleneck {
        return Err(format!(
            "its ResBlocks are bottlenecked (factor {factor}); ResnetBlock2D has two 3x3 convs"
        ));
    }
    if unet.skip_type == SkipType::Interpolate {
        return Err(
            "the adaptive skip's interpolate path adds 1x1 convs UNet2DModel has no place for".into(),
        );
    }
    let levels = unet.levels();
    let attends: Vec<bool> = (0..levels).map(|level| unet.has_attention(level)).collect();
    // every attention block's head width: the levels with attention and the middle block
    let widths: Vec<usize> = (0..levels)
        .filter(|&level| attends[level] || level == levels - 1)
        .map(|level| unet.channels(level))
        .collect();
    let head_dim = match unet.head_dim {
        Some(dim) => json!(dim),
        None if unet.heads == 1 => Value::Null,
        None => {
            let dims: Vec<usize> = widths.iter().map(|c| c / unet.heads).collect();
            if dims.iter().any(|&d| d != dims[0]) {
                return Err(format!(
                    "its {} heads are {dims:?} channels wide in its attention blocks; UNet2DModel's attention_head_dim \
                     is one width for every block",
                    unet.heads
                ));
            }
            json!(dims[0])
        }
    };
    let kinds = |attn: &str, plain: &str, order: &mut dyn Iterator<Item = usize>| -> Vec<String> {
        order
            .map(|level| if attends[level] { attn } else { plain }.to_string())
            .collect()
    };
    Ok(json!({
        "_class_name": "UNet2DModel",
        "sample_size": unet.image_size,
        "in_channels": unet.in_channels,
        "out_channels": unet.out_channels,
        "center_input_sample": false,
        "time_embedding_type": "positional",
        "time_embedding_dim": unet.time_embed_dim,
        "flip_sin_to_cos": unet.time_sinusoid.flip_sin_to_cos,
        "freq_shift": number(unet.time_sinusoid.freq_shift),
        "down_block_types": kinds("AttnDownBlock2D", "DownBlock2D", &mut (0..levels)),
        "mid_block_type": "UNetMidBlock2D",
        "up_block_types": kinds("AttnUpBlock2D", "UpBlock2D", &mut (0..levels).rev()),
        "block_out_channels": (0..levels).map(|level| unet.channels(level)).collect::<Vec<_>>(),
        "layers_per_block": unet.res_blocks,
        "mid_block_scale_factor": 1,
        "downsample_padding": unet.downsample_padding,
        "downsample_type": "conv",
        "upsample_type": "conv",
        "dropout": number(unet.dropout),
        "act_fn": "silu",
        "attention_head_dim": head_dim,
        "norm_num_groups": unet.norm_groups,
        "norm_eps": number(unet.norm_eps),
        "resnet_time_scale_shift": "default",
        "add_attention": true,
        "num_class_embeds": unet.classes,
    }))
}

/// The `DDPMScheduler` config of `process`, or why diffusers has none.
fn scheduler_json(process: &Process) -> std::result::Result<Value, String> {
    let Process::Vp {
        schedule,
        steps,
        objective,
    } = process
    else {
        return Err(format!(
            "the {} process is not a DDPM (VP) process, the only kind DDPMScheduler runs",
            process.name()
        ));
    };
    let (betas, range) = match *schedule {
        BetaSchedule::Linear { beta_start, beta_end } => ("linear", Some((beta_start, beta_end))),
        BetaSchedule::ScaledLinear { beta_start, beta_end } => {
            ("scaled_linear", Some((beta_start, beta_end)))
        }
        BetaSchedule::Cosine { s: 0.008 } => ("squaredcos_cap_v2", None),
        other => {
            return Err(format!(
                "its betas ({other:?}) are none of linear, scaled_linear and squaredcos_cap_v2"
            ))
        }
    };
    let prediction = match objective {
        Objective::Eps => "epsilon",
        Objective::V => "v_prediction",
        Objective::X0 => "sample",
    };
    let mut config = json!({
        "_class_name": "DDPMScheduler",
        "num_train_timesteps": steps,
        "beta_schedule": betas,
        "prediction_type": prediction,
        "variance_type": "fixed_small",
        "clip_sample": true,
        "clip_sample_range": 1.0,
    });
    if let Some((start, end)) = range {
        config["beta_start"] = number(start);
        config["beta_end"] = number(end);
    }
    Ok(config)
}

/// The diffusers tensors wgdiff tensor `layer` (its name without `ema.`) becomes: one, or the
/// three parts of an attention block's stacked `qkv`.
fn placed(
    layer: &str,
    t: &TensorData,
    unet: &UNetConfig,
) -> std::result::Result<Vec<(String, TensorData)>, String> {
    let levels = unet.levels();
    let parts: Vec<&str> = layer.split('.').collect();
    let up_block = |level: &str| -> std::result::Result<usize, String> {
        level
            .parse::<usize>()
            .ok()
            .filter(|&l| l < levels)
            .map(|l| levels - 1 - l)
            .ok_or_else(|| format!("level {level} is not one of 0..{levels}"))
    };
    let resnet = |prefix: String, rest: &[&str]| -> Option<(String, bool)> {
        match rest {
            [layer @ ("norm1" | "conv1" | "norm2" | "conv2"), p] => {
                Some((format!("{prefix}.{layer}.{p}"), false))
            }
            ["time", p] => Some((format!("{prefix}.time_emb_proj.{p}"), *p == "weight")),
            ["skip", p] => Some((format!("{prefix}.conv_shortcut.{p}"), false)),
            _ => None,
        }
    };
    // an attention block's layers; `qkv` is split below
    let attention = |prefix: String, rest: &[&str]| -> Option<(String, bool)> {
        match rest {
            ["norm", p] => Some((format!("{prefix}.group_norm.{p}"), false)),
            ["qkv", p] => Some((format!("{prefix}.qkv.{p}"), false)),
            ["out", p] => Some((format!("{prefix}.to_out.0.{p}"), false)),
            _ => None,
        }
    };
    let (key, transpose) = match parts.as_slice() {
        ["time_embed", i @ ("0" | "1"), p] => {
            let linear = if *i == "0" { 1 } else { 2 };
            Some((format!("time_embedding.linear_{linear}.{p}"), *p == "weight"))
        }
        ["class_embed", "weight"] => Some(("class_embedding.weight".to_string(), false)),
        [layer @ ("conv_in" | "conv_out"), p] => Some((format!("{layer}.{p}"), false)),
        ["norm_out", p] => Some((format!("conv_norm_out.{p}"), false)),
        ["down", i, "res", j, rest @ ..] => resnet(format!("down_blocks.{i}.resnets.{j}"), rest),
        ["down", i, "attn", j, rest @ ..] => attention(format!("down_blocks.{i}.attentions.{j}"), rest),
        ["down", i, "downsample", p] => Some((format!("down_blocks.{i}.downsamplers.0.conv.{p}"), false)),
        ["mid", "res", j, rest @ ..] => resnet(format!("mid_block.resnets.{j}"), rest),
        ["mid", "attn", rest @ ..] => attention("mid_block.attentions.0".to_string(), rest),
        ["up", level, "res", j, rest @ ..] => {
            resnet(format!("up_blocks.{}.resnets.{j}", up_block(level)?), rest)
        }
        ["up", level, "attn", j, rest @ ..] => {
            attention(format!("up_blocks.{}.attentions.{j}", up_block(level)?), rest)
        }
        ["up", level, "upsample", p] => Some((
            format!("up_blocks.{}.upsamplers.0.conv.{p}", up_block(level)?),
            false,
        )),
        _ => None,
    }
    .ok_or_else(|| "no layer of a diffusers UNet2DModel corresponds to it".to_string())?;
    let out = match key.split_once(".qkv.") {
        Some((block, param)) => {
            if t.shape.first().is_none_or(|rows| rows % 3 != 0) {
                return Err(format!(
                    "stacked q, k and v must have 3n rows, not the shape {:?}",
                    t.shape
                ));
            }
            let third = t.data.len() / 3;
            let mut shape = t.shape.clone();
            shape[0] /= 3;
            ["to_q", "to_k", "to_v"]
                .iter()
                .enumerate()
                .map(|(part, name)| {
                    let data = t.data[part * third..(part + 1) * third].to_vec();
                    (
                        format!("{block}.{name}.{param}"),
                        TensorData::f32(shape.clone(), data),
                    )
                })
                .collect()
        }
        None if transpose => {
            let &[rows, cols] = t.shape.as_slice() else {
                return Err(format!("a Linear weight must be a matrix, not {:?}", t.shape));
            };
            vec![(
                key,
                TensorData::f32(vec![cols, rows], transposed(&t.data, rows, cols)),
            )]
        }
        None => vec![(key, t.clone())],
    };
    // (the import's map read backwards must give this tensor again)
    for (key, _) in &out {
        let back = match target(key, unet)? {
            Target::Tensor { name, .. } => name == layer,
            Target::Qkv { block, param, .. } => format!("{block}.qkv.{param}") == layer,
            Target::ClassTable => layer == "class_embed.weight",
        };
        if !back {
            return Err(format!("its diffusers name {key} imports as another tensor"));
        }
    }
    Ok(out)
}

/// The safetensors encoding of `tensors` (F32), with diffusers' `format: pt` metadata.
fn safetensors_bytes(tensors: &BTreeMap<String, TensorData>, origin: &str) -> Result<Vec<u8>> {
    let bytes: Vec<Vec<u8>> = tensors
        .values()
        .map(|t| bytemuck::cast_slice(&t.data).to_vec())
        .collect();
    let views = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, t), bytes)| {
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, t.shape.clone(), bytes)
                .map(|view| (name.clone(), view))
                .map_err(|e| Error::Checkpoint {
                    path: origin.to_string(),
                    msg: format!("tensor {name}: {e}"),
                })
        })
        .collect::<Result<Vec<_>>>()?;
    let meta = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize(views, Some(meta)).map_err(|e| Error::Checkpoint {
        path: origin.to_string(),
        msg: format!("safetensors encoding failed: {e}"),
    })
}
