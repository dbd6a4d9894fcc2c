//! Plain-Rust f64 reference implementations of every engine op, written for clarity.

use wgdiff::ops::{Binary, GeluForm, Unary};

pub fn unary(op: Unary, x: &[f64]) -> Vec<f64> {
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    x.iter()
        .map(|&v| match op {
            Unary::Neg => -v,
            Unary::Exp => v.exp(),
            Unary::Log => v.ln(),
            Unary::Sqrt => v.sqrt(),
            Unary::Relu => v.max(0.0),
            Unary::Silu => v * sig(v),
            // x Phi(x) = x erfc(-x / sqrt 2) / 2 (no cancellation in the lower tail)
            Unary::Gelu(GeluForm::Exact) => 0.5 * v * libm::erfc(-v / std::f64::consts::SQRT_2),
            Unary::Gelu(GeluForm::Tanh) => {
                0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v.powi(3))).tanh())
            }
            Unary::Sigmoid => sig(v),
            Unary::Tanh => v.tanh(),
            Unary::Clamp(lo, hi) => v.clamp(lo as f64, hi as f64),
            Unary::Pow(p) => v.powf(p as f64),
            Unary::Affine(a, b) => a as f64 * v + b as f64,
            Unary::Reciprocal(a) => a as f64 / v,
            Unary::Abs => v.abs(),
            Unary::Square => v * v,
            Unary::Sin => v.sin(),
            Unary::Cos => v.cos(),
        })
        .collect()
}

pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Multi-index of flat index `i` in `shape`.
pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

pub fn broadcast_index(out_idx: &[usize], shape: &[usize]) -> usize {
    let pad = out_idx.len() - shape.len();
    let st = strides(shape);
    (0..shape.len())
        .map(|d| {
            if shape[d] == 1 {
                0
            } else {
                out_idx[d + pad] * st[d]
            }
        })
        .sum()
}

pub fn binary(op: Binary, a: &[f64], sa: &[usize], b: &[f64], sb: &[usize], out: &[usize]) -> Vec<f64> {
    let n: usize = out.iter().product();
    (0..n)
        .map(|i| {
            let idx = unravel(i, out);
            let (l, r) = (a[broadcast_index(&idx, sa)], b[broadcast_index(&idx, sb)]);
            match op {
                Binary::Add => l + r,
                Binary::Sub => l - r,
                Binary::Mul => l * r,
                Binary::Div => l / r,
                Binary::Pow => l.powf(r),
                Binary::Maximum => l.max(r),
                Binary::Minimum => l.min(r),
                Binary::Equal => (l == r) as u8 as f64,
            }
        })
        .collect()
}

/// Sum/mean/max over `axes` (keepdim layout is the same data).
pub fn reduce(x: &[f64], shape: &[usize], axes: &[usize], kind: &str) -> Vec<f64> {
    let out_shape: Vec<usize> = (0..shape.len())
        .map(|d| if axes.contains(&d) { 1 } else { shape[d] })
        .collect();
    let n_out: usize = out_shape.iter().product();
    let init = if kind == "max" { f64::NEG_INFINITY } else { 0.0 };
    let mut out = vec![init; n_out];
    let len: usize = axes.iter().map(|&a| shape[a]).product();
    for (i, &v) in x.iter().enumerate() {
        let o = broadcast_index(&unravel(i, shape), &out_shape);
        out[o] = if kind == "max" { out[o].max(v) } else { out[o] + v };
    }
    if kind == "mean" {
        out.iter_mut().for_each(|v| *v /= len as f64);
    }
    out
}

/// C[b] = op(A[b]) op(B[b]); a 2-D operand is shared by every batch.
#[allow(clippy::too_many_arguments)]
pub fn matmul(a: &[f64], sa: &[usize], ta: bool, b: &[f64], sb: &[usize], tb: bool) -> Vec<f64> {
    let dims = |s: &[usize], t: bool| {
        let r = s.len();
        let (rows, cols) = (s[r - 2], s[r - 1]);
        let batch: usize = s[..r - 2].iter().product();
        (batch, rows, cols, t)
    };
    let (ba, ra, ca, _) = dims(sa, ta);
    let (bb, rb, cb, _) = dims(sb, tb);
    let (m, k) = if ta { (ca, ra) } else { (ra, ca) };
    let n = if tb { rb } else { cb };
    let batch = ba.max(bb);
    let mut c = vec![0.0; batch * m * n];
    for bi in 0..batch {
        let ao = if ba == 1 { 0 } else { bi * ra * ca };
        let bo = if bb == 1 { 0 } else { bi * rb * cb };
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0;
                for p in 0..k {
                    let av = if ta {
                        a[ao + p * ca + i]
                    } else {
                        a[ao + i * ca + p]
                    };
                    let bv = if tb {
                        b[bo + j * cb + p]
                    } else {
                        b[bo + p * cb + j]
                    };
                    acc += av * bv;
                }
                c[(bi * m + i) * n + j] = acc;
            }
        }
    }
    c
}

/// Neumaier's compensated sum: the rounding error does not grow with the number of terms, so
/// finite differences through sums of ~10^5 terms stay accurate (a plain f64 sum's noise of
/// ~sqrt(n) ulps, divided by the step, swamps gradients of ~1/n).
pub fn sum_compensated(values: impl IntoIterator<Item = f64>) -> f64 {
    let (mut sum, mut lost) = (0.0f64, 0.0f64);
    for v in values {
        let t = sum + v;
        lost += if sum.abs() >= v.abs() {
            (sum - t) + v
        } else {
            (v - t) + sum
        };
        sum = t;
    }
    sum + lost
}

pub fn softmax(x: &[f64], len: usize) -> Vec<f64> {
    x.chunks(len)
        .flat_map(|row| {
            let mx = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = row.iter().map(|v| (v - mx).exp()).collect();
            let s = sum_compensated(e.iter().copied());
            e.into_iter().map(move |v| v / s)
        })
        .collect()
}

pub fn permute(x: &[f64], shape: &[usize], perm: &[usize]) -> Vec<f64> {
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let st = strides(shape);
    (0..x.len())
        .map(|i| {
            let idx = unravel(i, &out_shape);
            x[perm
                .iter()
                .enumerate()
                .map(|(d, &p)| idx[d] * st[p])
                .sum::<usize>()]
        })
        .collect()
}

/// Philox4x32-10 block for (counter, key): the reference the GPU generator must match bit for bit.
pub fn philox(mut c: [u32; 4], mut k: [u32; 2]) -> [u32; 4] {
    for _ in 0..10 {
        let p0 = 0xD2511F53u64 * c[0] as u64;
        let p1 = 0xCD9E8D57u64 * c[2] as u64;
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
        k = [k[0].wrapping_add(0x9E3779B9), k[1].wrapping_add(0xBB67AE85)];
    }
    c
}

/// Direct 7-loop conv2d: x [N,Cin,H,W], w [Cout,Cin/g,KH,KW] -> [N,Cout,OH,OW].
pub fn conv2d(
    x: &[f64],
    xs: [usize; 4],
    w: &[f64],
    ws: [usize; 4],
    o: &wgdiff::ops::ConvOptions,
) -> (Vec<f64>, [usize; 4]) {
    let [n, cin, h, wd] = xs;
    let [cout, cin_g, kh, kw] = ws;
    let g = o.groups;
    let oh = (h + 2 * o.padding.0 - o.dilation.0 * (kh - 1) - 1) / o.stride.0 + 1;
    let ow = (wd + 2 * o.padding.1 - o.dilation.1 * (kw - 1) - 1) / o.stride.1 + 1;
    let cout_g = cout / g;
    let mut y = vec![0.0; n * cout * oh * ow];
    for b in 0..n {
        for co in 0..cout {
            let grp = co / cout_g;
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = 0.0;
                    for ci in 0..cin_g {
                        for r in 0..kh {
                            for c in 0..kw {
                                let ih = (i * o.stride.0 + r * o.dilation.0) as isize - o.padding.0 as isize;
                                let iw = (j * o.stride.1 + c * o.dilation.1) as isize - o.padding.1 as isize;
                                if ih < 0 || iw < 0 || ih >= h as isize || iw >= wd as isize {
                                    continue;
                                }
                                let xv =
                                    x[((b * cin + grp * cin_g + ci) * h + ih as usize) * wd + iw as usize];
                                acc += xv * w[((co * cin_g + ci) * kh + r) * kw + c];
                            }
                        }
                    }
                    y[((b * cout + co) * oh + i) * ow + j] = acc;
                }
            }
        }
    }
    (y, [n, cout, oh, ow])
}

/// Transposed conv2d as the scatter of every input element through the kernel:
/// x [N,Cin,H,W], w [Cin,Cout/g,KH,KW].
pub fn conv_transpose2d(
    x: &[f64],
    xs: [usize; 4],
    w: &[f64],
    ws: [usize; 4],
    o: &wgdiff::ops::ConvOptions,
    out_pad: (usize, usize),
) -> (Vec<f64>, [usize; 4]) {
    let [n, cin, h, wd] = xs;
    let [_, cout_g, kh, kw] = ws;
    let g = o.groups;
    let cin_g = cin / g;
    let cout = cout_g * g;
    let oh = (h - 1) * o.stride.0 + o.dilation.0 * (kh - 1) + out_pad.0 + 1 - 2 * o.padding.0;
    let ow = (wd - 1) * o.stride.1 + o.dilation.1 * (kw - 1) + out_pad.1 + 1 - 2 * o.padding.1;
    let mut y = vec![0.0; n * cout * oh * ow];
    for b in 0..n {
        for ci in 0..cin {
            let grp = ci / cin_g;
            for i in 0..h {
                for j in 0..wd {
                    let xv = x[((b * cin + ci) * h + i) * wd + j];
                    for col in 0..cout_g {
                        for r in 0..kh {
                            for c in 0..kw {
                                let oi = (i * o.stride.0 + r * o.dilation.0) as isize - o.padding.0 as isize;
                                let oj = (j * o.stride.1 + c * o.dilation.1) as isize - o.padding.1 as isize;
                                if oi < 0 || oj < 0 || oi >= oh as isize || oj >= ow as isize {
                                    continue;
                                }
                                let co = grp * cout_g + col;
                                y[((b * cout + co) * oh + oi as usize) * ow + oj as usize] +=
                                    xv * w[((ci * cout_g + col) * kh + r) * kw + c];
                            }
                        }
                    }
                }
            }
        }
    }
    (y, [n, cout, oh, ow])
}

/// GroupNorm of [N, C, ...] over `groups` channel groups (or, with `per_position`, LayerNorm
/// over all channels at each position), then `* gamma[c] + beta[c]`.
pub fn norm(
    x: &[f64],
    shape: &[usize],
    groups: usize,
    per_position: bool,
    gamma: &[f64],
    beta: &[f64],
    eps: f64,
) -> Vec<f64> {
    let (n, c) = (shape[0], shape[1]);
    let s: usize = shape[2..].iter().product();
    let cg = c / groups;
    let mut rows: Vec<Vec<usize>> = Vec::new();
    for ni in 0..n {
        for g in 0..groups {
            let channels = g * cg..(g + 1) * cg;
            if per_position {
                for pos in 0..s {
                    rows.push(channels.clone().map(|ci| (ni * c + ci) * s + pos).collect());
                }
            } else {
                rows.push(
                    channels
                        .flat_map(|ci| (0..s).map(move |pos| (ni * c + ci) * s + pos))
                        .collect(),
                );
            }
        }
    }
    let mut y = vec![0.0; x.len()];
    for row in rows {
        let m = row.len() as f64;
        let mean = row.iter().map(|&i| x[i]).sum::<f64>() / m;
        let var = row.iter().map(|&i| (x[i] - mean).powi(2)).sum::<f64>() / m;
        let rstd = 1.0 / (var + eps).sqrt();
        for &i in &row {
            let ci = (i / s) % c;
            y[i] = (x[i] - mean) * rstd * gamma[ci] + beta[ci];
        }
    }
    y
}

/// LayerNorm of every row of `d` consecutive values, then `* gamma[j] + beta[j]`.
pub fn layer_norm(x: &[f64], d: usize, gamma: &[f64], beta: &[f64], eps: f64) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|row| {
            let mean = row.iter().sum::<f64>() / d as f64;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
            let rstd = 1.0 / (var + eps).sqrt();
            row.iter()
                .zip(gamma.iter().zip(beta))
                .map(move |(v, (g, b))| (v - mean) * rstd * g + b)
        })
        .collect()
}

/// silu(group_norm(x) * (1 + scale[n, c]) + shift[n, c]).
#[allow(clippy::too_many_arguments)]
pub fn group_norm_scale_shift_silu(
    x: &[f64],
    shape: &[usize],
    groups: usize,
    gamma: &[f64],
    beta: &[f64],
    scale: &[f64],
    shift: &[f64],
    eps: f64,
) -> Vec<f64> {
    let s: usize = shape[2..].iter().product();
    norm(x, shape, groups, false, gamma, beta, eps)
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let z = v * (1.0 + scale[i / s]) + shift[i / s];
            z / (1.0 + (-z).exp())
        })
        .collect()
}

/// PyTorch's `F.interpolate(size=(out_h, out_w), mode="nearest")`: output pixel (y, x)
/// copies input pixel (floor(y * H / out_h), floor(x * W / out_w)).
pub fn resize_nearest(x: &[f64], shape: &[usize], out_h: usize, out_w: usize) -> Vec<f64> {
    let (planes, h, w) = (shape[0] * shape[1], shape[2], shape[3]);
    let mut y = Vec::with_capacity(planes * out_h * out_w);
    for p in 0..planes {
        for oy in 0..out_h {
            for ox in 0..out_w {
                y.push(x[(p * h + oy * h / out_h) * w + ox * w / out_w]);
            }
        }
    }
    y
}

/// Mean over `k` x `k` windows every `stride` pixels, no padding.
pub fn avg_pool2d(x: &[f64], shape: &[usize], k: usize, stride: usize) -> Vec<f64> {
    pool2d(x, shape, k, stride, 0, |window| {
        window.iter().sum::<f64>() / (k * k) as f64
    })
}

/// PyTorch's `F.avg_pool2d(x, k, stride, pad, count_include_pad)` (pad <= k / 2, floor mode).
pub fn avg_pool2d_padded(
    x: &[f64],
    shape: &[usize],
    k: usize,
    stride: usize,
    pad: usize,
    count_include_pad: bool,
) -> Vec<f64> {
    pool2d(x, shape, k, stride, pad, |window| {
        let count = if count_include_pad { k * k } else { window.len() };
        window.iter().sum::<f64>() / count as f64
    })
}

/// PyTorch's `F.max_pool2d(x, k, stride, pad)` (padding never wins).
pub fn max_pool2d(x: &[f64], shape: &[usize], k: usize, stride: usize, pad: usize) -> Vec<f64> {
    pool2d(x, shape, k, stride, pad, |window| {
        window.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    })
}

/// Applies `f` to the in-plane pixels of every `k` x `k` window at (o * stride - pad) of each
/// [H, W] plane of an NCHW tensor.
fn pool2d(
    x: &[f64],
    shape: &[usize],
    k: usize,
    stride: usize,
    pad: usize,
    f: impl Fn(&[f64]) -> f64,
) -> Vec<f64> {
    let (planes, h, w) = (shape[0] * shape[1], shape[2], shape[3]);
    let (oh, ow) = ((h + 2 * pad - k) / stride + 1, (w + 2 * pad - k) / stride + 1);
    let mut y = Vec::with_capacity(planes * oh * ow);
    for p in 0..planes {
        for oy in 0..oh {
            for ox in 0..ow {
                let (y0, x0) = (
                    (oy * stride) as isize - pad as isize,
                    (ox * stride) as isize - pad as isize,
                );
                let mut window = Vec::new();
                for iy in y0..y0 + k as isize {
                    for ix in x0..x0 + k as isize {
                        if iy >= 0 && ix >= 0 && iy < h as isize && ix < w as isize {
                            window.push(x[(p * h + iy as usize) * w + ix as usize]);
                        }
                    }
                }
                y.push(f(&window));
            }
        }
    }
    y
}

/// PyTorch's `F.interpolate(mode="bilinear", align_corners=False)`: source coordinate
/// max((dst + 0.5) * in / out - 0.5, 0), taps floor(src) and the next one (clamped).
pub fn resize_bilinear(x: &[f64], shape: &[usize], out_h: usize, out_w: usize) -> Vec<f64> {
    // (index, weight) of the two taps of output index o.
    let taps = |o: usize, n_in: usize, n_out: usize| -> [(usize, f64); 2] {
        let src = ((o as f64 + 0.5) * n_in as f64 / n_out as f64 - 0.5).max(0.0);
        let i0 = src.floor() as usize;
        let t = src - i0 as f64;
        [(i0, 1.0 - t), ((i0 + 1).min(n_in - 1), t)]
    };
    let (planes, h, w) = (shape[0] * shape[1], shape[2], shape[3]);
    let mut y = Vec::with_capacity(planes * out_h * out_w);
    for p in 0..planes {
        for oy in 0..out_h {
            for ox in 0..out_w {
                let mut acc = 0.0;
                for (iy, wy) in taps(oy, h, out_h) {
                    for (ix, wx) in taps(ox, w, out_w) {
                        acc += wy * wx * x[(p * h + iy) * w + ix];
                    }
                }
                y.push(acc);
            }
        }
    }
    y
}

/// PyTorch's `F.interpolate(mode="bicubic", align_corners=False)`: source coordinate
/// (dst + 0.5) * in / out - 0.5, cubic convolution with A = -0.75, indices clamped.
pub fn resize_bicubic(x: &[f64], shape: &[usize], out_h: usize, out_w: usize) -> Vec<f64> {
    const A: f64 = -0.75;
    let near = |t: f64| ((A + 2.0) * t - (A + 3.0)) * t * t + 1.0;
    let far = |t: f64| ((A * t - 5.0 * A) * t + 8.0 * A) * t - 4.0 * A;
    // (index, weight) of the four taps of output index o.
    let taps = |o: usize, n_in: usize, n_out: usize| -> Vec<(usize, f64)> {
        let src = (o as f64 + 0.5) * n_in as f64 / n_out as f64 - 0.5;
        let f = src.floor();
        let t = src - f;
        let w = [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)];
        (0..4)
            .map(|m| {
                let idx = (f as i64 - 1 + m as i64).clamp(0, n_in as i64 - 1) as usize;
                (idx, w[m])
            })
            .collect()
    };
    let (planes, h, w) = (shape[0] * shape[1], shape[2], shape[3]);
    let mut y = Vec::with_capacity(planes * out_h * out_w);
    for p in 0..planes {
        for oy in 0..out_h {
            for ox in 0..out_w {
                let mut acc = 0.0;
                for (iy, wy) in taps(oy, h, out_h) {
                    for (ix, wx) in taps(ox, w, out_w) {
                        acc += wy * wx * x[(p * h + iy) * w + ix];
                    }
                }
                y.push(acc);
            }
        }
    }
    y
}

/// Sizes and scale of attention over P problems: q [P, Lq, d], k [P, Lkv, d], v [P, Lkv, dv].
#[derive(Clone, Copy, Debug)]
pub struct Attn {
    pub len_q: usize,
    pub len_kv: usize,
    pub d: usize,
    pub dv: usize,
    pub scale: f64,
}

impl Attn {
    /// Self-attention over `len` positions, head dim `d`, the default scale 1 / sqrt(d).
    pub fn square(len: usize, d: usize) -> Attn {
        Attn {
            len_q: len,
            len_kv: len,
            d,
            dv: d,
            scale: 1.0 / (d as f64).sqrt(),
        }
    }
}

/// softmax(q k^T * scale) v, rows `rows` of the [P, Lq, dv] output only (each row is dv
/// contiguous values in the result).
pub fn attention_rows(q: &[f64], k: &[f64], v: &[f64], a: Attn, rows: &[usize]) -> Vec<f64> {
    let (d, dv) = (a.d, a.dv);
    let mut out = Vec::with_capacity(rows.len() * dv);
    for &row in rows {
        let first = (row / a.len_q) * a.len_kv;
        let qi = &q[row * d..(row + 1) * d];
        let scores: Vec<f64> = (first..first + a.len_kv)
            .map(|j| (0..d).map(|c| qi[c] * k[j * d + c]).sum::<f64>() * a.scale)
            .collect();
        let p = softmax(&scores, a.len_kv);
        for c in 0..dv {
            out.push((0..a.len_kv).map(|j| p[j] * v[(first + j) * dv + c]).sum());
        }
    }
    out
}

/// [`attention_rows`] over every row.
pub fn attention(q: &[f64], k: &[f64], v: &[f64], a: Attn) -> Vec<f64> {
    let rows: Vec<usize> = (0..q.len() / a.d).collect();
    attention_rows(q, k, v, a, &rows)
}

/// The spatial self-attention layer on x [B, C, H, W]: q, k, v = 1x1 projection (channels
/// q, k, v, each `heads` groups of C / heads), attention per head over the H*W positions,
/// heads merged, 1x1 output projection.
pub fn spatial_self_attention(
    x: &[f64],
    shape: &[usize],
    (wqkv, bqkv, wo, bo): (&[f64], &[f64], &[f64], &[f64]),
    heads: usize,
) -> Vec<f64> {
    let (b, c, len) = (shape[0], shape[1], shape[2] * shape[3]);
    let d = c / heads;
    let mut out = vec![0.0; x.len()];
    for n in 0..b {
        let xn = &x[n * c * len..(n + 1) * c * len];
        // proj[o][s] = sum_i w[o][i] x[i][s] + bias[o]
        let proj: Vec<f64> = (0..3 * c * len)
            .map(|i| {
                let (o, s) = (i / len, i % len);
                bqkv[o] + (0..c).map(|ci| wqkv[o * c + ci] * xn[ci * len + s]).sum::<f64>()
            })
            .collect();
        // part [heads, L, d] of q (0), k (1) or v (2)
        let part = |which: usize| -> Vec<f64> {
            let mut t = vec![0.0; heads * len * d];
            for h in 0..heads {
                for s in 0..len {
                    for e in 0..d {
                        t[(h * len + s) * d + e] = proj[(which * c + h * d + e) * len + s];
                    }
                }
            }
            t
        };
        let att = attention(&part(0), &part(1), &part(2), Attn::square(len, d));
        for o in 0..c {
            for s in 0..len {
                let mut acc = bo[o];
                for h in 0..heads {
                    for e in 0..d {
                        acc += wo[o * c + h * d + e] * att[(h * len + s) * d + e];
                    }
                }
                out[n * c * len + o * len + s] = acc;
            }
        }
    }
    out
}

/// Per-row cross-entropy `logsumexp(x_i) - x_i[label_i]` of logits rows of `classes`.
pub fn cross_entropy_rows(x: &[f64], classes: usize, labels: &[u32]) -> Vec<f64> {
    x.chunks(classes)
        .zip(labels)
        .map(|(row, &label)| {
            let mx = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lse = mx + row.iter().map(|v| (v - mx).exp()).sum::<f64>().ln();
            lse - row[label as usize]
        })
        .collect()
}
