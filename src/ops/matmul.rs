//! Batched matmul with optional transposes: a naive strided kernel (the baseline) and a
//! register-blocked vec4 kernel whose tile shape is chosen per adapter; backward is two
//! matmuls. Kernels: shaders/matmul.wgsl, shaders/matmul_blocked.wgsl.

use super::packed::{check_packed_input, Layout, PackedWeights, WeightOperand};
use super::{check_same_dtype, kernel_for, needs_f32_fallback, type_defines};
use crate::gpu::{lavapipe_mesa_version, Cost, KernelSpec};
use crate::{shader, DType, Error, Gpu, Result, Tensor};

/// Which matmul kernel to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatmulKernel {
    /// One output per invocation, any strides.
    Naive,
    /// Register-blocked vec4 tiles (pads K and N to 4), tile shape chosen by measurement.
    Blocked,
    /// The blocked kernel with a fixed tile shape (tests, experiments).
    BlockedWith(BlockShape),
    /// The blocked kernel with a fixed tile shape, reading A and B as texels (f32 only).
    TexelsWith(BlockShape),
}

/// The axis of a bias fused into a matmul ([`Tensor::matmul_bias`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BiasAlong {
    /// One value per output column, added to every row: `x @ w + b` (a Linear layer).
    Columns,
    /// One value per output row, added to every column: `w @ x + b[:, None]`.
    Rows,
}

/// Tile shape of the blocked kernel: rows per invocation, vec4 columns per invocation,
/// invocations per workgroup, and whether the workgroup (one subgroup) reads the rows'
/// shared operand one row per lane and broadcasts it (`split`) instead of in every lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockShape {
    pub rows: u32,
    pub col4: u32,
    pub lanes: u32,
    pub split: bool,
}

impl BlockShape {
    const fn new(rows: u32, col4: u32, lanes: u32) -> BlockShape {
        BlockShape {
            rows,
            col4,
            lanes,
            split: false,
        }
    }

    /// This tile with the rows' operand read one row per lane and handed to every lane by
    /// subgroupBroadcast; None where the adapter's subgroups are not exactly one workgroup of
    /// `lanes` or the rows are not a multiple of it.
    pub fn split_across(self, gpu: &Gpu) -> Option<BlockShape> {
        (gpu.fixed_subgroup_size() == Some(self.lanes) && self.rows % self.lanes == 0)
            .then_some(BlockShape { split: true, ..self })
    }

    /// The template values `AR` (rows every lane reads) and `AG` (rows read per lane and
    /// broadcast, in groups of `lanes`) of shaders/matmul_blocked.wgsl and conv_tiled.wgsl.
    pub fn row_read_defines(self) -> [(&'static str, String); 2] {
        let (ar, ag) = if self.split {
            (0, self.rows / self.lanes)
        } else {
            (self.rows, 0)
        };
        [("AR", ar.to_string()), ("AG", ag.to_string())]
    }

    /// Tiles worth measuring for an `m x n` output, the fixed rule's first
    /// ([`Gpu::set_deterministic`]). On CPU adapters (lavapipe) register tiles of 256-512
    /// outputs and 8 invocations: 32 rows x 8 columns, the first, ran fastest and compiled
    /// fastest at 1024^3 and on the U-Net's 3x3 conv on Mesa 22.3 and 25.0; the 768- and
    /// 1,024-output tiles of earlier rounds ran slower there and took 10-120 s each to compile
    /// on Mesa 25, whose LLVM pass over a kernel's live values grows with their number
    /// (BENCHMARKS.md, "Mesa 25's lavapipe"). On GPUs the usual 4x4..8x4 per invocation with
    /// 64 invocations. Tiles much wider or taller than the output are dropped (the smallest
    /// stays when none fits). Where a workgroup of 8 is one subgroup, each tile's
    /// `split_across` form replaces it.
    pub fn candidates(gpu: &Gpu, m: usize, n: usize) -> Vec<BlockShape> {
        let all = Self::all(gpu);
        let fits = |s: &&BlockShape| {
            (s.lanes * s.col4 * 4) as usize <= 2 * n.max(32) && s.rows as usize <= 2 * m.max(8)
        };
        // Each tile's split form in its place where the adapter has one: it won on every shape
        // measured (BENCHMARKS.md, issue 58) with the same sums, and offering both doubled
        // the autotuner's pipelines and timings on a new device.
        let kept: Vec<BlockShape> = all
            .iter()
            .filter(fits)
            .map(|t| t.split_across(gpu).unwrap_or(*t))
            .collect();
        if kept.is_empty() {
            let smallest = if gpu.is_cpu() { all[0] } else { all[all.len() - 1] };
            vec![smallest.split_across(gpu).unwrap_or(smallest)]
        } else {
            kept
        }
    }

    /// Tiles tried on CPU adapters (lavapipe), the fixed rule's first.
    pub const CPU_TILES: [BlockShape; 4] = [
        BlockShape::new(32, 2, 8),
        BlockShape::new(32, 4, 8),
        BlockShape::new(16, 4, 8),
        BlockShape::new(16, 8, 8),
    ];
    /// Tiles tried on GPUs.
    pub const GPU_TILES: [BlockShape; 3] = [
        BlockShape::new(4, 1, 64),
        BlockShape::new(8, 1, 64),
        BlockShape::new(4, 2, 32),
    ];

    /// Every tile shape tried on this kind of adapter.
    pub fn all(gpu: &Gpu) -> &'static [BlockShape] {
        if gpu.is_cpu() {
            &Self::CPU_TILES
        } else {
            &Self::GPU_TILES
        }
    }

    /// Columns one invocation covers.
    pub fn columns_per_invocation(self) -> u32 {
        self.col4 * 4
    }

    /// Columns one workgroup covers.
    fn columns(self) -> usize {
        (self.lanes * self.col4 * 4) as usize
    }
}

impl std::fmt::Display for BlockShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x{} per invocation, {} invocations{}",
            self.rows,
            self.columns_per_invocation(),
            self.lanes,
            if self.split {
                ", rows split across the subgroup"
            } else {
                ""
            }
        )
    }
}

/// A tile of the blocked kernel and whether it reads A and B as texels ([`crate::gpu::Texels`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockedForm {
    pub tile: BlockShape,
    pub texels: bool,
}

impl BlockedForm {
    /// Forms worth measuring for an `m x n` output, the fixed rule's first: every tile of
    /// [`BlockShape::candidates`] reading storage buffers and, where the operands fit
    /// (`texels_fit`: f32, within the device's texture size, at most
    /// [`TEXEL_OPERANDS_MAX_BYTES`] together), the first tile reading texels.
    /// Placed by the adapter (BENCHMARKS.md, "Matmul operands as texels"): first on lavapipe
    /// from Mesa 24 on (Mesa 25 ran the matmul at 1024^3 1.5x faster with the same sums, the
    /// `mnist` training step 1.05-1.08x); not at all on older lavapipe (Mesa 22.3: within noise, for
    /// ~95 MB more peak RSS in a training step); timed after the storage tiles elsewhere.
    pub fn candidates(gpu: &Gpu, m: usize, n: usize, texels_fit: bool) -> Vec<BlockedForm> {
        let tiles = BlockShape::candidates(gpu, m, n);
        let storage = tiles.iter().map(|&tile| BlockedForm { tile, texels: false });
        let place = texels_fit.then(|| texel_place(gpu)).flatten();
        let texels = tiles
            .iter()
            .take(if place.is_some() { TEXEL_TILES } else { 0 })
            .map(|&tile| BlockedForm { tile, texels: true });
        if place == Some(TexelPlace::First) {
            texels.chain(storage).collect()
        } else {
            storage.chain(texels).collect()
        }
    }
}

/// Where the texel forms go among an adapter's matmul candidates.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TexelPlace {
    First,
    Timed,
}

fn texel_place(gpu: &Gpu) -> Option<TexelPlace> {
    match lavapipe_mesa_version(&gpu.info) {
        Some((major, _)) if major >= 24 => Some(TexelPlace::First),
        Some(_) => None,
        None => Some(TexelPlace::Timed),
    }
}

/// The largest A + B the texel forms are offered for. On Mesa 25 the `mnist` training step
/// with texels for every matmul ran 0.92-1.21x as fast for 58-68 MB more peak RSS (copies of
/// the Winograd GEMMs' 29 MB operands); for operands up to 16 MiB only, 1.05-1.08x as fast at
/// 0.96x the peak RSS (BENCHMARKS.md, "Matmul operands as texels").
const TEXEL_OPERANDS_MAX_BYTES: u64 = 16 << 20;

/// How many of the first tiles the autotuner also times reading texels.
const TEXEL_TILES: usize = 1;

impl std::fmt::Display for BlockedForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{}",
            self.tile,
            if self.texels { ", operands as texels" } else { "" }
        )
    }
}

/// FLOPs of a (batched) matmul.
pub fn matmul_flops(batch: usize, m: usize, n: usize, k: usize) -> f64 {
    2.0 * batch as f64 * m as f64 * n as f64 * k as f64
}

/// Operand layout after transposes: (batch, rows, cols) of the logical matrix.
fn dims(t: &Tensor, transposed: bool) -> Result<(usize, usize, usize)> {
    if t.rank() < 2 {
        return Err(Error::shape(
            "matmul",
            format!("operand {:?} needs at least 2 dims", t.shape()),
        ));
    }
    let r = t.rank();
    let batch = t.shape()[..r - 2].iter().product();
    let (rows, cols) = (t.shape()[r - 2], t.shape()[r - 1]);
    Ok(if transposed {
        (batch, cols, rows)
    } else {
        (batch, rows, cols)
    })
}

impl Tensor {
    /// `self @ other` over the last two dims; leading dims are batch dims (equal on both
    /// sides, or absent on one side, which is then shared by every batch).
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        self.matmul_t(other, false, false)
    }

    /// `op(self) @ op(other)` where op transposes the last two dims when asked.
    pub fn matmul_t(&self, other: &Tensor, ta: bool, tb: bool) -> Result<Tensor> {
        self.matmul_with(other, ta, tb, MatmulKernel::Blocked)
    }

    /// `self @ other` plus a bias along `along`: [N] added to every row (a Linear layer,
    /// `x @ w + b`) or [M] added to every column (`w @ x + b[:, None]`, a projection of
    /// each position), added by the blocked kernel as it stores the product.
    pub fn matmul_bias(&self, other: &Tensor, bias: &Tensor, along: BiasAlong) -> Result<Tensor> {
        self.matmul_plus(other, false, false, MatmulKernel::Blocked, Some((bias, along)))
    }

    /// `self @ w (+ bias)` for `self` [.., K] and packed `w` [K, N], by the blocked kernel
    /// dequantising in registers; inference and f32 only, as [`Tensor::conv2d_packed`].
    pub fn matmul_packed(&self, w: &PackedWeights, bias: Option<&Tensor>) -> Result<Tensor> {
        let &Layout::Matmul { k, n } = w.layout() else {
            return Err(Error::shape(
                "matmul_packed",
                "these packed weights are a conv's, not a matmul's",
            ));
        };
        check_packed_input(self, "matmul_packed")?;
        let shape = self.shape();
        if shape.last() != Some(&k) {
            return Err(Error::shape(
                "matmul_packed",
                format!("cannot multiply {shape:?} by packed [{k}, {n}]"),
            ));
        }
        if let Some(b) = bias.filter(|b| b.shape() != [n] || b.dtype() != DType::F32) {
            return Err(Error::shape(
                "matmul_packed",
                format!("the bias {:?} {:?} must be [{n}] F32", b.shape(), b.dtype()),
            ));
        }
        let m = self.numel() / k;
        let out = matmul_blocked_packed(&self.reshape(&[m, k])?, w, (m, n, k), bias)?;
        let mut out_shape = shape[..shape.len() - 1].to_vec();
        out_shape.push(n);
        out.reshape(&out_shape)
    }

    /// [`Tensor::matmul_t`] with an explicit kernel (benchmarks, tests).
    pub fn matmul_with(&self, other: &Tensor, ta: bool, tb: bool, kernel: MatmulKernel) -> Result<Tensor> {
        self.matmul_plus(other, ta, tb, kernel, None)
    }

    /// `op(self) @ op(other)` (+ the bias, with the blocked kernels) with `kernel`.
    fn matmul_plus(
        &self,
        other: &Tensor,
        ta: bool,
        tb: bool,
        kernel: MatmulKernel,
        bias: Option<(&Tensor, BiasAlong)>,
    ) -> Result<Tensor> {
        check_same_dtype("matmul", self, other)?;
        if let Some((bias, _)) = bias {
            check_same_dtype("matmul", self, bias)?;
        }
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            let f32 = |t: &Tensor| t.to_dtype(DType::F32);
            let bias = bias
                .map(|(b, along)| Ok::<_, Error>((f32(b)?, along)))
                .transpose()?;
            return f32(self)?
                .matmul_plus(&f32(other)?, ta, tb, kernel, bias.as_ref().map(|(b, a)| (b, *a)))?
                .to_dtype(DType::F16);
        }
        let (ba, m, k) = dims(self, ta)?;
        let (bb, k2, n) = dims(other, tb)?;
        let batched = |t: &Tensor| t.rank() > 2;
        let batch_shape = if batched(self) {
            &self.shape()[..self.rank() - 2]
        } else {
            &other.shape()[..other.rank() - 2]
        };
        if k != k2
            || (batched(self)
                && batched(other)
                && self.shape()[..self.rank() - 2] != other.shape()[..other.rank() - 2])
        {
            return Err(Error::shape(
                "matmul",
                format!(
                    "cannot multiply {:?}{} by {:?}{}",
                    self.shape(),
                    if ta { "^T" } else { "" },
                    other.shape(),
                    if tb { "^T" } else { "" }
                ),
            ));
        }
        if let Some((bias, along)) = bias {
            let (len, of) = match along {
                BiasAlong::Columns => (n, "column"),
                BiasAlong::Rows => (m, "row"),
            };
            if bias.shape() != [len] {
                return Err(Error::shape(
                    "matmul",
                    format!(
                        "the bias {:?} must be [{len}], one value per output {of}",
                        bias.shape()
                    ),
                ));
            }
        }
        if bias.is_some() && matches!(kernel, MatmulKernel::Naive) {
            return Err(Error::shape(
                "matmul",
                "internal: a bias is added by the blocked kernels only",
            ));
        }
        let batch = ba.max(bb);
        let mut out_shape = batch_shape.to_vec();
        out_shape.extend([m, n]);
        let out = {
            let _g = crate::no_grad();
            match kernel {
                MatmulKernel::Naive => matmul_naive(self, other, ta, tb, (batch, m, n, k), &out_shape)?,
                MatmulKernel::Blocked => {
                    let operands = (self, ta, other, tb, bias);
                    matmul_blocked(operands, (batch, m, n, k), &out_shape, None)?
                }
                MatmulKernel::BlockedWith(tile) => {
                    let operands = (self, ta, other, tb, bias);
                    let form = BlockedForm { tile, texels: false };
                    matmul_blocked(operands, (batch, m, n, k), &out_shape, Some(form))?
                }
                MatmulKernel::TexelsWith(tile) => {
                    if self.dtype() != DType::F32 {
                        return Err(Error::shape("matmul", "texel operands are f32 only"));
                    }
                    let operands = (self, ta, other, tb, bias);
                    let form = BlockedForm { tile, texels: true };
                    matmul_blocked(operands, (batch, m, n, k), &out_shape, Some(form))?
                }
            }
        };
        let (a, b) = (self.clone(), other.clone());
        let mut inputs = vec![self.clone(), other.clone()];
        inputs.extend(bias.map(|(b, _)| b.clone()));
        let bias_along = bias.map(|(_, along)| along);
        Ok(out.with_grad_fn(
            "matmul",
            inputs,
            Box::new(move |g| {
                // C = op(A) op(B): dop(A) = G op(B)^T, dop(B) = op(A)^T G.
                let ga = a
                    .tracks_grad()
                    .then(|| {
                        if ta {
                            b.matmul_t(g, tb, true)
                        } else {
                            g.matmul_t(&b, false, !tb)
                        }
                    })
                    .transpose()?;
                let gb = b
                    .tracks_grad()
                    .then(|| {
                        if tb {
                            g.matmul_t(&a, true, ta)
                        } else {
                            a.matmul_t(g, !ta, false)
                        }
                    })
                    .transpose()?;
                let mut grads = vec![
                    ga.map(|t| t.sum_to_shape(a.shape())).transpose()?,
                    gb.map(|t| t.sum_to_shape(b.shape())).transpose()?,
                ];
                let (rows, cols) = (g.shape()[g.rank() - 2], g.shape()[g.rank() - 1]);
                match bias_along {
                    Some(BiasAlong::Columns) => grads.push(Some(g.sum_to_shape(&[cols])?)),
                    Some(BiasAlong::Rows) => grads.push(Some(g.sum_to_shape(&[rows, 1])?.reshape(&[rows])?)),
                    None => {}
                }
                Ok(grads)
            }),
        ))
    }
}

fn batch_stride(t: &Tensor) -> usize {
    if t.rank() > 2 {
        t.shape()[t.rank() - 2] * t.shape()[t.rank() - 1]
    } else {
        0
    }
}

fn matmul_naive(
    a: &Tensor,
    b: &Tensor,
    ta: bool,
    tb: bool,
    (batch, m, n, k): (usize, usize, usize, usize),
    out_shape: &[usize],
) -> Result<Tensor> {
    let gpu = a.gpu();
    let out = Tensor::empty(gpu, out_shape, a.dtype())?;
    let a_cols = a.shape()[a.rank() - 1];
    let b_cols = b.shape()[b.rank() - 1];
    // (row stride, col stride) of the logical operand.
    let (a_row, a_col) = if ta { (1, a_cols) } else { (a_cols, 1) };
    let (b_row, b_col) = if tb { (1, b_cols) } else { (b_cols, 1) };
    let params = [
        m,
        n,
        k,
        batch,
        batch_stride(a),
        a_row,
        a_col,
        batch_stride(b),
        b_row,
        b_col,
    ]
    .map(|v| v as u32);
    let kernel = kernel_for(gpu, shader!("matmul"), "matmul_naive", a.dtype(), &[], 2, 1);
    gpu.dispatch_named(
        &kernel,
        &params,
        &[a.buffer(), b.buffer()],
        &[out.buffer()],
        [(n as u32).div_ceil(8), (m as u32).div_ceil(8), batch as u32],
        Cost::new(
            "matmul",
            matmul_flops(batch, m, n, k),
            a.byte_len() + b.byte_len() + out.byte_len(),
        ),
    );
    Ok(out)
}

/// Makes `t` a contiguous (.., rows, cols) operand with `cols` padded to a multiple of 4.
fn blocked_operand(t: &Tensor, transposed: bool, pad_rows_to4: bool) -> Result<Tensor> {
    let r = t.rank();
    let t = if transposed {
        t.transpose(r - 2, r - 1)?
    } else {
        t.clone()
    };
    let cols = t.shape()[r - 1];
    let t = t.pad_axis(r - 1, 0, cols.next_multiple_of(4) - cols)?;
    if pad_rows_to4 {
        let rows = t.shape()[r - 2];
        t.pad_axis(r - 2, 0, rows.next_multiple_of(4) - rows)
    } else {
        Ok(t)
    }
}

/// A, whether it is transposed, B, whether it is transposed, the bias and its axis.
type BlockedOperands<'a> = (
    &'a Tensor,
    bool,
    &'a Tensor,
    bool,
    Option<(&'a Tensor, BiasAlong)>,
);

fn matmul_blocked(
    (a, ta, b, tb, bias): BlockedOperands,
    (batch, m, n, k): (usize, usize, usize, usize),
    out_shape: &[usize],
    fixed_form: Option<BlockedForm>,
) -> Result<Tensor> {
    let gpu = a.gpu();
    let a = blocked_operand(a, ta, false)?; // (.., M, K4)
    let b = blocked_operand(b, tb, true)?; // (.., K4, N4)
    let n4 = n.next_multiple_of(4);
    let bias = match bias {
        Some((bias, along)) => {
            let len = bias.numel();
            Some((bias.pad_axis(0, 0, len.next_multiple_of(4) - len)?, along))
        }
        None => None,
    };
    let mut padded_shape = out_shape.to_vec();
    *padded_shape.last_mut().unwrap() = n4;
    let dims = (batch, m, n4, k.next_multiple_of(4));
    let texels_fit = a.dtype() == DType::F32
        && gpu.texels_fit(a.numel() / 4)
        && gpu.texels_fit(b.numel() / 4)
        && a.byte_len() + b.byte_len() <= TEXEL_OPERANDS_MAX_BYTES;
    let forms = match fixed_form {
        Some(f) => vec![f],
        None => BlockedForm::candidates(gpu, m, n4, texels_fit),
    };
    let key = format!(
        "matmul:{:?}:{}x{}x{}:{}:{}",
        a.dtype(),
        m.next_power_of_two(),
        n4.next_power_of_two(),
        k.next_power_of_two(),
        batch > 1,
        labels_key(&forms)
    );
    // (a key of its own where texel forms are offered: caches from before them time them once)
    let offers_texels = forms.len() > 1 && forms.iter().any(|f| f.texels);
    let key = if offers_texels { key + ":texels" } else { key };
    let labels: Vec<String> = forms.iter().map(|t| t.to_string()).collect();
    let flops = matmul_flops(batch, m, n, k);
    let operands = (
        &a,
        WeightOperand::Float(&b),
        bias.as_ref().map(|(t, along)| (t, *along)),
    );
    let choice = gpu.tuner().choose(gpu, &key, &labels, 0, |c| {
        let scratch = Tensor::empty(gpu, &padded_shape, a.dtype())?;
        dispatch_blocked(operands, &scratch, dims, forms[c], flops)
    })?;
    let out = Tensor::empty(gpu, &padded_shape, a.dtype())?;
    dispatch_blocked(operands, &out, dims, forms[choice], flops)?;
    let r = out.rank();
    out.slice(r - 1, 0, n)
}

/// `a` [M, K] @ packed `w` (+ a bias per column), f32.
fn matmul_blocked_packed(
    a: &Tensor,
    w: &PackedWeights,
    (m, n, k): (usize, usize, usize),
    bias: Option<&Tensor>,
) -> Result<Tensor> {
    let gpu = a.gpu();
    let weights = WeightOperand::Packed(w);
    let a = blocked_operand(a, false, false)?; // [M, K4]
    let padded_n = weights.padded_k(n);
    let bias = bias.map(|b| b.pad_axis(0, 0, padded_n - n)).transpose()?;
    let dims = (1, m, padded_n, k.next_multiple_of(4));
    // The fixed rule's tile, untimed (see WeightOperand).
    let tile = BlockShape::candidates(gpu, m, padded_n)[0];
    let form = BlockedForm { tile, texels: false };
    let operands = (&a, weights, bias.as_ref().map(|b| (b, BiasAlong::Columns)));
    let out = Tensor::empty(gpu, &[m, padded_n], DType::F32)?;
    dispatch_blocked(operands, &out, dims, form, matmul_flops(1, m, n, k))?;
    out.slice(1, 0, n)
}

fn labels_key(forms: &[BlockedForm]) -> String {
    if forms.len() == 1 {
        forms[0].to_string()
    } else {
        "auto".into()
    }
}

/// Records the blocked kernel in `form` for padded operands (K, N multiples of 4) and
/// the bias, if any (padded to a multiple of 4); `flops` (of the unpadded product) goes to
/// the profiler.
fn dispatch_blocked(
    (a, b, bias): (&Tensor, WeightOperand, Option<(&Tensor, BiasAlong)>),
    out: &Tensor,
    (batch, m, n4, k4): (usize, usize, usize, usize),
    form: BlockedForm,
    flops: f64,
) -> Result<()> {
    let gpu = a.gpu();
    let shape = form.tile;
    // The shader's BIAS: 0 none, 1 one per column, 2 one per row.
    let bias_mode = match bias {
        None => 0,
        Some((_, BiasAlong::Columns)) => 1,
        Some((_, BiasAlong::Rows)) => 2,
    };
    let mut defines = type_defines(a.dtype());
    defines.extend(
        [
            [
                ("R", shape.rows.to_string()),
                ("C4", shape.col4.to_string()),
                ("W", shape.lanes.to_string()),
                ("BIAS", bias_mode.to_string()),
                ("TEXELS", u32::from(form.texels).to_string()),
                ("STORAGE", u32::from(!form.texels).to_string()),
            ]
            .as_slice(),
            &shape.row_read_defines(),
            &b.defines(2),
        ]
        .concat(),
    );
    let kernel = gpu.kernel(&KernelSpec {
        source: shader!("matmul_blocked"),
        entry: "matmul_blocked",
        defines: &defines,
        inputs: 3,
        outputs: 1,
        texels: if form.texels { 2 } else { 0 },
    });
    let placeholder;
    let bias = match bias {
        Some((bias, _)) => bias,
        None => {
            placeholder = Tensor::empty(gpu, &[4], a.dtype())?;
            &placeholder
        }
    };
    let b_batch = match b {
        WeightOperand::Float(b) => batch_stride(b),
        WeightOperand::Packed(_) => 0,
    };
    let params = [m, n4, k4, batch_stride(a), b_batch].map(|v| v as u32);
    let groups = [
        n4.div_ceil(shape.columns()) as u32,
        m.div_ceil(shape.rows as usize) as u32,
        batch as u32,
    ];
    if groups[1] > gpu.limits.max_compute_workgroups_per_dimension {
        return Err(Error::shape(
            "matmul",
            format!("{m} rows exceed this device's dispatch limit; split the batch"),
        ));
    }
    let cost = Cost::new("matmul", flops, a.byte_len() + b.byte_len() + out.byte_len());
    let inputs = [a.buffer(), b.buffer(), bias.buffer()];
    if form.texels {
        let WeightOperand::Float(b) = b else {
            return Err(Error::shape(
                "matmul",
                "internal: packed weights are not read as texels",
            ));
        };
        let a_texels = gpu.texels(a.buffer(), a.numel() / 4, "matmul operand A")?;
        let b_texels = gpu.texels(b.buffer(), b.numel() / 4, "matmul operand B")?;
        let texels = [&a_texels, &b_texels];
        gpu.dispatch_with_texels(&kernel, &params, &inputs, &[out.buffer()], &texels, groups, cost);
    } else {
        gpu.dispatch_named(&kernel, &params, &inputs, &[out.buffer()], groups, cost);
    }
    Ok(())
}
