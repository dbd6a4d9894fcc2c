//! `ModelConfig`: any network's configuration as one serde value tagged by `kind`, the
//! registry of named presets, and building the network it describes.

use super::{DiffusionNet, ScoreNet, ScoreNetConfig, SkipType, UNet, UNetConfig};
use crate::{Error, Gpu, Result};
use serde::{Deserialize, Serialize};

/// A network configuration; serialised as `{"kind": "unet", ...}` or `{"kind": "scorenet", ...}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum ModelConfig {
    #[serde(rename = "unet")]
    UNet(UNetConfig),
    #[serde(rename = "scorenet")]
    ScoreNet(ScoreNetConfig),
}

/// Names accepted by [`preset`].
pub const PRESETS: [&str; 5] = ["mnist", "mnist-small", "cifar10", "tiny", "ncsn-mnist"];

/// The configuration of a named preset.
pub fn preset(name: &str) -> Result<ModelConfig> {
    Ok(match name {
        "mnist" => ModelConfig::UNet(UNetConfig::mnist()),
        "mnist-small" => ModelConfig::UNet(UNetConfig::mnist_small()),
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
    /// The same model with the adaptive U-Net's skip type set (a ScoreNet cannot skip).
    pub fn with_skip_type(self, skip_type: SkipType) -> Result<ModelConfig> {
        match self {
            ModelConfig::UNet(u) => Ok(ModelConfig::UNet(UNetConfig { skip_type, ..u })),
            ModelConfig::ScoreNet(_) => Err(Error::Config(format!(
                "skip type {skip_type}: the ScoreNet has no levels to skip; use a U-Net preset"
            ))),
        }
    }

    /// The [C, H, W] shape of the images the network takes.
    pub fn image_shape(&self) -> [usize; 3] {
        match self {
            ModelConfig::UNet(u) => [u.in_channels, u.image_size, u.image_size],
            ModelConfig::ScoreNet(s) => [s.in_channels, s.image_size, s.image_size],
        }
    }

    /// The network with weights drawn from `seed`.
    pub fn build(&self, gpu: &Gpu, seed: u64) -> Result<Box<dyn DiffusionNet>> {
        Ok(match self {
            ModelConfig::UNet(c) => Box::new(UNet::new(gpu, c, seed)?),
            ModelConfig::ScoreNet(c) => Box::new(ScoreNet::new(gpu, c, seed)?),
        })
    }
}
