//! Cross-entropy of logits against class ids (shaders/cross_entropy.wgsl): a fused, stable
//! log-softmax + NLL per row (saving the row's logsumexp for the backward), then the mean.

use super::{kernel_for, needs_f32_fallback, FLAT_WG};
use crate::gpu::Cost;
use crate::{shader, DType, Error, Result, Tensor};
use std::sync::Arc;

impl Tensor {
    /// Mean over the batch of `-log softmax(logits)[label]`: `self` is logits [N, C], `labels`
    /// N class ids below C. Shape `[1]`; differentiable in the logits.
    pub fn cross_entropy(&self, labels: &[u32]) -> Result<Tensor> {
        self.cross_entropy_rows(labels)?.mean_all()
    }

    /// Per-sample cross-entropy `logsumexp(x_i) - x_i[label_i]` of logits [N, C], shape [N].
    pub fn cross_entropy_rows(&self, labels: &[u32]) -> Result<Tensor> {
        let op = "cross_entropy";
        let [rows, classes] = *self.shape() else {
            return Err(Error::shape(
                op,
                format!("logits must be [N, classes], got {:?}", self.shape()),
            ));
        };
        if rows == 0 || classes == 0 {
            return Err(Error::shape(
                op,
                format!("logits {:?} hold no rows or no classes", self.shape()),
            ));
        }
        if labels.len() != rows {
            return Err(Error::shape(
                op,
                format!(
                    "{} labels for {rows} rows of logits; pass one class id per row",
                    labels.len()
                ),
            ));
        }
        if let Some((i, l)) = labels.iter().enumerate().find(|(_, &l)| l as usize >= classes) {
            return Err(Error::shape(
                op,
                format!("label {i} is {l}, but the logits have only {classes} classes (0..{classes})"),
            ));
        }
        // An invocation walks its row at most twice (the forward: max, then sum of exps).
        if 2 * classes > crate::gpu::MAX_LOOP_ITERATIONS {
            return Err(Error::shape(
                op,
                format!(
                    "{classes} classes are more than this kernel handles ({})",
                    crate::gpu::MAX_LOOP_ITERATIONS / 2
                ),
            ));
        }
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            return self
                .to_dtype(DType::F32)?
                .cross_entropy_rows(labels)?
                .to_dtype(DType::F16);
        }
        let gpu = self.gpu();
        let ids = Arc::new(gpu.alloc(4 * rows as u64, "cross_entropy labels")?);
        gpu.write(ids.raw(), bytemuck::cast_slice(labels));
        let loss = Tensor::empty(gpu, &[rows], self.dtype())?;
        let lse = Tensor::empty(gpu, &[rows], DType::F32)?;
        let forward = kernel_for(
            gpu,
            shader!("cross_entropy"),
            "cross_entropy_forward",
            self.dtype(),
            &[],
            2,
            2,
        );
        let params = [rows as u32, classes as u32];
        let groups = gpu.grid((rows as u32).div_ceil(FLAT_WG));
        gpu.dispatch_named(
            &forward,
            &params,
            &[self.buffer(), ids.raw()],
            &[loss.buffer(), lse.buffer()],
            groups,
            Cost::memory(op, self.byte_len() + loss.byte_len() + 8 * rows as u64),
        );
        let x = self.clone();
        Ok(loss.with_grad_fn(
            op,
            vec![self.clone()],
            Box::new(move |g| {
                let gpu = x.gpu();
                let gx = Tensor::empty(gpu, x.shape(), x.dtype())?;
                let kernel = kernel_for(
                    gpu,
                    shader!("cross_entropy"),
                    "cross_entropy_backward",
                    x.dtype(),
                    &[],
                    4,
                    1,
                );
                gpu.dispatch_named(
                    &kernel,
                    &params,
                    &[x.buffer(), ids.raw(), lse.buffer(), g.buffer()],
                    &[gx.buffer()],
                    groups,
                    Cost::memory(
                        "cross_entropy_backward",
                        2 * x.byte_len() + g.byte_len() + 8 * rows as u64,
                    ),
                );
                Ok(vec![Some(gx)])
            }),
        ))
    }
}
