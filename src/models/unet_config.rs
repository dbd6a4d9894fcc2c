//! `UNetConfig`: every size and option of the DDPM U-Net (serde, with defaults for the
//! optional parts), its presets, and the checks that make a config buildable.

pub use super::embedding::TimeSinusoid;
use super::limits::{check_sizes, MAX_BLOCKS, MAX_IMAGE_SIDE, MAX_LEVELS, MAX_WIDTH};
use crate::nn::ConvGroups;
use crate::ops::attention::MAX_HEAD_DIM;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// What the first active up level receives in place of the skipped levels' output
/// (Giladi et al., "Accelerating Diffusion Models using Adaptive Neural Network Architecture").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipType {
    /// Zeros.
    #[default]
    Zero,
    /// The contracting-path tensor of that level again (repeated along channels to fit).
    Duplicate,
    /// The contracting-path tensor resized bicubically to the middle resolution, a 1x1 conv,
    /// the middle block, a 1x1 conv and a bicubic resize back (extra parameters per level).
    Interpolate,
}

impl std::str::FromStr for SkipType {
    type Err = Error;

    /// `zero`, `duplicate` or `interpolate`.
    fn from_str(name: &str) -> Result<SkipType> {
        match name {
            "zero" => Ok(SkipType::Zero),
            "duplicate" => Ok(SkipType::Duplicate),
            "interpolate" => Ok(SkipType::Interpolate),
            _ => Err(Error::Config(format!(
                "unknown skip type `{name}`; choose zero, duplicate or interpolate"
            ))),
        }
    }
}

impl std::fmt::Display for SkipType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SkipType::Zero => "zero",
            SkipType::Duplicate => "duplicate",
            SkipType::Interpolate => "interpolate",
        })
    }
}

/// Where the U-Net has self-attention (the middle block always has it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionAt {
    /// At levels of these resolutions (DDPM's `attn_resolutions`, e.g. [16] on 32x32 images).
    Resolutions(Vec<usize>),
    /// At these level indices (0 = full resolution).
    Levels(Vec<usize>),
}

/// PyTorch's GroupNorm epsilon, every wgdiff U-Net's.
fn default_norm_eps() -> f32 {
    1e-5
}

/// Symmetric padding of the downsampling convs, every wgdiff U-Net's.
fn default_downsample_padding() -> usize {
    1
}

/// The DDPM U-Net's configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UNetConfig {
    /// Square image side the summary and attention resolutions refer to.
    pub image_size: usize,
    pub in_channels: usize,
    pub out_channels: usize,
    pub base_channels: usize,
    /// Channels of level i = base_channels * channel_mult[i]; one level per entry.
    pub channel_mult: Vec<usize>,
    /// ResBlocks per down level (up levels have one more).
    pub res_blocks: usize,
    pub attention: AttentionAt,
    /// Heads of every attention block, unless `head_dim` is set.
    pub heads: usize,
    /// Channels per head instead of a fixed head count: a block of C channels has C / head_dim
    /// heads (diffusers' `attention_head_dim`).
    #[serde(default)]
    pub head_dim: Option<usize>,
    /// GroupNorm groups of every norm.
    pub norm_groups: usize,
    /// The epsilon of every GroupNorm.
    #[serde(default = "default_norm_eps")]
    pub norm_eps: f32,
    /// Sinusoidal time features (even), then a Linear to `time_embed_dim`, SiLU, Linear.
    pub time_sinusoid_dim: usize,
    /// The sinusoid's frequencies and order (DDPM's unless imported).
    #[serde(default)]
    pub time_sinusoid: TimeSinusoid,
    pub time_embed_dim: usize,
    /// Padding of the stride-2 downsampling convs: 1 on every side, or 0 after one zero row and
    /// column on the bottom and right (the DDPM paper's TensorFlow models as diffusers holds them).
    #[serde(default = "default_downsample_padding")]
    pub downsample_padding: usize,
    #[serde(default)]
    pub dropout: f32,
    /// Groups of every 3x3 conv (resolved per layer, see [`ConvGroups`]).
    #[serde(default)]
    pub conv_groups: ConvGroups,
    /// 1x1 -> 3x3 -> 1x1 factorisation of the ResBlock convs with width Cout / factor.
    #[serde(default)]
    pub bottleneck: Option<usize>,
    /// Class-conditional with this many classes (plus the null class for guidance).
    #[serde(default)]
    pub classes: Option<usize>,
    #[serde(default)]
    pub skip_type: SkipType,
}

impl UNetConfig {
    /// The MNIST U-Net: 2,238,337 parameters (see the `unet` module doc for the layout). Its
    /// time sinusoid is as wide as its first level, as in a diffusers `UNet2DModel`, so it
    /// exports (checkpoints from before 2026-12-01 carry their 128-feature sinusoid with them).
    pub fn mnist() -> UNetConfig {
        UNetConfig {
            image_size: 28,
            in_channels: 1,
            out_channels: 1,
            base_channels: 32,
            channel_mult: vec![1, 2, 2],
            res_blocks: 2,
            attention: AttentionAt::Resolutions(vec![7]),
            heads: 4,
            head_dim: None,
            norm_groups: 8,
            norm_eps: default_norm_eps(),
            time_sinusoid_dim: 32,
            time_sinusoid: TimeSinusoid::default(),
            time_embed_dim: 512,
            downsample_padding: default_downsample_padding(),
            dropout: 0.0,
            conv_groups: ConvGroups::default(),
            bottleneck: None,
            classes: None,
            skip_type: SkipType::Zero,
        }
    }

    /// A small MNIST U-Net for fast experiments and the shipped model: base 16, 2 ResBlocks
    /// per level, attention only in the middle block, a 16-feature sinusoid (541,185
    /// parameters).
    pub fn mnist_small() -> UNetConfig {
        UNetConfig {
            base_channels: 16,
            attention: AttentionAt::Levels(vec![]),
            time_sinusoid_dim: 16,
            time_embed_dim: 256,
            ..UNetConfig::mnist()
        }
    }

    /// DDPM's CIFAR-10 model (35.7M parameters). Four heads of 64 channels instead of the
    /// paper's one head of 256, because head dims up to 64 run the attention kernels' fast
    /// path (`ops::attention::REGISTER_HEAD_DIM`; the parameter count is the same).
    pub fn cifar10() -> UNetConfig {
        UNetConfig {
            image_size: 32,
            in_channels: 3,
            out_channels: 3,
            base_channels: 128,
            channel_mult: vec![1, 2, 2, 2],
            res_blocks: 2,
            attention: AttentionAt::Resolutions(vec![16]),
            heads: 4,
            head_dim: None,
            norm_groups: 32,
            norm_eps: default_norm_eps(),
            time_sinusoid_dim: 128,
            time_sinusoid: TimeSinusoid::default(),
            time_embed_dim: 512,
            downsample_padding: default_downsample_padding(),
            dropout: 0.1,
            conv_groups: ConvGroups::default(),
            bottleneck: None,
            classes: None,
            skip_type: SkipType::Zero,
        }
    }

    /// A U-Net of a few thousand parameters with every kind of layer, for tests.
    pub fn tiny() -> UNetConfig {
        UNetConfig {
            base_channels: 4,
            res_blocks: 1,
            heads: 2,
            norm_groups: 2,
            time_sinusoid_dim: 8,
            time_embed_dim: 16,
            ..UNetConfig::mnist()
        }
    }

    pub fn levels(&self) -> usize {
        self.channel_mult.len()
    }

    /// Channels of level `level`.
    pub fn channels(&self, level: usize) -> usize {
        self.base_channels * self.channel_mult[level]
    }

    /// Heads of an attention block over `channels` channels.
    pub fn heads_at(&self, channels: usize) -> usize {
        self.head_dim.map_or(self.heads, |d| channels / d.max(1))
    }

    /// Whether the ResBlocks of `level` are followed by self-attention.
    pub fn has_attention(&self, level: usize) -> bool {
        match &self.attention {
            AttentionAt::Resolutions(r) => r.contains(&(self.image_size >> level)),
            AttentionAt::Levels(l) => l.contains(&level),
        }
    }

    /// Errors naming the first setting that cannot be built.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("U-Net config: {msg}")));
        let levels = self.levels();
        let widest = self
            .channel_mult
            .iter()
            .fold(0usize, |m, &mult| m.max(self.base_channels.saturating_mul(mult)));
        check_sizes(
            "U-Net config",
            &[
                ("the number of levels", levels, MAX_LEVELS),
                ("res_blocks", self.res_blocks, MAX_BLOCKS),
                ("image_size", self.image_size, MAX_IMAGE_SIDE),
                ("in_channels", self.in_channels, MAX_WIDTH),
                ("out_channels", self.out_channels, MAX_WIDTH),
                ("the widest level's channels", widest, MAX_WIDTH),
                ("bottleneck", self.bottleneck.unwrap_or(0), MAX_WIDTH),
                ("time_sinusoid_dim", self.time_sinusoid_dim, MAX_WIDTH),
                ("time_embed_dim", self.time_embed_dim, MAX_WIDTH),
                ("classes", self.classes.unwrap_or(0), MAX_WIDTH),
            ],
        )?;
        if levels == 0 || self.channel_mult.contains(&0) || self.base_channels == 0 {
            return bad(
                "channel_mult needs at least one level and every channel count must be positive".into(),
            );
        }
        if self.in_channels == 0 || self.out_channels == 0 || self.res_blocks == 0 {
            return bad("in_channels, out_channels and res_blocks must be at least 1".into());
        }
        if self.image_size == 0 || self.image_size % (1 << (levels - 1)) != 0 {
            return bad(format!(
                "image_size {} must be divisible by 2^{} to go down {} levels and back",
                self.image_size,
                levels - 1,
                levels - 1
            ));
        }
        match &self.attention {
            AttentionAt::Resolutions(r) => {
                if let Some(res) = r
                    .iter()
                    .find(|&&res| (0..levels).all(|l| self.image_size >> l != res))
                {
                    return bad(format!(
                        "no level has resolution {res} (levels: {:?})",
                        (0..levels).map(|l| self.image_size >> l).collect::<Vec<_>>()
                    ));
                }
            }
            AttentionAt::Levels(l) => {
                if let Some(level) = l.iter().find(|&&level| level >= levels) {
                    return bad(format!(
                        "attention level {level} does not exist (levels 0..{levels})"
                    ));
                }
            }
        }
        for level in 0..levels {
            let c = self.channels(level);
            if self.norm_groups == 0 || c % self.norm_groups != 0 {
                return bad(format!(
                    "norm_groups {} must divide the {c} channels of level {level}",
                    self.norm_groups
                ));
            }
            let attends = self.has_attention(level) || level == levels - 1;
            let heads = self.heads_at(c);
            if attends && (heads == 0 || c % heads != 0 || c / heads > MAX_HEAD_DIM) {
                return bad(match self.head_dim {
                    Some(d) => format!(
                        "head_dim {d} must divide the {c} channels of level {level} and be at most {MAX_HEAD_DIM}"
                    ),
                    None => format!(
                        "{heads} heads must divide the {c} channels of level {level} into heads of at most \
                         {MAX_HEAD_DIM}"
                    ),
                });
            }
        }
        if self.time_sinusoid_dim < 4 || self.time_sinusoid_dim % 2 != 0 || self.time_embed_dim == 0 {
            return bad("time_sinusoid_dim must be even and at least 4, time_embed_dim positive".into());
        }
        let shift = self.time_sinusoid.freq_shift;
        if !(shift.is_finite() && f64::from(shift) < (self.time_sinusoid_dim / 2) as f64) {
            return bad(format!(
                "time_sinusoid.freq_shift {shift} must be finite and below half of time_sinusoid_dim ({})",
                self.time_sinusoid_dim / 2
            ));
        }
        if !(self.norm_eps > 0.0 && self.norm_eps.is_finite()) {
            return bad(format!("norm_eps {} must be positive", self.norm_eps));
        }
        if self.downsample_padding > 1 {
            return bad(format!(
                "downsample_padding {} must be 1 (every side) or 0 (bottom and right)",
                self.downsample_padding
            ));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return bad(format!("dropout {} must be in [0, 1)", self.dropout));
        }
        if self.conv_groups == ConvGroups::Fixed(0)
            || self.bottleneck == Some(0)
            || self.classes == Some(0)
            || self.head_dim == Some(0)
        {
            return bad("conv_groups, bottleneck, classes and head_dim must be at least 1 when set".into());
        }
        Ok(())
    }
}
