//! The app's platform on native: one thread per job (blocked on with pollster), files in
//! `std::fs`, announcements on stderr.

use super::super::{AppOptions, WgdiffApp};
use crate::{Error, Gpu, Result};
use eframe::egui;
use std::future::Future;
use std::path::Path;

/// Whether the app runs in a web page (no: in a window).
pub const IN_PAGE: bool = false;

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
    crate::fsio::read(path)
}

/// Whether there is a file at `path`.
pub fn exists(path: &Path) -> bool {
    crate::fsio::locate(path).is_file()
}

/// Writes `bytes` to `path` atomically (temp file + rename), creating its folder.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::fsio::write_atomic(path, bytes)
}

/// The process's resident memory (Linux; elsewhere unknown).
pub fn resident_bytes() -> Option<u64> {
    crate::host_memory::resident_bytes()
}

/// Where a training run in `dir` keeps its files: that folder.
pub fn run_files(dir: &Path) -> Box<dyn crate::fsio::FileStore> {
    Box::new(crate::fsio::Folder(dir.to_path_buf()))
}

/// Hands the file at `path` to the user: on native it already is where they asked for it.
pub fn deliver(_path: &Path) -> Result<()> {
    Ok(())
}

/// Tells whoever drives the app what it did: `event: json` on stderr.
pub fn announce(event: &str, json: &str) {
    eprintln!("{event}: {json}");
}

/// Opens the app in a native window on `gpu`'s device; once it closes, errors naming the
/// outputs it could not write (`AppOptions::failures`).
pub fn run_native(gpu: Gpu, options: AppOptions) -> Result<()> {
    let native = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("wgdiff")
            .with_inner_size([1280.0, 860.0]),
        wgpu_options: eframe::egui_wgpu::WgpuConfiguration {
            // Present without waiting for vertical sync, one frame in flight: the queue is
            // shared with the jobs, so a frame should not wait for more than it must.
            surface: eframe::egui_wgpu::SurfaceConfig {
                present_mode: wgpu::PresentMode::AutoNoVsync,
                desired_maximum_frame_latency: Some(1),
            },
            wgpu_setup: super::super::shared_device(&gpu),
            ..Default::default()
        },
        ..Default::default()
    };
    let failures = options.failures.clone();
    eframe::run_native(
        "wgdiff",
        native,
        Box::new(move |cc| Ok(Box::new(WgdiffApp::new(cc, gpu, options)?))),
    )
    .map_err(|e| Error::Config(format!("the app could not start: {e}")))?;
    failures.check()
}

/// No file picker in a window: the views' "Open a file..." buttons show only in a page.
pub async fn pick_file() -> Result<Option<std::path::PathBuf>> {
    Err(Error::Config(
        "there is no file picker in the window: type the file's path".into(),
    ))
}
