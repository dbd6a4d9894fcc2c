// Elementwise kernels: unary maps (with scalar parameters a, b), binary maps with
// broadcasting, and their backward passes. OP is a template constant, so each op
// compiles to its own straight-line pipeline. Values are computed in f32.

const OP: u32 = {{OP}}u;

struct Params {
    n: u32,
    rank: u32,
    a: f32,
    b: f32,
    shape: array<vec4<u32>, 2>,
    a_strides: array<vec4<u32>, 2>,
    b_strides: array<vec4<u32>, 2>,
}
@group(0) @binding(0) var<uniform> p: Params;

// unary: x -> y ; unary backward: (x, gy) -> gx
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(2) var<storage, read> gy: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> gx: array<{{T}}>;
// binary: (lhs, rhs) -> out ; binary backward: (lhs, rhs, gout) -> (glhs, grhs), full shape
@group(0) @binding(1) var<storage, read> lhs: array<{{T}}>;
@group(0) @binding(2) var<storage, read> rhs: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(3) var<storage, read> gout: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> glhs: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> grhs: array<{{T}}>;

fn flat_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 64u + lid;
}

// tanh that stays finite for large |v| on every driver.
fn safe_tanh(v: f32) -> f32 {
    return tanh(clamp(v, -15.0, 15.0));
}

fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(-v));
}

const GELU_C: f32 = 0.7978845608028654; // sqrt(2/pi)

// Unary op ids (keep in sync with ops::elementwise::Unary).
fn unary(v: f32) -> f32 {
    switch OP {
        case 0u: { return -v; }
        case 1u: { return exp(v); }
        case 2u: { return log(v); }
        case 3u: { return sqrt(v); }
        case 4u: { return max(v, 0.0); }
        case 5u: { return v * sigmoid(v); }
        case 6u: { return 0.5 * v * (1.0 + safe_tanh(GELU_C * (v + 0.044715 * v * v * v))); }
        case 7u: { return sigmoid(v); }
        case 8u: { return safe_tanh(v); }
        case 9u: { return clamp(v, p.a, p.b); }
        case 10u: { return pow(v, p.a); }
        case 11u: { return v * p.a + p.b; }
        case 12u: { return p.a / v; }
        case 13u: { return abs(v); }
        case 14u: { return v * v; }
        case 15u: { return sin(v); }
        case 16u: { return cos(v); }
        default: { return v; }
    }
}

// d unary / d v
fn unary_grad(v: f32) -> f32 {
    switch OP {
        case 0u: { return -1.0; }
        case 1u: { return exp(v); }
        case 2u: { return 1.0 / v; }
        case 3u: { return 0.5 / sqrt(v); }
        case 4u: { return select(0.0, 1.0, v > 0.0); }
        case 5u: { let s = sigmoid(v); return s * (1.0 + v * (1.0 - s)); }
        case 6u: {
            let u = GELU_C * (v + 0.044715 * v * v * v);
            let t = safe_tanh(u);
            let du = GELU_C * (1.0 + 3.0 * 0.044715 * v * v);
            return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du;
        }
        case 7u: { let s = sigmoid(v); return s * (1.0 - s); }
        case 8u: { let t = safe_tanh(v); return 1.0 - t * t; }
        case 9u: { return select(0.0, 1.0, v >= p.a && v <= p.b); }
        case 10u: { return p.a * pow(v, p.a - 1.0); }
        case 11u: { return p.a; }
        case 12u: { return -p.a / (v * v); }
        case 13u: { return sign(v); }
        case 14u: { return 2.0 * v; }
        case 15u: { return cos(v); }
        case 16u: { return -sin(v); }
        default: { return 1.0; }
    }
}

// Binary op ids (keep in sync with ops::elementwise::Binary).
fn binary(l: f32, r: f32) -> f32 {
    switch OP {
        case 0u: { return l + r; }
        case 1u: { return l - r; }
        case 2u: { return l * r; }
        case 3u: { return l / r; }
        case 4u: { return pow(l, r); }
        case 5u: { return max(l, r); }
        case 6u: { return min(l, r); }
        case 7u: { return select(0.0, 1.0, l == r); }
        default: { return l; }
    }
}

// (d/dl, d/dr)
fn binary_grad(l: f32, r: f32) -> vec2<f32> {
    switch OP {
        case 0u: { return vec2<f32>(1.0, 1.0); }
        case 1u: { return vec2<f32>(1.0, -1.0); }
        case 2u: { return vec2<f32>(r, l); }
        case 3u: { return vec2<f32>(1.0 / r, -l / (r * r)); }
        case 4u: {
            let pw = pow(l, r);
            return vec2<f32>(r * pow(l, r - 1.0), pw * log(l));
        }
        case 5u: { return select(vec2<f32>(0.0, 1.0), vec2<f32>(1.0, 0.0), l >= r); }
        case 6u: { return select(vec2<f32>(0.0, 1.0), vec2<f32>(1.0, 0.0), l <= r); }
        default: { return vec2<f32>(0.0, 0.0); }
    }
}

// Broadcast source offsets of output element i: (lhs index, rhs index).
fn source_indices(i: u32) -> vec2<u32> {
    var rem = i;
    var li = 0u;
    var ri = 0u;
    for (var k = i32(p.rank) - 1; k >= 0; k--) {
        let q = u32(k) / 4u;
        let r = u32(k) % 4u;
        let dim = p.shape[q][r];
        let c = rem % dim;
        rem = rem / dim;
        li += c * p.a_strides[q][r];
        ri += c * p.b_strides[q][r];
    }
    return vec2<u32>(li, ri);
}

@compute @workgroup_size(64)
fn unary_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.n) { return; }
    y[i] = {{T}}(unary(f32(x[i])));
}

@compute @workgroup_size(64)
fn unary_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.n) { return; }
    gx[i] = {{T}}(f32(gy[i]) * unary_grad(f32(x[i])));
}

@compute @workgroup_size(64)
fn binary_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.n) { return; }
    let s = source_indices(i);
    out[i] = {{T}}(binary(f32(lhs[s.x]), f32(rhs[s.y])));
}

// Gradients in the output's (broadcast) shape; the caller sums them down to each input.
@compute @workgroup_size(64)
fn binary_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.n) { return; }
    let s = source_indices(i);
    let d = binary_grad(f32(lhs[s.x]), f32(rhs[s.y]));
    let g = f32(gout[i]);
    glhs[i] = {{T}}(g * d.x);
    grhs[i] = {{T}}(g * d.y);
}
