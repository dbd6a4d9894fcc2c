//! Diffusion: noise processes (VP/DDPM, VE SDE, NCSN), training losses, the adaptive skip
//! schedule, denoisers with classifier-free guidance, and every sampler.

pub mod denoiser;
pub mod loss;
pub mod process;
pub mod sampler;
pub mod schedule;
pub mod skip;

pub use denoiser::{guide, Denoiser, Guided, NetDenoiser};
pub use loss::{Network, Weighting};
pub use process::{Level, Marginals, Objective, Output, Process, Sde};
pub use sampler::{OnStep, SampleOptions, SampleOutput, Sampler, Spacing, Step};
pub use schedule::{AlphaBars, BetaSchedule};
pub use skip::{skip_intervals, skip_levels, SkipInterval};
