//! DDIM (Song et al. 2021) over integer VP timesteps; eta = 1 on uniform steps is DDPM's
//! ancestral sampler with the posterior variance of each (strided) step.

use super::context::Context;
use super::timesteps::{distinct_integers, vp_times, Spacing};
use crate::diffusion::process::combine;
use crate::{Error, Result, Tensor};

/// x_prev = sqrt(ab_prev) x0 + sqrt(1 - ab_prev - s²) eps + s z with
/// s = eta sqrt((1 - ab_prev)/(1 - ab) · (1 - ab/ab_prev)); the last step lands on x0. The
/// timesteps are the spacing's or the `given` ones, rounded to distinct integers.
pub(super) async fn run(
    ctx: &mut Context<'_, '_>,
    steps: usize,
    eta: f64,
    spacing: Spacing,
    given: Option<&[f64]>,
) -> Result<Tensor> {
    if !(0.0..=1.0).contains(&eta) {
        return Err(Error::Diffusion(format!(
            "ddim: eta must lie in [0, 1], got {eta}"
        )));
    }
    let alpha_bars = ctx
        .marginals
        .alpha_bars()
        .cloned()
        .ok_or_else(|| Error::Diffusion("ddim/ddpm need a VP process".into()))?;
    let from = ctx.first_time(alpha_bars.last()).round();
    let times = match given {
        Some(times) => times.to_vec(),
        None => vp_times(&alpha_bars, spacing, steps, from),
    };
    let times = distinct_integers(&times, from as usize + 1, "ddim/ddpm")?;
    let mut x = ctx.initial(1.0)?;
    for (i, &t) in times.iter().enumerate() {
        let (eps, x0) = ctx.eps_and_x0(&x, t)?;
        let ab = alpha_bars.alpha_bar(t);
        let ab_prev = times.get(i + 1).map_or(1.0, |&p| alpha_bars.alpha_bar(p));
        let var = eta * eta * (1.0 - ab_prev) / (1.0 - ab) * (1.0 - ab / ab_prev);
        x = combine(&x0, ab_prev.sqrt(), &eps, (1.0 - ab_prev - var).max(0.0).sqrt())?;
        if var > 0.0 {
            x = x.add(&ctx.noise(var.sqrt())?)?;
        }
        ctx.report(i, (t, times.get(i + 1).copied()), &x, Some(&x0))
            .await?;
    }
    Ok(x)
}
