//! wgdiff in a web page: opens the browser's WebGPU device and starts the app in the page's
//! canvas; without WebGPU the page says so (see web/index.html) and nothing starts.

#[cfg(target_arch = "wasm32")]
mod page {
    use wasm_bindgen::prelude::*;
    use wgdiff::app::{run_web, AppOptions};
    use wgdiff::{AdapterChoice, Gpu};

    /// Called by the page's loader once the module is ready.
    #[wasm_bindgen]
    pub async fn start(canvas_id: String) -> Result<(), JsValue> {
        let document = web_sys::window()
            .and_then(|w| w.document())
            .ok_or("wgdiff needs a page with a document")?;
        let canvas: web_sys::HtmlCanvasElement = document
            .get_element_by_id(&canvas_id)
            .ok_or_else(|| format!("the page has no canvas #{canvas_id}"))?
            .dyn_into()?;
        let gpu = Gpu::new(AdapterChoice::default())
            .await
            .map_err(|e| JsValue::from_str(&format!("no WebGPU device: {e}")))?;
        run_web(canvas, gpu, AppOptions::default())
            .await
            .map_err(|e| JsValue::from_str(&e.to_string()))
    }
}
