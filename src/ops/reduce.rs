//! Reductions: sum, mean and max over any set of axes, and sum-to-shape for broadcast
//! gradients. Leading reduced axes are reduced in place, column by column; otherwise reduced
//! axes are moved last, then each row is reduced by the strategy the autotuner measured
//! fastest for that shape (shaders/reduce.wgsl, reduce_subgroup.wgsl).

use super::{kernel_for, needs_f32_fallback, FLAT_WG};
use crate::gpu::Cost;
use crate::gpu::MAX_LOOP_ITERATIONS;
use crate::tensor::numel;
use crate::{shader, DType, Error, Result, Tensor};

/// What a reduction computes per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Max,
}

impl ReduceOp {
    /// The op's name in profiles.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
        }
    }
}

/// How a row reduction is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKernel {
    /// One row per invocation, serial loop.
    Lane,
    /// One row per workgroup, workgroup-memory tree.
    Tree,
    /// One row per workgroup, subgroup operations (needs SUBGROUP).
    Subgroup,
}

impl ReduceKernel {
    /// Strategies the device can run on rows of length `len` (each invocation's loop must
    /// stay under [`crate::gpu::MAX_LOOP_ITERATIONS`]).
    pub fn available(gpu: &crate::Gpu, len: usize) -> Vec<ReduceKernel> {
        let mut v = Vec::new();
        if len <= MAX_LOOP_ITERATIONS {
            v.push(ReduceKernel::Lane);
        }
        if len <= MAX_LOOP_ITERATIONS * FLAT_WG as usize {
            v.push(ReduceKernel::Tree);
            if gpu.has_subgroups() {
                v.push(ReduceKernel::Subgroup);
            }
        }
        v
    }
}

/// Reduces each of the `rows` contiguous rows of length `len` of `x` into `out[row]`.
pub fn reduce_rows_with(
    x: &Tensor,
    out: &Tensor,
    rows: usize,
    len: usize,
    op: ReduceOp,
    scale: f32,
    how: ReduceKernel,
) {
    let gpu = x.gpu();
    let op_define = [("OP", (op as u32).to_string())];
    let (kernel, groups) = match how {
        ReduceKernel::Lane => (
            kernel_for(gpu, shader!("reduce"), "reduce_lane", x.dtype(), &op_define, 1, 1),
            (rows as u32).div_ceil(FLAT_WG),
        ),
        ReduceKernel::Tree => (
            kernel_for(gpu, shader!("reduce"), "reduce_tree", x.dtype(), &op_define, 1, 1),
            rows as u32,
        ),
        ReduceKernel::Subgroup => (
            kernel_for(
                gpu,
                shader!("reduce_subgroup"),
                "reduce_subgroup",
                x.dtype(),
                &op_define,
                1,
                1,
            ),
            rows as u32,
        ),
    };
    let params = [rows as u32, len as u32, scale.to_bits()];
    let bytes = ((rows * len + rows) * x.dtype().size()) as u64;
    gpu.dispatch_named(
        &kernel,
        &params,
        &[x.buffer()],
        &[out.buffer()],
        gpu.grid(groups),
        Cost::memory(op.name(), bytes),
    );
}

/// Reduces `x`, viewed as [len, columns], over its first axis: `out[j]` combines
/// `x[i * columns + j]` for every i (one column per invocation; no permute).
pub fn reduce_columns(x: &Tensor, columns: usize, len: usize, op: ReduceOp, scale: f32) -> Result<Tensor> {
    let gpu = x.gpu();
    let out = Tensor::empty(gpu, &[columns], x.dtype())?;
    let op_define = [("OP", (op as u32).to_string())];
    let kernel = kernel_for(
        gpu,
        shader!("reduce"),
        "reduce_columns",
        x.dtype(),
        &op_define,
        1,
        1,
    );
    gpu.dispatch_named(
        &kernel,
        &[columns as u32, len as u32, scale.to_bits()],
        &[x.buffer()],
        &[out.buffer()],
        gpu.grid((columns as u32).div_ceil(FLAT_WG)),
        Cost::memory(op.name(), ((columns * len + columns) * x.dtype().size()) as u64),
    );
    Ok(out)
}

/// Picks (by measurement, once per rounded shape) and runs the fastest row reduction.
fn reduce_rows(x: &Tensor, rows: usize, len: usize, op: ReduceOp, scale: f32) -> Result<Tensor> {
    let gpu = x.gpu();
    let out = Tensor::empty(gpu, &[rows], x.dtype())?;
    let kinds = ReduceKernel::available(gpu, len);
    if kinds.is_empty() {
        return Err(Error::shape(
            "reduce",
            format!("rows of {len} elements are longer than one reduction pass handles; reduce in two steps (e.g. reshape and sum twice)"),
        ));
    }
    let key = format!(
        "reduce:{:?}:{:?}:{}x{}",
        op,
        x.dtype(),
        rows.next_power_of_two(),
        len.next_power_of_two()
    );
    let fallback = if gpu.is_cpu() { 0 } else { kinds.len() - 1 };
    let labels: Vec<String> = kinds.iter().map(|k| format!("{k:?}")).collect();
    let choice = gpu.tuner().choose(gpu, &key, &labels, fallback, |c| {
        let scratch = Tensor::empty(gpu, &[rows], x.dtype())?;
        reduce_rows_with(x, &scratch, rows, len, op, scale, kinds[c]);
        Ok(())
    })?;
    reduce_rows_with(x, &out, rows, len, op, scale, kinds[choice]);
    Ok(out)
}

impl Tensor {
    fn reduce(&self, axes: &[usize], keepdim: bool, op: ReduceOp, mean: bool) -> Result<Tensor> {
        let rank = self.rank();
        let mut reduced = vec![false; rank];
        for &a in axes {
            if a >= rank {
                return Err(Error::shape(
                    "reduce",
                    format!("axis {a} out of range for {:?}", self.shape()),
                ));
            }
            reduced[a] = true;
        }
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            let r = self.to_dtype(DType::F32)?.reduce(axes, keepdim, op, mean)?;
            return r.to_dtype(DType::F16);
        }
        let kept: Vec<usize> = (0..rank).filter(|&d| !reduced[d]).collect();
        let gone: Vec<usize> = (0..rank).filter(|&d| reduced[d]).collect();
        let rows = numel(&kept.iter().map(|&d| self.shape()[d]).collect::<Vec<_>>());
        let len = numel(&gone.iter().map(|&d| self.shape()[d]).collect::<Vec<_>>());
        let perm: Vec<usize> = kept.iter().chain(&gone).copied().collect();
        let keep_shape: Vec<usize> = (0..rank)
            .map(|d| if reduced[d] { 1 } else { self.shape()[d] })
            .collect();
        let out_shape: Vec<usize> = if keepdim {
            keep_shape.clone()
        } else {
            kept.iter().map(|&d| self.shape()[d]).collect()
        };
        let scale = if mean { 1.0 / len as f32 } else { 1.0 };
        let rows_tensor = {
            let _g = crate::no_grad();
            // Reduced trailing axes go first, as contiguous rows: the permute that moves the
            // other reduced axes last then copies only what is left (a bias gradient's sum
            // over N, H, W copies [N, C], not the whole tensor).
            let trailing = reduced.iter().rev().take_while(|&&r| r).count();
            let leading = reduced.iter().take_while(|&&r| r).count();
            // Only leading axes reduced (a sum over the batch, or over the partial sums of a
            // split reduction): each output is a strided column, read in place, when there
            // are enough columns to fill a workgroup and each column fits the loop budget.
            if leading == gone.len() && rows >= FLAT_WG as usize && len <= MAX_LOOP_ITERATIONS {
                reduce_columns(self, rows, len, op, scale)?
            } else if trailing > 0 && trailing < gone.len() {
                let lead = &self.shape()[..rank - trailing];
                let partial = reduce_rows(
                    self,
                    numel(lead),
                    numel(&self.shape()[rank - trailing..]),
                    op,
                    1.0,
                )?
                .reshape(lead)?;
                let moved = partial.permute(&perm[..rank - trailing])?;
                reduce_rows(
                    &moved,
                    rows,
                    len / numel(&self.shape()[rank - trailing..]),
                    op,
                    scale,
                )?
            } else {
                reduce_rows(&self.permute(&perm)?, rows, len, op, scale)?
            }
        };
        let out = rows_tensor.reshape(&out_shape)?;
        let x = self.clone();
        let y = out.clone();
        Ok(out.with_grad_fn(
            "reduce",
            vec![self.clone()],
            Box::new(move |g| {
                let g = g.reshape(&keep_shape)?.broadcast_to(x.shape())?;
                let gx = match op {
                    ReduceOp::Sum => g.mul_scalar(scale)?,
                    ReduceOp::Max => {
                        let hit = x.binary(&y.reshape(&keep_shape)?, crate::ops::Binary::Equal)?;
                        g.mul(&hit)?
                    }
                };
                Ok(vec![Some(gx)])
            }),
        ))
    }

    /// Sum over `axes`.
    pub fn sum(&self, axes: &[usize], keepdim: bool) -> Result<Tensor> {
        self.reduce(axes, keepdim, ReduceOp::Sum, false)
    }
    /// Mean over `axes`.
    pub fn mean(&self, axes: &[usize], keepdim: bool) -> Result<Tensor> {
        self.reduce(axes, keepdim, ReduceOp::Sum, true)
    }
    /// Maximum over `axes` (the gradient goes to every element equal to the maximum).
    pub fn max(&self, axes: &[usize], keepdim: bool) -> Result<Tensor> {
        self.reduce(axes, keepdim, ReduceOp::Max, false)
    }
    /// Sum of all elements, shape `[1]`.
    pub fn sum_all(&self) -> Result<Tensor> {
        self.reshape(&[self.numel()])?.sum(&[0], true)
    }
    /// Mean of all elements, shape `[1]`.
    pub fn mean_all(&self) -> Result<Tensor> {
        self.reshape(&[self.numel()])?.mean(&[0], true)
    }

    /// Sums broadcast dims away so the result has `shape` (the gradient of broadcasting).
    pub fn sum_to_shape(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let extra = self.rank().checked_sub(shape.len()).ok_or_else(|| {
            Error::shape(
                "sum_to_shape",
                format!("{:?} has fewer dims than {shape:?}", self.shape()),
            )
        })?;
        let axes: Vec<usize> = (0..self.rank())
            .filter(|&d| d < extra || (shape[d - extra] == 1 && self.shape()[d] != 1))
            .collect();
        self.sum(&axes, false)?.reshape(shape)
    }
}
