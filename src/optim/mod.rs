//! Optimisers and training helpers, all on the GPU: Adam/AdamW with f32 or 8-bit moments,
//! global-norm gradient clipping, parameter EMA, learning-rate warm-up (shaders/optim.wgsl,
//! adam8bit.wgsl) and loss scaling.

mod adam;
mod adam8bit;
mod ema;
mod scaler;
mod schedule;

pub use adam::{global_grad_norm, Adam, AdamConfig, MomentStorage, MIN_INT8_ELEMENTS};
pub use ema::Ema;
pub use scaler::{backward_and_step, backward_scaled, update, LossScaler};
pub use schedule::{late_decay, LrSchedule};
