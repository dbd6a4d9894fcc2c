//! Reusable network layers built from tensor ops: Linear/Mlp, Conv2d/ConvTranspose2d, GroupNorm,
//! dropout, the (grouped, bottlenecked) 3x3 conv, the DDPM residual block and self-attention block;
//! `Weight` (a Conv2d's or Linear's float weight and its optional packed integer form).

mod attention;
mod conv;
mod dropout;
mod linear;
mod resblock;
mod spatial_conv;
mod weight;

pub use attention::AttentionBlock;
pub use conv::{Conv2d, ConvTranspose2d, GroupNorm};
pub use dropout::dropout;
pub use linear::{Linear, Mlp};
pub use resblock::{ResBlock, ResBlockOptions};
pub use spatial_conv::{ConvGroups, SpatialConv};
pub use weight::Weight;
