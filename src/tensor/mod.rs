//! Tensor: a contiguous, row-major array on the device with a shape and a dtype (f32 or f16),
//! plus the autograd links (its gradient, and the op that made it).

use crate::autograd::{self, GradLink, Node};
use crate::gpu::{Gpu, PooledBuffer};
use crate::{Error, Result};
use half::f16;
use std::sync::Arc;

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 => 2,
        }
    }

    /// The WGSL scalar type that stores it.
    pub fn wgsl(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
        }
    }
}

/// Shared handle to a device tensor (cloning is cheap and shares the data).
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorData>);

pub(crate) struct TensorData {
    pub(crate) gpu: Gpu,
    pub(crate) buffer: Arc<PooledBuffer>,
    pub(crate) shape: Vec<usize>,
    pub(crate) dtype: DType,
    /// The tensor's place in the autograd graph. Graph nodes hold these links, not tensors,
    /// so a forward's intermediate buffers are freed unless a backward closure keeps them.
    pub(crate) link: Arc<GradLink>,
}

/// Number of elements of a shape.
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Row-major strides of a shape, in elements.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

impl Tensor {
    /// An uninitialised tensor (poisoned with NaN when the device's poison mode is on).
    pub fn empty(gpu: &Gpu, shape: &[usize], dtype: DType) -> Result<Tensor> {
        let bytes = (numel(shape) * dtype.size()) as u64;
        let buffer = gpu.alloc(bytes, &format!("tensor of shape {shape:?} ({dtype:?})"))?;
        if gpu.poison_enabled() {
            gpu.fill_bits(buffer.raw(), bytes.div_ceil(4), u32::MAX);
        }
        Ok(Tensor::from_buffer(gpu, Arc::new(buffer), shape, dtype))
    }

    pub(crate) fn from_buffer(gpu: &Gpu, buffer: Arc<PooledBuffer>, shape: &[usize], dtype: DType) -> Tensor {
        Tensor(Arc::new(TensorData {
            gpu: gpu.clone(),
            buffer,
            shape: shape.to_vec(),
            dtype,
            link: GradLink::untracked(shape),
        }))
    }

    /// Uploads f32 values.
    pub fn from_f32(gpu: &Gpu, shape: &[usize], data: &[f32]) -> Result<Tensor> {
        check_len(shape, data.len())?;
        let t = Tensor::empty(gpu, shape, DType::F32)?;
        gpu.write(t.buffer(), bytemuck::cast_slice(data));
        Ok(t)
    }

    /// Uploads f16 values.
    pub fn from_f16(gpu: &Gpu, shape: &[usize], data: &[f16]) -> Result<Tensor> {
        check_len(shape, data.len())?;
        let t = Tensor::empty(gpu, shape, DType::F16)?;
        gpu.write(t.buffer(), bytemuck::cast_slice(data));
        Ok(t)
    }

    /// Uploads f32 values converted to `dtype`.
    pub fn from_slice(gpu: &Gpu, shape: &[usize], data: &[f32], dtype: DType) -> Result<Tensor> {
        match dtype {
            DType::F32 => Tensor::from_f32(gpu, shape, data),
            DType::F16 => {
                let h: Vec<f16> = data.iter().map(|&x| f16::from_f32(x)).collect();
                Tensor::from_f16(gpu, shape, &h)
            }
        }
    }

    /// A tensor filled with `value`.
    pub fn full(gpu: &Gpu, shape: &[usize], value: f32, dtype: DType) -> Result<Tensor> {
        let t = Tensor::empty(gpu, shape, dtype)?;
        let bits = match dtype {
            DType::F32 => value.to_bits(),
            DType::F16 => {
                let h = f16::from_f32(value).to_bits() as u32;
                h | (h << 16)
            }
        };
        gpu.fill_bits(t.buffer(), t.byte_len().div_ceil(4), bits);
        Ok(t)
    }

    /// Zeros.
    pub fn zeros(gpu: &Gpu, shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::full(gpu, shape, 0.0, dtype)
    }

    /// A leaf that collects gradients (a parameter): same data, `requires_grad` set.
    pub fn requires_grad(self) -> Tensor {
        Tensor(Arc::new(TensorData {
            gpu: self.0.gpu.clone(),
            buffer: self.0.buffer.clone(),
            shape: self.0.shape.clone(),
            dtype: self.0.dtype,
            link: GradLink::leaf(&self.0.shape),
        }))
    }

    /// A new tensor with a copy of the data (not linked to the graph).
    pub fn duplicate(&self) -> Result<Tensor> {
        let out = Tensor::empty(self.gpu(), self.shape(), self.dtype())?;
        self.gpu()
            .copy(self.buffer(), 0, out.buffer(), 0, self.byte_len().div_ceil(4) * 4);
        Ok(out)
    }

    /// Overwrites this tensor's data with `src`'s (same shape and dtype), in place.
    pub fn copy_from(&self, src: &Tensor) -> Result<()> {
        if src.shape() != self.shape() || src.dtype() != self.dtype() {
            return Err(Error::shape("copy_from", format!("{src:?} into {self:?}")));
        }
        self.gpu()
            .copy(src.buffer(), 0, self.buffer(), 0, self.byte_len().div_ceil(4) * 4);
        Ok(())
    }

    /// The same data cut from the graph.
    pub fn detach(&self) -> Tensor {
        Tensor::from_buffer(&self.0.gpu, self.0.buffer.clone(), &self.0.shape, self.0.dtype)
    }

    /// Wraps a freshly computed result, linking it into the graph when gradients are on
    /// and an input needs them.
    pub(crate) fn with_grad_fn(
        self,
        op: &'static str,
        inputs: Vec<Tensor>,
        backward: autograd::BackwardFn,
    ) -> Tensor {
        if !autograd::grad_enabled() || !inputs.iter().any(|t| t.tracks_grad()) {
            return self;
        }
        let link = GradLink::node(self.shape(), Node::new(op, &inputs, backward));
        let data = Arc::try_unwrap(self.0).unwrap_or_else(|arc| TensorData {
            gpu: arc.gpu.clone(),
            buffer: arc.buffer.clone(),
            shape: arc.shape.clone(),
            dtype: arc.dtype,
            link: GradLink::untracked(&arc.shape),
        });
        Tensor(Arc::new(TensorData { link, ..data }))
    }

    /// True when gradients flow to or through this tensor.
    pub fn tracks_grad(&self) -> bool {
        self.0.link.tracked
    }

    /// True for a tensor made by an op (not a leaf).
    pub fn is_leaf(&self) -> bool {
        self.0.link.node.is_none()
    }

    /// Accumulated gradient of a leaf after `backward`.
    pub fn grad(&self) -> Option<Tensor> {
        self.0.link.grad.lock().unwrap().clone()
    }

    /// Replaces the accumulated gradient.
    pub fn set_grad(&self, grad: Option<Tensor>) {
        *self.0.link.grad.lock().unwrap() = grad;
    }

    /// Clears the accumulated gradient.
    pub fn zero_grad(&self) {
        self.set_grad(None);
    }

    pub fn shape(&self) -> &[usize] {
        &self.0.shape
    }
    pub fn rank(&self) -> usize {
        self.0.shape.len()
    }
    pub fn numel(&self) -> usize {
        numel(&self.0.shape)
    }
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }
    pub fn gpu(&self) -> &Gpu {
        &self.0.gpu
    }
    /// The device buffer (may be larger than the data).
    pub fn buffer(&self) -> &wgpu::Buffer {
        self.0.buffer.raw()
    }
    /// Bytes of data.
    pub fn byte_len(&self) -> u64 {
        (self.numel() * self.dtype().size()) as u64
    }
    /// True when both handles share storage.
    pub fn same_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0.buffer, &other.0.buffer)
    }

    /// Same data viewed with another shape of equal element count (no copy).
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        if numel(shape) != self.numel() {
            return Err(Error::shape(
                "reshape",
                format!(
                    "cannot view {:?} ({} elements) as {shape:?}",
                    self.shape(),
                    self.numel()
                ),
            ));
        }
        let out = Tensor::from_buffer(self.gpu(), self.0.buffer.clone(), shape, self.dtype());
        let in_shape = self.shape().to_vec();
        Ok(out.with_grad_fn(
            "reshape",
            vec![self.clone()],
            Box::new(move |g| Ok(vec![Some(g.reshape(&in_shape)?)])),
        ))
    }

    /// Reads the values back as f32 (async; works on the web).
    pub async fn to_vec_async(&self) -> Result<Vec<f32>> {
        let bytes = self
            .gpu()
            .read(
                self.buffer(),
                self.byte_len(),
                &format!("tensor {:?}", self.shape()),
            )
            .await?;
        Ok(match self.dtype() {
            DType::F32 => bytemuck::pod_collect_to_vec(&bytes),
            DType::F16 => bytemuck::pod_collect_to_vec::<u8, f16>(&bytes)
                .into_iter()
                .map(f16::to_f32)
                .collect(),
        })
    }

    /// The values of every tensor of `tensors` as f32, read back in one readback
    /// ([`Gpu::read_many`]); all on one device.
    pub async fn to_vecs_async(tensors: &[&Tensor]) -> Result<Vec<Vec<f32>>> {
        let Some(first) = tensors.first() else {
            return Ok(Vec::new());
        };
        let parts: Vec<(&wgpu::Buffer, u64)> = tensors.iter().map(|t| (t.buffer(), t.byte_len())).collect();
        let all = first
            .gpu()
            .read_many(&parts, &format!("{} tensors", tensors.len()))
            .await?;
        Ok(tensors
            .iter()
            .zip(all)
            .map(|(t, bytes)| match t.dtype() {
                DType::F32 => bytemuck::pod_collect_to_vec(&bytes),
                DType::F16 => bytemuck::pod_collect_to_vec::<u8, f16>(&bytes)
                    .into_iter()
                    .map(f16::to_f32)
                    .collect(),
            })
            .collect())
    }

    /// Blocking [`Tensor::to_vec_async`] for native programs and tests (never in a page).
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        pollster::block_on(self.to_vec_async())
    }

    /// The single value of a one-element tensor (blocking: native programs and tests).
    pub fn item(&self) -> Result<f32> {
        if self.numel() != 1 {
            return Err(Error::shape(
                "item",
                format!("tensor has shape {:?}, not one element", self.shape()),
            ));
        }
        Ok(self.to_vec()?[0])
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor({:?}, {:?}, grad={})",
            self.shape(),
            self.dtype(),
            self.tracks_grad()
        )
    }
}

fn check_len(shape: &[usize], len: usize) -> Result<()> {
    if numel(shape) != len {
        return Err(Error::shape(
            "upload",
            format!(
                "shape {shape:?} holds {} values but {len} were given",
                numel(shape)
            ),
        ));
    }
    Ok(())
}
