//! The README's PyTorch port (`examples/pytorch_block.rs`): the block on the device equals the
//! same composition of the plain-Rust CPU references, and every weight gets a finite gradient.

#[path = "../../examples/pytorch_block.rs"]
#[allow(dead_code)]
mod pytorch_block;

use crate::common::{assert_close, download, gpu};
use crate::cpu;
use pytorch_block::{block, BlockParams, CHANNELS as C, CONTEXT, HEADS};
use wgdiff::ops::random::Rng;
use wgdiff::ops::{ConvOptions, GeluForm, Unary};
use wgdiff::DType;

#[test]
fn the_ported_pytorch_block_matches_its_cpu_composition_and_differentiates() {
    let (b, h, w) = (2, 8, 6);
    let p = BlockParams::random(gpu(), 3).unwrap();
    let mut rng = Rng::new(4);
    let x = rng.normal(gpu(), &[b, C, h, w], 0.0, 1.0, DType::F32).unwrap();
    let ctx = rng.normal(gpu(), &[b, CONTEXT, C], 0.0, 1.0, DType::F32).unwrap();
    let y = block(&p, &x, &ctx).unwrap();

    let (h2, tokens, d) = (h / 2, h / 2 * w, C / HEADS);
    let opts = ConvOptions::default().stride_hw(2, 1).padding(1);
    let (conv, _) = cpu::conv2d(
        &download(&x),
        [b, C, h, w],
        &download(&p.conv_w),
        [C, C, 3, 3],
        &opts,
    );
    let bias = download(&p.conv_b);
    let conv: Vec<f64> = conv
        .iter()
        .enumerate()
        .map(|(i, v)| v + bias[i / tokens % C])
        .collect();
    let t = cpu::permute(&conv, &[b, C, tokens], &[0, 2, 1]);
    let t = cpu::layer_norm(&t, C, &download(&p.norm_g), &download(&p.norm_b), 1e-5);
    let project = |z: &[f64], len: usize, wt: &wgdiff::Tensor| {
        let z = cpu::matmul(z, &[b, len, C], false, &download(wt), &[C, C], false);
        cpu::permute(&z, &[b, len, HEADS, d], &[0, 2, 1, 3])
    };
    let ctx_values = download(&ctx);
    let (q, k, v) = (
        project(&t, tokens, &p.wq),
        project(&ctx_values, CONTEXT, &p.wk),
        project(&ctx_values, CONTEXT, &p.wv),
    );
    let attn = cpu::Attn {
        len_q: tokens,
        len_kv: CONTEXT,
        d,
        dv: d,
        scale: 0.1,
    };
    let a = cpu::attention(&q, &k, &v, attn);
    let a = cpu::permute(&a, &[b, HEADS, tokens, d], &[0, 2, 1, 3]);
    let mixed = cpu::matmul(&a, &[b, tokens, C], false, &download(&p.wo), &[C, C], false);
    let gelu = cpu::unary(Unary::Gelu(GeluForm::Exact), &mixed);
    let t: Vec<f64> = t.iter().zip(&gelu).map(|(a, b)| a + b).collect();
    let t = cpu::permute(&t, &[b, tokens, C], &[0, 2, 1]);
    let want = cpu::resize_nearest(&t, &[b, C, h2, w], h, w);
    assert_eq!(y.shape(), [b, C, h, w]);
    assert_close("ported block", &download(&y), &want, 1e-4);

    let loss = y.square().unwrap().sum(&[0, 1, 2, 3], false).unwrap();
    wgdiff::backward(&loss).unwrap();
    for (name, t) in [
        ("conv_w", &p.conv_w),
        ("norm_g", &p.norm_g),
        ("wq", &p.wq),
        ("wk", &p.wk),
        ("wo", &p.wo),
    ] {
        let g = download(&t.grad().unwrap_or_else(|| panic!("{name} has no gradient")));
        assert!(
            g.iter().all(|v| v.is_finite()) && g.iter().any(|&v| v != 0.0),
            "{name}: {g:?}"
        );
    }
}
