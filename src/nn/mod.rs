//! Reusable network layers built from tensor ops: Linear/Mlp, Conv2d, GroupNorm and the
//! DDPM residual block.

mod conv;
mod linear;
mod resblock;

pub use conv::{Conv2d, GroupNorm};
pub use linear::{Linear, Mlp};
pub use resblock::ResBlock;
