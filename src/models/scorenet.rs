//! The score-SDE tutorial's NCSN ScoreNet (Song et al.): Gaussian Fourier time features,
//! four valid-padding conv stages down, three transposed-conv stages up, output / std(t).
//!
//! Layout (the `ncsn-mnist` preset, channels 32, 64, 128, 256, 1,115,297 trainable
//! parameters; names as the tutorial's PyTorch module):
//! - `embed.0.W` (buffer, [embed_dim / 2] ~ N(0, scale^2)): [sin(2 pi t W), cos(2 pi t W)] ->
//!   `embed.1` Linear(embed_dim, embed_dim) -> swish = e.
//! - encoder k = 1..4: `conv{k}` 3x3 no bias, no padding (stride 1 for k = 1, else 2),
//!   plus `dense{k}.dense`(e), `gnorm{k}` (groups 4 for k = 1, else 32), swish; sizes
//!   28 -> 26 -> 12 -> 5 -> 2.
//! - decoder: `tconv4` 3x3 stride 2 (2 -> 5), `tconv3` and `tconv2` 3x3 stride 2 output
//!   padding 1 on concat(h, encoder output) (5 -> 12 -> 26), each no bias, plus `dense{5,6,7}`(e),
//!   `tgnorm{4,3,2}` (32 groups), swish; `tconv1` 3x3 stride 1 with bias on concat(h, h1) (26 -> 28).
//! - output / sqrt((sigma^(2t) - 1) / (2 ln sigma)), the VE SDE's marginal std.

use super::limits::{check_sizes, MAX_IMAGE_SIDE, MAX_WIDTH};
use super::summary::LayerWalk;
use super::DiffusionNet;
use crate::nn::{Conv2d, ConvGroups, ConvTranspose2d, GroupNorm, Linear};
use crate::ops::random::Rng;
use crate::{DType, Error, Gpu, Result, Tensor};
use serde::{Deserialize, Serialize};

/// The ScoreNet's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoreNetConfig {
    /// Square image side for the summary (the valid convs must invert: 28 works).
    pub image_size: usize,
    pub in_channels: usize,
    /// Channels of the four encoder stages.
    pub channels: [usize; 4],
    /// Width of the Fourier features and of the time embedding.
    pub embed_dim: usize,
    /// Standard deviation of the fixed Fourier weights.
    pub fourier_scale: f32,
    /// sigma of the VE SDE whose marginal std divides the output.
    pub sigma: f32,
    /// GroupNorm groups of the first stage, and of all others.
    pub first_norm_groups: usize,
    pub norm_groups: usize,
    /// Groups of every conv (resolved per layer, see [`ConvGroups`]).
    #[serde(default)]
    pub conv_groups: ConvGroups,
}

impl ScoreNetConfig {
    /// The tutorial's MNIST model.
    pub fn ncsn_mnist() -> ScoreNetConfig {
        ScoreNetConfig {
            image_size: 28,
            in_channels: 1,
            channels: [32, 64, 128, 256],
            embed_dim: 256,
            fourier_scale: 30.0,
            sigma: 25.0,
            first_norm_groups: 4,
            norm_groups: 32,
            conv_groups: ConvGroups::default(),
        }
    }

    /// Errors naming the first setting that cannot be built.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("ScoreNet config: {msg}")));
        check_sizes(
            "ScoreNet config",
            &[
                ("image_size", self.image_size, MAX_IMAGE_SIDE),
                ("in_channels", self.in_channels, MAX_WIDTH),
                (
                    "the widest channels",
                    self.channels.into_iter().max().unwrap_or(0),
                    MAX_WIDTH,
                ),
                ("embed_dim", self.embed_dim, MAX_WIDTH),
            ],
        )?;
        if self.in_channels == 0
            || self.channels.contains(&0)
            || self.embed_dim < 2
            || self.embed_dim % 2 != 0
        {
            return bad("channels must be positive and embed_dim even".into());
        }
        // stage 1 normalises channels[0] with first_norm_groups; every other norm (and the
        // decoder's, on channels[0..3]) uses norm_groups
        let divides = |g: usize, c: usize| g > 0 && c % g == 0;
        if !divides(self.first_norm_groups, self.channels[0])
            || !self.channels.iter().all(|&c| divides(self.norm_groups, c))
        {
            return bad(format!(
                "GroupNorm groups {} / {} must divide the channels {:?}",
                self.first_norm_groups, self.norm_groups, self.channels
            ));
        }
        if self.sigma <= 1.0 || !self.sigma.is_finite() || !self.fourier_scale.is_finite() {
            return bad(format!(
                "sigma {} must be above 1, fourier_scale finite",
                self.sigma
            ));
        }
        if self.conv_groups == ConvGroups::Fixed(0) {
            return bad("conv_groups must be at least 1".into());
        }
        sizes(self.image_size).map(|_| ())
    }

    /// The VE SDE's marginal std at `t`: sqrt((sigma^(2t) - 1) / (2 ln sigma)).
    pub fn marginal_std(&self, t: f32) -> f32 {
        let sigma = f64::from(self.sigma);
        ((sigma.powf(2.0 * f64::from(t)) - 1.0) / (2.0 * sigma.ln())).sqrt() as f32
    }
}

/// Spatial sizes after conv1..conv4 for input side `side`, if the decoder's transposed convs
/// come back to exactly these sizes (and to `side`).
fn sizes(side: usize) -> Result<[usize; 4]> {
    let down = |s: usize| (s >= 3).then(|| (s - 3) / 2 + 1);
    let s1 = side.checked_sub(2).filter(|&s| s > 0);
    let s2 = s1.and_then(down);
    let s3 = s2.and_then(down);
    let s4 = s3.and_then(down);
    match (s1, s2, s3, s4) {
        (Some(s1), Some(s2), Some(s3), Some(s4))
            if 2 * s4 + 1 == s3 && 2 * s3 + 2 == s2 && 2 * s2 + 2 == s1 =>
        {
            Ok([s1, s2, s3, s4])
        }
        _ => Err(Error::shape(
            "ScoreNet",
            format!("a {side}x{side} input does not come back through the valid convs (28x28 does)"),
        )),
    }
}

/// A conv (or transposed conv), the projection of the time embedding added to it, a norm.
struct Stage<C> {
    conv: C,
    dense: Linear,
    norm: GroupNorm,
}

impl<C> Stage<C> {
    /// swish(norm(conv_out + dense(e))).
    fn finish(&self, h: Tensor, e: &Tensor) -> Result<Tensor> {
        let d = self.dense.forward(e)?;
        let d = d.reshape(&[d.shape()[0], d.shape()[1], 1, 1])?;
        self.norm.forward_silu(&h.add(&d)?)
    }
}

/// The NCSN ScoreNet (see the module doc).
pub struct ScoreNet {
    config: ScoreNetConfig,
    fourier: Tensor,
    embed: Linear,
    encoder: Vec<Stage<Conv2d>>,
    decoder: Vec<Stage<ConvTranspose2d>>,
    out: ConvTranspose2d,
}

impl ScoreNet {
    pub fn new(gpu: &Gpu, config: &ScoreNetConfig, seed: u64) -> Result<ScoreNet> {
        config.validate()?;
        let c = config;
        let rng = &mut Rng::new(seed);
        let [c1, c2, c3, c4] = c.channels;
        let e = c.embed_dim;
        let g = |cin, cout| c.conv_groups.resolve(cin, cout);
        let mut encoder = Vec::with_capacity(4);
        for (i, (cin, cout)) in [(c.in_channels, c1), (c1, c2), (c2, c3), (c3, c4)]
            .into_iter()
            .enumerate()
        {
            let stride = if i == 0 { 1 } else { 2 };
            let groups = if i == 0 {
                c.first_norm_groups
            } else {
                c.norm_groups
            };
            encoder.push(Stage {
                conv: Conv2d::new(gpu, rng, cin, cout, 3, stride, 0, g(cin, cout))?.without_bias(),
                dense: Linear::new(gpu, rng, e, cout)?,
                norm: GroupNorm::new(gpu, groups, cout)?,
            });
        }
        let mut decoder = Vec::with_capacity(3);
        for (cin, cout, output_padding) in [(c4, c3, 0), (2 * c3, c2, 1), (2 * c2, c1, 1)] {
            decoder.push(Stage {
                conv: ConvTranspose2d::new(gpu, rng, cin, cout, 3, 2, output_padding, g(cin, cout))?
                    .without_bias(),
                dense: Linear::new(gpu, rng, e, cout)?,
                norm: GroupNorm::new(gpu, c.norm_groups, cout)?,
            });
        }
        let cin = 2 * c1;
        Ok(ScoreNet {
            config: c.clone(),
            fourier: rng.normal(gpu, &[e / 2], 0.0, c.fourier_scale, DType::F32)?,
            embed: Linear::new(gpu, rng, e, e)?,
            encoder,
            decoder,
            out: ConvTranspose2d::new(gpu, rng, cin, c.in_channels, 3, 1, 0, g(cin, c.in_channels))?,
        })
    }

    pub fn config(&self) -> &ScoreNetConfig {
        &self.config
    }

    fn layer_walk(&self, batch: usize) -> LayerWalk {
        let c = &self.config;
        let mut walk = LayerWalk::default();
        let e = vec![batch, c.embed_dim];
        let kind = format!(
            "GaussianFourierProjection({}, scale {})",
            c.embed_dim, c.fourier_scale
        );
        walk.layer("embed.0", kind, e.clone(), &[("W", &self.fourier)], false);
        walk.linear("embed.1", &self.embed, &e);
        let mut h = vec![batch, c.in_channels, c.image_size, c.image_size];
        let mut skips = Vec::with_capacity(3);
        for (i, stage) in self.encoder.iter().enumerate() {
            h = walk.conv(&format!("conv{}", i + 1), &stage.conv, &h);
            walk.linear(&format!("dense{}.dense", i + 1), &stage.dense, &e);
            h = walk.norm(&format!("gnorm{}", i + 1), &stage.norm, &h);
            skips.push(h.clone());
        }
        skips.pop();
        for (i, stage) in self.decoder.iter().enumerate() {
            h = walk.conv_transpose(&format!("tconv{}", 4 - i), &stage.conv, &h);
            walk.linear(&format!("dense{}.dense", 5 + i), &stage.dense, &e);
            h = walk.norm(&format!("tgnorm{}", 4 - i), &stage.norm, &h);
            h[1] += skips.pop().map_or(0, |skip| skip[1]);
        }
        walk.conv_transpose("tconv1", &self.out, &h);
        walk
    }
}

impl DiffusionNet for ScoreNet {
    fn forward(&self, x: &Tensor, t: &[f32], labels: Option<&[u32]>, skip: usize) -> Result<Tensor> {
        let s = x.shape();
        if s.len() != 4 || s[1] != self.config.in_channels || s[2] != s[3] {
            return Err(Error::shape(
                "ScoreNet",
                format!("input {s:?} must be [N, {}, S, S]", self.config.in_channels),
            ));
        }
        sizes(s[2])?;
        if t.len() != s[0] || t.iter().any(|&ti| ti <= 0.0 || !ti.is_finite()) {
            return Err(Error::shape(
                "ScoreNet",
                format!(
                    "needs {} times t > 0 (the VE SDE's std is 0 at t = 0), got {t:?}",
                    s[0]
                ),
            ));
        }
        if labels.is_some() || skip != 0 {
            return Err(Error::Config(
                "the ScoreNet takes no class labels and cannot skip levels".into(),
            ));
        }
        let gpu = x.gpu();
        let n = s[0];
        let t_col = Tensor::from_f32(gpu, &[n, 1], t)?;
        let half = self.fourier.numel();
        let angles = t_col
            .matmul(&self.fourier.reshape(&[1, half])?)?
            .mul_scalar(std::f32::consts::TAU)?;
        // angles reach hundreds of radians: sin/cos in f32, then the features in x's dtype
        let features = Tensor::concat(&[angles.sin()?, angles.cos()?], 1)?.to_dtype(x.dtype())?;
        let e = self.embed.forward(&features)?.silu()?;
        let mut h = x.clone();
        let mut skips = Vec::with_capacity(3);
        for stage in &self.encoder {
            h = stage.finish(stage.conv.forward(&h)?, &e)?;
            skips.push(h.clone());
        }
        skips.pop();
        for stage in &self.decoder {
            h = stage.finish(stage.conv.forward(&h)?, &e)?;
            if let Some(skip) = skips.pop() {
                h = Tensor::concat(&[h, skip], 1)?;
            }
        }
        let std: Vec<f32> = t.iter().map(|&ti| self.config.marginal_std(ti)).collect();
        self.out
            .forward(&h)?
            .div(&Tensor::from_slice(gpu, &[n, 1, 1, 1], &std, x.dtype())?)
    }

    fn walk(&self, batch: usize) -> LayerWalk {
        self.layer_walk(batch)
    }

    fn levels(&self) -> usize {
        1
    }
}
