// Optimiser kernels over flat f32 tensors, four elements (one vec4) per invocation: buffers
// come from the pool in multiples of 16 bytes, and lanes past n keep their stored values.
// adam_step: one Adam/AdamW update per element; the gradient is multiplied by clip[0] (the
// global-norm clipping factor, computed on the device).
// grad_sq_norm: adds sum(grad^2) of one tensor to total[0] (one workgroup per dispatch, so
// consecutive dispatches accumulate without atomics).
// clip_factor: from the global norm of gradients scaled by 1 / inv_scale (loss scaling; 1
// without), inv_scale * min(1, max_norm / (norm * inv_scale + 1e-6)).
// ema_update: shadow = decay * shadow + (1 - decay) * param.
#include adam_params
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> grad: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> clip: array<f32>;
@group(0) @binding(3) var<storage, read_write> param: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> m: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> v: array<vec4<f32>>;

fn flat_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 64u + lid;
}

// Which of vec4 i's four elements lie below n.
fn in_range(i: u32, n: u32) -> vec4<bool> {
    return vec4<u32>(4u * i) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(n);
}

@compute @workgroup_size(64)
fn adam_step(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (4u * i >= p.n) { return; }
    let keep = in_range(i, p.n);
    let w0 = param[i];
    let m0 = m[i];
    let v0 = v[i];
    var w = w0;
    var g = grad[i] * clip[0];
    if (p.decoupled == 1u) {
        w = w * (1.0 - p.lr * p.weight_decay);
    } else {
        g = g + p.weight_decay * w;
    }
    let mi = p.beta1 * m0 + (1.0 - p.beta1) * g;
    let vi = p.beta2 * v0 + (1.0 - p.beta2) * g * g;
    let m_hat = mi / p.bias1;
    let v_hat = vi / p.bias2;
    m[i] = select(m0, mi, keep);
    v[i] = select(v0, vi, keep);
    param[i] = select(w0, w - p.lr * m_hat / (sqrt(v_hat) + p.eps), keep);
}

struct NormParams { n: u32 }
@group(0) @binding(0) var<uniform> np: NormParams;
@group(0) @binding(1) var<storage, read> norm_grad: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> total: array<f32>;
var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn grad_sq_norm(@builtin(local_invocation_index) lid: u32) {
    var acc = vec4<f32>(0.0);
    let n4 = (np.n + 3u) / 4u;
    for (var i = lid; i < n4; i += 64u) {
        let g = select(vec4<f32>(0.0), norm_grad[i], in_range(i, np.n));
        acc += g * g;
    }
    partial[lid] = acc.x + acc.y + acc.z + acc.w;
    for (var width = 32u; width > 0u; width /= 2u) {
        workgroupBarrier();
        if (lid < width) {
            partial[lid] += partial[lid + width];
        }
    }
    if (lid == 0u) {
        total[0] += partial[0];
    }
}

struct ClipParams { max_norm: f32, inv_scale: f32 }
@group(0) @binding(0) var<uniform> cp: ClipParams;
@group(0) @binding(1) var<storage, read> grad_norm: array<f32>;
@group(0) @binding(2) var<storage, read_write> factor: array<f32>;

@compute @workgroup_size(1)
fn clip_factor() {
    let norm = grad_norm[0] * cp.inv_scale;
    factor[0] = cp.inv_scale * select(1.0, min(1.0, cp.max_norm / (norm + 1e-6)), cp.max_norm > 0.0);
}

struct EmaParams { n: u32, decay: f32 }
@group(0) @binding(0) var<uniform> ep: EmaParams;
@group(0) @binding(1) var<storage, read> current: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> shadow: array<vec4<f32>>;

@compute @workgroup_size(64)
fn ema_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (4u * i >= ep.n) { return; }
    let s = shadow[i];
    shadow[i] = select(s, ep.decay * s + (1.0 - ep.decay) * current[i], in_range(i, ep.n));
}
