//! Casts between f32 and f16 (packed-u32 kernels in shaders/cast.wgsl, so they run on
//! adapters without SHADER_F16); backward casts the gradient the other way.

use super::FLAT_WG;
use crate::gpu::KernelSpec;
use crate::{shader, DType, Result, Tensor};

impl Tensor {
    /// This tensor converted to `dtype` (the same tensor if it already is).
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if self.dtype() == dtype {
            return Ok(self.clone());
        }
        let gpu = self.gpu();
        let out = Tensor::empty(gpu, self.shape(), dtype)?;
        let n = self.numel() as u32;
        let (entry, invocations) = match dtype {
            DType::F16 => ("f32_to_f16", n.div_ceil(2)),
            DType::F32 => ("f16_to_f32", n),
        };
        let kernel = gpu.kernel(&KernelSpec {
            source: shader!("cast"),
            entry,
            defines: &[],
            inputs: 1,
            outputs: 1,
            texels: 0,
        });
        gpu.dispatch_named(
            &kernel,
            &[n],
            &[self.buffer()],
            &[out.buffer()],
            gpu.grid(invocations.div_ceil(FLAT_WG)),
            crate::gpu::Cost::memory("cast", self.byte_len() + out.byte_len()),
        );
        let from = self.dtype();
        Ok(out.with_grad_fn(
            "cast",
            vec![self.clone()],
            Box::new(move |g| Ok(vec![Some(g.to_dtype(from)?)])),
        ))
    }
}
