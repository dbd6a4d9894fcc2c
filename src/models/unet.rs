//! The DDPM U-Net (Ho et al.) with optional dropout, grouped/bottlenecked convs, class
//! embedding, and adaptive level skipping (Giladi et al.): `skip = k` drops the k deepest levels.
//!
//! Layout (L levels, level i at resolution S / 2^i with C_i = base * mult[i] channels; the
//! `mnist` preset, L = 3 at 28, 14, 7 with C = 32, 64, 64, has 2,238,337 parameters):
//! - time: sinusoid(t) [time_sinusoid_dim] -> `time_embed.0` Linear -> SiLU ->
//!   `time_embed.1` Linear = temb; class-conditional: + one_hot(label) @ `class_embed`
//!   ([classes + 1, temb], last row the null class, used for every image when no labels are given).
//! - `conv_in` 3x3 in -> C_0; the skip stack hs = [its output].
//! - `down.i.res.j` (j < res_blocks): ResBlock -> C_i (GroupNorm -> SiLU -> 3x3 conv, + Linear of
//!   SiLU(temb), GroupNorm -> SiLU -> dropout -> 3x3 conv, + input or its 1x1 conv), followed
//!   by `down.i.attn.j` at attention levels; each output pushed on hs. Every level but the
//!   last ends in `down.i.downsample`, a 3x3 stride-2 conv (padding 1; with
//!   `downsample_padding` 0, no padding after one zero row and column on the bottom and right),
//!   also pushed. Attention blocks have `heads` heads, or C / `head_dim` when that is set; every
//!   GroupNorm has epsilon `norm_eps`; the sinusoid's layout is `time_sinusoid` (a diffusers
//!   `UNet2DModel` is this network with those settings: `pipeline::diffusers`).
//! - `mid`: `mid.res.0`, `mid.attn`, `mid.res.1` at the lowest resolution.
//! - `up.i.res.j` (levels from the deepest up, j <= res_blocks): ResBlock on concat(h, pop(hs))
//!   -> C_i, then `up.i.attn.j` at attention levels; every level but the top ends in
//!   `up.i.upsample`: nearest 2x then a 3x3 conv (C_i -> C_i) at the new resolution.
//! - `norm_out` GroupNorm -> SiLU -> `conv_out` 3x3 C_0 -> out.
//!
//! Skipping k levels (0 <= k < L) runs levels 0..L-k only: no ResBlock, attention, down- or
//! upsample of a skipped level, and no middle block, is dispatched; the last active level's
//! downsample is skipped too (it only feeds the skipped part). The first active up level
//! (L-k-1) then gets, in place of the upsampled deeper output [N, C_{L-k}, S_{L-k-1}], by
//! `SkipType`: zeros; the top of hs (that level's last contracting output) repeated along
//! channels; or `interp.{L-k-1}`: that tensor resized bicubically to the middle resolution,
//! `interp.i.into` (1x1 conv C_i -> C_{L-1}), the middle block, `interp.i.out` (1x1 conv
//! C_{L-1} -> C_{i+1}), resized bicubically back (only built for `interpolate`).
//!
//! Deep-feature caching (`forward_deep`): a pass skipping fewer than d levels can hand back the
//! tensor entering up level L-d-1 (the one skipping d levels replaces); a later pass skipping
//! d levels takes it in place of the skip type's substitute.

use super::embedding::{timestep_embedding, ClassEmbedding};
use super::summary::LayerWalk;
use super::unet_config::{SkipType, UNetConfig};
use super::{DeepFeatures, DiffusionNet};
use crate::nn::{AttentionBlock, Conv2d, GroupNorm, Linear, ResBlock, ResBlockOptions};
use crate::ops::random::Rng;
use crate::{DType, Error, Gpu, Result, Tensor};
use std::sync::Mutex;

/// A ResBlock and, at attention levels, the attention block after it.
struct Stage {
    res: ResBlock,
    attn: Option<AttentionBlock>,
}

impl Stage {
    fn forward(&self, x: &Tensor, temb: &Tensor, rng: Option<&mut Rng>) -> Result<Tensor> {
        let h = self.res.forward_with(x, temb, rng)?;
        match &self.attn {
            Some(attn) => attn.forward(&h),
            None => Ok(h),
        }
    }

    fn walk(
        &self,
        walk: &mut LayerWalk,
        name: &str,
        j: usize,
        input: &[usize],
        temb: &[usize],
    ) -> Vec<usize> {
        let h = walk.resblock(&format!("{name}.res.{j}"), &self.res, input, temb);
        match &self.attn {
            Some(attn) => walk.attention(&format!("{name}.attn.{j}"), attn, &h),
            None => h,
        }
    }
}

/// One resolution level of the contracting path.
struct DownLevel {
    stages: Vec<Stage>,
    downsample: Option<Conv2d>,
}

/// One resolution level of the expanding path.
struct UpLevel {
    stages: Vec<Stage>,
    upsample: Option<Conv2d>,
}

/// ResBlock, attention, ResBlock at the lowest resolution.
struct Middle {
    res0: ResBlock,
    attn: AttentionBlock,
    res1: ResBlock,
}

impl Middle {
    fn forward(&self, x: &Tensor, temb: &Tensor, mut rng: Option<&mut Rng>) -> Result<Tensor> {
        let h = self.res0.forward_with(x, temb, rng.as_deref_mut())?;
        let h = self.attn.forward(&h)?;
        self.res1.forward_with(&h, temb, rng)
    }
}

/// The `interpolate` skip path of one level: into the middle block and back out.
struct InterpPath {
    into: Conv2d,
    out: Conv2d,
}

/// The DDPM U-Net (see the module doc for the layout and skipping).
pub struct UNet {
    config: UNetConfig,
    time_embed: [Linear; 2],
    class_embed: Option<ClassEmbedding>,
    conv_in: Conv2d,
    down: Vec<DownLevel>,
    mid: Middle,
    up: Vec<UpLevel>,
    interp: Vec<InterpPath>,
    norm_out: GroupNorm,
    conv_out: Conv2d,
    training: bool,
    dropout_rng: Mutex<Rng>,
}

impl UNet {
    /// Builds the network with weights drawn from `seed` (dropout masks from `seed + 1`).
    pub fn new(gpu: &Gpu, config: &UNetConfig, seed: u64) -> Result<UNet> {
        config.validate()?;
        let c = config;
        let rng = &mut Rng::new(seed);
        let levels = c.levels();
        let temb = c.time_embed_dim;
        let opts = ResBlockOptions {
            conv_groups: c.conv_groups,
            bottleneck: c.bottleneck,
            dropout: c.dropout,
        };
        let conv3 = |rng: &mut Rng, cin: usize, cout: usize, stride: usize| {
            // (a downsampling conv without padding sees its input padded on the bottom and right)
            let padding = if stride == 2 { c.downsample_padding } else { 1 };
            Conv2d::new(
                gpu,
                rng,
                cin,
                cout,
                3,
                stride,
                padding,
                c.conv_groups.resolve(cin, cout),
            )
        };
        let resblock = |rng: &mut Rng, cin: usize, cout: usize| {
            Ok::<_, Error>(
                ResBlock::with_options(gpu, rng, cin, cout, temb, c.norm_groups, opts)?
                    .with_norm_eps(c.norm_eps),
            )
        };
        let attention = |rng: &mut Rng, channels: usize| {
            Ok::<_, Error>(
                AttentionBlock::new(gpu, rng, channels, c.heads_at(channels), c.norm_groups)?
                    .with_norm_eps(c.norm_eps),
            )
        };
        let stage = |rng: &mut Rng, cin: usize, level: usize| -> Result<Stage> {
            let cout = c.channels(level);
            Ok(Stage {
                res: resblock(rng, cin, cout)?,
                attn: c.has_attention(level).then(|| attention(rng, cout)).transpose()?,
            })
        };
        let time_embed = [
            Linear::new(gpu, rng, c.time_sinusoid_dim, temb)?,
            Linear::new(gpu, rng, temb, temb)?,
        ];
        let class_embed = c
            .classes
            .map(|k| ClassEmbedding::new(gpu, rng, k, temb))
            .transpose()?;
        let conv_in = conv3(rng, c.in_channels, c.channels(0), 1)?;
        let mut skips = vec![c.channels(0)];
        let mut h = c.channels(0);
        let mut down = Vec::with_capacity(levels);
        for level in 0..levels {
            let mut stages = Vec::with_capacity(c.res_blocks);
            for _ in 0..c.res_blocks {
                stages.push(stage(rng, h, level)?);
                h = c.channels(level);
                skips.push(h);
            }
            let downsample = (level + 1 < levels)
                .then(|| conv3(rng, c.channels(level), c.channels(level), 2))
                .transpose()?;
            if downsample.is_some() {
                skips.push(c.channels(level));
            }
            down.push(DownLevel { stages, downsample });
        }
        let deepest = c.channels(levels - 1);
        let mid = Middle {
            res0: resblock(rng, deepest, deepest)?,
            attn: attention(rng, deepest)?,
            res1: resblock(rng, deepest, deepest)?,
        };
        let mut up_rev = Vec::with_capacity(levels);
        for level in (0..levels).rev() {
            let mut stages = Vec::with_capacity(c.res_blocks + 1);
            for _ in 0..=c.res_blocks {
                let skip = skips.pop().unwrap_or(0);
                stages.push(stage(rng, h + skip, level)?);
                h = c.channels(level);
            }
            let upsample = (level > 0).then(|| conv3(rng, h, h, 1)).transpose()?;
            up_rev.push(UpLevel { stages, upsample });
        }
        let up = up_rev.into_iter().rev().collect();
        let interp = match c.skip_type {
            SkipType::Interpolate => (0..levels - 1)
                .map(|level| {
                    Ok(InterpPath {
                        into: Conv2d::new(gpu, rng, c.channels(level), deepest, 1, 1, 0, 1)?,
                        out: Conv2d::new(gpu, rng, deepest, c.channels(level + 1), 1, 1, 0, 1)?,
                    })
                })
                .collect::<Result<_>>()?,
            SkipType::Zero | SkipType::Duplicate => Vec::new(),
        };
        Ok(UNet {
            config: c.clone(),
            time_embed,
            class_embed,
            conv_in,
            down,
            mid,
            up,
            interp,
            norm_out: GroupNorm::new(gpu, c.norm_groups, c.channels(0))?.with_eps(c.norm_eps),
            conv_out: conv3(rng, c.channels(0), c.out_channels, 1)?,
            training: false,
            dropout_rng: Mutex::new(Rng::new(seed.wrapping_add(1))),
        })
    }

    pub fn config(&self) -> &UNetConfig {
        &self.config
    }

    /// temb [N, time_embed_dim] in `dtype`: the time MLP on the sinusoid of `t` (computed in
    /// f64 on the CPU, uploaded in `dtype`), plus the class rows.
    fn embed(&self, gpu: &Gpu, dtype: DType, t: &[f32], labels: Option<&[u32]>) -> Result<Tensor> {
        let n = t.len();
        let dim = self.config.time_sinusoid_dim;
        let sinusoid = Tensor::from_slice(
            gpu,
            &[n, dim],
            &timestep_embedding(t, dim, self.config.time_sinusoid),
            dtype,
        )?;
        let [first, second] = &self.time_embed;
        let temb = second.forward(&first.forward(&sinusoid)?.silu()?)?;
        match (&self.class_embed, labels) {
            (Some(table), labels) => table.add_to(&temb, labels),
            (None, Some(_)) => Err(Error::Config(
                "labels given to a U-Net without a class embedding (set `classes` in its config)".into(),
            )),
            (None, None) => Ok(temb),
        }
    }

    /// What the first active up level `level` gets in place of the skipped levels' output.
    fn skipped_input(
        &self,
        top: &Tensor,
        level: usize,
        temb: &Tensor,
        rng: Option<&mut Rng>,
    ) -> Result<Tensor> {
        let [n, c, h, w] = [top.shape()[0], top.shape()[1], top.shape()[2], top.shape()[3]];
        let want = self.config.channels(level + 1);
        match self.config.skip_type {
            SkipType::Zero => Tensor::zeros(top.gpu(), &[n, want, h, w], top.dtype()),
            SkipType::Duplicate => {
                let copies = want.div_ceil(c);
                let tiled = if copies > 1 {
                    Tensor::concat(&vec![top.clone(); copies], 1)?
                } else {
                    top.clone()
                };
                tiled.slice(1, 0, want)
            }
            SkipType::Interpolate => {
                let path = &self.interp[level];
                let shrink = 1 << (self.down.len() - 1 - level);
                let small = top.resize_bicubic(h / shrink, w / shrink)?;
                let mid = self.mid.forward(&path.into.forward(&small)?, temb, rng)?;
                path.out.forward(&mid)?.resize_bicubic(h, w)
            }
        }
    }

    /// Errors unless `x` is [N, in_channels, H, W] with H, W divisible by 2^(levels - 1),
    /// `t` has N entries and `skip` < levels.
    fn check_input(&self, x: &Tensor, t: &[f32], skip: usize) -> Result<()> {
        let levels = self.down.len();
        let s = x.shape();
        let step = 1 << (levels - 1);
        if s.len() != 4
            || s[1] != self.config.in_channels
            || s[2] % step != 0
            || s[3] % step != 0
            || s[2] == 0
        {
            return Err(Error::shape(
                "UNet",
                format!(
                    "input {s:?} must be [N, {}, H, W] with H and W positive multiples of {step}",
                    self.config.in_channels
                ),
            ));
        }
        if t.len() != s[0] {
            return Err(Error::shape(
                "UNet",
                format!("{} timesteps for a batch of {}", t.len(), s[0]),
            ));
        }
        if skip >= levels {
            return Err(Error::Config(format!(
                "cannot skip {skip} of this U-Net's {levels} levels (skip 0..{})",
                levels - 1
            )));
        }
        Ok(())
    }

    /// `conv` (a level's stride-2 conv) on `h`, after one zero row and column on the bottom and
    /// right when the convs have no padding of their own.
    fn downsample(&self, conv: &Conv2d, h: &Tensor) -> Result<Tensor> {
        match self.config.downsample_padding {
            0 => conv.forward(&h.pad_axis(2, 0, 1)?.pad_axis(3, 0, 1)?),
            _ => conv.forward(h),
        }
    }

    /// The side a downsampling conv's input has at side `side` (one more without padding).
    fn downsample_input_side(&self, side: usize) -> usize {
        side + usize::from(self.config.downsample_padding == 0)
    }

    fn layer_walk(&self, batch: usize) -> LayerWalk {
        let c = &self.config;
        let mut walk = LayerWalk::default();
        let size = c.image_size;
        let temb = vec![batch, c.time_embed_dim];
        let [first, second] = &self.time_embed;
        walk.linear("time_embed.0", first, &[batch, c.time_sinusoid_dim]);
        walk.linear("time_embed.1", second, &temb);
        if let Some(table) = &self.class_embed {
            table.walk(&mut walk, "class_embed", &temb);
        }
        let mut hs = vec![walk.conv("conv_in", &self.conv_in, &[batch, c.in_channels, size, size])];
        let mut h = hs[0].clone();
        for (i, level) in self.down.iter().enumerate() {
            for (j, stage) in level.stages.iter().enumerate() {
                h = stage.walk(&mut walk, &format!("down.{i}"), j, &h, &temb);
                hs.push(h.clone());
            }
            if let Some(conv) = &level.downsample {
                let padded = self.downsample_input_side(h[2]);
                h = walk.conv(
                    &format!("down.{i}.downsample"),
                    conv,
                    &[h[0], h[1], padded, padded],
                );
                hs.push(h.clone());
            }
        }
        h = walk.resblock("mid.res.0", &self.mid.res0, &h, &temb);
        h = walk.attention("mid.attn", &self.mid.attn, &h);
        h = walk.resblock("mid.res.1", &self.mid.res1, &h, &temb);
        for (i, level) in self.up.iter().enumerate().rev() {
            for (j, stage) in level.stages.iter().enumerate() {
                let skip_channels = hs.pop().map_or(0, |skip| skip[1]);
                let input = [h[0], h[1] + skip_channels, h[2], h[3]];
                h = stage.walk(&mut walk, &format!("up.{i}"), j, &input, &temb);
            }
            if let Some(conv) = &level.upsample {
                h = walk.conv(
                    &format!("up.{i}.upsample"),
                    conv,
                    &[h[0], h[1], 2 * h[2], 2 * h[3]],
                );
            }
        }
        h = walk.norm("norm_out", &self.norm_out, &h);
        walk.conv("conv_out", &self.conv_out, &h);
        let deepest = size >> (self.down.len() - 1);
        for (i, path) in self.interp.iter().enumerate() {
            let small = [batch, c.channels(i), deepest, deepest];
            let into = walk.conv(&format!("interp.{i}.into"), &path.into, &small);
            walk.conv(&format!("interp.{i}.out"), &path.out, &into);
        }
        walk
    }
}

impl DiffusionNet for UNet {
    fn forward(&self, x: &Tensor, t: &[f32], labels: Option<&[u32]>, skip: usize) -> Result<Tensor> {
        Ok(self.forward_deep(x, t, labels, skip, DeepFeatures::None)?.0)
    }

    fn forward_deep(
        &self,
        x: &Tensor,
        t: &[f32],
        labels: Option<&[u32]>,
        skip: usize,
        deep: DeepFeatures,
    ) -> Result<(Tensor, Option<Tensor>)> {
        self.check_input(x, t, skip)?;
        let levels = self.down.len();
        // the up level whose input is captured
        let capture_at = match deep {
            DeepFeatures::Capture(depth) if depth <= skip || depth >= levels => {
                return Err(Error::Config(format!(
                    "deep features at depth {depth} are captured by a pass skipping fewer levels (skip {skip}) \
                     of this U-Net's {levels}"
                )))
            }
            DeepFeatures::Capture(depth) => Some(levels - depth - 1),
            DeepFeatures::Reuse(_) if skip == 0 => {
                return Err(Error::Config(
                    "reused deep features stand in for skipped levels: the pass must skip at least one".into(),
                ))
            }
            DeepFeatures::None | DeepFeatures::Reuse(_) => None,
        };
        let mut rng_guard = self
            .dropout_rng
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut rng = (self.training && self.config.dropout > 0.0).then_some(&mut *rng_guard);
        let temb = self.embed(x.gpu(), x.dtype(), t, labels)?;
        let active = levels - skip;
        let mut hs = vec![self.conv_in.forward(x)?];
        for (i, level) in self.down[..active].iter().enumerate() {
            for stage in &level.stages {
                let h = stage.forward(&hs[hs.len() - 1], &temb, rng.as_deref_mut())?;
                hs.push(h);
            }
            if let (Some(conv), true) = (&level.downsample, i + 1 < active) {
                let h = self.downsample(conv, &hs[hs.len() - 1])?;
                hs.push(h);
            }
        }
        let top = &hs[hs.len() - 1];
        let mut h = match (skip, deep) {
            (0, _) => self.mid.forward(top, &temb, rng.as_deref_mut())?,
            (_, DeepFeatures::Reuse(features)) => {
                let [n, _, hh, ww] = [top.shape()[0], 0, top.shape()[2], top.shape()[3]];
                let want = [n, self.config.channels(active), hh, ww];
                if features.shape() != want {
                    return Err(Error::shape(
                        "UNet",
                        format!(
                            "reused deep features are {:?}; skipping {skip} levels of this batch needs {want:?}",
                            features.shape()
                        ),
                    ));
                }
                features.to_dtype(top.dtype())?
            }
            _ => self.skipped_input(top, active - 1, &temb, rng.as_deref_mut())?,
        };
        let mut captured = None;
        for (i, level) in self.up[..active].iter().enumerate().rev() {
            if capture_at == Some(i) {
                captured = Some(h.clone());
            }
            for stage in &level.stages {
                let skip = hs
                    .pop()
                    .ok_or_else(|| Error::Config("U-Net skip stack is shorter than its up path".into()))?;
                h = stage.forward(&Tensor::concat(&[h, skip], 1)?, &temb, rng.as_deref_mut())?;
            }
            if let Some(conv) = &level.upsample {
                h = conv.forward(&h.upsample_nearest(2, 2)?)?;
            }
        }
        Ok((self.conv_out.forward(&self.norm_out.forward_silu(&h)?)?, captured))
    }

    fn walk(&self, batch: usize) -> LayerWalk {
        self.layer_walk(batch)
    }

    fn levels(&self) -> usize {
        self.down.len()
    }

    fn set_training(&mut self, training: bool) {
        self.training = training;
    }

    fn reseed_dropout(&self, rng: Rng) {
        *self
            .dropout_rng
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = rng;
    }
}
