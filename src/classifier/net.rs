//! `Classifier`: a small CNN for 28x28 grey images (3x3 convs: stride 2, stride 1, 2x2 average
//! pool, stride 1; each GroupNorm + SiLU; Linear to the feature layer + SiLU; Linear to logits).

use crate::checkpoint::Checkpoint;
use crate::fnv::Fnv1a;
use crate::nn::{Conv2d, GroupNorm, Linear};
use crate::ops::random::Rng;
use crate::{Error, Gpu, Result, Tensor};
use serde::{Deserialize, Serialize};

/// The network's shape; stored in every checkpoint's metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifierConfig {
    /// Input channels (1 for MNIST).
    pub in_channels: usize,
    /// Input height and width (28 for MNIST); must be a multiple of 4.
    pub size: usize,
    /// Output channels of the three 3x3 convs: stride 2 (size/2), stride 1, then after a 2x2
    /// average pool stride 1 (size/4).
    pub channels: [usize; 3],
    /// GroupNorm groups after every conv (each channel count must be a multiple of it).
    pub groups: usize,
    /// Width of the penultimate (feature) layer.
    pub features: usize,
    pub classes: usize,
}

impl Default for ClassifierConfig {
    /// The MNIST classifier: 1x28x28 -> 32x14x14 -> 32x14x14 -> (pool) 64x7x7 -> 128 -> 10.
    fn default() -> Self {
        ClassifierConfig {
            in_channels: 1,
            size: 28,
            channels: [32, 32, 64],
            groups: 8,
            features: 128,
            classes: 10,
        }
    }
}

impl ClassifierConfig {
    /// Checks the shape fits together, naming the setting and the fix.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("classifier config: {msg}")));
        if self.in_channels == 0 || self.features == 0 || self.classes < 2 {
            return bad("in_channels and features must be >= 1 and classes >= 2".into());
        }
        if self.size == 0 || self.size % 4 != 0 {
            return bad(format!("size {} must be a positive multiple of 4", self.size));
        }
        if self.groups == 0 || self.channels.iter().any(|&c| c == 0 || c % self.groups != 0) {
            return bad(format!(
                "every channel count {:?} must be a positive multiple of groups ({})",
                self.channels, self.groups
            ));
        }
        Ok(())
    }

    /// Multiply-adds per image of the forward pass.
    pub fn macs_per_image(&self) -> usize {
        let [c1, c2, c3] = self.channels;
        let s = self.size;
        let flat = c3 * (s / 4) * (s / 4);
        (s / 2) * (s / 2) * c1 * self.in_channels * 9
            + (s / 2) * (s / 2) * c2 * c1 * 9
            + (s / 4) * (s / 4) * c3 * c2 * 9
            + flat * self.features
            + self.features * self.classes
    }
}

/// The classifier's layers (parameters track gradients).
pub struct Classifier {
    pub config: ClassifierConfig,
    gpu: Gpu,
    /// Names the weights in MNIST-FID cache keys (see [`Classifier::id`]).
    id: String,
    convs: [Conv2d; 3],
    norms: [GroupNorm; 3],
    hidden: Linear,
    head: Linear,
}

/// Metadata `kind` of a classifier checkpoint.
pub use crate::checkpoint::CLASSIFIER_KIND as CHECKPOINT_KIND;

impl Classifier {
    /// Fresh weights drawn from `seed`.
    pub fn new(gpu: &Gpu, config: ClassifierConfig, seed: u64) -> Result<Classifier> {
        config.validate()?;
        let mut rng = Rng::new(seed);
        let [c1, c2, c3] = config.channels;
        let conv = |rng: &mut Rng, cin, cout, stride| -> Result<Conv2d> {
            Ok(Conv2d::new(gpu, rng, cin, cout, 3, stride, 1, 1)?.without_bias())
        };
        let convs = [
            conv(&mut rng, config.in_channels, c1, 2)?,
            conv(&mut rng, c1, c2, 1)?,
            conv(&mut rng, c2, c3, 1)?,
        ];
        let norms = [
            GroupNorm::new(gpu, config.groups, c1)?,
            GroupNorm::new(gpu, config.groups, c2)?,
            GroupNorm::new(gpu, config.groups, c3)?,
        ];
        let flat = c3 * (config.size / 4) * (config.size / 4);
        let hidden = Linear::new(gpu, &mut rng, flat, config.features)?;
        let head = Linear::new(gpu, &mut rng, config.features, config.classes)?;
        Ok(Classifier {
            id: format!("classifier-untrained-seed{seed}"),
            config,
            gpu: gpu.clone(),
            convs,
            norms,
            hidden,
            head,
        })
    }

    /// Names these weights: `classifier-<hash>` (FNV-1a of the checkpoint's tensors) when
    /// loaded from a checkpoint, `classifier-untrained-seed<seed>` for fresh weights.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The device holding the weights.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Trainable tensors with their checkpoint names, in a fixed order.
    pub fn named_params(&self) -> Vec<(String, Tensor)> {
        let mut named = Vec::new();
        for (i, (conv, norm)) in self.convs.iter().zip(&self.norms).enumerate() {
            named.push((format!("conv{}.weight", i + 1), conv.weight.float()));
            named.push((format!("norm{}.gamma", i + 1), norm.gamma.clone()));
            named.push((format!("norm{}.beta", i + 1), norm.beta.clone()));
        }
        for (name, layer) in [("hidden", &self.hidden), ("head", &self.head)] {
            named.push((format!("{name}.weight"), layer.weight.float()));
            named.push((format!("{name}.bias"), layer.bias.clone()));
        }
        named
    }

    /// Number of trainable values.
    pub fn param_count(&self) -> usize {
        self.named_params().iter().map(|(_, t)| t.numel()).sum()
    }

    fn check_input(&self, x: &Tensor) -> Result<()> {
        let c = &self.config;
        if x.shape().len() != 4 || x.shape()[1..] != [c.in_channels, c.size, c.size] {
            return Err(Error::shape(
                "classifier",
                format!(
                    "images must be [N, {}, {}, {}] in [-1, 1], got {:?}",
                    c.in_channels,
                    c.size,
                    c.size,
                    x.shape()
                ),
            ));
        }
        Ok(())
    }

    /// The penultimate layer (after its SiLU), [N, features]: the MNIST-FID features.
    pub fn features(&self, x: &Tensor) -> Result<Tensor> {
        self.check_input(x)?;
        let mut h = x.clone();
        for (i, (conv, norm)) in self.convs.iter().zip(&self.norms).enumerate() {
            if i == 2 {
                h = h.avg_pool2d(2, 2)?;
            }
            h = norm.forward_silu(&conv.forward(&h)?)?;
        }
        let n = h.shape()[0];
        let flat = h.numel() / n;
        self.hidden.forward(&h.reshape(&[n, flat])?)?.silu()
    }

    /// Class logits [N, classes] of features [N, features].
    pub fn head(&self, features: &Tensor) -> Result<Tensor> {
        self.head.forward(features)
    }

    /// Class logits [N, classes] of images [N, C, size, size] in [-1, 1].
    pub fn logits(&self, x: &Tensor) -> Result<Tensor> {
        self.head(&self.features(x)?)
    }

    /// A checkpoint of the weights; `training` (what trained them, the measured accuracy) goes
    /// into the metadata next to the config.
    pub async fn checkpoint(&self, training: serde_json::Value) -> Result<Checkpoint> {
        let meta = serde_json::json!({
            "kind": CHECKPOINT_KIND,
            "config": self.config,
            "training": training,
        });
        Checkpoint::capture(&self.named_params(), meta).await
    }

    /// A classifier with the weights of `ckpt` (built from the config in its metadata); every
    /// tensor must be present with the shape that config implies, and no other may be.
    /// `origin` names the checkpoint in errors.
    pub fn from_checkpoint(gpu: &Gpu, ckpt: &Checkpoint, origin: &str) -> Result<Classifier> {
        let error = |msg: String| Error::Checkpoint {
            path: origin.to_string(),
            msg,
        };
        if ckpt.meta.get("kind").and_then(|k| k.as_str()) != Some(CHECKPOINT_KIND) {
            return Err(error(format!(
                "its metadata has no \"kind\": \"{CHECKPOINT_KIND}\"; it is not a classifier checkpoint \
                 (write one with `wgdiff train-classifier`)"
            )));
        }
        let config: ClassifierConfig = ckpt
            .meta
            .get("config")
            .cloned()
            .ok_or_else(|| error("its metadata has no classifier \"config\"".into()))
            .and_then(|c| {
                serde_json::from_value(c)
                    .map_err(|e| error(format!("its classifier config does not parse: {e}")))
            })?;
        let mut net = ckpt.build_within_size(origin, || Classifier::new(gpu, config, 0))?;
        let named = net.named_params();
        for (name, t) in &named {
            match ckpt.tensors.get(name) {
                None => {
                    return Err(error(format!(
                        "has no tensor {name}, which the classifier config {:?} needs; the file is \
                         damaged or from another version",
                        net.config
                    )))
                }
                Some(stored) if stored.shape != t.shape() => {
                    return Err(error(format!(
                        "tensor {name} has shape {:?} but the classifier config in its metadata \
                         ({:?}) gives {:?}; the weights do not belong to that config",
                        stored.shape,
                        net.config,
                        t.shape()
                    )))
                }
                Some(_) => {}
            }
        }
        if let Some(extra) = ckpt.tensors.keys().find(|k| !named.iter().any(|(n, _)| n == *k)) {
            return Err(error(format!(
                "holds a tensor {extra} that the classifier does not have; it was written for another model"
            )));
        }
        ckpt.restore("", &named, origin)?;
        net.id = format!("classifier-{:016x}", weights_hash(ckpt));
        Ok(net)
    }

    /// Reads a classifier checkpoint file.
    pub fn load(gpu: &Gpu, path: &std::path::Path) -> Result<Classifier> {
        Classifier::from_checkpoint(gpu, &Checkpoint::load(path)?, &path.display().to_string())
    }

    /// Writes the weights and metadata to `path` atomically.
    pub async fn save(&self, path: &std::path::Path, training: serde_json::Value) -> Result<()> {
        self.checkpoint(training).await?.save(path)
    }
}

/// FNV-1a over every tensor's name, shape and value bits (in name order).
fn weights_hash(ckpt: &Checkpoint) -> u64 {
    let mut h = Fnv1a::default();
    for (name, t) in &ckpt.tensors {
        h.eat(name.as_bytes());
        for &d in &t.shape {
            h.eat(&(d as u64).to_le_bytes());
        }
        for v in &t.data {
            h.eat(&v.to_bits().to_le_bytes());
        }
    }
    h.value()
}
