//! 8-bit Adam's moment state: m and v of one parameter as block-wise dynamic-exponent bytes
//! with an f32 scale pair per block of 256 (shaders/adam8bit.wgsl), updated in one dispatch.

use crate::gpu::{Cost, Kernel, KernelSpec, PooledBuffer};
use crate::{shader, DType, Gpu, Result, Tensor};

/// Elements per block: one workgroup of 64 invocations, four elements each.
pub const BLOCK: usize = 256;

/// The encoded m and v of a parameter of `n` elements.
pub struct Int8Moments {
    n: usize,
    m_codes: PooledBuffer,
    v_codes: PooledBuffer,
    /// (max |m|, max v) per block, f32.
    scales: PooledBuffer,
}

/// The words of shaders/adam8bit.wgsl's Params.
pub struct StepParams {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub bias1: f32,
    pub bias2: f32,
    pub decoupled: bool,
    pub seed: u32,
}

impl StepParams {
    /// The Params words for a tensor of `n` elements (optim.wgsl's adam_step reads the first
    /// nine: all but the seed).
    pub fn words(&self, n: usize) -> [u32; 10] {
        [
            n as u32,
            self.lr.to_bits(),
            self.beta1.to_bits(),
            self.beta2.to_bits(),
            self.eps.to_bits(),
            self.weight_decay.to_bits(),
            self.bias1.to_bits(),
            self.bias2.to_bits(),
            self.decoupled as u32,
            self.seed,
        ]
    }

    /// Params for the encode and decode kernels, which only read `n`.
    fn sizes_only() -> StepParams {
        StepParams {
            lr: 0.0,
            beta1: 0.0,
            beta2: 0.0,
            eps: 0.0,
            weight_decay: 0.0,
            bias1: 1.0,
            bias2: 1.0,
            decoupled: false,
            seed: 0,
        }
    }
}

fn kernel(gpu: &Gpu, entry: &str, inputs: usize, outputs: usize) -> Kernel {
    gpu.kernel(&KernelSpec {
        source: shader!("adam8bit"),
        entry,
        defines: &[],
        inputs,
        outputs,
        texels: 0,
    })
}

impl Int8Moments {
    /// Zero moments for a parameter of `n` elements.
    pub fn zeros(gpu: &Gpu, n: usize) -> Result<Int8Moments> {
        let blocks = n.div_ceil(BLOCK);
        let zeroed = |bytes: usize, what: &str| -> Result<PooledBuffer> {
            let buffer = gpu.alloc(bytes as u64, what)?;
            gpu.write(buffer.raw(), &vec![0u8; bytes]);
            Ok(buffer)
        };
        Ok(Int8Moments {
            n,
            m_codes: zeroed(blocks * BLOCK, "8-bit Adam m")?,
            v_codes: zeroed(blocks * BLOCK, "8-bit Adam v")?,
            scales: zeroed(blocks * 8, "8-bit Adam block scales")?,
        })
    }

    fn blocks(&self) -> usize {
        self.n.div_ceil(BLOCK)
    }

    /// Device bytes of the state: a byte per element and moment (blocks padded to 256), and
    /// two f32 per block.
    pub fn bytes(&self) -> u64 {
        (self.blocks() * (2 * BLOCK + 8)) as u64
    }

    /// One Adam update of `param` (f32, `n` elements) by `grad` times `clip[0]`.
    pub fn step(&self, param: &Tensor, grad: &Tensor, clip: &Tensor, p: &StepParams) {
        let gpu = param.gpu();
        let bytes = grad.byte_len() + 2 * param.byte_len() + 2 * self.bytes();
        gpu.dispatch_named(
            &kernel(gpu, "adam8bit_step", 2, 4),
            &p.words(self.n),
            &[grad.buffer(), clip.buffer()],
            &[
                param.buffer(),
                self.m_codes.raw(),
                self.v_codes.raw(),
                self.scales.raw(),
            ],
            gpu.grid(self.blocks() as u32),
            Cost::memory("adam8bit", bytes),
        );
    }

    /// Encodes f32 moments `m`, `v` of `n` elements (rounding to the nearest code).
    pub fn encode(&self, m: &Tensor, v: &Tensor) -> Result<()> {
        let gpu = m.gpu();
        let (m, v) = (m.to_dtype(DType::F32)?, v.to_dtype(DType::F32)?);
        gpu.dispatch_named(
            &kernel(gpu, "moments_encode", 2, 3),
            &StepParams::sizes_only().words(self.n),
            &[m.buffer(), v.buffer()],
            &[self.m_codes.raw(), self.v_codes.raw(), self.scales.raw()],
            gpu.grid(self.blocks() as u32),
            Cost::memory("adam8bit_encode", 2 * m.byte_len() + self.bytes()),
        );
        Ok(())
    }

    /// The moments decoded into f32 tensors of `shape`.
    pub fn decode(&self, gpu: &Gpu, shape: &[usize]) -> Result<(Tensor, Tensor)> {
        let m = Tensor::empty(gpu, shape, DType::F32)?;
        let v = Tensor::empty(gpu, shape, DType::F32)?;
        gpu.dispatch_named(
            &kernel(gpu, "moments_decode", 3, 2),
            &StepParams::sizes_only().words(self.n),
            &[self.m_codes.raw(), self.v_codes.raw(), self.scales.raw()],
            &[m.buffer(), v.buffer()],
            gpu.grid(self.blocks() as u32),
            Cost::memory("adam8bit_decode", 2 * m.byte_len() + self.bytes()),
        );
        Ok((m, v))
    }
}
