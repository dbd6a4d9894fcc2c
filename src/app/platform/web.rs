//! The app's platform in a web page: jobs are futures on the page's one thread
//! (`spawn_local`); files live in the page's memory, fetched from its site or delivered as downloads.

use super::super::{AppOptions, WgdiffApp};
use crate::{Error, Gpu, Result};
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// Whether the app runs in a web page (yes).
pub const IN_PAGE: bool = true;

/// What a job and its messages must be: anything (the page has one thread).
pub trait JobSafe {}
impl<T> JobSafe for T {}

/// Runs the future `job()` makes on the page's event loop; it yields at every await (device
/// readbacks, [`sleep`]), so the page keeps drawing between a job's steps.
pub fn spawn<F, Fut>(_name: &str, job: F) -> Result<()>
where
    F: FnOnce() -> Fut + 'static,
    Fut: Future<Output = ()> + 'static,
{
    wasm_bindgen_futures::spawn_local(async move { job().await });
    Ok(())
}

thread_local! {
    /// The page's files: what the app wrote (checkpoints, samples) and what the user opened,
    /// by path; they last as long as the page. They are kept in JavaScript's memory, which
    /// frees what is replaced, not in the wasm heap, which never shrinks: a checkpoint there
    /// would raise the heap's high-water mark by its size at every save.
    static PAGE_FILES: RefCell<HashMap<PathBuf, js_sys::Uint8Array>> = RefCell::new(HashMap::new());
}

fn js_error(what: &str, e: JsValue) -> Error {
    Error::Io {
        what: what.to_string(),
        reason: e.as_string().unwrap_or_else(|| format!("{e:?}")),
    }
}

fn window() -> Result<web_sys::Window> {
    web_sys::window().ok_or_else(|| Error::Config("the app runs in a page with a window".into()))
}

fn document() -> Result<web_sys::Document> {
    window()?
        .document()
        .ok_or_else(|| Error::Config("the page has no document".into()))
}

/// Pauses a job for `ms` milliseconds without blocking the page (a timer promise).
pub async fn sleep(ms: u64) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Ok(w) = window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms as i32);
        }
    });
    let _ = JsFuture::from(promise).await;
}

/// The bytes of the page's file at `path`, else of the address `path` on the page's site
/// (the site serves `assets/`).
pub async fn read_file(path: &Path) -> Result<Vec<u8>> {
    if let Some(bytes) = PAGE_FILES.with(|f| f.borrow().get(path).cloned()) {
        return Ok(bytes.to_vec());
    }
    let url = path.to_string_lossy().replace('\\', "/");
    let what = format!("fetching {url}");
    let response = JsFuture::from(window()?.fetch_with_str(&url))
        .await
        .map_err(|e| js_error(&what, e))?;
    let response: web_sys::Response = response.dyn_into().map_err(|e| js_error(&what, e))?;
    if !response.ok() {
        return Err(Error::Io {
            what,
            reason: format!(
                "the server answered {} {}",
                response.status(),
                response.status_text()
            ),
        });
    }
    let buffer = JsFuture::from(response.array_buffer().map_err(|e| js_error(&what, e))?)
        .await
        .map_err(|e| js_error(&what, e))?;
    Ok(js_sys::Uint8Array::new(&buffer).to_vec())
}

/// Whether the page has a file at `path` (one the app wrote or the user opened).
pub fn exists(path: &Path) -> bool {
    PAGE_FILES.with(|f| f.borrow().contains_key(path))
}

/// The page's wasm heap (its linear memory, which grows and never shrinks).
pub fn resident_bytes() -> Option<u64> {
    let memory: js_sys::WebAssembly::Memory = wasm_bindgen::memory().dyn_into().ok()?;
    let buffer: js_sys::ArrayBuffer = memory.buffer().dyn_into().ok()?;
    Some(buffer.byte_length() as u64)
}

/// Keeps `bytes` as the page's file at `path` (read back by [`read_file`]; [`deliver`] hands
/// it to the user).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    keep_file(path, js_sys::Uint8Array::from(bytes));
    Ok(())
}

/// Keeps the JavaScript array `bytes` as the page's file at `path`.
fn keep_file(path: &Path, bytes: js_sys::Uint8Array) {
    PAGE_FILES.with(|f| f.borrow_mut().insert(path.to_path_buf(), bytes));
}

/// The page's files under `dir`: where a training run there keeps its checkpoints and grids.
struct PageFolder(PathBuf);

impl crate::fsio::FileStore for PageFolder {
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let path = self.0.join(name);
        Ok(PAGE_FILES.with(|f| f.borrow().get(&path).map(|bytes| bytes.to_vec())))
    }

    fn write(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        write_file(&self.0.join(name), &bytes)
    }

    fn describe(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

/// Where a training run in `dir` keeps its files: the page's memory (see [`deliver`]).
pub fn run_files(dir: &Path) -> Box<dyn crate::fsio::FileStore> {
    Box::new(PageFolder(dir.to_path_buf()))
}

/// Hands the page's file at `path` to the user: a download named after its file name.
pub fn deliver(path: &Path) -> Result<()> {
    let name = path
        .file_name()
        .map_or("wgdiff-download".into(), |n| n.to_string_lossy().into_owned());
    let what = format!("downloading {name}");
    let bytes = PAGE_FILES
        .with(|f| f.borrow().get(path).cloned())
        .ok_or_else(|| Error::Io {
            what: what.clone(),
            reason: format!("the page has no file {}", path.display()),
        })?;
    let parts = js_sys::Array::of1(&bytes);
    let blob = web_sys::Blob::new_with_u8_array_sequence(&parts).map_err(|e| js_error(&what, e))?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(|e| js_error(&what, e))?;
    let anchor: web_sys::HtmlAnchorElement = document()?
        .create_element("a")
        .map_err(|e| js_error(&what, e))?
        .dyn_into()
        .map_err(|e| js_error(&what, e.into()))?;
    anchor.set_href(&url);
    anchor.set_download(&name);
    anchor.click();
    web_sys::Url::revoke_object_url(&url).map_err(|e| js_error(&what, e))
}

/// Asks the user for a checkpoint (the browser's file picker) and keeps it as the page's file
/// `opened/<name>`; None when the user cancels.
pub async fn pick_file() -> Result<Option<PathBuf>> {
    let what = "opening a file";
    let input: web_sys::HtmlInputElement = document()?
        .create_element("input")
        .map_err(|e| js_error(what, e))?
        .dyn_into()
        .map_err(|e| js_error(what, e.into()))?;
    input.set_type("file");
    input.set_accept(".safetensors");
    // The picker ends with "change" (a file chosen) or "cancel".
    let ended = js_sys::Promise::new(&mut |resolve, _| {
        input.set_onchange(Some(&resolve));
        input.set_oncancel(Some(&resolve));
    });
    input.click();
    JsFuture::from(ended).await.map_err(|e| js_error(what, e))?;
    let Some(file) = input.files().and_then(|files| files.get(0)) else {
        return Ok(None);
    };
    let buffer = JsFuture::from(file.array_buffer())
        .await
        .map_err(|e| js_error(what, e))?;
    let path = PathBuf::from("opened").join(file.name());
    keep_file(&path, js_sys::Uint8Array::new(&buffer));
    Ok(Some(path))
}

/// Tells whoever drives the page what the app did: `event`'s latest `json` as the body's
/// `data-wgdiff-<event>` attribute (a test waits on it), and on the console.
pub fn announce(event: &str, json: &str) {
    if let Some(body) = document().ok().and_then(|d| d.body()) {
        let _ = body.set_attribute(&format!("data-wgdiff-{event}"), json);
    }
    web_sys::console::log_1(&format!("wgdiff {event}: {json}").into());
}

/// Starts the app in the page's `canvas` on `gpu`'s device (the browser's WebGPU); the page
/// keeps running it after this returns.
pub async fn run_web(canvas: web_sys::HtmlCanvasElement, gpu: Gpu, options: AppOptions) -> Result<()> {
    let web = eframe::WebOptions {
        wgpu_options: eframe::egui_wgpu::WgpuConfiguration {
            wgpu_setup: super::super::shared_device(&gpu),
            ..Default::default()
        },
        ..Default::default()
    };
    eframe::WebRunner::new()
        .start(
            canvas,
            web,
            Box::new(move |cc| Ok(Box::new(WgdiffApp::new(cc, gpu, options)?))),
        )
        .await
        .map_err(|e| Error::Config(format!("the app could not start in the page: {e:?}")))
}
