//! The app's one seam to the platform: where a job runs, how it waits for the device, and
//! files. Native: one thread per job (blocked on with pollster), `std::fs`, `Gpu::sync`.

use crate::{Error, Gpu, Result};
use std::future::Future;
use std::path::Path;

/// Runs the future `job()` makes to completion off the UI thread. The future is made on the
/// worker, so it may hold the (not `Send`) models it loads across its awaits.
pub fn spawn<F, Fut>(name: &str, job: F) -> Result<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    std::thread::Builder::new()
        .name(format!("wgdiff {name}"))
        .spawn(move || pollster::block_on(job()))
        .map(drop)
        .map_err(|e| Error::Io {
            what: format!("starting the {name} job"),
            reason: e.to_string(),
        })
}

/// Waits until the work recorded so far has run, so a job's step times are real and the
/// next step's work queues behind the UI's frames rather than ahead of them.
pub fn settle(gpu: &Gpu) -> Result<()> {
    gpu.sync()
}

/// Pauses a job for `ms` milliseconds (a paused training run polls its controls with it).
pub async fn sleep(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Writes `bytes` to `path` atomically (temp file + rename), creating its folder.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::checkpoint::write_atomic(path, bytes)
}

/// Writes `trainer`'s checkpoint to `path` (atomically, as `wgdiff train` does).
pub async fn save_checkpoint(trainer: &crate::train::Trainer, path: &Path) -> Result<()> {
    trainer.capture().await?.save(path)
}
