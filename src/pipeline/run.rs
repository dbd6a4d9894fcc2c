//! Running a request: a network's denoiser for the request's labels and guidance, and the
//! sampler seeded and clipped as every shell samples.

use super::SampleRequest;
use crate::diffusion::{Denoiser, NetDenoiser, OnStep, Process, SampleOptions, SampleOutput, Start};
use crate::models::{DiffusionNet, ModelConfig};
use crate::ops::random::Rng;
use crate::{DType, Error, Gpu, Result, Tensor};

/// Samples `net` (trained on `process`) as `request` says, without gradients (no step's
/// activations are kept for a backward pass), from noise or from `start` (a branch of an
/// earlier run, whose steps are then the ones left); `on_step` sees every step's x_t and
/// predicted x_0 (still on the device) and may stop the run by returning an error.
pub async fn sample_net<'s>(
    gpu: &Gpu,
    net: &dyn DiffusionNet,
    model: &ModelConfig,
    process: &Process,
    request: &SampleRequest,
    start: Option<Start>,
    on_step: Option<&'s mut OnStep<'s>>,
) -> Result<(Tensor, usize)> {
    let denoiser = request_denoiser(net, model, request);
    let run = run_request(gpu, &denoiser, model, process, request, start, on_step);
    let out = crate::without_grad(run).await?;
    Ok((out.samples, out.evaluations))
}

/// The denoiser `request` samples `net` with: its class labels, guidance and guidance interval
/// (checked against the model when the request was built).
pub fn request_denoiser<'n>(
    net: &'n dyn DiffusionNet,
    model: &ModelConfig,
    request: &SampleRequest,
) -> NetDenoiser<'n> {
    let n = request.count();
    let denoiser = match model.classes() {
        Some(k) => {
            let labels: Vec<u32> = match request.class() {
                Some(class) => vec![class; n],
                None => (0..n).map(|i| (i % k) as u32).collect(),
            };
            NetDenoiser::guided(net, labels, request.guidance(), k as u32).guided_at(request.guided_times())
        }
        None => NetDenoiser::new(net),
    };
    denoiser.in_dtype(request.precision())
}

/// Runs `request`'s sampler on any denoiser of `model`'s images (e.g. [`request_denoiser`]
/// wrapped by a measurement), seeded, x_0 clipped to [-1, 1], from noise or from `start`; an
/// f16 request on an adapter without SHADER_F16 is refused by name.
pub async fn run_request<'s>(
    gpu: &Gpu,
    denoiser: &dyn Denoiser,
    model: &ModelConfig,
    process: &Process,
    request: &SampleRequest,
    start: Option<Start>,
    on_step: Option<&'s mut OnStep<'s>>,
) -> Result<SampleOutput> {
    if request.precision() == DType::F16 && !gpu.has_f16() {
        return Err(Error::Config(format!(
            "f16 sampling needs the adapter's SHADER_F16 feature, which {} lacks (as the browser's WebGPU on \
             SwiftShader does): sample in f32",
            gpu.info.name
        )));
    }
    let [c, h, w] = model.image_shape();
    let options = SampleOptions {
        steps: Some(request.steps()),
        skip: request.skip().clone(),
        cache: request.cache(),
        on_step,
        clip_x0: Some(1.0),
        start,
        timesteps: request.timesteps().map(<[f64]>::to_vec),
    };
    let mut rng = Rng::new(request.seed());
    request
        .sampler()
        .run_async(
            process,
            denoiser,
            gpu,
            &[request.count(), c, h, w],
            &mut rng,
            options,
        )
        .await
}
