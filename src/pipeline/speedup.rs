//! The sampling speed-up of a skip schedule: a model sampled at exponent c and at c = 0 in
//! interleaved rounds, the device waited for around each run, the median ratio of the times.

use super::{SampleRequest, Sampling};
use crate::median::median;
use crate::{Gpu, Result};
use web_time::Instant;

/// Wall-clock seconds of each round's run at exponent c and at c = 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SkipTiming {
    pub skipping: Vec<f64>,
    pub full: Vec<f64>,
}

impl SkipTiming {
    /// 1 - the median over rounds of (time at c / time at c = 0): 0.3 is 30% faster.
    pub fn speedup(&self) -> f64 {
        speedup(&self.skipping, &self.full)
    }

    /// Rounds measured.
    pub fn rounds(&self) -> usize {
        self.skipping.len().min(self.full.len())
    }
}

/// 1 - the median of the per-round ratios `times[i] / baseline[i]` (rounds measured in turn,
/// so the machine's drift hits both alike).
pub fn speedup(times: &[f64], baseline: &[f64]) -> f64 {
    let ratios: Vec<f64> = times.iter().zip(baseline).map(|(t, t0)| t / t0).collect();
    1.0 - median(&ratios)
}

/// Samples `request` (at its skip exponent) and the same request at c = 0 in `rounds`
/// interleaved rounds (the order alternates each round) after one untimed run of each, which
/// compiles the kernels; `progress(done, total)` after each run may stop the measurement with
/// an error.
pub async fn measure_skip_speedup(
    gpu: &Gpu,
    sampling: Sampling<'_>,
    request: &SampleRequest,
    rounds: usize,
    mut progress: impl FnMut(usize, usize) -> Result<()>,
) -> Result<SkipTiming> {
    let full = request.unskipped();
    let runs = [request, &full];
    let total = 2 * (rounds + 1);
    let mut timing = SkipTiming::default();
    let mut done = 0;
    for round in 0..=rounds {
        for i in 0..2 {
            let which = (i + round) % 2;
            gpu.finish().await?;
            let started = Instant::now();
            sampling.sample(gpu, runs[which], None).await?;
            gpu.finish().await?;
            let seconds = started.elapsed().as_secs_f64();
            if round > 0 {
                match which {
                    0 => timing.skipping.push(seconds),
                    _ => timing.full.push(seconds),
                }
            }
            done += 1;
            progress(done, total)?;
        }
    }
    Ok(timing)
}
