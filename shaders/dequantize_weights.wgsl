// Packed integer conv weights (shaders/weights.wgsl) back to floats for kernels that need
// them, such as the Winograd weight transform: w[co, k] = value x the channel's scale, row-major
// [Cout, K] without the rows' padding. One weight per invocation.
struct Params { cout: u32, k: u32, padded_k: u32 }
@group(0) @binding(0) var<uniform> p: Params;
#include weights
@group(0) @binding(2) var<storage, read_write> w: array<f32>;

@compute @workgroup_size(64)
fn dequantize_weights(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i >= p.cout * p.k) { return; }
    let co = i / p.k;
    let at = co * p.padded_k + i % p.k;
    w[i] = weight_vec4(at / 4u)[at % 4u] * weight_scale(words_of(p.cout * p.padded_k / 4u), co);
}
