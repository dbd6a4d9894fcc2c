// 8-bit Adam: the moments m and v of each block of 256 elements (one workgroup, four per
// invocation) are stored as one byte each, four to a u32, relative to the block's absolute
// maximum (scales[block] = (max |m|, max v), f32). A byte is a dynamic-exponent code: m's low
// seven bits e give |m| = max |m| * 2^((e - 127) / 8) (e = 0: zero) and its top bit the sign;
// v's eight bits give v = max v * 2^((e - 255) / 8). That covers 2^-15.9 (m) and 2^-31.9 (v)
// of the block's maximum in steps of 9% (sqrt(v): 4.4%). Rounding is stochastic in the
// exponent (a hash of the element and the step), so the slow decay of v (beta2 = 0.999,
// 1/87 of a step per update) is kept on average instead of rounding away.
// adam8bit_step: one update (as adam_step in optim.wgsl, with the decoded moments); the
//   parameter moves by the unrounded new moments, which are then encoded.
// moments_encode: f32 m, v -> codes and scales (round to nearest; resuming a checkpoint).
// moments_decode: codes and scales -> f32 m, v (saving a checkpoint).

const STEPS: f32 = 8.0; // codes per doubling

#include adam_params
@group(0) @binding(0) var<uniform> p: Params;
// adam8bit_step: (grad, clip) -> (param, m_codes, v_codes, scales)
@group(0) @binding(1) var<storage, read> grad: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> clip: array<f32>;
@group(0) @binding(3) var<storage, read_write> param: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> m_codes: array<u32>;
@group(0) @binding(5) var<storage, read_write> v_codes: array<u32>;
@group(0) @binding(6) var<storage, read_write> scales: array<vec2<f32>>;
// moments_encode: (m_in, v_in) -> (m_out_codes, v_out_codes, out_scales)
@group(0) @binding(1) var<storage, read> m_in: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> v_in: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> m_out_codes: array<u32>;
@group(0) @binding(4) var<storage, read_write> v_out_codes: array<u32>;
@group(0) @binding(5) var<storage, read_write> out_scales: array<vec2<f32>>;
// moments_decode: (m_in_codes, v_in_codes, in_scales) -> (m_out, v_out)
@group(0) @binding(1) var<storage, read> m_in_codes: array<u32>;
@group(0) @binding(2) var<storage, read> v_in_codes: array<u32>;
@group(0) @binding(3) var<storage, read> in_scales: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> m_out: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> v_out: array<vec4<f32>>;

var<workgroup> peaks: array<vec2<f32>, 64>;

// Which of vec4 i's four elements lie below n.
fn in_range(i: u32) -> vec4<bool> {
    return vec4<u32>(4u * i) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(p.n);
}

// (max |m|, max v) over the workgroup's 256 elements; every invocation gets it.
fn block_peaks(lid: u32, m: vec4<f32>, v: vec4<f32>) -> vec2<f32> {
    let am = abs(m);
    peaks[lid] = vec2<f32>(max(max(am.x, am.y), max(am.z, am.w)), max(max(v.x, v.y), max(v.z, v.w)));
    for (var width = 32u; width > 0u; width /= 2u) {
        workgroupBarrier();
        if (lid < width) {
            peaks[lid] = max(peaks[lid], peaks[lid + width]);
        }
    }
    workgroupBarrier();
    return peaks[0];
}

// The four bytes of `word`, lowest first.
fn bytes_of(word: u32) -> vec4<u32> {
    return (vec4<u32>(word) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u);
}

fn word_of(b: vec4<u32>) -> u32 {
    return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

// The four moments of `word` relative to `peak`: m's codes are SIGNED (seven exponent bits
// and a sign bit), v's are not (eight exponent bits).
fn decode(word: u32, peak: f32, signed: bool) -> vec4<f32> {
    let b = bytes_of(word);
    let e = select(b, b & vec4<u32>(127u), signed);
    let top = select(255.0, 127.0, signed);
    let mag = select(peak * exp2((vec4<f32>(e) - top) / STEPS), vec4<f32>(0.0), e == vec4<u32>(0u));
    return select(mag, -mag, vec4<bool>(signed) & ((b & vec4<u32>(128u)) != vec4<u32>(0u)));
}

// Exponent codes 0..top of magnitudes `a` (>= 0) relative to `peak`, rounding down after
// adding `u` in [0, 1) (0.5: to nearest); magnitudes below the smallest code become 0.
fn exponent_codes(a: vec4<f32>, peak: f32, top: f32, u: vec4<f32>) -> vec4<u32> {
    let t = top + STEPS * log2(max(a, vec4<f32>(1e-38)) / max(peak, 1e-38)) + u;
    let e = vec4<u32>(clamp(floor(t), vec4<f32>(0.0), vec4<f32>(top)));
    return select(e, vec4<u32>(0u), a <= vec4<f32>(0.0));
}

// The code word of four moments `x` relative to `peak` (signed: m's codes, else v's).
fn encode(x: vec4<f32>, peak: f32, u: vec4<f32>, signed: bool) -> u32 {
    let e = exponent_codes(abs(x), peak, select(255.0, 127.0, signed), u);
    let negative = vec4<bool>(signed) & (x < vec4<f32>(0.0)) & (e != vec4<u32>(0u));
    return word_of(e | select(vec4<u32>(0u), vec4<u32>(128u), negative));
}

// Four uniform numbers in [0, 1) for vec4 i at `seed` (a PCG hash of each element's index).
fn uniforms(i: u32, seed: u32) -> vec4<f32> {
    var s = (vec4<u32>(4u * i) + vec4<u32>(0u, 1u, 2u, 3u)) * 747796405u + seed * 2891336453u + 1u;
    s = ((s >> ((s >> vec4<u32>(28u)) + vec4<u32>(4u))) ^ s) * 277803737u;
    s = (s >> vec4<u32>(22u)) ^ s;
    return vec4<f32>(s >> vec4<u32>(8u)) / 16777216.0;
}

@compute @workgroup_size(64)
fn adam8bit_step(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let block = wid.x + wid.y * nwg.x;
    let i = block * 64u + lid;
    let keep = in_range(i);
    let old = scales[block];
    var w = select(vec4<f32>(0.0), param[i], keep);
    var g = select(vec4<f32>(0.0), grad[i], keep) * clip[0];
    if (p.decoupled == 1u) {
        w = w * (1.0 - p.lr * p.weight_decay);
    } else {
        g = g + p.weight_decay * w;
    }
    let m = p.beta1 * decode(m_codes[i], old.x, true) + (1.0 - p.beta1) * g;
    let v = p.beta2 * decode(v_codes[i], old.y, false) + (1.0 - p.beta2) * g * g;
    let peak = block_peaks(lid, select(vec4<f32>(0.0), m, keep), select(vec4<f32>(0.0), v, keep));
    let u = uniforms(i, p.seed);
    m_codes[i] = encode(select(vec4<f32>(0.0), m, keep), peak.x, u, true);
    v_codes[i] = encode(select(vec4<f32>(0.0), v, keep), peak.y, u.wzyx, false);
    if (lid == 0u) {
        scales[block] = peak;
    }
    if (4u * i < p.n) {
        let moved = w - p.lr * (m / p.bias1) / (sqrt(v / p.bias2) + p.eps);
        param[i] = select(param[i], moved, keep);
    }
}

@compute @workgroup_size(64)
fn moments_encode(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let block = wid.x + wid.y * nwg.x;
    let i = block * 64u + lid;
    let keep = in_range(i);
    let m = select(vec4<f32>(0.0), m_in[i], keep);
    let v = select(vec4<f32>(0.0), v_in[i], keep);
    let peak = block_peaks(lid, m, v);
    m_out_codes[i] = encode(m, peak.x, vec4<f32>(0.5), true);
    v_out_codes[i] = encode(v, peak.y, vec4<f32>(0.5), false);
    if (lid == 0u) {
        out_scales[block] = peak;
    }
}

@compute @workgroup_size(64)
fn moments_decode(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let block = wid.x + wid.y * nwg.x;
    let i = block * 64u + lid;
    if (4u * i >= p.n) { return; }
    let peak = in_scales[block];
    let keep = in_range(i);
    m_out[i] = select(vec4<f32>(0.0), decode(m_in_codes[i], peak.x, true), keep);
    v_out[i] = select(vec4<f32>(0.0), decode(v_in_codes[i], peak.y, false), keep);
}
