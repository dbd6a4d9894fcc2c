//! Inference: load a trained model, build a validated `SampleRequest`, sample it whole, in
//! batches or step by step, score its samples and time its skip schedules.

pub mod diffusers;
pub mod diffusers_export;
pub mod grids;
pub mod model;
pub mod quality;
pub mod request;
pub mod run;
pub mod speedup;

pub use model::{read_checkpoint, Sampling, TrainedModel, DEFAULT_CHECKPOINT};
pub use quality::{sample_features, GeneratedFeatures};
pub use request::{SampleRequest, SampleRequestBuilder, MAX_GUIDANCE};
pub use run::{request_denoiser, run_request, sample_net};
pub use speedup::{measure_skip_speedup, speedup, SkipTiming};
