//! What `wgdiff info` and the app's device view show: every adapter found, the one chosen,
//! the optional features wgdiff uses (with their fallbacks) and the limits it depends on.

use super::{describe, instance_for, list_adapters, rank, AdapterChoice, Gpu};
use crate::Result;

/// A device's description, ready to print or show.
pub struct DeviceReport {
    /// Every adapter found, best first: (description, driver).
    pub adapters: Vec<(String, String)>,
    /// The adapter in use.
    pub chosen: String,
    /// Each optional feature wgdiff uses and whether this device has it.
    pub features: Vec<(&'static str, bool)>,
    /// Subgroup sizes (min, max) the adapter reports.
    pub subgroup_sizes: (u32, u32),
    /// The limits kernels are planned against.
    pub limits: Vec<(&'static str, u64)>,
}

/// The optional features wgdiff uses, by name.
const FEATURES: [(&str, wgpu::Features); 4] = [
    ("SHADER_F16", wgpu::Features::SHADER_F16),
    ("TIMESTAMP_QUERY", wgpu::Features::TIMESTAMP_QUERY),
    (
        "TIMESTAMP_QUERY_INSIDE_PASSES",
        wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES,
    ),
    ("SUBGROUP", wgpu::Features::SUBGROUP),
];

impl DeviceReport {
    /// Lists the adapters `choice` allows and describes `gpu` (the one in use).
    pub async fn new(gpu: &Gpu, choice: &AdapterChoice) -> Result<DeviceReport> {
        let instance = instance_for(choice)?;
        let mut adapters = list_adapters(&instance).await;
        adapters.sort_by_key(|a| rank(&a.get_info()));
        let l = &gpu.limits;
        Ok(DeviceReport {
            adapters: adapters
                .iter()
                .map(|a| {
                    let i = a.get_info();
                    (describe(&i), format!("{} {}", i.driver, i.driver_info))
                })
                .collect(),
            chosen: describe(&gpu.info),
            features: FEATURES
                .iter()
                .map(|&(name, f)| (name, gpu.features.contains(f)))
                .collect(),
            subgroup_sizes: (gpu.info.subgroup_min_size, gpu.info.subgroup_max_size),
            limits: vec![
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
            ],
        })
    }
}
