// Scaled dot-product attention O = softmax(Q K^T * scale) V on [P, L, D] tensors (P = batch *
// heads independent problems, L positions, D = head dim, templated), memory-efficient: the
// L x L matrix is never stored. One row per invocation, rows kept in private arrays:
//   attn_forward:     query row i, online softmax over the keys (running max m, running sum
//                     s, output accumulator rescaled by exp(m_old - m_new)); writes O and
//                     lse_i = m + log(s).
//   attn_backward_q:  query row i, p_ij = exp(scale q_i.k_j - lse_i) recomputed,
//                     dq_i = scale * sum_j p_ij (do_i.v_j - D_i) k_j with D_i = do_i.o_i
//                     (D_i is also written for the key kernel).
//   attn_backward_kv: key row j, loops over the queries:
//                     dv_j = sum_i p_ij do_i, dk_j = scale * sum_i p_ij (do_i.v_j - D_i) q_i.
// Invocations of a workgroup walk the same key (query) rows in lockstep, so those loads are
// at one address per step. Storage type T, arithmetic in f32; lse and D are f32.

const WG: u32 = 64u;
const D: u32 = {{D}}u;

struct Params {
    rows: u32,  // P * L
    len: u32,   // L
    scale: f32, // 1 / sqrt(D)
}
@group(0) @binding(0) var<uniform> p: Params;

// attn_forward: (q, k, v) -> (o, lse)
// attn_backward_q: (q, k, v, o_saved, lse_saved, gout) -> (gq, delta)
// attn_backward_kv: (q, k, v, gout, lse_saved, delta_saved) -> (gk, gv)
@group(0) @binding(1) var<storage, read> q: array<{{T}}>;
@group(0) @binding(2) var<storage, read> k: array<{{T}}>;
@group(0) @binding(3) var<storage, read> v: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> o: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;
@group(0) @binding(4) var<storage, read> o_saved: array<{{T}}>;
@group(0) @binding(5) var<storage, read> lse_saved: array<f32>;
@group(0) @binding(6) var<storage, read> gout: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> gq: array<{{T}}>;
@group(0) @binding(8) var<storage, read_write> delta: array<f32>;
@group(0) @binding(4) var<storage, read> gout_kv: array<{{T}}>;
@group(0) @binding(6) var<storage, read> delta_saved: array<f32>;
@group(0) @binding(7) var<storage, read_write> gk: array<{{T}}>;
@group(0) @binding(8) var<storage, read_write> gv: array<{{T}}>;

// Most negative finite f32 (WGSL has no infinity literal); exp(MIN - x) is 0.
const MIN: f32 = -3.4028235e38;

fn row_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid;
}

@compute @workgroup_size(64)
fn attn_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let row = row_index(wid, nwg, lid);
    if (row >= p.rows) { return; }
    let kv0 = (row / p.len) * p.len * D;
    var qi: array<f32, D>;
    var acc: array<f32, D>;
    for (var c = 0u; c < D; c++) {
        qi[c] = f32(q[row * D + c]) * p.scale;
        acc[c] = 0.0;
    }
    var m = MIN;
    var s = 0.0;
    for (var j = 0u; j < p.len; j++) {
        let kj = kv0 + j * D;
        var score = 0.0;
        for (var c = 0u; c < D; c++) {
            score = fma(qi[c], f32(k[kj + c]), score);
        }
        if (score > m) {
            let corr = exp(m - score);
            s *= corr;
            for (var c = 0u; c < D; c++) {
                acc[c] *= corr;
            }
            m = score;
        }
        let e = exp(score - m);
        s += e;
        for (var c = 0u; c < D; c++) {
            acc[c] = fma(e, f32(v[kj + c]), acc[c]);
        }
    }
    let inv = 1.0 / s;
    for (var c = 0u; c < D; c++) {
        o[row * D + c] = {{T}}(acc[c] * inv);
    }
    lse[row] = m + log(s);
}

@compute @workgroup_size(64)
fn attn_backward_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let row = row_index(wid, nwg, lid);
    if (row >= p.rows) { return; }
    let kv0 = (row / p.len) * p.len * D;
    var qi: array<f32, D>;
    var gi: array<f32, D>;
    var acc: array<f32, D>;
    var di = 0.0;
    for (var c = 0u; c < D; c++) {
        qi[c] = f32(q[row * D + c]) * p.scale;
        gi[c] = f32(gout[row * D + c]);
        di = fma(gi[c], f32(o_saved[row * D + c]), di);
        acc[c] = 0.0;
    }
    let li = lse_saved[row];
    for (var j = 0u; j < p.len; j++) {
        let kj = kv0 + j * D;
        var score = 0.0;
        var dp = 0.0;
        for (var c = 0u; c < D; c++) {
            score = fma(qi[c], f32(k[kj + c]), score);
            dp = fma(gi[c], f32(v[kj + c]), dp);
        }
        let ds = exp(score - li) * (dp - di);
        for (var c = 0u; c < D; c++) {
            acc[c] = fma(ds, f32(k[kj + c]), acc[c]);
        }
    }
    for (var c = 0u; c < D; c++) {
        gq[row * D + c] = {{T}}(acc[c] * p.scale);
    }
    delta[row] = di;
}

@compute @workgroup_size(64)
fn attn_backward_kv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let row = row_index(wid, nwg, lid);
    if (row >= p.rows) { return; }
    let first = (row / p.len) * p.len;
    var kj: array<f32, D>;
    var vj: array<f32, D>;
    var dk: array<f32, D>;
    var dv: array<f32, D>;
    for (var c = 0u; c < D; c++) {
        kj[c] = f32(k[row * D + c]) * p.scale;
        vj[c] = f32(v[row * D + c]);
        dk[c] = 0.0;
        dv[c] = 0.0;
    }
    for (var i = first; i < first + p.len; i++) {
        let qi = i * D;
        var score = 0.0;
        var dp = 0.0;
        for (var c = 0u; c < D; c++) {
            score = fma(kj[c], f32(q[qi + c]), score);
            dp = fma(f32(gout_kv[qi + c]), vj[c], dp);
        }
        let pij = exp(score - lse_saved[i]);
        let ds = pij * (dp - delta_saved[i]);
        for (var c = 0u; c < D; c++) {
            dv[c] = fma(pij, f32(gout_kv[qi + c]), dv[c]);
            dk[c] = fma(ds, f32(q[qi + c]), dk[c]);
        }
    }
    for (var c = 0u; c < D; c++) {
        gk[row * D + c] = {{T}}(dk[c] * p.scale);
        gv[row * D + c] = {{T}}(dv[c]);
    }
}
