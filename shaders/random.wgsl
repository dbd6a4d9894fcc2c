// Counter-based random numbers: Philox4x32-10 keyed by the 64-bit seed, counter = (block
// index, stream, 0, 0). Every invocation turns one 128-bit block into 4 outputs, so the
// numbers depend only on (seed, stream, index): the same on every device and every run.
// `offset` draws elements offset.. of the sequence (a replica's rows of a whole batch).
// Uniform: 24-bit mantissa in [0, 1). Normal: Box-Muller on pairs of uniforms.
const DIST: u32 = {{DIST}}u; // 0 uniform [lo, hi), 1 normal (mean a, std b)

struct Params { n: u32, seed_lo: u32, seed_hi: u32, stream: u32, a: f32, b: f32, offset: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;

fn mulhilo(a: u32, b: u32) -> vec2<u32> {
    // 32x32 -> 64-bit product as (hi, lo) from 16-bit halves.
    let a_lo = a & 0xffffu;
    let a_hi = a >> 16u;
    let b_lo = b & 0xffffu;
    let b_hi = b >> 16u;
    let ll = a_lo * b_lo;
    let lh = a_lo * b_hi;
    let hl = a_hi * b_lo;
    let hh = a_hi * b_hi;
    let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
    let hi = hh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);
    return vec2<u32>(hi, a * b);
}

fn philox(counter: vec4<u32>, key: vec2<u32>) -> vec4<u32> {
    var c = counter;
    var k = key;
    for (var round = 0u; round < 10u; round++) {
        let p0 = mulhilo(0xD2511F53u, c.x);
        let p1 = mulhilo(0xCD9E8D57u, c.z);
        c = vec4<u32>(p1.x ^ c.y ^ k.x, p1.y, p0.x ^ c.w ^ k.y, p0.y);
        k = k + vec2<u32>(0x9E3779B9u, 0xBB67AE85u);
    }
    return c;
}

fn to_unit(v: u32) -> f32 {
    return f32(v >> 8u) * (1.0 / 16777216.0);
}

@compute @workgroup_size(64)
fn random_fill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let block = (wid.x + wid.y * nwg.x) * 64u + lid + p.offset / 4u;
    let first = block * 4u;
    if (first >= p.offset + p.n) { return; }
    let bits = philox(vec4<u32>(block, p.stream, 0u, 0u), vec2<u32>(p.seed_lo, p.seed_hi));
    var v = vec4<f32>(to_unit(bits.x), to_unit(bits.y), to_unit(bits.z), to_unit(bits.w));
    if (DIST == 0u) {
        v = p.a + (p.b - p.a) * v;
    } else {
        // Box-Muller: (u1, u2) -> two normals; 1 - u keeps log's argument in (0, 1].
        let r0 = sqrt(-2.0 * log(1.0 - v.x));
        let r1 = sqrt(-2.0 * log(1.0 - v.z));
        let t0 = 6.283185307179586 * v.y;
        let t1 = 6.283185307179586 * v.w;
        v = p.a + p.b * vec4<f32>(r0 * cos(t0), r0 * sin(t0), r1 * cos(t1), r1 * sin(t1));
    }
    for (var i = 0u; i < 4u; i++) {
        let index = first + i;
        if (index >= p.offset && index < p.offset + p.n) {
            out[index - p.offset] = {{T}}(v[i]);
        }
    }
}
