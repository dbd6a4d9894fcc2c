// Zero padding in one pass: every output element is written once, with the input element
// it covers or zero (no fill before a copy). Shapes of up to 8 dims.
struct Params {
    n: u32,
    rank: u32,
    _a: u32,
    _b: u32,
    out_shape: array<vec4<u32>, 2>,
    in_shape: array<vec4<u32>, 2>,
    before: array<vec4<u32>, 2>,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{T}}>;

fn out_dim(k: u32) -> u32 {
    return p.out_shape[k / 4u][k % 4u];
}
fn in_dim(k: u32) -> u32 {
    return p.in_shape[k / 4u][k % 4u];
}
fn before(k: u32) -> u32 {
    return p.before[k / 4u][k % 4u];
}

// Input offset of output multi-index `index` over dims [0, rank) taken from the back
// (`rank` < p.rank leaves the last dims out), and whether it lies inside the input.
struct Source {
    offset: u32,
    inside: bool,
}
fn source(index: u32, rank: u32) -> Source {
    var rem = index;
    var offset = 0u;
    var stride = 1u;
    var inside = true;
    for (var k = i32(p.rank) - 1; k >= 0; k--) {
        let kk = u32(k);
        let len = in_dim(kk);
        if (kk < rank) {
            let c = rem % out_dim(kk);
            rem = rem / out_dim(kk);
            let b = before(kk);
            inside = inside && c >= b && c < b + len;
            offset += select(0u, (c - b) * stride, c >= b);
        }
        stride *= len;
    }
    return Source(offset, inside);
}

@compute @workgroup_size(64)
fn pad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i >= p.n) { return; }
    let s = source(i, p.rank);
    dst[i] = select({{T}}(0.0), src[select(0u, s.offset, s.inside)], s.inside);
}

// Row form for CPU adapters: one invocation per output row of the last dim (n = rows): the
// multi-index is decoded once per row (per-lane integer division is slow on lavapipe).
@compute @workgroup_size(64)
fn pad_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let row = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (row >= p.n) { return; }
    let last = p.rank - 1u;
    let s = source(row, last);
    let len = in_dim(last);
    let b = before(last);
    let out_len = out_dim(last);
    let d = row * out_len;
    for (var j = 0u; j < out_len; j++) {
        let inside = s.inside && j >= b && j < b + len;
        dst[d + j] = select({{T}}(0.0), src[select(0u, s.offset + j - b, inside)], inside);
    }
}
