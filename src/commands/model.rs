//! `wgdiff model --preset NAME`: a layer-by-layer summary of a network (name, kind, output
//! shape, parameters) like torchinfo's, with the trainable and fixed totals.

use anyhow::Result;
use wgdiff::models::{preset, LayerRow, PRESETS};
use wgdiff::Gpu;

/// `n` with thousands separators (2287489 -> "2,287,489").
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Prints the summary of preset `name` for a batch of `batch` images (or the preset list).
pub fn run(gpu: &Gpu, name: &str, batch: usize, json: bool) -> Result<()> {
    let config = preset(name)?;
    let net = config.build(gpu, 0)?;
    let rows = net.summary(batch)?;
    let trainable: usize = net.named_params().iter().map(|(_, t)| t.numel()).sum();
    let fixed: usize = net.named_buffers().iter().map(|(_, t)| t.numel()).sum();
    if json {
        let rows: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({"name": r.name, "kind": r.kind, "output_shape": r.output_shape,
                    "params": r.params, "trainable": r.trainable})
            })
            .collect();
        let doc = serde_json::json!({"preset": name, "config": config, "layers": rows,
            "trainable_params": trainable, "fixed_params": fixed});
        println!("{doc}");
        return Ok(());
    }
    print!("{}", table(&rows));
    println!("Total params: {}", thousands(trainable + fixed));
    println!("Trainable params: {}", thousands(trainable));
    println!("Non-trainable params: {}", thousands(fixed));
    println!("Params size (MB): {:.2}", (trainable + fixed) as f64 * 4.0 / 1e6);
    println!("Presets: {}", PRESETS.join(", "));
    Ok(())
}

fn table(rows: &[LayerRow]) -> String {
    let shape = |s: &[usize]| format!("{s:?}");
    let name_w = rows.iter().map(|r| r.name.len()).max().unwrap_or(5).max(5);
    let kind_w = rows.iter().map(|r| r.kind.len()).max().unwrap_or(4).max(4);
    let shape_w = rows
        .iter()
        .map(|r| shape(&r.output_shape).len())
        .max()
        .unwrap_or(12)
        .max(12);
    let rule = "=".repeat(name_w + kind_w + shape_w + 20);
    let mut out = format!(
        "{rule}\n{:<name_w$}  {:<kind_w$}  {:<shape_w$}  {:>12}\n{rule}\n",
        "Layer", "Type", "Output Shape", "Param #"
    );
    for r in rows {
        let params = if r.params == 0 {
            "--".to_string()
        } else if r.trainable {
            thousands(r.params)
        } else {
            format!("({}) fixed", thousands(r.params))
        };
        out += &format!(
            "{:<name_w$}  {:<kind_w$}  {:<shape_w$}  {:>12}\n",
            r.name,
            r.kind,
            shape(&r.output_shape),
            params
        );
    }
    out + &rule + "\n"
}
