//! Softmax over the last axis, forward and backward (shaders/softmax.wgsl): one row per
//! invocation for short rows, chunked passes combined through per-chunk logsumexps for long ones.

use super::{kernel_for, needs_f32_fallback, FLAT_WG};
use crate::gpu::{Cost, MAX_LOOP_ITERATIONS};
use crate::{shader, DType, Error, Gpu, Result, Tensor};

/// Longest row the one-row-per-invocation kernels take (the forward walks a row three times
/// in one invocation, within the loop budget).
pub const SINGLE_PASS_MAX_LEN: usize = MAX_LOOP_ITERATIONS / 3;

/// Elements of a long row each invocation of the chunked kernels handles.
const CHUNK_LEN: usize = 2048;

/// How a softmax walks its rows: `chunks` of [`CHUNK_LEN`] per row (0: one row per invocation).
#[derive(Clone, Copy)]
struct Rows {
    rows: usize,
    len: usize,
    chunks: usize,
}

impl Rows {
    /// Rows of `len` elements; long rows are cut into chunks (errors when even the chunks'
    /// combine would pass the loop budget, rows of ~60 million elements).
    fn new(numel: usize, len: usize) -> Result<Rows> {
        let rows = numel / len.max(1);
        if len <= SINGLE_PASS_MAX_LEN {
            return Ok(Rows { rows, len, chunks: 0 });
        }
        let chunks = len.div_ceil(CHUNK_LEN);
        // softmax_row_lse walks a row's chunk values twice.
        if 2 * chunks > MAX_LOOP_ITERATIONS {
            return Err(Error::shape(
                "softmax",
                format!(
                    "rows of {len} elements are longer than this op handles ({}); split the last axis",
                    MAX_LOOP_ITERATIONS / 2 * CHUNK_LEN
                ),
            ));
        }
        Ok(Rows { rows, len, chunks })
    }

    /// The kernels' uniform: rows, len, chunk length, chunks per row.
    fn params(&self) -> [u32; 4] {
        [self.rows, self.len, CHUNK_LEN, self.chunks].map(|v| v as u32)
    }

    /// Workgroups of a kernel with one invocation per row (per chunk if `per_chunk`).
    fn groups(&self, gpu: &Gpu, per_chunk: bool) -> [u32; 3] {
        let invocations = if per_chunk {
            self.rows * self.chunks
        } else {
            self.rows
        };
        gpu.grid((invocations as u32).div_ceil(FLAT_WG))
    }

    /// Launches `entry` of shaders/softmax.wgsl on the device and storage type of the first
    /// input.
    fn launch(&self, entry: &str, inputs: &[&Tensor], outputs: &[&Tensor], per_chunk: bool, cost: Cost) {
        let gpu = inputs[0].gpu();
        let kernel = kernel_for(
            gpu,
            shader!("softmax"),
            entry,
            inputs[0].dtype(),
            &[],
            inputs.len(),
            outputs.len(),
        );
        gpu.dispatch_named(
            &kernel,
            &self.params(),
            &inputs.iter().map(|t| t.buffer()).collect::<Vec<_>>(),
            &outputs.iter().map(|t| t.buffer()).collect::<Vec<_>>(),
            self.groups(gpu, per_chunk),
            cost,
        );
    }

    /// y = softmax(x) into `y`.
    fn forward(&self, x: &Tensor, y: &Tensor) -> Result<()> {
        let cost = |name| Cost::memory(name, 2 * x.byte_len());
        if self.chunks == 0 {
            self.launch("softmax_forward", &[x], &[y], false, cost("softmax"));
            return Ok(());
        }
        let chunk_lse = Tensor::empty(x.gpu(), &[self.rows, self.chunks], DType::F32)?;
        let row_lse = Tensor::empty(x.gpu(), &[self.rows], DType::F32)?;
        self.launch(
            "softmax_chunk_lse",
            &[x],
            &[&chunk_lse],
            true,
            cost("softmax_chunk_lse"),
        );
        self.launch(
            "softmax_row_lse",
            &[&chunk_lse],
            &[&row_lse],
            false,
            Cost::memory("softmax_row_lse", chunk_lse.byte_len() + row_lse.byte_len()),
        );
        self.launch("softmax_normalize", &[x, &row_lse], &[y], true, cost("softmax"));
        Ok(())
    }

    /// gx = y * (gy - sum(gy * y)) per row, from the saved output y.
    fn backward(&self, y: &Tensor, gy: &Tensor) -> Result<Tensor> {
        let gx = Tensor::empty(y.gpu(), y.shape(), y.dtype())?;
        let cost = |name| Cost::memory(name, 3 * y.byte_len());
        if self.chunks == 0 {
            self.launch(
                "softmax_backward",
                &[y, gy],
                &[&gx],
                false,
                cost("softmax_backward"),
            );
            return Ok(gx);
        }
        let chunk_dot = Tensor::empty(y.gpu(), &[self.rows, self.chunks], DType::F32)?;
        self.launch(
            "softmax_chunk_dot",
            &[y, gy],
            &[&chunk_dot],
            true,
            Cost::memory("softmax_chunk_dot", 2 * y.byte_len()),
        );
        let row_dot = chunk_dot.sum(&[1], false)?;
        self.launch(
            "softmax_chunk_backward",
            &[y, gy, &row_dot],
            &[&gx],
            true,
            cost("softmax_backward"),
        );
        Ok(gx)
    }
}

impl Tensor {
    /// Softmax over the last axis, for rows of any length a storage binding holds (up to 61
    /// million elements): rows up to [`SINGLE_PASS_MAX_LEN`] take one pass forward and one
    /// backward; longer rows are cut into chunks of 2048, forward in three passes (per-chunk
    /// logsumexps, their combination per row, the normalisation), backward in three (per-chunk
    /// shares of sum(gy * y), their sum per row, the gradient).
    pub fn softmax(&self) -> Result<Tensor> {
        if self.rank() == 0 {
            return Err(Error::shape("softmax", "needs at least one dim"));
        }
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            return self.to_dtype(DType::F32)?.softmax()?.to_dtype(DType::F16);
        }
        let rows = Rows::new(self.numel(), *self.shape().last().unwrap())?;
        let out = Tensor::empty(self.gpu(), self.shape(), self.dtype())?;
        rows.forward(self, &out)?;
        let y = out.clone();
        Ok(out.with_grad_fn(
            "softmax",
            vec![self.clone()],
            Box::new(move |g| Ok(vec![Some(rows.backward(&y, g)?)])),
        ))
    }
}
