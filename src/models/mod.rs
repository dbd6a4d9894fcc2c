//! Diffusion networks (the DDPM U-Net, the NCSN ScoreNet, a residual MLP) behind one trait, so training,
//! sampling, checkpoints and `wgdiff model` treat every network alike; and the speed ladder's ConvNeXt net.

mod config;
mod convnext_net;
mod embedding;
pub mod limits;
mod mlp_net;
mod scorenet;
pub mod summary;
mod unet;
mod unet_config;

pub use config::{preset, ModelConfig, PRESETS};
pub use convnext_net::{ConvNextKernels, ConvNextNet, ConvNextNetConfig};
pub use embedding::{one_hot, timestep_embedding, TimeSinusoid};
pub use mlp_net::{MlpNet, MlpNetConfig};
pub use scorenet::{ScoreNet, ScoreNetConfig};
pub use unet::UNet;
pub use unet_config::{AttentionAt, SkipType, UNetConfig};

use crate::{DType, Result, Tensor};

/// One row of a model summary (as torchinfo prints): a layer, its output shape for the
/// summarised input, and its parameter count.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerRow {
    /// Dotted path of the layer, e.g. `down.1.res.0.conv1`.
    pub name: String,
    /// Layer kind, e.g. `Conv2d(64->128, k3 s1 p1)`.
    pub kind: String,
    /// Output shape for the summarised batch.
    pub output_shape: Vec<usize>,
    /// Parameters owned directly by this layer.
    pub params: usize,
    /// False for fixed (non-trained) tensors such as the ScoreNet's Fourier weights.
    pub trainable: bool,
}

/// What a forward pass does with the features the deep levels hand to the shallow ones (deep-
/// feature caching across sampler steps, [`crate::diffusion::FeatureCache`]).
#[derive(Clone, Copy, Debug)]
pub enum DeepFeatures<'a> {
    /// A plain forward pass.
    None,
    /// Also return the tensor entering up level L-d-1 from the deeper part (the one skipping
    /// d levels would replace); the pass must skip fewer than d levels.
    Capture(usize),
    /// Skip as many levels as the pass's `skip` says, taking this tensor (captured at that
    /// depth) in place of the skip type's substitute.
    Reuse(&'a Tensor),
}

/// A network that maps a noisy batch and its noise level to a prediction (noise, x0, v or
/// score, as its training objective says).
pub trait DiffusionNet {
    /// `x` [N, C, H, W]; `t` holds N network time inputs (DDPM: the timestep index as f32;
    /// SDE models: continuous t in (0, 1]); `labels` N class ids (or the null class) when the
    /// network is class-conditional; `skip` = number of deepest levels to skip (0 = none).
    fn forward(&self, x: &Tensor, t: &[f32], labels: Option<&[u32]>, skip: usize) -> Result<Tensor>;
    /// [`DiffusionNet::forward`] with deep features captured or reused as `deep` says; returns
    /// the output and, for [`DeepFeatures::Capture`], the captured tensor. Networks without
    /// levels take only [`DeepFeatures::None`].
    fn forward_deep(
        &self,
        x: &Tensor,
        t: &[f32],
        labels: Option<&[u32]>,
        skip: usize,
        deep: DeepFeatures,
    ) -> Result<(Tensor, Option<Tensor>)> {
        match deep {
            DeepFeatures::None => Ok((self.forward(x, t, labels, skip)?, None)),
            _ => Err(crate::Error::Config(
                "deep-feature caching needs a network with levels (a U-Net)".into(),
            )),
        }
    }
    /// [`DiffusionNet::forward`] run in `dtype` on an f32 batch (mixed-precision training):
    /// `x` is cast to `dtype` and the output back to f32 (no-ops for f32).
    fn forward_in(
        &self,
        dtype: DType,
        x: &Tensor,
        t: &[f32],
        labels: Option<&[u32]>,
        skip: usize,
    ) -> Result<Tensor> {
        self.forward(&x.to_dtype(dtype)?, t, labels, skip)?
            .to_dtype(DType::F32)
    }
    /// Every layer in order with its output shape for `batch` images, its parameters and its
    /// buffers (one walk, so the summary and the named tensors always agree).
    fn walk(&self, batch: usize) -> summary::LayerWalk;
    /// Trainable parameters with stable dotted names (the checkpoint's tensor names).
    fn named_params(&self) -> Vec<(String, Tensor)> {
        self.walk(1).params
    }
    /// Fixed tensors saved with the checkpoint but never trained.
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        self.walk(1).buffers
    }
    /// Layer-by-layer summary for a batch of `batch` images.
    fn summary(&self, batch: usize) -> Result<Vec<LayerRow>> {
        Ok(self.walk(batch).rows)
    }
    /// Spatial levels that adaptive skipping can drop (N in k(t)); 1 when it cannot skip.
    fn levels(&self) -> usize;
    /// Training mode (dropout on) or evaluation mode (the default). Networks without
    /// train-only behaviour keep this default, which changes nothing.
    fn set_training(&mut self, _training: bool) {}
    /// Where the next training forward's dropout masks come from: training reseeds it every
    /// step (so a resumed run, and a batch split over devices, draw the same masks). Networks
    /// without dropout ignore it.
    fn reseed_dropout(&self, _rng: crate::ops::random::Rng) {}
}
