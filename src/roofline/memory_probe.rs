//! The memory probes of the device's roof: storage reads (lane-contiguous vec4s streamed or
//! cached, the implicit-GEMM conv's gather), workgroup memory, an empty dispatch, a submit.

use crate::gpu::{Kernel, KernelSpec, PooledBuffer};
use crate::{shader, Error, Gpu, Result};

/// Invocations of a timed read probe (1024 workgroups of 64).
const INVOCATIONS: u32 = 65536;
/// The streamed probe's buffer: 64 MiB of vec4s (past the CPU's caches), or the largest
/// power of two the device binds.
const STREAMED_BYTES: u64 = 64 << 20;
/// The cached probes' buffer: 256 KiB (within a CPU core's L2, a GPU's L2).
const CACHED_BYTES: u64 = 256 << 10;
/// Empty dispatches of the dispatch probe's run, and dispatch + submit pairs of the submit's.
const DISPATCHES: u32 = 256;
const SUBMITS: u32 = 64;

/// What one run of a probe does: bytes read, or a count of dispatches (or submits).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Work {
    Bytes(f64),
    Each(f64),
}

/// A read probe: its entry in shaders/memory_probe.wgsl (vec4 elements) or
/// shaders/gather_probe.wgsl (f32), the bytes of its buffer, its rounds (of 8 reads per
/// invocation) and stride (see the shaders).
struct Layout {
    variant: &'static str,
    entry: &'static str,
    bytes: u64,
    rounds: u32,
    stride: u32,
}

const LAYOUTS: [Layout; 4] = [
    // One sweep of the buffer: 8 rounds x 8 reads x 65536 invocations x 16 B = 64 MiB.
    Layout {
        variant: "read-vec4",
        entry: "read_vec4",
        bytes: STREAMED_BYTES,
        rounds: 8,
        stride: INVOCATIONS,
    },
    // Lanes consecutive, each read 7 workgroups further on, wrapping within 256 KiB.
    Layout {
        variant: "read-vec4-cached",
        entry: "read_vec4",
        bytes: CACHED_BYTES,
        rounds: 16,
        stride: 7 * 64,
    },
    // 16 pixels per lane at a uniform kernel offset that moves 35 elements a read (a 3x3
    // window's row of a padded 32-wide image is 34).
    Layout {
        variant: "gather-f32",
        entry: "read_gather",
        bytes: CACHED_BYTES,
        rounds: 4,
        stride: 35,
    },
    Layout {
        variant: "workgroup-vec4",
        entry: "read_workgroup",
        bytes: CACHED_BYTES,
        rounds: 16,
        stride: 0,
    },
];

/// Bytes one invocation reads per read: a vec4, or the gather's 16 f32s.
fn bytes_per_read(entry: &str) -> u64 {
    match entry {
        "read_gather" => 64,
        _ => 16,
    }
}

/// A memory probe's kernel and buffers, ready to dispatch.
pub struct MemoryProbe {
    pub variant: &'static str,
    /// What the run covers, for the table.
    pub shape: String,
    pub work: Work,
    kernel: Kernel,
    data: PooledBuffer,
    sums: PooledBuffer,
    params: [u32; 3],
    workgroups: u32,
    /// Dispatches per run, and whether each is submitted alone.
    repeat: u32,
    submit_each: bool,
}

impl MemoryProbe {
    /// Records one run (the submit probe also submits).
    pub fn dispatch(&self, gpu: &Gpu) {
        for _ in 0..self.repeat {
            gpu.dispatch(
                &self.kernel,
                &self.params,
                &[self.data.raw()],
                &[self.sums.raw()],
                [self.workgroups, 1, 1],
            );
            if self.submit_each {
                gpu.flush();
            }
        }
    }
}

/// Bytes of one element of the probe `entry`'s buffer.
fn element_bytes(entry: &str) -> u64 {
    match entry {
        "read_gather" => 4,
        _ => 16,
    }
}

fn kernel(gpu: &Gpu, entry: &str) -> Kernel {
    gpu.kernel(&KernelSpec {
        source: match entry {
            "read_gather" => shader!("gather_probe"),
            _ => shader!("memory_probe"),
        },
        entry,
        defines: &[],
        inputs: 1,
        outputs: 1,
        texels: 0,
    })
}

/// The largest power of two <= `bytes` and <= what the device binds.
fn bound_bytes(gpu: &Gpu, bytes: u64) -> u64 {
    let cap = bytes.min(gpu.max_binding_bytes());
    1 << (63 - cap.leading_zeros())
}

/// The memory probes' names, in the table's order: the four reads, then the empty dispatch and
/// the submit.
pub const VARIANTS: [&str; 6] = [
    "read-vec4",
    "read-vec4-cached",
    "gather-f32",
    "workgroup-vec4",
    "dispatch",
    "submit",
];

/// Every memory probe, in the table's order.
pub fn probes(gpu: &Gpu) -> Result<Vec<MemoryProbe>> {
    VARIANTS.iter().map(|v| probe(gpu, v)).collect()
}

/// The memory probe `variant` (one of [`VARIANTS`]); a read probe's buffer holds 1.0 everywhere.
pub fn probe(gpu: &Gpu, variant: &str) -> Result<MemoryProbe> {
    if let Some(l) = LAYOUTS.iter().find(|l| l.variant == variant) {
        let bytes = bound_bytes(gpu, l.bytes);
        let data = gpu.alloc(bytes, "memory probe data")?;
        gpu.fill_bits(data.raw(), bytes / 4, 1.0f32.to_bits());
        let reads = u64::from(INVOCATIONS) * u64::from(l.rounds) * 8;
        let read_bytes = reads * bytes_per_read(l.entry);
        return Ok(MemoryProbe {
            variant: l.variant,
            shape: format!("{} MiB read from {} KiB", read_bytes >> 20, bytes >> 10),
            work: Work::Bytes(read_bytes as f64),
            kernel: kernel(gpu, l.entry),
            sums: gpu.alloc(4 * u64::from(INVOCATIONS), "memory probe sums")?,
            params: [l.rounds, l.stride, (bytes / element_bytes(l.entry)) as u32 - 1],
            data,
            workgroups: INVOCATIONS / 64,
            repeat: 1,
            submit_each: false,
        });
    }
    let (variant, count, submit_each) = match variant {
        "dispatch" => (VARIANTS[4], DISPATCHES, false),
        "submit" => (VARIANTS[5], SUBMITS, true),
        other => {
            return Err(Error::Config(format!(
                "no memory probe {other}; the probes are {}",
                VARIANTS.join(", ")
            )))
        }
    };
    Ok(MemoryProbe {
        variant,
        shape: match submit_each {
            false => format!("{count} empty dispatches, one submit"),
            true => format!("{count} x (empty dispatch + submit)"),
        },
        work: Work::Each(f64::from(count)),
        kernel: kernel(gpu, "empty"),
        data: gpu.alloc(16, "memory probe data")?,
        sums: gpu.alloc(16, "memory probe sums")?,
        params: [0; 3],
        workgroups: 1,
        repeat: count,
        submit_each,
    })
}

/// The sums the read probe `entry` stores after `rounds` rounds over `data` (its length a power
/// of two; vec4s for `read_vec4` and `read_workgroup`, f32s for `read_gather`), one per
/// invocation of `workgroups` workgroups: what the tests check against a CPU reference.
pub async fn probe_sums(
    gpu: &Gpu,
    entry: &str,
    data: &[f32],
    rounds: u32,
    stride: u32,
    workgroups: u32,
) -> Result<Vec<f32>> {
    let elements = 4 * data.len() / element_bytes(entry) as usize;
    if !elements.is_power_of_two() {
        return Err(Error::Config(format!(
            "memory probe {entry}: its data must hold a power of two elements, not {elements}"
        )));
    }
    let buffer = gpu.alloc(4 * data.len() as u64, "memory probe data")?;
    gpu.write(buffer.raw(), bytemuck::cast_slice(data));
    let invocations = 64 * workgroups;
    let sums = gpu.alloc(4 * u64::from(invocations), "memory probe sums")?;
    gpu.dispatch(
        &kernel(gpu, entry),
        &[rounds, stride, elements as u32 - 1],
        &[buffer.raw()],
        &[sums.raw()],
        [workgroups, 1, 1],
    );
    let bytes = gpu
        .read(sums.raw(), 4 * u64::from(invocations), "memory probe sums")
        .await?;
    Ok(bytemuck::pod_collect_to_vec(&bytes))
}
