//! Sampling a trained model: load a checkpoint's EMA weights, run any sampler (with class
//! guidance and a skip schedule), and write the grid and optionally every step as frames.

use super::TrainState;
use crate::checkpoint::Checkpoint;
use crate::data::{save_grid, GridLayout};
use crate::diffusion::{NetDenoiser, SampleOptions, Sampler, Step};
use crate::models::{DiffusionNet, ModelConfig};
use crate::ops::random::Rng;
use crate::{Error, Gpu, Result, Tensor};
use std::path::{Path, PathBuf};

/// What to draw.
#[derive(Clone, Debug)]
pub struct SampleRequest {
    pub sampler: Sampler,
    /// Sampler steps (None: the sampler's default).
    pub steps: Option<usize>,
    pub count: usize,
    pub seed: u64,
    /// Skip-schedule exponent c (0: never skip levels).
    pub skip_exponent: f32,
    /// Class of every image (class-conditional models), or None for a mix of all classes
    /// (conditional models) / unconditional sampling.
    pub class: Option<u32>,
    /// Classifier-free guidance scale w (conditional models; 1 = plain conditional).
    pub guidance: f32,
    /// Folder for one PNG grid of x_t and one of the predicted x_0 per step.
    pub frames: Option<PathBuf>,
}

/// Sampler steps of [`default_sampler`] (in `wgdiff sample` and the training grids).
pub const DEFAULT_SAMPLER_STEPS: usize = 50;

/// The sampler `wgdiff sample` and the training grids use unless told otherwise: DDPM's
/// ancestral sampler for VP models (on weakly trained models its noise gives cleaner strokes
/// than deterministic DDIM), the predictor-corrector for VE, annealed Langevin for NCSN.
pub fn default_sampler(process: &crate::diffusion::Process) -> Sampler {
    use crate::diffusion::Process;
    let name = match process {
        Process::Vp { .. } => "ddpm",
        Process::Ve { .. } => "pc",
        Process::Ncsn { .. } => "ald",
    };
    name.parse().expect("a sampler name")
}

/// A trained network ready to sample, with the state it was trained in.
pub struct TrainedModel {
    pub net: Box<dyn DiffusionNet>,
    pub state: TrainState,
}

impl TrainedModel {
    /// Loads a `wgdiff train` checkpoint with its EMA weights (the sampling weights).
    pub fn load(gpu: &Gpu, path: &Path) -> Result<TrainedModel> {
        let ckpt = Checkpoint::load(path)?;
        let origin = path.display().to_string();
        let state = super::saved_state(&ckpt, &origin)?;
        let net = state.model.build(gpu, 0)?;
        ckpt.restore("ema.", &net.named_params(), &origin)?;
        ckpt.restore("buffer.", &net.named_buffers(), &origin)?;
        Ok(TrainedModel { net, state })
    }

    /// The network with its model and process, for [`super::quality`].
    pub fn sampling(&self) -> super::quality::Sampling<'_> {
        super::quality::Sampling {
            net: self.net.as_ref(),
            model: &self.state.model,
            process: &self.state.process,
        }
    }

    /// [C, H, W] of the images the model makes.
    pub fn image_shape(&self) -> [usize; 3] {
        image_shape(&self.state.model)
    }

    /// Draws `request.count` images; returns them as a [N, C, H, W] tensor and the number of
    /// network evaluations.
    pub fn sample(&self, gpu: &Gpu, request: &SampleRequest) -> Result<(Tensor, usize)> {
        sample_net(
            gpu,
            self.net.as_ref(),
            &self.state.model,
            &self.state.process,
            request,
        )
    }
}

/// [C, H, W] of a model's images.
pub fn image_shape(model: &ModelConfig) -> [usize; 3] {
    match model {
        ModelConfig::UNet(u) => [u.in_channels, u.image_size, u.image_size],
        ModelConfig::ScoreNet(s) => [s.in_channels, s.image_size, s.image_size],
    }
}

/// Samples `net` (trained on `process`) as `request` says, without gradients (no step's
/// activations are kept for a backward pass).
pub fn sample_net(
    gpu: &Gpu,
    net: &dyn DiffusionNet,
    model: &ModelConfig,
    process: &crate::diffusion::Process,
    request: &SampleRequest,
) -> Result<(Tensor, usize)> {
    let _g = crate::no_grad();
    let [c, h, w] = image_shape(model);
    let n = request.count;
    let classes = match model {
        ModelConfig::UNet(u) => u.classes,
        ModelConfig::ScoreNet(_) => None,
    };
    let denoiser = match classes {
        Some(k) => {
            let labels: Vec<u32> = match request.class {
                Some(class) if class as usize >= k => {
                    return Err(Error::Config(format!(
                        "--class {class}: the model has classes 0..{}",
                        k - 1
                    )))
                }
                Some(class) => vec![class; n],
                None => (0..n).map(|i| (i % k) as u32).collect(),
            };
            NetDenoiser::guided(net, labels, request.guidance, k as u32)
        }
        None if request.class.is_some() => {
            return Err(Error::Config(
                "--class needs a class-conditional model; this one was trained without labels".into(),
            ))
        }
        None => NetDenoiser::new(net),
    };
    let mut write_frame = |step: &Step| -> Result<()> {
        let Some(dir) = &request.frames else { return Ok(()) };
        let layout = GridLayout {
            columns: grid_columns(n),
            ..GridLayout::default()
        };
        let shape = [n, c, h, w];
        save_grid(
            dir.join(format!("step_{:04}_xt.png", step.index)),
            &step.x.to_vec()?,
            shape,
            layout,
        )?;
        if let Some(x0) = step.x0 {
            save_grid(
                dir.join(format!("step_{:04}_x0.png", step.index)),
                &x0.to_vec()?,
                shape,
                layout,
            )?;
        }
        Ok(())
    };
    let options = SampleOptions {
        steps: request.steps,
        skip_exponent: request.skip_exponent,
        on_step: request.frames.is_some().then_some(&mut write_frame),
        clip_x0: Some(1.0),
    };
    let mut rng = Rng::new(request.seed);
    let out = request
        .sampler
        .run(process, &denoiser, gpu, &[n, c, h, w], &mut rng, options)?;
    Ok((out.samples, out.evaluations))
}

/// Columns of a roughly square grid of `n` images.
pub fn grid_columns(n: usize) -> usize {
    ((n as f64).sqrt().ceil() as usize).max(1)
}

/// Writes `images` [N, C, H, W] in [-1, 1] as a PNG grid, upscaled `scale` times.
pub fn write_grid(path: &Path, images: &Tensor, scale: usize) -> Result<()> {
    let shape: [usize; 4] = images.shape().try_into().map_err(|_| {
        Error::shape(
            "write_grid",
            format!("images must be [N, C, H, W], got {:?}", images.shape()),
        )
    })?;
    let layout = GridLayout {
        columns: grid_columns(shape[0]),
        scale,
        ..GridLayout::default()
    };
    save_grid(path, &images.to_vec()?, shape, layout)
}
