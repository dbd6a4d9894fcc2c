// Elementwise kernels: unary maps (with scalar parameters a, b), binary maps with
// broadcasting, and their backward passes. OP is a template constant, so each op
// compiles to its own straight-line pipeline. Values are computed in f32.
// Each invocation handles ELEMS elements (few, large workgroups: cheap on CPU adapters):
// unary maps and same-shape binary maps as ELEMS / 4 vec4s WG apart (one load per four
// elements; buffers are pooled in multiples of 16 bytes, so a partial last vec4 stays in
// bounds and its lanes past n write padding nobody reads), broadcasting binary maps as
// ELEMS scalars WG apart (neighbouring lanes touch neighbouring elements). Binary maps see the
// output as rows of its last dim (the Rust side merges dims that broadcast alike, so a
// same-shape or bias-like operand has at most two dims) and follow each element's row and
// column with a cursor: source offsets are decoded once per row, never per element.
// WGSL has no erf: the exact GELU takes the normal CDF from Cephes' float32 erf/erfc
// (erf_near_zero, erfc_tail), within 1.5e-7 of the true erf.

const OP: u32 = {{OP}}u;
const WG: u32 = 64u;
const ELEMS: u32 = 16u;

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
@group(0) @binding(1) var<storage, read> x: array<vec4<{{T}}>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<{{T}}>>;
@group(0) @binding(2) var<storage, read> gy: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read_write> gx: array<vec4<{{T}}>>;
// binary: (lhs, rhs) -> out ; binary backward: (lhs, rhs, gout) -> (glhs, grhs), full shape
@group(0) @binding(1) var<storage, read> lhs: array<{{T}}>;
@group(0) @binding(2) var<storage, read> rhs: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(3) var<storage, read> gout: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> glhs: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> grhs: array<{{T}}>;
// same-shape binary: (lhs4, rhs4) -> out4
@group(0) @binding(1) var<storage, read> lhs4: array<vec4<{{T}}>>;
@group(0) @binding(2) var<storage, read> rhs4: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read_write> out4: array<vec4<{{T}}>>;

// Index of this invocation's first element; the others follow WG apart.
fn first_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG * ELEMS + lid;
}

// The vec4 kernels: index of this invocation's first vec4 (the others follow WG apart) and
// the end of its range.
fn first_vec4(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG * (ELEMS / 4u) + lid;
}

fn end_vec4(first: u32) -> u32 {
    return min((p.n + 3u) / 4u, first + (ELEMS / 4u) * WG);
}

// tanh that stays finite for large |v| on every driver.
fn safe_tanh(v: f32) -> f32 {
    return tanh(clamp(v, -15.0, 15.0));
}

fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(-v));
}

const GELU_C: f32 = 0.7978845608028654; // sqrt(2/pi)
const SQRT1_2: f32 = 0.7071067811865476; // 1/sqrt(2)
const INV_SQRT_2PI: f32 = 0.3989422804014327; // 1/sqrt(2 pi)

// erf(x) for |x| <= 1: x * T(x^2), the polynomial of Cephes' erff.
fn erf_near_zero(x: f32) -> f32 {
    let z = x * x;
    var t = 7.853861353153693e-5;
    t = t * z - 8.010193625184903e-4;
    t = t * z + 5.188327685732524e-3;
    t = t * z - 2.685381193529856e-2;
    t = t * z + 1.128358514861418e-1;
    t = t * z - 3.761262582423300e-1;
    t = t * z + 1.128379165726710;
    return x * t;
}

// erfc(x) for x >= 1: exp(-x^2) / x * P(1/x^2) below 2, R(1/x^2) above (Cephes' erfcf);
// 0 once exp(-x^2) underflows.
fn erfc_tail(x: f32) -> f32 {
    let y = 1.0 / (x * x);
    var q: f32;
    if (x < 2.0) {
        q = 2.326819970068386e-2;
        q = q * y - 1.387039388740657e-1;
        q = q * y + 3.687424674597105e-1;
        q = q * y - 5.824733027278666e-1;
        q = q * y + 6.210004621745983e-1;
        q = q * y - 4.944515323274145e-1;
        q = q * y + 3.404879937665872e-1;
        q = q * y - 2.741127028184656e-1;
        q = q * y + 5.638259427386472e-1;
    } else {
        q = -1.047766399936249e1;
        q = q * y + 1.297719955372516e1;
        q = q * y - 7.495518717768503;
        q = q * y + 2.921019019210786;
        q = q * y - 1.015265279202700;
        q = q * y + 4.218463358204948e-1;
        q = q * y - 2.820767439740514e-1;
        q = q * y + 5.641895067754075e-1;
    }
    return exp(-x * x) / x * q;
}

// The standard normal CDF Phi(v) = (1 + erf(v / sqrt 2)) / 2, within ~1e-7 of the true
// value; the lower tail comes from erfc, so it stays accurate relative to its small value
// (no 1 + erf cancellation).
fn normal_cdf(v: f32) -> f32 {
    let a = v * SQRT1_2;
    if (abs(a) <= 1.0) {
        return 0.5 + 0.5 * erf_near_zero(a);
    }
    let tail = 0.5 * erfc_tail(abs(a));
    return select(1.0 - tail, tail, a < 0.0);
}

// Unary op ids (keep in sync with ops::elementwise::Unary).
fn unary(v: f32) -> f32 {
    switch OP {
        case 0u: { return -v; }
        case 1u: { return exp(v); }
        case 2u: { return log(v); }
        case 3u: { return sqrt(v); }
        case 4u: { return max(v, 0.0); }
        case 5u: { return v * sigmoid(v); }
        case 6u: { return 0.5 * v * (1.0 + safe_tanh(GELU_C * (v + 0.044715 * v * v * v))); } // GELU, tanh form
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
        case 17u: { return v * normal_cdf(v); } // GELU, exact form
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
        case 6u: { // GELU, tanh form
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
        case 17u: { return normal_cdf(v) + v * INV_SQRT_2PI * exp(-0.5 * v * v); } // Phi + x phi
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

fn dim(k: u32) -> u32 {
    return p.shape[k / 4u][k % 4u];
}

fn strides(k: u32) -> vec2<u32> {
    return vec2<u32>(p.a_strides[k / 4u][k % 4u], p.b_strides[k / 4u][k % 4u]);
}

// Offsets into (lhs, rhs) of the start of output row `row` (a row is the last dim).
fn row_offsets(row: u32) -> vec2<u32> {
    var rem = row;
    var off = vec2<u32>(0u);
    for (var k = p.rank - 1u; k > 0u; k--) {
        var c = rem;
        if (k > 1u) {
            c = rem % dim(k - 1u);
            rem = rem / dim(k - 1u);
        }
        off += c * strides(k - 1u);
    }
    return off;
}

// Output element (row, col), its row's source offsets, the row length, the column strides,
// and the row/column steps of WG elements.
struct Cursor {
    row: u32,
    col: u32,
    off: vec2<u32>,
    cols: u32,
    step: vec2<u32>,
    dr: u32,
    dc: u32,
}

fn cursor(first: u32) -> Cursor {
    let cols = dim(p.rank - 1u);
    let row = first / cols;
    return Cursor(row, first % cols, row_offsets(row), cols, strides(p.rank - 1u), WG / cols, WG % cols);
}

// (lhs index, rhs index) of the cursor's element.
fn source(c: Cursor) -> vec2<u32> {
    return c.off + c.col * c.step;
}

fn advance(c: ptr<function, Cursor>) {
    var row = (*c).row + (*c).dr;
    (*c).col += (*c).dc;
    if ((*c).col >= (*c).cols) {
        (*c).col -= (*c).cols;
        row += 1u;
    }
    if (row != (*c).row) {
        (*c).row = row;
        (*c).off = row_offsets(row);
    }
}

fn unary4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(unary(v.x), unary(v.y), unary(v.z), unary(v.w));
}

fn unary_grad4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(unary_grad(v.x), unary_grad(v.y), unary_grad(v.z), unary_grad(v.w));
}

fn binary4(l: vec4<f32>, r: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(binary(l.x, r.x), binary(l.y, r.y), binary(l.z, r.z), binary(l.w, r.w));
}

@compute @workgroup_size(64)
fn unary_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let first = first_vec4(wid, nwg, lid);
    for (var i = first; i < end_vec4(first); i += WG) {
        y[i] = vec4<{{T}}>(unary4(vec4<f32>(x[i])));
    }
}

@compute @workgroup_size(64)
fn unary_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let first = first_vec4(wid, nwg, lid);
    for (var i = first; i < end_vec4(first); i += WG) {
        gx[i] = vec4<{{T}}>(vec4<f32>(gy[i]) * unary_grad4(vec4<f32>(x[i])));
    }
}

@compute @workgroup_size(64)
fn binary_forward_same_shape(@builtin(workgroup_id) wid: vec3<u32>,
                             @builtin(num_workgroups) nwg: vec3<u32>,
                             @builtin(local_invocation_index) lid: u32) {
    let first = first_vec4(wid, nwg, lid);
    for (var i = first; i < end_vec4(first); i += WG) {
        out4[i] = vec4<{{T}}>(binary4(vec4<f32>(lhs4[i]), vec4<f32>(rhs4[i])));
    }
}

@compute @workgroup_size(64)
fn binary_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let first = first_id(wid, nwg, lid);
    var c = cursor(first);
    for (var i = first; i < min(p.n, first + ELEMS * WG); i += WG) {
        let s = source(c);
        out[i] = {{T}}(binary(f32(lhs[s.x]), f32(rhs[s.y])));
        advance(&c);
    }
}

// Gradients in the output's (broadcast) shape; the caller sums them down to each input.
@compute @workgroup_size(64)
fn binary_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let first = first_id(wid, nwg, lid);
    var c = cursor(first);
    for (var i = first; i < min(p.n, first + ELEMS * WG); i += WG) {
        let s = source(c);
        let d = binary_grad(f32(lhs[s.x]), f32(rhs[s.y]));
        let g = f32(gout[i]);
        glhs[i] = {{T}}(g * d.x);
        grhs[i] = {{T}}(g * d.y);
        advance(&c);
    }
}
