//! Learning-rate schedules: a factor in (0, 1] applied to the base rate at each step
//! (linear warm-up, optionally followed by cosine decay).

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

#[cfg(test)]
mod tests {
    use super::LrSchedule;

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
