//! The device: one `Gpu` handle owns instance, adapter, device, queue, buffer pool and
//! pipeline cache, and batches kernel dispatches into few submits.

mod autotune;
mod batch;
mod cost;
mod devices;
#[cfg_attr(target_arch = "wasm32", path = "host_web.rs")]
mod host;
mod pacing;
mod pipelines;
mod pool;
mod profiler;
mod report;
mod select;
mod texels;

pub use autotune::{without_measuring, without_measuring_async, Autotuner};
pub use devices::{open_devices, DeviceSet};
pub use host::IN_BROWSER;
pub use pacing::{Pacing, Parts};
pub use pipelines::{expand_template, Kernel, KernelSpec, PipelineCreation, ShaderSource};
pub use pool::{size_class, BufferPool, PoolStats, PooledBuffer};

pub use cost::{Cost, Roof};
pub use profiler::{OpRow, Profile, Profiler, Record, Timing};
pub use report::DeviceReport;
#[cfg(not(target_arch = "wasm32"))]
pub use select::quiet_display_probes;
pub use select::{
    describe, host_has_avx512, lavapipe_mesa_version, old_lavapipe_note, rank, slow_fallback_warning,
    AdapterChoice,
};
pub use texels::{Texels, TEXEL_ROW};

use crate::{Error, Result};
use batch::Batch;
use pacing::Pacer;
use pipelines::PipelineCache;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Dispatches a batch records before a submit is forced (the profiler sizes its timestamp
/// queries by it).
const MAX_DISPATCHES: u32 = 1024;

/// Optional features the engine uses when the adapter offers them.
pub const WANTED_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::TIMESTAMP_QUERY)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES)
    .union(wgpu::Features::SUBGROUP);

/// Most loop iterations one shader invocation may run, summed over all its loops. Mesa's
/// lavapipe (gallivm) silently leaves every loop of an invocation once 65535 iterations have
/// run in total; kernels that loop over data split the work so no invocation goes past this
/// (with a margin for the loops around the main one).
pub const MAX_LOOP_ITERATIONS: usize = 60_000;

/// Shared handle to the compute device (cheap to clone).
#[derive(Clone)]
pub struct Gpu(Arc<GpuInner>);

/// Slices [`Gpu::drain`] keeps on the device: one running, one queued, so the device does not
/// idle while the page learns (through its event loop) that one finished. With three, a frame
/// waited behind more: the page's frame interval p95 while sampling was 273-316 ms against 135.
const DEFERRED_IN_FLIGHT: usize = 2;

/// What a [`Gpu`] holds.
pub struct GpuInner {
    pub instance: wgpu::Instance,
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub features: wgpu::Features,
    pub limits: wgpu::Limits,
    pool: BufferPool,
    texel_pool: texels::TexelPool,
    pipelines: PipelineCache,
    batch: Mutex<Batch>,
    errors: Arc<Mutex<Vec<String>>>,
    tuner: Autotuner,
    poison: AtomicBool,
    /// When a job sharing the device with a UI submits; see [`Gpu::set_pacing`].
    pacer: Mutex<Pacer>,
    /// The drain of deferred slices in progress (a page's; see [`Gpu::drain`]).
    drain: Mutex<Drain>,
}

/// Whether a [`Gpu::drain`] runs, and who waits for it to finish.
#[derive(Default)]
struct Drain {
    running: bool,
    waiting: Vec<futures_channel::oneshot::Sender<()>>,
}

/// The running [`Gpu::drain`]: when it ends, the next may start and those waiting go on.
struct DrainRunning<'a>(&'a Mutex<Drain>);

impl Drop for DrainRunning<'_> {
    fn drop(&mut self) {
        let mut drain = self.0.lock().unwrap_or_else(|e| e.into_inner());
        drain.running = false;
        for waiting in drain.waiting.drain(..) {
            let _ = waiting.send(());
        }
    }
}

/// The workgroup axis along which [`Gpu::dispatch_parts`] may split a dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitAxis {
    X,
    Z,
}

impl std::ops::Deref for Gpu {
    type Target = GpuInner;
    fn deref(&self) -> &GpuInner {
        &self.0
    }
}

/// Instance over the backends `choice` allows.
pub fn instance_for(choice: &AdapterChoice) -> Result<wgpu::Instance> {
    Ok(instance_over(choice.backends()?))
}

fn instance_over(backends: wgpu::Backends) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    desc.flags = wgpu::InstanceFlags::empty().with_env();
    wgpu::Instance::new(desc)
}

/// An instance and the adapters it sees, for opening devices. Without a named backend, GL is
/// opened only when no other backend has an adapter `choice` matches: GL ranks last
/// ([`rank`]), and opening it loads the GL driver, on a lavapipe machine Mesa's llvmpipe GL:
/// ~0.5 s and ~20 MB of peak RSS in every process (BENCHMARKS.md, "Which lavapipe").
pub async fn adapters_for(choice: &AdapterChoice) -> Result<(wgpu::Instance, Vec<wgpu::Adapter>)> {
    if choice.backend.is_none() {
        let instance = instance_over(wgpu::Backends::all() - wgpu::Backends::GL);
        let found = list_adapters(&instance).await;
        if found.iter().any(|a| choice.matches(&a.get_info())) {
            return Ok((instance, found));
        }
    }
    let instance = instance_for(choice)?;
    let found = list_adapters(&instance).await;
    Ok((instance, found))
}

/// Where the CLI keeps measured kernel choices for this adapter and this build's kernels:
/// `$WGDIFF_CACHE_DIR`, else `$XDG_CACHE_HOME/wgdiff`, else `~/.cache/wgdiff` (None on the web
/// or without a home).
pub fn tuning_cache_path(info: &wgpu::AdapterInfo) -> Option<std::path::PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    };
    let dir = var("WGDIFF_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("wgdiff")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("wgdiff")))?;
    let name: String = format!("{}-{:?}-{}", info.name, info.backend, info.driver_info)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // The kernels' fingerprint (build.rs): choices measured with other kernels never load.
    Some(dir.join(format!("autotune-{name}-{}.json", env!("WGDIFF_KERNELS_HASH"))))
}

/// Every adapter the instance can see (on the web: the one the browser offers).
pub async fn list_adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    host::list_adapters(instance).await
}

impl Gpu {
    /// Opens the best adapter allowed by `choice` (flags, then WGPU_BACKEND/WGPU_ADAPTER_NAME).
    pub async fn new(choice: AdapterChoice) -> Result<Gpu> {
        let choice = choice.or_env();
        let (instance, found) = adapters_for(&choice).await?;
        let adapter = select::pick(found, &choice)?;
        Gpu::on_adapter(instance, adapter, choice.without).await
    }

    /// Opens a device on `adapter` with the wanted features it offers minus `without`. Each
    /// call opens another logical device (own queue, buffers and pipelines), also on an
    /// adapter already in use: how one GPU holds several data-parallel replicas.
    pub async fn on_adapter(
        instance: wgpu::Instance,
        adapter: wgpu::Adapter,
        without: wgpu::Features,
    ) -> Result<Gpu> {
        let info = adapter.get_info();
        let features = adapter.features() & WANTED_FEATURES & !without;
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("wgdiff"),
                required_features: features,
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| Error::RequestDevice {
                adapter: describe(&info),
                reason: e.to_string(),
            })?;
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            sink.lock().unwrap().push(e.to_string());
        }));
        // A lost device (driver reset, a browser reclaiming the GPU) fails every later
        // readback with this message instead of a silent stop.
        let sink = errors.clone();
        device.set_device_lost_callback(move |reason, message| {
            if reason != wgpu::DeviceLostReason::Destroyed {
                sink.lock().unwrap().push(format!(
                    "the GPU device was lost ({message}); restart wgdiff (in a browser: reload the page)"
                ));
            }
        });
        let batch = Batch::new(&device, limits.min_uniform_buffer_offset_alignment);
        Ok(Gpu(Arc::new(GpuInner {
            instance,
            adapter,
            features: device.features(),
            limits: device.limits(),
            device,
            queue,
            info,
            pool: BufferPool::default(),
            texel_pool: Default::default(),
            pipelines: PipelineCache::default(),
            batch: Mutex::new(batch),
            errors,
            tuner: Autotuner::default(),
            poison: AtomicBool::new(false),
            pacer: Mutex::new(Pacer::new()),
            drain: Mutex::default(),
        })))
    }

    /// True when kernels may use `f16` storage and arithmetic.
    pub fn has_f16(&self) -> bool {
        self.features.contains(wgpu::Features::SHADER_F16)
    }

    /// True when kernels may use subgroup operations.
    pub fn has_subgroups(&self) -> bool {
        self.features.contains(wgpu::Features::SUBGROUP)
    }

    /// The adapter's subgroup size when it has subgroups of one size, a multiple of 4 between 4
    /// and 64 (lavapipe: 8): a workgroup of that many invocations is one subgroup, whose lanes
    /// can share loads and add without barriers (the Winograd conv, the tiled weight
    /// gradient's dY reads, the subgroup norm kernels).
    pub fn fixed_subgroup_size(&self) -> Option<u32> {
        let (min, max) = (self.info.subgroup_min_size, self.info.subgroup_max_size);
        (self.has_subgroups() && min == max && (4..=64).contains(&min) && min % 4 == 0).then_some(min)
    }

    /// True on software/CPU adapters such as lavapipe, which want different kernel shapes.
    pub fn is_cpu(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// With poison on, every new tensor is filled with NaN bits first, so a kernel that
    /// leaves an element unwritten shows up as NaN (tests turn this on).
    pub fn set_poison(&self, on: bool) {
        self.poison.store(on, Ordering::Relaxed);
    }

    /// True when new tensors are poisoned.
    pub fn poison_enabled(&self) -> bool {
        self.poison.load(Ordering::Relaxed)
    }

    /// The buffer pool.
    pub fn pool(&self) -> &BufferPool {
        &self.pool
    }

    /// Deterministic mode for this device (off by default): every kernel choice the autotuner
    /// would time (conv implementation and tile, matmul tile, reduction and norm forms) is
    /// instead the fixed rule of its family, the one the browser uses:
    /// - `auto` convs: [`crate::ops::conv::untimed_conv_impl`] (direct when
    ///   Cin/groups x Cout/groups <= 16, tiled otherwise);
    /// - conv and matmul tiles: the first of [`crate::ops::matmul::BlockShape::candidates`];
    /// - reductions and norms: on CPU adapters the first available form (one row per
    ///   invocation where a row fits the loop budget), on GPUs the last (one row per
    ///   workgroup; subgroup reduction where supported).
    ///
    /// So two runs with the same adapter, driver and shapes give bit-identical results. The
    /// autotune cache file is neither read nor written for these choices, and pinned choices
    /// ([`Autotuner::set`]) still apply. Per device, so other devices (and tests sharing
    /// another device) keep measuring.
    pub fn set_deterministic(&self, on: bool) {
        self.tuner.set_deterministic(on);
    }

    /// True in deterministic mode ([`Gpu::set_deterministic`]).
    pub fn is_deterministic(&self) -> bool {
        self.tuner.is_deterministic()
    }

    /// Per-shape kernel choices made by measurement.
    pub fn tuner(&self) -> &Autotuner {
        &self.tuner
    }

    /// Number of compiled pipelines.
    pub fn pipeline_count(&self) -> usize {
        self.pipelines.len()
    }

    /// Every pipeline this device has created, in order, with the seconds each took (a fresh
    /// machine pays them once per process; see [`PipelineCreation`]).
    pub fn pipeline_creations(&self) -> Vec<PipelineCreation> {
        self.pipelines.created()
    }

    /// Largest buffer one storage binding may cover.
    pub fn max_binding_bytes(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    /// A pooled storage buffer of `bytes` bytes; `what` names it in the error when too big.
    pub fn alloc(&self, bytes: u64, what: &str) -> Result<PooledBuffer> {
        let limit = self.max_binding_bytes();
        if bytes > limit {
            return Err(Error::TooLarge {
                what: what.to_string(),
                bytes,
                limit,
            });
        }
        charge_alloc_budget(bytes, what)?;
        Ok(self.pool.take(&self.device, bytes))
    }

    /// Compiles (once) and returns the kernel for `spec`.
    pub fn kernel(&self, spec: &KernelSpec) -> Kernel {
        self.pipelines.get(&self.device, spec)
    }

    /// Records one dispatch: `params` go to the uniform at binding 0, then `inputs`
    /// (read-only) and `outputs` (read-write) in binding order. The profiler names it by
    /// its kernel label; [`Gpu::dispatch_named`] gives it an op name and a cost.
    pub fn dispatch(
        &self,
        kernel: &Kernel,
        params: &[u32],
        inputs: &[&wgpu::Buffer],
        outputs: &[&wgpu::Buffer],
        groups: [u32; 3],
    ) {
        self.dispatch_inner(kernel, params, inputs, outputs, &[], groups, None);
    }

    /// [`Gpu::dispatch`] with the op name, FLOPs and bytes the profiler reports.
    pub fn dispatch_named(
        &self,
        kernel: &Kernel,
        params: &[u32],
        inputs: &[&wgpu::Buffer],
        outputs: &[&wgpu::Buffer],
        groups: [u32; 3],
        cost: Cost,
    ) {
        self.dispatch_inner(kernel, params, inputs, outputs, &[], groups, Some(cost));
    }

    /// [`Gpu::dispatch_named`] for a kernel that also reads `texels` (its texture bindings
    /// after the outputs, [`KernelSpec::texels`]).
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch_with_texels(
        &self,
        kernel: &Kernel,
        params: &[u32],
        inputs: &[&wgpu::Buffer],
        outputs: &[&wgpu::Buffer],
        texels: &[&Texels],
        groups: [u32; 3],
        cost: Cost,
    ) {
        self.dispatch_inner(kernel, params, inputs, outputs, texels, groups, Some(cost));
    }

    /// [`Gpu::dispatch_named`] for a kernel that adds a part base (the last of `params`, 0 as
    /// given) to its workgroup id along `axis`: while paced with parts (see [`Parts`]), a
    /// dispatch with more FLOPs than a part runs as several dispatches over consecutive
    /// workgroup ranges, so no single one holds the queue long (a UI frame waits behind at most one part). Results are the
    /// same either way.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch_parts(
        &self,
        kernel: &Kernel,
        params: &[u32],
        inputs: &[&wgpu::Buffer],
        outputs: &[&wgpu::Buffer],
        groups: [u32; 3],
        axis: SplitAxis,
        cost: Cost,
    ) {
        let axis = match axis {
            SplitAxis::X => 0,
            SplitAxis::Z => 2,
        };
        let part_flops = self.pacer.lock().unwrap().part_flops();
        let parts = match part_flops {
            Some(part_flops) => ((cost.flops / part_flops).ceil() as u32).clamp(1, groups[axis].max(1)),
            None => 1,
        };
        let mut params = params.to_vec();
        let base = params.len() - 1;
        for part in 0..parts {
            let bound = |p: u32| (groups[axis] as u64 * p as u64 / parts as u64) as u32;
            let (start, end) = (bound(part), bound(part + 1));
            params[base] = start;
            let mut part_groups = groups;
            part_groups[axis] = end - start;
            let share = (end - start) as f64 / groups[axis].max(1) as f64;
            let part_cost = Cost {
                flops: cost.flops * share,
                bytes: (cost.bytes as f64 * share) as u64,
                ..cost
            };
            self.dispatch_inner(
                kernel,
                &params,
                inputs,
                outputs,
                &[],
                part_groups,
                Some(part_cost),
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn dispatch_inner(
        &self,
        kernel: &Kernel,
        params: &[u32],
        inputs: &[&wgpu::Buffer],
        outputs: &[&wgpu::Buffer],
        texels: &[&Texels],
        groups: [u32; 3],
        cost: Option<Cost>,
    ) {
        assert_eq!(
            (inputs.len(), outputs.len(), texels.len()),
            (kernel.inputs, kernel.outputs, kernel.texels),
            "binding count of {}",
            kernel.label
        );
        if groups.contains(&0) {
            return;
        }
        let mut batch = self.batch.lock().unwrap();
        batch.dispatch(
            &self.device,
            &self.queue,
            kernel,
            params,
            inputs,
            outputs,
            texels,
            groups,
            cost,
        );
        let mut pacer = self.pacer.lock().unwrap();
        // (a batch that starts with this dispatch: what was recorded before has been submitted)
        if pacer.recorded(cost.as_ref(), batch.len() == 1) {
            if batch.defers() {
                // (a page: the slice waits for the job's next readback, see `drain`)
                batch.end_slice(&self.device, &self.queue, pacer.cut());
                return;
            }
            let at = web_time::Instant::now();
            batch.flush(&self.device, &self.queue);
            drop(batch);
            let before = pacer.submitted(at, pacing::completion(&self.queue));
            drop(pacer);
            // (no lock is held while waiting: other threads keep recording and submitting)
            if let Some(flight) = before {
                if let Some(done_at) = host::wait_until(&flight.done, &self.device) {
                    self.pacer.lock().unwrap().finished(&flight, done_at);
                }
            }
        }
    }

    /// Paced submission for a device shared with a UI: with `Some(pacing)`, the thread that
    /// records work submits once what it recorded is estimated to fill `pacing.slice_seconds`
    /// of device time, then waits (natively) for the slice before it, learning from each
    /// finished slice how long recorded work takes; it splits long dispatches as
    /// `pacing.parts` says. So about two slices (one running, one queued) sit ahead of a frame
    /// the UI submits, while the job records the next. `None` (the default) batches freely.
    /// Results do not change, only where submits happen and how work is cut into dispatches.
    ///
    /// In a page a job cannot wait while it records (its code is synchronous and the page has
    /// one thread), so paced slices are kept and submitted by its next readback two on the
    /// device at a time, waiting asynchronously for the older before the next ([`Gpu::drain`]):
    /// the page's frames run and submit between them.
    pub fn set_pacing(&self, pacing: Option<Pacing>) {
        self.pacer.lock().unwrap().set(pacing);
        self.batch
            .lock()
            .unwrap()
            .set_deferring(pacing.is_some() && IN_BROWSER, &self.queue);
    }

    /// The pacing in force ([`Gpu::set_pacing`]; None: batching freely).
    pub fn pacing(&self) -> Option<Pacing> {
        self.pacer.lock().unwrap().pacing()
    }

    /// Submits the slices a paced job in a page kept for later ([`Gpu::set_pacing`]), keeping
    /// [`DEFERRED_IN_FLIGHT`] on the device and waiting (asynchronously) for the oldest before
    /// submitting the next, so a frame the page submits meanwhile queues behind only those;
    /// learns from each how long recorded work takes. One drain runs at a time (the window is
    /// the device's): a second caller waits until it has submitted everything. Returns with
    /// the last slice submitted. Nothing to do natively.
    pub(crate) async fn drain(&self) {
        let running = {
            let mut drain = self.drain.lock().unwrap();
            let running = drain.running.then(|| {
                let (tx, rx) = futures_channel::oneshot::channel();
                drain.waiting.push(tx);
                rx
            });
            drain.running = true;
            running
        };
        if let Some(finished) = running {
            let _ = finished.await;
            return;
        }
        // (ends the drain however this future ends, dropped half-way included)
        let _running = DrainRunning(&self.drain);
        let mut in_flight = std::collections::VecDeque::new();
        loop {
            let next = self.batch.lock().unwrap().pop_deferred();
            let Some(slice) = next else {
                break;
            };
            let at = web_time::Instant::now();
            self.queue.submit(slice.buffers);
            let (done, signal) = pacing::completion_signal(&self.queue);
            in_flight.push_back((pacing::Flight::new(at, slice.estimated_seconds, done), signal));
            if in_flight.len() < DEFERRED_IN_FLIGHT {
                continue;
            }
            let Some((flight, signal)) = in_flight.pop_front() else {
                continue;
            };
            let _ = signal.await;
            if let Some(&done_at) = flight.done.get() {
                self.pacer.lock().unwrap().finished(&flight, done_at);
            }
        }
        // (nothing runs between the empty queue and the end: a page has one thread)
    }

    /// Splits `n` workgroups over x and y so no dimension exceeds the device limit;
    /// kernels rebuild the flat index as `wid.x + wid.y * nwg.x`.
    pub fn grid(&self, n: u32) -> [u32; 3] {
        let max = self.limits.max_compute_workgroups_per_dimension.max(1);
        if n <= max {
            [n, 1, 1]
        } else {
            let y = n.div_ceil(max);
            [n.div_ceil(y), y, 1]
        }
    }

    /// Writes `data` into `dst` after every dispatch recorded so far.
    pub fn write(&self, dst: &wgpu::Buffer, data: &[u8]) {
        let mut batch = self.batch.lock().unwrap();
        let padded;
        let bytes = if data.len() % 4 == 0 {
            data
        } else {
            padded = [data, &[0u8; 3][..4 - data.len() % 4]].concat();
            &padded
        };
        if batch.defers() {
            batch.write_in_order(&self.device, dst, bytes);
        } else {
            batch.flush(&self.device, &self.queue);
            self.queue.write_buffer(dst, 0, bytes);
        }
    }

    /// Records a buffer-to-buffer copy in order with the dispatches.
    pub fn copy(&self, src: &wgpu::Buffer, src_offset: u64, dst: &wgpu::Buffer, dst_offset: u64, bytes: u64) {
        let mut batch = self.batch.lock().unwrap();
        batch.copy(&self.device, src, src_offset, dst, dst_offset, bytes);
    }

    /// Writes `bits` into the first `words` 32-bit words of `buffer` (`shaders/fill.wgsl`, 16
    /// words per invocation): zeros, a constant, or the NaN poison of a fresh tensor.
    pub fn fill_bits(&self, buffer: &wgpu::Buffer, words: u64, bits: u32) {
        // WG and ELEMS of the shader
        const WORKGROUP: u32 = 64;
        const WORDS_PER_INVOCATION: u32 = 16;
        let kernel = self.kernel(&KernelSpec {
            source: crate::shader!("fill"),
            entry: "fill",
            defines: &[],
            inputs: 0,
            outputs: 1,
            texels: 0,
        });
        let groups = self.grid((words as u32).div_ceil(WORKGROUP * WORDS_PER_INVOCATION));
        self.dispatch_named(
            &kernel,
            &[words as u32, bits],
            &[],
            &[buffer],
            groups,
            Cost::memory("fill", 4 * words),
        );
    }

    /// Submits `buffers`, work of the caller's own (the app drawing a tensor into a texture),
    /// after everything recorded so far. In a page, while a paced job's slices wait their turn
    /// ([`Gpu::set_pacing`]), `buffers` joins them and a background drain submits them all in
    /// order (so a frame does not queue behind the job's whole step).
    pub fn submit_in_order(&self, buffers: Vec<wgpu::CommandBuffer>) {
        let mut batch = self.batch.lock().unwrap();
        batch.flush(&self.device, &self.queue);
        if batch.defers() {
            batch.defer(buffers);
            drop(batch);
            host::spawn_drain(self);
        } else {
            self.queue.submit(buffers);
        }
    }

    /// Submits everything recorded so far.
    pub fn flush(&self) {
        let mut batch = self.batch.lock().unwrap();
        batch.flush(&self.device, &self.queue);
        batch.submit_deferred(&self.queue);
    }

    /// Waits, without blocking a browser, until every dispatch recorded so far has run (a
    /// 4-byte readback queued behind them).
    pub async fn finish(&self) -> Result<()> {
        let probe = self.alloc(4, "the finish probe")?;
        self.read(probe.raw(), 4, "the finish probe").await.map(drop)
    }

    /// Returns (and clears) device errors reported since the last call.
    pub fn take_errors(&self) -> Result<()> {
        let mut errors = self.errors.lock().unwrap();
        if errors.is_empty() {
            return Ok(());
        }
        let all = errors.drain(..).collect::<Vec<_>>().join("\n");
        Err(Error::Readback {
            what: "device".into(),
            reason: all,
        })
    }

    /// Reads `bytes` bytes of `src` back after all recorded work (async; never blocks on the web).
    pub async fn read(&self, src: &wgpu::Buffer, bytes: u64, what: &str) -> Result<Vec<u8>> {
        self.start_read(src, bytes, what).finish().await
    }

    /// Starts reading `bytes` bytes of `src` back after all work recorded so far: the copy is
    /// submitted now and the data can be collected later with [`PendingRead::finish`], while
    /// more work is recorded and runs.
    pub fn start_read(&self, src: &wgpu::Buffer, bytes: u64, what: &str) -> PendingRead {
        let mut pending = self.start_reads(&[(src, bytes)], what);
        pending.bytes = bytes;
        pending
    }

    /// Reads the first `bytes` bytes of every buffer of `parts` back in one readback (one
    /// staging buffer, one map, one wait) after all recorded work: a read of many small
    /// tensors costs one device round trip instead of one each.
    pub async fn read_many(&self, parts: &[(&wgpu::Buffer, u64)], what: &str) -> Result<Vec<Vec<u8>>> {
        let all = self.start_reads(parts, what).finish().await?;
        let mut offset = 0;
        Ok(parts
            .iter()
            .map(|&(_, bytes)| {
                let part = all[offset as usize..(offset + bytes) as usize].to_vec();
                offset += bytes.div_ceil(4) * 4;
                part
            })
            .collect())
    }

    /// Copies `parts` back to back (each at a 4-byte offset) into one staging buffer, submitted
    /// now; counts one readback on this thread ([`readbacks_on_this_thread`]).
    fn start_reads(&self, parts: &[(&wgpu::Buffer, u64)], what: &str) -> PendingRead {
        READBACKS.with(|n| n.set(n.get() + 1));
        let size: u64 = parts.iter().map(|&(_, bytes)| bytes.div_ceil(4) * 4).sum();
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgdiff readback"),
            size: size.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let (submission, deferred) = {
            let mut batch = self.batch.lock().unwrap();
            let mut offset = 0;
            for &(src, bytes) in parts {
                let part = bytes.div_ceil(4) * 4;
                batch.copy(&self.device, src, 0, &staging, offset, part);
                offset += part;
            }
            (batch.flush(&self.device, &self.queue), batch.defers())
        };
        // (a deferred copy is mapped once it is submitted: mapping first would fail its submit)
        let mapped = (!deferred).then(|| map_read(&staging));
        PendingRead {
            gpu: self.clone(),
            submission,
            staging,
            bytes: size,
            what: what.to_string(),
            mapped,
        }
    }
}

/// A readback in flight ([`Gpu::start_read`]).
pub struct PendingRead {
    gpu: Gpu,
    /// The submit holding the copy: waiting for it leaves later work running.
    submission: Option<wgpu::SubmissionIndex>,
    staging: wgpu::Buffer,
    bytes: u64,
    what: String,
    /// The staging buffer's map, started (None: once the copy is submitted, in `finish`).
    mapped: Option<Mapped>,
}

/// A buffer's map in progress.
type Mapped = futures_channel::oneshot::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>;

/// Starts mapping `staging` for reading.
fn map_read(staging: &wgpu::Buffer) -> Mapped {
    let (tx, mapped) = futures_channel::oneshot::channel();
    staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    mapped
}

impl PendingRead {
    /// The bytes, once the device has copied them (async; never blocks on the web).
    pub async fn finish(self) -> Result<Vec<u8>> {
        let what = self.what;
        self.gpu.drain().await;
        let mapped = self.mapped.unwrap_or_else(|| map_read(&self.staging));
        host::wait_for(&self.gpu.device, self.submission);
        let mapped = mapped.await.map_err(|_| Error::Readback {
            what: what.clone(),
            reason: "the device was lost before the data arrived".into(),
        })?;
        mapped.map_err(|e| Error::Readback {
            what: what.clone(),
            reason: e.to_string(),
        })?;
        self.gpu.take_errors()?;
        let data = self
            .staging
            .slice(..)
            .get_mapped_range()
            .map_err(|e| Error::Readback {
                what: what.clone(),
                reason: e.to_string(),
            })?[..self.bytes as usize]
            .to_vec();
        self.staging.unmap();
        Ok(data)
    }
}

thread_local! {
    /// Bytes this thread may still allocate on any device, when a budget is set.
    static ALLOC_BUDGET: std::cell::Cell<Option<(u64, u64)>> = const { std::cell::Cell::new(None) };
    /// Readbacks this thread has started on any device.
    static READBACKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many readbacks (device round trips: [`Gpu::read`], [`Gpu::start_read`],
/// [`Gpu::read_many`]) this thread has started: tests count a step's waits with it (per thread,
/// so tests sharing a device do not count each other's).
pub fn readbacks_on_this_thread() -> u64 {
    READBACKS.with(|n| n.get())
}

/// Runs `f` with this thread's device allocations capped at `budget` bytes in all (each
/// [`Gpu::alloc`] counts its size, reused pooled buffers too); an allocation past it fails
/// with [`Error::OverBudget`] before anything is allocated. Used where a file's metadata says
/// how much to build, so a damaged or hostile file cannot make it allocate gigabytes.
pub fn with_alloc_budget<T>(budget: u64, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let outer = ALLOC_BUDGET.with(|b| b.replace(Some((budget, budget))));
    let result = f();
    ALLOC_BUDGET.with(|b| b.set(outer));
    result
}

fn charge_alloc_budget(bytes: u64, what: &str) -> Result<()> {
    ALLOC_BUDGET.with(|b| match b.get() {
        Some((left, budget)) if bytes > left => Err(Error::OverBudget {
            what: what.to_string(),
            bytes,
            budget,
        }),
        Some((left, budget)) => {
            b.set(Some((left - bytes, budget)));
            Ok(())
        }
        None => Ok(()),
    })
}
