//! What a dispatch computes (the op's name, FLOPs and bytes moved: what the profiler reports of
//! it and the pacer estimates its time from), and the device's roof that bounds that time.

/// What a dispatch computes, for the profiler: the op's name, FLOPs and bytes moved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    /// Op name shown in the profile (plain [`super::Gpu::dispatch`] uses the kernel label).
    pub name: &'static str,
    /// Floating-point operations; 0 where not counted (memory-bound ops).
    pub flops: f64,
    /// Bytes read plus written, counting every operand once.
    pub bytes: u64,
}

impl Cost {
    /// An op with counted FLOPs.
    pub fn new(name: &'static str, flops: f64, bytes: u64) -> Cost {
        Cost { name, flops, bytes }
    }

    /// A memory-bound op: only bytes are counted.
    pub fn memory(name: &'static str, bytes: u64) -> Cost {
        Cost::new(name, 0.0, bytes)
    }
}

/// The device's measured roof (`wgdiff bench mac`'s probes, `roofline::measure_ceilings`): the
/// rates that bound what any dispatch's [`Cost`] can take here.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Roof {
    /// f32 FMAs from registers, GFLOP/s (a product is two operations).
    pub gflops: f64,
    /// Storage-buffer reads, GB/s.
    pub gbytes_per_s: f64,
    /// Microseconds per empty dispatch.
    pub dispatch_us: f64,
}

impl Roof {
    /// The least time `calls` dispatches computing `flops` and moving `bytes` can take here,
    /// in seconds, and what sets it ("FMA", "memory" or "dispatch"): each rate alone is a lower
    /// bound, so the largest of the three times is.
    pub fn bound(&self, flops: f64, bytes: f64, calls: usize) -> (f64, &'static str) {
        [
            ("FMA", flops / (self.gflops * 1e9)),
            ("memory", bytes / (self.gbytes_per_s * 1e9)),
            ("dispatch", calls as f64 * self.dispatch_us * 1e-6),
        ]
        .into_iter()
        .filter(|(_, s)| s.is_finite())
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or((0.0, "dispatch"), |(what, s)| (s, what))
    }
}
