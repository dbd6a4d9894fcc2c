//! The device on a native host: every adapter is listed, waits block the calling thread, the
//! autotuner times candidates, and the blocking forms of async calls exist for programs and tests.

use super::pacing::{completion, Completion};
use super::{AdapterChoice, Gpu};
use crate::Result;
use web_time::Instant;

/// Whether the library runs in a web page, whose event loop must run between steps.
pub const IN_BROWSER: bool = false;

/// Whether the profiler may time dispatches by waiting around each (no timestamp queries).
pub(crate) const CPU_TIMING: bool = true;

/// Every adapter the instance can see.
pub(crate) async fn list_adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    instance.enumerate_adapters(wgpu::Backends::all()).await
}

/// Blocks until the device has run everything submitted.
pub(crate) fn wait_all(device: &wgpu::Device) {
    let _ = device.poll(wgpu::PollType::wait_indefinitely());
}

/// Blocks until `submission` (or everything) has run; later work keeps running.
pub(crate) fn wait_for(device: &wgpu::Device, submission: Option<wgpu::SubmissionIndex>) {
    let _ = device.poll(wgpu::PollType::Wait {
        submission_index: submission,
        timeout: None,
    });
}

/// Submits the slices kept for later: natively none are (see `Gpu::set_pacing`).
pub(crate) fn spawn_drain(gpu: &Gpu) {
    gpu.flush();
}

/// Returns once `done` is filled, with its time, polling without blocking: a blocking poll
/// holds the device's locks while it waits, so a UI thread's writes, acquire and submit would
/// each queue behind the job's work in turn instead of slotting in after the running dispatch.
/// None when the device was lost (the next read reports it).
pub(crate) fn wait_until(done: &Completion, device: &wgpu::Device) -> Option<Instant> {
    loop {
        if let Some(&at) = done.get() {
            return Some(at);
        }
        if device.poll(wgpu::PollType::Poll).is_err() {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// Nanoseconds since `started` (the profile's wall time: the device was waited for).
pub(crate) fn wall_ns(started: Instant) -> Option<f64> {
    Some(started.elapsed().as_nanos() as f64)
}

/// Times every candidate 3 times, round-robin so machine noise hits all alike, after a
/// warm-up run each (which also compiles its pipeline); returns the lowest median. Then
/// releases what the candidates made: their pipelines (on a CPU driver each compiled kernel
/// holds megabytes of JIT state, and only the winner runs again, compiled anew on its next use)
/// and the pool's idle buffers (scratch outputs in size classes the work may never use again).
pub(crate) fn measure(
    gpu: &Gpu,
    candidates: usize,
    run: impl Fn(usize) -> Result<()>,
) -> Result<Option<usize>> {
    let compiled_before = gpu.0.pipelines.keys();
    for c in 0..candidates {
        run(c)?;
    }
    gpu.sync()?;
    let mut times = vec![Vec::new(); candidates];
    for _ in 0..3 {
        for (c, t) in times.iter_mut().enumerate() {
            let start = Instant::now();
            run(c)?;
            gpu.sync()?;
            t.push(start.elapsed().as_secs_f64());
        }
    }
    gpu.0.pipelines.retain(&compiled_before);
    gpu.pool().trim();
    let medians = times.iter().map(|t| crate::median::median(t));
    Ok(medians
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c))
}

impl Gpu {
    /// Blocking [`Gpu::new`] for native programs and tests.
    pub fn new_blocking(choice: AdapterChoice) -> Result<Gpu> {
        pollster::block_on(Self::new(choice))
    }

    /// Submits and waits until the device is idle.
    pub fn sync(&self) -> Result<()> {
        self.flush();
        wait_until(&completion(&self.queue), &self.device);
        self.take_errors()
    }
}
