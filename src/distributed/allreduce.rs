//! The backward and gradient all-reduce of a data-parallel step: as each replica's backward
//! finishes a bucket of gradients, the bucket is packed on its device and its readback starts
//! (overlapping the rest of the backward); then the buckets are summed with weights on the
//! host, over processes, and written back as every replica's new gradients.

use super::Collective;
use crate::autograd::{backward_observed, leaf_id};
use crate::gpu::PendingRead;
use crate::{DType, Error, Result, Tensor};
use std::collections::HashMap;

/// Most gradient bytes one bucket holds: few readbacks and MPI calls per step, and far below
/// any device's storage-binding limit. A larger single gradient gets a bucket of its own.
pub const BUCKET_BYTES: usize = 4 << 20;

/// One replica's part of a step: its parameters, its loss (forward done) and its weight in
/// the global mean (its rows / the global batch).
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
    /// Seconds the all-reduce itself took: summing on the host, the MPI all-reduce and
    /// uploading the result (the readbacks run while the backward does).
    pub seconds: f64,
    /// Gradient bytes each replica sent (f32).
    pub bytes: u64,
}

/// One bucket: its length and its (parameter index, first value) runs; slot 0 of the first
/// bucket holds the loss.
struct Bucket {
    len: usize,
    parts: Vec<(usize, usize)>,
}

/// Every parameter, latest layers first (the order backward finishes them), cut into buckets
/// of at most [`BUCKET_BYTES`]; and each parameter's bucket.
fn buckets(params: &[Tensor]) -> (Vec<Bucket>, Vec<usize>) {
    let cap = BUCKET_BYTES / 4;
    let mut out = vec![Bucket {
        len: 1,
        parts: Vec::new(),
    }];
    let mut bucket_of = vec![0; params.len()];
    for (i, p) in params.iter().enumerate().rev() {
        if out
            .last()
            .is_some_and(|b| !b.parts.is_empty() && b.len + p.numel() > cap)
        {
            out.push(Bucket {
                len: 0,
                parts: Vec::new(),
            });
        }
        let last = out.last_mut().expect("one bucket at least");
        last.parts.push((i, last.len));
        last.len += p.numel();
        bucket_of[i] = out.len() - 1;
    }
    (out, bucket_of)
}

/// Back-propagates each replica's loss (times `scale`, for f16 loss scaling), then replaces
/// every replica's gradients by the weighted sum over replicas (and, with a `collective`, over
/// processes) of their gradients: sum_k weight_k * grad_k, the gradient of the global batch's
/// mean loss when the weights are rows / global batch. Each replica can then take the same
/// optimiser step. Replicas must end with gradients for the same parameters.
pub async fn backward_and_all_reduce(
    replicas: &[ReplicaGradients<'_>],
    scale: Option<f32>,
    collective: Option<&dyn Collective>,
) -> Result<ReduceStats> {
    let first = replicas
        .first()
        .ok_or_else(|| Error::Distributed("an all-reduce needs at least one replica".into()))?;
    let (buckets, bucket_of) = buckets(first.params);
    let mut reads = Vec::with_capacity(replicas.len());
    for r in replicas {
        reads.push(backward_reading_buckets(r, scale, &buckets, &bucket_of)?);
    }
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
    let mut stats = ReduceStats {
        finite: true,
        ..ReduceStats::default()
    };
    let mut seconds = 0.0;
    let mut reads: Vec<_> = reads.into_iter().map(Vec::into_iter).collect();
    for (b, bucket) in buckets.iter().enumerate() {
        let mut sum = vec![0f32; bucket.len];
        for (r, reads) in replicas.iter().zip(&mut reads) {
            let (_packed, read) = reads.next().expect("one read per bucket");
            let bytes = read.finish().await?;
            let started = web_time::Instant::now();
            for (s, v) in sum.iter_mut().zip(bytemuck::cast_slice::<u8, f32>(&bytes)) {
                *s += r.weight * v;
            }
            seconds += started.elapsed().as_secs_f64();
        }
        let started = web_time::Instant::now();
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
        seconds += started.elapsed().as_secs_f64();
    }
    stats.seconds = seconds;
    Ok(stats)
}

/// Runs `r`'s backward and starts reading each bucket back as soon as its last gradient is
/// final (buckets whose parameters got no gradient, after the backward), in bucket order.
fn backward_reading_buckets(
    r: &ReplicaGradients,
    scale: Option<f32>,
    buckets: &[Bucket],
    bucket_of: &[usize],
) -> Result<Vec<(Tensor, PendingRead)>> {
    let index: HashMap<usize, usize> = r
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| (leaf_id(p), i))
        .collect();
    let mut left: Vec<usize> = buckets.iter().map(|b| b.parts.len()).collect();
    let mut reads: Vec<Option<(Tensor, PendingRead)>> = buckets.iter().map(|_| None).collect();
    let target = match scale {
        Some(scale) => r.loss.mul_scalar(scale)?,
        None => r.loss.clone(),
    };
    backward_observed(&target, &mut |leaf| {
        if let Some(&i) = index.get(&leaf) {
            let b = bucket_of[i];
            left[b] -= 1;
            if left[b] == 0 {
                reads[b] = Some(pack_and_read(r, &buckets[b], b == 0)?);
            }
        }
        Ok(())
    })?;
    buckets
        .iter()
        .zip(reads)
        .enumerate()
        .map(|(b, (bucket, read))| match read {
            Some(read) => Ok(read),
            None => pack_and_read(r, bucket, b == 0),
        })
        .collect()
}

/// Packs the bucket's values on `r`'s device (its loss first when `with_loss`, then its
/// gradients; zeros for parameters without one) and starts reading them back. The packed
/// tensor is returned too, to stay alive until the read is done.
fn pack_and_read(r: &ReplicaGradients, bucket: &Bucket, with_loss: bool) -> Result<(Tensor, PendingRead)> {
    let gpu = r.loss.gpu();
    let packed = Tensor::zeros(gpu, &[bucket.len], DType::F32)?;
    if with_loss {
        gpu.copy(r.loss.to_dtype(DType::F32)?.buffer(), 0, packed.buffer(), 0, 4);
    }
    for &(i, at) in &bucket.parts {
        if let Some(grad) = r.params[i].grad() {
            let grad = grad.to_dtype(DType::F32)?;
            gpu.copy(grad.buffer(), 0, packed.buffer(), 4 * at as u64, grad.byte_len());
        }
    }
    let read = gpu.start_read(packed.buffer(), packed.byte_len(), "a gradient bucket");
    Ok((packed, read))
}

/// Sets the gradients of the bucket's parameters that have one on `r`'s device to their
/// parts of `sum`.
fn unpack(r: &ReplicaGradients, bucket: &Bucket, sum: &[f32]) -> Result<()> {
    let gpu = r.loss.gpu();
    let reduced = Tensor::from_f32(gpu, &[bucket.len], sum)?;
    for &(i, at) in &bucket.parts {
        let p = &r.params[i];
        if p.grad().is_none() {
            continue;
        }
        let grad = Tensor::empty(gpu, p.shape(), DType::F32)?;
        gpu.copy(reduced.buffer(), 4 * at as u64, grad.buffer(), 0, grad.byte_len());
        p.set_grad(Some(grad));
    }
    Ok(())
}
