//! Models in the Hugging Face diffusers layout: a `UNet2DModel` folder (config.json and
//! diffusion_pytorch_model.safetensors) with its scheduler's scheduler_config.json, read into a
//! wgdiff sampling checkpoint; every config key and tensor is mapped or refused by name.
//!
//! The U-Net maps onto wgdiff's DDPM U-Net layer for layer (DDPM's layout is diffusers'):
//! `down_blocks.i` = `down.i`, `up_blocks.k` = `up.{L-1-k}`, `resnets.j` = `res.j` (its
//! `time_emb_proj` = `time`, `conv_shortcut` = `skip`), `attentions.j` = `attn.j` (`to_q`,
//! `to_k`, `to_v` stacked into `qkv`, `to_out.0` = `out`; the older `query`/`key`/`value`/
//! `proj_attn` names too), `mid_block` = `mid`, `conv_norm_out` = `norm_out`, the time MLP
//! `time_embedding.linear_{1,2}` = `time_embed.{0,1}` (Linear weights transposed to
//! [in, out]), `class_embedding` = `class_embed` plus a zero row as the null class.
//! The scheduler config gives the process: betas (`linear`, `scaled_linear`,
//! `squaredcos_cap_v2`), `num_train_timesteps` and `prediction_type`; its sampling-grid keys
//! (`timestep_spacing`, `steps_offset`, `set_alpha_to_one`) are the sampler flags' business.

use crate::checkpoint::{Checkpoint, TensorData};
use crate::diffusion::{BetaSchedule, Objective, Process};
use crate::models::{AttentionAt, ModelConfig, TimeSinusoid, UNetConfig};
use crate::run_state::TrainState;
use crate::{Error, Result};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The U-Net's config file in a model folder.
pub const CONFIG_FILE: &str = "config.json";
/// The U-Net's weights in a model folder.
pub const WEIGHTS_FILE: &str = "diffusion_pytorch_model.safetensors";
/// The scheduler's config file (in the model folder, or in `../scheduler/` of a pipeline).
pub const SCHEDULER_FILE: &str = "scheduler_config.json";

/// The three files of a model, read; `origin` names the folder in errors.
pub struct DiffusersFiles<'a> {
    pub config: &'a [u8],
    pub weights: &'a [u8],
    pub scheduler: &'a [u8],
    pub origin: &'a str,
}

/// Whether `path` is a folder holding a diffusers model or pipeline (a U-Net's config.json, or
/// a pipeline's unet/ folder).
pub fn is_diffusers_folder(path: &Path) -> bool {
    path.is_dir() && (path.join(CONFIG_FILE).is_file() || path.join("unet").join(CONFIG_FILE).is_file())
}

/// Reads the diffusers model in folder `dir` (a `UNet2DModel` folder with its scheduler config
/// beside it or in `../scheduler/`, or a pipeline folder with `unet/` and `scheduler/`).
pub fn read_folder(dir: &Path) -> Result<Checkpoint> {
    let origin = dir.display().to_string();
    let fail = |msg: String| Error::Checkpoint {
        path: origin.clone(),
        msg,
    };
    let unet = if dir.join("unet").join(CONFIG_FILE).is_file() {
        dir.join("unet")
    } else {
        dir.to_path_buf()
    };
    if !unet.join(CONFIG_FILE).is_file() {
        return Err(fail(format!(
            "is a folder but not a diffusers model: wgdiff reads a UNet2DModel folder ({CONFIG_FILE} and \
             {WEIGHTS_FILE}) or a pipeline folder (unet/ and scheduler/)"
        )));
    }
    let weights = unet.join(WEIGHTS_FILE);
    if !weights.is_file() {
        let has = |name: &str| unet.join(name).is_file();
        let why = if has("diffusion_pytorch_model.bin") {
            "holds PyTorch pickle weights (diffusion_pytorch_model.bin), which wgdiff does not run; convert them with \
             diffusers: UNet2DModel.from_pretrained(DIR).save_pretrained(DIR, safe_serialization=True)"
                .to_string()
        } else if has("diffusion_pytorch_model.safetensors.index.json") {
            "holds sharded weights; save the model as one file with diffusers \
             (save_pretrained(DIR, max_shard_size=\"100GB\"))"
                .to_string()
        } else {
            format!("has no {WEIGHTS_FILE}")
        };
        return Err(Error::Checkpoint {
            path: unet.display().to_string(),
            msg: why,
        });
    }
    let scheduler = [
        unet.join(SCHEDULER_FILE),
        unet.join("..").join("scheduler").join(SCHEDULER_FILE),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .ok_or_else(|| {
        fail(format!(
            "has no {SCHEDULER_FILE} beside the U-Net or in ../scheduler/: the noise schedule the model was \
             trained with is part of the model; save the scheduler next to it \
             (DDPMScheduler.from_pretrained(...).save_pretrained(DIR))"
        ))
    })?;
    let read = |path: PathBuf| {
        crate::fsio::read_io(&path).map_err(|e| Error::Checkpoint {
            path: path.display().to_string(),
            msg: format!("cannot be read: {e}"),
        })
    };
    let (config, weights, scheduler) = (read(unet.join(CONFIG_FILE))?, read(weights)?, read(scheduler)?);
    import(&DiffusersFiles {
        config: &config,
        weights: &weights,
        scheduler: &scheduler,
        origin: &origin,
    })
}

/// The wgdiff sampling checkpoint (EMA weights and a training state of no steps) of a
/// diffusers `UNet2DModel` and its scheduler config.
pub fn import(files: &DiffusersFiles) -> Result<Checkpoint> {
    let mut config = Keys::parse(files.config, files.origin, CONFIG_FILE)?;
    let unet = unet_config(&mut config)?;
    let mut scheduler = Keys::parse(files.scheduler, files.origin, SCHEDULER_FILE)?;
    let process = process(&mut scheduler)?;
    let tensors = weights(files, &unet)?;
    let state = TrainState::imported(ModelConfig::UNet(unet), process);
    let mut meta = serde_json::to_value(&state).map_err(|e| Error::Config(e.to_string()))?;
    meta["imported_from"] = serde_json::json!({ "format": "diffusers", "folder": files.origin });
    Ok(Checkpoint { tensors, meta })
}

/// A config file's keys, each read at most once; what is left unread is refused.
struct Keys {
    map: Map<String, Value>,
    file: String,
}

impl Keys {
    fn parse(bytes: &[u8], origin: &str, name: &str) -> Result<Keys> {
        let file = format!("{origin}/{name}");
        let value: Value = serde_json::from_slice(bytes).map_err(|e| Error::Checkpoint {
            path: file.clone(),
            msg: format!("does not parse as JSON ({e})"),
        })?;
        let Value::Object(map) = value else {
            return Err(Error::Checkpoint {
                path: file,
                msg: "is not a JSON object".into(),
            });
        };
        Ok(Keys { map, file })
    }

    fn error(&self, msg: String) -> Error {
        Error::Checkpoint {
            path: self.file.clone(),
            msg,
        }
    }

    /// The value of `key`, None when absent or null.
    fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key).filter(|v| !v.is_null())
    }

    /// The value of `key` as a `T` (`kind` says which in the error), `default` when absent.
    fn value_or<T: DeserializeOwned>(&mut self, key: &str, default: T, kind: &str) -> Result<T> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|_| self.error(format!("`{key}` is {v}; it must be {kind}"))),
        }
    }

    fn usize_or(&mut self, key: &str, default: usize) -> Result<usize> {
        self.value_or(key, default, "a whole number")
    }

    fn f64_or(&mut self, key: &str, default: f64) -> Result<f64> {
        self.value_or(key, default, "a number")
    }

    fn bool_or(&mut self, key: &str, default: bool) -> Result<bool> {
        self.value_or(key, default, "true or false")
    }

    fn str_or(&mut self, key: &str, default: &str) -> Result<String> {
        self.value_or(key, default.to_string(), "a string")
    }

    fn list_or<T>(&mut self, key: &str, default: &[T], item: impl Fn(&Value) -> Option<T>) -> Result<Vec<T>>
    where
        T: Clone,
    {
        match self.take(key) {
            None => Ok(default.to_vec()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    item(v).ok_or_else(|| self.error(format!("`{key}` holds {v}, which does not fit it")))
                })
                .collect(),
            Some(v) => Err(self.error(format!("`{key}` is {v}; it must be a list"))),
        }
    }

    /// Errors unless `key` is absent or `wanted` (wgdiff runs only that value).
    fn require<T: PartialEq + std::fmt::Display>(
        &self,
        key: &str,
        value: T,
        wanted: T,
        why: &str,
    ) -> Result<()> {
        if value == wanted {
            Ok(())
        } else {
            Err(self.error(format!("`{key}` is {value}; wgdiff runs only {wanted} ({why})")))
        }
    }

    /// Errors naming the first key nothing read (ignoring `_`-prefixed bookkeeping and `ignored`).
    fn finish(&mut self, ignored: &[&str], what: &str) -> Result<()> {
        self.map
            .retain(|k, _| !k.starts_with('_') && !ignored.contains(&k.as_str()));
        match self.map.keys().next() {
            None => Ok(()),
            Some(key) => Err(self.error(format!(
                "has the key `{key}`, which wgdiff's {what} has no counterpart for; remove it only if its value \
                 is the diffusers default"
            ))),
        }
    }
}

/// The wgdiff U-Net of a `UNet2DModel` config (its defaults where a key is absent).
fn unet_config(keys: &mut Keys) -> Result<UNetConfig> {
    let class = keys.str_or("_class_name", "UNet2DModel")?;
    keys.require(
        "_class_name",
        class.as_str(),
        "UNet2DModel",
        "other model classes are not U-Nets of this layout",
    )?;
    let image_size = match keys.take("sample_size") {
        Some(Value::Number(n)) => n.as_u64().map(|n| n as usize),
        Some(Value::Array(hw)) if hw.len() == 2 && hw[0] == hw[1] => hw[0].as_u64().map(|n| n as usize),
        _ => None,
    }
    .ok_or_else(|| keys.error("`sample_size` must be one whole number (square images)".into()))?;
    let in_channels = keys.usize_or("in_channels", 3)?;
    let out_channels = keys.usize_or("out_channels", 3)?;
    let center = keys.bool_or("center_input_sample", false)?;
    keys.require(
        "center_input_sample",
        center,
        false,
        "inputs are images in [-1, 1]",
    )?;
    let embedding = keys.str_or("time_embedding_type", "positional")?;
    keys.require(
        "time_embedding_type",
        embedding.as_str(),
        "positional",
        "the sinusoidal embedding",
    )?;
    let flip_sin_to_cos = keys.bool_or("flip_sin_to_cos", true)?;
    let freq_shift = keys.f64_or("freq_shift", 0.0)? as f32;
    let widths = keys.list_or("block_out_channels", &[224, 448, 672, 896], |v| {
        v.as_u64().map(|n| n as usize)
    })?;
    let levels = widths.len();
    let down = keys.list_or(
        "down_block_types",
        &[
            "DownBlock2D",
            "AttnDownBlock2D",
            "AttnDownBlock2D",
            "AttnDownBlock2D",
        ]
        .map(String::from),
        |v| v.as_str().map(String::from),
    )?;
    let up = keys.list_or(
        "up_block_types",
        &["AttnUpBlock2D", "AttnUpBlock2D", "AttnUpBlock2D", "UpBlock2D"].map(String::from),
        |v| v.as_str().map(String::from),
    )?;
    let mid = keys.str_or("mid_block_type", "UNetMidBlock2D")?;
    keys.require(
        "mid_block_type",
        mid.as_str(),
        "UNetMidBlock2D",
        "its middle block",
    )?;
    if levels == 0 || down.len() != levels || up.len() != levels {
        return Err(keys.error(format!(
            "block_out_channels ({levels}), down_block_types ({}) and up_block_types ({}) must have one entry per \
             level",
            down.len(),
            up.len()
        )));
    }
    let mut attention = Vec::new();
    for (level, kind) in down.iter().enumerate() {
        let attends = match kind.as_str() {
            "DownBlock2D" => false,
            "AttnDownBlock2D" => true,
            other => {
                return Err(keys.error(format!(
                    "down_block_types[{level}] is `{other}`; wgdiff reads DownBlock2D and AttnDownBlock2D"
                )))
            }
        };
        let k = levels - 1 - level;
        let up_attends = match up[k].as_str() {
            "UpBlock2D" => false,
            "AttnUpBlock2D" => true,
            other => {
                return Err(keys.error(format!(
                    "up_block_types[{k}] is `{other}`; wgdiff reads UpBlock2D and AttnUpBlock2D"
                )))
            }
        };
        if attends != up_attends {
            return Err(keys.error(format!(
                "down_block_types[{level}] is `{kind}` but up_block_types[{k}] (the same resolution) is `{}`: \
                 wgdiff's U-Net has attention at the same levels of both paths",
                up[k]
            )));
        }
        if attends {
            attention.push(level);
        }
    }
    let base = widths[0];
    if base == 0 || widths.iter().any(|w| w % base != 0) {
        return Err(keys.error(format!(
            "block_out_channels {widths:?}: wgdiff's U-Net needs every level's width a multiple of the first"
        )));
    }
    let res_blocks = keys.usize_or("layers_per_block", 2)?;
    let scale = keys.f64_or("mid_block_scale_factor", 1.0)?;
    keys.require(
        "mid_block_scale_factor",
        scale,
        1.0,
        "residuals are added unscaled",
    )?;
    let downsample_padding = keys.usize_or("downsample_padding", 1)?;
    for key in ["downsample_type", "upsample_type"] {
        let kind = keys.str_or(key, "conv")?;
        keys.require(
            key,
            kind.as_str(),
            "conv",
            "strided and nearest-neighbour 3x3 convs",
        )?;
    }
    let dropout = keys.f64_or("dropout", 0.0)? as f32;
    let act = keys.str_or("act_fn", "silu")?;
    keys.require("act_fn", act.as_str(), "silu", "the activation of every block")?;
    let head_dim =
        match keys.take("attention_head_dim") {
            None => None,
            Some(v) => Some(v.as_u64().map(|n| n as usize).ok_or_else(|| {
                keys.error(format!("`attention_head_dim` is {v}; it must be a whole number"))
            })?),
        };
    let norm_groups = keys.usize_or("norm_num_groups", 32)?;
    let attn_groups = keys.usize_or("attn_norm_num_groups", norm_groups)?;
    keys.require(
        "attn_norm_num_groups",
        attn_groups,
        norm_groups,
        "one group count for every norm",
    )?;
    let norm_eps = keys.f64_or("norm_eps", 1e-5)? as f32;
    let shift = keys.str_or("resnet_time_scale_shift", "default")?;
    keys.require(
        "resnet_time_scale_shift",
        shift.as_str(),
        "default",
        "the time embedding is added",
    )?;
    let add_attention = keys.bool_or("add_attention", true)?;
    keys.require(
        "add_attention",
        add_attention,
        true,
        "the middle block has attention",
    )?;
    if let Some(kind) = keys.take("class_embed_type") {
        return Err(keys.error(format!(
            "`class_embed_type` is {kind}; wgdiff reads class labels as an embedding table (`num_class_embeds`)"
        )));
    }
    let classes =
        match keys.take("num_class_embeds") {
            None => None,
            Some(v) => Some(v.as_u64().map(|n| n as usize).ok_or_else(|| {
                keys.error(format!("`num_class_embeds` is {v}; it must be a whole number"))
            })?),
        };
    let time_embed_dim = keys.usize_or("time_embedding_dim", base * 4)?;
    // (only a `learned` time embedding reads it)
    keys.take("num_train_timesteps");
    let config = UNetConfig {
        image_size,
        in_channels,
        out_channels,
        base_channels: base,
        channel_mult: widths.iter().map(|w| w / base).collect(),
        res_blocks,
        attention: AttentionAt::Levels(attention),
        // (no `attention_head_dim`: one head as wide as the block)
        heads: 1,
        head_dim,
        norm_groups,
        norm_eps,
        time_sinusoid_dim: base,
        time_sinusoid: TimeSinusoid {
            flip_sin_to_cos,
            freq_shift,
        },
        time_embed_dim,
        downsample_padding,
        dropout,
        conv_groups: Default::default(),
        bottleneck: None,
        classes,
        skip_type: Default::default(),
    };
    config
        .validate()
        .map_err(|e| keys.error(format!("describes a U-Net wgdiff cannot build: {e}")))?;
    keys.finish(&[], "U-Net")?;
    Ok(config)
}

/// The process of a DDPM or DDIM scheduler config.
fn process(keys: &mut Keys) -> Result<Process> {
    let class = keys.str_or("_class_name", "DDPMScheduler")?;
    if !["DDPMScheduler", "DDIMScheduler"].contains(&class.as_str()) {
        return Err(keys.error(format!(
            "is a `{class}` config; wgdiff reads the process from DDPMScheduler and DDIMScheduler configs (save the \
             model's scheduler as one of them: DDPMScheduler.from_config(scheduler.config))"
        )));
    }
    let steps = keys.usize_or("num_train_timesteps", 1000)?;
    let start = keys.f64_or("beta_start", 0.0001)? as f32;
    let end = keys.f64_or("beta_end", 0.02)? as f32;
    let schedule = match keys.str_or("beta_schedule", "linear")?.as_str() {
        "linear" => BetaSchedule::Linear {
            beta_start: start,
            beta_end: end,
        },
        "scaled_linear" => BetaSchedule::ScaledLinear {
            beta_start: start,
            beta_end: end,
        },
        "squaredcos_cap_v2" => BetaSchedule::COSINE,
        other => {
            return Err(keys.error(format!(
                "`beta_schedule` is `{other}`; wgdiff reads linear, scaled_linear and squaredcos_cap_v2"
            )))
        }
    };
    if keys.take("trained_betas").is_some() {
        return Err(keys.error("`trained_betas` is set; wgdiff reads betas from `beta_schedule` only".into()));
    }
    let objective = match keys.str_or("prediction_type", "epsilon")?.as_str() {
        "epsilon" => Objective::Eps,
        "v_prediction" => Objective::V,
        "sample" => Objective::X0,
        other => {
            return Err(keys.error(format!(
                "`prediction_type` is `{other}`; wgdiff reads epsilon, v_prediction and sample"
            )))
        }
    };
    let clip = keys.bool_or("clip_sample", true)?;
    keys.require(
        "clip_sample",
        clip,
        true,
        "its samplers clamp the predicted x0 to [-1, 1]",
    )?;
    let range = keys.f64_or("clip_sample_range", 1.0)?;
    keys.require(
        "clip_sample_range",
        range,
        1.0,
        "its samplers clamp the predicted x0 to [-1, 1]",
    )?;
    let thresholding = keys.bool_or("thresholding", false)?;
    keys.require("thresholding", thresholding, false, "no dynamic thresholding")?;
    let zero_snr = keys.bool_or("rescale_betas_zero_snr", false)?;
    keys.require(
        "rescale_betas_zero_snr",
        zero_snr,
        false,
        "betas as the schedule gives them",
    )?;
    let variance = keys.str_or("variance_type", "fixed_small")?;
    if !["fixed_small", "fixed_small_log"].contains(&variance.as_str()) {
        return Err(keys.error(format!(
            "`variance_type` is `{variance}`; wgdiff's DDPM sampler uses the posterior variance (fixed_small)"
        )));
    }
    let process = Process::Vp {
        schedule,
        steps,
        objective,
    };
    process
        .marginals()
        .map_err(|e| keys.error(format!("describes a process wgdiff cannot run: {e}")))?;
    // (the sampling grid is chosen by wgdiff's sampler flags; thresholding's settings are unused when it is off)
    keys.finish(
        &[
            "timestep_spacing",
            "steps_offset",
            "set_alpha_to_one",
            "dynamic_thresholding_ratio",
            "sample_max_value",
        ],
        "process",
    )?;
    Ok(process)
}

/// Where a diffusers tensor goes in the wgdiff U-Net.
pub(super) enum Target {
    /// This wgdiff tensor, transposed when it is a Linear weight ([out, in] -> [in, out]).
    Tensor { name: String, transpose: bool },
    /// Part (0 = q, 1 = k, 2 = v) of the attention block `block`'s stacked `qkv` `param`.
    Qkv {
        block: String,
        part: usize,
        param: String,
    },
    /// The class table, which gets a zero null row.
    ClassTable,
}

/// The target of diffusers tensor `key` in a U-Net of `config`, or why it has none.
pub(super) fn target(key: &str, config: &UNetConfig) -> std::result::Result<Target, String> {
    let levels = config.levels();
    let parts: Vec<&str> = key.split('.').collect();
    let tensor = |name: String, transpose: bool| Ok(Target::Tensor { name, transpose });
    let index = |text: &str, below: usize, what: &str| -> std::result::Result<usize, String> {
        text.parse::<usize>()
            .ok()
            .filter(|&i| i < below)
            .ok_or_else(|| format!("its {what} index {text} is not one of this U-Net's 0..{below}"))
    };
    let resnet = |prefix: String, rest: &[&str]| match rest {
        [layer @ ("norm1" | "conv1" | "norm2" | "conv2"), p] => {
            tensor(format!("{prefix}.{layer}.{p}"), false)
        }
        ["time_emb_proj", p] => tensor(format!("{prefix}.time.{p}"), *p == "weight"),
        ["conv_shortcut", p] => tensor(format!("{prefix}.skip.{p}"), false),
        _ => Err("no ResnetBlock2D layer has this name".to_string()),
    };
    let attention = |block: String, rest: &[&str]| {
        let qkv = |part: usize, p: &str| {
            Ok(Target::Qkv {
                block: block.clone(),
                part,
                param: p.to_string(),
            })
        };
        match rest {
            ["group_norm", p] => tensor(format!("{block}.norm.{p}"), false),
            ["to_q" | "query", p] => qkv(0, p),
            ["to_k" | "key", p] => qkv(1, p),
            ["to_v" | "value", p] => qkv(2, p),
            ["to_out", "0", p] | ["proj_attn", p] => tensor(format!("{block}.out.{p}"), false),
            _ => Err("no attention layer has this name".to_string()),
        }
    };
    match parts.as_slice() {
        ["time_embedding", linear @ ("linear_1" | "linear_2"), p] => {
            let i = usize::from(*linear == "linear_2");
            tensor(format!("time_embed.{i}.{p}"), *p == "weight")
        }
        ["class_embedding", "weight"] if config.classes.is_some() => Ok(Target::ClassTable),
        [layer @ ("conv_in" | "conv_out"), p] => tensor(format!("{layer}.{p}"), false),
        ["conv_norm_out", p] => tensor(format!("norm_out.{p}"), false),
        ["down_blocks", i, "resnets", j, rest @ ..] => {
            let i = index(i, levels, "block")?;
            let j = index(j, config.res_blocks, "resnet")?;
            resnet(format!("down.{i}.res.{j}"), rest)
        }
        ["down_blocks", i, "attentions", j, rest @ ..] => {
            let i = index(i, levels, "block")?;
            let j = index(j, config.res_blocks, "attention")?;
            if !config.has_attention(i) {
                return Err(format!("down block {i} has no attention"));
            }
            attention(format!("down.{i}.attn.{j}"), rest)
        }
        ["down_blocks", i, "downsamplers", "0", "conv", p] => {
            let i = index(i, levels - 1, "downsampling block")?;
            tensor(format!("down.{i}.downsample.{p}"), false)
        }
        ["mid_block", "resnets", j, rest @ ..] => {
            let j = index(j, 2, "middle resnet")?;
            resnet(format!("mid.res.{j}"), rest)
        }
        ["mid_block", "attentions", "0", rest @ ..] => attention("mid.attn".to_string(), rest),
        ["up_blocks", k, "resnets", j, rest @ ..] => {
            let level = levels - 1 - index(k, levels, "block")?;
            let j = index(j, config.res_blocks + 1, "resnet")?;
            resnet(format!("up.{level}.res.{j}"), rest)
        }
        ["up_blocks", k, "attentions", j, rest @ ..] => {
            let level = levels - 1 - index(k, levels, "block")?;
            let j = index(j, config.res_blocks + 1, "attention")?;
            if !config.has_attention(level) {
                return Err(format!("up block {k} has no attention"));
            }
            attention(format!("up.{level}.attn.{j}"), rest)
        }
        ["up_blocks", k, "upsamplers", "0", "conv", p] => {
            let level = levels - 1 - index(k, levels - 1, "upsampling block")?;
            tensor(format!("up.{level}.upsample.{p}"), false)
        }
        _ => Err("no layer of a UNet2DModel of this config has this name".to_string()),
    }
}

/// The U-Net's tensors under wgdiff's names (`ema.` + the layer walk's), as f32.
fn weights(files: &DiffusersFiles, config: &UNetConfig) -> Result<BTreeMap<String, TensorData>> {
    let path = format!("{}/{WEIGHTS_FILE}", files.origin);
    let fail = |msg: String| Error::Checkpoint {
        path: path.clone(),
        msg,
    };
    let file = safetensors::SafeTensors::deserialize(files.weights).map_err(|e| {
        fail(format!(
            "not a valid safetensors file ({e}); it is truncated or corrupt"
        ))
    })?;
    let mut tensors = BTreeMap::new();
    let mut qkv: BTreeMap<(String, String), [Option<TensorData>; 3]> = BTreeMap::new();
    for (key, view) in file.tensors() {
        let data: Vec<f32> = match view.dtype() {
            safetensors::Dtype::F32 => bytemuck::pod_collect_to_vec(view.data()),
            safetensors::Dtype::F16 => bytemuck::pod_collect_to_vec::<u8, half::f16>(view.data())
                .into_iter()
                .map(f32::from)
                .collect(),
            safetensors::Dtype::BF16 => bytemuck::pod_collect_to_vec::<u8, half::bf16>(view.data())
                .into_iter()
                .map(f32::from)
                .collect(),
            other => {
                return Err(fail(format!(
                    "tensor {key} has dtype {other:?}; wgdiff reads F32, F16 and BF16"
                )))
            }
        };
        let shape = view.shape().to_vec();
        let target = target(&key, config).map_err(|why| fail(format!("tensor {key}: {why}")))?;
        match target {
            Target::Tensor { name, transpose } => {
                let data = match (transpose, shape.as_slice()) {
                    (true, &[rows, cols]) => transposed(&data, rows, cols),
                    (true, _) => {
                        return Err(fail(format!("tensor {key} {shape:?} must be a [out, in] matrix")))
                    }
                    (false, _) => data,
                };
                let shape = if transpose {
                    vec![shape[1], shape[0]]
                } else {
                    shape
                };
                tensors.insert(format!("ema.{name}"), TensorData::f32(shape, data));
            }
            Target::Qkv { block, part, param } => {
                qkv.entry((block, param)).or_default()[part] = Some(TensorData::f32(shape, data));
            }
            Target::ClassTable => {
                let [rows, dim] = shape[..] else {
                    return Err(fail(format!(
                        "tensor {key} {shape:?} must be a [classes, dim] table"
                    )));
                };
                let mut data = data;
                // (the null class: no class embedding added, where no label is given)
                data.resize((rows + 1) * dim, 0.0);
                tensors.insert(
                    "ema.class_embed.weight".into(),
                    TensorData::f32(vec![rows + 1, dim], data),
                );
            }
        }
    }
    for ((block, param), parts) in qkv {
        let [Some(q), Some(k), Some(v)] = parts else {
            return Err(fail(format!(
                "attention {block} lacks one of its query, key and value {param}s (to_q, to_k, to_v)"
            )));
        };
        if q.shape != k.shape || q.shape != v.shape {
            return Err(fail(format!(
                "attention {block}'s query, key and value {param}s differ in shape ({:?}, {:?}, {:?})",
                q.shape, k.shape, v.shape
            )));
        }
        let mut shape = q.shape.clone();
        shape[0] *= 3;
        let data = [q.data, k.data, v.data].concat();
        tensors.insert(format!("ema.{block}.qkv.{param}"), TensorData::f32(shape, data));
    }
    Ok(tensors)
}

/// Row-major [cols, rows] of row-major [rows, cols] `data`.
pub(super) fn transposed(data: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..cols)
        .flat_map(|c| (0..rows).map(move |r| data[r * cols + c]))
        .collect()
}
