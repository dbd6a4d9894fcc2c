// Scaled dot-product attention O = softmax(Q K^T * scale) V for head dims D, DV <= 64 (wider
// heads: attention_sliced.wgsl). Q is [P, Lq, D], K [P, Lkv, D], V [P, Lkv, DV], O [P, Lq, DV]
// (P = batch * heads independent problems; D, DV templated), memory-efficient: the Lq x Lkv
// matrix is never stored. One row per invocation, its values in named registers (unrolled
// with #for):
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
#include attention_params

fn row_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid;
}

@compute @workgroup_size(64)
fn attn_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let row = row_index(wid, nwg, lid);
    if (row >= p.rows) { return; }
    let first = (row / p.len_q) * p.len_kv;
    let qi = row * D;
    #for c in 0..{{D}}: let q{c} = f32(q[qi + {c}u]) * p.scale;
    #for c in 0..{{DV}}: var acc{c} = 0.0;
    var m = MIN;
    var s = 0.0;
    for (var j = first; j < first + p.len_kv; j++) {
        let kj = j * D;
        let vj = j * DV;
        var score = 0.0;
        #for c in 0..{{D}}: score = fma(q{c}, f32(k[kj + {c}u]), score);
        if (score > m) {
            let corr = exp(m - score);
            s *= corr;
            #for c in 0..{{DV}}: acc{c} *= corr;
            m = score;
        }
        let e = exp(score - m);
        s += e;
        #for c in 0..{{DV}}: acc{c} = fma(e, f32(v[vj + {c}u]), acc{c});
    }
    let inv = 1.0 / s;
    let oi = row * DV;
    #for c in 0..{{DV}}: o[oi + {c}u] = {{T}}(acc{c} * inv);
    lse[row] = m + log(s);
}

@compute @workgroup_size(64)
fn attn_backward_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let row = row_index(wid, nwg, lid);
    if (row >= p.rows) { return; }
    let first = (row / p.len_q) * p.len_kv;
    let qi = row * D;
    let oi = row * DV;
    #for c in 0..{{D}}: let q{c} = f32(q[qi + {c}u]) * p.scale;
    #for c in 0..{{DV}}: let g{c} = f32(gout[oi + {c}u]);
    #for c in 0..{{D}}: var acc{c} = 0.0;
    var di = 0.0;
    #for c in 0..{{DV}}: di = fma(g{c}, f32(o_saved[oi + {c}u]), di);
    let li = lse_saved[row];
    for (var j = first; j < first + p.len_kv; j++) {
        let kj = j * D;
        let vj = j * DV;
        var score = 0.0;
        var dp = 0.0;
        #for c in 0..{{D}}: score = fma(q{c}, f32(k[kj + {c}u]), score);
        #for c in 0..{{DV}}: dp = fma(g{c}, f32(v[vj + {c}u]), dp);
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
    let first = (row / p.len_kv) * p.len_q;
    let kj = row * D;
    let vj = row * DV;
    #for c in 0..{{D}}: let k{c} = f32(k[kj + {c}u]) * p.scale;
    #for c in 0..{{DV}}: let v{c} = f32(v[vj + {c}u]);
    #for c in 0..{{D}}: var dk{c} = 0.0;
    #for c in 0..{{DV}}: var dv{c} = 0.0;
    for (var i = first; i < first + p.len_q; i++) {
        let qi = i * D;
        let gi = i * DV;
        var score = 0.0;
        var dp = 0.0;
        #for c in 0..{{D}}: score = fma(k{c}, f32(q[qi + {c}u]), score);
        #for c in 0..{{DV}}: dp = fma(f32(gout_kv[gi + {c}u]), v{c}, dp);
        let pij = exp(score - lse_saved[i]);
        let ds = pij * (dp - delta_saved[i]);
        #for c in 0..{{DV}}: dv{c} = fma(pij, f32(gout_kv[gi + {c}u]), dv{c});
        #for c in 0..{{D}}: dk{c} = fma(ds, f32(q[qi + {c}u]), dk{c});
    }
    #for c in 0..{{D}}: gk[kj + {c}u] = {{T}}(dk{c} * p.scale);
    #for c in 0..{{DV}}: gv[vj + {c}u] = {{T}}(dv{c});
}
