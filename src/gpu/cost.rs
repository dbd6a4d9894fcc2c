//! What a dispatch computes (the op's name, FLOPs and bytes moved): what the profiler reports
//! of it, and what the pacer estimates its device time from.

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
