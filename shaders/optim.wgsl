// Optimiser kernels. adam_step: one Adam/AdamW update per element; the gradient is
// multiplied by clip[0] (the global-norm clipping factor, computed on the device).
// clip_factor: from the summed squared norm of gradients scaled by 1 / inv_scale (loss
// scaling; 1 without), inv_scale * min(1, max_norm / (norm * inv_scale + 1e-6)).
// ema_update: shadow = decay * shadow + (1 - decay) * param.
struct Params {
    n: u32,
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    bias1: f32,      // 1 - beta1^t
    bias2: f32,      // 1 - beta2^t
    decoupled: u32,  // 1: AdamW (decay the weights), 0: Adam (L2 added to the gradient)
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read> clip: array<f32>;
@group(0) @binding(3) var<storage, read_write> param: array<f32>;
@group(0) @binding(4) var<storage, read_write> m: array<f32>;
@group(0) @binding(5) var<storage, read_write> v: array<f32>;

fn flat_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 64u + lid;
}

@compute @workgroup_size(64)
fn adam_step(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.n) { return; }
    var w = param[i];
    var g = grad[i] * clip[0];
    if (p.decoupled == 1u) {
        w = w * (1.0 - p.lr * p.weight_decay);
    } else {
        g = g + p.weight_decay * w;
    }
    let mi = p.beta1 * m[i] + (1.0 - p.beta1) * g;
    let vi = p.beta2 * v[i] + (1.0 - p.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    let m_hat = mi / p.bias1;
    let v_hat = vi / p.bias2;
    param[i] = w - p.lr * m_hat / (sqrt(v_hat) + p.eps);
}

struct ClipParams { max_norm: f32, inv_scale: f32 }
@group(0) @binding(0) var<uniform> cp: ClipParams;
@group(0) @binding(1) var<storage, read> sq_norm: array<f32>;
@group(0) @binding(2) var<storage, read_write> factor: array<f32>;

@compute @workgroup_size(1)
fn clip_factor() {
    let norm = sqrt(sq_norm[0]) * cp.inv_scale;
    factor[0] = cp.inv_scale * select(1.0, min(1.0, cp.max_norm / (norm + 1e-6)), cp.max_norm > 0.0);
}

struct EmaParams { n: u32, decay: f32 }
@group(0) @binding(0) var<uniform> ep: EmaParams;
@group(0) @binding(1) var<storage, read> current: array<f32>;
@group(0) @binding(2) var<storage, read_write> shadow: array<f32>;

@compute @workgroup_size(64)
fn ema_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= ep.n) { return; }
    shadow[i] = ep.decay * shadow[i] + (1.0 - ep.decay) * current[i];
}
