//! `wgdiff info`: every adapter found, the one chosen, and the features and limits wgdiff
//! depends on.

use anyhow::Result;
use wgdiff::gpu::{describe, instance_for, list_adapters, rank};
use wgdiff::{AdapterChoice, Gpu};

/// Prints the adapters, the chosen one, its features and limits.
pub fn run(choice: AdapterChoice) -> Result<()> {
    let instance = instance_for(&choice)?;
    let mut adapters = pollster::block_on(list_adapters(&instance));
    adapters.sort_by_key(|a| rank(&a.get_info()));
    println!("adapters found ({}):", adapters.len());
    for a in &adapters {
        let i = a.get_info();
        println!("  - {}  driver: {} {}", describe(&i), i.driver, i.driver_info);
    }
    let gpu = Gpu::new_blocking(choice)?;
    println!("\nchosen: {}", describe(&gpu.info));
    println!("features used by wgdiff:");
    for (name, f) in [
        ("SHADER_F16", wgpu::Features::SHADER_F16),
        ("TIMESTAMP_QUERY", wgpu::Features::TIMESTAMP_QUERY),
        (
            "TIMESTAMP_QUERY_INSIDE_PASSES",
            wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES,
        ),
        ("SUBGROUP", wgpu::Features::SUBGROUP),
    ] {
        println!(
            "  {:<30} {}",
            name,
            if gpu.features.contains(f) {
                "yes"
            } else {
                "no (fallback path)"
            }
        );
    }
    println!(
        "  subgroup size                  {}..{}",
        gpu.info.subgroup_min_size, gpu.info.subgroup_max_size
    );
    let l = &gpu.limits;
    println!("limits:");
    for (name, v) in [
        (
            "max_storage_buffer_binding_size",
            l.max_storage_buffer_binding_size,
        ),
        ("max_buffer_size", l.max_buffer_size),
        (
            "max_storage_buffers_per_shader_stage",
            l.max_storage_buffers_per_shader_stage as u64,
        ),
        (
            "max_compute_workgroup_storage_size",
            l.max_compute_workgroup_storage_size as u64,
        ),
        (
            "max_compute_invocations_per_workgroup",
            l.max_compute_invocations_per_workgroup as u64,
        ),
        (
            "max_compute_workgroups_per_dimension",
            l.max_compute_workgroups_per_dimension as u64,
        ),
    ] {
        println!("  {name:<40} {v}");
    }
    Ok(())
}
