// Normalization of an NCHW tensor viewed as [N, C, S] (S = H*W), one row per invocation
// (the *_lane kernels), per subgroup (the *_subgroup kernels, where SUBGROUP is 1) or per
// workgroup (the autotuner picks):
// GroupNorm (a row is one (n, group): Cg channels x S positions) and channel LayerNorm (a row
// is one (n, position): C channels); LayerNorm over the last dim D is the channel LayerNorm of
// [N, D, 1] (N the product of the leading dims). Each row is normalized, xhat = (x - mean) * rstd, then
// z = xhat * a[n, c] + b[n, c] and y = act(z) (identity or SiLU). COEF picks where a, b come
// from: "table" reads them from gamma/beta at n * coef_stride + c (plain norms pass the
// per-channel gamma, beta with coef_stride 0); "film" computes a = gamma (1 + scale),
// b = beta (1 + scale) + shift, so GroupNorm + FiLM + SiLU is one forward kernel.
// VEC 4 reads and writes x, y, gy and gx as vec4s (V = vec4<T>, VF = vec4<f32>): only for
// GroupNorm rows whose S is a multiple of 4, so a vec4 never spans two channels; the lengths
// and positions in Params then count vec4s. VEC 1 is element by element (V = T, VF = f32).
// Backward (tables only; film_coefs writes the FiLM tables, coef_stride C),
// with dz = gy * act'(z), dxh = dz * a:
//   norm_backward_coef: per (n, c): da = sum_s dz * xhat, db = sum_s dz (runs first)
//   norm_backward_x:    dx = rstd * (dxh - mean(dxh) - xhat * mean(dxh * xhat)) per row; the
//                       two means of a row over several positions (GroupNorm, S > 1) come
//                       from its channels' (da, db) (sums of a da and a db), so it reads x
//                       and gy once; rows of one position sum them over the row.
//   film_grads:         dscale = da gamma + db beta, and da (1 + scale), db (1 + scale)
//                       (summed over n on the Rust side into dgamma, dbeta).

const WG: u32 = 64u;
const VEC: u32 = {{VEC}}u; // elements per V
const ACT: u32 = {{ACT}}u; // 0 identity, 1 silu
// SUBGROUP: 1 adds the *_subgroup entry points, whose workgroups are one subgroup of LANES
// invocations (the adapter's fixed subgroup size); 0 leaves them out (no subgroups).
// OUT: first output binding (1 + the number of inputs).

struct Params {
    rows: u32,        // rows normalized independently
    len: u32,         // Vs per row
    batch: u32,       // N
    c: u32,           // channels
    s: u32,           // Vs per channel (H*W / VEC)
    cg: u32,          // channels per row (channels per group, or C for layer norm)
    sr: u32,          // position blocks normalized separately (1: group norm, S: layer norm)
    coef_stride: u32, // a/b index is n * coef_stride + c
    eps: f32,
}
@group(0) @binding(0) var<uniform> p: Params;

// norm_forward: (x, gamma, beta[, scale, shift]) -> (y, stats)
// film_coefs: the same inputs as the fused forward -> (fa, fb)
// norm_backward_coef: (x, a, b, stats, gy) -> (ga, gb); norm_backward_x: (x, a, b, stats, gy,
// ga, gb) -> gx
// film_grads: (da, gamma, beta, scale, db) -> (gscale, gamma_part, beta_part)
@group(0) @binding(1) var<storage, read> x: array<{{V}}>;
@group(0) @binding(2) var<storage, read> gamma: array<{{T}}>; // or the table a
@group(0) @binding(3) var<storage, read> beta: array<{{T}}>; // or the table b
@group(0) @binding(4) var<storage, read> scale: array<{{T}}>;
@group(0) @binding(5) var<storage, read> shift: array<{{T}}>;
@group(0) @binding({{OUT}}) var<storage, read_write> y: array<{{V}}>;
@group(0) @binding({{OUT}} + 1) var<storage, read_write> stats: array<f32>; // (mean, rstd) per row
@group(0) @binding(6) var<storage, read_write> fa: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> fb: array<{{T}}>;
@group(0) @binding(4) var<storage, read> saved: array<f32>;
@group(0) @binding(5) var<storage, read> gy: array<{{V}}>;
@group(0) @binding(6) var<storage, read> coef_da: array<{{T}}>;
@group(0) @binding(7) var<storage, read> coef_db: array<{{T}}>;
@group(0) @binding(8) var<storage, read_write> gx: array<{{V}}>;
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

// A cursor over elements first, first + step, ... of row r, advanced without per-element
// division (slow on CPU adapters): i is the flat index, c the channel, s the position within
// the row's block of sj = S / sr positions of channel c; n is the row's sample.
struct Walk {
    i: u32,
    c: u32,
    s: u32,
    n: u32,
    sj: u32,
    dc: u32, // step / sj
    ds: u32, // step % sj
}

fn walk(r: u32, first: u32, step: u32) -> Walk {
    let groups = p.c / p.cg;
    let sj = p.s / p.sr;
    let n = r / (groups * p.sr);
    let c = (r / p.sr) % groups * p.cg + first / sj;
    let s = first % sj;
    return Walk((n * p.c + c) * p.s + r % p.sr * sj + s, c, s, n, sj, step / sj, step % sj);
}

fn advance(w: ptr<function, Walk>) {
    (*w).c += (*w).dc;
    (*w).s += (*w).ds;
    (*w).i += (*w).dc * p.s + (*w).ds;
    if ((*w).s >= (*w).sj) {
        (*w).s -= (*w).sj;
        (*w).c += 1u;
        (*w).i += p.s - (*w).sj;
    }
}

fn coef_table(n: u32, c: u32) -> vec2<f32> {
    let k = n * p.coef_stride + c;
    return vec2<f32>(f32(gamma[k]), f32(beta[k]));
}

fn coef_film(n: u32, c: u32) -> vec2<f32> {
    let k = 1.0 + f32(scale[n * p.c + c]);
    return vec2<f32>(f32(gamma[c]) * k, f32(beta[c]) * k + f32(shift[n * p.c + c]));
}

fn sigmoid(v: {{VF}}) -> {{VF}} {
    return 1.0 / (1.0 + exp(-v));
}

fn act(z: {{VF}}) -> {{VF}} {
    return select(z, z * sigmoid(z), ACT == 1u);
}

fn act_grad(z: {{VF}}) -> {{VF}} {
    let s = sigmoid(z);
    return select({{VF}}(1.0), s * (1.0 + z * (1.0 - s)), ACT == 1u);
}

// The sum of the VEC elements of v.
fn total(v: {{VF}}) -> f32 {
    return {{TOTAL}};
}

// Elements per row.
fn row_elements() -> f32 {
    return f32(p.len * VEC);
}

// Each forward and backward pass visits elements first, first + step, ... of a row and
// returns its partial sums. The *_lane entry points give each invocation a whole row
// (first 0, step 1: no barriers); the *_subgroup ones give each subgroup a row (first lane,
// step LANES: neighbouring lanes read neighbouring elements, subgroupAdd adds, no barriers);
// the others give each workgroup a row (first lid, step WG) and add the partial sums in
// workgroup memory.

// The mean of the row's first V: the sums below are of x - shift, so that the variance
// sum((x - shift)^2) / len - mean(x - shift)^2 loses no precision when |mean| >> std.
fn row_shift(r: u32) -> f32 {
    return total({{VF}}(x[walk(r, 0u, 1u).i])) / f32(VEC);
}

// Partial (sum of x - shift, sum of (x - shift)^2): one read of x for both statistics.
fn sum_x_sq(r: u32, first: u32, step: u32, shift: f32) -> vec2<f32> {
    var w = walk(r, first, step);
    var acc = vec2<f32>(0.0);
    for (var j = first; j < p.len; j += step) {
        let d = {{VF}}(x[w.i]) - shift;
        acc += vec2<f32>(total(d), total(d * d));
        advance(&w);
    }
    return acc;
}

fn write_y(r: u32, first: u32, step: u32, ms: vec2<f32>) {
    var w = walk(r, first, step);
    for (var j = first; j < p.len; j += step) {
        let ab = coef_{{COEF}}(w.n, w.c);
        y[w.i] = {{V}}(act(({{VF}}(x[w.i]) - ms.x) * ms.y * ab.x + ab.y));
        advance(&w);
    }
}

// (mean, rstd) of a row from its sums of x - shift and (x - shift)^2.
fn row_stats(sums: vec2<f32>, shift: f32) -> vec2<f32> {
    let m = sums / row_elements();
    return vec2<f32>(shift + m.x, inverseSqrt(max(m.y - m.x * m.x, 0.0) + p.eps));
}

fn save_stats(r: u32, ms: vec2<f32>) {
    stats[2u * r] = ms.x;
    stats[2u * r + 1u] = ms.y;
}

@compute @workgroup_size(64)
fn norm_forward_lane(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * WG;
    if (r >= p.rows) { return; }
    let shift = row_shift(r);
    let ms = row_stats(sum_x_sq(r, 0u, 1u, shift), shift);
    save_stats(r, ms);
    write_y(r, 0u, 1u, ms);
}

@compute @workgroup_size(64)
fn norm_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.rows) { return; }
    let shift = row_shift(r);
    let ms = row_stats(wg_sum(lid, sum_x_sq(r, lid, WG, shift)), shift);
    if (lid == 0u) {
        save_stats(r, ms);
    }
    write_y(r, lid, WG, ms);
}

// xhat of x[i] with its row's (mean, rstd).
fn xhat(i: u32, ms: vec2<f32>) -> {{VF}} {
    return ({{VF}}(x[i]) - ms.x) * ms.y;
}

// dz of gy[i] at xhat xh with its channel's (a, b).
fn dz(i: u32, xh: {{VF}}, ab: vec2<f32>) -> {{VF}} {
    return {{VF}}(gy[i]) * act_grad(xh * ab.x + ab.y);
}

fn saved_stats(r: u32) -> vec2<f32> {
    return vec2<f32>(saved[2u * r], saved[2u * r + 1u]);
}

// Partial (sum dxh, sum dxh * xhat) over the row, dxh = dz * a.
fn sum_dxh(r: u32, first: u32, step: u32) -> vec2<f32> {
    let ms = saved_stats(r);
    var w = walk(r, first, step);
    var acc = vec2<f32>(0.0);
    for (var j = first; j < p.len; j += step) {
        let ab = coef_table(w.n, w.c);
        let xh = xhat(w.i, ms);
        let dxh = dz(w.i, xh, ab) * ab.x;
        acc += vec2<f32>(total(dxh), total(dxh * xh));
        advance(&w);
    }
    return acc;
}

// gx = rstd * (dxh - mean(dxh) - xhat * mean(dxh * xhat)), with m those two means.
fn write_gx(r: u32, first: u32, step: u32, m: vec2<f32>) {
    let ms = saved_stats(r);
    var w = walk(r, first, step);
    for (var j = first; j < p.len; j += step) {
        let ab = coef_table(w.n, w.c);
        let xh = xhat(w.i, ms);
        gx[w.i] = {{V}}(ms.y * (dz(w.i, xh, ab) * ab.x - m.x - xh * m.y));
        advance(&w);
    }
}

// True when a row holds several positions of its channels (GroupNorm with S > 1); rows of
// one position (channel and last-axis LayerNorm, GroupNorm of [N, C]) sum over themselves.
fn spans_positions() -> bool {
    return p.s != p.sr;
}

// (mean dxh, mean dxh * xhat) of GroupNorm row r from its channels' coefficient gradients:
// sum dxh = sum_c a db and sum dxh * xhat = sum_c a da.
fn group_means(r: u32) -> vec2<f32> {
    let groups = p.c / p.cg;
    let n = r / groups;
    let c0 = (r % groups) * p.cg;
    var acc = vec2<f32>(0.0);
    for (var c = c0; c < c0 + p.cg; c++) {
        let q = n * p.c + c;
        acc += coef_table(n, c).x * vec2<f32>(f32(coef_db[q]), f32(coef_da[q]));
    }
    return acc / row_elements();
}

@compute @workgroup_size(64)
fn norm_backward_x_lane(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let r = gid.x + gid.y * nwg.x * WG;
    if (r >= p.rows) { return; }
    var m: vec2<f32>;
    if (spans_positions()) {
        m = group_means(r);
    } else {
        m = sum_dxh(r, 0u, 1u) / row_elements();
    }
    write_gx(r, 0u, 1u, m);
}

@compute @workgroup_size(64)
fn norm_backward_x(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.rows) { return; }
    var m: vec2<f32>;
    if (spans_positions()) {
        m = group_means(r);
    } else {
        m = wg_sum(lid, sum_dxh(r, lid, WG)) / row_elements();
    }
    write_gx(r, lid, WG, m);
}

// Partial (da, db) = (sum dz * xhat, sum dz) of the coefficients of (n, c) = (q / C, q % C)
// over positions first, first + step, ... Rows are either whole channel groups (sr = 1: one
// row for all positions) or single positions (sr = S: row rq + pos).
fn sum_coef(q: u32, first: u32, step: u32) -> vec2<f32> {
    let n = q / p.c;
    let c = q % p.c;
    let ab = coef_table(n, c);
    let rq = (n * (p.c / p.cg) + c / p.cg) * p.sr;
    let per_pos = select(0u, 1u, p.sr > 1u);
    var acc = vec2<f32>(0.0);
    for (var pos = first; pos < p.s; pos += step) {
        let i = q * p.s + pos;
        let xh = xhat(i, saved_stats(rq + pos * per_pos));
        let d = dz(i, xh, ab);
        acc += vec2<f32>(total(d * xh), total(d));
    }
    return acc;
}

fn write_coef(q: u32, g: vec2<f32>) {
    ga[q] = {{T}}(g.x);
    gb[q] = {{T}}(g.y);
}

// One (n, c) per invocation: the gradients of a[n, c] and b[n, c].
@compute @workgroup_size(64)
fn norm_backward_coef_lane(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let q = gid.x + gid.y * nwg.x * WG;
    if (q >= p.batch * p.c) { return; }
    write_coef(q, sum_coef(q, 0u, 1u));
}

// One (n, c) per workgroup.
@compute @workgroup_size(64)
fn norm_backward_coef(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lid: u32) {
    let q = wid.x + wid.y * nwg.x;
    if (q >= p.batch * p.c) { return; }
    let total = wg_sum(lid, sum_coef(q, lid, WG));
    if (lid == 0u) {
        write_coef(q, total);
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

#for on in 0..{{SUBGROUP}} {
@compute @workgroup_size({{LANES}})
fn norm_forward_subgroup(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(subgroup_invocation_id) lane: u32) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.rows) { return; }
    let shift = row_shift(r);
    let ms = row_stats(subgroupAdd(sum_x_sq(r, lane, {{LANES}}u, shift)), shift);
    if (lane == 0u) {
        save_stats(r, ms);
    }
    write_y(r, lane, {{LANES}}u, ms);
}

@compute @workgroup_size({{LANES}})
fn norm_backward_x_subgroup(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                            @builtin(subgroup_invocation_id) lane: u32) {
    let r = wid.x + wid.y * nwg.x;
    if (r >= p.rows) { return; }
    var m: vec2<f32>;
    if (spans_positions()) {
        m = group_means(r);
    } else {
        m = subgroupAdd(sum_dxh(r, lane, {{LANES}}u)) / row_elements();
    }
    write_gx(r, lane, {{LANES}}u, m);
}

@compute @workgroup_size({{LANES}})
fn norm_backward_coef_subgroup(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                               @builtin(subgroup_invocation_id) lane: u32) {
    let q = wid.x + wid.y * nwg.x;
    if (q >= p.batch * p.c) { return; }
    let total = subgroupAdd(sum_coef(q, lane, {{LANES}}u));
    if (lane == 0u) {
        write_coef(q, total);
    }
}
#end
