//! wgdiff: a portable diffusion-model lab built on a hand-written WGSL tensor engine.
//! This file re-exports the public API: the device, tensors, ops, autograd, layers, optimisers and datasets.

pub mod autograd;
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod checkpoint;
pub mod data;
pub mod error;
pub mod gpu;
pub mod models;
pub mod nn;
pub mod ops;
pub mod optim;
pub mod tensor;

pub use autograd::{backward, backward_from, enable_grad, no_grad, NoGradGuard};
pub use error::{Error, Result};
pub use gpu::{AdapterChoice, Gpu};
pub use tensor::{DType, Tensor};
