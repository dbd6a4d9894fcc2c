//! `MlpNet`: a residual MLP denoiser on flattened pixels, all matmuls (the speed-run model:
//! on a CPU device it sees ~40x more images per second than the MNIST U-Net).
//!
//! Layout (the `mnist-mlp` preset, 784 -> 512 wide, 2 blocks, 10 classes, 2,424,096 parameters):
//! - `time.0` Linear(sinusoid, temb) -> SiLU -> `time.1` Linear(temb, temb) = e
//!   (class-conditional: + the label's row of `class_embed`);
//! - `input` Linear(C*H*W, hidden) on the flattened image = h;
//! - block i: h += `blocks.i.fc2`(SiLU(`blocks.i.fc1`(SiLU(`blocks.i.norm`(h))) + `blocks.i.temb`(e)));
//! - `out.fc`(SiLU(`out.norm`(h))) + `gate`(e) * x, reshaped to [N, C, H, W]: a per-pixel,
//!   per-time gate on the input, because every objective is close to +-x_t at the ends of the
//!   process (eps at high noise, x0 at low noise) and an MLP learns that identity slowly;
//! - with `conv_head` C (not in the preset): y + `head.conv2`(SiLU(`head.conv1`(y) +
//!   `head.temb`(e))), two 3x3 convs 1 -> C -> 1 over that output y, `head.conv2` starting at 0
//!   (the head starts as the identity): neighbouring pixels, which the MLP predicts one by one.

use super::embedding::{timestep_embedding, ClassEmbedding, TimeSinusoid};
use super::limits::{check_sizes, MAX_BLOCKS, MAX_IMAGE_SIDE, MAX_WIDTH};
use super::summary::LayerWalk;
use super::DiffusionNet;
use crate::nn::{Conv2d, GroupNorm, Linear};
use crate::ops::random::Rng;
use crate::{DType, Error, Gpu, Result, Tensor};
use serde::{Deserialize, Serialize};

/// The MLP denoiser's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MlpNetConfig {
    /// Square image side.
    pub image_size: usize,
    pub in_channels: usize,
    /// Width of every hidden layer.
    pub hidden: usize,
    /// Residual blocks (each two hidden Linear layers).
    pub blocks: usize,
    /// GroupNorm groups of the hidden features.
    pub norm_groups: usize,
    /// Sinusoidal time features (even), then a Linear to `time_embed_dim`, SiLU, Linear.
    pub time_sinusoid_dim: usize,
    pub time_embed_dim: usize,
    /// Class-conditional with this many classes (plus the null class for guidance), the
    /// class row added to e.
    #[serde(default)]
    pub classes: Option<usize>,
    /// Channels of the 3x3 conv head over the output (see the module doc); None: no head.
    #[serde(default)]
    pub conv_head: Option<usize>,
}

impl MlpNetConfig {
    /// The MNIST speed-run model, class-conditional (see the module doc).
    pub fn mnist() -> MlpNetConfig {
        MlpNetConfig {
            image_size: 28,
            in_channels: 1,
            hidden: 512,
            blocks: 2,
            norm_groups: 8,
            time_sinusoid_dim: 128,
            time_embed_dim: 256,
            classes: Some(10),
            conv_head: None,
        }
    }

    /// Values per image: C * H * W.
    pub fn pixels(&self) -> usize {
        self.in_channels * self.image_size * self.image_size
    }

    /// Errors naming the first setting that cannot be built.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("MLP config: {msg}")));
        check_sizes(
            "MLP config",
            &[
                ("image_size", self.image_size, MAX_IMAGE_SIDE),
                ("in_channels", self.in_channels, MAX_WIDTH),
                ("hidden", self.hidden, MAX_WIDTH),
                ("blocks", self.blocks, MAX_BLOCKS),
                ("time_sinusoid_dim", self.time_sinusoid_dim, MAX_WIDTH),
                ("time_embed_dim", self.time_embed_dim, MAX_WIDTH),
                ("classes", self.classes.unwrap_or(0), MAX_WIDTH),
                ("conv_head", self.conv_head.unwrap_or(0), MAX_WIDTH),
            ],
        )?;
        if self.pixels() == 0 || self.hidden == 0 || self.time_embed_dim == 0 {
            return bad("image_size, in_channels, hidden and time_embed_dim must be at least 1".into());
        }
        if self.conv_head == Some(0) {
            return bad("conv_head must be at least 1 channel (leave it out for no head)".into());
        }
        if self.classes == Some(0) {
            return bad("classes must be at least 1 (leave it out for an unconditional model)".into());
        }
        if self.norm_groups == 0 || self.hidden % self.norm_groups != 0 {
            return bad(format!(
                "norm_groups {} must divide hidden {}",
                self.norm_groups, self.hidden
            ));
        }
        if self.time_sinusoid_dim < 4 || self.time_sinusoid_dim % 2 != 0 {
            return bad(format!(
                "time_sinusoid_dim {} must be even and at least 4",
                self.time_sinusoid_dim
            ));
        }
        Ok(())
    }
}

/// One residual block (see the module doc).
struct Block {
    norm: GroupNorm,
    fc1: Linear,
    temb: Linear,
    fc2: Linear,
}

/// The conv head over the output (see the module doc).
struct ConvHead {
    conv1: Conv2d,
    temb: Linear,
    conv2: Conv2d,
}

impl ConvHead {
    /// `channels` wide; `conv2` starts at zero, so the head starts as the identity.
    fn new(
        gpu: &Gpu,
        rng: &mut Rng,
        image_channels: usize,
        channels: usize,
        temb: usize,
    ) -> Result<ConvHead> {
        let conv2 = Conv2d::new(gpu, rng, channels, image_channels, 3, 1, 1, 1)?;
        let zero = Tensor::zeros(gpu, conv2.weight.shape(), DType::F32)?.requires_grad();
        Ok(ConvHead {
            conv1: Conv2d::new(gpu, rng, image_channels, channels, 3, 1, 1, 1)?,
            temb: Linear::new(gpu, rng, temb, channels)?,
            conv2: Conv2d {
                weight: zero.into(),
                ..conv2
            },
        })
    }

    /// `y` [N, C, H, W] and the time embedding `e` -> y refined.
    fn forward(&self, y: &Tensor, e: &Tensor) -> Result<Tensor> {
        let h = self
            .conv1
            .forward_plus(y, Some(&self.temb.forward(e)?), None)?
            .silu()?;
        self.conv2.forward_plus(&h, None, Some(y))
    }
}

/// The residual MLP denoiser (see the module doc).
pub struct MlpNet {
    config: MlpNetConfig,
    time: [Linear; 2],
    class_embed: Option<ClassEmbedding>,
    input: Linear,
    blocks: Vec<Block>,
    out_norm: GroupNorm,
    out: Linear,
    gate: Linear,
    head: Option<ConvHead>,
}

impl MlpNet {
    pub fn new(gpu: &Gpu, config: &MlpNetConfig, seed: u64) -> Result<MlpNet> {
        config.validate()?;
        let c = config;
        let rng = &mut Rng::new(seed);
        let (hidden, temb) = (c.hidden, c.time_embed_dim);
        let blocks = (0..c.blocks)
            .map(|_| {
                Ok(Block {
                    norm: GroupNorm::new(gpu, c.norm_groups, hidden)?,
                    fc1: Linear::new(gpu, rng, hidden, hidden)?,
                    temb: Linear::new(gpu, rng, temb, hidden)?,
                    fc2: Linear::new(gpu, rng, hidden, hidden)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(MlpNet {
            config: c.clone(),
            time: [
                Linear::new(gpu, rng, c.time_sinusoid_dim, temb)?,
                Linear::new(gpu, rng, temb, temb)?,
            ],
            class_embed: c
                .classes
                .map(|k| ClassEmbedding::new(gpu, rng, k, temb))
                .transpose()?,
            input: Linear::new(gpu, rng, c.pixels(), hidden)?,
            blocks,
            out_norm: GroupNorm::new(gpu, c.norm_groups, hidden)?,
            out: Linear::new(gpu, rng, hidden, c.pixels())?,
            gate: Linear::new(gpu, rng, temb, c.pixels())?,
            head: c
                .conv_head
                .map(|channels| ConvHead::new(gpu, rng, c.in_channels, channels, temb))
                .transpose()?,
        })
    }

    pub fn config(&self) -> &MlpNetConfig {
        &self.config
    }
}

impl DiffusionNet for MlpNet {
    fn forward(&self, x: &Tensor, t: &[f32], labels: Option<&[u32]>, skip: usize) -> Result<Tensor> {
        let c = &self.config;
        let s = x.shape().to_vec();
        let n = s.first().copied().unwrap_or(0);
        if s.len() != 4 || s[1..] != [c.in_channels, c.image_size, c.image_size] || t.len() != n {
            return Err(Error::shape(
                "MlpNet",
                format!(
                    "input {s:?} with {} times must be [N, {}, {}, {}] with N times",
                    t.len(),
                    c.in_channels,
                    c.image_size,
                    c.image_size
                ),
            ));
        }
        if skip != 0 {
            return Err(Error::Config("the MLP denoiser cannot skip levels".into()));
        }
        if labels.is_some() && self.class_embed.is_none() {
            return Err(Error::Config(
                "labels given to an MLP without a class embedding (set `classes` in its config)".into(),
            ));
        }
        let dtype = x.dtype();
        let dim = c.time_sinusoid_dim;
        let sinusoid = Tensor::from_slice(
            x.gpu(),
            &[n, dim],
            &timestep_embedding(t, dim, TimeSinusoid::default()),
            dtype,
        )?;
        let e = self.time[1].forward(&self.time[0].forward(&sinusoid)?.silu()?)?;
        let e = match &self.class_embed {
            Some(table) => table.add_to(&e, labels)?,
            None => e,
        };
        let flat = x.reshape(&[n, c.pixels()])?;
        let mut h = self.input.forward(&flat)?;
        for block in &self.blocks {
            let a = block.fc1.forward(&block.norm.forward_silu(&h)?)?;
            let a = a.add(&block.temb.forward(&e)?)?.silu()?;
            h = h.add(&block.fc2.forward(&a)?)?;
        }
        let y = self
            .out
            .forward(&self.out_norm.forward_silu(&h)?)?
            .add(&self.gate.forward(&e)?.mul(&flat)?)?
            .reshape(&s)?;
        match &self.head {
            Some(head) => head.forward(&y, &e),
            None => Ok(y),
        }
    }

    fn walk(&self, batch: usize) -> LayerWalk {
        let c = &self.config;
        let mut walk = LayerWalk::default();
        let e = walk.linear("time.0", &self.time[0], &[batch, c.time_sinusoid_dim]);
        let e = walk.linear("time.1", &self.time[1], &e);
        if let Some(table) = &self.class_embed {
            table.walk(&mut walk, "class_embed", &e);
        }
        let h = walk.linear("input", &self.input, &[batch, c.pixels()]);
        for (i, block) in self.blocks.iter().enumerate() {
            let name = format!("blocks.{i}");
            walk.block(&name, "ResidualMlpBlock".into(), &h);
            walk.norm(&format!("{name}.norm"), &block.norm, &h);
            walk.linear(&format!("{name}.fc1"), &block.fc1, &h);
            walk.linear(&format!("{name}.temb"), &block.temb, &e);
            walk.linear(&format!("{name}.fc2"), &block.fc2, &h);
        }
        walk.norm("out.norm", &self.out_norm, &h);
        walk.linear("out.fc", &self.out, &h);
        walk.linear("gate", &self.gate, &e);
        if let Some(head) = &self.head {
            let image = [batch, c.in_channels, c.image_size, c.image_size];
            let h = walk.conv("head.conv1", &head.conv1, &image);
            walk.linear("head.temb", &head.temb, &e);
            walk.conv("head.conv2", &head.conv2, &h);
        }
        walk
    }

    fn levels(&self) -> usize {
        1
    }
}
