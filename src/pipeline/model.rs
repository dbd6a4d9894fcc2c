//! A trained model ready to sample (`TrainedModel`: a checkpoint's EMA weights, its training
//! state and packed weights) and `Sampling`: a network with the model and process it learned.

use super::run::sample_net;
use super::SampleRequest;
use crate::checkpoint::compressed::stored_quantized;
use crate::checkpoint::Checkpoint;
use crate::diffusion::{Denoiser, NetDenoiser, OnStep, Output, Process};
use crate::models::summary::WeightRole;
use crate::models::{DiffusionNet, ModelConfig, SkipType};
use crate::nn::Weight;
use crate::ops::random::{without_drawing, Rng};
use crate::ops::PackedWeights;
use crate::run_state::{saved_state, TrainState};
use crate::{DType, Error, Gpu, Result, Tensor};
use std::path::Path;

/// The model `wgdiff sample`, `eval`, the experiments, the app and the page use when none is
/// given: the EMA-only export (`wgdiff export`, 2.3 MB instead of the training checkpoint's
/// 9 MB) of a `wgdiff train` run; the commands are in assets/models/README.md.
pub const DEFAULT_CHECKPOINT: &str = "assets/models/mnist-small.safetensors";

/// Images of [`Sampling::check_output_scale`]'s network call.
const PROBE_IMAGES: usize = 2;

/// How [`Sampling::check_output_scale`] judges a loaded model's output from pure noise, in the
/// units it was trained to predict: what that is, the largest RMS accepted, and a trained
/// one's. Noise (eps, or a score times its std) has RMS 1; data lie in [-1, 1], and so does v,
/// which at pure noise is minus the data. Measured from pure noise: the shipped v U-Net 0.83,
/// with its weights doubled 1.78 (its samples noise); the eps U-Net shipped until 2026-12-07
/// 1.01, doubled 3.47 (its samples black).
fn output_judgement(output: Output) -> (&'static str, f64, &'static str) {
    const DATA: &str = "at most 1 (data lie in [-1, 1])";
    match output {
        Output::Eps | Output::Score => ("noise", 3.0, "about 1"),
        Output::V => ("v", 1.5, DATA),
        Output::X0 => ("data", 1.5, DATA),
    }
}

/// A network to sample from with the configuration and process it was trained with.
#[derive(Clone, Copy)]
pub struct Sampling<'a> {
    pub net: &'a dyn DiffusionNet,
    pub model: &'a ModelConfig,
    pub process: &'a Process,
}

impl Sampling<'_> {
    /// Errors, naming `origin`, when the network's weights are finite but blown up (a diverged
    /// run's checkpoint): from pure noise a trained network predicts its target (noise, v or
    /// data) with RMS about 1 or less ([`output_judgement`]), an untrained one less; a diverged
    /// one predicts more, and its samples come out black or noise. One network call on two
    /// images.
    pub async fn check_output_scale(&self, gpu: &Gpu, origin: &str) -> Result<()> {
        crate::without_grad(self.output_scale_check(gpu, origin)).await
    }

    async fn output_scale_check(&self, gpu: &Gpu, origin: &str) -> Result<()> {
        let marginals = self.process.marginals()?;
        let t = marginals.noisiest_time();
        let level = marginals.level(t);
        let [c, h, w] = self.model.image_shape();
        let shape = [PROBE_IMAGES, c, h, w];
        let x = Rng::new(0).normal(gpu, &shape, 0.0, level.std as f32, DType::F32)?;
        let denoiser = match self.model.classes() {
            Some(null) => NetDenoiser::conditional(self.net, vec![null as u32; PROBE_IMAGES]),
            None => NetDenoiser::new(self.net),
        };
        // Judged in the units of what the network was trained to output: at pure noise, eps
        // from v or x0 is about x whatever the network says, so converting would hide a
        // diverged v or x0 network. A score is judged as the noise it implies (std times it).
        let output = marginals.output();
        // A probe of 2 images is not worth timing kernel candidates for.
        let judged = crate::gpu::without_measuring(|| {
            let raw = denoiser.predict(&x, t, 0)?;
            match output {
                Output::Score => marginals.eps(&raw, &x, level),
                Output::Eps | Output::V | Output::X0 => Ok(raw),
            }
        })?;
        let judged = judged.to_vec_async().await?;
        let rms = (judged.iter().map(|&e| e as f64 * e as f64).sum::<f64>() / judged.len() as f64).sqrt();
        let (predicts, limit, trained) = output_judgement(output);
        if rms.is_finite() && rms <= limit {
            return Ok(());
        }
        let mut largest = (String::new(), 0f32);
        for (name, p) in self.net.named_params() {
            let w = p.to_vec_async().await?.iter().fold(0f32, |m, v| m.max(v.abs()));
            if w > largest.1 {
                largest = (name, w);
            }
        }
        Err(Error::Checkpoint {
            path: origin.into(),
            msg: format!(
                "its network predicts {} of RMS {} from pure noise, where a trained one's is {}: \
                 the weights are those of a diverged run (largest weight: |w| = {:.3} in {}), and its samples would be black or noise. \
                 Sample an earlier checkpoint of the run, or train again with a lower --lr",
                predicts,
                if rms < 1e4 { format!("{rms:.2}") } else { format!("{rms:.2e}") },
                trained,
                largest.1,
                largest.0
            ),
        })
    }

    /// Draws `request.count` images; returns them as a [N, C, H, W] tensor and the number of
    /// network evaluations; `on_step` sees every step (see [`sample_net`]).
    pub async fn sample<'s>(
        &self,
        gpu: &Gpu,
        request: &SampleRequest,
        on_step: Option<&'s mut OnStep<'s>>,
    ) -> Result<(Tensor, usize)> {
        sample_net(gpu, self.net, self.model, self.process, request, None, on_step).await
    }

    /// Draws `request.count` images in batches of at most `batch` ([`SampleRequest::chunks`]),
    /// reading each back: the images' values ([N, C, H, W] on the host) and the network
    /// evaluations; `progress(done)` after each batch. A count whose images would not fit in
    /// the free host memory is refused up front with the figures.
    pub async fn sample_in_batches(
        &self,
        gpu: &Gpu,
        request: &SampleRequest,
        batch: usize,
        mut progress: impl FnMut(usize),
    ) -> Result<(Vec<f32>, usize)> {
        let [c, h, w] = self.model.image_shape();
        let values = (request.count() as u64).saturating_mul((c * h * w) as u64);
        if let Some(short) = crate::host_memory::shortfall(values.saturating_mul(4)) {
            return Err(Error::Config(format!(
                "{} images of {c}x{h}x{w} {short}; draw fewer at a time",
                request.count()
            )));
        }
        let (mut images, mut evaluations) = (Vec::new(), 0);
        for part in request.chunks(batch) {
            let (drawn, evals) = self.sample(gpu, &part, None).await?;
            images.extend(drawn.to_vec_async().await?);
            evaluations += evals;
            progress(images.len() / (c * h * w));
        }
        Ok((images, evaluations))
    }
}

/// A trained network ready to sample, with the state it was trained in.
pub struct TrainedModel {
    pub net: Box<dyn DiffusionNet>,
    pub state: TrainState,
    /// Conv and linear weights stored as integers (a `wgdiff compress` checkpoint) that run
    /// packed in the kernels.
    pub packed_weights: usize,
}

/// The checkpoint at `path`: a wgdiff checkpoint file, or a diffusers model folder
/// ([`super::diffusers::read_folder`]).
pub fn read_checkpoint(path: &Path) -> Result<Checkpoint> {
    if path.is_dir() {
        super::diffusers::read_folder(path)
    } else {
        Checkpoint::load(path)
    }
}

impl TrainedModel {
    /// Loads a `wgdiff train` checkpoint with its EMA weights (the sampling weights), or a
    /// diffusers model folder ([`super::diffusers::read_folder`]).
    pub fn load(gpu: &Gpu, path: &Path) -> Result<TrainedModel> {
        Self::load_with_skip_type(gpu, path, None)
    }

    /// [`TrainedModel::load`], with the adaptive U-Net's skip type replaced when `skip_type` is
    /// given (the `interpolate` path's 1x1 convs, absent from other checkpoints, start fresh;
    /// every other tensor must be there). A missing default model says where it ships; a
    /// diverged run's weights are refused ([`Sampling::check_output_scale`]).
    pub fn load_with_skip_type(gpu: &Gpu, path: &Path, skip_type: Option<SkipType>) -> Result<TrainedModel> {
        if path.as_os_str() == DEFAULT_CHECKPOINT && !crate::fsio::exists(path) {
            return Err(Error::Checkpoint {
                path: DEFAULT_CHECKPOINT.into(),
                msg: format!(
                    "not found: the default model ships in a wgdiff checkout's assets/models/; run wgdiff \
                     there, set {} to that checkout's assets folder, or pass another checkpoint",
                    crate::fsio::ASSETS_ENV
                ),
            });
        }
        let ckpt = read_checkpoint(path)?;
        let origin = path.display().to_string();
        let model = Self::from_checkpoint(gpu, &ckpt, &origin, skip_type)?;
        pollster::block_on(model.sampling().check_output_scale(gpu, &origin))?;
        Ok(model)
    }

    /// [`TrainedModel::load_with_skip_type`] on a checkpoint already read (from bytes in the
    /// browser); `origin` names it in errors.
    pub fn from_checkpoint(
        gpu: &Gpu,
        ckpt: &Checkpoint,
        origin: &str,
        skip_type: Option<SkipType>,
    ) -> Result<TrainedModel> {
        let mut state = saved_state(ckpt, origin)?;
        if let Some(skip_type) = skip_type {
            state.model = state.model.with_skip_type(skip_type)?;
        }
        // Every value of the checkpoint's own model is loaded next, so its initial values are
        // not drawn (a replaced skip type's new convs are): the float weights that packed ones
        // replace are never written.
        let build = || state.model.build(gpu, 0);
        let net = ckpt.build_within_size(origin, || match skip_type {
            None => without_drawing(build),
            Some(_) => build(),
        })?;
        let packed = attach_packed(ckpt, "ema.", net.as_ref(), gpu, origin)?;
        let params: Vec<(String, Tensor)> = net
            .named_params()
            .into_iter()
            .filter(|(name, _)| !name.starts_with("interp.") || ckpt.contains(&format!("ema.{name}")))
            .filter(|(name, _)| !packed.iter().any(|(p, _)| p == name))
            .collect();
        ckpt.restore("ema.", &params, origin)?;
        ckpt.restore("buffer.", &net.named_buffers(), origin)?;
        drop(params);
        // The model samples: a packed weight keeps only its integers on the device.
        for (_, weight) in &packed {
            weight.release_float()?;
        }
        if !packed.is_empty() {
            gpu.pool().trim();
        }
        Ok(TrainedModel {
            net,
            state,
            packed_weights: packed.len(),
        })
    }

    /// The network with its model and process.
    pub fn sampling(&self) -> Sampling<'_> {
        Sampling {
            net: self.net.as_ref(),
            model: &self.state.model,
            process: &self.state.process,
        }
    }

    /// [C, H, W] of the images the model makes.
    pub fn image_shape(&self) -> [usize; 3] {
        self.state.model.image_shape()
    }
}

/// Attaches the packed integer form of every conv and linear weight of `net` stored as
/// integers under `prefix` (the kernels then run them); returns the weights attached, by name.
fn attach_packed(
    ckpt: &Checkpoint,
    prefix: &str,
    net: &dyn DiffusionNet,
    gpu: &Gpu,
    origin: &str,
) -> Result<Vec<(String, Weight)>> {
    let walk = net.walk(1);
    let mut attached = Vec::new();
    for w in &walk.weights {
        let Some((_, weight)) = walk.packable.iter().find(|(n, _)| *n == w.name) else {
            continue;
        };
        let key = format!("{prefix}{}", w.name);
        let shape = weight.shape();
        let Some(q) = stored_quantized(ckpt, &key, shape, origin)? else {
            continue;
        };
        let out_axis = w.role.out_axis();
        if q.axis.is_some_and(|a| a != out_axis) {
            continue;
        }
        let scales = q.scales_along(shape[out_axis]);
        let packed = match w.role {
            WeightRole::Conv => PackedWeights::conv(
                gpu,
                q.bits,
                [shape[0], shape[1], shape[2], shape[3]],
                &q.values,
                &scales,
            )?,
            WeightRole::Linear => PackedWeights::matmul(gpu, q.bits, shape[0], shape[1], &q.values, &scales)?,
            WeightRole::ConvTranspose | WeightRole::Projection => continue,
        };
        weight.attach_packed(packed)?;
        attached.push((w.name.clone(), weight.clone()));
    }
    Ok(attached)
}
