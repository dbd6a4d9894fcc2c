// Normalization of an NCHW tensor viewed as [N, C, S] (S = H*W), one row per workgroup:
// GroupNorm (a row is one (n, group): Cg channels x S positions) and channel LayerNorm (a row
// is one (n, position): C channels). Each row is normalized, xhat = (x - mean) * rstd, then
// z = xhat * a[n, c] + b[n, c] and y = act(z) (identity or SiLU). COEF picks where a, b come
// from: "table" reads them from gamma/beta at n * coef_stride + c (plain norms pass the
// per-channel gamma, beta with coef_stride 0); "film" computes a = gamma (1 + scale),
// b = beta (1 + scale) + shift, so GroupNorm + FiLM + SiLU is one forward kernel.
// Backward (tables only; film_coefs writes the FiLM tables, coef_stride C),
// with dz = gy * act'(z), dxh = dz * a:
//   norm_backward_x:    dx = rstd * (dxh - mean(dxh) - xhat * mean(dxh * xhat)) per row
//   norm_backward_coef: per (n, c): da = sum_s dz * xhat, db = sum_s dz
//   film_grads:         dscale = da gamma + db beta, and da (1 + scale), db (1 + scale)
//                       (summed over n on the Rust side into dgamma, dbeta).

const WG: u32 = 64u;
const ACT: u32 = {{ACT}}u; // 0 identity, 1 silu
// OUT: first output binding (1 + the number of inputs).

struct Params {
    rows: u32,        // rows normalized independently
    len: u32,         // elements per row
    batch: u32,       // N
    c: u32,           // channels
    s: u32,           // positions per channel (H*W)
    cg: u32,          // channels per row (channels per group, or C for layer norm)
    sr: u32,          // position blocks normalized separately (1: group norm, S: layer norm)
    coef_stride: u32, // a/b index is n * coef_stride + c
    eps: f32,
}
@group(0) @binding(0) var<uniform> p: Params;

// norm_forward: (x, gamma, beta[, scale, shift]) -> (y, stats)
// film_coefs: the same inputs as the fused forward -> (fa, fb)
// norm_backward_x: (x, a, b, stats, gy) -> gx; norm_backward_coef: the same inputs -> (ga, gb)
// film_grads: (da, gamma, beta, scale, db) -> (gscale, gamma_part, beta_part)
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> gamma: array<{{T}}>; // or the table a
@group(0) @binding(3) var<storage, read> beta: array<{{T}}>; // or the table b
@group(0) @binding(4) var<storage, read> scale: array<{{T}}>;
@group(0) @binding(5) var<storage, read> shift: array<{{T}}>;
@group(0) @binding({{OUT}}) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding({{OUT}} + 1) var<storage, read_write> stats: array<f32>; // (mean, rstd) per row
@group(0) @binding(6) var<storage, read_write> fa: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> fb: array<{{T}}>;
@group(0) @binding(4) var<storage, read> saved: array<f32>;
@group(0) @binding(5) var<storage, read> gy: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> gx: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> ga: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> gb: array<{{T}}>;
@group(0) @binding(1) var<storage, read> da: array<{{T}}>;
@group(0) @binding(5) var<storage, read> db: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> gscale: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> gamma_part: array<{{T}}>;
@group(0) @binding(8) var<storage, read_write> beta_part: array<{{T}}>;

var<workgroup> part: array<vec2<f32>, WG>;

// Sum of `v` over the workgroup (every invocation gets the total).
fn wg_sum(lid: u32, v: vec2<f32>) -> vec2<f32> {
    part[lid] = v;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k >>= 1u) {
        if (lid < k) {
            part[lid] += part[lid + k];
        }
        workgroupBarrier();
    }
    let total = part[0];
    workgroupBarrier();
    return total;
}

// Element j of row r: (flat index, n, c).
fn elem(r: u32, j: u32) -> vec3<u32> {
    let groups = p.c / p.cg;
    let sj = p.s / p.sr;
    let n = r / (groups * p.sr);
    let g = (r / p.sr) % groups;
    let c = g * p.cg + j / sj;
    let pos = (r % p.sr) * sj + j % sj;
    return vec3<u32>((n * p.c + c) * p.s + pos, n, c);
}

// The row holding position `pos` of channel c of sample n.
fn row_of(n: u32, c: u32, pos: u32) -> u32 {
    return (n * (p.c / p.cg) + c / p.cg) * p.sr + pos / (p.s / p.sr);
}

fn coef_table(n: u32, c: u32) -> vec2<f32> {
    let k = n * p.coef_stride + c;
    return vec2<f32>(f32(gamma[k]), f32(beta[k]));
}

fn coef_film(n: u32, c: u32) -> vec2<f32> {
    let k = 1.0 + f32(scale[n * p.c + c]);
    return vec2<f32>(f32(gamma[c]) * k, f32(beta[c]) * k + f32(shift[n * p.c + c]));
}

fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(-v));
}

fn act(z: f32) -> f32 {
    return select(z, z * sigmoid(z), ACT == 1u);
}

fn act_grad(z: f32) -> f32 {
    let s = sigmoid(z);
    return select(1.0, s * (1.0 + z * (1.0 - s)), ACT == 1u);
}

@compute @workgroup_size(64)
fn norm_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.rows) { return; }
    var sum = 0.0;
    for (var j = lid; j < p.len; j += WG) {
        sum += f32(x[elem(r, j).x]);
    }
    let mean = wg_sum(lid, vec2<f32>(sum, 0.0)).x / f32(p.len);
    var sq = 0.0;
    for (var j = lid; j < p.len; j += WG) {
        let d = f32(x[elem(r, j).x]) - mean;
        sq += d * d;
    }
    let rstd = inverseSqrt(wg_sum(lid, vec2<f32>(sq, 0.0)).x / f32(p.len) + p.eps);
    if (lid == 0u) {
        stats[2u * r] = mean;
        stats[2u * r + 1u] = rstd;
    }
    for (var j = lid; j < p.len; j += WG) {
        let e = elem(r, j);
        let ab = coef_{{COEF}}(e.y, e.z);
        y[e.x] = {{T}}(act((f32(x[e.x]) - mean) * rstd * ab.x + ab.y));
    }
}

// (xhat, dz) at flat index i of channel c of sample n, in row r.
fn xhat_dz(i: u32, n: u32, c: u32, r: u32) -> vec2<f32> {
    let xh = (f32(x[i]) - saved[2u * r]) * saved[2u * r + 1u];
    let ab = coef_table(n, c);
    return vec2<f32>(xh, f32(gy[i]) * act_grad(xh * ab.x + ab.y));
}

@compute @workgroup_size(64)
fn norm_backward_x(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.rows) { return; }
    var acc = vec2<f32>(0.0);
    for (var j = lid; j < p.len; j += WG) {
        let e = elem(r, j);
        let h = xhat_dz(e.x, e.y, e.z, r);
        let dxh = h.y * coef_table(e.y, e.z).x;
        acc += vec2<f32>(dxh, dxh * h.x);
    }
    let m = wg_sum(lid, acc) / f32(p.len);
    let rstd = saved[2u * r + 1u];
    for (var j = lid; j < p.len; j += WG) {
        let e = elem(r, j);
        let h = xhat_dz(e.x, e.y, e.z, r);
        let dxh = h.y * coef_table(e.y, e.z).x;
        gx[e.x] = {{T}}(rstd * (dxh - m.x - h.x * m.y));
    }
}

// One workgroup per (n, c): the gradients of a[n, c] and b[n, c].
@compute @workgroup_size(64)
fn norm_backward_coef(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lid: u32) {
    let q = wid.x + wid.y * nwg.x;
    if (q >= p.batch * p.c) { return; }
    let n = q / p.c;
    let c = q % p.c;
    var acc = vec2<f32>(0.0);
    for (var pos = lid; pos < p.s; pos += WG) {
        let h = xhat_dz(q * p.s + pos, n, c, row_of(n, c, pos));
        acc += vec2<f32>(h.y * h.x, h.y);
    }
    let total = wg_sum(lid, acc);
    if (lid == 0u) {
        ga[q] = {{T}}(total.x);
        gb[q] = {{T}}(total.y);
    }
}

@compute @workgroup_size(64)
fn film_coefs(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let q = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (q >= p.batch * p.c) { return; }
    let ab = coef_film(q / p.c, q % p.c);
    fa[q] = {{T}}(ab.x);
    fb[q] = {{T}}(ab.y);
}

@compute @workgroup_size(64)
fn film_grads(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let q = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (q >= p.batch * p.c) { return; }
    let c = q % p.c;
    let k = 1.0 + f32(scale[q]);
    gscale[q] = {{T}}(f32(da[q]) * f32(gamma[c]) + f32(db[q]) * f32(beta[c]));
    gamma_part[q] = {{T}}(f32(da[q]) * k);
    beta_part[q] = {{T}}(f32(db[q]) * k);
}
