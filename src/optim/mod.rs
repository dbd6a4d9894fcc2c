//! Optimisers and training helpers, all on the GPU: Adam/AdamW, global-norm gradient
//! clipping, parameter EMA and learning-rate warm-up (shaders/optim.wgsl).

mod adam;
mod ema;
mod schedule;

pub use adam::{global_grad_norm, Adam, AdamConfig};
pub use ema::Ema;
pub use schedule::LrSchedule;
