//! Softmax over the last axis, forward and backward (shaders/softmax.wgsl).

use super::{kernel_for, needs_f32_fallback, FLAT_WG};
use crate::gpu::Cost;
use crate::{shader, DType, Error, Result, Tensor};

impl Tensor {
    /// Softmax over the last axis.
    pub fn softmax(&self) -> Result<Tensor> {
        if self.rank() == 0 {
            return Err(Error::shape("softmax", "needs at least one dim"));
        }
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            return self.to_dtype(DType::F32)?.softmax()?.to_dtype(DType::F16);
        }
        let gpu = self.gpu();
        let len = *self.shape().last().unwrap();
        let rows = self.numel() / len.max(1);
        // The kernel walks each row three times in one invocation.
        if 3 * len > crate::gpu::MAX_LOOP_ITERATIONS {
            return Err(Error::shape(
                "softmax",
                format!(
                    "rows of {len} elements are longer than this kernel handles ({}); split the last axis",
                    crate::gpu::MAX_LOOP_ITERATIONS / 3
                ),
            ));
        }
        let out = Tensor::empty(gpu, self.shape(), self.dtype())?;
        let kernel = kernel_for(
            gpu,
            shader!("softmax"),
            "softmax_forward",
            self.dtype(),
            &[],
            1,
            1,
        );
        let params = [rows as u32, len as u32];
        let groups = gpu.grid((rows as u32).div_ceil(FLAT_WG));
        gpu.dispatch_named(
            &kernel,
            &params,
            &[self.buffer()],
            &[out.buffer()],
            groups,
            Cost::memory("softmax", 2 * self.byte_len()),
        );
        let y = out.clone();
        Ok(out.with_grad_fn(
            "softmax",
            vec![self.clone()],
            Box::new(move |g| {
                let gpu = y.gpu();
                let gx = Tensor::empty(gpu, y.shape(), y.dtype())?;
                let kernel = kernel_for(gpu, shader!("softmax"), "softmax_backward", y.dtype(), &[], 2, 1);
                gpu.dispatch_named(
                    &kernel,
                    &params,
                    &[y.buffer(), g.buffer()],
                    &[gx.buffer()],
                    groups,
                    Cost::memory("softmax_backward", 3 * y.byte_len()),
                );
                Ok(vec![Some(gx)])
            }),
        ))
    }
}
