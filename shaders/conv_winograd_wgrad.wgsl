// The weight gradient of a Winograd F(4x4, 3x3) conv as a batched GEMM (ops::conv's Winograd
// weight gradient, ungrouped 3x3 stride-1 convs). The forward is bilinear in the weights g and
// each tile's input patch d: Y = A^T [(G g G^T) . (B^T d B)] A, so
//     dW = G^T [ sum over tiles (A dY A^T) . (B^T d B) ] G.
// `winograd_input` (conv_winograd_gemm.wgsl) writes V[e][ci][t] = (B^T d B)[e];
// `winograd_grad_tiles` (here) writes Q[e][t][co] = (A dY A^T)[e] of each 4x4 tile of dY (the
// parts of a tile past the output read as zeros); the blocked matmul makes
// M[e] = V[e] (Cin x T) x Q[e] (T x Cout) for the 36 entries at once, summing over every tile of
// the batch; `winograd_weight_grad` writes dW = G^T M G of each (output, input) channel pair.
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
#include winograd_tiles

// winograd_grad_tiles: dy [N, Cout, OH, OW] -> q [36, T, Cout padded to 4] as vec4s
@group(0) @binding(1) var<storage, read> dy: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> q: array<vec4<f32>>;
// winograd_weight_grad: m [36, Cin, Cout padded to 4] as vec4s -> dw [Cout, Cin, 3, 3]
@group(0) @binding(1) var<storage, read> m: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dw: array<{{T}}>;

// A times four vec4s (a column, then a row, of a dY tile; four output channels each): the
// transpose of the forward's output transform A^T (winograd_transforms.wgsl).
fn grad_transform(d: array<vec4<f32>, 4>) -> array<vec4<f32>, 6> {
    let even = d[0] + d[2];
    let odd = d[1] + d[3];
    let even4 = d[0] + 4.0 * d[2];
    let odd4 = 2.0 * (d[1] + 4.0 * d[3]);
    return array<vec4<f32>, 6>(d[0], even + odd, even - odd, even4 + odd4, even4 - odd4, d[3]);
}

// G^T times six vec4s (a column, then a row, of M): the transpose of the forward's weight
// transform G (conv_weights.wgsl).
fn weight_grad_transform(m: array<vec4<f32>, 6>) -> array<vec4<f32>, 3> {
    let plus12 = m[1] + m[2];
    let plus34 = m[3] + m[4];
    return array<vec4<f32>, 3>(
        0.25 * m[0] - plus12 / 6.0 + plus34 / 24.0,
        (m[2] - m[1]) / 6.0 + (m[3] - m[4]) / 12.0,
        (plus34 - plus12) / 6.0 + m[5],
    );
}

// dY at (n, channel co, row y, column x), 0 past the output or past the channels.
fn grad_at(n: u32, co: u32, y: u32, x: u32) -> f32 {
    if (co >= p.cout || y >= p.oh || x >= p.ow || n >= p.n) {
        return 0.0;
    }
    return f32(dy[((n * p.cout + co) * p.oh + y) * p.ow + x]);
}

// Invocation i: tile i / quads, quad of output channels i % quads.
@compute @workgroup_size(64)
fn winograd_grad_tiles(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    let count = ((tiles() + 3u) / 4u) * 4u;
    let quads = (p.cout + 3u) / 4u;
    if (i >= quads * count) { return; }
    let quad = i % quads;
    let t = i / quads;
    let o = tile_origin(t);
    let co = quad * 4u;
    #for r in 0..4, s in 0..4: let d{r}_{s} = vec4<f32>(grad_at(o.x, co, o.y + {r}u, o.z + {s}u), grad_at(o.x, co + 1u, o.y + {r}u, o.z + {s}u), grad_at(o.x, co + 2u, o.y + {r}u, o.z + {s}u), grad_at(o.x, co + 3u, o.y + {r}u, o.z + {s}u));
    #for s in 0..4: let ad{s} = grad_transform(array<vec4<f32>, 4>(d0_{s}, d1_{s}, d2_{s}, d3_{s}));
    #for k in 0..6: let ada{k} = grad_transform(array<vec4<f32>, 4>(ad0[{k}], ad1[{k}], ad2[{k}], ad3[{k}]));
    let stride = count * quads;
    #for k in 0..6, l in 0..6: q[{k*6+l}u * stride + i] = ada{k}[{l}];
}

// Invocation i: input channel i / quads, quad of output channels i % quads.
@compute @workgroup_size(64)
fn winograd_weight_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    let quads = (p.cout + 3u) / 4u;
    if (i >= quads * p.cin) { return; }
    let quad = i % quads;
    let ci = i / quads;
    let stride = p.cin * quads;
    #for e in 0..36: let m{e} = m[{e}u * stride + i];
    #for l in 0..6: let gm{l} = weight_grad_transform(array<vec4<f32>, 6>(m{0*6+l}, m{1*6+l}, m{2*6+l}, m{3*6+l}, m{4*6+l}, m{5*6+l}));
    #for r in 0..3: let gmg{r} = weight_grad_transform(array<vec4<f32>, 6>(gm0[{r}], gm1[{r}], gm2[{r}], gm3[{r}], gm4[{r}], gm5[{r}]));
    for (var c = 0u; c < 4u; c++) {
        let co = quad * 4u + c;
        if (co < p.cout) {
            let at = (co * p.cin + ci) * 9u;
            #for r in 0..3, s in 0..3: dw[at + {r*3+s}u] = {{T}}(gmg{r}[{s}][c]);
        }
    }
}
