//! wgdiff in a web page: opens the browser's WebGPU device and starts the app in the page's
//! canvas, set up by the page address's query; without WebGPU the page says so (index.html).

#[cfg(target_arch = "wasm32")]
mod page {
    use wasm_bindgen::prelude::*;
    use wgdiff::app::{run_web, AppOptions};
    use wgdiff::{AdapterChoice, Gpu};

    /// Called by the page's loader once the module is ready. The address's query sets the app
    /// up as `wgdiff gui`'s flags do: `view`, `autorun` and the first view's settings, e.g.
    /// `?view=denoise&autorun=1&steps=20&seed=0` or `?view=train&preset=tiny&steps=30`.
    #[wasm_bindgen]
    pub async fn start(canvas_id: String) -> Result<(), JsValue> {
        let window = web_sys::window().ok_or("wgdiff needs a page with a window")?;
        let document = window.document().ok_or("wgdiff needs a page with a document")?;
        let canvas: web_sys::HtmlCanvasElement = document
            .get_element_by_id(&canvas_id)
            .ok_or_else(|| format!("the page has no canvas #{canvas_id}"))?
            .dyn_into()?;
        let options = options_from_query(&window.location().search()?)
            .map_err(|e| JsValue::from_str(&format!("the page address: {e}")))?;
        let gpu = Gpu::new(AdapterChoice::default())
            .await
            .map_err(|e| JsValue::from_str(&format!("no WebGPU device: {e}")))?;
        run_web(canvas, gpu, options)
            .await
            .map_err(|e| JsValue::from_str(&e.to_string()))
    }

    /// The app's options from a query string (`?key=value&...`).
    fn options_from_query(query: &str) -> wgdiff::Result<AppOptions> {
        let params = web_sys::UrlSearchParams::new_with_str(query)
            .map_err(|_| wgdiff::Error::Config(format!("`{query}` is not a query string")))?;
        let mut options = AppOptions::default();
        let entries = js_sys::try_iter(&params.entries())
            .ok()
            .flatten()
            .into_iter()
            .flatten();
        for entry in entries.flatten() {
            let pair = js_sys::Array::from(&entry);
            let key = pair.get(0).as_string().unwrap_or_default();
            let value = pair.get(1).as_string().unwrap_or_default();
            match key.as_str() {
                "view" => options.view = value.parse()?,
                "autorun" => options.autorun = value != "0",
                _ => options.settings.push((key, value)),
            }
        }
        Ok(options)
    }
}
