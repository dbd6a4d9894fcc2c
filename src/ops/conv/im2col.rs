//! The im2col + GEMM forward (shaders/conv_im2col.wgsl `im2col`, then a blocked matmul per
//! group), split over the batch where the column matrix would exceed one storage binding.

use super::geometry::ConvGeometry;
use crate::gpu::Cost;
use crate::ops::kernel_for;
use crate::{shader, DType, Error, Gpu, Result, Tensor};

/// Images per im2col chunk: the column matrix [G, K4, N*P] (and the matmul's output, and
/// its padding of N*P to a multiple of 4) must fit one storage binding.
pub(super) fn images_per_chunk(geo: &ConvGeometry, dt: DType, gpu: &Gpu) -> Result<usize> {
    let per_image = (geo.opts.groups * geo.k4().max(geo.cout_g()) * (geo.pixels() + 3) * dt.size()) as u64;
    let fit = (gpu.max_binding_bytes() / per_image) as usize;
    if fit == 0 {
        return Err(Error::TooLarge {
            what: format!("the im2col buffer of one image of conv {}", geo.describe()),
            bytes: per_image,
            limit: gpu.max_binding_bytes(),
        });
    }
    // im2col dispatches one workgroup per (image, column-matrix row).
    let max_groups = gpu.limits.max_compute_workgroups_per_dimension as usize;
    if geo.opts.groups * geo.k4() > max_groups {
        return Err(Error::shape(
            "conv2d",
            format!(
                "im2col of {} has too many columns for one dispatch; use the tiled or direct implementation",
                geo.describe()
            ),
        ));
    }
    Ok(fit.min(geo.n).min(max_groups))
}

/// Runs `f` on slices of the batch small enough for [`images_per_chunk`] and concatenates the
/// results along the batch.
pub(super) fn in_batch_chunks(
    geo: &ConvGeometry,
    dt: DType,
    gpu: &Gpu,
    x: &Tensor,
    f: impl Fn(&Tensor, &ConvGeometry) -> Result<Tensor>,
) -> Result<Tensor> {
    let fit = images_per_chunk(geo, dt, gpu)?;
    if fit >= geo.n {
        return f(x, geo);
    }
    let parts = (0..geo.n)
        .step_by(fit)
        .map(|start| {
            let len = fit.min(geo.n - start);
            f(&x.slice(0, start, len)?, &geo.with_batch(len))
        })
        .collect::<Result<Vec<_>>>()?;
    Tensor::concat(&parts, 0)
}

/// Weights as per-group matrices [G, Cout_g, K4] (zero-padded along k).
pub(super) fn grouped_weights(w: &Tensor, geo: &ConvGeometry) -> Result<Tensor> {
    w.reshape(&[geo.opts.groups, geo.cout_g(), geo.k()])?
        .pad_axis(2, 0, geo.k4() - geo.k())
}

pub(super) fn im2col(x: &Tensor, geo: &ConvGeometry) -> Result<Tensor> {
    let gpu = x.gpu();
    let col = Tensor::empty(gpu, &[geo.opts.groups, geo.k4(), geo.n * geo.pixels()], x.dtype())?;
    let kernel = kernel_for(gpu, shader!("conv_im2col"), "im2col", x.dtype(), &[], 1, 1);
    gpu.dispatch_named(
        &kernel,
        &geo.params(),
        &[x.buffer()],
        &[col.buffer()],
        [1, geo.n as u32, (geo.opts.groups * geo.k4()) as u32],
        Cost::memory("im2col", x.byte_len() + col.byte_len()),
    );
    Ok(col)
}

/// dy [N, Cout, OH, OW] as per-group matrices [G, Cout_g, N*P].
pub(super) fn grouped_rows(dy: &Tensor, geo: &ConvGeometry) -> Result<Tensor> {
    dy.reshape(&[geo.n, geo.opts.groups, geo.cout_g(), geo.pixels()])?
        .permute(&[1, 2, 0, 3])?
        .reshape(&[geo.opts.groups, geo.cout_g(), geo.n * geo.pixels()])
}

/// y = conv(x, w) as per-group matmuls of the weights and the column matrix.
pub(super) fn conv_forward_im2col(x: &Tensor, w: &Tensor, geo: &ConvGeometry) -> Result<Tensor> {
    in_batch_chunks(geo, x.dtype(), x.gpu(), x, |xc, gc| {
        let col = im2col(xc, gc)?; // [G, K4, N*P]
        let y = grouped_weights(w, gc)?.matmul(&col)?; // [G, Cout_g, N*P]
        y.reshape(&[gc.opts.groups, gc.cout_g(), gc.n, gc.pixels()])?
            .permute(&[2, 0, 1, 3])?
            .reshape(&gc.output_shape())
    })
}
