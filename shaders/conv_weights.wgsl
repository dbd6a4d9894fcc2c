// Weight transforms: flip_transpose (below) and winograd_weights (U = G g G^T for the Winograd
// kernel, at the end). flip_transpose, for computing a stride-1 conv's input gradient as another conv:
// w [Cout, Cin/g, KH, KW] -> w' [Cin, Cout/g, KH, KW] with in/out channels swapped within
// each group and the window flipped: w'[g*cin_g + ci, co, r, c] = w[g*cout_g + co, ci, KH-1-r, KW-1-c].
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
@group(0) @binding(1) var<storage, read> wts: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> flipped: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> u_out: array<vec4<f32>>; // winograd_weights

@compute @workgroup_size(64)
fn flip_transpose(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i >= p.cout * p.cin_g * p.kh * p.kw) { return; }
    let c = i % p.kw;
    let r = (i / p.kw) % p.kh;
    let co = (i / (p.kw * p.kh)) % p.cout_g;
    let cin = i / (p.kw * p.kh * p.cout_g);
    let g = cin / p.cin_g;
    let ci = cin % p.cin_g;
    let src = (((g * p.cout_g + co) * p.cin_g + ci) * p.kh + (p.kh - 1u - r)) * p.kw + (p.kw - 1u - c);
    flipped[i] = wts[src];
}

// One row of U = (G g) G^T from the row `a` of G g.
fn weight_row(a: vec3<f32>) -> vec4<f32> {
    return vec4<f32>(a.x, 0.5 * (a.x + a.y + a.z), 0.5 * (a.x - a.y + a.z), a.z);
}

// U = G g G^T for every (input channel ci of a group, output channel co) of a 3x3 weight
// w [Cout, Cin/g, 3, 3]: u[(ci * cout + co) * 4 + row] holds row `row` of the 4x4 U.
@compute @workgroup_size(64)
fn winograd_weights(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i >= p.cout * p.cin_g) { return; }
    let co = i % p.cout;
    let ci = i / p.cout;
    let src = (co * p.cin_g + ci) * 9u;
    #for k in 0..9: let g{k} = f32(wts[src + {k}u]);
    // G g (4 x 3), row by row, then each row times G^T.
    let a0 = vec3<f32>(g0, g1, g2);
    let a3 = vec3<f32>(g6, g7, g8);
    let a1 = 0.5 * (a0 + vec3<f32>(g3, g4, g5) + a3);
    let a2 = 0.5 * (a0 - vec3<f32>(g3, g4, g5) + a3);
    let out = i * 4u;
    u_out[out + 0u] = weight_row(a0);
    u_out[out + 1u] = weight_row(a1);
    u_out[out + 2u] = weight_row(a2);
    u_out[out + 3u] = weight_row(a3);
}
