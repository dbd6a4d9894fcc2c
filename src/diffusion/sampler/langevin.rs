//! Annealed Langevin dynamics (Song & Ermon 2019): Langevin steps x <- x + (a/2) score + sqrt(a) z
//! at each noise level, largest first, with a = step_size · sigma_i² / sigma_min².

use super::context::Context;
use super::timesteps::linspace;
use crate::diffusion::process::combine;
use crate::{Error, Result, Tensor};

/// NCSN: its own levels (`levels` must match them); VE: `levels` geometric stds from std(1)
/// to std(eps) (from the start's std when there is one). Starts from N(0, sigma_max² I) or the
/// start; the very last step adds no noise.
pub(super) async fn run(
    ctx: &mut Context<'_, '_>,
    levels: usize,
    steps_per_level: usize,
    step_size: f64,
) -> Result<Tensor> {
    if steps_per_level == 0 || step_size.is_nan() || step_size <= 0.0 {
        return Err(Error::Diffusion(format!(
            "ald: needs steps_per_level >= 1 and step_size > 0, got {steps_per_level} and {step_size}"
        )));
    }
    let schedule = level_schedule(ctx, levels)?;
    let sigma_min = schedule.last().map_or(1.0, |&(_, s)| s);
    let mut x = ctx.initial(schedule[0].1)?;
    for (i, &(t, sigma)) in schedule.iter().enumerate() {
        let a = step_size * sigma * sigma / (sigma_min * sigma_min);
        let mut x0 = None;
        for s in 0..steps_per_level {
            let score = ctx.score(&x, t)?;
            if s + 1 == steps_per_level && ctx.watched() {
                x0 = Some(ctx.x0_from_score(&x, &score, t)?);
            }
            x = combine(&x, 1.0, &score, 0.5 * a)?;
            if i + 1 < schedule.len() || s + 1 < steps_per_level {
                x = x.add(&ctx.noise(a.sqrt())?)?;
            }
        }
        let resume_t = schedule.get(i + 1).map(|&(next, _)| next);
        ctx.report(i, (t, resume_t), &x, x0.as_ref()).await?;
    }
    Ok(x)
}

/// (network time, sigma) of every level, largest sigma first (from the start's level on, for
/// a run that does not begin from noise).
fn level_schedule(ctx: &Context, levels: usize) -> Result<Vec<(f64, f64)>> {
    if let Some(sigmas) = ctx.marginals.sigmas() {
        let first = (ctx.first_time(0.0).round() as usize).min(sigmas.len() - 1);
        let remaining = sigmas.len() - first;
        if levels != remaining {
            return Err(Error::Diffusion(format!(
                "ald: {remaining} of the NCSN process's {} trained levels lie ahead; run all of them (steps = {remaining}), not {levels}",
                sigmas.len(),
            )));
        }
        return Ok(sigmas
            .iter()
            .enumerate()
            .skip(first)
            .map(|(i, &s)| (i as f64, s))
            .collect());
    }
    let sde = ctx
        .marginals
        .sde()
        .ok_or_else(|| Error::Diffusion("ald needs a VE or NCSN process".into()))?;
    let (hi, lo) = (
        ctx.marginals.level(ctx.first_time(sde.start) as f32).std,
        ctx.marginals.level(sde.end as f32).std,
    );
    linspace(hi.ln(), lo.ln(), levels)
        .into_iter()
        .map(|log_sigma| {
            let sigma = log_sigma.exp();
            let t = ctx
                .marginals
                .ve_time_of_std(sigma)
                .ok_or_else(|| Error::Diffusion("ald needs a VE or NCSN process".into()))?;
            Ok((t, sigma))
        })
        .collect()
}
