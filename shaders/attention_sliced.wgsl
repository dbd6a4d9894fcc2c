// Scaled dot-product attention for head dims up to 256 (the same three kernels and shapes as
// attention.wgsl, which keeps a whole row of at most 64 values in registers). Here each row is
// split over S invocations (slices): slice s keeps columns [s*W, s*W + W) of its q/k row and
// [s*WV, s*WV + WV) of its v/output row in named registers (W = ceil(D / S), WV = ceil(DV / S),
// at most 64 each). A workgroup holds ROWS = 64 / S rows. Every dot product over a full row
// (scores q.k, and do.v, do.o in the backward) is summed from the slices' partial products
// through workgroup memory, a block of KB keys (queries) between two barriers, so each
// invocation then runs the same online softmax / FlashAttention recurrences as
// attention.wgsl on its own columns. Slices past the end of a row (D or DV not a multiple of
// S) read the row's last column with weight 0 and write nothing.
// Every invocation of a workgroup walks the same number of blocks (rows past the end repeat
// the last row and write nothing), so the barriers are in uniform control flow.

const WG: u32 = 64u;
#include attention_params
const S: u32 = {{S}}u;
const W: u32 = {{W}}u;
const WV: u32 = {{WV}}u;
const ROWS: u32 = WG / S;
const KB: u32 = 32u;

// Partial products of a block: [KB][WG] for the scores, then [KB][WG] for do.v (16 KiB,
// WebGPU's default workgroup memory limit).
var<workgroup> partial: array<f32, 2u * KB * WG>;

// An invocation's row (clamped to the last row), whether that row exists, its slice, and its
// place among the workgroup's rows (invocations s * ROWS + r hold row r's slices).
struct Slice { row: u32, live: bool, s: u32, r: u32 }

fn slice_of(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> Slice {
    let r = lid % ROWS;
    let row = (wid.x + wid.y * nwg.x) * ROWS + r;
    return Slice(min(row, p.rows - 1u), row < p.rows, lid / ROWS, r);
}

// Column c of slice s in a q/k row, clamped into the row.
fn col_d(s: u32, c: u32) -> u32 { return min(s * W + c, D - 1u); }
// Column c of slice s in a v/output row, clamped into the row.
fn col_v(s: u32, c: u32) -> u32 { return min(s * WV + c, DV - 1u); }
// Whether column c of slice s lies inside the q/k row.
fn in_d(s: u32, c: u32) -> bool { return s * W + c < D; }
// Whether column c of slice s lies inside the v/output row.
fn in_v(s: u32, c: u32) -> bool { return s * WV + c < DV; }

// The sum over a row's slices of partial[block t, part] (part 0: scores, 1: do.v).
fn row_sum(me: Slice, part: u32, t: u32) -> f32 {
    let base = (part * KB + t) * WG + me.r;
    var sum = 0.0;
    #for u in 0..{{S}}: sum += partial[base + {u}u * ROWS];
    return sum;
}

@compute @workgroup_size(64)
fn attn_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let me = slice_of(wid, nwg, lid);
    let first = (me.row / p.len_q) * p.len_kv;
    let qi = me.row * D;
    #for c in 0..{{W}}: let q{c} = select(0.0, f32(q[qi + col_d(me.s, {c}u)]) * p.scale, in_d(me.s, {c}u));
    #for c in 0..{{WV}}: var acc{c} = 0.0;
    var m = MIN;
    var s = 0.0;
    for (var j0 = 0u; j0 < p.len_kv; j0 += KB) {
        let n = min(KB, p.len_kv - j0);
        for (var t = 0u; t < n; t++) {
            let kj = (first + j0 + t) * D;
            var part = 0.0;
            #for c in 0..{{W}}: part = fma(q{c}, f32(k[kj + col_d(me.s, {c}u)]), part);
            partial[t * WG + lid] = part;
        }
        workgroupBarrier();
        for (var t = 0u; t < n; t++) {
            let score = row_sum(me, 0u, t);
            if (score > m) {
                let corr = exp(m - score);
                s *= corr;
                #for c in 0..{{WV}}: acc{c} *= corr;
                m = score;
            }
            let e = exp(score - m);
            s += e;
            let vj = (first + j0 + t) * DV;
            #for c in 0..{{WV}}: acc{c} = fma(e, f32(v[vj + col_v(me.s, {c}u)]), acc{c});
        }
        workgroupBarrier();
    }
    if (!me.live) { return; }
    let inv = 1.0 / s;
    let oi = me.row * DV + me.s * WV;
    #for c in 0..{{WV}}: if (in_v(me.s, {c}u)) { o[oi + {c}u] = {{T}}(acc{c} * inv); }
    if (me.s == 0u) { lse[me.row] = m + log(s); }
}

@compute @workgroup_size(64)
fn attn_backward_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let me = slice_of(wid, nwg, lid);
    let first = (me.row / p.len_q) * p.len_kv;
    let qi = me.row * D;
    let oi = me.row * DV;
    #for c in 0..{{W}}: let q{c} = select(0.0, f32(q[qi + col_d(me.s, {c}u)]) * p.scale, in_d(me.s, {c}u));
    #for c in 0..{{WV}}: let g{c} = select(0.0, f32(gout[oi + col_v(me.s, {c}u)]), in_v(me.s, {c}u));
    #for c in 0..{{W}}: var acc{c} = 0.0;
    // D_i = do_i . o_i, summed over the slices.
    var part_di = 0.0;
    #for c in 0..{{WV}}: part_di = fma(g{c}, f32(o_saved[oi + col_v(me.s, {c}u)]), part_di);
    partial[lid] = part_di;
    workgroupBarrier();
    let di = row_sum(me, 0u, 0u);
    workgroupBarrier();
    let li = lse_saved[me.row];
    for (var j0 = 0u; j0 < p.len_kv; j0 += KB) {
        let n = min(KB, p.len_kv - j0);
        for (var t = 0u; t < n; t++) {
            let kj = (first + j0 + t) * D;
            let vj = (first + j0 + t) * DV;
            var part = 0.0;
            var part_dp = 0.0;
            #for c in 0..{{W}}: part = fma(q{c}, f32(k[kj + col_d(me.s, {c}u)]), part);
            #for c in 0..{{WV}}: part_dp = fma(g{c}, f32(v[vj + col_v(me.s, {c}u)]), part_dp);
            partial[t * WG + lid] = part;
            partial[(KB + t) * WG + lid] = part_dp;
        }
        workgroupBarrier();
        for (var t = 0u; t < n; t++) {
            let ds = exp(row_sum(me, 0u, t) - li) * (row_sum(me, 1u, t) - di);
            let kj = (first + j0 + t) * D;
            #for c in 0..{{W}}: acc{c} = fma(ds, f32(k[kj + col_d(me.s, {c}u)]), acc{c});
        }
        workgroupBarrier();
    }
    if (!me.live) { return; }
    let gi = qi + me.s * W;
    #for c in 0..{{W}}: if (in_d(me.s, {c}u)) { gq[gi + {c}u] = {{T}}(acc{c} * p.scale); }
    if (me.s == 0u) { delta[me.row] = di; }
}

@compute @workgroup_size(64)
fn attn_backward_kv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let me = slice_of(wid, nwg, lid);
    let first = (me.row / p.len_kv) * p.len_q;
    let kj = me.row * D;
    let vj = me.row * DV;
    #for c in 0..{{W}}: let k{c} = select(0.0, f32(k[kj + col_d(me.s, {c}u)]) * p.scale, in_d(me.s, {c}u));
    #for c in 0..{{WV}}: let v{c} = select(0.0, f32(v[vj + col_v(me.s, {c}u)]), in_v(me.s, {c}u));
    #for c in 0..{{W}}: var dk{c} = 0.0;
    #for c in 0..{{WV}}: var dv{c} = 0.0;
    for (var i0 = 0u; i0 < p.len_q; i0 += KB) {
        let n = min(KB, p.len_q - i0);
        for (var t = 0u; t < n; t++) {
            let qi = (first + i0 + t) * D;
            let gi = (first + i0 + t) * DV;
            var part = 0.0;
            var part_dp = 0.0;
            #for c in 0..{{W}}: part = fma(k{c}, f32(q[qi + col_d(me.s, {c}u)]), part);
            #for c in 0..{{WV}}: part_dp = fma(v{c}, f32(gout_kv[gi + col_v(me.s, {c}u)]), part_dp);
            partial[t * WG + lid] = part;
            partial[(KB + t) * WG + lid] = part_dp;
        }
        workgroupBarrier();
        for (var t = 0u; t < n; t++) {
            let i = first + i0 + t;
            let pij = exp(row_sum(me, 0u, t) - lse_saved[i]);
            let ds = pij * (row_sum(me, 1u, t) - delta_saved[i]);
            let qi = i * D;
            let gi = i * DV;
            #for c in 0..{{WV}}: dv{c} = fma(pij, f32(gout_kv[gi + col_v(me.s, {c}u)]), dv{c});
            #for c in 0..{{W}}: dk{c} = fma(ds, f32(q[qi + col_d(me.s, {c}u)]), dk{c});
        }
        workgroupBarrier();
    }
    if (!me.live) { return; }
    let ki = kj + me.s * W;
    let vi = vj + me.s * WV;
    #for c in 0..{{W}}: if (in_d(me.s, {c}u)) { gk[ki + {c}u] = {{T}}(dk{c} * p.scale); }
    #for c in 0..{{WV}}: if (in_v(me.s, {c}u)) { gv[vi + {c}u] = {{T}}(dv{c}); }
}
