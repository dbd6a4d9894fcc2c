//! Convolution gradients: the input gradient (a stride-1 conv of flipped weights, col2im, or
//! the direct gather kernel) and the weight gradient (implicit GEMM, im2col matmuls, direct,
//! and for Winograd convs the implicit GEMM or Winograd's batched GEMM, measured).

use super::choice::{conv_forward, ConvImpl};
use super::epilogue::ConvAddends;
use super::geometry::{flat_groups, ConvGeometry, SLICES_PARAM};
use super::im2col::{grouped_rows, grouped_weights, im2col, images_per_chunk, in_batch_chunks};
use super::options::ConvOptions;
use super::tiled::padded_input;
use super::winograd::{winograd_applies, winograd_weight_grad};
use crate::gpu::{Cost, SplitAxis, MAX_LOOP_ITERATIONS};
use crate::ops::depthwise7::{depthwise7_conv, depthwise7_weight_grad};
use crate::ops::kernel_for;
use crate::{shader, DType, Result, Tensor};

/// dx of conv(x, w) given dy. For stride 1 this is itself a forward conv of dy with flipped,
/// channel-swapped weights (so it runs on the same kernels as the forward); otherwise
/// im2col's matmul + col2im, or the direct gather kernel (also naive's backward).
pub(crate) fn conv_input_grad(dy: &Tensor, w: &Tensor, geo: &ConvGeometry, imp: ConvImpl) -> Result<Tensor> {
    if imp == ConvImpl::Depthwise7 {
        return match geo.is_depthwise7() {
            true => depthwise7_conv(dy, w, None, None, true),
            false => conv_input_grad(dy, w, geo, ConvImpl::Direct),
        };
    }
    let gpu = dy.gpu();
    let dt = dy.dtype();
    let o = &geo.opts;
    let as_conv = o.stride == (1, 1)
        && o.dilation.0 * (geo.kh - 1) >= o.padding.0
        && o.dilation.1 * (geo.kw - 1) >= o.padding.1
        && matches!(
            imp,
            ConvImpl::Im2col | ConvImpl::Tiled | ConvImpl::Direct | ConvImpl::Winograd
        );
    match imp {
        _ if as_conv => {
            let flipped = Tensor::empty(gpu, &[geo.cin, geo.cout_g(), geo.kh, geo.kw], dt)?;
            let kernel = kernel_for(gpu, shader!("conv_weights"), "flip_transpose", dt, &[], 1, 1);
            gpu.dispatch_named(
                &kernel,
                &geo.params(),
                &[w.buffer()],
                &[flipped.buffer()],
                flat_groups(gpu, flipped.numel()),
                Cost::memory("conv_weight_flip", 2 * w.byte_len()),
            );
            let back = ConvOptions {
                stride: (1, 1),
                padding: (
                    o.dilation.0 * (geo.kh - 1) - o.padding.0,
                    o.dilation.1 * (geo.kw - 1) - o.padding.1,
                ),
                dilation: o.dilation,
                groups: o.groups,
            };
            let back_geo = ConvGeometry::new(dy.shape(), flipped.shape(), back)?;
            conv_forward(dy, &flipped, ConvAddends::default(), &back_geo, imp)
        }
        ConvImpl::Naive | ConvImpl::Direct => {
            let dx = Tensor::empty(gpu, &geo.input_shape(), dt)?;
            let kernel = kernel_for(
                gpu,
                shader!("conv_direct"),
                "conv_input_grad_direct",
                dt,
                &[],
                2,
                1,
            );
            gpu.dispatch_named(
                &kernel,
                &geo.params(),
                &[dy.buffer(), w.buffer()],
                &[dx.buffer()],
                flat_groups(gpu, dx.numel()),
                Cost::new(
                    "conv2d_input_grad",
                    geo.flops(),
                    dy.byte_len() + w.byte_len() + dx.byte_len(),
                ),
            );
            Ok(dx)
        }
        _ => in_batch_chunks(geo, dt, gpu, dy, |dyc, gc| {
            let dcol = grouped_weights(w, gc)?.matmul_t(&grouped_rows(dyc, gc)?, true, false)?; // [G, K4, N*P]
            let dx = Tensor::empty(gpu, &gc.input_shape(), dt)?;
            let kernel = kernel_for(gpu, shader!("conv_im2col"), "col2im", dt, &[], 1, 1);
            gpu.dispatch_named(
                &kernel,
                &gc.params(),
                &[dcol.buffer()],
                &[dx.buffer()],
                flat_groups(gpu, dx.numel()),
                Cost::memory("col2im", dcol.byte_len() + dx.byte_len()),
            );
            Ok(dx)
        }),
    }
}

/// dw of conv(x, w) given dy.
pub(crate) fn conv_weight_grad(x: &Tensor, dy: &Tensor, geo: &ConvGeometry, imp: ConvImpl) -> Result<Tensor> {
    let gpu = x.gpu();
    let dt = x.dtype();
    match imp {
        // (the kernel sums the bias's gradient too; the conv's own backward sums it apart)
        ConvImpl::Depthwise7 if geo.is_depthwise7() => Ok(depthwise7_weight_grad(x, dy)?.0),
        ConvImpl::Depthwise7 => conv_weight_grad(x, dy, geo, ConvImpl::Direct),
        ConvImpl::Naive | ConvImpl::Direct => {
            // Each invocation loops over images x output pixels: keep that under the loop budget
            // by summing over batch slices (or use the GEMM route when one image is too big).
            let per_image = geo.oh * (geo.ow + 1) + 1;
            let images = MAX_LOOP_ITERATIONS / per_image;
            if images == 0 {
                return conv_weight_grad(x, dy, geo, ConvImpl::Im2col);
            }
            let kernel = kernel_for(
                gpu,
                shader!("conv_direct"),
                "conv_weight_grad_direct",
                dt,
                &[],
                2,
                1,
            );
            let mut total: Option<Tensor> = None;
            for start in (0..geo.n).step_by(images) {
                let len = images.min(geo.n - start);
                let gc = geo.with_batch(len);
                let (xc, dyc) = (x.slice(0, start, len)?, dy.slice(0, start, len)?);
                let dw = Tensor::empty(gpu, &geo.weight_shape(), dt)?;
                gpu.dispatch_named(
                    &kernel,
                    &gc.params(),
                    &[xc.buffer(), dyc.buffer()],
                    &[dw.buffer()],
                    flat_groups(gpu, dw.numel()),
                    Cost::new(
                        "conv2d_weight_grad",
                        gc.flops(),
                        xc.byte_len() + dyc.byte_len() + dw.byte_len(),
                    ),
                );
                total = Some(match total {
                    Some(t) => t.add(&dw)?,
                    None => dw,
                });
            }
            Ok(total.expect("batch of at least one image"))
        }
        ConvImpl::Winograd if winograd_applies(gpu, geo) && geo.opts.groups == 1 => {
            winograd_weight_grad(x, dy, geo, || weight_grad_tiled(x, dy, geo))
        }
        ConvImpl::Tiled | ConvImpl::Winograd => weight_grad_tiled(x, dy, geo),
        _ => {
            let fit = images_per_chunk(geo, dt, gpu)?;
            let mut total: Option<Tensor> = None;
            for start in (0..geo.n).step_by(fit) {
                let len = fit.min(geo.n - start);
                let gc = geo.with_batch(len);
                let col = im2col(&x.slice(0, start, len)?, &gc)?;
                // dW^T = col [K4, N*P] x dy^T: transposing dy is cheaper than transposing col.
                let part = col.matmul_t(&grouped_rows(&dy.slice(0, start, len)?, &gc)?, false, true)?; // [G, K4, Cout_g]
                total = Some(match total {
                    Some(t) => t.add(&part)?,
                    None => part,
                });
            }
            total
                .expect("batch of at least one image")
                .slice(1, 0, geo.k())?
                .permute(&[0, 2, 1])?
                .reshape(&geo.weight_shape())
        }
    }
}

/// dw by the implicit-GEMM kernel: no column matrix; the pixel reduction is split in slices
/// (enough workgroups for every core, each slice under the loop budget) summed afterwards.
/// On CPU adapters each invocation owns 24 kernel offsets x 32 output channels (measured
/// best of 8..32 x 16..64 with `wgdiff profile`; about the forward's GFLOP/s); where a
/// workgroup is one subgroup, its lanes share the dY reads (`SHARE`, subgroupBroadcast).
fn weight_grad_tiled(x: &Tensor, dy: &Tensor, geo: &ConvGeometry) -> Result<Tensor> {
    let gpu = x.gpu();
    let (x, geo) = &padded_input(x, geo)?;
    let (rows, cols, lanes) = if gpu.is_cpu() { (24, 32, 8) } else { (4, 4, 64) };
    let share = gpu.fixed_subgroup_size() == Some(lanes as u32) && cols % lanes == 0;
    let groups_xy = geo.k4().div_ceil(rows * lanes) * geo.cout_g().div_ceil(cols) * geo.opts.groups;
    let reduction = geo.n * geo.pixels();
    let slices = (reduction / 4)
        .div_ceil(MAX_LOOP_ITERATIONS / 2)
        .max(16usize.div_ceil(groups_xy))
        .min(reduction.div_ceil(256))
        .max(1);
    let kernel = kernel_for(
        gpu,
        shader!("conv_wgrad_tiled"),
        "conv_weight_grad_tiled",
        x.dtype(),
        &[
            ("R", rows.to_string()),
            ("C", cols.to_string()),
            ("W", lanes.to_string()),
            ("C4", "1".into()),
            ("SHARE", u8::from(share).to_string()),
            ("UNSHARED", u8::from(!share).to_string()),
            ("CH", (cols / lanes).to_string()),
        ],
        2,
        1,
    );
    let partial = Tensor::empty(gpu, &[slices, geo.cout, geo.k4()], DType::F32)?;
    let groups = [
        geo.k4().div_ceil(rows * lanes) as u32,
        geo.cout_g().div_ceil(cols) as u32,
        (geo.opts.groups * slices) as u32,
    ];
    let mut params = geo.params();
    params[SLICES_PARAM] = slices as u32;
    gpu.dispatch_parts(
        &kernel,
        &params,
        &[x.buffer(), dy.buffer()],
        &[partial.buffer()],
        groups,
        SplitAxis::Z,
        Cost::new(
            "conv2d_weight_grad",
            geo.flops(),
            x.byte_len() + dy.byte_len() + partial.byte_len(),
        ),
    );
    partial
        .sum(&[0], false)?
        .slice(1, 0, geo.k())?
        .reshape(&geo.weight_shape())?
        .to_dtype(x.dtype())
}
