//! Dispatch batching: kernels are recorded into one open compute pass and submitted
//! together; their small parameter blocks share one uniform buffer per submit.

use super::cost::Cost;
use super::profiler::Recording;
use super::{Kernel, Texels, MAX_DISPATCHES};
use std::collections::VecDeque;
use wgpu::util::DeviceExt;
/// Size of the shared parameter buffer.
const PARAMS_BYTES: u64 = 256 * 1024;

pub(super) struct Batch {
    encoder: Option<wgpu::CommandEncoder>,
    pass: Option<wgpu::ComputePass<'static>>,
    dispatches: u32,
    params: Vec<u8>,
    params_buffer: wgpu::Buffer,
    align: usize,
    /// The running profiler, if any.
    pub(super) profile: Option<Recording>,
    /// Slices kept for later submission (a paced job in a page, see [`Batch::set_deferring`]).
    deferred: Option<VecDeque<Slice>>,
}

/// Recorded work ended but not yet submitted: its command buffers, in order, and the device
/// seconds the pacer estimated for it (0 when it was ended for another reason than pacing).
pub(super) struct Slice {
    pub(super) buffers: Vec<wgpu::CommandBuffer>,
    pub(super) estimated_seconds: f64,
}

impl Batch {
    pub(super) fn new(device: &wgpu::Device, align: u32) -> Self {
        Batch {
            encoder: None,
            pass: None,
            dispatches: 0,
            params: Vec::with_capacity(PARAMS_BYTES as usize),
            params_buffer: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wgdiff params"),
                size: PARAMS_BYTES,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            align: align.max(16) as usize,
            profile: None,
            deferred: None,
        }
    }

    /// The batch's open encoder in `slot` (a field, so the batch's other fields stay free).
    fn encoder<'a>(
        slot: &'a mut Option<wgpu::CommandEncoder>,
        device: &wgpu::Device,
    ) -> &'a mut wgpu::CommandEncoder {
        slot.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgdiff batch"),
            })
        })
    }

    /// Dispatches recorded since the last submit.
    pub(super) fn len(&self) -> u32 {
        self.dispatches
    }

    fn end_pass(&mut self) {
        self.pass = None;
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn dispatch(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        kernel: &Kernel,
        params: &[u32],
        inputs: &[&wgpu::Buffer],
        outputs: &[&wgpu::Buffer],
        texels: &[&Texels],
        groups: [u32; 3],
        cost: Option<Cost>,
    ) {
        if self.profile.as_ref().is_some_and(Recording::on_cpu) {
            // No timestamps: time this dispatch alone between two waits for an idle device.
            self.flush(device, queue);
            super::host::wait_all(device);
            let since = web_time::Instant::now();
            self.record(
                device, queue, kernel, params, inputs, outputs, texels, groups, cost,
            );
            self.flush(device, queue);
            super::host::wait_all(device);
            if let Some(p) = &mut self.profile {
                p.timed_on_cpu(kernel, cost, since);
            }
            return;
        }
        self.record(
            device, queue, kernel, params, inputs, outputs, texels, groups, cost,
        );
    }

    /// Records one dispatch into the open pass (with timestamps around it when profiling
    /// on the device).
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        kernel: &Kernel,
        params: &[u32],
        inputs: &[&wgpu::Buffer],
        outputs: &[&wgpu::Buffer],
        texels: &[&Texels],
        groups: [u32; 3],
        cost: Option<Cost>,
    ) {
        let param_bytes = (params.len() * 4).max(16).div_ceil(16) * 16;
        let slot = param_bytes.div_ceil(self.align) * self.align;
        if self.dispatches >= MAX_DISPATCHES || self.params.len() + slot > PARAMS_BYTES as usize {
            self.flush(device, queue);
        }
        let offset = self.params.len();
        self.params.extend_from_slice(bytemuck::cast_slice(params));
        self.params.resize(offset + slot, 0);

        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.params_buffer,
                offset: offset as u64,
                size: wgpu::BufferSize::new(param_bytes as u64),
            }),
        }];
        for (i, b) in inputs.iter().chain(outputs).enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: 1 + i as u32,
                resource: b.as_entire_binding(),
            });
        }
        for (i, t) in texels.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: (1 + inputs.len() + outputs.len() + i) as u32,
                resource: wgpu::BindingResource::TextureView(t.view()),
            });
        }
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &kernel.layout,
            entries: &entries,
        });
        // Pass timing: this dispatch alone in a pass the device timestamps.
        let pass_timed = self.profile.as_ref().is_some_and(|p| p.pass_writes().is_some());
        if pass_timed {
            self.end_pass();
        }
        if self.pass.is_none() {
            let pass = Self::encoder(&mut self.encoder, device)
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("wgdiff kernels"),
                    timestamp_writes: self.profile.as_ref().and_then(Recording::pass_writes),
                })
                .forget_lifetime();
            self.pass = Some(pass);
        }
        let pass = self.pass.as_mut().unwrap();
        // The dispatch's time includes binding its pipeline and buffers.
        if let Some(p) = &self.profile {
            p.begin(pass);
        }
        pass.set_pipeline(&kernel.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        if let Some(p) = &mut self.profile {
            p.end(pass, kernel, cost);
        }
        if pass_timed {
            self.end_pass();
        }
        self.dispatches += 1;
    }

    pub(super) fn copy(
        &mut self,
        device: &wgpu::Device,
        src: &wgpu::Buffer,
        src_offset: u64,
        dst: &wgpu::Buffer,
        dst_offset: u64,
        bytes: u64,
    ) {
        self.end_pass();
        Self::encoder(&mut self.encoder, device)
            .copy_buffer_to_buffer(src, src_offset, dst, dst_offset, bytes);
    }

    /// Copies rows of `src`'s vec4s into `dst` (rgba32float, `bytes_per_row` a row of
    /// `dst`, a multiple of 256) in order with the dispatches: each of `rows` is (first texture
    /// row, rows, texels a row).
    pub(super) fn copy_to_texture(
        &mut self,
        device: &wgpu::Device,
        src: &wgpu::Buffer,
        dst: &wgpu::Texture,
        bytes_per_row: u32,
        rows: &[(u32, u32, u32)],
    ) {
        self.end_pass();
        let encoder = Self::encoder(&mut self.encoder, device);
        for &(first, count, width) in rows {
            encoder.copy_buffer_to_texture(
                wgpu::TexelCopyBufferInfo {
                    buffer: src,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset: u64::from(first) * u64::from(bytes_per_row),
                        // (a multiple of 256 bytes where given; one row needs none)
                        bytes_per_row: (count > 1).then_some(bytes_per_row),
                        rows_per_image: None,
                    },
                },
                wgpu::TexelCopyTextureInfo {
                    texture: dst,
                    mip_level: 0,
                    origin: wgpu::Origin3d { x: 0, y: first, z: 0 },
                    aspect: wgpu::TextureAspect::All,
                },
                wgpu::Extent3d {
                    width,
                    height: count,
                    depth_or_array_layers: 1,
                },
            );
        }
    }

    /// Submits what was recorded (or, while deferring, keeps it for later); returns the
    /// submission (None when nothing was submitted).
    pub(super) fn flush(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
    ) -> Option<wgpu::SubmissionIndex> {
        self.end_slice(device, queue, 0.0)
    }

    /// Ends what was recorded as one slice the pacer estimated at `estimated_seconds` of device
    /// time, and submits it, or while deferring keeps it for [`Batch::pop_deferred`].
    pub(super) fn end_slice(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        estimated_seconds: f64,
    ) -> Option<wgpu::SubmissionIndex> {
        self.end_pass();
        let defers = self.defers();
        // (deferred slices first: what is submitted now was recorded after them)
        let mut submitted = if defers { None } else { self.submit_deferred(queue) };
        if let Some(mut encoder) = self.encoder.take() {
            let timestamps = self
                .profile
                .as_mut()
                .and_then(|p| p.resolve(device, &mut encoder));
            let mut buffers = Vec::with_capacity(2);
            if !self.params.is_empty() && defers {
                // A queue write would land before the slices still waiting: copy in order.
                let staging = staging(device, "wgdiff params staging", &self.params);
                let mut copy = device.create_command_encoder(&Default::default());
                copy.copy_buffer_to_buffer(&staging, 0, &self.params_buffer, 0, self.params.len() as u64);
                buffers.push(copy.finish());
            } else if !self.params.is_empty() {
                queue.write_buffer(&self.params_buffer, 0, &self.params);
            }
            buffers.push(encoder.finish());
            match &mut self.deferred {
                Some(slices) if defers => slices.push_back(Slice {
                    buffers,
                    estimated_seconds,
                }),
                _ => {
                    submitted = Some(queue.submit(buffers));
                    if let (Some(p), Some(t)) = (&mut self.profile, timestamps) {
                        p.submitted(t);
                    }
                }
            }
        }
        self.params.clear();
        self.dispatches = 0;
        submitted
    }

    /// Whether ended slices are kept for later instead of submitted: while deferring and not
    /// profiling (the profiler maps its timestamps as soon as their slice is ended).
    pub(super) fn defers(&self) -> bool {
        self.deferred.is_some() && self.profile.is_none()
    }

    /// From now on keeps ended slices for later (`on`), or submits those kept and stops. A
    /// paced job in a page, which cannot wait between slices while it records, defers them;
    /// its next readback submits them, two on the device at a time ([`super::Gpu::drain`]).
    pub(super) fn set_deferring(&mut self, on: bool, queue: &wgpu::Queue) {
        match on {
            true => {
                self.deferred.get_or_insert_with(VecDeque::new);
            }
            false => {
                self.submit_deferred(queue);
                self.deferred = None;
            }
        }
    }

    /// Keeps `buffers` (work recorded elsewhere) for later after the slices kept.
    pub(super) fn defer(&mut self, buffers: Vec<wgpu::CommandBuffer>) {
        if let Some(slices) = &mut self.deferred {
            slices.push_back(Slice {
                buffers,
                estimated_seconds: 0.0,
            });
        }
    }

    /// The oldest slice kept for later.
    pub(super) fn pop_deferred(&mut self) -> Option<Slice> {
        self.deferred.as_mut()?.pop_front()
    }

    /// Submits every slice kept for later, in order; returns the last submission.
    pub(super) fn submit_deferred(&mut self, queue: &wgpu::Queue) -> Option<wgpu::SubmissionIndex> {
        let mut last = None;
        while let Some(slice) = self.pop_deferred() {
            last = Some(queue.submit(slice.buffers));
        }
        last
    }

    /// Writes `data` (a multiple of 4 bytes) into `dst` in order with the recorded work, through
    /// a staging copy (while deferring, a queue write would land before the slices kept).
    pub(super) fn write_in_order(&mut self, device: &wgpu::Device, dst: &wgpu::Buffer, data: &[u8]) {
        let staging = staging(device, "wgdiff write staging", data);
        self.copy(device, &staging, 0, dst, 0, data.len() as u64);
    }
}

/// A buffer holding `contents` to copy from (a write kept in order with deferred slices).
fn staging(device: &wgpu::Device, label: &str, contents: &[u8]) -> wgpu::Buffer {
    device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some(label),
        contents,
        usage: wgpu::BufferUsages::COPY_SRC,
    })
}
