//! wgdiff: a portable diffusion-model lab on a hand-written WGSL tensor engine. The modules:
//! device, tensors, ops, autograd, layers, optimisers, data, models, diffusion, training, metrics.

#[cfg(feature = "gui")]
pub mod app;
pub mod autograd;
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod checkpoint;
pub mod classifier;
pub mod compress;
pub mod data;
pub mod diffusion;
pub mod distributed;
pub mod error;
pub mod eval;
pub mod experiment;
pub mod features;
pub mod fnv;
pub mod fsio;
pub mod gpu;
pub mod host_memory;
pub mod median;
pub mod metrics;
pub mod models;
pub mod nn;
pub mod ops;
pub mod optim;
pub mod pipeline;
pub mod plot_font;
pub mod profile;
pub mod roofline;
pub mod run_state;
pub mod soak;
pub mod tensor;
pub mod train;

pub use autograd::{backward, backward_from, enable_grad, no_grad, without_grad, NoGradGuard};
pub use error::{Error, Result};
pub use gpu::{AdapterChoice, Gpu};
pub use metrics::{frechet_distance, inception_score, kid, FeatureStats, Predictions};
pub use tensor::{DType, Tensor};
