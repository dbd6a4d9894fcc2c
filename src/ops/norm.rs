//! Normalization of NCHW tensors: GroupNorm, channel LayerNorm (ConvNeXt style) and the fused
//! GroupNorm -> FiLM scale/shift -> SiLU, forward and backward (shaders/norm.wgsl).

use super::{check_same_dtype, kernel_for, needs_f32_fallback, FLAT_WG};
use crate::gpu::Kernel;
use crate::{shader, DType, Error, Result, Tensor};

/// How the rows of an [N, C, S] tensor are formed (see the Params of shaders/norm.wgsl).
#[derive(Clone, Copy)]
struct Rows {
    batch: usize,
    channels: usize,
    positions: usize,
    /// Channels per row.
    per_row: usize,
    /// Position blocks normalized separately (1: group norm, S: layer norm).
    blocks: usize,
}

impl Rows {
    /// Rows of `x` ([N, C], [N, C, L] or [N, C, H, W]): `groups` channel groups over all
    /// positions, or (`per_position`) all channels at each position.
    fn new(op: &'static str, x: &Tensor, groups: usize, per_position: bool) -> Result<Rows> {
        let shape = x.shape();
        if !(2..=4).contains(&shape.len()) {
            return Err(Error::shape(
                op,
                format!("input {shape:?} must be [N, C], [N, C, L] or [N, C, H, W]"),
            ));
        }
        if shape.contains(&0) {
            return Err(Error::shape(op, format!("input {shape:?} is empty")));
        }
        let channels = shape[1];
        if groups == 0 || channels % groups != 0 {
            return Err(Error::shape(
                op,
                format!("{groups} groups do not divide the {channels} channels of {shape:?}"),
            ));
        }
        let positions = shape[2..].iter().product();
        Ok(Rows {
            batch: shape[0],
            channels,
            positions,
            per_row: channels / groups,
            blocks: if per_position { positions } else { 1 },
        })
    }

    fn count(&self) -> usize {
        self.batch * (self.channels / self.per_row) * self.blocks
    }

    fn params(&self, coef_stride: usize, eps: f32) -> Vec<u32> {
        let len = self.per_row * self.positions / self.blocks;
        let mut p: Vec<u32> = [
            self.count(),
            len,
            self.batch,
            self.channels,
            self.positions,
            self.per_row,
            self.blocks,
            coef_stride,
        ]
        .iter()
        .map(|&v| v as u32)
        .collect();
        p.push(eps.to_bits());
        p
    }
}

/// Errors unless `t` has `shape` and `x`'s dtype.
fn check_param(op: &'static str, name: &str, t: &Tensor, shape: &[usize], x: &Tensor) -> Result<()> {
    if t.shape() != shape {
        return Err(Error::shape(
            op,
            format!(
                "{name} has shape {:?} but input {:?} needs {shape:?}",
                t.shape(),
                x.shape()
            ),
        ));
    }
    check_same_dtype(op, x, t)
}

/// Activation after the affine map; ids match ACT in shaders/norm.wgsl.
#[derive(Clone, Copy)]
enum Act {
    Identity = 0,
    Silu = 1,
}

/// Where the per-(n, c) coefficients a, b of z = xhat * a + b come from (COEF in norm.wgsl).
#[derive(Clone, Copy, PartialEq)]
enum Coef {
    /// Tables indexed `n * coef_stride + c` (gamma/beta with stride 0, FiLM tables with C).
    Table,
    /// a = gamma (1 + scale), b = beta (1 + scale) + shift, computed in the kernel.
    Film,
}

/// A norm.wgsl entry point for `x`'s dtype; `act` and `coef` only matter to the norm kernels.
fn norm_kernel(x: &Tensor, entry: &str, act: Act, coef: Coef, inputs: usize, outputs: usize) -> Kernel {
    let defines = [
        ("ACT", (act as u32).to_string()),
        (
            "COEF",
            if coef == Coef::Film { "film" } else { "table" }.to_string(),
        ),
        ("OUT", (1 + inputs).to_string()),
    ];
    kernel_for(
        x.gpu(),
        shader!("norm"),
        entry,
        x.dtype(),
        &defines,
        inputs,
        outputs,
    )
}

/// Normalizes the rows of `x` and applies y = act(xhat * a + b), with a, b from `coef`
/// reading `coefs` (gamma, beta, and for FiLM scale, shift); returns y and the per-row
/// (mean, rstd) the backward needs.
fn normalize(
    x: &Tensor,
    rows: Rows,
    coef: Coef,
    coefs: &[&Tensor],
    act: Act,
    eps: f32,
) -> Result<(Tensor, Tensor)> {
    let gpu = x.gpu();
    let y = Tensor::empty(gpu, x.shape(), x.dtype())?;
    let stats = Tensor::empty(gpu, &[rows.count(), 2], DType::F32)?;
    let inputs: Vec<&wgpu::Buffer> = std::iter::once(x)
        .chain(coefs.iter().copied())
        .map(Tensor::buffer)
        .collect();
    gpu.dispatch(
        &norm_kernel(x, "norm_forward", act, coef, inputs.len(), 2),
        &rows.params(0, eps),
        &inputs,
        &[y.buffer(), stats.buffer()],
        gpu.grid(rows.count() as u32),
    );
    Ok((y, stats))
}

/// Gradients of x and of the coefficient tables a, b (indexed `n * coef_stride + c`) per
/// (n, c), both [N, C].
fn normalize_backward(
    x: &Tensor,
    rows: Rows,
    (a, b, coef_stride): (&Tensor, &Tensor, usize),
    stats: &Tensor,
    g: &Tensor,
    act: Act,
    eps: f32,
) -> Result<(Tensor, Tensor, Tensor)> {
    let gpu = x.gpu();
    let nc = [rows.batch, rows.channels];
    let gx = Tensor::empty(gpu, x.shape(), x.dtype())?;
    let ga = Tensor::empty(gpu, &nc, x.dtype())?;
    let gb = Tensor::empty(gpu, &nc, x.dtype())?;
    let params = rows.params(coef_stride, eps);
    let inputs = [x.buffer(), a.buffer(), b.buffer(), stats.buffer(), g.buffer()];
    gpu.dispatch(
        &norm_kernel(x, "norm_backward_x", act, Coef::Table, 5, 1),
        &params,
        &inputs,
        &[gx.buffer()],
        gpu.grid(rows.count() as u32),
    );
    gpu.dispatch(
        &norm_kernel(x, "norm_backward_coef", act, Coef::Table, 5, 2),
        &params,
        &inputs,
        &[ga.buffer(), gb.buffer()],
        gpu.grid((rows.batch * rows.channels) as u32),
    );
    Ok((gx, ga, gb))
}

impl Tensor {
    /// GroupNorm of [N, C, H, W] (or [N, C], [N, C, L]) over `groups` channel groups, with
    /// per-channel `gamma`, `beta` ([C]).
    pub fn group_norm(&self, groups: usize, gamma: &Tensor, beta: &Tensor, eps: f32) -> Result<Tensor> {
        self.affine_norm("group_norm", groups, false, Act::Identity, (gamma, beta), eps)
    }

    /// `silu(group_norm(x))` in one kernel (the DDPM ResBlock's norm + activation).
    pub fn group_norm_silu(&self, groups: usize, gamma: &Tensor, beta: &Tensor, eps: f32) -> Result<Tensor> {
        self.affine_norm("group_norm_silu", groups, false, Act::Silu, (gamma, beta), eps)
    }

    /// LayerNorm over the channel dim at every (n, h, w) position (ConvNeXt style), with
    /// per-channel `gamma`, `beta` ([C]).
    pub fn layer_norm_channels(&self, gamma: &Tensor, beta: &Tensor, eps: f32) -> Result<Tensor> {
        self.affine_norm("layer_norm_channels", 1, true, Act::Identity, (gamma, beta), eps)
    }

    fn affine_norm(
        &self,
        op: &'static str,
        groups: usize,
        per_position: bool,
        act: Act,
        (gamma, beta): (&Tensor, &Tensor),
        eps: f32,
    ) -> Result<Tensor> {
        let rows = Rows::new(op, self, groups, per_position)?;
        let c = [rows.channels];
        check_param(op, "gamma", gamma, &c, self)?;
        check_param(op, "beta", beta, &c, self)?;
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            let f = |t: &Tensor| t.to_dtype(DType::F32);
            return f(self)?
                .affine_norm(op, groups, per_position, act, (&f(gamma)?, &f(beta)?), eps)?
                .to_dtype(DType::F16);
        }
        let (y, stats) = normalize(self, rows, Coef::Table, &[gamma, beta], act, eps)?;
        let inputs = [self, gamma, beta].map(Tensor::clone);
        Ok(y.with_grad_fn(
            op,
            inputs.to_vec(),
            Box::new(move |g| {
                let [x, gamma, beta] = &inputs;
                let (gx, ga, gb) = normalize_backward(x, rows, (gamma, beta, 0), &stats, g, act, eps)?;
                Ok(vec![
                    Some(gx),
                    Some(ga.sum(&[0], false)?),
                    Some(gb.sum(&[0], false)?),
                ])
            }),
        ))
    }

    /// `silu(group_norm(x) * (1 + scale[n, c]) + shift[n, c])` (FiLM conditioning, `scale` and
    /// `shift` are [N, C]) in one forward kernel.
    pub fn group_norm_scale_shift_silu(
        &self,
        groups: usize,
        gamma: &Tensor,
        beta: &Tensor,
        scale: &Tensor,
        shift: &Tensor,
        eps: f32,
    ) -> Result<Tensor> {
        const OP: &str = "group_norm_scale_shift_silu";
        let rows = Rows::new(OP, self, groups, false)?;
        let (c, nc) = ([rows.channels], [rows.batch, rows.channels]);
        check_param(OP, "gamma", gamma, &c, self)?;
        check_param(OP, "beta", beta, &c, self)?;
        check_param(OP, "scale", scale, &nc, self)?;
        check_param(OP, "shift", shift, &nc, self)?;
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            let f = |t: &Tensor| t.to_dtype(DType::F32);
            return f(self)?
                .group_norm_scale_shift_silu(groups, &f(gamma)?, &f(beta)?, &f(scale)?, &f(shift)?, eps)?
                .to_dtype(DType::F16);
        }
        let act = Act::Silu;
        let film = [self, gamma, beta, scale, shift].map(Tensor::clone);
        let (y, stats) = normalize(
            self,
            rows,
            Coef::Film,
            &film[1..].iter().collect::<Vec<_>>(),
            act,
            eps,
        )?;
        Ok(y.with_grad_fn(
            OP,
            film.to_vec(),
            Box::new(move |g| {
                let [x, gamma, beta, scale, _] = &film;
                let gpu = x.gpu();
                let params = rows.params(rows.channels, eps);
                let flat_groups = gpu.grid(((rows.batch * rows.channels) as u32).div_ceil(FLAT_WG));
                let new_nc = || Tensor::empty(gpu, &nc, x.dtype());
                let (a, b) = (new_nc()?, new_nc()?);
                gpu.dispatch(
                    &norm_kernel(x, "film_coefs", act, Coef::Film, 5, 2),
                    &params,
                    &film.iter().map(Tensor::buffer).collect::<Vec<_>>(),
                    &[a.buffer(), b.buffer()],
                    flat_groups,
                );
                let (gx, ga, gb) = normalize_backward(x, rows, (&a, &b, rows.channels), &stats, g, act, eps)?;
                let (gscale, gamma_part, beta_part) = (new_nc()?, new_nc()?, new_nc()?);
                gpu.dispatch(
                    &norm_kernel(x, "film_grads", act, Coef::Film, 5, 3),
                    &params,
                    &[
                        ga.buffer(),
                        gamma.buffer(),
                        beta.buffer(),
                        scale.buffer(),
                        gb.buffer(),
                    ],
                    &[gscale.buffer(), gamma_part.buffer(), beta_part.buffer()],
                    flat_groups,
                );
                Ok(vec![
                    Some(gx),
                    Some(gamma_part.sum(&[0], false)?),
                    Some(beta_part.sum(&[0], false)?),
                    Some(gscale),
                    Some(gb),
                ])
            }),
        ))
    }
}
