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

/// A norm.wgsl entry point compiled for `x`'s dtype and `act` (the FiLM helpers ignore it).
fn norm_kernel(x: &Tensor, entry: &str, act: Act, inputs: usize, outputs: usize) -> Kernel {
    let defines = [("ACT", (act as u32).to_string())];
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

/// What the backward of a normalization needs.
struct Saved {
    x: Tensor,
    a: Tensor,
    b: Tensor,
    stats: Tensor,
    rows: Rows,
    params: Vec<u32>,
    act: Act,
}

impl Saved {
    /// Gradients of x and of the coefficient tables a, b per (n, c) (both [N, C]).
    fn backward(&self, g: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let gpu = self.x.gpu();
        let nc = [self.rows.batch, self.rows.channels];
        let gx = Tensor::empty(gpu, self.x.shape(), self.x.dtype())?;
        let ga = Tensor::empty(gpu, &nc, self.x.dtype())?;
        let gb = Tensor::empty(gpu, &nc, self.x.dtype())?;
        let inputs = [
            self.x.buffer(),
            self.a.buffer(),
            self.b.buffer(),
            self.stats.buffer(),
            g.buffer(),
        ];
        gpu.dispatch(
            &norm_kernel(&self.x, "norm_backward_x", self.act, 5, 1),
            &self.params,
            &inputs,
            &[gx.buffer()],
            gpu.grid(self.rows.count() as u32),
        );
        gpu.dispatch(
            &norm_kernel(&self.x, "norm_backward_coef", self.act, 5, 2),
            &self.params,
            &inputs,
            &[ga.buffer(), gb.buffer()],
            gpu.grid((self.rows.batch * self.rows.channels) as u32),
        );
        Ok((gx, ga, gb))
    }
}

/// Normalizes the rows of `x`, then y = act(xhat * a + b) with a, b indexed
/// `n * coef_stride + c`; returns y (not yet linked into the graph) and what backward needs.
fn normalize(
    x: &Tensor,
    rows: Rows,
    a: &Tensor,
    b: &Tensor,
    coef_stride: usize,
    act: Act,
    eps: f32,
) -> Result<(Tensor, Saved)> {
    let gpu = x.gpu();
    let y = Tensor::empty(gpu, x.shape(), x.dtype())?;
    let stats = Tensor::empty(gpu, &[rows.count(), 2], DType::F32)?;
    let params = rows.params(coef_stride, eps);
    gpu.dispatch(
        &norm_kernel(x, "norm_forward", act, 3, 2),
        &params,
        &[x.buffer(), a.buffer(), b.buffer()],
        &[y.buffer(), stats.buffer()],
        gpu.grid(rows.count() as u32),
    );
    let saved = Saved {
        x: x.clone(),
        a: a.clone(),
        b: b.clone(),
        stats,
        rows,
        params,
        act,
    };
    Ok((y, saved))
}

impl Tensor {
    /// GroupNorm of [N, C, H, W] (or [N, C], [N, C, L]) over `groups` channel groups, with
    /// per-channel `gamma`, `beta` ([C]).
    pub fn group_norm(&self, groups: usize, gamma: &Tensor, beta: &Tensor, eps: f32) -> Result<Tensor> {
        self.affine_norm("group_norm", groups, false, gamma, beta, eps)
    }

    /// LayerNorm over the channel dim at every (n, h, w) position (ConvNeXt style), with
    /// per-channel `gamma`, `beta` ([C]).
    pub fn layer_norm_channels(&self, gamma: &Tensor, beta: &Tensor, eps: f32) -> Result<Tensor> {
        self.affine_norm("layer_norm_channels", 1, true, gamma, beta, eps)
    }

    fn affine_norm(
        &self,
        op: &'static str,
        groups: usize,
        per_position: bool,
        gamma: &Tensor,
        beta: &Tensor,
        eps: f32,
    ) -> Result<Tensor> {
        let rows = Rows::new(op, self, groups, per_position)?;
        let c = [rows.channels];
        check_param(op, "gamma", gamma, &c, self)?;
        check_param(op, "beta", beta, &c, self)?;
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            let f = |t: &Tensor| t.to_dtype(DType::F32);
            return f(self)?
                .affine_norm(op, groups, per_position, &f(gamma)?, &f(beta)?, eps)?
                .to_dtype(DType::F16);
        }
        let (y, saved) = normalize(self, rows, gamma, beta, 0, Act::Identity, eps)?;
        Ok(y.with_grad_fn(
            op,
            vec![self.clone(), gamma.clone(), beta.clone()],
            Box::new(move |g| {
                let (gx, ga, gb) = saved.backward(g)?;
                Ok(vec![
                    Some(gx),
                    Some(ga.sum(&[0], false)?),
                    Some(gb.sum(&[0], false)?),
                ])
            }),
        ))
    }

    /// `silu(group_norm(x) * (1 + scale[n, c]) + shift[n, c])` (FiLM conditioning) with one
    /// pass over x: the modulation is folded into per-(n, c) coefficients first.
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
        let gpu = self.gpu();
        let params = rows.params(rows.channels, eps);
        let flat_groups = gpu.grid(((rows.batch * rows.channels) as u32).div_ceil(FLAT_WG));
        let a = Tensor::empty(gpu, &nc, self.dtype())?;
        let b = Tensor::empty(gpu, &nc, self.dtype())?;
        gpu.dispatch(
            &norm_kernel(self, "film_coefs", Act::Silu, 4, 2),
            &params,
            &[gamma.buffer(), beta.buffer(), scale.buffer(), shift.buffer()],
            &[a.buffer(), b.buffer()],
            flat_groups,
        );
        let (y, saved) = normalize(self, rows, &a, &b, rows.channels, Act::Silu, eps)?;
        let film = [gamma.clone(), beta.clone(), scale.clone()];
        Ok(y.with_grad_fn(
            OP,
            vec![
                self.clone(),
                gamma.clone(),
                beta.clone(),
                scale.clone(),
                shift.clone(),
            ],
            Box::new(move |g| {
                let (gx, ga, gb) = saved.backward(g)?;
                let gpu = gx.gpu();
                let gscale = Tensor::empty(gpu, &nc, gx.dtype())?;
                let gamma_part = Tensor::empty(gpu, &nc, gx.dtype())?;
                let beta_part = Tensor::empty(gpu, &nc, gx.dtype())?;
                gpu.dispatch(
                    &norm_kernel(&gx, "film_grads", Act::Silu, 5, 3),
                    &params,
                    &[
                        film[0].buffer(),
                        film[1].buffer(),
                        film[2].buffer(),
                        ga.buffer(),
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
