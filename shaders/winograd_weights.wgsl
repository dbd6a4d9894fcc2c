// U = G g G^T, the weights of the Winograd F(4x4, 3x3) kernels, from a 3x3 weight
// [Cout, Cin/g, 3, 3] read as the weight operand (shaders/weights.wgsl): floats, or packed
// integers dequantised in registers (value x its output channel's scale), so a packed weight
// needs no float copy. p.k4 holds the length of a weight row (Cin/g x 9; a packed row's padded
// length).
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
#include weights
@group(0) @binding(2) var<storage, read_write> u_out: array<f32>;

// Weight `at` of the row-major rows (integer values for packed weights).
fn tap(at: u32) -> f32 {
    return weight_vec4(at / 4u)[at % 4u];
}

// G times three values: a column, then a row, of G g.
fn weight_transform(g: vec3<f32>) -> array<f32, 6> {
    let outer = g.x + g.z;
    return array<f32, 6>(
        0.25 * g.x,
        -(outer + g.y) / 6.0,
        (g.y - outer) / 6.0,
        (g.x + 2.0 * g.y + 4.0 * g.z) / 24.0,
        (g.x - 2.0 * g.y + 4.0 * g.z) / 24.0,
        g.z,
    );
}

// U = G g G^T (6x6) for every input channel ci of a group and output channel of a 3x3
// weight w [Cout, Cin/g, 3, 3], over four output channels of a group at a time (a group's
// last quad padded with zeros; quads = groups x quads per group), one invocation per (ci,
// quad, c). `winograd_weights` writes the register kernel's layout, vec4s over the quad:
// u[((ci * quads + quad) * 36 + k * 6 + l) * 4 + c] holds U[k][l] of output channel
// 4 * quad + c. `winograd_weights_gemm` (ungrouped) writes the batched GEMM's A operand
// [36, Cout padded to 4, Cin]: u[((k * 6 + l) * 4 * quads + 4 * quad + c) * Cin + ci].
fn transform_weights(i: u32, gemm: bool) {
    let quads_g = (p.cout_g + 3u) / 4u;
    let quads = p.groups * quads_g;
    if (i >= p.cin_g * quads * 4u) { return; }
    let c = i % 4u;
    let quad = (i / 4u) % quads;
    let ci = i / (4u * quads);
    let co_g = (quad % quads_g) * 4u + c;
    var out = (i / 4u) * 36u * 4u + c;
    var step = 4u;
    if (gemm) {
        out = (4u * quad + c) * p.cin_g + ci;
        step = 4u * quads * p.cin_g;
    }
    if (co_g >= p.cout_g) {
        #for e in 0..36: u_out[out + {e}u * step] = 0.0;
        return;
    }
    let co = (quad / quads_g) * p.cout_g + co_g;
    let scale = weight_scale(words_of(p.cout * p.k4 / 4u), co);
    #for k in 0..9: let g{k} = tap(co * p.k4 + ci * 9u + {k}u) * scale;
    #for j in 0..3: let gg{j} = weight_transform(vec3<f32>(g{j}, g{j*1+3}, g{j*1+6}));
    #for k in 0..6: let u{k} = weight_transform(vec3<f32>(gg0[{k}], gg1[{k}], gg2[{k}]));
    #for k in 0..6, l in 0..6: u_out[out + {k*6+l}u * step] = u{k}[{l}];
}

@compute @workgroup_size(64)
fn winograd_weights(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    transform_weights((wid.x + wid.y * nwg.x) * 64u + lid, false);
}

@compute @workgroup_size(64)
fn winograd_weights_gemm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lid: u32) {
    transform_weights((wid.x + wid.y * nwg.x) * 64u + lid, true);
}
