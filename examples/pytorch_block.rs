//! A PyTorch block ported op for op to the public API (the README shows the two side by side):
//! a strided conv stem, LayerNorm over channels, cross-attention with an explicit scale, exact
//! GELU and nearest upsampling, forward and backward. Run: `cargo run --release --example pytorch_block`.

use wgdiff::ops::attention::attention;
use wgdiff::ops::random::Rng;
use wgdiff::ops::{ConvOptions, GeluForm};
use wgdiff::{DType, Gpu, Result, Tensor};

/// Channels, attention heads and context tokens of the block.
pub const CHANNELS: usize = 32;
pub const HEADS: usize = 4;
pub const CONTEXT: usize = 7;

/// The block's weights, PyTorch layouts (conv [Cout, Cin, KH, KW], linear as x @ W).
pub struct BlockParams {
    pub conv_w: Tensor,
    pub conv_b: Tensor,
    pub norm_g: Tensor,
    pub norm_b: Tensor,
    pub wq: Tensor,
    pub wk: Tensor,
    pub wv: Tensor,
    pub wo: Tensor,
}

impl BlockParams {
    /// Random weights that track gradients.
    pub fn random(gpu: &Gpu, seed: u64) -> Result<BlockParams> {
        let mut rng = Rng::new(seed);
        let c = CHANNELS;
        let mut normal = |shape: &[usize], std: f32| -> Result<Tensor> {
            Ok(rng.normal(gpu, shape, 0.0, std, DType::F32)?.requires_grad())
        };
        let linear = 1.0 / (c as f32).sqrt();
        Ok(BlockParams {
            conv_w: normal(&[c, c, 3, 3], 1.0 / (9.0 * c as f32).sqrt())?,
            conv_b: normal(&[c], 0.1)?,
            norm_g: Tensor::full(gpu, &[c], 1.0, DType::F32)?.requires_grad(),
            norm_b: Tensor::zeros(gpu, &[c], DType::F32)?.requires_grad(),
            wq: normal(&[c, c], linear)?,
            wk: normal(&[c, c], linear)?,
            wv: normal(&[c, c], linear)?,
            wo: normal(&[c, c], linear)?,
        })
    }
}

/// x [B, C, H, W] (H even), ctx [B, CONTEXT, C] -> [B, C, H, W]; the PyTorch lines it ports are
/// in the comments.
pub fn block(p: &BlockParams, x: &Tensor, ctx: &Tensor) -> Result<Tensor> {
    let [b, c, h, w] = x.shape().try_into().expect("x is [B, C, H, W]");
    let d = c / HEADS;
    // h = F.conv2d(x, conv_w, conv_b, stride=(2, 1), padding=(1, 1))
    let opts = ConvOptions::default().stride_hw(2, 1).padding(1);
    let y = x.conv2d(&p.conv_w, Some(&p.conv_b), opts)?;
    let (h2, tokens) = (h / 2, h / 2 * w);
    // t = F.layer_norm(h.flatten(2).transpose(1, 2), (C,), norm_g, norm_b)
    let t = y.reshape(&[b, c, tokens])?.transpose(1, 2)?;
    let t = t.layer_norm(&p.norm_g, &p.norm_b, 1e-5)?;
    // q = (t @ wq).view(B, T, H, D).transpose(1, 2); k, v from the context the same way
    let heads = |z: &Tensor, len: usize| z.reshape(&[b, len, HEADS, d])?.transpose(1, 2);
    let q = heads(&t.matmul(&p.wq)?, tokens)?;
    let k = heads(&ctx.matmul(&p.wk)?, CONTEXT)?;
    let v = heads(&ctx.matmul(&p.wv)?, CONTEXT)?;
    // a = F.scaled_dot_product_attention(q, k, v, scale=0.1)
    let a = attention(&q, &k, &v, Some(0.1))?;
    // t = t + F.gelu(a.transpose(1, 2).reshape(B, T, C) @ wo)
    let a = a.transpose(1, 2)?.reshape(&[b, tokens, c])?;
    let t = t.add(&a.matmul(&p.wo)?.gelu(GeluForm::Exact)?)?;
    // F.interpolate(t.transpose(1, 2).reshape(B, C, H/2, W), scale_factor=(2, 1), mode="nearest")
    t.transpose(1, 2)?.reshape(&[b, c, h2, w])?.upsample_nearest(2, 1)
}

fn main() -> Result<()> {
    let gpu = Gpu::new_blocking(Default::default())?;
    let p = BlockParams::random(&gpu, 0)?;
    let mut rng = Rng::new(1);
    let x = rng.normal(&gpu, &[2, CHANNELS, 8, 6], 0.0, 1.0, DType::F32)?;
    let ctx = rng.normal(&gpu, &[2, CONTEXT, CHANNELS], 0.0, 1.0, DType::F32)?;
    let y = block(&p, &x, &ctx)?;
    let loss = y.square()?.sum(&[0, 1, 2, 3], false)?;
    wgdiff::backward(&loss)?;
    let grad_norm: f32 =
        p.wq.grad()
            .expect("wq has a gradient")
            .to_vec()?
            .iter()
            .map(|g| g * g)
            .sum();
    println!(
        "output {:?}, sum of squares {:.4}, |d loss / d wq| {:.4}",
        y.shape(),
        loss.to_vec()?[0],
        grad_norm.sqrt()
    );
    Ok(())
}
