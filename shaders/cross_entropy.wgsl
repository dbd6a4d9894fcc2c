// Cross-entropy of logits [rows, classes] against class ids, one row per invocation (rows
// are short: class counts): a max-subtracted log-softmax fused with the NLL gather, so
// loss_i = (max_i - x_i[label_i]) + (logsumexp(x_i) - max_i); the row's logsumexp is saved (f32) for the
// backward, gx_ij = gy_i * (exp(x_ij - lse_i) - [j == label_i]).
struct Params { rows: u32, classes: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> labels: array<u32>;
@group(0) @binding(3) var<storage, read_write> loss: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> lse: array<f32>;
@group(0) @binding(3) var<storage, read> lse_saved: array<f32>;
@group(0) @binding(4) var<storage, read> gy: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> gx: array<{{T}}>;

@compute @workgroup_size(64)
fn cross_entropy_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lid: u32) {
    let row = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (row >= p.rows) { return; }
    let base = row * p.classes;
    var mx = -3.4028234663852886e38;
    var top = 0u;
    for (var j = 0u; j < p.classes; j++) {
        let v = f32(x[base + j]);
        if (v > mx) {
            mx = v;
            top = j;
        }
    }
    // logsumexp - max = log(1 + the other classes' exp(x - max)), kept apart from the max so
    // that a confident row's small loss keeps its relative precision.
    var others = 0.0;
    for (var j = 0u; j < p.classes; j++) {
        others += select(exp(f32(x[base + j]) - mx), 0.0, j == top);
    }
    let above_max = log_one_plus(others);
    lse[row] = mx + above_max;
    loss[row] = {{T}}((mx - f32(x[base + labels[row]])) + above_max);
}

// log(1 + a) for a >= 0 without losing a small a to the rounding of 1 + a: below 0.01 its
// series to a^4 (error under a^5 / 5, 2e-9 of it), which needs no log near 1, where a device's
// log may hold only absolute precision (lavapipe's: up to a relative 3e-3 at a = 9e-6); above, Kahan's
// log(u) * a / (u - 1), in which the rounding of u = 1 + a cancels.
fn log_one_plus(a: f32) -> f32 {
    if (a < 0.01) {
        return a * (1.0 - a * (0.5 - a * (1.0 / 3.0 - a * 0.25)));
    }
    let u = 1.0 + a;
    return log(u) * a / (u - 1.0);
}

@compute @workgroup_size(64)
fn cross_entropy_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lid: u32) {
    let row = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (row >= p.rows) { return; }
    let base = row * p.classes;
    let l = lse_saved[row];
    let g = f32(gy[row]);
    let label = labels[row];
    for (var j = 0u; j < p.classes; j++) {
        let z = f32(x[base + j]) - l;
        gx[base + j] = {{T}}(g * select(exp(z), exp_minus_one(z), j == label));
    }
}

// exp(z) - 1 for z <= 0 (the label's probability minus 1), its series to z^4 near 0, where
// exp(z) - 1 would cancel to a few digits in a confident row.
fn exp_minus_one(z: f32) -> f32 {
    if (z > -0.01) {
        return z * (1.0 + z * (0.5 + z * (1.0 / 6.0 + z * (1.0 / 24.0))));
    }
    return exp(z) - 1.0;
}
