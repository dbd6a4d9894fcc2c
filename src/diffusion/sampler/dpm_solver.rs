//! DPM-Solver++(2M) (Lu et al. 2022, Algorithm 2): multistep second-order steps on the
//! data prediction x0 in lambda = log(alpha/std), first order at the first (and a short run's
//! last) step; and its SDE form (diffusers' `sde-dpmsolver++`), which adds fresh noise every step.

use super::context::Context;
use super::timesteps::{vp_times, Spacing};
use crate::diffusion::process::combine;
use crate::{Error, Result, Tensor};

/// Runs below this many steps take a first-order last step (the reference's
/// `lower_order_final`), which is more stable for very few steps.
const LOWER_ORDER_FINAL_BELOW: usize = 15;

/// `steps` network evaluations from T-1 (or the start's time) to timestep 0 (not evaluated
/// there), at the spacing's timesteps or at `given` ones (then on to 0). `sde`: the
/// stochastic solver of the reverse SDE, which shrinks x by a further e^-h each step, weighs
/// the data prediction by alpha_next (1 - e^-2h) instead of alpha_next (1 - e^-h) and adds
/// noise of std std_next sqrt(1 - e^-2h) (fresh every step, so runs from the same initial
/// noise differ).
pub(super) async fn run(
    ctx: &mut Context<'_, '_>,
    steps: usize,
    spacing: Spacing,
    sde: bool,
    given: Option<&[f64]>,
) -> Result<Tensor> {
    let alpha_bars = ctx
        .marginals
        .alpha_bars()
        .cloned()
        .ok_or_else(|| Error::Diffusion("dpm-solver++ needs a VP process".into()))?;
    let times = match given {
        Some(times) => times.iter().copied().chain([0.0]).collect(),
        None => vp_times(&alpha_bars, spacing, steps + 1, ctx.first_time(alpha_bars.last())),
    };
    let level = |t: f64| {
        let ab = alpha_bars.alpha_bar(t);
        let (alpha, std) = (ab.sqrt(), (1.0 - ab).sqrt());
        (alpha, std, (alpha / std).ln())
    };
    let mut x = ctx.initial(1.0)?;
    let mut previous: Option<(Tensor, f64)> = None; // x0 of the last step and its h
    for i in 0..steps {
        let (t, t_next) = (times[i], times[i + 1]);
        let x0 = ctx.x0(&x, t)?;
        let (_, std, lambda) = level(t);
        let (alpha_next, std_next, lambda_next) = level(t_next);
        let h = lambda_next - lambda;
        let first_order = i + 1 == steps && steps < LOWER_ORDER_FINAL_BELOW;
        let d = match &previous {
            Some((x0_prev, h_prev)) if !first_order => {
                let r = h_prev / h;
                combine(&x0, 1.0 + 0.5 / r, x0_prev, -0.5 / r)?
            }
            _ => x0.clone(),
        };
        if sde {
            // x_next = (std_next / std) e^{-h} x + alpha_next (1 - e^{-2h}) D + std_next sqrt(1 - e^{-2h}) z
            let kept = -(-2.0 * h).exp_m1();
            x = combine(&x, std_next / std * (-h).exp(), &d, alpha_next * kept)?;
            if std_next > 0.0 {
                x = x.add(&ctx.noise(std_next * kept.sqrt())?)?;
            }
        } else {
            // x_next = (std_next / std) x - alpha_next (e^{-h} - 1) D
            x = combine(&x, std_next / std, &d, -alpha_next * (-h).exp_m1())?;
        }
        let resume_t = (i + 1 < steps).then_some(t_next);
        ctx.report(i, (t, resume_t), &x, Some(&x0)).await?;
        previous = Some((x0, h));
    }
    Ok(x)
}
