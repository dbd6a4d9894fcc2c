//! Buffer pool: storage buffers are reused (of their size class, or up to twice it) instead of
//! being re-created, and the pool keeps statistics of live and pooled bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Usage every engine storage buffer has.
pub const STORAGE_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// Counters describing the pool's memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes held by buffers currently owned by tensors.
    pub live_bytes: u64,
    /// Bytes held by idle buffers waiting for reuse.
    pub pooled_bytes: u64,
    /// Highest `live_bytes` seen.
    pub peak_live_bytes: u64,
    /// Highest device memory the pool held at once (live plus pooled bytes).
    pub peak_held_bytes: u64,
    /// Buffers created from the device (pool misses).
    pub created: u64,
    /// Buffers served from the pool (hits).
    pub reused: u64,
}

#[derive(Default)]
struct PoolState {
    free: HashMap<u64, Vec<wgpu::Buffer>>,
    stats: PoolStats,
}

impl PoolState {
    /// An idle buffer of `class` bytes, else the smallest idle one of at most twice that.
    fn take_idle(&mut self, class: u64) -> Option<wgpu::Buffer> {
        if let Some(b) = self.free.get_mut(&class).and_then(Vec::pop) {
            return Some(b);
        }
        let (&fit, _) = self
            .free
            .iter()
            .filter(|(&c, idle)| c > class && c <= 2 * class && !idle.is_empty())
            .min_by_key(|(&c, _)| c)?;
        self.free.get_mut(&fit).and_then(Vec::pop)
    }
}

/// Size-classed free lists of storage buffers.
#[derive(Clone, Default)]
pub struct BufferPool {
    state: Arc<Mutex<PoolState>>,
}

/// Rounds `bytes` up to its size class: multiples of 256 bytes up to 4 KiB, then eight
/// classes per power of two (at most 12.5% waste).
pub fn size_class(bytes: u64) -> u64 {
    let bytes = bytes.max(16);
    if bytes <= 4096 {
        return bytes.div_ceil(256) * 256;
    }
    let pow = 63 - bytes.leading_zeros() as u64; // 2^pow <= bytes
    let step = 1u64 << (pow - 3);
    bytes.div_ceil(step) * step
}

impl BufferPool {
    /// A buffer of at least `bytes` bytes, reused when an idle one of its class, or else of at
    /// most twice its class, is free (its `size()` is then the larger class).
    pub fn take(&self, device: &wgpu::Device, bytes: u64) -> PooledBuffer {
        let mut class = size_class(bytes);
        let mut st = self.state.lock().unwrap();
        let reused = st.take_idle(class);
        let buffer = match reused {
            Some(b) => {
                class = b.size();
                st.stats.reused += 1;
                st.stats.pooled_bytes -= class;
                b
            }
            None => {
                st.stats.created += 1;
                let held = st.stats.live_bytes + st.stats.pooled_bytes + class;
                st.stats.peak_held_bytes = st.stats.peak_held_bytes.max(held);
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("wgdiff tensor"),
                    size: class,
                    usage: STORAGE_USAGE,
                    mapped_at_creation: false,
                })
            }
        };
        st.stats.live_bytes += class;
        st.stats.peak_live_bytes = st.stats.peak_live_bytes.max(st.stats.live_bytes);
        PooledBuffer {
            buffer: Some(buffer),
            pool: self.clone(),
        }
    }

    fn give_back(&self, buffer: wgpu::Buffer) {
        let class = buffer.size();
        let mut st = self.state.lock().unwrap();
        st.stats.live_bytes -= class;
        st.stats.pooled_bytes += class;
        st.free.entry(class).or_default().push(buffer);
    }

    /// Current counters.
    pub fn stats(&self) -> PoolStats {
        self.state.lock().unwrap().stats
    }

    /// Restarts both peaks from the bytes held now, so the next [`BufferPool::stats`] shows the
    /// peak of the work in between (one training step, say).
    pub fn reset_peaks(&self) {
        let mut st = self.state.lock().unwrap();
        st.stats.peak_live_bytes = st.stats.live_bytes;
        st.stats.peak_held_bytes = st.stats.live_bytes + st.stats.pooled_bytes;
    }

    /// Drops every idle buffer: wgpu frees each once no recorded or submitted work uses it
    /// (an idle buffer may still be read by work another thread has not submitted yet).
    pub fn trim(&self) {
        let mut st = self.state.lock().unwrap();
        st.free.clear();
        st.stats.pooled_bytes = 0;
    }
}

/// A storage buffer that returns to its pool when dropped.
pub struct PooledBuffer {
    buffer: Option<wgpu::Buffer>,
    pool: BufferPool,
}

impl PooledBuffer {
    /// The underlying wgpu buffer.
    pub fn raw(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("buffer present until drop")
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            self.pool.give_back(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_cover_request_with_bounded_waste() {
        for bytes in [
            1u64,
            16,
            255,
            256,
            257,
            4096,
            4097,
            5000,
            1 << 20,
            (1 << 20) + 1,
            3_000_000,
        ] {
            let c = size_class(bytes);
            assert!(c >= bytes, "{bytes} -> {c}");
            assert!(
                c as f64 <= (bytes.max(256) as f64) * 1.125 + 256.0,
                "{bytes} -> {c}"
            );
            assert_eq!(c % 4, 0);
        }
    }
}
