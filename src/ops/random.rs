//! Counter-based GPU random numbers (Philox4x32-10, shaders/random.wgsl): uniform and
//! normal tensors that depend only on (seed, stream, index), so every device agrees.

use super::kernel_for;
use crate::{shader, DType, Gpu, Result, Tensor};

/// A seed plus a stream counter: each draw advances the stream so draws never repeat.
#[derive(Clone, Debug)]
pub struct Rng {
    pub seed: u64,
    pub stream: u32,
}

enum Dist {
    Uniform { lo: f32, hi: f32 },
    Normal { mean: f32, std: f32 },
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng { seed, stream: 0 }
    }

    fn fill(&mut self, gpu: &Gpu, shape: &[usize], dtype: DType, dist: Dist) -> Result<Tensor> {
        let out = Tensor::empty(gpu, shape, dtype)?;
        let (id, a, b) = match dist {
            Dist::Uniform { lo, hi } => (0, lo, hi),
            Dist::Normal { mean, std } => (1, mean, std),
        };
        let kernel = kernel_for(
            gpu,
            shader!("random"),
            "random_fill",
            dtype,
            &[("DIST", id.to_string())],
            0,
            1,
        );
        let n = out.numel() as u32;
        let params = [
            n,
            self.seed as u32,
            (self.seed >> 32) as u32,
            self.stream,
            a.to_bits(),
            b.to_bits(),
        ];
        gpu.dispatch_named(
            &kernel,
            &params,
            &[],
            &[out.buffer()],
            gpu.grid(n.div_ceil(4).div_ceil(64)),
            crate::gpu::Cost::memory("random", out.byte_len()),
        );
        self.stream = self.stream.wrapping_add(1);
        Ok(out)
    }

    /// Uniform values in [lo, hi).
    pub fn uniform(&mut self, gpu: &Gpu, shape: &[usize], lo: f32, hi: f32, dtype: DType) -> Result<Tensor> {
        let dtype_run = if super::needs_f32_fallback(gpu, dtype) {
            DType::F32
        } else {
            dtype
        };
        self.fill(gpu, shape, dtype_run, Dist::Uniform { lo, hi })?
            .to_dtype(dtype)
    }

    /// Normal values with the given mean and standard deviation.
    pub fn normal(
        &mut self,
        gpu: &Gpu,
        shape: &[usize],
        mean: f32,
        std: f32,
        dtype: DType,
    ) -> Result<Tensor> {
        let dtype_run = if super::needs_f32_fallback(gpu, dtype) {
            DType::F32
        } else {
            dtype
        };
        self.fill(gpu, shape, dtype_run, Dist::Normal { mean, std })?
            .to_dtype(dtype)
    }
}

/// A per-step seed: every step's randomness depends only on (seed, step, purpose), so a
/// resumed run draws exactly what the uninterrupted one would have.
pub fn step_seed(seed: u64, step: usize, purpose: u64) -> u64 {
    let mut z = seed
        ^ (step as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ purpose.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
