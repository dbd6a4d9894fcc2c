//! The app's platform in a web page: jobs are futures on the page's one thread
//! (`spawn_local`), files are fetched from the page's site and written as downloads.

use crate::{Error, Gpu, Result};
use std::future::Future;
use std::path::Path;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

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

fn js_error(what: &str, e: JsValue) -> Error {
    Error::Io {
        what: what.to_string(),
        reason: e.as_string().unwrap_or_else(|| format!("{e:?}")),
    }
}

fn window() -> Result<web_sys::Window> {
    web_sys::window().ok_or_else(|| Error::Config("the app runs in a page with a window".into()))
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

/// The bytes at `path`, an address relative to the page (the site serves `assets/`).
pub async fn read_file(path: &Path) -> Result<Vec<u8>> {
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

/// Offers `bytes` as a download named after `path`'s file name.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .map_or("wgdiff-download".into(), |n| n.to_string_lossy().into_owned());
    let what = format!("downloading {name}");
    let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(bytes));
    let blob = web_sys::Blob::new_with_u8_array_sequence(&parts).map_err(|e| js_error(&what, e))?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(|e| js_error(&what, e))?;
    let document = window()?
        .document()
        .ok_or_else(|| Error::Config("the page has no document".into()))?;
    let anchor: web_sys::HtmlAnchorElement = document
        .create_element("a")
        .map_err(|e| js_error(&what, e))?
        .dyn_into()
        .map_err(|e| js_error(&what, e.into()))?;
    anchor.set_href(&url);
    anchor.set_download(&name);
    anchor.click();
    web_sys::Url::revoke_object_url(&url).map_err(|e| js_error(&what, e))
}

/// MNIST-FID during training needs the classifier and the test split's reference statistics,
/// which the page does not load yet: a clear error instead of a silent run without it.
pub async fn mnist_fid(_gpu: &Gpu, _data: &str) -> Result<crate::train::FidTracker> {
    Err(Error::Config(
        "MNIST-FID during training is not available in the page yet; set \"FID every\" to 0".into(),
    ))
}
