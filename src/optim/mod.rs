//! Optimisers and training helpers, all on the GPU: Adam/AdamW, global-norm gradient
//! clipping, parameter EMA, learning-rate warm-up (shaders/optim.wgsl) and loss scaling.

mod adam;
mod ema;
mod scaler;
mod schedule;

pub use adam::{global_grad_norm, Adam, AdamConfig};
pub use ema::Ema;
pub use scaler::{backward_and_step, LossScaler};
pub use schedule::LrSchedule;
