//! The gradient all-reduce of a data-parallel step: each replica's loss and gradients are
//! packed on its device into buckets, read back, summed with weights (then over processes),
//! and written back as every replica's new gradients.

use super::Collective;
use crate::{DType, Error, Result, Tensor};

/// Most gradient bytes one bucket holds: few readbacks and MPI calls per step, and far below
/// any device's storage-binding limit. A larger single gradient gets a bucket of its own.
pub const BUCKET_BYTES: usize = 4 << 20;

/// One replica's part of a step: its parameters (with gradients after backward), its loss
/// and its weight in the global mean (its rows / the global batch).
pub struct ReplicaGradients<'a> {
    pub params: &'a [Tensor],
    pub loss: &'a Tensor,
    pub weight: f32,
}

/// What one all-reduce did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReduceStats {
    /// The global loss (the weighted sum of the replicas' losses over every process).
    pub loss: f32,
    /// True when every averaged gradient is finite (an f16 step that overflowed is not).
    pub finite: bool,
    /// Seconds from the end of the slowest backward to the new gradients being recorded.
    pub seconds: f64,
    /// Gradient bytes each replica sent (f32).
    pub bytes: u64,
}

/// One bucket: a run of (parameter index, first value in the bucket); slot 0 of the first
/// bucket holds the loss.
struct Bucket {
    len: usize,
    parts: Vec<(usize, usize)>,
}

/// Parameters whose gradient exists, latest layers first (the order backward finishes them),
/// cut into buckets of at most [`BUCKET_BYTES`].
fn buckets(params: &[Tensor]) -> Vec<Bucket> {
    let cap = BUCKET_BYTES / 4;
    let mut out = vec![Bucket {
        len: 1,
        parts: Vec::new(),
    }];
    for (i, p) in params.iter().enumerate().rev() {
        if p.grad().is_none() {
            continue;
        }
        let last = out.last_mut().expect("one bucket at least");
        if last.len > 1 && last.len + p.numel() > cap {
            out.push(Bucket {
                len: 0,
                parts: Vec::new(),
            });
        }
        let last = out.last_mut().expect("one bucket at least");
        last.parts.push((i, last.len));
        last.len += p.numel();
    }
    out
}

/// Replaces every replica's gradients by the weighted sum over replicas (and, with a
/// `collective`, over processes) of their gradients: sum_k weight_k * grad_k, the gradient of
/// the global batch's mean loss when the weights are rows / global batch. Each replica then
/// takes the same optimiser step. Replicas must have gradients for the same parameters.
pub async fn all_reduce_gradients(
    replicas: &[ReplicaGradients<'_>],
    collective: Option<&dyn Collective>,
) -> Result<ReduceStats> {
    let first = replicas
        .first()
        .ok_or_else(|| Error::Distributed("an all-reduce needs at least one replica".into()))?;
    for (k, r) in replicas.iter().enumerate().skip(1) {
        let same = r.params.len() == first.params.len()
            && r.params
                .iter()
                .zip(first.params)
                .all(|(a, b)| a.shape() == b.shape() && a.grad().is_some() == b.grad().is_some());
        if !same {
            return Err(Error::Distributed(format!(
                "replica {k} has gradients for other parameters than replica 0; every replica must run the same \
                 network on the same skip level"
            )));
        }
    }
    for r in replicas {
        r.loss.gpu().finish().await?;
    }
    let started = web_time::Instant::now();
    let mut stats = ReduceStats {
        finite: true,
        ..ReduceStats::default()
    };
    let buckets = buckets(first.params);
    // Every copy is recorded before the first readback waits, so the devices pack in parallel.
    let packed: Vec<Vec<Tensor>> = buckets
        .iter()
        .enumerate()
        .map(|(b, bucket)| replicas.iter().map(|r| pack(r, bucket, b == 0)).collect())
        .collect::<Result<_>>()?;
    for (b, (bucket, packed)) in buckets.iter().zip(&packed).enumerate() {
        let mut sum = vec![0f32; bucket.len];
        for (r, packed) in replicas.iter().zip(packed) {
            let values = packed.to_vec_async().await?;
            for (s, v) in sum.iter_mut().zip(values) {
                *s += r.weight * v;
            }
        }
        if let Some(collective) = collective {
            collective.all_reduce_sum(&mut sum)?;
        }
        let grads = if b == 0 {
            stats.loss = sum[0];
            &sum[1..]
        } else {
            &sum[..]
        };
        stats.finite &= grads.iter().all(|v| v.is_finite());
        stats.bytes += 4 * grads.len() as u64;
        for r in replicas {
            unpack(r, bucket, &sum)?;
        }
    }
    stats.seconds = started.elapsed().as_secs_f64();
    Ok(stats)
}

/// The bucket's values on `r`'s device: its loss first when `with_loss`, then its gradients.
fn pack(r: &ReplicaGradients, bucket: &Bucket, with_loss: bool) -> Result<Tensor> {
    let gpu = r.loss.gpu();
    let packed = Tensor::empty(gpu, &[bucket.len], DType::F32)?;
    if with_loss {
        gpu.copy(r.loss.to_dtype(DType::F32)?.buffer(), 0, packed.buffer(), 0, 4);
    }
    for &(i, at) in &bucket.parts {
        let grad = r.params[i].grad().expect("bucketed parameters have gradients");
        let grad = grad.to_dtype(DType::F32)?;
        gpu.copy(grad.buffer(), 0, packed.buffer(), 4 * at as u64, grad.byte_len());
    }
    gpu.flush();
    Ok(packed)
}

/// Sets the gradients of the bucket's parameters on `r`'s device to their parts of `sum`.
fn unpack(r: &ReplicaGradients, bucket: &Bucket, sum: &[f32]) -> Result<()> {
    let gpu = r.loss.gpu();
    let reduced = Tensor::from_f32(gpu, &[bucket.len], sum)?;
    for &(i, at) in &bucket.parts {
        let p = &r.params[i];
        let grad = Tensor::empty(gpu, p.shape(), DType::F32)?;
        gpu.copy(reduced.buffer(), 4 * at as u64, grad.buffer(), 0, grad.byte_len());
        p.set_grad(Some(grad));
    }
    Ok(())
}
