//! Multi-head scaled dot-product attention (self or cross, head dims up to 256): a memory-efficient
//! forward and FlashAttention-style backward (shaders/attention.wgsl, attention_sliced.wgsl), or
//! the blocked matmul, softmax and the matmul again, whichever is faster for the shape; and the
//! U-Net spatial self-attention layer built on it.

use super::{check_same_dtype, kernel_for, needs_f32_fallback, BiasAlong};
use crate::gpu::{Cost, Kernel, MAX_LOOP_ITERATIONS};
use crate::{shader, DType, Error, Gpu, Result, Tensor};

/// Largest head dim (of q and k, and of v) the attention kernels take.
pub const MAX_HEAD_DIM: usize = 256;

/// Head dims up to this keep a whole row in one invocation's registers (shaders/attention.wgsl,
/// the fast path); wider heads split each row over 2 or 4 invocations (attention_sliced.wgsl).
pub const REGISTER_HEAD_DIM: usize = 64;

/// Invocations per workgroup of both kernel files.
const WORKGROUP: usize = 64;

/// Keys (queries) the sliced kernels sum between two barriers (KB in attention_sliced.wgsl).
const SLICED_BLOCK: usize = 32;

/// How [`attention_with`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionForm {
    /// The memory-efficient kernels: an online softmax per query row, no Lq x Lkv matrix
    /// stored, a FlashAttention-style backward.
    Fused,
    /// `softmax((q * scale) k^T) v` by the blocked matmul, softmax and the blocked matmul
    /// again, differentiable through those ops: the [B, heads, Lq, Lkv] scores are stored (and
    /// kept for the backward). On lavapipe the DDPM CIFAR-10 U-Net's attention (one head of
    /// 256 channels over 256 positions) ran ~10x faster so (BENCHMARKS.md).
    Matmul,
    /// The faster of the two for the shape, measured once and remembered, the matmul form only
    /// where its scores take at most [`MATMUL_SCORE_BYTES`]; where nothing is timed (the web,
    /// [`crate::Gpu::set_deterministic`]) the matmul form for heads wider than
    /// [`REGISTER_HEAD_DIM`] whose scores fit, the kernels otherwise.
    Auto,
}

/// Most bytes of scores [`AttentionForm::Auto`] lets the matmul form store.
pub const MATMUL_SCORE_BYTES: usize = 64 << 20;

/// The sizes of one attention call, its scale, and how the kernels split a row.
#[derive(Clone, Copy, Debug)]
struct Plan {
    /// Independent problems, batch * heads.
    problems: usize,
    len_q: usize,
    len_kv: usize,
    /// Head dim of q and k.
    d: usize,
    /// Head dim of v and the output.
    dv: usize,
    scale: f32,
    /// Invocations per row: 1 for the register kernels, 2 or 4 for the sliced ones.
    slices: usize,
}

impl Plan {
    /// Checks q [B, heads, Lq, d], k [B, heads, Lkv, d], v [B, heads, Lkv, dv] (non-empty,
    /// one dtype, d and dv at most [`MAX_HEAD_DIM`], a finite scale) and plans the kernels.
    fn new(q: &Tensor, k: &Tensor, v: &Tensor, scale: Option<f32>) -> Result<Plan> {
        const OP: &str = "attention";
        for (name, t) in [("q", q), ("k", k), ("v", v)] {
            if t.rank() != 4 || t.shape().contains(&0) {
                return Err(Error::shape(
                    OP,
                    format!("{name} {:?} must be a non-empty [B, heads, L, d]", t.shape()),
                ));
            }
        }
        check_same_dtype(OP, q, k)?;
        check_same_dtype(OP, q, v)?;
        let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
        if ks[..2] != qs[..2] || ks[3] != qs[3] {
            return Err(Error::shape(
                OP,
                format!("k {ks:?} must be [B, heads, Lkv, d] with the B, heads and d of q {qs:?}"),
            ));
        }
        if vs[..3] != ks[..3] {
            return Err(Error::shape(
                OP,
                format!("v {vs:?} must be [B, heads, Lkv, dv] with the B, heads and Lkv of k {ks:?}"),
            ));
        }
        let (d, dv) = (qs[3], vs[3]);
        for (name, dim) in [("q and k", d), ("v", dv)] {
            if dim > MAX_HEAD_DIM {
                return Err(Error::shape(
                    OP,
                    format!("head dim {dim} of {name} exceeds {MAX_HEAD_DIM}; use more heads"),
                ));
            }
        }
        let scale = scale.unwrap_or(1.0 / (d as f32).sqrt());
        if !scale.is_finite() {
            return Err(Error::shape(OP, format!("scale {scale} must be finite")));
        }
        let slices = match d.max(dv) {
            w if w <= REGISTER_HEAD_DIM => 1,
            w => w.div_ceil(REGISTER_HEAD_DIM).next_power_of_two(),
        };
        let plan = Plan {
            problems: qs[0] * qs[1],
            len_q: qs[2],
            len_kv: ks[2],
            d,
            dv,
            scale,
            slices,
        };
        for (name, len) in [("k", plan.len_kv), ("q", plan.len_q)] {
            if len > plan.max_len() {
                return Err(Error::shape(
                    OP,
                    format!(
                        "{name} has {len} positions per problem but with head dims {d} / {dv} the \
                         kernels loop over at most {} in one invocation; split the sequence",
                        plan.max_len()
                    ),
                ));
            }
        }
        Ok(plan)
    }

    /// Most queries or keys one invocation may walk within the loop budget: the register
    /// kernels visit each once, the sliced ones twice plus once per block.
    fn max_len(&self) -> usize {
        if self.slices == 1 {
            MAX_LOOP_ITERATIONS
        } else {
            MAX_LOOP_ITERATIONS * SLICED_BLOCK / (2 * SLICED_BLOCK + 1)
        }
    }

    /// Rows of the query kernels (forward, dq) and of the key kernel (dk, dv).
    fn rows(&self) -> (usize, usize) {
        (self.problems * self.len_q, self.problems * self.len_kv)
    }

    /// The uniform of a kernel over `rows` rows.
    fn params(&self, rows: usize) -> [u32; 4] {
        [
            rows as u32,
            self.len_q as u32,
            self.len_kv as u32,
            self.scale.to_bits(),
        ]
    }

    /// Workgroups covering `rows` rows, `64 / slices` rows per workgroup.
    fn groups(&self, gpu: &Gpu, rows: usize) -> [u32; 3] {
        gpu.grid(rows.div_ceil(WORKGROUP / self.slices) as u32)
    }

    /// `entry` (attn_forward, attn_backward_q or attn_backward_kv) of the kernel file this
    /// plan runs, for storage type `dtype`.
    fn kernel(&self, gpu: &Gpu, entry: &str, dtype: DType) -> Kernel {
        let mut defines = vec![("D", self.d.to_string()), ("DV", self.dv.to_string())];
        let source = if self.slices == 1 {
            shader!("attention")
        } else {
            defines.extend([
                ("S", self.slices.to_string()),
                ("W", self.d.div_ceil(self.slices).to_string()),
                ("WV", self.dv.div_ceil(self.slices).to_string()),
            ]);
            shader!("attention_sliced")
        };
        let inputs = if entry == "attn_forward" { 3 } else { 6 };
        kernel_for(gpu, source, entry, dtype, &defines, inputs, 2)
    }

    /// FLOPs of a product of every query row with every key row over `width` columns.
    fn flops(&self, width: usize) -> f64 {
        2.0 * (self.problems * self.len_q * self.len_kv * width) as f64
    }
}

/// `softmax(q k^T * scale) v`, PyTorch's `scaled_dot_product_attention(q, k, v, scale=scale)`
/// without mask or dropout: q [B, heads, Lq, d], k [B, heads, Lkv, d], v [B, heads, Lkv, dv]
/// (self-attention when Lq = Lkv and q, k, v come from one sequence; cross-attention
/// otherwise) give [B, heads, Lq, dv]; B * heads independent problems, head dims d and dv up
/// to [`MAX_HEAD_DIM`], `scale` None meaning 1 / sqrt(d). Differentiable in q, k and v.
///
/// Memory-efficient: no Lq x Lkv matrix is stored. The forward runs an online softmax
/// (running max and sum) over the keys for each query row and saves the row logsumexp; the
/// backward recomputes the probabilities from it, FlashAttention style: one kernel per query
/// row for dq (and D_i = dO_i . O_i), one per key row for dk, dv (looping over the queries),
/// so no float atomics are needed. Head dims up to [`REGISTER_HEAD_DIM`] run a row per
/// invocation with the row in registers, the fastest shape found on lavapipe (a CPU); wider
/// heads split each row over 2 or 4 invocations that sum their partial dot products through
/// workgroup memory, 32 keys per barrier. GPUs run the same kernels. A GPU-tuned version would
/// tile instead: a workgroup per block of 32-64 query rows staging key/value blocks in
/// workgroup memory (shared by the rows), each invocation owning a slice of the head dim, with
/// subgroup reductions for the scores, and for the backward key blocks staging query blocks.
///
/// Errors name the tensor and the fix for mismatched batch, heads, positions or head dims,
/// empty or non-4D inputs, head dims over [`MAX_HEAD_DIM`], a non-finite scale, and sequences
/// longer than one invocation may loop over (60 000 positions; half that for head dims over
/// [`REGISTER_HEAD_DIM`]).
///
/// This is [`attention_with`] in [`AttentionForm::Auto`]: the kernels above, or the blocked
/// matmul, softmax and matmul where those measure faster.
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor, scale: Option<f32>) -> Result<Tensor> {
    attention_with(q, k, v, scale, AttentionForm::Auto)
}

/// [`attention`] computed in `form`.
pub fn attention_with(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: Option<f32>,
    form: AttentionForm,
) -> Result<Tensor> {
    let plan = Plan::new(q, k, v, scale)?;
    if needs_f32_fallback(q.gpu(), q.dtype()) {
        let f = |t: &Tensor| t.to_dtype(DType::F32);
        return attention_with(&f(q)?, &f(k)?, &f(v)?, Some(plan.scale), form)?.to_dtype(DType::F16);
    }
    let form = match form {
        AttentionForm::Auto => plan.choose(q, k, v)?,
        chosen => chosen,
    };
    match form {
        AttentionForm::Matmul => q
            .mul_scalar(plan.scale)?
            .matmul_t(k, false, true)?
            .softmax()?
            .matmul(v),
        _ => attention_fused(q, k, v, plan),
    }
}

impl Plan {
    /// The form [`AttentionForm::Auto`] stands for on these operands (see there).
    fn choose(&self, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<AttentionForm> {
        let scores = self.problems * self.len_q * self.len_kv * 4;
        if scores > MATMUL_SCORE_BYTES {
            return Ok(AttentionForm::Fused);
        }
        let forms = [AttentionForm::Fused, AttentionForm::Matmul];
        let labels = ["fused".to_string(), "matmul".to_string()];
        let untimed = usize::from(self.d > REGISTER_HEAD_DIM);
        let key = format!(
            "attention:{:?}:{}x{}x{}x{}x{}:of fused,matmul",
            q.dtype(),
            self.problems.next_power_of_two(),
            self.len_q.next_power_of_two(),
            self.len_kv.next_power_of_two(),
            self.d,
            self.dv
        );
        let _g = crate::no_grad();
        let gpu = q.gpu();
        let choice = gpu.tuner().choose(gpu, &key, &labels, untimed, |c| {
            attention_with(q, k, v, Some(self.scale), forms[c]).map(drop)
        })?;
        Ok(forms[choice])
    }
}

/// [`attention`] by the memory-efficient kernels.
fn attention_fused(q: &Tensor, k: &Tensor, v: &Tensor, plan: Plan) -> Result<Tensor> {
    let gpu = q.gpu();
    let (rows_q, rows_kv) = plan.rows();
    let out_shape = [q.shape()[0], q.shape()[1], plan.len_q, plan.dv];
    let out = Tensor::empty(gpu, &out_shape, q.dtype())?;
    let lse = Tensor::empty(gpu, &[rows_q], DType::F32)?;
    let bytes = |ts: &[&Tensor]| ts.iter().map(|t| t.byte_len()).sum::<u64>();
    gpu.dispatch_named(
        &plan.kernel(gpu, "attn_forward", q.dtype()),
        &plan.params(rows_q),
        &[q.buffer(), k.buffer(), v.buffer()],
        &[out.buffer(), lse.buffer()],
        plan.groups(gpu, rows_q),
        Cost::new(
            "attention",
            plan.flops(plan.d + plan.dv),
            bytes(&[q, k, v, &out, &lse]),
        ),
    );
    let inputs = [q, k, v].map(Tensor::clone);
    let o = out.clone();
    Ok(out.with_grad_fn(
        "attention",
        inputs.to_vec(),
        Box::new(move |g| {
            let [q, k, v] = &inputs;
            let gpu = q.gpu();
            let like = |t: &Tensor| Tensor::empty(gpu, t.shape(), t.dtype());
            let (gq, gk, gv) = (like(q)?, like(k)?, like(v)?);
            let delta = like(&lse)?;
            // Counted as FlashAttention does: the dq kernel's S, dP and dS K, the key kernel's
            // P^T dO and dS^T Q (its recomputed S and dP are not counted again).
            gpu.dispatch_named(
                &plan.kernel(gpu, "attn_backward_q", q.dtype()),
                &plan.params(rows_q),
                &[
                    q.buffer(),
                    k.buffer(),
                    v.buffer(),
                    o.buffer(),
                    lse.buffer(),
                    g.buffer(),
                ],
                &[gq.buffer(), delta.buffer()],
                plan.groups(gpu, rows_q),
                Cost::new(
                    "attention_backward_q",
                    plan.flops(2 * plan.d + plan.dv),
                    bytes(&[q, k, v, &o, &lse, g, &gq, &delta]),
                ),
            );
            gpu.dispatch_named(
                &plan.kernel(gpu, "attn_backward_kv", q.dtype()),
                &plan.params(rows_kv),
                &[
                    q.buffer(),
                    k.buffer(),
                    v.buffer(),
                    g.buffer(),
                    lse.buffer(),
                    delta.buffer(),
                ],
                &[gk.buffer(), gv.buffer()],
                plan.groups(gpu, rows_kv),
                Cost::new(
                    "attention_backward_kv",
                    plan.flops(plan.d + plan.dv),
                    bytes(&[q, k, v, g, &lse, &delta, &gk, &gv]),
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
        .matmul_bias(&x.reshape(&[b, c, len])?, qkv_bias, BiasAlong::Rows)?
        .reshape(&[b, 3, heads, d, len])?
        .permute(&[1, 0, 2, 4, 3])?;
    let part = |i| qkv.slice(0, i, 1)?.reshape(&[b, heads, len, d]);
    let attended = attention(&part(0)?, &part(1)?, &part(2)?, None)?;
    // [B, heads, L, d] -> [B, heads, d, L] = [B, C, L]
    let merged = attended.permute(&[0, 1, 3, 2])?.reshape(&[b, c, len])?;
    out_weight
        .matmul_bias(&merged, out_bias, BiasAlong::Rows)?
        .reshape(&shape)
}
