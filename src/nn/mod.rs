//! Small reusable network pieces built from tensor ops: a fully connected layer and a
//! tanh MLP (used by the two-spirals example and `wgdiff profile mlp`).

mod linear;

pub use linear::{Linear, Mlp};
