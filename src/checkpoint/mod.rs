//! Checkpoints: named tensors in one safetensors file whose metadata carries a JSON document
//! (the writer's state), restored into device tensors with every name, shape and value checked.

pub mod compressed;

use crate::{DType, Error, Result, Tensor};
use std::collections::{BTreeMap, HashMap};

/// Metadata key holding the JSON document.
const META_KEY: &str = "wgdiff";

/// One tensor's values on the CPU, and the element type the file stores them as: an F32
/// tensor's values in `data`, an integer one's bytes, as the file holds them, in `bytes` (a
/// byte per int8 value: no float copy of a compressed checkpoint's weights on the host).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorData {
    pub shape: Vec<usize>,
    /// The values of an F32 tensor (empty for an integer one).
    pub data: Vec<f32>,
    /// The bytes of an I8 or U8 tensor (empty for an F32 one): int8 values in two's
    /// complement, int4 pairs and keep-bits as packed.
    pub bytes: Vec<u8>,
    pub stored: Stored,
}

/// The `kind` in the metadata of an MNIST-FID classifier checkpoint (`wgdiff train-classifier`);
/// diffusion checkpoints have no `kind`.
pub const CLASSIFIER_KIND: &str = "wgdiff-classifier";

/// A stored tensor's element type: F32 for weights and state; a compressed checkpoint's
/// integer weights as I8 (int8 values) or U8 (int4 pairs, pruning masks as bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    F32,
    I8,
    U8,
}

impl Stored {
    fn safetensors(self) -> safetensors::Dtype {
        match self {
            Stored::F32 => safetensors::Dtype::F32,
            Stored::I8 => safetensors::Dtype::I8,
            Stored::U8 => safetensors::Dtype::U8,
        }
    }
}

impl TensorData {
    /// f32 values of `shape`.
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> TensorData {
        TensorData {
            shape,
            data,
            bytes: Vec::new(),
            stored: Stored::F32,
        }
    }

    /// An integer tensor of `shape` stored as `stored` (I8 or U8), its `bytes` as the file
    /// holds them.
    pub fn integer(shape: Vec<usize>, stored: Stored, bytes: Vec<u8>) -> TensorData {
        TensorData {
            shape,
            data: Vec::new(),
            bytes,
            stored,
        }
    }

    /// Elements stored: values of an F32 tensor, bytes of an integer one.
    pub fn len(&self) -> usize {
        match self.stored {
            Stored::F32 => self.data.len(),
            Stored::I8 | Stored::U8 => self.bytes.len(),
        }
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the file holds of this tensor.
    fn encoded(&self) -> &[u8] {
        match self.stored {
            Stored::F32 => bytemuck::cast_slice(&self.data),
            Stored::I8 | Stored::U8 => &self.bytes,
        }
    }
}

/// Where a tensor of a checkpoint being encoded is: on the device (read back in its turn, f16
/// widened to f32) or on the CPU.
pub enum Source<'a> {
    Device(&'a Tensor),
    Host(&'a TensorData),
}

/// Named tensors plus a JSON document, as stored in a `.safetensors` file.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    pub tensors: BTreeMap<String, TensorData>,
    pub meta: serde_json::Value,
}

impl Checkpoint {
    /// Reads `named` back from the device (f16 tensors are widened to f32).
    pub async fn capture(named: &[(String, Tensor)], meta: serde_json::Value) -> Result<Checkpoint> {
        let mut tensors = BTreeMap::new();
        for (name, t) in named {
            let data = t.to_vec_async().await?;
            tensors.insert(name.clone(), TensorData::f32(t.shape().to_vec(), data));
        }
        Ok(Checkpoint { tensors, meta })
    }

    /// The safetensors encoding (each tensor as its `stored` type, the JSON document in the
    /// metadata).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let bytes: Vec<_> = self.tensors.values().map(TensorData::encoded).collect();
        let views = self
            .tensors
            .iter()
            .zip(&bytes)
            .map(|((name, t), bytes)| {
                let view =
                    safetensors::tensor::TensorView::new(t.stored.safetensors(), t.shape.clone(), bytes)
                        .map_err(|e| checkpoint_error("(being written)", format!("tensor {name}: {e}")))?;
                Ok((name.clone(), view))
            })
            .collect::<Result<Vec<_>>>()?;
        let meta = HashMap::from([(META_KEY.to_string(), self.meta.to_string())]);
        safetensors::serialize(views, Some(meta))
            .map_err(|e| checkpoint_error("(being written)", format!("safetensors encoding failed: {e}")))
    }

    /// The safetensors encoding of `tensors` and `meta`, byte for byte what
    /// [`Checkpoint::to_bytes`] writes of them captured, with each device tensor read back in
    /// its turn straight into the file's bytes: no copy of the whole state is held beside the
    /// file (a page's heap never shrinks). `inspect` sees each device tensor's values as they
    /// arrive.
    pub async fn encode_from(
        tensors: Vec<(String, Source<'_>)>,
        meta: &serde_json::Value,
        inspect: &mut dyn FnMut(&str, &[f32]),
    ) -> Result<Vec<u8>> {
        let mut tensors: Vec<_> = tensors
            .into_iter()
            .map(|(name, source)| {
                let (dtype, shape, len) = match &source {
                    Source::Device(t) => (safetensors::Dtype::F32, t.shape().to_vec(), t.numel() * 4),
                    Source::Host(t) => (t.stored.safetensors(), t.shape.clone(), t.encoded().len()),
                };
                (name, dtype, shape, len, source)
            })
            .collect();
        // (the order safetensors::serialize gives: by descending type, then by name)
        tensors.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut offset = 0;
        let infos = tensors
            .iter()
            .map(|(name, dtype, shape, len, _)| {
                offset += len;
                let data_offsets = (offset - len, offset);
                let info = safetensors::tensor::TensorInfo {
                    dtype: *dtype,
                    shape: shape.clone(),
                    data_offsets,
                };
                (name.clone(), info)
            })
            .collect();
        let encoding = |e: &dyn std::fmt::Display| {
            checkpoint_error("(being written)", format!("safetensors encoding failed: {e}"))
        };
        let meta = HashMap::from([(META_KEY.to_string(), meta.to_string())]);
        let header = safetensors::tensor::Metadata::new(Some(meta), infos).map_err(|e| encoding(&e))?;
        let mut header = serde_json::to_vec(&header).map_err(|e| encoding(&e))?;
        header.resize(header.len().next_multiple_of(8), b' ');
        let mut bytes = Vec::with_capacity(8 + header.len() + offset);
        bytes.extend((header.len() as u64).to_le_bytes());
        bytes.extend(header);
        for (name, _, _, _, source) in tensors {
            match source {
                Source::Device(t) => {
                    let data = t.to_vec_async().await?;
                    inspect(&name, &data);
                    bytes.extend_from_slice(bytemuck::cast_slice(&data));
                }
                Source::Host(t) => bytes.extend_from_slice(t.encoded()),
            }
        }
        Ok(bytes)
    }

    /// Decodes a safetensors file's bytes; `origin` names the file in errors.
    pub fn from_bytes(bytes: &[u8], origin: &str) -> Result<Checkpoint> {
        let corrupt = |e: safetensors::SafeTensorError| {
            checkpoint_error(
                origin,
                format!("not a valid safetensors file ({e}); the file is truncated or corrupt — use another checkpoint"),
            )
        };
        let (_, header) = safetensors::SafeTensors::read_metadata(bytes).map_err(corrupt)?;
        let meta_text = header
            .metadata()
            .as_ref()
            .and_then(|m| m.get(META_KEY))
            .ok_or_else(|| {
                checkpoint_error(
                    origin,
                    format!("no \"{META_KEY}\" metadata: this safetensors file was not written by wgdiff"),
                )
            })?;
        let meta = serde_json::from_str(meta_text)
            .map_err(|e| checkpoint_error(origin, format!("its JSON metadata does not parse: {e}")))?;
        let file = safetensors::SafeTensors::deserialize(bytes).map_err(corrupt)?;
        let mut tensors = BTreeMap::new();
        for (name, view) in file.tensors() {
            let shape = view.shape().to_vec();
            let t = match view.dtype() {
                safetensors::Dtype::F32 => TensorData::f32(shape, bytemuck::pod_collect_to_vec(view.data())),
                safetensors::Dtype::I8 => TensorData::integer(shape, Stored::I8, view.data().to_vec()),
                safetensors::Dtype::U8 => TensorData::integer(shape, Stored::U8, view.data().to_vec()),
                other => {
                    return Err(checkpoint_error(
                        origin,
                        format!(
                            "tensor {name} has dtype {other:?}; wgdiff checkpoints store F32 (and I8/U8 \
                             in compressed ones)"
                        ),
                    ))
                }
            };
            tensors.insert(name, t);
        }
        Ok(Checkpoint { tensors, meta })
    }

    /// Writes the checkpoint to `path` atomically.
    pub fn save(&self, path: &std::path::Path) -> Result<()> {
        crate::fsio::write_atomic(path, &self.to_bytes()?)
    }

    /// Reads a checkpoint file (a shipped `assets/...` one wherever `fsio::locate` finds it, and
    /// named by where it was found).
    pub fn load(path: &std::path::Path) -> Result<Checkpoint> {
        let bytes = crate::fsio::read_io(path)
            .map_err(|e| checkpoint_error(&path.display().to_string(), format!("cannot be read: {e}")))?;
        Checkpoint::from_bytes(&bytes, &crate::fsio::locate(path).display().to_string())
    }

    /// Runs `build`, which makes the model (and state) this checkpoint's metadata describes,
    /// with device allocations capped near what the file's tensors hold: metadata edited or
    /// damaged to describe a far larger model is refused before it allocates gigabytes.
    pub fn build_within_size<T>(&self, origin: &str, build: impl FnOnce() -> Result<T>) -> Result<T> {
        /// Room for what building allocates besides the stored tensors (scratch, batches).
        const SLACK: u64 = 64 << 20;
        let stored: u64 = self
            .tensors
            .iter()
            .map(|(name, t)| 4 * compressed::stored_elements(name, t) as u64)
            .sum();
        crate::gpu::with_alloc_budget(2 * stored + SLACK, build).map_err(|e| match e {
            Error::OverBudget { what, bytes, .. } => checkpoint_error(
                origin,
                format!(
                    "its metadata describes a model larger than the tensors it holds ({what} needs {bytes} \
                     bytes; all its tensors hold {stored} bytes): the metadata was edited or damaged — use \
                     another checkpoint"
                ),
            ),
            other => other,
        })
    }

    /// Whether the checkpoint holds tensor `key` (stored as f32 or compressed).
    pub fn contains(&self, key: &str) -> bool {
        self.tensors.contains_key(key) || compressed::is_compressed(self, key)
    }

    /// The f32 values of tensor `key`: as stored, or decoded from its compressed form
    /// (dequantised, masked); `origin` names the checkpoint in errors.
    pub fn values(&self, key: &str, origin: &str) -> Result<Option<std::borrow::Cow<'_, TensorData>>> {
        match self.tensors.get(key) {
            Some(t) if t.stored == Stored::F32 => Ok(Some(std::borrow::Cow::Borrowed(t))),
            Some(t) => Err(checkpoint_error(
                origin,
                format!(
                    "tensor {key} is stored as {:?}; weights are F32 or compressed forms",
                    t.stored
                ),
            )),
            None => Ok(compressed::decode(self, key, origin)?.map(std::borrow::Cow::Owned)),
        }
    }

    /// Copies the stored tensors `prefix + name` into the device tensors `named`, checking that
    /// every one exists with the right shape and finite values; `origin` names the checkpoint in errors.
    pub fn restore(&self, prefix: &str, named: &[(String, Tensor)], origin: &str) -> Result<()> {
        // Every tensor is checked before any is written, so a refused checkpoint changes nothing.
        let mut sources = Vec::with_capacity(named.len());
        for (name, t) in named {
            let key = format!("{prefix}{name}");
            let stored = self.values(&key, origin)?.ok_or_else(|| {
                checkpoint_error(
                    origin,
                    format!("has no tensor {key}; it was written for a different model — check --preset or the config"),
                )
            })?;
            if stored.shape != t.shape() {
                return Err(checkpoint_error(
                    origin,
                    format!(
                        "tensor {key} has shape {:?} but the model expects {:?}; it was written for a different model configuration",
                        stored.shape,
                        t.shape()
                    ),
                ));
            }
            let broken = stored.data.iter().filter(|v| !v.is_finite()).count();
            if broken > 0 {
                return Err(checkpoint_error(
                    origin,
                    format!(
                        "tensor {key} holds {broken} NaN or infinite values of {}: the run had diverged when it \
                         was written, and it would sample black or saturated images; use an earlier checkpoint \
                         (best.safetensors, a copy) or train again with a lower --lr",
                        stored.data.len()
                    ),
                ));
            }
            sources.push(stored);
        }
        for ((_, t), stored) in named.iter().zip(sources) {
            let upload = Tensor::from_f32(t.gpu(), &stored.shape, &stored.data)?;
            t.copy_from(&if t.dtype() == DType::F32 {
                upload
            } else {
                upload.to_dtype(t.dtype())?
            })?;
        }
        Ok(())
    }
}

fn checkpoint_error(path: &str, msg: String) -> Error {
    Error::Checkpoint {
        path: path.to_string(),
        msg,
    }
}
