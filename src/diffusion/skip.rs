//! The adaptive U-Net skip schedule: k(t) = min(N-1, floor(N - N (1-t)^c)) deepest levels skipped
//! at normalised time t (1 = pure noise), the intervals of t on which k is constant, and
//! `SkipPlan`: that family or any depth per sampler step (a searched schedule).

use serde::{Deserialize, Serialize};

/// Levels to skip at normalised time `t` in [0, 1] for a network with `levels` levels and
/// schedule exponent `c`; c <= 0 (or a network with one level) never skips.
pub fn skip_levels(levels: usize, t: f32, c: f32) -> usize {
    if c <= 0.0 || levels <= 1 {
        return 0;
    }
    let n = levels as f64;
    let t = (t as f64).clamp(0.0, 1.0);
    let k = (n - n * (1.0 - t).powf(c as f64)).floor().max(0.0) as usize;
    k.min(levels - 1)
}

/// How many deep levels a sampler's network calls skip: the c-family k(t), or a depth per
/// sampler step (every call of step i skips `k[i]`; a schedule from `wgdiff experiment
/// skip-search`, see [`crate::diffusion::SkipSchedule`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipPlan {
    Exponent(f32),
    PerStep(Vec<usize>),
}

impl Default for SkipPlan {
    /// Never skip.
    fn default() -> Self {
        SkipPlan::Exponent(0.0)
    }
}

impl SkipPlan {
    /// Levels skipped by the calls of sampler step `step` at normalised time `t` for a network
    /// with `levels` levels (a per-step plan past its end, or a network of one level, skips none).
    pub fn skip_at(&self, levels: usize, step: usize, t: f32) -> usize {
        match self {
            SkipPlan::Exponent(c) => skip_levels(levels, t, *c),
            SkipPlan::PerStep(k) => k.get(step).map_or(0, |&k| k.min(levels.saturating_sub(1))),
        }
    }

    /// True when no call skips anything.
    pub fn is_none(&self) -> bool {
        match self {
            SkipPlan::Exponent(c) => *c <= 0.0,
            SkipPlan::PerStep(k) => k.iter().all(|&k| k == 0),
        }
    }

    /// Errors unless the plan fits a run of `steps` sampler steps (`None`: an adaptive
    /// sampler whose step count is not known ahead) on a network of `levels` levels.
    pub fn check(&self, levels: usize, steps: Option<usize>) -> crate::Result<()> {
        let SkipPlan::PerStep(k) = self else {
            return Ok(());
        };
        let bad = |msg: String| Err(crate::Error::Config(msg));
        match steps {
            None => {
                return bad(
                    "a per-step skip schedule needs a sampler with a fixed number of steps (not ode-rk45)"
                        .into(),
                )
            }
            Some(steps) if steps != k.len() => {
                return bad(format!(
                    "the skip schedule has {} steps but this run takes {steps}; sample with --steps {}",
                    k.len(),
                    k.len()
                ))
            }
            Some(_) => {}
        }
        if let Some((i, &deepest)) = k.iter().enumerate().find(|&(_, &k)| k >= levels.max(1)) {
            return bad(format!(
                "the skip schedule skips {deepest} levels at step {i}, but this network has {levels} (skip 0..{})",
                levels.max(1) - 1
            ));
        }
        Ok(())
    }
}

/// "2 2 1 0" (a schedule's depths for messages).
pub fn join_depths(k: &[usize]) -> String {
    k.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(" ")
}

/// A range of normalised time [start, end) on which the skip count is `skip` (the last
/// interval includes t = 1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SkipInterval {
    pub skip: usize,
    pub start: f32,
    pub end: f32,
}

/// The piecewise-constant pieces of k(t) over [0, 1], in order of t (k = 0, 1, ..., N-1 for
/// c > 0; one interval with k = 0 for c <= 0). Boundaries agree with [`skip_levels`] in f32:
/// k(start) = skip and k(t) < skip for every f32 t < start.
pub fn skip_intervals(levels: usize, c: f32) -> Vec<SkipInterval> {
    let levels = levels.max(1);
    let mut starts = vec![0.0f32];
    if c > 0.0 {
        for j in 1..levels {
            // k(t) >= j  <=>  (1 - t)^c <= 1 - j/N
            let mut b = (1.0 - (1.0 - j as f64 / levels as f64).powf(1.0 / c as f64)) as f32;
            while b > 0.0 && skip_levels(levels, b.next_down_f32(), c) >= j {
                b = b.next_down_f32();
            }
            while skip_levels(levels, b, c) < j {
                b = b.next_up_f32();
            }
            starts.push(b);
        }
    }
    let ends = starts.iter().skip(1).copied().chain([1.0]);
    starts
        .iter()
        .zip(ends)
        .enumerate()
        .map(|(skip, (&start, end))| SkipInterval { skip, start, end })
        .collect()
}

/// `f32::next_up` / `next_down` (stable only since Rust 1.86; the crate supports 1.85).
trait NextFloat {
    fn next_up_f32(self) -> f32;
    fn next_down_f32(self) -> f32;
}

impl NextFloat for f32 {
    fn next_up_f32(self) -> f32 {
        if self == 0.0 {
            return f32::from_bits(1);
        }
        f32::from_bits(if self > 0.0 {
            self.to_bits() + 1
        } else {
            self.to_bits() - 1
        })
    }
    fn next_down_f32(self) -> f32 {
        -(-self).next_up_f32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_values() {
        // N = 3, c = 2: k = floor(3 - 3 (1-t)^2), capped at 2.
        assert_eq!(skip_levels(3, 0.0, 2.0), 0);
        assert_eq!(skip_levels(3, 0.1, 2.0), 0); // 3 - 2.43 = 0.57
        assert_eq!(skip_levels(3, 0.2, 2.0), 1); // 3 - 1.92 = 1.08
        assert_eq!(skip_levels(3, 0.5, 2.0), 2); // 3 - 0.75 = 2.25
        assert_eq!(skip_levels(3, 1.0, 2.0), 2); // 3 - 0 = 3 -> capped at 2
                                                 // N = 4, c = 1: k = floor(4 t)
        assert_eq!(skip_levels(4, 0.24, 1.0), 0);
        assert_eq!(skip_levels(4, 0.26, 1.0), 1);
        assert_eq!(skip_levels(4, 0.74, 1.0), 2);
        assert_eq!(skip_levels(4, 0.99, 1.0), 3);
        // c = 0 never skips
        assert_eq!(skip_levels(4, 1.0, 0.0), 0);
        assert_eq!(skip_levels(4, 0.5, 0.0), 0);
    }

    #[test]
    fn intervals_match_the_function() {
        // N = 3, c = 2: k >= 1 from 1 - sqrt(2/3) = 0.18350, k >= 2 from 1 - sqrt(1/3) = 0.42265
        let iv = skip_intervals(3, 2.0);
        assert_eq!(iv.len(), 3);
        assert!((iv[1].start - 0.183503).abs() < 1e-5 && (iv[2].start - 0.422650).abs() < 1e-5);
        assert_eq!((iv[0].start, iv[2].end), (0.0, 1.0));
        for w in &iv {
            assert_eq!(skip_levels(3, w.start, 2.0), w.skip);
            assert_eq!(skip_levels(3, w.end.next_down_f32(), 2.0), w.skip);
        }
        assert_eq!(
            skip_intervals(5, 0.0),
            vec![SkipInterval {
                skip: 0,
                start: 0.0,
                end: 1.0
            }]
        );
    }
}
