// Softmax over the last axis, one row per invocation (rows are short in this engine:
// attention rows of at most a few thousand), max-subtracted for stability; backward uses
// the saved output: gx = y * (gy - sum(gy * y)).
struct Params { rows: u32, len: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(1) var<storage, read> y_saved: array<{{T}}>;
@group(0) @binding(2) var<storage, read> gy: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> gx: array<{{T}}>;

@compute @workgroup_size(64)
fn softmax_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let row = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (row >= p.rows) { return; }
    let base = row * p.len;
    var mx = -3.4028234663852886e38;
    for (var j = 0u; j < p.len; j++) {
        mx = max(mx, f32(x[base + j]));
    }
    var total = 0.0;
    for (var j = 0u; j < p.len; j++) {
        total += exp(f32(x[base + j]) - mx);
    }
    let inv = 1.0 / total;
    for (var j = 0u; j < p.len; j++) {
        y[base + j] = {{T}}(exp(f32(x[base + j]) - mx) * inv);
    }
}

@compute @workgroup_size(64)
fn softmax_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let row = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (row >= p.rows) { return; }
    let base = row * p.len;
    var dot = 0.0;
    for (var j = 0u; j < p.len; j++) {
        dot += f32(gy[base + j]) * f32(y_saved[base + j]);
    }
    for (var j = 0u; j < p.len; j++) {
        let yj = f32(y_saved[base + j]);
        gx[base + j] = {{T}}(yj * (f32(gy[base + j]) - dot));
    }
}
