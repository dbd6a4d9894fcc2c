//! The device in a web page: the browser offers one adapter and schedules the work, so nothing
//! here waits (readbacks are awaited), and the autotuner takes each family's fallback.

use super::pacing::Completion;
use super::Gpu;
use crate::Result;
use web_time::Instant;

/// Whether the library runs in a web page, whose event loop must run between steps.
pub const IN_BROWSER: bool = true;

/// Whether the profiler may time dispatches by waiting around each: not in a page.
pub(crate) const CPU_TIMING: bool = false;

/// The adapter the browser offers.
pub(crate) async fn list_adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    let opts = wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    };
    instance.request_adapter(&opts).await.into_iter().collect()
}

/// Nothing: the page's event loop runs the work.
pub(crate) fn wait_all(_device: &wgpu::Device) {}

/// Nothing: the page's event loop runs the work.
pub(crate) fn wait_for(_device: &wgpu::Device, _submission: Option<wgpu::SubmissionIndex>) {}

/// Submits the slices kept for later in the background, paced ([`Gpu::drain`]).
pub(crate) fn spawn_drain(gpu: &Gpu) {
    let gpu = gpu.clone();
    wasm_bindgen_futures::spawn_local(async move { gpu.drain().await });
}

/// None: a page never waits (its event loop runs the work); a paced job there learns from
/// `Gpu::drain` instead.
pub(crate) fn wait_until(_done: &Completion, _device: &wgpu::Device) -> Option<Instant> {
    None
}

/// None: the work has not necessarily run when the profile stops.
pub(crate) fn wall_ns(_started: Instant) -> Option<f64> {
    None
}

/// None: timing would block the page; the autotuner takes the fallback.
pub(crate) fn measure(
    _gpu: &Gpu,
    _candidates: usize,
    _run: impl Fn(usize) -> Result<()>,
) -> Result<Option<usize>> {
    Ok(None)
}
