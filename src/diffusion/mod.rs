//! Diffusion: noise processes (VP/DDPM, VE SDE, NCSN), training losses and time sampling, the adaptive skip
//! schedule (c-family or per step, and its file), deep-feature caching, denoisers with
//! classifier-free guidance, and every sampler.

pub mod deep_cache;
pub mod denoiser;
pub mod distill;
pub mod loss;
pub mod process;
pub mod sampler;
pub mod schedule;
pub mod skip;
pub mod skip_schedule;
pub mod time_sampling;

pub use deep_cache::{CacheCounts, FeatureCache};
pub use denoiser::{guide, Denoiser, GuidanceInterval, Guided, NetDenoiser};
pub use distill::{distill_loss, DistillGrid, Role};
pub use loss::{Network, Weighting};
pub use process::{Level, Marginals, Objective, Output, Process, Sde};
pub use sampler::{
    check_timesteps, default_sampler, log_snr, timestep_of_log_snr, vp_times, OnStep, SampleOptions,
    SampleOutput, Sampler, Spacing, Start, Step, DEFAULT_SAMPLER_STEPS,
};
pub use schedule::{AlphaBars, BetaSchedule};
pub use skip::{join_depths, skip_intervals, skip_levels, SkipInterval, SkipPlan};
pub use skip_schedule::{SkipSchedule, StepSearchRecord, SHIPPED_SCHEDULE};
pub use time_sampling::TimeSampling;
