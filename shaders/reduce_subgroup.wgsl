// Row reduction with subgroup operations: one row per 64-invocation workgroup; each
// subgroup (any size: 8 on lavapipe, 32/64 on GPUs) combines its lanes with subgroupAdd/Max,
// then the first invocation combines the per-subgroup results.

const OP: u32 = {{OP}}u; // 0 sum, 1 max
const WG: u32 = 64u;

struct Params { rows: u32, len: u32, scale: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> y: array<{{T}}>;

var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(64)
fn reduce_subgroup(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32,
                   @builtin(subgroup_invocation_id) lane: u32,
                   @builtin(subgroup_id) sg: u32,
                   @builtin(num_subgroups) nsg: u32) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= p.rows) { return; }
    let base = row * p.len;
    var acc = select(0.0, -3.4028234663852886e38, OP == 1u);
    for (var j = lid; j < p.len; j += WG) {
        let v = f32(x[base + j]);
        acc = select(acc + v, max(acc, v), OP == 1u);
    }
    var r: f32;
    if (OP == 1u) {
        r = subgroupMax(acc);
    } else {
        r = subgroupAdd(acc);
    }
    if (lane == 0u) {
        partial[sg] = r;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var total = partial[0];
        for (var i = 1u; i < nsg; i++) {
            total = select(total + partial[i], max(total, partial[i]), OP == 1u);
        }
        y[row] = {{T}}(total * p.scale);
    }
}
