// Fill: writes one 32-bit pattern into every word of a buffer (zeros, constants, NaN poison),
// ELEMS words per invocation, WG apart.
const WG: u32 = 64u;
const ELEMS: u32 = 16u;

struct Params { words: u32, bits: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn fill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let first = (wid.x + wid.y * nwg.x) * WG * ELEMS + lid;
    for (var i = first; i < min(p.words, first + ELEMS * WG); i += WG) {
        dst[i] = p.bits;
    }
}
