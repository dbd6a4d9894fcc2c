//! The naive forward (one output per invocation, shaders/conv_naive.wgsl: the baseline) and the
//! direct forward (weights shared across a workgroup, shaders/conv_direct.wgsl).

use super::geometry::{flat_groups, ConvGeometry};
use crate::gpu::Cost;
use crate::ops::{kernel_for, FLAT_WG};
use crate::{shader, Result, Tensor};

/// y = conv(x, w) by the naive kernel, one output per invocation.
pub(super) fn conv_forward_naive(x: &Tensor, w: &Tensor, geo: &ConvGeometry) -> Result<Tensor> {
    let gpu = x.gpu();
    let dt = x.dtype();
    let y = Tensor::empty(gpu, &geo.output_shape(), dt)?;
    let kernel = kernel_for(gpu, shader!("conv_naive"), "conv_forward_naive", dt, &[], 2, 1);
    gpu.dispatch_named(
        &kernel,
        &geo.params(),
        &[x.buffer(), w.buffer()],
        &[y.buffer()],
        flat_groups(gpu, y.numel()),
        Cost::new("conv2d", geo.flops(), x.byte_len() + w.byte_len() + y.byte_len()),
    );
    Ok(y)
}

/// y = conv(x, w) by the direct kernel, a workgroup per (image, output channel) row; the naive
/// kernel when the rows exceed the dispatch limit.
pub(super) fn conv_forward_direct(x: &Tensor, w: &Tensor, geo: &ConvGeometry) -> Result<Tensor> {
    let gpu = x.gpu();
    let dt = x.dtype();
    let y = Tensor::empty(gpu, &geo.output_shape(), dt)?;
    let rows = geo.n * geo.cout;
    if rows > gpu.limits.max_compute_workgroups_per_dimension as usize {
        return conv_forward_naive(x, w, geo);
    }
    let kernel = kernel_for(gpu, shader!("conv_direct"), "conv_forward_direct", dt, &[], 2, 1);
    let groups = [geo.pixels().div_ceil(4 * FLAT_WG as usize) as u32, rows as u32, 1];
    gpu.dispatch_named(
        &kernel,
        &geo.params(),
        &[x.buffer(), w.buffer()],
        &[y.buffer()],
        groups,
        Cost::new("conv2d", geo.flops(), x.byte_len() + w.byte_len() + y.byte_len()),
    );
    Ok(y)
}
