//! Reverse-SDE samplers for VP and VE: Euler–Maruyama, and predictor–corrector (reverse-diffusion
//! predictor + Langevin corrector with a target signal-to-noise ratio, Song et al. 2021).

use super::context::Context;
use super::timesteps::linspace;
use crate::diffusion::process::{combine, Marginals, Sde};
use crate::{Error, Result, Tensor};

/// The continuous SDE of a VP or VE process, or an error naming `sampler`.
pub(super) fn reverse_sde<'m>(marginals: &'m Marginals, sampler: &str) -> Result<Sde<'m>> {
    marginals
        .sde()
        .ok_or_else(|| Error::Diffusion(format!("{sampler} needs a VP or VE process")))
}

/// x <- x - (f x - g² score) dt + g sqrt(dt) z over `steps` equal steps; the last step
/// returns its mean.
pub(super) async fn euler_maruyama(ctx: &mut Context<'_, '_>, steps: usize) -> Result<Tensor> {
    let marginals = ctx.marginals.clone();
    let sde = reverse_sde(&marginals, "euler-maruyama")?;
    let times = linspace(ctx.first_time(sde.start), sde.end, steps + 1);
    let mut x = ctx.initial(sde.prior_std())?;
    for i in 0..steps {
        let (t, dt) = (times[i], times[i] - times[i + 1]);
        let score = ctx.score(&x, t)?;
        let (f, g2) = sde.coefficients(t);
        let mean = combine(&x, 1.0 - f * dt, &score, g2 * dt)?;
        let x0 = if ctx.watched() {
            Some(ctx.x0_from_score(&x, &score, t)?)
        } else {
            None
        };
        x = if i + 1 < steps {
            mean.add(&ctx.noise((g2 * dt).sqrt())?)?
        } else {
            mean
        };
        ctx.report(i, (t, resume_time(&times, i)), &x, x0.as_ref())
            .await?;
    }
    Ok(x)
}

/// Per step: `corrector_steps` Langevin steps at t with step size 2 alpha (snr |z| / |score|)²
/// (alpha = 1 - beta for VP, 1 for VE; norms averaged over the batch, computed on the GPU),
/// then the reverse of the forward transition t_next -> t: x <- (x + q score) / r + sqrt(q) z
/// with r = alpha_t / alpha_next, q = std_t² - r² std_next² (DDPM's ancestral step for VP).
/// The last step returns its mean.
pub(super) async fn predictor_corrector(
    ctx: &mut Context<'_, '_>,
    steps: usize,
    snr: f64,
    corrector_steps: usize,
) -> Result<Tensor> {
    if snr.is_nan() || snr <= 0.0 {
        return Err(Error::Diffusion(format!("pc: snr must be positive, got {snr}")));
    }
    let marginals = ctx.marginals.clone();
    let sde = reverse_sde(&marginals, "pc")?;
    let times = linspace(ctx.first_time(sde.start), sde.end, steps + 1);
    let mut x = ctx.initial(sde.prior_std())?;
    for i in 0..steps {
        let (t, t_next) = (times[i], times[i + 1]);
        let (f, _) = sde.coefficients(t);
        let alpha = 1.0 + 2.0 * f;
        for _ in 0..corrector_steps {
            let score = ctx.score(&x, t)?;
            let z = ctx.noise(1.0)?;
            let ratio = mean_norm(&z)?.div(&mean_norm(&score)?)?;
            let step = ratio.square()?.mul_scalar((2.0 * alpha * snr * snr) as f32)?;
            let noise_scale = step.mul_scalar(2.0)?.sqrt()?;
            x = x.add(&score.mul(&step)?)?.add(&z.mul(&noise_scale)?)?;
        }
        let (now, next) = (marginals.level(t as f32), marginals.level(t_next as f32));
        let r = now.alpha / next.alpha;
        let q = (now.std * now.std - r * r * next.std * next.std).max(0.0);
        let score = ctx.score(&x, t)?;
        let mean = combine(&x, 1.0 / r, &score, q / r)?;
        let x0 = if ctx.watched() {
            Some(ctx.x0_from_score(&x, &score, t)?)
        } else {
            None
        };
        x = if i + 1 < steps {
            mean.add(&ctx.noise(q.sqrt())?)?
        } else {
            mean
        };
        ctx.report(i, (t, resume_time(&times, i)), &x, x0.as_ref())
            .await?;
    }
    Ok(x)
}

/// Where a run resumes after step `i` of a grid of `times` (steps + 1 points): the next step's
/// time, None after the last step.
pub(super) fn resume_time(times: &[f64], i: usize) -> Option<f64> {
    (i + 2 < times.len()).then(|| times[i + 1])
}

/// Mean over the batch of each example's L2 norm, as a [1] tensor.
fn mean_norm(v: &Tensor) -> Result<Tensor> {
    let n = v.shape().first().copied().unwrap_or(1).max(1);
    v.reshape(&[n, v.numel() / n])?
        .square()?
        .sum(&[1], false)?
        .sqrt()?
        .mean_all()
}
