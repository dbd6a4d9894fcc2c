//! The depthwise 7x7 conv (padding 3) of the fused ConvNeXt block and of `conv2d`'s
//! `depthwise7` implementation, and its gradients, register-blocked in
//! `shaders/depthwise7.wgsl`: the forward, the transposed conv (input gradient) and the weight
//! and bias gradients.

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

/// Output rows one invocation of the forward makes, the fixed rule's first: on lavapipe 4 rows
/// (each input row loaded once for up to 4 output rows) ran the ConvNeXt shape 2.1x faster than
/// 1, and 8 slower again (BENCHMARKS.md); a GPU wants more, smaller invocations. The
/// autotuner times both per shape.
fn row_candidates(gpu: &Gpu) -> [usize; 2] {
    if gpu.is_cpu() {
        [4, 1]
    } else {
        [1, 4]
    }
}

/// The autotuner's key and labels of the forward's row counts for an input of `shape`.
fn rows_key(gpu: &Gpu, [n, c, h, w]: [usize; 4], dt: DType) -> (String, Vec<String>) {
    let labels = row_candidates(gpu).map(|r| format!("{r} rows")).to_vec();
    let key = format!(
        "depthwise7:{dt:?}:{n}x{c}x{}x{}:of {}",
        h.next_power_of_two(),
        w.next_power_of_two(),
        labels.join(",")
    );
    (key, labels)
}

/// Makes [`depthwise7_conv`] on inputs of `shape` and `dtype` run `rows` output rows per
/// invocation from now on (tests and experiments; one of the adapter's candidates).
pub fn pin_depthwise7_rows(gpu: &Gpu, shape: [usize; 4], dtype: DType, rows: usize) -> Result<()> {
    let candidates = row_candidates(gpu);
    let Some(i) = candidates.iter().position(|&r| r == rows) else {
        return Err(Error::shape(
            "pin_depthwise7_rows",
            format!("{rows} rows is not a candidate on this adapter ({candidates:?})"),
        ));
    };
    let (key, labels) = rows_key(gpu, shape, dtype);
    gpu.tuner().set(&key, &labels[i]);
    Ok(())
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
    let segs = w.div_ceil(SEGMENT);
    let params = [n, c, h, w, segs, 0].map(|v| v as u32);
    // (an absent bias or residual binds the weight: the kernel never reads it)
    let bytes = |t: &Tensor| (t.numel() * dt.size()) as u64;
    let dispatch = |rows: usize, out: &Tensor| {
        let defines = [
            ("WG", wg.to_string()),
            ("SUMS", (50 * wg).to_string()),
            ("FLIP", flip.to_string()),
            ("BIAS", bias.is_some().to_string()),
            ("RESIDUAL", residual.is_some().to_string()),
            ("ROWS", rows.to_string()),
        ];
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
            [((h.div_ceil(rows) * segs) as u32).div_ceil(wg), (n * c) as u32, 1],
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
    };
    let rows = row_candidates(gpu);
    let (key, labels) = rows_key(gpu, [n, c, h, w], dt);
    let choice = gpu.tuner().choose(gpu, &key, &labels, 0, |r| {
        Tensor::empty(gpu, src.shape(), dt).map(|scratch| dispatch(rows[r], &scratch))
    })?;
    let out = Tensor::empty(gpu, src.shape(), dt)?;
    dispatch(rows[choice], &out);
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
        ("ROWS", "1".to_string()),
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
