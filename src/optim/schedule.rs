//! Learning-rate schedules: a factor in (0, 1] applied to the base rate at each step (linear
//! warm-up, optionally followed by cosine decay), and a late linear decay by a run's progress.

/// How the learning rate changes with the step number (1-based).
#[derive(Clone, Debug, PartialEq)]
pub enum LrSchedule {
    Constant,
    /// Linear ramp from lr/warmup to lr over `warmup` steps, then constant.
    Warmup {
        warmup: u32,
    },
    /// Warm-up, then cosine decay to `min_factor` at step `total`.
    WarmupCosine {
        warmup: u32,
        total: u32,
        min_factor: f32,
    },
}

impl LrSchedule {
    /// Multiplier of the base rate at `step` (1-based).
    pub fn factor(&self, step: u32) -> f32 {
        let warm = |w: u32| {
            if w > 0 && step < w {
                step as f32 / w as f32
            } else {
                1.0
            }
        };
        match *self {
            LrSchedule::Constant => 1.0,
            LrSchedule::Warmup { warmup } => warm(warmup),
            LrSchedule::WarmupCosine {
                warmup,
                total,
                min_factor,
            } => {
                if step < warmup {
                    return warm(warmup);
                }
                let span = total.saturating_sub(warmup).max(1) as f32;
                let progress = ((step - warmup) as f32 / span).min(1.0);
                min_factor + (1.0 - min_factor) * 0.5 * (1.0 + (std::f32::consts::PI * progress).cos())
            }
        }
    }
}

/// The late decay of a run whose end is known by progress (its steps or its time budget): 1
/// until the last `share` of the run, then linearly down to 0 at its end (`share` 0: always 1).
pub fn late_decay(progress: f64, share: f32) -> f32 {
    if share <= 0.0 {
        return 1.0;
    }
    ((1.0 - progress.clamp(0.0, 1.0)) / share as f64).min(1.0) as f32
}

#[cfg(test)]
mod tests {
    use super::{late_decay, LrSchedule};

    #[test]
    fn late_decay_holds_then_falls_to_zero_at_the_end() {
        assert_eq!(late_decay(0.5, 0.0), 1.0);
        assert_eq!(late_decay(1.0, 0.0), 1.0);
        assert_eq!(late_decay(0.2, 0.3), 1.0);
        assert_eq!(late_decay(0.6, 0.3), 1.0);
        assert!((late_decay(0.85, 0.3) - 0.5).abs() < 1e-6);
        assert_eq!(late_decay(1.0, 0.3), 0.0);
        assert_eq!(late_decay(1.5, 0.3), 0.0);
    }

    #[test]
    fn warmup_ramps_then_holds_and_cosine_ends_at_min() {
        let w = LrSchedule::Warmup { warmup: 10 };
        assert_eq!(w.factor(1), 0.1);
        assert_eq!(w.factor(5), 0.5);
        assert_eq!(w.factor(10), 1.0);
        assert_eq!(w.factor(1000), 1.0);
        let c = LrSchedule::WarmupCosine {
            warmup: 10,
            total: 110,
            min_factor: 0.1,
        };
        assert!((c.factor(10) - 1.0).abs() < 1e-6);
        assert!((c.factor(60) - 0.55).abs() < 1e-5);
        assert!((c.factor(110) - 0.1).abs() < 1e-6);
        assert!((c.factor(500) - 0.1).abs() < 1e-6);
    }
}
