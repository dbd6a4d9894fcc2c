//! Tensor operations, one file (conv: one folder) per kernel family: each holds the forward
//! launch, the backward (as a closure recorded on the tape) and, where it matters, FLOP/byte counts.

pub mod attention;
pub mod blocks;
pub mod cast;
pub mod conv;
pub mod cross_entropy;
pub mod depthwise7;
pub mod elementwise;
pub mod layout;
pub mod matmul;
pub mod norm;
pub mod packed;
pub mod random;
pub mod reduce;
pub mod resample;
pub mod softmax;

pub use attention::{attention, attention_with, spatial_self_attention, AttentionForm};
pub use conv::{ConvAddends, ConvImpl, ConvOptions};
pub use elementwise::{Binary, GeluForm, Unary};
pub use matmul::{BiasAlong, MatmulKernel};
pub use packed::{PackedWeights, WeightBits};
pub use reduce::{ReduceKernel, ReduceOp};

use crate::gpu::{Gpu, KernelSpec, ShaderSource};
use crate::{DType, Error, Result, Tensor};

/// Invocations per workgroup of the flat (one element per invocation) kernels.
pub(crate) const FLAT_WG: u32 = 64;

/// Elements each invocation of the elementwise kernels handles, FLAT_WG apart (ELEMS in
/// shaders/elementwise.wgsl; `Gpu::fill_bits` does the same): few, large workgroups are cheap
/// on CPU adapters.
pub(crate) const FLAT_ELEMS: u32 = 16;

/// Workgroups of the elementwise and fill kernels covering `n` elements.
pub(crate) fn flat_groups(gpu: &Gpu, n: usize) -> [u32; 3] {
    gpu.grid((n as u32).div_ceil(FLAT_WG * FLAT_ELEMS))
}

/// Most dims a strided/broadcast kernel handles.
pub const MAX_RANK: usize = 8;

/// Template values naming the storage type `T`.
pub(crate) fn type_defines(dtype: DType) -> Vec<(&'static str, String)> {
    vec![("T", dtype.wgsl().to_string())]
}

/// Compiles `entry` of `source` for `dtype` with extra template values.
pub(crate) fn kernel_for(
    gpu: &Gpu,
    source: ShaderSource,
    entry: &str,
    dtype: DType,
    extra: &[(&'static str, String)],
    inputs: usize,
    outputs: usize,
) -> crate::gpu::Kernel {
    let mut defines = type_defines(dtype);
    defines.extend(extra.iter().cloned());
    gpu.kernel(&KernelSpec {
        source,
        entry,
        defines: &defines,
        inputs,
        outputs,
        texels: 0,
    })
}

/// Packs up to [`MAX_RANK`] dims into 8 u32 words (unused slots 1 for shapes, 0 for strides).
pub(crate) fn pack8(values: &[usize], fill: u32) -> [u32; 8] {
    let mut out = [fill; 8];
    for (o, v) in out.iter_mut().zip(values) {
        *o = *v as u32;
    }
    out
}

/// Errors unless `t` has at most [`MAX_RANK`] dims.
pub(crate) fn check_rank(op: &'static str, shape: &[usize]) -> Result<()> {
    if shape.len() > MAX_RANK {
        return Err(Error::shape(
            op,
            format!("shape {shape:?} has more than {MAX_RANK} dims"),
        ));
    }
    Ok(())
}

/// Errors unless `t` has `shape` and `x`'s dtype.
pub(crate) fn check_param(
    op: &'static str,
    name: &str,
    t: &Tensor,
    shape: &[usize],
    x: &Tensor,
) -> Result<()> {
    if t.shape() != shape {
        return Err(Error::shape(
            op,
            format!(
                "{name} has shape {:?} but input {:?} needs {shape:?}",
                t.shape(),
                x.shape()
            ),
        ));
    }
    check_same_dtype(op, x, t)
}

/// Errors unless both tensors share a dtype.
pub(crate) fn check_same_dtype(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(Error::shape(
            op,
            format!("dtypes differ: {:?} vs {:?}", a.dtype(), b.dtype()),
        ));
    }
    Ok(())
}

/// True when `dtype` cannot run natively on this device (f16 without SHADER_F16): the op
/// then runs in f32 and casts its result back.
pub(crate) fn needs_f32_fallback(gpu: &Gpu, dtype: DType) -> bool {
    dtype == DType::F16 && !gpu.has_f16()
}
