//! `wgdiff info`: every adapter found, the one chosen, and the features and limits wgdiff
//! depends on (the library's `DeviceReport`, also shown by the app's device view).

use anyhow::Result;
use wgdiff::gpu::DeviceReport;
use wgdiff::{AdapterChoice, Gpu};

/// Prints the adapters, the chosen one, its features and limits.
pub fn run(choice: AdapterChoice) -> Result<()> {
    let gpu = Gpu::new_blocking(choice.clone())?;
    let report = pollster::block_on(DeviceReport::new(&gpu, &choice))?;
    println!("adapters found ({}):", report.adapters.len());
    for (adapter, driver) in &report.adapters {
        println!("  - {adapter}  driver: {driver}");
    }
    println!("\nchosen: {}", report.chosen);
    println!("driver: {} {}", gpu.info.driver, gpu.info.driver_info);
    if let Some(note) = wgdiff::gpu::old_lavapipe_note(&gpu.info, wgdiff::gpu::host_has_avx512()) {
        println!("{note}");
    }
    println!("features used by wgdiff:");
    for (name, present) in &report.features {
        println!(
            "  {name:<30} {}",
            if *present { "yes" } else { "no (fallback path)" }
        );
    }
    let (min, max) = report.subgroup_sizes;
    println!("  subgroup size                  {min}..{max}");
    println!("limits:");
    for (name, v) in &report.limits {
        println!("  {name:<40} {v}");
    }
    Ok(())
}
