//! Layout ops: reshape lives on Tensor; here permute, transpose, broadcast_to, slice and
//! concat through one strided-copy kernel (shaders/layout.wgsl), pad (shaders/pad.wgsl).

use super::{check_rank, kernel_for, needs_f32_fallback, pack8, FLAT_WG};
use crate::gpu::Cost;
use crate::ops::elementwise::broadcast_strides;
use crate::tensor::{contiguous_strides, numel};
use crate::{shader, DType, Error, Gpu, Result, Tensor};

/// One strided copy: `dst[dst_off + idx.dst_strides] = src[src_off + idx.src_strides]`.
pub(crate) struct StridedCopy<'a> {
    /// Op name for the profiler.
    pub op: &'static str,
    pub shape: &'a [usize],
    pub src_offset: usize,
    pub src_strides: &'a [usize],
    pub dst_offset: usize,
    pub dst_strides: &'a [usize],
}

/// The entry point of a layout kernel over the output `shape` and its invocation count: on CPU
/// adapters, when rows are loop-sized, `entries[1]` with one invocation per row of the last dim
/// (`params[0]`, the invocation count the kernel sees, becomes the row count); else `entries[0]`.
fn per_element_or_per_row(
    gpu: &Gpu,
    entries: [&'static str; 2],
    shape: &[usize],
    params: &mut [u32],
) -> (&'static str, usize) {
    let n = numel(shape);
    let row_len = shape.last().copied().unwrap_or(1);
    if gpu.is_cpu() && (4..=crate::gpu::MAX_LOOP_ITERATIONS).contains(&row_len) {
        params[0] = (n / row_len) as u32;
        (entries[1], n / row_len)
    } else {
        (entries[0], n)
    }
}

pub(crate) fn strided_copy(src: &Tensor, dst: &Tensor, c: &StridedCopy) -> Result<()> {
    check_rank("strided copy", c.shape)?;
    let gpu = src.gpu();
    let n = numel(c.shape);
    let mut params = vec![
        n as u32,
        c.shape.len() as u32,
        c.src_offset as u32,
        c.dst_offset as u32,
    ];
    params.extend(pack8(c.shape, 1));
    params.extend(pack8(c.src_strides, 0));
    params.extend(pack8(c.dst_strides, 0));
    let (entry, invocations) =
        per_element_or_per_row(gpu, ["strided_copy", "strided_copy_rows"], c.shape, &mut params);
    let kernel = kernel_for(gpu, shader!("layout"), entry, src.dtype(), &[], 1, 1);
    gpu.dispatch_named(
        &kernel,
        &params,
        &[src.buffer()],
        &[dst.buffer()],
        gpu.grid((invocations as u32).div_ceil(FLAT_WG)),
        Cost::memory(c.op, (2 * n * src.dtype().size()) as u64),
    );
    Ok(())
}

/// Writes `src` zero-padded by `pads` into `dst` (every element once).
fn dispatch_pad(src: &Tensor, dst: &Tensor, pads: &[(usize, usize)]) {
    let gpu = src.gpu();
    let n = dst.numel();
    let before: Vec<usize> = pads.iter().map(|p| p.0).collect();
    let mut params = vec![n as u32, src.rank() as u32, 0, 0];
    params.extend(pack8(dst.shape(), 1));
    params.extend(pack8(src.shape(), 1));
    params.extend(pack8(&before, 0));
    let (entry, invocations) = per_element_or_per_row(gpu, ["pad", "pad_rows"], dst.shape(), &mut params);
    let kernel = kernel_for(gpu, shader!("pad"), entry, src.dtype(), &[], 1, 1);
    gpu.dispatch_named(
        &kernel,
        &params,
        &[src.buffer()],
        &[dst.buffer()],
        gpu.grid((invocations as u32).div_ceil(FLAT_WG)),
        Cost::memory("pad", src.byte_len() + dst.byte_len()),
    );
}

/// Runs `f` in f32 when `t`'s dtype is f16 and the device has no f16 support.
fn with_fallback(t: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> Option<Result<Tensor>> {
    needs_f32_fallback(t.gpu(), t.dtype()).then(|| f(&t.to_dtype(DType::F32)?)?.to_dtype(DType::F16))
}

impl Tensor {
    /// Reorders dims: output dim i is input dim `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> Result<Tensor> {
        let mut sorted = perm.to_vec();
        sorted.sort_unstable();
        if sorted != (0..self.rank()).collect::<Vec<_>>() {
            return Err(Error::shape(
                "permute",
                format!(
                    "{perm:?} is not a permutation of the {} dims of {:?}",
                    self.rank(),
                    self.shape()
                ),
            ));
        }
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(self.clone());
        }
        if let Some(r) = with_fallback(self, |t| t.permute(perm)) {
            return r;
        }
        let out_shape: Vec<usize> = perm.iter().map(|&p| self.shape()[p]).collect();
        let in_strides = contiguous_strides(self.shape());
        let src_strides: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
        let out = Tensor::empty(self.gpu(), &out_shape, self.dtype())?;
        strided_copy(
            self,
            &out,
            &StridedCopy {
                op: "permute",
                shape: &out_shape,
                src_offset: 0,
                src_strides: &src_strides,
                dst_offset: 0,
                dst_strides: &contiguous_strides(&out_shape),
            },
        )?;
        let mut inverse = vec![0; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p] = i;
        }
        Ok(out.with_grad_fn(
            "permute",
            vec![self.clone()],
            Box::new(move |g| Ok(vec![Some(g.permute(&inverse)?)])),
        ))
    }

    /// Swaps two dims.
    pub fn transpose(&self, d0: usize, d1: usize) -> Result<Tensor> {
        let mut perm: Vec<usize> = (0..self.rank()).collect();
        if d0 >= perm.len() || d1 >= perm.len() {
            return Err(Error::shape(
                "transpose",
                format!("dims {d0},{d1} out of range for {:?}", self.shape()),
            ));
        }
        perm.swap(d0, d1);
        self.permute(&perm)
    }

    /// Repeats size-1 dims (and prepends dims) to reach `shape`.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let fits = super::elementwise::broadcast_shape(self.shape(), shape).is_some_and(|s| s == shape);
        if !fits {
            return Err(Error::shape(
                "broadcast_to",
                format!("{:?} cannot broadcast to {shape:?}", self.shape()),
            ));
        }
        if let Some(r) = with_fallback(self, |t| t.broadcast_to(shape)) {
            return r;
        }
        let out = Tensor::empty(self.gpu(), shape, self.dtype())?;
        strided_copy(
            self,
            &out,
            &StridedCopy {
                op: "broadcast_to",
                shape,
                src_offset: 0,
                src_strides: &broadcast_strides(self.shape(), shape),
                dst_offset: 0,
                dst_strides: &contiguous_strides(shape),
            },
        )?;
        let in_shape = self.shape().to_vec();
        Ok(out.with_grad_fn(
            "broadcast_to",
            vec![self.clone()],
            Box::new(move |g| Ok(vec![Some(g.sum_to_shape(&in_shape)?)])),
        ))
    }

    /// Elements `start..start+len` along `axis`.
    pub fn slice(&self, axis: usize, start: usize, len: usize) -> Result<Tensor> {
        if axis >= self.rank() || start + len > self.shape()[axis] {
            return Err(Error::shape(
                "slice",
                format!("{start}..{} on axis {axis} of {:?}", start + len, self.shape()),
            ));
        }
        if start == 0 && len == self.shape()[axis] {
            return Ok(self.clone());
        }
        if let Some(r) = with_fallback(self, |t| t.slice(axis, start, len)) {
            return r;
        }
        let mut out_shape = self.shape().to_vec();
        out_shape[axis] = len;
        let strides = contiguous_strides(self.shape());
        let out = Tensor::empty(self.gpu(), &out_shape, self.dtype())?;
        strided_copy(
            self,
            &out,
            &StridedCopy {
                op: "slice",
                shape: &out_shape,
                src_offset: start * strides[axis],
                src_strides: &strides,
                dst_offset: 0,
                dst_strides: &contiguous_strides(&out_shape),
            },
        )?;
        let full = self.shape()[axis];
        Ok(out.with_grad_fn(
            "slice",
            vec![self.clone()],
            Box::new(move |g| Ok(vec![Some(g.pad_axis(axis, start, full - start - len)?)])),
        ))
    }

    /// Zero-pads axis `axis` with `before` and `after` elements.
    pub fn pad_axis(&self, axis: usize, before: usize, after: usize) -> Result<Tensor> {
        if axis >= self.rank() {
            return Err(Error::shape(
                "pad",
                format!("axis {axis} out of range for {:?}", self.shape()),
            ));
        }
        let mut pads = vec![(0, 0); self.rank()];
        pads[axis] = (before, after);
        self.pad(&pads)
    }

    /// Zero-pads every axis i with `pads[i] = (before, after)` elements, in one copy.
    pub fn pad(&self, pads: &[(usize, usize)]) -> Result<Tensor> {
        if pads.len() != self.rank() {
            return Err(Error::shape(
                "pad",
                format!(
                    "{} (before, after) pairs for a tensor of shape {:?}",
                    pads.len(),
                    self.shape()
                ),
            ));
        }
        if pads.iter().all(|&p| p == (0, 0)) {
            return Ok(self.clone());
        }
        if let Some(r) = with_fallback(self, |t| t.pad(pads)) {
            return r;
        }
        let out_shape: Vec<usize> = self
            .shape()
            .iter()
            .zip(pads)
            .map(|(n, (b, a))| n + b + a)
            .collect();
        let out = Tensor::empty(self.gpu(), &out_shape, self.dtype())?;
        dispatch_pad(self, &out, pads);
        let (pads, shape) = (pads.to_vec(), self.shape().to_vec());
        Ok(out.with_grad_fn(
            "pad",
            vec![self.clone()],
            Box::new(move |g| {
                let mut inner = g.clone();
                for (axis, (&(before, _), &len)) in pads.iter().zip(&shape).enumerate() {
                    if inner.shape()[axis] != len {
                        inner = inner.slice(axis, before, len)?;
                    }
                }
                Ok(vec![Some(inner)])
            }),
        ))
    }

    /// Joins tensors along `axis` (all other dims equal).
    pub fn concat(parts: &[Tensor], axis: usize) -> Result<Tensor> {
        let first = parts
            .first()
            .ok_or_else(|| Error::shape("concat", "no tensors given"))?;
        let mut out_shape = first.shape().to_vec();
        if axis >= out_shape.len() {
            return Err(Error::shape(
                "concat",
                format!("axis {axis} out of range for {out_shape:?}"),
            ));
        }
        out_shape[axis] = 0;
        for p in parts {
            let same_other_dims = p.rank() == first.rank()
                && (0..p.rank()).all(|d| d == axis || p.shape()[d] == first.shape()[d]);
            if !same_other_dims || p.dtype() != first.dtype() {
                return Err(Error::shape(
                    "concat",
                    format!(
                        "{:?} ({:?}) does not fit {:?} ({:?}) along axis {axis}",
                        p.shape(),
                        p.dtype(),
                        first.shape(),
                        first.dtype()
                    ),
                ));
            }
            out_shape[axis] += p.shape()[axis];
        }
        if needs_f32_fallback(first.gpu(), first.dtype()) {
            let f32_parts = parts
                .iter()
                .map(|p| p.to_dtype(DType::F32))
                .collect::<Result<Vec<_>>>()?;
            return Tensor::concat(&f32_parts, axis)?.to_dtype(DType::F16);
        }
        let out = Tensor::empty(first.gpu(), &out_shape, first.dtype())?;
        let out_strides = contiguous_strides(&out_shape);
        let mut starts = Vec::with_capacity(parts.len());
        let mut start = 0;
        for p in parts {
            strided_copy(
                p,
                &out,
                &StridedCopy {
                    op: "concat",
                    shape: p.shape(),
                    src_offset: 0,
                    src_strides: &contiguous_strides(p.shape()),
                    dst_offset: start * out_strides[axis],
                    dst_strides: &out_strides,
                },
            )?;
            starts.push((start, p.shape()[axis]));
            start += p.shape()[axis];
        }
        Ok(out.with_grad_fn(
            "concat",
            parts.to_vec(),
            Box::new(move |g| {
                starts
                    .iter()
                    .map(|&(s, len)| g.slice(axis, s, len).map(Some))
                    .collect()
            }),
        ))
    }
}
