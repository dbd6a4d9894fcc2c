//! Sample grids drawn on the device: a compute pass writes an [N, C, H, W] tensor into an
//! Rgba8Unorm storage texture, which a paint callback shows, so frames never go through the CPU.

use crate::{Error, Gpu, Result, Tensor};
use eframe::egui;
use eframe::egui_wgpu::RenderState;

/// How images are laid out in a grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridLayout {
    pub columns: u32,
    /// Each image pixel becomes `scale` x `scale` texels.
    pub scale: u32,
    /// Texels between images and around the grid.
    pub gap: u32,
}

impl GridLayout {
    /// Texels [width, height] of a grid of `shape` [N, C, H, W].
    pub fn size(&self, shape: [usize; 4]) -> [u32; 2] {
        let [n, _, h, w] = shape.map(|d| d as u32);
        let rows = n.div_ceil(self.columns.max(1)).max(1);
        [
            self.columns * (w * self.scale + self.gap) + self.gap,
            rows * (h * self.scale + self.gap) + self.gap,
        ]
    }
}

/// A texture, the compute pipeline that draws grids into it and the render pipeline that shows it.
pub struct GridTexture {
    texture: wgpu::Texture,
    view: wgpu::TextureView,
    /// [width, height] in texels.
    pub size: [u32; 2],
    pipeline: wgpu::ComputePipeline,
    image: GridImage,
}

/// What a frame needs to show the texture: `shaders/grid_image.wgsl` and the texture bound.
/// The app draws the grid with its own small shader rather than as an egui image: on a CPU
/// adapter egui's general mesh shader took 7 ms of a frame for a 350x350 grid (lavapipe; see
/// BENCHMARKS.md, "The app's job against the CLI").
#[derive(Clone)]
struct GridImage {
    pipeline: wgpu::RenderPipeline,
    bind: wgpu::BindGroup,
}

impl eframe::egui_wgpu::CallbackTrait for GridImage {
    fn paint(
        &self,
        _info: egui::PaintCallbackInfo,
        pass: &mut wgpu::RenderPass<'static>,
        _resources: &eframe::egui_wgpu::CallbackResources,
    ) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind, &[]);
        pass.draw(0..3, 0..1);
    }
}

impl GridTexture {
    /// A `size` texture registered with the app's renderer (which shares the engine's device).
    pub fn new(render: &RenderState, size: [u32; 2]) -> GridTexture {
        let device = &render.device;
        let texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("wgdiff sample grid"),
            size: wgpu::Extent3d {
                width: size[0].max(1),
                height: size[1].max(1),
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba8Unorm,
            usage: wgpu::TextureUsages::STORAGE_BINDING | wgpu::TextureUsages::TEXTURE_BINDING,
            view_formats: &[],
        });
        let view = texture.create_view(&wgpu::TextureViewDescriptor::default());
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("grid_texture.wgsl"),
            source: wgpu::ShaderSource::Wgsl(include_str!("../../shaders/grid_texture.wgsl").into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("grid_to_texture"),
            layout: None,
            module: &module,
            entry_point: Some("grid_to_texture"),
            compilation_options: Default::default(),
            cache: None,
        });
        let image = GridImage::new(render, &view);
        GridTexture {
            texture,
            view,
            size,
            pipeline,
            image,
        }
    }

    /// Shows the texture at its size in points.
    pub fn show(&self, ui: &mut egui::Ui) {
        let size = egui::vec2(self.size[0] as f32, self.size[1] as f32);
        let (rect, _) = ui.allocate_exact_size(size, egui::Sense::hover());
        if ui.is_rect_visible(rect) {
            ui.painter().add(eframe::egui_wgpu::Callback::new_paint_callback(
                rect,
                self.image.clone(),
            ));
        }
    }

    /// Draws `images` [N, C, H, W] (f32 in [-1, 1]) as a grid at the texture's top-left, after
    /// the engine's recorded work (`Gpu::submit_in_order`), so the images are complete when drawn.
    pub fn draw(&self, gpu: &Gpu, images: &Tensor, layout: GridLayout) -> Result<()> {
        let shape: [usize; 4] = images.shape().try_into().map_err(|_| {
            Error::shape(
                "grid texture",
                format!("images must be [N, C, H, W], got {:?}", images.shape()),
            )
        })?;
        if images.dtype() != crate::DType::F32 {
            return Err(Error::shape("grid texture", "images must be f32"));
        }
        let [width, height] = layout.size(shape);
        if width > self.size[0] || height > self.size[1] {
            return Err(Error::shape(
                "grid texture",
                format!("a {width}x{height} grid does not fit the {:?} texture", self.size),
            ));
        }
        let [n, c, h, w] = shape.map(|d| d as u32);
        let params: [u32; 12] = [
            n,
            c,
            h,
            w,
            layout.columns,
            layout.scale,
            layout.gap,
            0,
            0,
            width,
            height,
            0,
        ];
        let device = &gpu.device;
        let uniform = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("grid params"),
            size: std::mem::size_of_val(&params) as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        gpu.queue.write_buffer(&uniform, 0, bytemuck::cast_slice(&params));
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("grid texture"),
            layout: &self.pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: uniform.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: images.buffer().as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: wgpu::BindingResource::TextureView(&self.view),
                },
            ],
        });
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("grid texture"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(width.div_ceil(8), height.div_ceil(8), 1);
        }
        gpu.submit_in_order(vec![encoder.finish()]);
        gpu.take_errors()
    }

    /// Frees the texture (frames already recorded keep it alive until they ran).
    pub fn free(self) {
        self.texture.destroy();
    }
}

/// The render pipeline of `shaders/grid_image.wgsl`, built once per renderer and kept in its
/// callback resources for every grid texture.
#[derive(Clone)]
struct GridImagePipeline(wgpu::RenderPipeline);

impl GridImage {
    fn new(render: &RenderState, view: &wgpu::TextureView) -> GridImage {
        let mut renderer = render.renderer.write();
        let resources = &mut renderer.callback_resources;
        let pipeline = match resources.get::<GridImagePipeline>() {
            Some(built) => built.0.clone(),
            None => {
                let built = Self::pipeline(render);
                resources.insert(GridImagePipeline(built.clone()));
                built
            }
        };
        let bind = render.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("grid image"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::TextureView(view),
            }],
        });
        GridImage { pipeline, bind }
    }

    fn pipeline(render: &RenderState) -> wgpu::RenderPipeline {
        let device = &render.device;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("grid_image.wgsl"),
            source: wgpu::ShaderSource::Wgsl(include_str!("../../shaders/grid_image.wgsl").into()),
        });
        let fragment = if render.target_format.is_srgb() {
            "fs_linear"
        } else {
            "fs_gamma"
        };
        device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("grid_image"),
            layout: None,
            vertex: wgpu::VertexState {
                module: &module,
                entry_point: Some("vs_main"),
                compilation_options: Default::default(),
                buffers: &[],
            },
            primitive: wgpu::PrimitiveState::default(),
            depth_stencil: None,
            multisample: wgpu::MultisampleState::default(),
            fragment: Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some(fragment),
                compilation_options: Default::default(),
                targets: &[Some(render.target_format.into())],
            }),
            multiview_mask: None,
            cache: None,
        })
    }
}
