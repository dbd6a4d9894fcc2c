//! `ModelConfig`: any network's configuration as one serde value tagged by `kind`, the
//! registry of named presets, and building the network it describes.

use super::{DiffusionNet, MlpNet, MlpNetConfig, ScoreNet, ScoreNetConfig, SkipType, UNet, UNetConfig};
use crate::nn::ConvGroups;
use crate::{Error, Gpu, Result};
use serde::{Deserialize, Serialize};

/// A network configuration; serialised as `{"kind": "unet", ...}`, `{"kind": "scorenet", ...}`
/// or `{"kind": "mlp", ...}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum ModelConfig {
    #[serde(rename = "unet")]
    UNet(UNetConfig),
    #[serde(rename = "scorenet")]
    ScoreNet(ScoreNetConfig),
    #[serde(rename = "mlp")]
    Mlp(MlpNetConfig),
}

/// Names accepted by [`preset`].
pub const PRESETS: [&str; 6] = [
    "mnist",
    "mnist-small",
    "mnist-mlp",
    "cifar10",
    "tiny",
    "ncsn-mnist",
];

/// The configuration of a named preset.
pub fn preset(name: &str) -> Result<ModelConfig> {
    Ok(match name {
        "mnist" => ModelConfig::UNet(UNetConfig::mnist()),
        "mnist-small" => ModelConfig::UNet(UNetConfig::mnist_small()),
        "mnist-mlp" => ModelConfig::Mlp(MlpNetConfig::mnist()),
        "cifar10" => ModelConfig::UNet(UNetConfig::cifar10()),
        "tiny" => ModelConfig::UNet(UNetConfig::tiny()),
        "ncsn-mnist" => ModelConfig::ScoreNet(ScoreNetConfig::ncsn_mnist()),
        _ => {
            return Err(Error::Config(format!(
                "unknown model preset \"{name}\"; presets: {}",
                PRESETS.join(", ")
            )))
        }
    })
}

impl ModelConfig {
    /// The same model with the adaptive U-Net's skip type set (only a U-Net can skip).
    pub fn with_skip_type(self, skip_type: SkipType) -> Result<ModelConfig> {
        match self {
            ModelConfig::UNet(u) => Ok(ModelConfig::UNet(UNetConfig { skip_type, ..u })),
            other => Err(Error::Config(format!(
                "skip type {skip_type}: the {} has no levels to skip; use a U-Net preset",
                other.kind_name()
            ))),
        }
    }

    /// The same model with its convolutions in `groups` channel groups (the U-Net's 3x3
    /// convs, the ScoreNet's convs and transposed convs; the umass report's "depthwise"
    /// convolution): a training-time choice, as the weights' shapes change.
    pub fn with_conv_groups(self, groups: ConvGroups) -> Result<ModelConfig> {
        match self {
            ModelConfig::UNet(u) => Ok(ModelConfig::UNet(UNetConfig {
                conv_groups: groups,
                ..u
            })),
            ModelConfig::ScoreNet(s) => Ok(ModelConfig::ScoreNet(ScoreNetConfig {
                conv_groups: groups,
                ..s
            })),
            other => Err(Error::Config(format!(
                "conv groups: the {} has no convolutions; use a U-Net or ScoreNet preset",
                other.kind_name()
            ))),
        }
    }

    /// What the network is, for messages: `U-Net`, `ScoreNet` or `MLP`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            ModelConfig::UNet(_) => "U-Net",
            ModelConfig::ScoreNet(_) => "ScoreNet",
            ModelConfig::Mlp(_) => "MLP",
        }
    }

    /// Classes of a class-conditional model (None: unconditional).
    pub fn classes(&self) -> Option<usize> {
        match self {
            ModelConfig::UNet(u) => u.classes,
            ModelConfig::Mlp(m) => m.classes,
            ModelConfig::ScoreNet(_) => None,
        }
    }

    /// The [C, H, W] shape of the images the network takes.
    pub fn image_shape(&self) -> [usize; 3] {
        match self {
            ModelConfig::UNet(u) => [u.in_channels, u.image_size, u.image_size],
            ModelConfig::ScoreNet(s) => [s.in_channels, s.image_size, s.image_size],
            ModelConfig::Mlp(m) => [m.in_channels, m.image_size, m.image_size],
        }
    }

    /// The network with weights drawn from `seed`.
    pub fn build(&self, gpu: &Gpu, seed: u64) -> Result<Box<dyn DiffusionNet>> {
        Ok(match self {
            ModelConfig::UNet(c) => Box::new(UNet::new(gpu, c, seed)?),
            ModelConfig::ScoreNet(c) => Box::new(ScoreNet::new(gpu, c, seed)?),
            ModelConfig::Mlp(c) => Box::new(MlpNet::new(gpu, c, seed)?),
        })
    }
}
