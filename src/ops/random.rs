//! Counter-based GPU random numbers (Philox4x32-10, shaders/random.wgsl): uniform and
//! normal tensors that depend only on (seed, stream, index), so every device agrees.

use super::kernel_for;
use crate::{shader, DType, Gpu, Result, Tensor};

/// A seed plus a stream counter: each draw advances the stream so draws never repeat.
///
/// `first_row` serves a replica that holds rows `first_row..` of a batch split over devices:
/// a draw of shape `[rows, ...]` gives exactly the rows `first_row..first_row + rows` of the
/// same draw for the whole batch (0: the whole batch, as usual).
#[derive(Clone, Debug)]
pub struct Rng {
    pub seed: u64,
    pub stream: u32,
    pub first_row: usize,
}

enum Dist {
    Uniform { lo: f32, hi: f32 },
    Normal { mean: f32, std: f32 },
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng {
            seed,
            stream: 0,
            first_row: 0,
        }
    }

    /// This generator drawing the rows `first_row..` of every whole-batch draw.
    pub fn from_row(self, first_row: usize) -> Rng {
        Rng { first_row, ..self }
    }

    fn fill(&mut self, gpu: &Gpu, shape: &[usize], dtype: DType, dist: Dist) -> Result<Tensor> {
        let out = Tensor::empty(gpu, shape, dtype)?;
        if DRAWS_SKIPPED.get() {
            // (the stream still advances: the draws after the scope are those without it)
            self.stream = self.stream.wrapping_add(1);
            return Ok(out);
        }
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
        let row = shape.iter().skip(1).product::<usize>();
        let offset = u32::try_from(self.first_row * row)
            .ok()
            .filter(|offset| offset.checked_add(n).is_some())
            .ok_or_else(|| {
                crate::Error::shape(
                    "random",
                    format!("rows from {} of {shape:?} pass 2^32 values", self.first_row),
                )
            })?;
        let params = [
            n,
            self.seed as u32,
            (self.seed >> 32) as u32,
            self.stream,
            a.to_bits(),
            b.to_bits(),
            offset,
        ];
        gpu.dispatch_named(
            &kernel,
            &params,
            &[],
            &[out.buffer()],
            gpu.grid((offset % 4 + n).div_ceil(4).div_ceil(64)),
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

thread_local! {
    static DRAWS_SKIPPED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with every [`Rng`] draw on this thread left undrawn: the tensors come back
/// allocated but unwritten. For building a model whose every value is about to be replaced
/// (loading a checkpoint): the device never writes, and a CPU adapter never touches, memory
/// that is overwritten or dropped next, as a compressed model's float weights are.
pub fn without_drawing<T>(f: impl FnOnce() -> T) -> T {
    let before = DRAWS_SKIPPED.replace(true);
    let out = f();
    DRAWS_SKIPPED.set(before);
    out
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
