//! The fused ConvNeXt block's depthwise 7x7 conv (padding 3) and its gradients, register-blocked
//! in `shaders/depthwise7.wgsl`: the forward, the transposed conv (input gradient) and the weight and bias gradients.

use super::kernel_for;
use crate::gpu::Cost;
use crate::{shader, DType, Error, Gpu, Result, Tensor};

/// Outputs along a row that one invocation makes (`dw7_forward`) or reads (`dw7_wgrad`).
const SEGMENT: usize = 8;
/// Row segments each invocation of the weight gradient walks, about: more mean fewer slices
/// to add afterwards, fewer mean more workgroups to spread over the device.
const SEGMENTS_PER_INVOCATION: usize = 8;
/// Most slices per channel of the weight gradient.
const MAX_SLICES: usize = 256;

/// Lanes per workgroup: a CPU adapter runs a workgroup as SIMD lanes (8 on lavapipe), a GPU
/// wants more.
fn lanes(gpu: &Gpu) -> u32 {
    if gpu.is_cpu() {
        8
    } else {
        64
    }
}

/// [N, C, H, W] of `src`.
fn dims(op: &'static str, src: &Tensor) -> Result<[usize; 4]> {
    src.shape()
        .try_into()
        .map_err(|_| Error::shape(op, format!("input {:?} must be [N, C, H, W]", src.shape())))
}

/// The depthwise 7x7 conv (padding 3, one filter per channel) of `src` [N, C, H, W] with
/// `weight` [C, 1, 7, 7], plus `bias` [C] and `residual` (src's shape) when given; with `flip`
/// the transposed conv, which is the forward's input gradient. No autograd: the fused block's
/// backward calls it itself.
pub fn depthwise7_conv(
    src: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    residual: Option<&Tensor>,
    flip: bool,
) -> Result<Tensor> {
    const OP: &str = "depthwise7_conv";
    let [n, c, h, w] = dims(OP, src)?;
    super::check_param(OP, "weight", weight, &[c, 1, 7, 7], src)?;
    if let Some(bias) = bias {
        super::check_param(OP, "bias", bias, &[c], src)?;
    }
    if let Some(residual) = residual {
        super::check_param(OP, "residual", residual, src.shape(), src)?;
    }
    let gpu = src.gpu();
    let dt = src.dtype();
    let wg = lanes(gpu);
    let defines = [
        ("WG", wg.to_string()),
        ("SUMS", (50 * wg).to_string()),
        ("FLIP", flip.to_string()),
        ("BIAS", bias.is_some().to_string()),
        ("RESIDUAL", residual.is_some().to_string()),
    ];
    let segs = w.div_ceil(SEGMENT);
    let params = [n, c, h, w, segs, 0].map(|v| v as u32);
    let out = Tensor::empty(gpu, src.shape(), dt)?;
    // (an absent bias or residual binds the weight: the kernel never reads it)
    let bytes = |t: &Tensor| (t.numel() * dt.size()) as u64;
    gpu.dispatch_named(
        &kernel_for(gpu, shader!("depthwise7"), "dw7_forward", dt, &defines, 4, 1),
        &params,
        &[
            src.buffer(),
            weight.buffer(),
            bias.unwrap_or(weight).buffer(),
            residual.unwrap_or(weight).buffer(),
        ],
        &[out.buffer()],
        [((h * segs) as u32).div_ceil(wg), (n * c) as u32, 1],
        Cost::new(
            if flip {
                "depthwise7_input_grad"
            } else {
                "depthwise7_conv"
            },
            (src.numel() * 2 * 49) as f64,
            (2 + residual.is_some() as u64) * bytes(src) + bytes(weight),
        ),
    );
    Ok(out)
}

/// The weight [C, 1, 7, 7] and bias [C] gradients of [`depthwise7_conv`] (not flipped) from its
/// input `x` and the gradient of its output `dout`.
pub fn depthwise7_weight_grad(x: &Tensor, dout: &Tensor) -> Result<(Tensor, Tensor)> {
    const OP: &str = "depthwise7_weight_grad";
    let [n, c, h, w] = dims(OP, x)?;
    super::check_param(OP, "output gradient", dout, x.shape(), x)?;
    let gpu = x.gpu();
    let dt = x.dtype();
    let wg = lanes(gpu) as usize;
    let segs = w.div_ceil(SEGMENT);
    let items = n * h * segs;
    let slices = items.div_ceil(wg * SEGMENTS_PER_INVOCATION).clamp(1, MAX_SLICES);
    let defines = [
        ("WG", wg.to_string()),
        ("SUMS", (50 * wg).to_string()),
        ("FLIP", "false".to_string()),
        ("BIAS", "false".to_string()),
        ("RESIDUAL", "false".to_string()),
    ];
    let params = [n, c, h, w, segs, slices].map(|v| v as u32);
    let partial = Tensor::empty(gpu, &[c, slices, 50], DType::F32)?;
    gpu.dispatch_named(
        &kernel_for(gpu, shader!("depthwise7"), "dw7_wgrad", dt, &defines, 2, 1),
        &params,
        &[x.buffer(), dout.buffer()],
        &[partial.buffer()],
        [slices as u32, c as u32, 1],
        Cost::new(
            "depthwise7_weight_grad",
            (x.numel() * 2 * 49) as f64,
            2 * (x.numel() * dt.size()) as u64,
        ),
    );
    let dw = Tensor::empty(gpu, &[c, 1, 7, 7], dt)?;
    let db = Tensor::empty(gpu, &[c], dt)?;
    gpu.dispatch_named(
        &kernel_for(gpu, shader!("depthwise7"), "dw7_wgrad_sum", dt, &defines, 1, 2),
        &params,
        &[partial.buffer()],
        &[dw.buffer(), db.buffer()],
        [((c * 50) as u32).div_ceil(64), 1, 1],
        Cost::new(
            "depthwise7_weight_grad_sum",
            (c * 50 * slices) as f64,
            (partial.numel() * 4) as u64,
        ),
    );
    Ok((dw, db))
}
