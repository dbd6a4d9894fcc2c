//! Sampling a trained model: load a checkpoint's EMA weights, run any sampler (with class
//! guidance, a skip schedule and a per-step callback), and write grids of the results.

use super::TrainState;
use crate::checkpoint::Checkpoint;
use crate::diffusion::{
    FeatureCache, NetDenoiser, OnStep, Process, SampleOptions, Sampler, SkipPlan, Spacing,
};
use crate::models::{DiffusionNet, ModelConfig, SkipType};
use crate::ops::random::Rng;
use crate::{Error, Gpu, Result, Tensor};
#[cfg(not(target_arch = "wasm32"))]
use {
    crate::data::{save_grid, GridLayout},
    crate::diffusion::Step,
    std::path::Path,
};

/// The checkpoint `wgdiff sample`, `eval`, the experiments and the app use when none is given
/// (trained by `wgdiff train`; the command is in assets/models/README.md).
pub const DEFAULT_CHECKPOINT: &str = "assets/models/mnist-small.safetensors";

/// The EMA-only export of [`DEFAULT_CHECKPOINT`] (`wgdiff export`, 2.2 MB instead of 9 MB):
/// the model the web page loads.
pub const DEFAULT_EXPORT: &str = "assets/models/mnist-small-ema.safetensors";

/// What to draw.
#[derive(Clone, Debug)]
pub struct SampleRequest {
    pub sampler: Sampler,
    /// Sampler steps (None: the sampler's default).
    pub steps: Option<usize>,
    pub count: usize,
    pub seed: u64,
    /// Deep levels skipped at each step (the c-family or a searched schedule; default none).
    pub skip: SkipPlan,
    /// Reuse deep features across steps (None: compute them at every network call).
    pub cache: Option<FeatureCache>,
    /// Class of every image (class-conditional models), or None for a mix of all classes
    /// (conditional models) / unconditional sampling.
    pub class: Option<u32>,
    /// Classifier-free guidance scale w (conditional models; 1 = plain conditional).
    pub guidance: f32,
}

impl SampleRequest {
    /// This request split into requests of at most `batch` images (batch 0 counts as 1), the
    /// i-th seeded `seed + i`: how `wgdiff sample --batch` and `eval` draw any count in memory
    /// that fits (the same seed, count and batch give the same images).
    pub fn chunks(&self, batch: usize) -> impl Iterator<Item = SampleRequest> + '_ {
        let batch = batch.max(1);
        (0..self.count)
            .step_by(batch)
            .enumerate()
            .map(move |(i, start)| SampleRequest {
                count: batch.min(self.count - start),
                seed: self.seed.wrapping_add(i as u64),
                ..self.clone()
            })
    }

    /// Checks the request against the model it will sample, naming the value and the fix.
    pub fn validate(&self, model: &ModelConfig) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(msg));
        if self.count == 0 {
            return bad("the image count must be at least 1".into());
        }
        if self.steps == Some(0) {
            return bad("sampler steps must be at least 1".into());
        }
        if let SkipPlan::Exponent(c) = self.skip {
            super::config::check_finite_nonnegative("the skip exponent c", c, "never skip levels")?;
        }
        if !(0.0..=MAX_GUIDANCE).contains(&self.guidance) {
            return bad(format!(
                "the guidance scale must be between 0 and {MAX_GUIDANCE} (1: plain conditional, 2-4: sharper digits), got {}",
                self.guidance
            ));
        }
        if model.classes().is_none() && self.guidance != 1.0 {
            return bad(format!(
                "guidance {} needs a class-conditional model; this one was trained without labels (leave out --guidance)",
                self.guidance
            ));
        }
        Ok(())
    }
}

/// The largest classifier-free guidance scale a request may ask for: far past it every
/// pixel saturates.
pub const MAX_GUIDANCE: f32 = 50.0;

/// Sampler steps of [`default_sampler`] (in `wgdiff sample` and the training grids).
pub const DEFAULT_SAMPLER_STEPS: usize = 50;

/// The sampler `wgdiff sample` and the training grids use unless told otherwise: DDPM's
/// ancestral sampler for VP models (on weakly trained models its noise gives cleaner strokes
/// than deterministic DDIM), the predictor-corrector for VE, annealed Langevin for NCSN.
pub fn default_sampler(process: &Process) -> Sampler {
    let name = match process {
        Process::Vp { .. } => "ddpm",
        Process::Ve { .. } => "pc",
        Process::Ncsn { .. } => "ald",
    };
    name.parse().expect("a sampler name")
}

/// The sampler and step count a user's choices give for a model trained on `process`: the
/// named sampler (else [`default_sampler`] at [`DEFAULT_SAMPLER_STEPS`]), with DDIM's `eta`
/// and `spacing` when given (an error for any other sampler).
pub fn choose_sampler(
    process: &Process,
    name: Option<&str>,
    steps: Option<usize>,
    eta: Option<f32>,
    spacing: Option<Spacing>,
) -> Result<(Sampler, Option<usize>)> {
    let sampler = match name {
        Some(name) => name.parse()?,
        None => default_sampler(process),
    };
    let sampler = match (sampler, eta, spacing) {
        (Sampler::Ddim { eta, spacing }, e, s) => Sampler::Ddim {
            eta: e.unwrap_or(eta),
            spacing: s.unwrap_or(spacing),
        },
        (other, None, None) => other,
        (other, _, _) => {
            return Err(Error::Config(format!(
                "eta and spacing (--eta, --spacing) set the ddim sampler; this run uses {other} (choose --sampler ddim)"
            )))
        }
    };
    Ok((sampler, steps.or(name.is_none().then_some(DEFAULT_SAMPLER_STEPS))))
}

/// A network to sample from with the configuration and process it was trained with.
#[derive(Clone, Copy)]
pub struct Sampling<'a> {
    pub net: &'a dyn DiffusionNet,
    pub model: &'a ModelConfig,
    pub process: &'a Process,
}

impl Sampling<'_> {
    /// Draws `request.count` images; returns them as a [N, C, H, W] tensor and the number of
    /// network evaluations; `on_step` sees every step (see [`sample_net`]).
    pub async fn sample<'s>(
        &self,
        gpu: &Gpu,
        request: &SampleRequest,
        on_step: Option<&'s mut OnStep<'s>>,
    ) -> Result<(Tensor, usize)> {
        sample_net(gpu, self.net, self.model, self.process, request, on_step).await
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
        request.validate(self.model)?;
        let [c, h, w] = self.model.image_shape();
        let values = (request.count as u64).saturating_mul((c * h * w) as u64);
        if let Some(short) = crate::host_memory::shortfall(values.saturating_mul(4)) {
            return Err(Error::Config(format!(
                "{} images of {c}x{h}x{w} {short}; draw fewer at a time",
                request.count
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

impl TrainedModel {
    /// Loads a `wgdiff train` checkpoint with its EMA weights (the sampling weights).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(gpu: &Gpu, path: &Path) -> Result<TrainedModel> {
        Self::load_with_skip_type(gpu, path, None)
    }

    /// [`TrainedModel::load`], with the adaptive U-Net's skip type replaced when `skip_type` is
    /// given (the `interpolate` path's 1x1 convs, absent from other checkpoints, start fresh;
    /// every other tensor must be there).
    /// A missing default model says where it ships.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_with_skip_type(gpu: &Gpu, path: &Path, skip_type: Option<SkipType>) -> Result<TrainedModel> {
        if path.as_os_str() == DEFAULT_CHECKPOINT && !path.exists() {
            return Err(Error::Checkpoint {
                path: DEFAULT_CHECKPOINT.into(),
                msg: "not found: the default model ships in the repository's assets/models/; run wgdiff \
                      from the repository folder, or pass another checkpoint"
                    .into(),
            });
        }
        let ckpt = Checkpoint::load(path)?;
        Self::from_checkpoint(gpu, &ckpt, &path.display().to_string(), skip_type)
    }

    /// [`TrainedModel::load_with_skip_type`] on a checkpoint already read (from bytes in the
    /// browser); `origin` names it in errors.
    pub fn from_checkpoint(
        gpu: &Gpu,
        ckpt: &Checkpoint,
        origin: &str,
        skip_type: Option<SkipType>,
    ) -> Result<TrainedModel> {
        let mut state = super::saved_state(ckpt, origin)?;
        if let Some(skip_type) = skip_type {
            state.model = state.model.with_skip_type(skip_type)?;
        }
        let net = ckpt.build_within_size(origin, || state.model.build(gpu, 0))?;
        let params: Vec<(String, Tensor)> = net
            .named_params()
            .into_iter()
            .filter(|(name, _)| !name.starts_with("interp.") || ckpt.contains(&format!("ema.{name}")))
            .collect();
        ckpt.restore("ema.", &params, origin)?;
        ckpt.restore("buffer.", &net.named_buffers(), origin)?;
        let packed_weights = crate::compress::attach_packed(ckpt, "ema.", net.as_ref(), gpu, origin)?;
        Ok(TrainedModel {
            net,
            state,
            packed_weights,
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

/// Samples `net` (trained on `process`) as `request` says, without gradients (no step's
/// activations are kept for a backward pass); `on_step` sees every step's x_t and predicted
/// x_0 (still on the device) and may stop the run by returning an error.
pub async fn sample_net<'s>(
    gpu: &Gpu,
    net: &dyn DiffusionNet,
    model: &ModelConfig,
    process: &Process,
    request: &SampleRequest,
    on_step: Option<&'s mut OnStep<'s>>,
) -> Result<(Tensor, usize)> {
    let _g = crate::no_grad();
    let denoiser = request_denoiser(net, model, request)?;
    let out = run_request(gpu, &denoiser, model, process, request, on_step).await?;
    Ok((out.samples, out.evaluations))
}

/// The denoiser `request` samples `net` with: its class labels and guidance (checked against
/// the model).
pub fn request_denoiser<'n>(
    net: &'n dyn DiffusionNet,
    model: &ModelConfig,
    request: &SampleRequest,
) -> Result<NetDenoiser<'n>> {
    request.validate(model)?;
    let n = request.count;
    match model.classes() {
        Some(k) => {
            let labels: Vec<u32> = match request.class {
                Some(class) if class as usize >= k => {
                    return Err(Error::Config(format!(
                        "class {class}: the model has classes 0..{}",
                        k - 1
                    )))
                }
                Some(class) => vec![class; n],
                None => (0..n).map(|i| (i % k) as u32).collect(),
            };
            Ok(NetDenoiser::guided(net, labels, request.guidance, k as u32))
        }
        None if request.class.is_some() => Err(Error::Config(
            "a class needs a class-conditional model; this one was trained without labels".into(),
        )),
        None => Ok(NetDenoiser::new(net)),
    }
}

/// Runs `request`'s sampler on any denoiser of `model`'s images (e.g. [`request_denoiser`]
/// wrapped by a measurement), seeded, x_0 clipped to [-1, 1].
pub async fn run_request<'s>(
    gpu: &Gpu,
    denoiser: &dyn crate::diffusion::Denoiser,
    model: &ModelConfig,
    process: &Process,
    request: &SampleRequest,
    on_step: Option<&'s mut OnStep<'s>>,
) -> Result<crate::diffusion::SampleOutput> {
    let [c, h, w] = model.image_shape();
    let options = SampleOptions {
        steps: request.steps,
        skip: request.skip.clone(),
        cache: request.cache,
        on_step,
        clip_x0: Some(1.0),
    };
    let mut rng = Rng::new(request.seed);
    request
        .sampler
        .run_async(
            process,
            denoiser,
            gpu,
            &[request.count, c, h, w],
            &mut rng,
            options,
        )
        .await
}

/// Writes `step`'s x_t and predicted x_0 as `step_NNNN_xt.png` / `step_NNNN_x0.png` grids into
/// `dir` (what `wgdiff sample --frames` does after every step).
#[cfg(not(target_arch = "wasm32"))]
pub fn save_step_frames(dir: &Path, step: &Step) -> Result<()> {
    write_grid(&dir.join(format!("step_{:04}_xt.png", step.index)), step.x, 1)?;
    if let Some(x0) = step.x0 {
        write_grid(&dir.join(format!("step_{:04}_x0.png", step.index)), x0, 1)?;
    }
    Ok(())
}

/// Columns of a roughly square grid of `n` images.
pub fn grid_columns(n: usize) -> usize {
    ((n as f64).sqrt().ceil() as usize).max(1)
}

/// Writes `images` [N, C, H, W] in [-1, 1] as a PNG grid, upscaled `scale` times.
#[cfg(not(target_arch = "wasm32"))]
pub fn write_grid(path: &Path, images: &Tensor, scale: usize) -> Result<()> {
    let shape: [usize; 4] = images.shape().try_into().map_err(|_| {
        Error::shape(
            "write_grid",
            format!("images must be [N, C, H, W], got {:?}", images.shape()),
        )
    })?;
    save_grid_of(path, &images.to_vec()?, shape, scale)
}

/// [`write_grid`] of images already on the host (`shape` = [N, C, H, W]).
#[cfg(not(target_arch = "wasm32"))]
pub fn save_grid_of(path: &Path, images: &[f32], shape: [usize; 4], scale: usize) -> Result<()> {
    let layout = GridLayout {
        columns: grid_columns(shape[0]),
        scale,
        ..GridLayout::default()
    };
    save_grid(path, images, shape, layout)
}
