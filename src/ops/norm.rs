//! Normalization: GroupNorm, channel LayerNorm (ConvNeXt style), LayerNorm over the last dim
//! and the fused GroupNorm -> FiLM scale/shift -> SiLU, forward and backward (shaders/norm.wgsl).

use super::{kernel_for, needs_f32_fallback, FLAT_WG};
use crate::gpu::{Cost, Kernel, MAX_LOOP_ITERATIONS};
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

/// Which elements a norm op normalizes together (one row each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormRows {
    /// GroupNorm of [N, C, ..]: each of `groups` channel groups over all positions.
    Groups(usize),
    /// Channel LayerNorm of [N, C, ..] (ConvNeXt style): all channels at each position.
    ChannelsPerPosition,
    /// LayerNorm of [.., D] over its last dim (`F.layer_norm(x, (D,))`).
    LastAxis,
}

impl Rows {
    /// Rows of `x` as `kind` says: [N, C], [N, C, L] or [N, C, H, W] for groups and channels,
    /// any shape for the last axis (its D elements are the channels of one position).
    fn new(op: &'static str, x: &Tensor, kind: NormRows) -> Result<Rows> {
        let shape = x.shape();
        if shape.contains(&0) {
            return Err(Error::shape(op, format!("input {shape:?} is empty")));
        }
        if kind == NormRows::LastAxis {
            let Some(&d) = shape.last() else {
                return Err(Error::shape(
                    op,
                    "input [] is a scalar; it needs a last dim to normalize over".to_string(),
                ));
            };
            return Ok(Rows {
                batch: x.numel() / d,
                channels: d,
                positions: 1,
                per_row: d,
                blocks: 1,
            });
        }
        if !(2..=4).contains(&shape.len()) {
            return Err(Error::shape(
                op,
                format!("input {shape:?} must be [N, C], [N, C, L] or [N, C, H, W]"),
            ));
        }
        let channels = shape[1];
        let groups = match kind {
            NormRows::Groups(g) => g,
            _ => 1,
        };
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
            blocks: if kind == NormRows::ChannelsPerPosition {
                positions
            } else {
                1
            },
        })
    }

    /// True when each row holds the channels of one position (channel and last-axis LayerNorm,
    /// GroupNorm without positions): the backward sums over the row itself, rather than taking
    /// the row's means from its channels' coefficient gradients.
    fn one_position(&self) -> bool {
        self.blocks == self.positions
    }

    fn count(&self) -> usize {
        self.batch * (self.channels / self.per_row) * self.blocks
    }

    /// Elements the kernels read as one (VEC in shaders/norm.wgsl): 4 for GroupNorm rows over
    /// a multiple of 4 positions (a vec4 then never spans two channels), else 1.
    fn vec(&self) -> usize {
        if self.blocks == 1 && self.positions % 4 == 0 {
            4
        } else {
            1
        }
    }

    /// Vecs of [`Rows::vec`] elements per row.
    fn len(&self) -> usize {
        self.per_row * self.positions / self.blocks / self.vec()
    }

    /// Vecs of [`Rows::vec`] elements per channel.
    fn vec_positions(&self) -> usize {
        self.positions / self.vec()
    }

    /// The shader's Params, lengths and positions counted in vecs of [`Rows::vec`] elements.
    fn params(&self, coef_stride: usize, eps: f32) -> Vec<u32> {
        let mut p: Vec<u32> = [
            self.count(),
            self.len(),
            self.batch,
            self.channels,
            self.vec_positions(),
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

/// A norm.wgsl entry point for `x`'s dtype reading `vec` elements at once; `act` and `coef`
/// only matter to the norm kernels, `lanes` (the subgroup size) only to the `*_subgroup` ones.
fn norm_kernel(
    x: &Tensor,
    entry: &str,
    (act, coef): (Act, Coef),
    (vec, lanes): (usize, Option<u32>),
    (inputs, outputs): (usize, usize),
) -> Kernel {
    let t = x.dtype().wgsl();
    let (v, vf, total) = match vec {
        1 => (t.to_string(), "f32", "v"),
        4 => (format!("vec4<{t}>"), "vec4<f32>", "v.x + v.y + v.z + v.w"),
        _ => unreachable!("Rows::vec is 1 or 4"),
    };
    let defines = [
        ("VEC", vec.to_string()),
        ("V", v),
        ("VF", vf.to_string()),
        ("TOTAL", total.to_string()),
        ("ACT", (act as u32).to_string()),
        (
            "COEF",
            if coef == Coef::Film { "film" } else { "table" }.to_string(),
        ),
        ("OUT", (1 + inputs).to_string()),
        ("SUBGROUP", u32::from(lanes.is_some()).to_string()),
        ("LANES", lanes.unwrap_or(0).to_string()),
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

/// How a norm kernel spreads its rows (or (n, c) items) over invocations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NormKernel {
    /// One row per invocation (the `*_lane` entry points): no barriers.
    Lane,
    /// One row per workgroup of one subgroup (the `*_subgroup` entry points, adapters with a
    /// fixed subgroup size): neighbouring lanes read neighbouring elements, no barriers.
    Subgroup,
    /// One row per 64-invocation workgroup, partial sums added in workgroup memory.
    Workgroup,
}

impl NormKernel {
    /// The forms whose loops stay under [`MAX_LOOP_ITERATIONS`] when each row of `len`
    /// elements is walked `passes` times (split over the invocations of the form) and every
    /// invocation also makes `fixed` iterations of its own; the subgroup form where the adapter
    /// has subgroups of one size, `lanes`.
    pub fn available(len: usize, passes: usize, fixed: usize, lanes: Option<u32>) -> Vec<NormKernel> {
        let fits = |step: usize| fixed + passes * len.div_ceil(step) <= MAX_LOOP_ITERATIONS;
        let mut v = Vec::new();
        if fits(1) {
            v.push(NormKernel::Lane);
        }
        if lanes.is_some_and(|l| fits(l as usize)) {
            v.push(NormKernel::Subgroup);
        }
        if fits(FLAT_WG as usize) {
            v.push(NormKernel::Workgroup);
        }
        v
    }
}

/// One norm pass: `entry` over `items` rows of `len` vecs of `vec` elements walked `passes`
/// times, plus `fixed` loop iterations per invocation.
struct Pass<'a> {
    entry: &'static str,
    act: Act,
    coef: Coef,
    vec: usize,
    params: &'a [u32],
    inputs: &'a [&'a wgpu::Buffer],
    outputs: &'a [&'a wgpu::Buffer],
    items: usize,
    len: usize,
    passes: usize,
    fixed: usize,
    /// Bytes read and written (for the profiler).
    bytes: u64,
}

/// The autotuner's key for `entry` over `items` rows of `len` elements.
fn tune_key(entry: &str, dtype: DType, items: usize, len: usize, one_position: bool) -> String {
    format!(
        "norm:{entry}:{dtype:?}:{}x{}:{}",
        items.next_power_of_two(),
        len.next_power_of_two(),
        if one_position { "position" } else { "group" }
    )
}

/// Pins the form of the forward and both backward norm kernels for inputs shaped like `x`
/// normalized in `rows`, as the autotuner keys them (tests and benchmarks).
pub fn pin_norm_kernel(x: &Tensor, rows: NormRows, kind: NormKernel) -> Result<()> {
    let rows = Rows::new("pin_norm_kernel", x, rows)?;
    let label = format!("{kind:?}");
    for (entry, items, len) in [
        ("norm_forward", rows.count(), rows.len()),
        ("norm_backward_x", rows.count(), rows.len()),
        (
            "norm_backward_coef",
            rows.batch * rows.channels,
            rows.vec_positions(),
        ),
    ] {
        let key = tune_key(entry, x.dtype(), items, len, rows.one_position());
        x.gpu().tuner().set(&key, &label);
    }
    Ok(())
}

/// Runs `pass` in the form the autotuner measured fastest for its shape (once per rounded
/// shape; the lane form by default on CPU adapters where nothing may be timed).
fn run_pass(x: &Tensor, pass: Pass, one_position: bool) -> Result<()> {
    let gpu = x.gpu();
    let lanes = gpu.fixed_subgroup_size();
    let kinds = NormKernel::available(pass.len, pass.passes, pass.fixed, lanes);
    if kinds.is_empty() {
        return Err(Error::shape(
            pass.entry,
            format!(
                "rows of {} elements are longer than one norm kernel handles ({} loop iterations per invocation)",
                pass.len, MAX_LOOP_ITERATIONS
            ),
        ));
    }
    let key = tune_key(pass.entry, x.dtype(), pass.items, pass.len, one_position);
    let fallback = if gpu.is_cpu() { 0 } else { kinds.len() - 1 };
    let labels: Vec<String> = kinds.iter().map(|k| format!("{k:?}")).collect();
    let run = |kind: NormKernel| {
        let (entry, groups, lanes) = match kind {
            NormKernel::Lane => (
                format!("{}_lane", pass.entry),
                (pass.items as u32).div_ceil(FLAT_WG),
                None,
            ),
            NormKernel::Subgroup => (format!("{}_subgroup", pass.entry), pass.items as u32, lanes),
            NormKernel::Workgroup => (pass.entry.to_string(), pass.items as u32, None),
        };
        gpu.dispatch_named(
            &norm_kernel(
                x,
                &entry,
                (pass.act, pass.coef),
                (pass.vec, lanes),
                (pass.inputs.len(), pass.outputs.len()),
            ),
            pass.params,
            pass.inputs,
            pass.outputs,
            gpu.grid(groups),
            Cost::memory(pass.entry, pass.bytes),
        );
    };
    let choice = gpu.tuner().choose(gpu, &key, &labels, fallback, |c| {
        run(kinds[c]);
        Ok(())
    })?;
    run(kinds[choice]);
    Ok(())
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
    run_pass(
        x,
        Pass {
            entry: "norm_forward",
            act,
            coef,
            vec: rows.vec(),
            params: &rows.params(0, eps),
            inputs: &inputs,
            outputs: &[y.buffer(), stats.buffer()],
            items: rows.count(),
            len: rows.len(),
            passes: 2,
            fixed: 0,
            bytes: 2 * x.byte_len(),
        },
        rows.one_position(),
    )?;
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
    let one_position = rows.one_position();
    run_pass(
        x,
        Pass {
            entry: "norm_backward_coef",
            act,
            coef: Coef::Table,
            vec: rows.vec(),
            params: &params,
            inputs: &inputs,
            outputs: &[ga.buffer(), gb.buffer()],
            items: rows.batch * rows.channels,
            len: rows.vec_positions(),
            passes: 1,
            fixed: 0,
            bytes: 2 * x.byte_len(),
        },
        one_position,
    )?;
    // Rows over several positions (GroupNorm) take their means from their channels' (ga, gb):
    // one pass over x and g after a loop over the row's channels.
    let with_coefs = [inputs.as_slice(), &[ga.buffer(), gb.buffer()]].concat();
    run_pass(
        x,
        Pass {
            entry: "norm_backward_x",
            act,
            coef: Coef::Table,
            vec: rows.vec(),
            params: &params,
            inputs: &with_coefs,
            outputs: &[gx.buffer()],
            items: rows.count(),
            len: rows.len(),
            passes: if one_position { 2 } else { 1 },
            fixed: if one_position { 0 } else { rows.per_row },
            bytes: if one_position { 3 } else { 2 } * x.byte_len(),
        },
        one_position,
    )?;
    Ok((gx, ga, gb))
}

impl Tensor {
    /// GroupNorm of [N, C, H, W] (or [N, C], [N, C, L]) over `groups` channel groups, with
    /// per-channel `gamma`, `beta` ([C]).
    pub fn group_norm(&self, groups: usize, gamma: &Tensor, beta: &Tensor, eps: f32) -> Result<Tensor> {
        self.affine_norm(
            "group_norm",
            NormRows::Groups(groups),
            Act::Identity,
            (gamma, beta),
            eps,
        )
    }

    /// `silu(group_norm(x))` in one kernel (the DDPM ResBlock's norm + activation).
    pub fn group_norm_silu(&self, groups: usize, gamma: &Tensor, beta: &Tensor, eps: f32) -> Result<Tensor> {
        self.affine_norm(
            "group_norm_silu",
            NormRows::Groups(groups),
            Act::Silu,
            (gamma, beta),
            eps,
        )
    }

    /// LayerNorm over the channel dim at every (n, h, w) position (ConvNeXt style), with
    /// per-channel `gamma`, `beta` ([C]). For LayerNorm over the last dim see
    /// [`Tensor::layer_norm`].
    pub fn layer_norm_channels(&self, gamma: &Tensor, beta: &Tensor, eps: f32) -> Result<Tensor> {
        self.affine_norm(
            "layer_norm_channels",
            NormRows::ChannelsPerPosition,
            Act::Identity,
            (gamma, beta),
            eps,
        )
    }

    /// LayerNorm over the last dim of `x` [.., D] (any leading dims) with elementwise affine
    /// `gamma`, `beta` ([D]): PyTorch's `F.layer_norm(x, (D,), gamma, beta, eps)` (biased
    /// variance, eps inside the square root). Differentiable in x, gamma and beta.
    pub fn layer_norm(&self, gamma: &Tensor, beta: &Tensor, eps: f32) -> Result<Tensor> {
        self.affine_norm(
            "layer_norm",
            NormRows::LastAxis,
            Act::Identity,
            (gamma, beta),
            eps,
        )
    }

    /// The norm of `rows` followed by the per-channel affine map and `act`.
    fn affine_norm(
        &self,
        op: &'static str,
        kind: NormRows,
        act: Act,
        (gamma, beta): (&Tensor, &Tensor),
        eps: f32,
    ) -> Result<Tensor> {
        let rows = Rows::new(op, self, kind)?;
        let c = [rows.channels];
        super::check_param(op, "gamma", gamma, &c, self)?;
        super::check_param(op, "beta", beta, &c, self)?;
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            let f = |t: &Tensor| t.to_dtype(DType::F32);
            return f(self)?
                .affine_norm(op, kind, act, (&f(gamma)?, &f(beta)?), eps)?
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
        let rows = Rows::new(OP, self, NormRows::Groups(groups))?;
        let (c, nc) = ([rows.channels], [rows.batch, rows.channels]);
        super::check_param(OP, "gamma", gamma, &c, self)?;
        super::check_param(OP, "beta", beta, &c, self)?;
        super::check_param(OP, "scale", scale, &nc, self)?;
        super::check_param(OP, "shift", shift, &nc, self)?;
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
                    &norm_kernel(x, "film_coefs", (act, Coef::Film), (rows.vec(), None), (5, 2)),
                    &params,
                    &film.iter().map(Tensor::buffer).collect::<Vec<_>>(),
                    &[a.buffer(), b.buffer()],
                    flat_groups,
                );
                let (gx, ga, gb) = normalize_backward(x, rows, (&a, &b, rows.channels), &stats, g, act, eps)?;
                let (gscale, gamma_part, beta_part) = (new_nc()?, new_nc()?, new_nc()?);
                gpu.dispatch(
                    &norm_kernel(x, "film_grads", (act, Coef::Film), (rows.vec(), None), (5, 3)),
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
