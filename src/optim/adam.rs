//! Adam and AdamW (decoupled weight decay) updating f32 parameters in place on the GPU,
//! with f32 or 8-bit moments and optional global-norm gradient clipping whose factor never
//! leaves the device.

use super::adam8bit::{Int8Moments, StepParams};
use super::LrSchedule;
use crate::gpu::KernelSpec;
use crate::ops::FLAT_WG;
use crate::{shader, DType, Error, Result, Tensor};

/// Hyper-parameters.
#[derive(Clone, Debug)]
pub struct AdamConfig {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    /// true: AdamW (decay applied to the weights); false: Adam with L2 in the gradient.
    pub decoupled: bool,
    /// Clip the global gradient norm to this value (None: no clipping).
    pub max_grad_norm: Option<f32>,
    pub schedule: LrSchedule,
    pub moments: MomentStorage,
}

/// How Adam stores its moment estimates m and v.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MomentStorage {
    /// f32 tensors: 8 bytes per parameter.
    #[default]
    F32,
    /// Block-wise 8-bit dynamic-exponent codes (shaders/adam8bit.wgsl): 2 bytes per parameter
    /// plus 8 per block of 256, a quarter of f32's, for tensors of at least
    /// [`MIN_INT8_ELEMENTS`]; smaller ones (biases, norm scales) keep f32 moments.
    Int8,
}

/// Tensors smaller than this keep f32 moments under [`MomentStorage::Int8`]: their blocks would
/// be mostly padding, and they hold a tiny share of the state (as in the 8-bit optimizer
/// literature, which also keeps small tensors in 32 bits).
pub const MIN_INT8_ELEMENTS: usize = 4096;

/// One parameter's moments.
enum Moments {
    F32 { m: Tensor, v: Tensor },
    Int8(Int8Moments),
}

impl Moments {
    fn bytes(&self) -> u64 {
        match self {
            Moments::F32 { m, v } => m.byte_len() + v.byte_len(),
            Moments::Int8(q) => q.bytes(),
        }
    }
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: true,
            max_grad_norm: None,
            schedule: LrSchedule::Constant,
            moments: MomentStorage::F32,
        }
    }
}

/// Adam/AdamW state for a list of parameters.
pub struct Adam {
    pub config: AdamConfig,
    params: Vec<Tensor>,
    moments: Vec<Moments>,
    step: u32,
}

/// sqrt(sum of squared gradients) over all parameters that have one, as a `[1]` tensor: one
/// single-workgroup dispatch per gradient adds its squares to one accumulator on the device.
pub fn global_grad_norm(params: &[Tensor]) -> Result<Option<Tensor>> {
    let _g = crate::no_grad();
    let grads: Vec<Tensor> = params
        .iter()
        .filter_map(|p| p.grad())
        .map(|g| g.to_dtype(DType::F32))
        .collect::<Result<_>>()?;
    let Some(first) = grads.first() else {
        return Ok(None);
    };
    let gpu = first.gpu();
    let total = Tensor::zeros(gpu, &[1], DType::F32)?;
    let kernel = gpu.kernel(&KernelSpec {
        source: shader!("optim"),
        entry: "grad_sq_norm",
        defines: &[],
        inputs: 1,
        outputs: 1,
        texels: 0,
    });
    for g in &grads {
        gpu.dispatch_named(
            &kernel,
            &[g.numel() as u32],
            &[g.buffer()],
            &[total.buffer()],
            [1, 1, 1],
            crate::gpu::Cost::memory("grad_norm", g.byte_len()),
        );
    }
    Ok(Some(total.sqrt()?))
}

impl Adam {
    /// Optimiser over `params` (f32 leaves with `requires_grad`).
    pub fn new(params: Vec<Tensor>, config: AdamConfig) -> Result<Adam> {
        let mut moments = Vec::new();
        for (i, p) in params.iter().enumerate() {
            if p.dtype() != DType::F32 || !p.is_leaf() || !p.tracks_grad() {
                return Err(Error::shape(
                    "Adam",
                    format!(
                        "parameter {i} {:?} must be an f32 leaf with requires_grad (keep f32 master weights)",
                        p
                    ),
                ));
            }
            moments.push(match config.moments {
                MomentStorage::Int8 if p.numel() >= MIN_INT8_ELEMENTS => {
                    Moments::Int8(Int8Moments::zeros(p.gpu(), p.numel())?)
                }
                _ => Moments::F32 {
                    m: Tensor::zeros(p.gpu(), p.shape(), DType::F32)?,
                    v: Tensor::zeros(p.gpu(), p.shape(), DType::F32)?,
                },
            });
        }
        Ok(Adam {
            config,
            params,
            moments,
            step: 0,
        })
    }

    /// Number of updates taken.
    pub fn steps(&self) -> u32 {
        self.step
    }

    /// Sets the number of updates taken (when resuming: bias correction and the LR schedule
    /// continue from there).
    pub fn set_steps(&mut self, steps: u32) {
        self.step = steps;
    }

    /// Learning rate the next step will use.
    pub fn current_lr(&self) -> f32 {
        self.config.lr * self.config.schedule.factor(self.step + 1)
    }

    /// The moment estimates (m, v) of parameter `i` as f32 tensors (decoded from 8 bits, or the
    /// f32 state itself).
    pub fn moments_f32(&self, i: usize) -> Result<(Tensor, Tensor)> {
        match &self.moments[i] {
            Moments::F32 { m, v } => Ok((m.clone(), v.clone())),
            Moments::Int8(q) => q.decode(self.params[i].gpu(), self.params[i].shape()),
        }
    }

    /// Sets the moment estimates of parameter `i` (resuming a checkpoint) from f32 tensors of
    /// its shape.
    pub fn set_moments(&self, i: usize, m: &Tensor, v: &Tensor) -> Result<()> {
        match &self.moments[i] {
            Moments::F32 { m: sm, v: sv } => {
                // (m, v) may be the state itself, from `moments_f32`, restored in place.
                for (state, new) in [(sm, m), (sv, v)] {
                    if state.buffer() != new.buffer() {
                        state.copy_from(new)?;
                    }
                }
                Ok(())
            }
            Moments::Int8(q) => q.encode(m, v),
        }
    }

    /// Device bytes of the moment state over all parameters.
    pub fn state_bytes(&self) -> u64 {
        self.moments.iter().map(Moments::bytes).sum()
    }

    /// The parameters, in the order given to [`Adam::new`].
    pub fn params(&self) -> &[Tensor] {
        &self.params
    }

    /// Applies one update with the accumulated gradients (parameters without one are skipped).
    pub fn step(&mut self) -> Result<()> {
        self.step_unscaled(1.0, None)
    }

    /// [`Adam::step`] for gradients of a loss multiplied by `grad_scale` (loss scaling): they
    /// are divided by it inside the update, with the clipping factor. `norm`: their global
    /// norm ([`global_grad_norm`]) when the caller has it already.
    pub fn step_unscaled(&mut self, grad_scale: f32, norm: Option<Tensor>) -> Result<()> {
        let Some(first) = self.params.first() else {
            return Ok(());
        };
        let gpu = first.gpu().clone();
        let _g = crate::no_grad();
        let clip = self.clip_factor(1.0 / grad_scale, norm)?;
        let lr = self.current_lr();
        self.step += 1;
        let c = &self.config;
        let t = self.step as i32;
        let kernel = gpu.kernel(&KernelSpec {
            source: shader!("optim"),
            entry: "adam_step",
            defines: &[],
            inputs: 2,
            outputs: 3,
            texels: 0,
        });
        let step = StepParams {
            lr,
            beta1: c.beta1,
            beta2: c.beta2,
            eps: c.eps,
            weight_decay: c.weight_decay,
            bias1: 1.0 - c.beta1.powi(t),
            bias2: 1.0 - c.beta2.powi(t),
            decoupled: c.decoupled,
            seed: self.step,
        };
        for (p, moments) in self.params.iter().zip(&self.moments) {
            let Some(g) = p.grad() else { continue };
            let g = g.to_dtype(DType::F32)?;
            let (m, v) = match moments {
                Moments::F32 { m, v } => (m, v),
                Moments::Int8(q) => {
                    q.step(p, &g, &clip, &step);
                    continue;
                }
            };
            let n = p.numel() as u32;
            let params = step.words(p.numel());
            // Reads g, p, m, v; writes p, m, v.
            let bytes = g.byte_len() + 2 * (p.byte_len() + m.byte_len() + v.byte_len());
            gpu.dispatch_named(
                &kernel,
                &params,
                &[g.buffer(), clip.buffer()],
                &[p.buffer(), m.buffer(), v.buffer()],
                gpu.grid(n.div_ceil(4 * FLAT_WG)),
                crate::gpu::Cost::memory("adam", bytes),
            );
        }
        Ok(())
    }

    /// The factor gradients are multiplied by, as a `[1]` tensor: `inv_scale` times the
    /// clipping factor of the unscaled gradients (1 without clipping).
    fn clip_factor(&self, inv_scale: f32, norm: Option<Tensor>) -> Result<Tensor> {
        let gpu = self.params[0].gpu();
        let norm = match (self.config.max_grad_norm, norm) {
            (Some(_), None) => global_grad_norm(&self.params)?,
            (Some(_), norm) => norm,
            (None, _) => None,
        };
        let factor = Tensor::full(gpu, &[1], inv_scale, DType::F32)?;
        if let (Some(norm), Some(max_norm)) = (norm, self.config.max_grad_norm) {
            let kernel = gpu.kernel(&KernelSpec {
                source: shader!("optim"),
                entry: "clip_factor",
                defines: &[],
                inputs: 1,
                outputs: 1,
                texels: 0,
            });
            gpu.dispatch_named(
                &kernel,
                &[max_norm.to_bits(), inv_scale.to_bits()],
                &[norm.buffer()],
                &[factor.buffer()],
                [1, 1, 1],
                crate::gpu::Cost::memory("clip_factor", 8),
            );
        }
        Ok(factor)
    }

    /// Clears every parameter's gradient.
    pub fn zero_grad(&self) {
        for p in &self.params {
            p.zero_grad();
        }
    }
}
