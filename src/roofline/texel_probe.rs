//! The roof's probes of loads the engine's kernels do not make yet: rgba32float texels
//! (`textureLoad`) and a 64 KiB uniform array, read in `read-vec4-cached`'s pattern.

use super::memory_probe::Work;
use crate::gpu::{expand_template, PooledBuffer};
use crate::{Error, Gpu, Result};
use wgpu::util::DeviceExt;

/// The probes' names and entries in shaders/texel_probe.wgsl, in the table's order.
pub const VARIANTS: [(&str, &str); 2] = [("read-texel", "read_texel"), ("read-uniform", "read_uniform")];
/// Vec4s a probe reads from: 64 KiB, one uniform binding's WebGPU limit (and 128 x 32 texels).
pub const ELEMENTS: usize = 4096;
/// Texels per texture row (the shader's `e & 127u`, `e >> 7u`).
const WIDTH: u32 = 128;
/// A timed run: 1024 workgroups of 64, 16 rounds of 8 reads, each read 7 workgroups further
/// on (as `read-vec4-cached`): 128 MiB.
const TIMED_WORKGROUPS: u32 = 1024;
const TIMED_ROUNDS: u32 = 16;
const TIMED_STRIDE: u32 = 7 * 64;

/// A texel or uniform probe: its own pipeline and bind group (the engine's kernels bind storage
/// buffers only), submitted after the work recorded before it.
pub struct TexelProbe {
    pub variant: &'static str,
    /// What the run covers, for the table.
    pub shape: String,
    pub work: Work,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    workgroups: u32,
    sums: PooledBuffer,
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
        let texture;
        let view;
        let source = if entry == "read_uniform" {
            uniform = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("texel probe data"),
                contents: bytemuck::cast_slice(data),
                usage: wgpu::BufferUsages::UNIFORM,
            });
            (3, uniform.as_entire_binding())
        } else {
            let size = wgpu::Extent3d {
                width: WIDTH,
                height: ELEMENTS as u32 / WIDTH,
                depth_or_array_layers: 1,
            };
            texture = device.create_texture(&wgpu::TextureDescriptor {
                label: Some("texel probe data"),
                size,
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format: wgpu::TextureFormat::Rgba32Float,
                usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
                view_formats: &[],
            });
            gpu.queue.write_texture(
                texture.as_image_copy(),
                bytemuck::cast_slice(data),
                wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(16 * WIDTH),
                    rows_per_image: None,
                },
                size,
            );
            view = texture.create_view(&wgpu::TextureViewDescriptor::default());
            (1, wgpu::BindingResource::TextureView(&view))
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
