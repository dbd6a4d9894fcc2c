//! Reusable network layers built from tensor ops: Linear/Mlp, Conv2d, GroupNorm, the DDPM
//! residual block and the self-attention block.

mod attention;
mod conv;
mod linear;
mod resblock;

pub use attention::AttentionBlock;
pub use conv::{Conv2d, GroupNorm};
pub use linear::{Linear, Mlp};
pub use resblock::ResBlock;
