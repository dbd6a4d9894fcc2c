// Scaled dot-product attention O = softmax(Q K^T * scale) V on [P, L, D] tensors (P = batch *
// heads independent problems, L positions, D = head dim, templated), memory-efficient: the
// L x L matrix is never stored. One row per invocation, its D values in named registers
// (unrolled with #for):
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
const MIN: f32 = -3.4028234663852886e38;

fn row_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid;
}

@compute @workgroup_size(64)
fn attn_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let row = row_index(wid, nwg, lid);
    if (row >= p.rows) { return; }
    let kv0 = (row / p.len) * p.len * D;
    let qi = row * D;
    #for c in 0..{{D}}: let q{c} = f32(q[qi + {c}u]) * p.scale;
    #for c in 0..{{D}}: var acc{c} = 0.0;
    var m = MIN;
    var s = 0.0;
    for (var j = 0u; j < p.len; j++) {
        let kj = kv0 + j * D;
        var score = 0.0;
        #for c in 0..{{D}}: score = fma(q{c}, f32(k[kj + {c}u]), score);
        if (score > m) {
            let corr = exp(m - score);
            s *= corr;
            #for c in 0..{{D}}: acc{c} *= corr;
            m = score;
        }
        let e = exp(score - m);
        s += e;
        #for c in 0..{{D}}: acc{c} = fma(e, f32(v[kj + {c}u]), acc{c});
    }
    let inv = 1.0 / s;
    #for c in 0..{{D}}: o[qi + {c}u] = {{T}}(acc{c} * inv);
    lse[row] = m + log(s);
}

@compute @workgroup_size(64)
fn attn_backward_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let row = row_index(wid, nwg, lid);
    if (row >= p.rows) { return; }
    let kv0 = (row / p.len) * p.len * D;
    let qi = row * D;
    #for c in 0..{{D}}: let q{c} = f32(q[qi + {c}u]) * p.scale;
    #for c in 0..{{D}}: let g{c} = f32(gout[qi + {c}u]);
    #for c in 0..{{D}}: var acc{c} = 0.0;
    var di = 0.0;
    #for c in 0..{{D}}: di = fma(g{c}, f32(o_saved[qi + {c}u]), di);
    let li = lse_saved[row];
    for (var j = 0u; j < p.len; j++) {
        let kj = kv0 + j * D;
        var score = 0.0;
        var dp = 0.0;
        #for c in 0..{{D}}: score = fma(q{c}, f32(k[kj + {c}u]), score);
        #for c in 0..{{D}}: dp = fma(g{c}, f32(v[kj + {c}u]), dp);
        let ds = exp(score - li) * (dp - di);
        #for c in 0..{{D}}: acc{c} = fma(ds, f32(k[kj + {c}u]), acc{c});
    }
    #for c in 0..{{D}}: gq[qi + {c}u] = {{T}}(acc{c} * p.scale);
    delta[row] = di;
}

@compute @workgroup_size(64)
fn attn_backward_kv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let row = row_index(wid, nwg, lid);
    if (row >= p.rows) { return; }
    let first = (row / p.len) * p.len;
    let kj = row * D;
    #for c in 0..{{D}}: let k{c} = f32(k[kj + {c}u]) * p.scale;
    #for c in 0..{{D}}: let v{c} = f32(v[kj + {c}u]);
    #for c in 0..{{D}}: var dk{c} = 0.0;
    #for c in 0..{{D}}: var dv{c} = 0.0;
    for (var i = first; i < first + p.len; i++) {
        let qi = i * D;
        var score = 0.0;
        var dp = 0.0;
        #for c in 0..{{D}}: score = fma(k{c}, f32(q[qi + {c}u]), score);
        #for c in 0..{{D}}: dp = fma(f32(gout_kv[qi + {c}u]), v{c}, dp);
        let pij = exp(score - lse_saved[i]);
        let ds = pij * (dp - delta_saved[i]);
        #for c in 0..{{D}}: dv{c} = fma(pij, f32(gout_kv[qi + {c}u]), dv{c});
        #for c in 0..{{D}}: dk{c} = fma(ds, f32(q[qi + {c}u]), dk{c});
    }
    #for c in 0..{{D}}: gk[kj + {c}u] = {{T}}(dk{c} * p.scale);
    #for c in 0..{{D}}: gv[kj + {c}u] = {{T}}(dv{c});
}
