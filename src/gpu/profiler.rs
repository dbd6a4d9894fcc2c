//! Per-dispatch profiler: device timestamps before and after every dispatch (inside a pass,
//! or a pass per dispatch; without timestamps, a sync and the wall clock), summarised per op.

use super::{Cost, Gpu, Kernel, Pacing, Roof};
use crate::{Error, Result};
use futures_channel::oneshot;
use serde::Serialize;
use std::collections::HashMap;
use web_time::Instant;

/// How durations were measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Timing {
    /// Timestamps the device writes before and after each dispatch.
    Device,
    /// Each dispatch in a pass of its own whose beginning and end the device timestamps (the
    /// adapter has TIMESTAMP_QUERY but not inside passes: a browser's WebGPU); includes the
    /// pass's own cost.
    Pass,
    /// Wall clock around each dispatch with a sync before and after (the adapter lacks
    /// TIMESTAMP_QUERY_INSIDE_PASSES); includes submit and wake-up overhead.
    Cpu,
}

/// One profiled dispatch.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Record {
    pub name: String,
    pub kernel: String,
    /// Start on the profile's clock (device ticks or process time), arbitrary origin.
    pub start_ns: f64,
    pub duration_ns: f64,
    pub flops: f64,
    pub bytes: u64,
}

/// Everything recorded between [`Profiler::start`] and [`Profiler::stop`].
#[derive(Clone, Debug)]
pub struct Profile {
    pub timing: Timing,
    /// Dispatches in submission order.
    pub records: Vec<Record>,
    /// Wall time from start (idle device) to stop (idle device); None on the web.
    pub wall_ns: Option<f64>,
    /// The device's roof, once measured: rows then say what bounds each op and how near it is.
    pub roof: Option<Roof>,
}

/// One row of the op table: every dispatch of one (op, kernel) pair.
#[derive(Clone, Debug, Serialize)]
pub struct OpRow {
    pub op: String,
    pub kernel: String,
    pub calls: usize,
    pub total_ms: f64,
    pub mean_ms: f64,
    /// Share of the summed op time, in percent.
    pub device_pct: f64,
    pub gflop: f64,
    pub gb: f64,
    /// Arithmetic intensity (FLOP per byte moved); None without counted FLOPs or bytes.
    pub flop_per_byte: Option<f64>,
    pub gflops: Option<f64>,
    pub gbps: Option<f64>,
    /// With a roof: what bounds the op there ("FMA", "memory", "dispatch"), the least total
    /// time that allows, and that time as a percentage of the measured one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of_bound_pct: Option<f64>,
}

/// Handle returned by [`Gpu::profiler`].
pub struct Profiler<'a> {
    gpu: &'a Gpu,
}

impl Gpu {
    /// The per-dispatch profiler (off until [`Profiler::start`]; costs nothing while off).
    pub fn profiler(&self) -> Profiler<'_> {
        Profiler { gpu: self }
    }
}

impl Profiler<'_> {
    /// How this device's dispatches would be timed.
    pub fn timing(&self) -> Timing {
        let inside = wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES;
        if self.gpu.features.contains(inside) {
            Timing::Device
        } else if self.gpu.features.contains(wgpu::Features::TIMESTAMP_QUERY) {
            Timing::Pass
        } else {
            Timing::Cpu
        }
    }

    /// True between `start` and `stop`.
    pub fn is_on(&self) -> bool {
        self.gpu.batch.lock().unwrap().profile.is_some()
    }

    /// Starts recording every dispatch from here on (work recorded earlier is submitted
    /// first and not profiled; natively the device is also waited for). Pacing
    /// ([`Gpu::set_pacing`], a UI's share of the device) is off until `stop`, so a profiled
    /// step runs in the dispatches and submissions it runs in without a UI (`wgdiff profile`'s).
    pub fn start(&self) -> Result<()> {
        let timing = self.timing();
        if timing == Timing::Cpu && !super::host::CPU_TIMING {
            return Err(Error::Profiler(
                "profiling on the web needs the TIMESTAMP_QUERY feature (timestamp-query), which this adapter lacks"
                    .into(),
            ));
        }
        let gpu = self.gpu;
        if self.is_on() {
            return Err(Error::Profiler(
                "the profiler is already running; call stop() first".into(),
            ));
        }
        let paused = gpu.pacing();
        gpu.set_pacing(None);
        let mut batch = gpu.batch.lock().unwrap();
        batch.flush(&gpu.device, &gpu.queue);
        super::host::wait_all(&gpu.device);
        batch.profile = Some(Recording::new(&gpu.device, &gpu.queue, timing, paused));
        Ok(())
    }

    /// Blocking [`Profiler::stop`] for native programs and tests.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn stop_blocking(&self) -> Result<Profile> {
        pollster::block_on(self.stop())
    }

    /// Stops recording, waits for the outstanding timestamps and returns the profile.
    pub async fn stop(&self) -> Result<Profile> {
        let gpu = self.gpu;
        let recording = {
            let mut batch = gpu.batch.lock().unwrap();
            batch.flush(&gpu.device, &gpu.queue);
            batch.profile.take()
        };
        let recording = recording
            .ok_or_else(|| Error::Profiler("stop() was called but the profiler was not started".into()))?;
        super::host::wait_all(&gpu.device);
        gpu.set_pacing(recording.paused_pacing);
        let wall_ns = super::host::wall_ns(recording.started);
        gpu.take_errors()?;
        recording.finish(wall_ns).await
    }
}

/// A dispatch whose timestamps have not been read yet.
struct Meta {
    name: Option<&'static str>,
    kernel: std::sync::Arc<str>,
    flops: f64,
    bytes: u64,
}

impl Meta {
    fn new(kernel: &Kernel, cost: Option<Cost>) -> Meta {
        Meta {
            name: cost.map(|c| c.name),
            kernel: kernel.label.clone(),
            flops: cost.map_or(0.0, |c| c.flops),
            bytes: cost.map_or(0, |c| c.bytes),
        }
    }

    fn record(self, start_ns: f64, duration_ns: f64) -> Record {
        Record {
            name: self.name.map_or_else(|| self.kernel.to_string(), str::to_string),
            kernel: self.kernel.to_string(),
            start_ns,
            duration_ns,
            flops: self.flops,
            bytes: self.bytes,
        }
    }
}

/// Timestamps of one batch, copied to a mappable buffer and waiting for the map.
struct Pending {
    staging: wgpu::Buffer,
    metas: Vec<Meta>,
    mapped: oneshot::Receiver<Result<(), wgpu::BufferAsyncError>>,
}

/// Timestamps of one batch, resolved in its encoder but not submitted yet.
pub(super) struct Resolved {
    staging: wgpu::Buffer,
    metas: Vec<Meta>,
}

/// Device-timestamp state: one query set reused by every batch (the batch is flushed
/// after at most `MAX_DISPATCHES` dispatches, so two queries per dispatch always fit).
struct Queries {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    period_ns: f64,
}

/// A running profiler's state; lives in the batch so timestamps follow dispatch order.
pub(super) struct Recording {
    timing: Timing,
    queries: Option<Queries>,
    /// Dispatches timed in the current batch.
    open: Vec<Meta>,
    pending: Vec<Pending>,
    records: Vec<Record>,
    /// First readback failure seen while draining; reported by `stop`.
    failure: Option<String>,
    started: Instant,
    /// The pacing `start` turned off, restored by `stop`.
    paused_pacing: Option<Pacing>,
}

const QUERIES: u32 = 2 * super::MAX_DISPATCHES;

impl Recording {
    fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        timing: Timing,
        paused_pacing: Option<Pacing>,
    ) -> Recording {
        let queries = (timing != Timing::Cpu).then(|| Queries {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("wgdiff profiler"),
                ty: wgpu::QueryType::Timestamp,
                count: QUERIES,
            }),
            resolve: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wgdiff profiler resolve"),
                size: QUERIES as u64 * wgpu::QUERY_SIZE as u64,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            period_ns: queue.get_timestamp_period() as f64,
        });
        Recording {
            timing,
            queries,
            open: Vec::new(),
            pending: Vec::new(),
            records: Vec::new(),
            failure: None,
            started: Instant::now(),
            paused_pacing,
        }
    }

    /// True when dispatches are timed by syncing around each one.
    pub(super) fn on_cpu(&self) -> bool {
        self.queries.is_none()
    }

    /// Pass timing: the timestamps the next dispatch's own pass writes at its beginning and
    /// end (None for the other timings).
    pub(super) fn pass_writes(&self) -> Option<wgpu::ComputePassTimestampWrites<'_>> {
        let q = self.queries.as_ref().filter(|_| self.timing == Timing::Pass)?;
        let first = 2 * self.open.len() as u32;
        Some(wgpu::ComputePassTimestampWrites {
            query_set: &q.set,
            beginning_of_pass_write_index: Some(first),
            end_of_pass_write_index: Some(first + 1),
        })
    }

    /// Device timing: the timestamp before a dispatch.
    pub(super) fn begin(&self, pass: &mut wgpu::ComputePass) {
        if let (Some(q), Timing::Device) = (&self.queries, self.timing) {
            pass.write_timestamp(&q.set, 2 * self.open.len() as u32);
        }
    }

    /// Device or pass timing: the timestamp after a dispatch (pass timing: written when its
    /// pass ends), and what the dispatch was.
    pub(super) fn end(&mut self, pass: &mut wgpu::ComputePass, kernel: &Kernel, cost: Option<Cost>) {
        if let Some(q) = &self.queries {
            if self.timing == Timing::Device {
                pass.write_timestamp(&q.set, 2 * self.open.len() as u32 + 1);
            }
            self.open.push(Meta::new(kernel, cost));
        }
    }

    /// CPU timing: one dispatch that ran alone from `since` until now.
    pub(super) fn timed_on_cpu(&mut self, kernel: &Kernel, cost: Option<Cost>, since: Instant) {
        use std::sync::OnceLock;
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        let epoch = *EPOCH.get_or_init(Instant::now);
        let start_ns = since.saturating_duration_since(epoch).as_nanos() as f64;
        let duration_ns = since.elapsed().as_nanos() as f64;
        self.records
            .push(Meta::new(kernel, cost).record(start_ns, duration_ns));
    }

    /// Before a batch is submitted: copies its timestamps to a mappable buffer.
    pub(super) fn resolve(
        &mut self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
    ) -> Option<Resolved> {
        let q = self.queries.as_ref()?;
        if self.open.is_empty() {
            return None;
        }
        let count = 2 * self.open.len() as u32;
        let bytes = count as u64 * wgpu::QUERY_SIZE as u64;
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgdiff profiler readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        encoder.resolve_query_set(&q.set, 0..count, &q.resolve, 0);
        encoder.copy_buffer_to_buffer(&q.resolve, 0, &staging, 0, bytes);
        Some(Resolved {
            staging,
            metas: std::mem::take(&mut self.open),
        })
    }

    /// After the batch holding `resolved` was submitted: starts mapping it, and decodes
    /// earlier batches whose maps have completed.
    pub(super) fn submitted(&mut self, resolved: Resolved) {
        let (tx, rx) = oneshot::channel();
        resolved
            .staging
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send(r);
            });
        self.pending.push(Pending {
            staging: resolved.staging,
            metas: resolved.metas,
            mapped: rx,
        });
        while let Some(Ok(Some(mapped))) = self.pending.first_mut().map(|p| p.mapped.try_recv()) {
            let p = self.pending.remove(0);
            let decoded = match mapped {
                Ok(()) => self.decode(p.staging, p.metas).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = decoded {
                self.failure.get_or_insert(e);
            }
        }
    }

    fn decode(&mut self, staging: wgpu::Buffer, metas: Vec<Meta>) -> Result<()> {
        let period = self.queries.as_ref().map_or(1.0, |q| q.period_ns);
        let view = staging
            .slice(..)
            .get_mapped_range()
            .map_err(|e| Error::Readback {
                what: "profiler timestamps".into(),
                reason: e.to_string(),
            })?;
        let ticks: Vec<u64> = view
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        drop(view);
        staging.unmap();
        for (meta, pair) in metas.into_iter().zip(ticks.chunks_exact(2)) {
            let duration = pair[1].saturating_sub(pair[0]) as f64 * period;
            self.records.push(meta.record(pair[0] as f64 * period, duration));
        }
        Ok(())
    }

    /// Waits for every outstanding map and builds the profile.
    async fn finish(mut self, wall_ns: Option<f64>) -> Result<Profile> {
        for p in std::mem::take(&mut self.pending) {
            let mapped = p.mapped.await.map_err(|_| Error::Readback {
                what: "profiler timestamps".into(),
                reason: "the device was lost before the data arrived".into(),
            })?;
            mapped.map_err(|e| Error::Readback {
                what: "profiler timestamps".into(),
                reason: e.to_string(),
            })?;
            self.decode(p.staging, p.metas)?;
        }
        if let Some(reason) = self.failure {
            return Err(Error::Readback {
                what: "profiler timestamps".into(),
                reason,
            });
        }
        Ok(Profile {
            roof: None,
            timing: self.timing,
            records: self.records,
            wall_ns,
        })
    }
}

impl Profile {
    /// Sum of every dispatch's duration.
    pub fn op_ns(&self) -> f64 {
        self.records.iter().map(|r| r.duration_ns).sum()
    }

    /// Time from the first dispatch's start to the last one's end (the op sum plus the
    /// device's gaps between dispatches); 0 without records. Only meaningful within one
    /// profile: merged steps have idle time between them.
    pub fn span_ns(&self) -> f64 {
        let first = self
            .records
            .iter()
            .map(|r| r.start_ns)
            .fold(f64::INFINITY, f64::min);
        let last = self
            .records
            .iter()
            .map(|r| r.start_ns + r.duration_ns)
            .fold(f64::NEG_INFINITY, f64::max);
        (last - first).max(0.0)
    }

    /// The summed op time as a share of the wall time (0 to 1; None without a wall time).
    pub fn op_share_of_wall(&self) -> Option<f64> {
        self.wall_ns.filter(|w| *w > 0.0).map(|wall| self.op_ns() / wall)
    }

    /// One line on where the step's time went: its wall time (synced before and after), the
    /// sum of its op times and their share of the wall, first op start to last op end, and
    /// the dispatches (what `wgdiff profile` prints per step and the app's profile view shows).
    pub fn time_line(&self) -> String {
        let ops_ms = self.op_ns() * 1e-6;
        let wall = match (self.wall_ns, self.op_share_of_wall()) {
            (Some(wall), Some(share)) => format!(
                "wall {:.3} ms (synced before and after); sum of op times {ops_ms:.3} ms ({:.0}% of wall)",
                wall * 1e-6,
                share * 100.0
            ),
            _ => format!("sum of op times {ops_ms:.3} ms (no wall time here)"),
        };
        format!(
            "{wall}; first op start to last op end {:.3} ms; {} dispatches",
            self.span_ns() * 1e-6,
            self.records.len()
        )
    }

    /// Appends a later profile (records in order; wall times add up).
    pub fn extend(&mut self, later: Profile) {
        self.records.extend(later.records);
        self.wall_ns = self.wall_ns.zip(later.wall_ns).map(|(a, b)| a + b);
    }

    /// One row per (op, kernel), by total time, longest first.
    pub fn rows(&self) -> Vec<OpRow> {
        let mut groups: HashMap<(&str, &str), (usize, f64, f64, u64)> = HashMap::new();
        for r in &self.records {
            let g = groups.entry((&r.name, &r.kernel)).or_default();
            *g = (g.0 + 1, g.1 + r.duration_ns, g.2 + r.flops, g.3 + r.bytes);
        }
        let all_ns = self.op_ns().max(f64::MIN_POSITIVE);
        let mut rows: Vec<OpRow> = groups
            .into_iter()
            .map(|((op, kernel), (calls, ns, flops, bytes))| {
                let secs = ns * 1e-9;
                let bytes = bytes as f64;
                let bound = self.roof.map(|roof| roof.bound(flops, bytes, calls));
                OpRow {
                    op: op.to_string(),
                    kernel: kernel.to_string(),
                    calls,
                    total_ms: ns * 1e-6,
                    mean_ms: ns * 1e-6 / calls as f64,
                    device_pct: 100.0 * ns / all_ns,
                    gflop: flops * 1e-9,
                    gb: bytes * 1e-9,
                    flop_per_byte: (flops > 0.0 && bytes > 0.0).then(|| flops / bytes),
                    gflops: (flops > 0.0 && secs > 0.0).then(|| flops * 1e-9 / secs),
                    gbps: (bytes > 0.0 && secs > 0.0).then(|| bytes * 1e-9 / secs),
                    bound: bound.map(|(_, what)| what),
                    bound_ms: bound.map(|(s, _)| s * 1e3),
                    of_bound_pct: bound.filter(|_| secs > 0.0).map(|(s, _)| 100.0 * s / secs),
                }
            })
            .collect();
        rows.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms).then_with(|| a.op.cmp(&b.op)));
        rows
    }

    /// The op table, then how times were measured and the wall time against the op sum.
    pub fn table(&self) -> String {
        let rows = self.rows();
        let op_w = rows.iter().map(|r| r.op.len()).chain([2]).max().unwrap_or(2);
        let kernel_w = rows.iter().map(|r| r.kernel.len()).chain([6]).max().unwrap_or(6);
        let opt = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| format!("{v:.prec$}"));
        let roofed = self.roof.is_some();
        let roof_head = match roofed {
            true => format!(" {:>8} {:>9} {:>8}", "bound", "bound ms", "of bound"),
            false => String::new(),
        };
        let mut out = format!(
            "{:<op_w$}  {:<kernel_w$} {:>6} {:>10} {:>9} {:>8} {:>8} {:>8} {:>7} {:>8} {:>7}{roof_head}\n",
            "op",
            "kernel",
            "calls",
            "total ms",
            "mean ms",
            "device%",
            "GFLOP",
            "GB",
            "FLOP/B",
            "GFLOP/s",
            "GB/s"
        );
        for r in &rows {
            let roof_cells = match roofed {
                true => format!(
                    " {:>8} {:>9} {:>7}%",
                    r.bound.unwrap_or("-"),
                    opt(r.bound_ms, 3),
                    opt(r.of_bound_pct, 1)
                ),
                false => String::new(),
            };
            out += &format!(
                "{:<op_w$}  {:<kernel_w$} {:>6} {:>10.3} {:>9.4} {:>7.1}% {:>8} {:>8} {:>7} {:>8} {:>7}{roof_cells}\n",
                r.op,
                r.kernel,
                r.calls,
                r.total_ms,
                r.mean_ms,
                r.device_pct,
                opt((r.gflop > 0.0).then_some(r.gflop), 4),
                opt((r.gb > 0.0).then_some(r.gb), 5),
                opt(r.flop_per_byte, 1),
                opt(r.gflops, 2),
                opt(r.gbps, 2),
            );
        }
        if let Some(roof) = &self.roof {
            out += &format!(
                "bound: the least time the device's roof allows ({:.1} GFLOP/s of f32 FMAs, {:.2} GB/s of \
                 storage reads, {:.1} us a dispatch; wgdiff bench mac), the largest of the three; of bound: \
                 that time as a share of the measured one (over 100%: the op moved its bytes, reads and \
                 writes counted together, faster than the probe reads them; the probe times reads only)\n",
                roof.gflops, roof.gbytes_per_s, roof.dispatch_us
            );
        }
        out += match self.timing {
            Timing::Device => "timing: device timestamps before and after every dispatch\n",
            Timing::Pass => {
                "timing: device timestamps at the beginning and end of a pass per dispatch (no \
                 TIMESTAMP_QUERY_INSIDE_PASSES on this adapter): times include each pass's cost\n"
            }
            Timing::Cpu => {
                "timing: CPU wall clock per dispatch (no TIMESTAMP_QUERY_INSIDE_PASSES on this adapter): \
                 each dispatch is synced alone, so times include submit overhead\n"
            }
        };
        let ops_ms = self.op_ns() * 1e-6;
        out += &format!(
            "{} dispatches; sum of op times {ops_ms:.3} ms",
            self.records.len()
        );
        if let Some(wall) = self.wall_ns {
            let wall_ms = wall * 1e-6;
            out += &format!(
                "; wall time of the profiled region {wall_ms:.3} ms (ops {:.0}%)",
                100.0 * ops_ms / wall_ms.max(f64::MIN_POSITIVE)
            );
        }
        out + "\n"
    }

    /// One JSON object per op row, one per line.
    pub fn json_lines(&self) -> String {
        self.rows()
            .iter()
            .map(|r| serde_json::to_string(r).expect("op rows serialise"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The dispatches in Chrome trace format (chrome://tracing, Perfetto): one complete
    /// ("X") event each, times in microseconds from the first dispatch.
    pub fn chrome_trace(&self) -> String {
        let origin = self
            .records
            .iter()
            .map(|r| r.start_ns)
            .fold(f64::INFINITY, f64::min);
        let events: Vec<serde_json::Value> = self
            .records
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name,
                    "cat": "dispatch",
                    "ph": "X",
                    "ts": (r.start_ns - origin) * 1e-3,
                    "dur": r.duration_ns * 1e-3,
                    "pid": 0,
                    "tid": 0,
                    "args": { "kernel": r.kernel, "flops": r.flops, "bytes": r.bytes },
                })
            })
            .collect();
        serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" }).to_string()
    }
}
