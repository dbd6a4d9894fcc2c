//! The app's platform on native: one thread per job (blocked on with pollster), files in
//! `std::fs`, announcements on stderr.

use crate::{Error, Gpu, Result};
use std::future::Future;
use std::path::Path;

/// What a job and its messages must be to run off the UI thread: `Send`.
pub trait JobSafe: Send {}
impl<T: Send> JobSafe for T {}

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

/// Pauses a job for `ms` milliseconds (a paused training run polls its controls with it).
pub async fn sleep(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// The bytes of the file at `path`.
pub async fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Io {
        what: format!("reading {}", path.display()),
        reason: e.to_string(),
    })
}

/// Whether there is a file at `path`.
pub fn exists(path: &Path) -> bool {
    path.is_file()
}

/// Writes `bytes` to `path` atomically (temp file + rename), creating its folder.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::checkpoint::write_atomic(path, bytes)
}

/// Hands the file at `path` to the user: on native it already is where they asked for it.
pub fn deliver(_path: &Path) -> Result<()> {
    Ok(())
}

/// Tells whoever drives the app what it did: `event: json` on stderr.
pub fn announce(event: &str, json: &str) {
    eprintln!("{event}: {json}");
}

/// MNIST-FID during training: the shipped classifier against `data`'s test split.
pub async fn mnist_fid(gpu: &Gpu, data: &str) -> Result<crate::train::FidTracker> {
    crate::train::FidTracker::mnist(gpu, data, &mut |_, _| {}).await
}
