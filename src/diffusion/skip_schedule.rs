//! A per-step schedule as a JSON file: the levels skipped at each step (`wgdiff experiment
//! skip-search`) and optionally the timesteps (`wgdiff experiment step-search`); read by `wgdiff
//! sample --skip-schedule`, `eval`, the app and the page (a hand-written one works too).

use super::sampler::{check_timesteps, Sampler};
use super::skip::SkipPlan;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// The schedule shipped with the repository: `wgdiff experiment skip-search --quick`'s schedule
/// for MNIST-FID + 10 on the skip-trained zero model (DDPM, 20 steps; how it was made is in
/// assets/schedules/README.md). The app's skip view loads it by default.
pub const SHIPPED_SCHEDULE: &str = "assets/schedules/mnist-small-skip-zero-ddpm20-budget10.json";

/// The timestep schedules shipped with the repository: `wgdiff experiment step-search --quick`'s
/// DPM-Solver++ schedules for the shipped U-Net at 10 and 5 steps (how they were made is in
/// assets/schedules/README.md). The app's denoise view offers them.
pub const SHIPPED_TIMESTEP_SCHEDULES: [&str; 2] = [
    "assets/schedules/mnist-small-dpm-solver++-10-searched.json",
    "assets/schedules/mnist-small-dpm-solver++-5-searched.json",
];

/// The `format` every schedule file carries.
pub const SCHEDULE_FORMAT: &str = "wgdiff skip schedule";

/// Levels skipped at each step of one sampler run, and how the schedule was found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SkipSchedule {
    /// Always [`SCHEDULE_FORMAT`].
    pub format: String,
    /// The sampler the depths are for (its step count is `skips.len()`).
    pub sampler: Sampler,
    /// Levels of the network (each depth is below it).
    pub levels: usize,
    /// k_i: deep levels skipped by every network call of step i (step 0 starts from noise).
    pub skips: Vec<usize>,
    /// Normalised time of each step's first network call (1 = noise), as the search saw it
    /// (what the skip view plots); may be empty.
    #[serde(default)]
    pub times: Vec<f32>,
    /// The VP timesteps (0..T-1) the sampler's steps call the network at, when the schedule
    /// fixes them (`wgdiff experiment step-search`; DDPM, DDIM, DPM-Solver++); empty: the
    /// sampler's own spacing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timesteps: Vec<f64>,
    /// How the skip search found it (absent in a hand-written schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchRecord>,
    /// How the step search found its timesteps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_search: Option<StepSearchRecord>,
}

/// How `wgdiff experiment step-search` found a schedule's timesteps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepSearchRecord {
    /// The checkpoint searched on.
    pub model: String,
    /// Steps of the reference run (the same sampler on its own spacing).
    pub reference_steps: usize,
    pub probe_images: usize,
    /// Mean squared difference of the probe batch from the reference run's samples: these
    /// timesteps', and that of the spacing the search started from (the nearest of uniform,
    /// quadratic and log-SNR at the same steps).
    pub discrepancy: f64,
    pub start: String,
    pub start_discrepancy: f64,
    pub date: String,
}

/// What a searched schedule promises, and the figures that back it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchRecord {
    /// The checkpoint it was searched on.
    pub model: String,
    /// FID budget: at most this much above the unskipped model's FID.
    pub budget: f64,
    /// Images of each FID.
    pub samples: usize,
    pub metric: String,
    pub fid_unskipped: f64,
    /// The confirming FID of this schedule.
    pub fid: f64,
    /// Sum over steps of the proxy (mean squared x_0 difference from the unskipped network).
    pub proxy_error: f64,
    /// The proxy budget the dynamic programme met.
    pub proxy_budget: f64,
    /// Network milliseconds of one run (one batch) predicted from the per-depth times, and
    /// the same for the unskipped network.
    pub predicted_ms: f64,
    pub unskipped_ms: f64,
    pub date: String,
}

impl SkipSchedule {
    /// A schedule of `skips` for `sampler` on a network of `levels` levels.
    pub fn new(sampler: Sampler, levels: usize, skips: Vec<usize>, times: Vec<f32>) -> SkipSchedule {
        SkipSchedule {
            format: SCHEDULE_FORMAT.into(),
            sampler,
            levels,
            skips,
            times,
            timesteps: Vec::new(),
            search: None,
            step_search: None,
        }
    }

    /// Sampler steps.
    pub fn steps(&self) -> usize {
        self.skips.len()
    }

    /// The plan a sampler follows.
    pub fn plan(&self) -> SkipPlan {
        SkipPlan::PerStep(self.skips.clone())
    }

    /// Parses and checks a schedule file's bytes; `origin` names it in errors.
    pub fn from_json(bytes: &[u8], origin: &str) -> Result<SkipSchedule> {
        let bad = |msg: String| Error::Io {
            what: format!("skip schedule {origin}"),
            reason: msg,
        };
        let schedule: SkipSchedule = serde_json::from_slice(bytes).map_err(|e| {
            bad(format!(
                "not a skip schedule ({e}); `wgdiff experiment skip-search` writes them: {{\"format\": \"{SCHEDULE_FORMAT}\", \"sampler\": {{\"name\": \"ddpm\"}}, \"levels\": 3, \"skips\": [2, 2, 1, 0]}}"
            ))
        })?;
        if schedule.format != SCHEDULE_FORMAT {
            return Err(bad(format!(
                "format is \"{}\", expected \"{SCHEDULE_FORMAT}\"",
                schedule.format
            )));
        }
        schedule.sampler.validate().map_err(|e| bad(e.to_string()))?;
        if schedule.skips.is_empty() {
            return Err(bad("`skips` is empty: give one depth per sampler step".into()));
        }
        if let Some(k) = schedule.skips.iter().find(|&&k| k >= schedule.levels.max(1)) {
            return Err(bad(format!(
                "skips {k} levels at some step but `levels` is {} (depths 0..{})",
                schedule.levels,
                schedule.levels.max(1) - 1
            )));
        }
        if !schedule.times.is_empty() && schedule.times.len() != schedule.skips.len() {
            return Err(bad(format!(
                "{} times for {} steps (give one per step or none)",
                schedule.times.len(),
                schedule.skips.len()
            )));
        }
        if !schedule.timesteps.is_empty() {
            let name = schedule.sampler.name();
            if !schedule.sampler.takes_timesteps() {
                return Err(bad(format!(
                    "`timesteps` are for the ddpm, ddim and dpm-solver++ samplers; {name} walks its own time grid"
                )));
            }
            // (T - 1 is the model's: checked when a request is built on it)
            check_timesteps(&schedule.timesteps, schedule.skips.len(), f64::INFINITY, name)
                .map_err(|e| bad(e.to_string()))?;
        }
        Ok(schedule)
    }

    /// The file's bytes (pretty JSON).
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a skip schedule serialises")
    }

    /// Reads and checks a schedule file.
    pub fn load(path: &std::path::Path) -> Result<SkipSchedule> {
        let bytes = crate::fsio::read_io(path).map_err(|e| Error::Io {
            what: format!("reading the skip schedule {}", path.display()),
            reason: e.to_string(),
        })?;
        Self::from_json(&bytes, &path.display().to_string())
    }

    /// Writes the schedule atomically.
    pub fn save(&self, path: &std::path::Path) -> Result<()> {
        crate::fsio::write_atomic(path, &self.to_json())
    }

    /// Errors unless the schedule fits a network of `levels` levels.
    pub fn check_levels(&self, levels: usize, origin: &str) -> Result<()> {
        if self.levels != levels {
            return Err(Error::Config(format!(
                "skip schedule {origin} is for a network of {} levels; this one has {levels}",
                self.levels
            )));
        }
        Ok(())
    }
}
