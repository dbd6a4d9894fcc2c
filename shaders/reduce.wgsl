// Row reductions (sum or max of each contiguous row, times `scale`), two strategies:
// reduce_lane: one row per invocation, a serial loop (best on CPU adapters and for many
// short rows); reduce_tree: one row per 64-invocation workgroup with a workgroup-memory tree.
// The subgroup strategy is in reduce_subgroup.wgsl (it needs the SUBGROUP feature).
// reduce_columns reduces leading axes in place: `rows` outputs, each over `len` elements
// `rows` apart (a [len, rows] tensor summed over its first axis, with no permute).

const OP: u32 = {{OP}}u; // 0 sum, 1 max
const WG: u32 = 64u;

struct Params { rows: u32, len: u32, scale: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> y: array<{{T}}>;

var<workgroup> partial: array<f32, WG>;

fn identity() -> f32 {
    return select(0.0, -3.4028234663852886e38, OP == 1u);
}

fn combine(a: f32, b: f32) -> f32 {
    return select(a + b, max(a, b), OP == 1u);
}

@compute @workgroup_size(64)
fn reduce_lane(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let row = (wid.x + wid.y * nwg.x) * WG + lid;
    if (row >= p.rows) { return; }
    var acc = identity();
    let base = row * p.len;
    for (var j = 0u; j < p.len; j++) {
        acc = combine(acc, f32(x[base + j]));
    }
    y[row] = {{T}}(acc * p.scale);
}

@compute @workgroup_size(64)
fn reduce_tree(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.rows) { return; }
    var acc = identity();
    let base = row * p.len;
    for (var j = lid; j < p.len; j += WG) {
        acc = combine(acc, f32(x[base + j]));
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            partial[lid] = combine(partial[lid], partial[lid + s]);
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        y[row] = {{T}}(partial[0] * p.scale);
    }
}

@compute @workgroup_size(64)
fn reduce_columns(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let column = (wid.x + wid.y * nwg.x) * WG + lid;
    if (column >= p.rows) { return; }
    var acc = identity();
    for (var i = 0u; i < p.len; i++) {
        acc = combine(acc, f32(x[i * p.rows + column]));
    }
    y[column] = {{T}}(acc * p.scale);
}
