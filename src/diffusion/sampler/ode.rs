//! The probability-flow ODE dx/dt = f x - ½ g² score (VP, VE), integrated from pure noise with
//! Heun's method or adaptive Dormand–Prince RK45 (error control as scipy's `solve_ivp`).

use super::context::Context;
use super::sde::{resume_time, reverse_sde};
use super::timesteps::linspace;
use crate::diffusion::process::{combine, Sde};
use crate::{Error, Result, Tensor};

/// Attempted RK45 steps (accepted + rejected) before giving up.
const MAX_RK45_ATTEMPTS: usize = 10_000;

/// The ODE's right-hand side at (x, t), and the score it used.
fn velocity(ctx: &mut Context<'_, '_>, sde: &Sde, x: &Tensor, t: f64) -> Result<(Tensor, Tensor)> {
    let score = ctx.score(x, t)?;
    let (f, g2) = sde.coefficients(t);
    Ok((combine(x, f, &score, -0.5 * g2)?, score))
}

/// Heun's method (explicit trapezoid) on `steps` equal time steps: 2 evaluations per step.
pub(super) async fn heun(ctx: &mut Context<'_, '_>, steps: usize) -> Result<Tensor> {
    let marginals = ctx.marginals.clone();
    let sde = reverse_sde(&marginals, "ode-heun")?;
    let times = linspace(ctx.first_time(sde.start), sde.end, steps + 1);
    let mut x = ctx.initial(sde.prior_std())?;
    for i in 0..steps {
        let (t, t_next) = (times[i], times[i + 1]);
        let h = t_next - t;
        let (d1, score) = velocity(ctx, &sde, &x, t)?;
        let (d2, _) = velocity(ctx, &sde, &combine(&x, 1.0, &d1, h)?, t_next)?;
        let x0 = if ctx.watched() {
            Some(ctx.x0_from_score(&x, &score, t)?)
        } else {
            None
        };
        x = x.add(&combine(&d1, 0.5 * h, &d2, 0.5 * h)?)?;
        ctx.report(i, (t, resume_time(&times, i)), &x, x0.as_ref())
            .await?;
    }
    Ok(x)
}

/// Dormand–Prince nodes, stage weights (rows of A), 5th-order weights and error weights.
const C: [f64; 6] = [0.2, 0.3, 0.8, 8.0 / 9.0, 1.0, 1.0];
const A: [&[f64]; 5] = [
    &[0.2],
    &[3.0 / 40.0, 9.0 / 40.0],
    &[44.0 / 45.0, -56.0 / 15.0, 32.0 / 9.0],
    &[
        19372.0 / 6561.0,
        -25360.0 / 2187.0,
        64448.0 / 6561.0,
        -212.0 / 729.0,
    ],
    &[
        9017.0 / 3168.0,
        -355.0 / 33.0,
        46732.0 / 5247.0,
        49.0 / 176.0,
        -5103.0 / 18656.0,
    ],
];
const B: [f64; 6] = [
    35.0 / 384.0,
    0.0,
    500.0 / 1113.0,
    125.0 / 192.0,
    -2187.0 / 6784.0,
    11.0 / 84.0,
];
const E: [f64; 7] = [
    71.0 / 57600.0,
    0.0,
    -71.0 / 16695.0,
    71.0 / 1920.0,
    -17253.0 / 339200.0,
    22.0 / 525.0,
    -1.0 / 40.0,
];

/// Adaptive RK45 from pure noise (or the start) to the end time. The first step is 1/`steps` of the range;
/// a step is accepted when the RMS of err / (atol + rtol max(|x|, |x_new|)) is at most 1,
/// and the next step is scaled by 0.9 err^(-1/5) within [0.2, 10]. The error norm is the
/// one value read back per attempt. Evaluations: 6 per attempt + 1 (first-same-as-last).
pub(super) async fn rk45(ctx: &mut Context<'_, '_>, steps: usize, rtol: f64, atol: f64) -> Result<Tensor> {
    if !(rtol > 0.0 && atol > 0.0) {
        return Err(Error::Diffusion(format!(
            "ode-rk45: rtol and atol must be positive, got {rtol}, {atol}"
        )));
    }
    let marginals = ctx.marginals.clone();
    let sde = reverse_sde(&marginals, "ode-rk45")?;
    let start = ctx.first_time(sde.start);
    let span = start - sde.end;
    let mut x = ctx.initial(sde.prior_std())?;
    let (mut t, mut h) = (start, span / steps as f64);
    let mut k1 = velocity(ctx, &sde, &x, t)?.0;
    let mut accepted = 0;
    for _ in 0..MAX_RK45_ATTEMPTS {
        let last = h >= t - sde.end;
        if last {
            h = t - sde.end;
        }
        // integrate towards smaller t: step -h
        let mut k = vec![k1.clone()];
        for (row, c) in A.iter().zip(C) {
            let terms: Vec<(f64, &Tensor)> = row.iter().map(|&a| -h * a).zip(&k).collect();
            let stage = velocity(ctx, &sde, &lincomb(&x, &terms)?, t - c * h)?.0;
            k.push(stage);
        }
        let x_new = lincomb(&x, &B.iter().map(|&b| -h * b).zip(&k).collect::<Vec<_>>())?;
        let t_new = if last { sde.end } else { t - h };
        let k7 = velocity(ctx, &sde, &x_new, t_new)?.0;
        let err_terms: Vec<(f64, &Tensor)> = E.iter().map(|&e| -h * e).zip(k.iter().chain([&k7])).collect();
        let err = weighted_sum(&err_terms)?;
        let scale = x
            .abs()?
            .maximum(&x_new.abs()?)?
            .mul_scalar(rtol as f32)?
            .add_scalar(atol as f32)?;
        let norm = f64::from(err.div(&scale)?.square()?.mean_all()?.to_vec_async().await?[0]).sqrt();
        if !norm.is_finite() {
            return Err(Error::Diffusion(format!(
                "ode-rk45: the error estimate is {norm} at t = {t}; the denoiser's output is not finite"
            )));
        }
        let factor = if norm == 0.0 {
            10.0
        } else {
            (0.9 * norm.powf(-0.2)).clamp(0.2, 10.0)
        };
        if norm <= 1.0 {
            ctx.report(accepted, (t, (!last).then_some(t_new)), &x_new, None)
                .await?;
            accepted += 1;
            (x, t, k1) = (x_new, t_new, k7);
            if last {
                return Ok(x);
            }
        }
        h *= factor;
    }
    Err(Error::Diffusion(format!(
        "ode-rk45: not finished after {MAX_RK45_ATTEMPTS} attempted steps (reached t = {t}); loosen rtol/atol"
    )))
}

/// base + sum of coef · tensor.
fn lincomb(base: &Tensor, terms: &[(f64, &Tensor)]) -> Result<Tensor> {
    base.add(&weighted_sum(terms)?)
}

/// sum of coef · tensor over the terms (zero coefficients skipped; at least one is not).
fn weighted_sum(terms: &[(f64, &Tensor)]) -> Result<Tensor> {
    let mut nonzero = terms.iter().filter(|(c, _)| *c != 0.0);
    let (c0, k0) = nonzero
        .next()
        .ok_or_else(|| Error::Diffusion("ode-rk45: a zero step".into()))?;
    nonzero.try_fold(k0.mul_scalar(*c0 as f32)?, |acc, (c, k)| {
        acc.add(&k.mul_scalar(*c as f32)?)
    })
}
