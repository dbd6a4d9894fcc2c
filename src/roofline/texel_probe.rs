//! The roof's probes of loads besides storage buffers: rgba32float texels (`textureLoad` from
//! the engine's texel operand, `Gpu::texels`) and a 64 KiB uniform array, read in
//! `read-vec4-cached`'s pattern.

use super::memory_probe::Work;
use crate::gpu::{expand_template, PooledBuffer, Texels};
use crate::{Error, Gpu, Result};
use wgpu::util::DeviceExt;

/// The probes' names and entries in shaders/texel_probe.wgsl, in the table's order.
pub const VARIANTS: [(&str, &str); 2] = [("read-texel", "read_texel"), ("read-uniform", "read_uniform")];
/// Vec4s a probe reads from: 64 KiB, one uniform binding's WebGPU limit (two rows of the
/// engine's texel operands, `Gpu::texels`).
pub const ELEMENTS: usize = 4096;
/// A timed run: 1024 workgroups of 64, 16 rounds of 8 reads, each read 7 workgroups further
/// on (as `read-vec4-cached`): 128 MiB.
const TIMED_WORKGROUPS: u32 = 1024;
const TIMED_ROUNDS: u32 = 16;
const TIMED_STRIDE: u32 = 7 * 64;

/// A texel or uniform probe: its own pipeline and bind group, submitted after the work recorded
/// before it; the texel probe reads the engine's texel operand (`Gpu::texels`), held while the
/// probe lives.
pub struct TexelProbe {
    pub variant: &'static str,
    /// What the run covers, for the table.
    pub shape: String,
    pub work: Work,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    workgroups: u32,
    sums: PooledBuffer,
    _texels: Option<Texels>,
}

impl TexelProbe {
    /// Submits one run, after everything recorded so far.
    pub fn dispatch(&self, gpu: &Gpu) {
        let mut encoder = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("texel probe"),
            });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("texel probe"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &self.bind_group, &[]);
            pass.dispatch_workgroups(self.workgroups, 1, 1);
        }
        gpu.submit_in_order(vec![encoder.finish()]);
    }

    /// The probe `entry` over `data` (`ELEMENTS` vec4s) with `rounds` and `stride`, one sum per
    /// invocation of `workgroups` workgroups of 64.
    fn new(
        gpu: &Gpu,
        (variant, entry): (&'static str, &str),
        data: &[f32],
        rounds: u32,
        stride: u32,
        workgroups: u32,
    ) -> Result<TexelProbe> {
        if data.len() != 4 * ELEMENTS {
            return Err(Error::Config(format!(
                "texel probe {variant}: its data must be {ELEMENTS} vec4s, not {} f32s",
                data.len()
            )));
        }
        let device = &gpu.device;
        let source = crate::shader!("texel_probe");
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(source.name),
            source: wgpu::ShaderSource::Wgsl(expand_template(source.wgsl, &[]).into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(variant),
            layout: None,
            module: &module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        });
        let params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("texel probe params"),
            contents: bytemuck::cast_slice(&[rounds, stride, ELEMENTS as u32 - 1, 0]),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let sums = gpu.alloc(4 * 64 * u64::from(workgroups), "texel probe sums")?;
        let uniform;
        let mut texels: Option<Texels> = None;
        let source = if entry == "read_uniform" {
            uniform = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("texel probe data"),
                contents: bytemuck::cast_slice(data),
                usage: wgpu::BufferUsages::UNIFORM,
            });
            (3, uniform.as_entire_binding())
        } else {
            let values = gpu.alloc(16 * ELEMENTS as u64, "texel probe data")?;
            gpu.write(values.raw(), bytemuck::cast_slice(data));
            let copy = gpu.texels(values.raw(), ELEMENTS, "texel probe data")?;
            (1, wgpu::BindingResource::TextureView(texels.insert(copy).view()))
        };
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("texel probe"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: params.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: source.0,
                    resource: source.1,
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: sums.raw().as_entire_binding(),
                },
            ],
        });
        let read_bytes = 64 * u64::from(workgroups) * u64::from(rounds) * 8 * 16;
        Ok(TexelProbe {
            variant,
            shape: format!("{} MiB read from {} KiB", read_bytes >> 20, (16 * ELEMENTS) >> 10),
            work: Work::Bytes(read_bytes as f64),
            pipeline,
            bind_group,
            workgroups,
            sums,
            _texels: texels,
        })
    }
}

/// Both probes as timed, their data 1.0 everywhere.
pub fn probes(gpu: &Gpu) -> Result<Vec<TexelProbe>> {
    let ones = vec![1.0f32; 4 * ELEMENTS];
    VARIANTS
        .iter()
        .map(|&v| TexelProbe::new(gpu, v, &ones, TIMED_ROUNDS, TIMED_STRIDE, TIMED_WORKGROUPS))
        .collect()
}

/// The sums the probe `variant` stores after `rounds` rounds over `data` (`ELEMENTS` vec4s),
/// one per invocation of `workgroups` workgroups: what the tests check against a CPU reference.
pub async fn probe_sums(
    gpu: &Gpu,
    variant: &str,
    data: &[f32],
    rounds: u32,
    stride: u32,
    workgroups: u32,
) -> Result<Vec<f32>> {
    let Some(&probe) = VARIANTS.iter().find(|(v, _)| *v == variant) else {
        return Err(Error::Config(format!("no texel probe {variant}")));
    };
    let probe = TexelProbe::new(gpu, probe, data, rounds, stride, workgroups)?;
    probe.dispatch(gpu);
    let bytes = gpu
        .read(
            probe.sums.raw(),
            4 * 64 * u64::from(workgroups),
            "texel probe sums",
        )
        .await?;
    Ok(bytemuck::pod_collect_to_vec(&bytes))
}
