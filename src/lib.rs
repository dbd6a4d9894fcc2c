//! wgdiff: a portable diffusion-model lab built on a hand-written WGSL tensor engine.
//! This file re-exports the public API: device, tensors, ops, autograd, layers, optimisers,
//! datasets, models, diffusion processes and samplers, checkpoints.

pub mod autograd;
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod checkpoint;
pub mod data;
pub mod diffusion;
pub mod error;
pub mod gpu;
pub mod models;
pub mod nn;
pub mod ops;
pub mod optim;
pub mod tensor;
#[cfg(not(target_arch = "wasm32"))]
pub mod train;

pub use autograd::{backward, backward_from, enable_grad, no_grad, NoGradGuard};
pub use error::{Error, Result};
pub use gpu::{AdapterChoice, Gpu};
pub use tensor::{DType, Tensor};
