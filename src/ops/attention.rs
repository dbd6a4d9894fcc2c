//! Multi-head scaled dot-product attention, memory-efficient forward and FlashAttention-style
//! backward (shaders/attention.wgsl), and the U-Net spatial self-attention layer built on it.

use super::{check_same_dtype, kernel_for, needs_f32_fallback, FLAT_WG};
use crate::gpu::Cost;
use crate::{shader, DType, Error, Result, Tensor};

/// Largest head dim the kernels keep in registers.
pub const MAX_HEAD_DIM: usize = 64;

/// Errors unless q, k, v are equal non-empty [B, heads, L, d] shapes of one dtype, d <= 64.
fn check_qkv(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<()> {
    const OP: &str = "attention";
    let shape = q.shape();
    if shape.len() != 4 || shape.contains(&0) {
        return Err(Error::shape(
            OP,
            format!("q {shape:?} must be a non-empty [B, heads, L, d]"),
        ));
    }
    for (name, t) in [("k", k), ("v", v)] {
        if t.shape() != shape {
            return Err(Error::shape(
                OP,
                format!("{name} {:?} must have the shape of q {shape:?}", t.shape()),
            ));
        }
        check_same_dtype(OP, q, t)?;
    }
    if shape[3] > MAX_HEAD_DIM {
        return Err(Error::shape(
            OP,
            format!(
                "head dim {} of {shape:?} exceeds {MAX_HEAD_DIM}; use more heads",
                shape[3]
            ),
        ));
    }
    Ok(())
}

/// `softmax(q k^T / sqrt(d)) v` for q, k, v of shape [B, heads, L, d] (B * heads independent
/// problems over L positions, head dim d <= 64), differentiable in q, k and v.
///
/// Memory-efficient: no L x L matrix is stored. The forward runs one query row per
/// invocation with an online softmax (running max and sum) over the keys and saves the row
/// logsumexp; the backward recomputes the probabilities from it, FlashAttention style: one
/// kernel per query row for dq (and D_i = dO_i . O_i), one per key row for dk, dv (looping
/// over the queries), so no float atomics are needed. This shape is the fastest found on
/// lavapipe (a CPU); GPUs run the same kernels. A GPU-tuned version would tile instead: a
/// workgroup per block of 32-64 query rows staging key/value blocks in workgroup memory
/// (shared by the rows), each invocation owning a slice of the head dim, with subgroup
/// reductions for the scores, and for the backward key blocks staging query blocks.
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    check_qkv(q, k, v)?;
    if needs_f32_fallback(q.gpu(), q.dtype()) {
        let f = |t: &Tensor| t.to_dtype(DType::F32);
        return attention(&f(q)?, &f(k)?, &f(v)?)?.to_dtype(DType::F16);
    }
    let gpu = q.gpu();
    let shape = q.shape().to_vec();
    let (problems, len, d) = (shape[0] * shape[1], shape[2], shape[3]);
    let rows = problems * len;
    let params = [rows as u32, len as u32, (1.0 / (d as f32).sqrt()).to_bits()];
    let groups = gpu.grid((rows as u32).div_ceil(FLAT_WG));
    let defines = [("D", d.to_string())];
    let flops = 4.0 * problems as f64 * (len * len * d) as f64;
    let out = Tensor::empty(gpu, &shape, q.dtype())?;
    let lse = Tensor::empty(gpu, &[rows], DType::F32)?;
    gpu.dispatch_named(
        &kernel_for(
            gpu,
            shader!("attention"),
            "attn_forward",
            q.dtype(),
            &defines,
            3,
            2,
        ),
        &params,
        &[q.buffer(), k.buffer(), v.buffer()],
        &[out.buffer(), lse.buffer()],
        groups,
        Cost::new("attention", flops, 4 * q.byte_len() + lse.byte_len()),
    );
    let inputs = [q, k, v].map(Tensor::clone);
    let o = out.clone();
    Ok(out.with_grad_fn(
        "attention",
        inputs.to_vec(),
        Box::new(move |g| {
            let [q, k, v] = &inputs;
            let gpu = q.gpu();
            let new = || Tensor::empty(gpu, &shape, q.dtype());
            let (gq, gk, gv) = (new()?, new()?, new()?);
            let delta = Tensor::empty(gpu, &[rows], DType::F32)?;
            let kernel = |entry| kernel_for(gpu, shader!("attention"), entry, q.dtype(), &defines, 6, 2);
            // Counted as FlashAttention does, 2.5x the forward (five L x L x d products):
            // the dq kernel's S, dP and dS K, the key kernel's P^T dO and dS^T Q (its
            // recomputed S and dP are not counted again).
            gpu.dispatch_named(
                &kernel("attn_backward_q"),
                &params,
                &[
                    q.buffer(),
                    k.buffer(),
                    v.buffer(),
                    o.buffer(),
                    lse.buffer(),
                    g.buffer(),
                ],
                &[gq.buffer(), delta.buffer()],
                groups,
                Cost::new(
                    "attention_backward_q",
                    1.5 * flops,
                    6 * q.byte_len() + 2 * lse.byte_len(),
                ),
            );
            gpu.dispatch_named(
                &kernel("attn_backward_kv"),
                &params,
                &[
                    q.buffer(),
                    k.buffer(),
                    v.buffer(),
                    g.buffer(),
                    lse.buffer(),
                    delta.buffer(),
                ],
                &[gk.buffer(), gv.buffer()],
                groups,
                Cost::new(
                    "attention_backward_kv",
                    flops,
                    6 * q.byte_len() + 2 * lse.byte_len(),
                ),
            );
            Ok(vec![Some(gq), Some(gk), Some(gv)])
        }),
    ))
}

/// The U-Net self-attention block minus its norm and residual: on x [B, C, H, W], a 1x1
/// projection to q, k, v (`qkv_weight` [3C, C], `qkv_bias` [3C]; output channels are q, k,
/// v in that order, each split into `heads` groups of C / heads channels), [`attention`] over
/// the H * W positions per head, heads merged back into channels, and a 1x1 output
/// projection (`out_weight` [C, C], `out_bias` [C]). Built from differentiable ops, so it is
/// differentiable in x and every weight.
pub fn spatial_self_attention(
    x: &Tensor,
    qkv_weight: &Tensor,
    qkv_bias: &Tensor,
    out_weight: &Tensor,
    out_bias: &Tensor,
    heads: usize,
) -> Result<Tensor> {
    const OP: &str = "spatial_self_attention";
    let shape = x.shape().to_vec();
    if shape.len() != 4 || shape.contains(&0) {
        return Err(Error::shape(
            OP,
            format!("input {shape:?} must be a non-empty [B, C, H, W]"),
        ));
    }
    let (b, c, len) = (shape[0], shape[1], shape[2] * shape[3]);
    if heads == 0 || c % heads != 0 {
        return Err(Error::shape(
            OP,
            format!("{heads} heads do not divide the {c} channels of {shape:?}"),
        ));
    }
    for (name, t, want) in [
        ("qkv_weight", qkv_weight, vec![3 * c, c]),
        ("qkv_bias", qkv_bias, vec![3 * c]),
        ("out_weight", out_weight, vec![c, c]),
        ("out_bias", out_bias, vec![c]),
    ] {
        if t.shape() != want {
            return Err(Error::shape(
                OP,
                format!(
                    "{name} has shape {:?} but input {shape:?} needs {want:?}",
                    t.shape()
                ),
            ));
        }
        check_same_dtype(OP, x, t)?;
    }
    let d = c / heads;
    // [3C, C] @ [B, C, L] -> [B, 3C, L] -> [B, 3, heads, d, L] -> [3, B, heads, L, d]
    let qkv = qkv_weight
        .matmul(&x.reshape(&[b, c, len])?)?
        .add(&qkv_bias.reshape(&[3 * c, 1])?)?
        .reshape(&[b, 3, heads, d, len])?
        .permute(&[1, 0, 2, 4, 3])?;
    let part = |i| qkv.slice(0, i, 1)?.reshape(&[b, heads, len, d]);
    let attended = attention(&part(0)?, &part(1)?, &part(2)?)?;
    // [B, heads, L, d] -> [B, heads, d, L] = [B, C, L]
    let merged = attended.permute(&[0, 1, 3, 2])?.reshape(&[b, c, len])?;
    out_weight
        .matmul(&merged)?
        .add(&out_bias.reshape(&[c, 1])?)?
        .reshape(&shape)
}
