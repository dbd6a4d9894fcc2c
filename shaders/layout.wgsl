// Strided copy: dst[dst_offset + idx . dst_strides] = src[src_offset + idx . src_strides]
// over an iteration shape of up to 8 dims. Implements permute, broadcast (stride 0),
// slice, concat and padding with one kernel.
struct Params {
    n: u32,
    rank: u32,
    src_offset: u32,
    dst_offset: u32,
    shape: array<vec4<u32>, 2>,
    src_strides: array<vec4<u32>, 2>,
    dst_strides: array<vec4<u32>, 2>,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{T}}>;

@compute @workgroup_size(64)
fn strided_copy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i >= p.n) { return; }
    var rem = i;
    var s = p.src_offset;
    var d = p.dst_offset;
    for (var k = i32(p.rank) - 1; k >= 0; k--) {
        let q = u32(k) / 4u;
        let r = u32(k) % 4u;
        let dim = p.shape[q][r];
        let c = rem % dim;
        rem = rem / dim;
        s += c * p.src_strides[q][r];
        d += c * p.dst_strides[q][r];
    }
    dst[d] = src[s];
}

// Row form for CPU adapters: one invocation per row of the last dim (n = number of rows),
// decoding the multi-index once per row instead of once per element (per-lane integer
// division is slow on lavapipe), then striding along the row. Rows must stay under the
// per-invocation loop budget (gpu::MAX_LOOP_ITERATIONS).
@compute @workgroup_size(64)
fn strided_copy_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lid: u32) {
    let row = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (row >= p.n) { return; }
    let last = p.rank - 1u;
    var rem = row;
    var s = p.src_offset;
    var d = p.dst_offset;
    for (var k = i32(last) - 1; k >= 0; k--) {
        let q = u32(k) / 4u;
        let r = u32(k) % 4u;
        let dim = p.shape[q][r];
        let c = rem % dim;
        rem = rem / dim;
        s += c * p.src_strides[q][r];
        d += c * p.dst_strides[q][r];
    }
    let len = p.shape[last / 4u][last % 4u];
    let ss = p.src_strides[last / 4u][last % 4u];
    let ds = p.dst_strides[last / 4u][last % 4u];
    for (var j = 0u; j < len; j++) {
        dst[d + j * ds] = src[s + j * ss];
    }
}
