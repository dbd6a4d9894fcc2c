// The fused ConvNeXt block's depthwise 7x7 conv (padding 3, one filter per channel) and its
// gradients (src/ops/blocks.rs, and `conv2d`'s depthwise7 implementation), register-blocked:
// an invocation makes 8 neighbouring outputs of each of ROWS rows from ROWS + 6 input rows of
// 14 values each (ROWS = 1: 98 loads and 49 tap loads for 392 FMAs, where a gather per output
// loads all 49 taps; ROWS = 4: 140 and 49 for 1,568), and a workgroup never spans two
// channels, so tap loads are workgroup-uniform:
//   dw7_forward:    out = src * w (+ bias) (+ res); FLIP = true flips w, which makes it the
//                   transposed conv: the input gradient of the forward.
//   dw7_wgrad:      per (channel, slice of the batch's rows) the 49 tap sums of x * dout and
//                   the bias sum of dout, reduced over the workgroup in workgroup memory.
//   dw7_wgrad_sum:  adds the slices: dw [C, 49] and db [C].
// All accumulate in f32 on storage type T.

struct Params {
    n: u32,
    c: u32,
    h: u32,
    w: u32,
    // 8-wide segments per row: ceil(w / 8)
    segs: u32,
    // dw7_wgrad: slices per channel (workgroups along x)
    slices: u32,
}
@group(0) @binding(0) var<uniform> p: Params;

// dw7_forward: (src, wts [C, 49], bias [C], res) -> out
@group(0) @binding(1) var<storage, read> src: array<{{T}}>;
@group(0) @binding(2) var<storage, read> wts: array<{{T}}>;
@group(0) @binding(3) var<storage, read> bias: array<{{T}}>;
@group(0) @binding(4) var<storage, read> res: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> out: array<{{T}}>;

// dw7_wgrad: (x, dout) -> partial [C, slices, 50] (49 taps, then the bias)
@group(0) @binding(1) var<storage, read> xg: array<{{T}}>;
@group(0) @binding(2) var<storage, read> dout: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> partial: array<f32>;

// dw7_wgrad_sum: partial -> (dw [C, 49], db [C])
@group(0) @binding(1) var<storage, read> partial_in: array<f32>;
@group(0) @binding(2) var<storage, read_write> dw: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> db: array<{{T}}>;

var<workgroup> sums: array<f32, {{SUMS}}>;

// src at column `col` of the row starting at `row` (0 outside the image).
fn src_at(row: u32, col: i32) -> f32 {
    let inside = col >= 0 && col < i32(p.w);
    return select(0.0, f32(src[select(0u, row + u32(col), inside)]), inside);
}

fn x_at(row: u32, col: i32) -> f32 {
    let inside = col >= 0 && col < i32(p.w);
    return select(0.0, f32(xg[select(0u, row + u32(col), inside)]), inside);
}

// wid.y: the plane n * C + c; invocation t of the plane: rows ROWS (t / segs) .. + ROWS,
// columns 8 (t % segs) .. + 8. Each input row is loaded once and used by every output row it
// reaches; the channel's 49 taps are loaded once into a private array.
@compute @workgroup_size({{WG}})
fn dw7_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wid.x * {{WG}}u + lid;
    let groups = (p.h + {{ROWS}}u - 1u) / {{ROWS}}u;
    if (t >= groups * p.segs) { return; }
    let plane = wid.y;
    let ch = plane % p.c;
    let row0 = (t / p.segs) * {{ROWS}}u;
    let j0 = i32((t % p.segs) * 8u);
    let base = plane * p.h * p.w;
    var taps: array<f32, 49>;
    for (var i = 0u; i < 49u; i++) {
        taps[i] = f32(wts[select(ch * 49u + i, ch * 49u + 48u - i, {{FLIP}})]);
    }
    var b = 0.0;
    if ({{BIAS}}) { b = f32(bias[ch]); }
    #for s in 0..{{ROWS}}, q in 0..8: var a{s}_{q} = b;
    for (var r = 0u; r < 6u + {{ROWS}}u; r++) {
        let ih = i32(row0 + r) - 3;
        if (ih < 0 || ih >= i32(p.h)) { continue; }
        let rb = base + u32(ih) * p.w;
        #for m in 0..14: let x{m} = src_at(rb, j0 + {m} - 3);
        // output row row0 + s takes this input row with its taps' row r - s
        #for s in 0..{{ROWS}} {
        if (r >= {s}u && r < {s}u + 7u) {
            let k = (r - {s}u) * 7u;
            #for j in 0..7: let w{j} = taps[k + {j}u];
            #for j in 0..7, q in 0..8: a{s}_{q} = fma(w{j}, x{q*1+j}, a{s}_{q});
        }
        #end
    }
    #for s in 0..{{ROWS}} {
    if (row0 + {s}u < p.h) {
        let ob = base + (row0 + {s}u) * p.w;
        #for q in 0..8: if (j0 + {q} < i32(p.w)) { let o = ob + u32(j0 + {q}); var v = a{s}_{q}; if ({{RESIDUAL}}) { v += f32(res[o]); } out[o] = {{T}}(v); }
    }
    #end
}

// wid.y: the channel; workgroup wid.x of p.slices walks the channel's (n, row, segment) items
// with a stride of slices * WG, then the workgroup adds its invocations' 50 sums.
@compute @workgroup_size({{WG}})
fn dw7_wgrad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let ch = wid.y;
    let per_plane = p.h * p.segs;
    let items = p.n * per_plane;
    #for r in 0..7, k in 0..7: var g{r}_{k} = 0.0;
    var gb = 0.0;
    for (var t = wid.x * {{WG}}u + lid; t < items; t += p.slices * {{WG}}u) {
        let n = t / per_plane;
        let within = t % per_plane;
        let row = within / p.segs;
        let j0 = i32((within % p.segs) * 8u);
        let base = (n * p.c + ch) * p.h * p.w;
        let ob = base + row * p.w;
        #for q in 0..8: let d{q} = select(0.0, f32(dout[select(0u, ob + u32(j0 + {q}), j0 + {q} < i32(p.w))]), j0 + {q} < i32(p.w));
        gb += d0 + d1 + d2 + d3 + d4 + d5 + d6 + d7;
        #for r in 0..7 {
        if (i32(row) + {r} - 3 >= 0 && i32(row) + {r} - 3 < i32(p.h)) {
            let rb = base + u32(i32(row) + {r} - 3) * p.w;
            #for m in 0..14: let x{m} = x_at(rb, j0 + {m} - 3);
            #for k in 0..7: g{r}_{k} += x{k} * d0 + x{k*1+1} * d1 + x{k*1+2} * d2 + x{k*1+3} * d3 + x{k*1+4} * d4 + x{k*1+5} * d5 + x{k*1+6} * d6 + x{k*1+7} * d7;
        }
        #end
    }
    #for r in 0..7, k in 0..7: sums[{r*7+k} * {{WG}}u + lid] = g{r}_{k};
    sums[49u * {{WG}}u + lid] = gb;
    workgroupBarrier();
    for (var tap = lid; tap < 50u; tap += {{WG}}u) {
        var s = 0.0;
        for (var l = 0u; l < {{WG}}u; l++) { s += sums[tap * {{WG}}u + l]; }
        partial[(ch * p.slices + wid.x) * 50u + tap] = s;
    }
}

// One invocation per (channel, tap or bias): the sum over the channel's slices.
@compute @workgroup_size(64)
fn dw7_wgrad_sum(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= p.c * 50u) { return; }
    let ch = i / 50u;
    let tap = i % 50u;
    var s = 0.0;
    for (var j = 0u; j < p.slices; j++) { s += partial_in[(ch * p.slices + j) * 50u + tap]; }
    if (tap < 49u) { dw[ch * 49u + tap] = {{T}}(s); } else { db[ch] = {{T}}(s); }
}
