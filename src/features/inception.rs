//! Inception-v3 as in pytorch-fid (the TensorFlow FID network: FIDInceptionA/C/E_1/E_2 blocks,
//! bilinear resize to 299, 2048-d pool features, 1008-way logits), from a user's safetensors file.
//!
//! The standard FID weights are pytorch-fid's `pt_inception-2015-12-05-6726825d.pth` (the
//! release asset `fid_weights` of github.com/mseitzer/pytorch-fid). wgdiff cannot download
//! them; convert the .pth once (needs `pip install torch safetensors`) with
//!
//! ```text
//! python3 -c "import torch; from safetensors.torch import save_file; save_file({k: v.contiguous() for k, v in torch.load('pt_inception-2015-12-05-6726825d.pth').items()}, 'inception.safetensors')"
//! ```
//!
//! and pass `inception.safetensors` (`--inception PATH`). Details on [`InceptionV3`].

use crate::eval::FeatureNet;
use crate::fnv::Fnv1a;
use crate::ops::{ConvImpl, ConvOptions};
use crate::{DType, Error, Gpu, Result, Tensor};
use std::cell::RefCell;
use std::collections::BTreeSet;

/// The side images are resized to before the network.
pub const INCEPTION_INPUT: usize = 299;
/// Length of the pool feature vector (FID, KID).
pub const INCEPTION_FEATURES: usize = 2048;
/// Number of logits of the final linear layer (Inception Score; classes 1..=1000 are ImageNet's).
pub const INCEPTION_LOGITS: usize = 1008;
/// BatchNorm epsilon of the TensorFlow Inception graph.
const BN_EPS: f64 = 1e-3;
/// The one-line conversion of pytorch-fid's .pth into the safetensors file `load` reads.
pub const CONVERT_COMMAND: &str = "python3 -c \"import torch; from safetensors.torch import save_file; \
     save_file({k: v.contiguous() for k, v in torch.load('pt_inception-2015-12-05-6726825d.pth').items()}, \
     'inception.safetensors')\"";

/// A BasicConv2d with its BatchNorm folded in: relu(conv(x, weight) + bias).
struct ConvBn {
    weight: Tensor,
    bias: Tensor,
    opts: ConvOptions,
}

impl ConvBn {
    fn forward(&self, x: &Tensor, imp: ConvImpl) -> Result<Tensor> {
        x.conv2d_with(&self.weight, Some(&self.bias), self.opts, imp)?
            .relu()
    }
}

/// One step of a branch.
enum Step {
    Conv(ConvBn),
    /// 3x3 average pool, stride 1, padding 1 not counted (the FID blocks' branch pool).
    AvgPool,
    /// 3x3 max pool, stride 1, padding 1 (Mixed_7c's branch pool in the FID network).
    MaxPoolSame,
    /// 3x3 max pool, stride 2, no padding (the stem, Mixed_6a and Mixed_7a).
    MaxPoolHalve,
    /// Two convs of the same input, concatenated along channels (InceptionE's 1x3 / 3x1 pairs).
    Fork(ConvBn, ConvBn),
}

impl Step {
    fn forward(&self, x: &Tensor, imp: ConvImpl) -> Result<Tensor> {
        match self {
            Step::Conv(c) => c.forward(x, imp),
            Step::AvgPool => x.avg_pool2d_padded(3, 1, 1, false),
            Step::MaxPoolSame => x.max_pool2d(3, 1, 1),
            Step::MaxPoolHalve => x.max_pool2d(3, 2, 0),
            Step::Fork(a, b) => Tensor::concat(&[a.forward(x, imp)?, b.forward(x, imp)?], 1),
        }
    }
}

/// Steps applied one after another.
type Branch = Vec<Step>;

fn run_branch(branch: &[Step], x: &Tensor, imp: ConvImpl) -> Result<Tensor> {
    let mut h = x.clone();
    for step in branch {
        h = step.forward(&h, imp)?;
    }
    Ok(h)
}

/// pytorch-fid's Inception-v3 (FID variant) on the device, BatchNorms folded into the convs.
///
/// Weights: tensor names are exactly pytorch-fid's `FIDInceptionV3` state_dict keys
/// (`Conv2d_1a_3x3.conv.weight`, `Mixed_5b.branch1x1.bn.running_var`, .., `fc.weight`,
/// `fc.bias`); [`InceptionV3::load`] checks every one's presence, dtype (F32, F16, BF16 or F64)
/// and shape, ignores `*.num_batches_tracked` and refuses any other tensor. Each BasicConv2d
/// (conv without bias, BatchNorm in eval mode with eps 0.001, ReLU) is folded at load time
/// into one conv with bias: w * s and beta - mean * s per output channel, s = gamma /
/// sqrt(var + 0.001), so inference is conv + bias + ReLU.
///
/// Images are NCHW in [-1, 1] (wgdiff's range; pytorch-fid maps its [0, 1] input to [-1, 1]
/// after the resize, which is the same since the bilinear resize preserves affine maps), with
/// 1 channel (repeated to 3, as for MNIST) or 3. The FID blocks differ from torchvision's: the
/// branch pools of Mixed_5b..5d, 6b..6e and 7b are 3x3 average pools that do not count the
/// padding (`count_include_pad=False`), and Mixed_7c's is a 3x3 max pool.
/// `tests/engine/inception.rs` checks the features and logits against pytorch-fid itself on
/// generated weights (`scripts/make_inception_fixtures.py`).
pub struct InceptionV3 {
    /// Conv2d_1a_3x3 .. Conv2d_4a_3x3 and the two stride-2 max pools: 299 -> 35 pixels.
    stem: Branch,
    /// Mixed_5b .. Mixed_7c: parallel branches concatenated along channels.
    blocks: Vec<Vec<Branch>>,
    fc_weight: Tensor,
    fc_bias: Tensor,
    chunk: usize,
    conv: ConvImpl,
    /// `inception-fid-` and the FNV-1a hash of the weights file's bytes (see [`InceptionV3::id`]).
    id: String,
}

impl InceptionV3 {
    /// Loads the network from a safetensors file of pytorch-fid's state_dict (see the module
    /// doc for the conversion); errors name the file, the tensor, what was expected and found.
    pub fn load(gpu: &Gpu, path: &std::path::Path) -> Result<InceptionV3> {
        let bytes = crate::fsio::read_io(path).map_err(|e| {
            weights_error(
                &path.display().to_string(),
                format!(
                    "cannot be read ({e}); pass the Inception weights converted from pytorch-fid's \
                     pt_inception-2015-12-05-6726825d.pth with: {CONVERT_COMMAND}"
                ),
            )
        })?;
        InceptionV3::from_bytes(gpu, &bytes, &path.display().to_string())
    }

    /// [`InceptionV3::load`] from the file's bytes; `origin` names it in errors.
    pub fn from_bytes(gpu: &Gpu, bytes: &[u8], origin: &str) -> Result<InceptionV3> {
        let file = safetensors::SafeTensors::deserialize(bytes).map_err(|e| {
            weights_error(
                origin,
                format!(
                    "not a valid safetensors file ({e}); it is truncated or corrupt, or not converted yet: \
                     {CONVERT_COMMAND}"
                ),
            )
        })?;
        let first = "Conv2d_1a_3x3.conv.weight";
        if file.tensor(first).is_err() {
            if let Some(k) = file
                .names()
                .into_iter()
                .find(|k| k.ends_with(&format!(".{first}")))
            {
                return Err(weights_error(
                    origin,
                    format!(
                        "has no tensor {first} but has {k}: its names carry a prefix; save the state_dict of \
                         the network itself (keys such as {first})"
                    ),
                ));
            }
        }
        let w = Weights {
            file,
            origin,
            gpu,
            used: RefCell::new(BTreeSet::new()),
        };
        let stem = vec![
            Step::Conv(w.conv("Conv2d_1a_3x3", 3, 32, K3, 2, P0)?),
            Step::Conv(w.conv("Conv2d_2a_3x3", 32, 32, K3, 1, P0)?),
            Step::Conv(w.conv("Conv2d_2b_3x3", 32, 64, K3, 1, P1)?),
            Step::MaxPoolHalve,
            Step::Conv(w.conv("Conv2d_3b_1x1", 64, 80, K1, 1, P0)?),
            Step::Conv(w.conv("Conv2d_4a_3x3", 80, 192, K3, 1, P0)?),
            Step::MaxPoolHalve,
        ];
        let blocks = vec![
            block_a(&w, "Mixed_5b", 192, 32)?,
            block_a(&w, "Mixed_5c", 256, 64)?,
            block_a(&w, "Mixed_5d", 288, 64)?,
            block_b(&w, "Mixed_6a", 288)?,
            block_c(&w, "Mixed_6b", 768, 128)?,
            block_c(&w, "Mixed_6c", 768, 160)?,
            block_c(&w, "Mixed_6d", 768, 160)?,
            block_c(&w, "Mixed_6e", 768, 192)?,
            block_d(&w, "Mixed_7a", 768)?,
            block_e(&w, "Mixed_7b", 1280, Step::AvgPool)?,
            block_e(&w, "Mixed_7c", 2048, Step::MaxPoolSame)?,
        ];
        let fc_weight = w.upload("fc.weight", &[INCEPTION_LOGITS, INCEPTION_FEATURES])?;
        let fc_bias = w.upload("fc.bias", &[INCEPTION_LOGITS])?;
        w.check_all_used()?;
        Ok(InceptionV3 {
            stem,
            blocks,
            fc_weight,
            fc_bias,
            chunk: 4,
            conv: ConvImpl::Auto,
            id: format!("inception-fid-{:016x}", Fnv1a::of(bytes)),
        })
    }

    /// Names the weights in FID cache keys and reports: `inception-fid-` and 16 hex digits of
    /// the FNV-1a hash of the weights file's bytes (the same file always gives the same id).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Runs at most `images` images through the network at once (default 4), which bounds
    /// the activation memory (~60 MB per image at 299x299, besides the 95 MB of weights).
    pub fn with_chunk(mut self, images: usize) -> InceptionV3 {
        self.chunk = images.max(1);
        self
    }

    /// The convolution implementation every layer uses (default `Auto`: measured per shape).
    pub fn with_conv_impl(mut self, imp: ConvImpl) -> InceptionV3 {
        self.conv = imp;
        self
    }

    /// The 2048-d pool features [N, 2048] of `images` [N, C, H, W] (C = 1 or 3, values in
    /// [-1, 1], any size: resized bilinearly to 299x299 first), in chunks of the chunk size.
    /// The result stays on the device; for many images call this per batch and read back.
    pub fn features(&self, images: &Tensor) -> Result<Tensor> {
        let bad = |msg: String| Error::shape("inception features", msg);
        let &[n, c, h, w] = images.shape() else {
            return Err(bad(format!("images {:?} must be [N, C, H, W]", images.shape())));
        };
        if n == 0 || h == 0 || w == 0 || !(c == 1 || c == 3) {
            return Err(bad(format!(
                "images {:?} must be N >= 1 images with 1 or 3 channels (1 is repeated to 3)",
                images.shape()
            )));
        }
        let _g = crate::no_grad();
        let images = images.to_dtype(DType::F32)?;
        let mut parts = Vec::new();
        for start in (0..n).step_by(self.chunk) {
            let len = self.chunk.min(n - start);
            let x = images.slice(0, start, len)?;
            let x = x.resize_bilinear(INCEPTION_INPUT, INCEPTION_INPUT)?;
            let x = if c == 1 {
                x.broadcast_to(&[len, 3, INCEPTION_INPUT, INCEPTION_INPUT])?
            } else {
                x
            };
            parts.push(self.forward(&x)?);
        }
        if parts.len() == 1 {
            Ok(parts.pop().expect("one part"))
        } else {
            Tensor::concat(&parts, 0)
        }
    }

    /// The 1008-way logits [N, 1008] of the final linear layer for `features` [N, 2048] (from
    /// [`InceptionV3::features`]); softmax them for the Inception Score.
    pub fn logits(&self, features: &Tensor) -> Result<Tensor> {
        if features.rank() != 2 || features.shape()[1] != INCEPTION_FEATURES {
            return Err(Error::shape(
                "inception logits",
                format!(
                    "features {:?} must be [N, {INCEPTION_FEATURES}] (from InceptionV3::features)",
                    features.shape()
                ),
            ));
        }
        let _g = crate::no_grad();
        features
            .to_dtype(DType::F32)?
            .matmul_t(&self.fc_weight, false, true)?
            .add(&self.fc_bias)
    }

    /// [N, 3, 299, 299] -> [N, 2048].
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = run_branch(&self.stem, x, self.conv)?;
        for block in &self.blocks {
            let outs = block
                .iter()
                .map(|branch| run_branch(branch, &h, self.conv))
                .collect::<Result<Vec<_>>>()?;
            h = Tensor::concat(&outs, 1)?;
        }
        h.mean(&[2, 3], false)
    }
}

/// Inception-v3 as the feature network of `wgdiff::eval`: its 2048-d pool features give FID
/// proper, its logits the Inception Score.
impl FeatureNet for InceptionV3 {
    fn id(&self) -> String {
        InceptionV3::id(self).to_string()
    }
    fn metric(&self) -> &'static str {
        "FID"
    }
    fn features(&self, images: &Tensor) -> Result<Tensor> {
        InceptionV3::features(self, images)
    }
    fn logits(&self, features: &Tensor) -> Result<Option<Tensor>> {
        InceptionV3::logits(self, features).map(Some)
    }
}

const K1: (usize, usize) = (1, 1);
const K3: (usize, usize) = (3, 3);
const P0: (usize, usize) = (0, 0);
const P1: (usize, usize) = (1, 1);

/// InceptionA (FIDInceptionA): 1x1 | 1x1, 5x5 | 1x1, 3x3, 3x3 | avg pool (padding not
/// counted), 1x1 -> 224 + `pool` channels.
fn block_a(w: &Weights, name: &str, cin: usize, pool: usize) -> Result<Vec<Branch>> {
    let c = |branch: &str, i, o, k, p| Ok(Step::Conv(w.conv(&format!("{name}.{branch}"), i, o, k, 1, p)?));
    Ok(vec![
        vec![c("branch1x1", cin, 64, K1, P0)?],
        vec![
            c("branch5x5_1", cin, 48, K1, P0)?,
            c("branch5x5_2", 48, 64, (5, 5), (2, 2))?,
        ],
        vec![
            c("branch3x3dbl_1", cin, 64, K1, P0)?,
            c("branch3x3dbl_2", 64, 96, K3, P1)?,
            c("branch3x3dbl_3", 96, 96, K3, P1)?,
        ],
        vec![Step::AvgPool, c("branch_pool", cin, pool, K1, P0)?],
    ])
}

/// InceptionB (grid 35 -> 17): 3x3 stride 2 | 1x1, 3x3, 3x3 stride 2 | max pool stride 2.
fn block_b(w: &Weights, name: &str, cin: usize) -> Result<Vec<Branch>> {
    let c =
        |branch: &str, i, o, k, s, p| Ok(Step::Conv(w.conv(&format!("{name}.{branch}"), i, o, k, s, p)?));
    Ok(vec![
        vec![c("branch3x3", cin, 384, K3, 2, P0)?],
        vec![
            c("branch3x3dbl_1", cin, 64, K1, 1, P0)?,
            c("branch3x3dbl_2", 64, 96, K3, 1, P1)?,
            c("branch3x3dbl_3", 96, 96, K3, 2, P0)?,
        ],
        vec![Step::MaxPoolHalve],
    ])
}

/// InceptionC (FIDInceptionC) with factorised 7x7s: 1x1 | 1x1, 1x7, 7x1 | 1x1, 7x1, 1x7, 7x1,
/// 1x7 | avg pool (padding not counted), 1x1 -> 768 channels.
fn block_c(w: &Weights, name: &str, cin: usize, c7: usize) -> Result<Vec<Branch>> {
    let c = |branch: &str, i, o, k, p| Ok(Step::Conv(w.conv(&format!("{name}.{branch}"), i, o, k, 1, p)?));
    let (k17, p17, k71, p71) = ((1, 7), (0, 3), (7, 1), (3, 0));
    Ok(vec![
        vec![c("branch1x1", cin, 192, K1, P0)?],
        vec![
            c("branch7x7_1", cin, c7, K1, P0)?,
            c("branch7x7_2", c7, c7, k17, p17)?,
            c("branch7x7_3", c7, 192, k71, p71)?,
        ],
        vec![
            c("branch7x7dbl_1", cin, c7, K1, P0)?,
            c("branch7x7dbl_2", c7, c7, k71, p71)?,
            c("branch7x7dbl_3", c7, c7, k17, p17)?,
            c("branch7x7dbl_4", c7, c7, k71, p71)?,
            c("branch7x7dbl_5", c7, 192, k17, p17)?,
        ],
        vec![Step::AvgPool, c("branch_pool", cin, 192, K1, P0)?],
    ])
}

/// InceptionD (grid 17 -> 8): 1x1, 3x3 stride 2 | 1x1, 1x7, 7x1, 3x3 stride 2 | max pool.
fn block_d(w: &Weights, name: &str, cin: usize) -> Result<Vec<Branch>> {
    let c =
        |branch: &str, i, o, k, s, p| Ok(Step::Conv(w.conv(&format!("{name}.{branch}"), i, o, k, s, p)?));
    Ok(vec![
        vec![
            c("branch3x3_1", cin, 192, K1, 1, P0)?,
            c("branch3x3_2", 192, 320, K3, 2, P0)?,
        ],
        vec![
            c("branch7x7x3_1", cin, 192, K1, 1, P0)?,
            c("branch7x7x3_2", 192, 192, (1, 7), 1, (0, 3))?,
            c("branch7x7x3_3", 192, 192, (7, 1), 1, (3, 0))?,
            c("branch7x7x3_4", 192, 192, K3, 2, P0)?,
        ],
        vec![Step::MaxPoolHalve],
    ])
}

/// InceptionE (FIDInceptionE_1 with the average pool, E_2 with the max pool): 1x1 | 1x1,
/// (1x3 and 3x1) | 1x1, 3x3, (1x3 and 3x1) | `pool`, 1x1 -> 2048 channels.
fn block_e(w: &Weights, name: &str, cin: usize, pool: Step) -> Result<Vec<Branch>> {
    let c = |branch: &str, i, o, k, p| w.conv(&format!("{name}.{branch}"), i, o, k, 1, p);
    let pair = |a: &str, b: &str| {
        Ok(Step::Fork(
            c(a, 384, 384, (1, 3), (0, 1))?,
            c(b, 384, 384, (3, 1), (1, 0))?,
        ))
    };
    Ok(vec![
        vec![Step::Conv(c("branch1x1", cin, 320, K1, P0)?)],
        vec![
            Step::Conv(c("branch3x3_1", cin, 384, K1, P0)?),
            pair("branch3x3_2a", "branch3x3_2b")?,
        ],
        vec![
            Step::Conv(c("branch3x3dbl_1", cin, 448, K1, P0)?),
            Step::Conv(c("branch3x3dbl_2", 448, 384, K3, P1)?),
            pair("branch3x3dbl_3a", "branch3x3dbl_3b")?,
        ],
        vec![pool, Step::Conv(c("branch_pool", cin, 192, K1, P0)?)],
    ])
}

/// The weight file being read, and which of its tensors have been used.
struct Weights<'a> {
    file: safetensors::SafeTensors<'a>,
    origin: &'a str,
    gpu: &'a Gpu,
    used: RefCell<BTreeSet<String>>,
}

impl Weights<'_> {
    /// The values of tensor `name`, which must have `shape`, in f64.
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f64>> {
        let fix = format!(
            "use pytorch-fid's FID Inception weights (pt_inception-2015-12-05-6726825d.pth) converted with: \
             {CONVERT_COMMAND}"
        );
        let view = self.file.tensor(name).map_err(|_| {
            weights_error(
                self.origin,
                format!(
                    "has no tensor {name} (expected shape {shape:?}); the file holds another network or \
                     an incomplete state_dict: {fix}"
                ),
            )
        })?;
        self.used.borrow_mut().insert(name.to_string());
        if view.shape() != shape {
            let hint = if name == "fc.weight" && view.shape().first() == Some(&1000) {
                " (1000 classes: torchvision's ImageNet Inception weights, which FID does not use)"
            } else {
                ""
            };
            return Err(weights_error(
                self.origin,
                format!(
                    "tensor {name} has shape {:?} but pytorch-fid's FID Inception-v3 expects {shape:?}{hint}; {fix}",
                    view.shape()
                ),
            ));
        }
        let data = view.data();
        Ok(match view.dtype() {
            safetensors::Dtype::F32 => bytemuck::pod_collect_to_vec::<u8, f32>(data)
                .into_iter()
                .map(f64::from)
                .collect(),
            safetensors::Dtype::F64 => bytemuck::pod_collect_to_vec::<u8, f64>(data),
            safetensors::Dtype::F16 => bytemuck::pod_collect_to_vec::<u8, half::f16>(data)
                .into_iter()
                .map(half::f16::to_f64)
                .collect(),
            safetensors::Dtype::BF16 => bytemuck::pod_collect_to_vec::<u8, half::bf16>(data)
                .into_iter()
                .map(half::bf16::to_f64)
                .collect(),
            other => {
                return Err(weights_error(
                    self.origin,
                    format!("tensor {name} has dtype {other:?}; store F32 (or F16, BF16, F64): {fix}"),
                ))
            }
        })
    }

    /// Tensor `name` uploaded as f32.
    fn upload(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let data: Vec<f32> = self.get(name, shape)?.into_iter().map(|v| v as f32).collect();
        Tensor::from_f32(self.gpu, shape, &data)
    }

    /// The BasicConv2d `name` (`name.conv.weight`, `name.bn.*`) with its BatchNorm folded in.
    fn conv(
        &self,
        name: &str,
        cin: usize,
        cout: usize,
        kernel: (usize, usize),
        stride: usize,
        padding: (usize, usize),
    ) -> Result<ConvBn> {
        let shape = [cout, cin, kernel.0, kernel.1];
        let mut weight = self.get(&format!("{name}.conv.weight"), &shape)?;
        let bn = |p: &str| self.get(&format!("{name}.bn.{p}"), &[cout]);
        let (gamma, beta, mean, var) = (
            bn("weight")?,
            bn("bias")?,
            bn("running_mean")?,
            bn("running_var")?,
        );
        let per_out = cin * kernel.0 * kernel.1;
        let mut bias = vec![0f32; cout];
        for o in 0..cout {
            let s = gamma[o] / (var[o] + BN_EPS).sqrt();
            weight[o * per_out..(o + 1) * per_out]
                .iter_mut()
                .for_each(|v| *v *= s);
            bias[o] = (beta[o] - mean[o] * s) as f32;
        }
        let weight: Vec<f32> = weight.into_iter().map(|v| v as f32).collect();
        Ok(ConvBn {
            weight: Tensor::from_f32(self.gpu, &shape, &weight)?,
            bias: Tensor::from_f32(self.gpu, &[cout], &bias)?,
            opts: ConvOptions::default()
                .stride(stride)
                .padding_hw(padding.0, padding.1),
        })
    }

    /// Errors on a tensor the network does not use (`num_batches_tracked` counters aside).
    fn check_all_used(&self) -> Result<()> {
        let used = self.used.borrow();
        let mut extra: Vec<&str> = self
            .file
            .names()
            .into_iter()
            .filter(|k| !used.contains(*k) && !k.ends_with(".num_batches_tracked"))
            .collect();
        extra.sort_unstable();
        match extra.first() {
            None => Ok(()),
            Some(first) => Err(weights_error(
                self.origin,
                format!(
                    "has {} tensor(s) that pytorch-fid's FID Inception-v3 does not have (e.g. {first}); \
                     it holds another network (torchvision's Inception has AuxLogits.*): use pytorch-fid's \
                     pt_inception-2015-12-05-6726825d.pth converted with: {CONVERT_COMMAND}",
                    extra.len()
                ),
            )),
        }
    }
}

fn weights_error(path: &str, msg: String) -> Error {
    Error::Weights {
        path: path.to_string(),
        msg,
    }
}
