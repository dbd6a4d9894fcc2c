// Winograd F(4x4, 3x3) as a batched GEMM, for 3x3 stride-1 undilated ungrouped convs (the
// `gemm` form of ops::conv's Winograd): `winograd_input` writes each 4x4 output tile's
// transformed input patch, V[e][ci][t] = (B^T d B)[e] (e: the 36 entries of the 6x6 transform,
// t: the tile over the batch, padded to T4, a multiple of 4, with zero tiles); the blocked
// matmul makes M[e] = U[e] (Cout x Cin) x V[e] (Cin x T4) for the 36 entries at once;
// `winograd_output` writes Y = A^T M A of each tile and output channel, with the epilogue's
// terms (conv_epilogue.wgsl). Each input patch is read and transformed once per call, where
// the register kernel (conv_winograd.wgsl) reads it once per workgroup of output channels.
// Padding is applied as the patches are read. The output transform takes four consecutive
// tiles an invocation, reading M as vec4s along t: a quarter of the loads a tile at a time
// would issue (what costs on lavapipe, where every load goes lane by lane); the input
// transform stays at one tile an invocation, which measured faster there than four.
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
#include winograd_transforms
#include winograd_tiles

// winograd_input: x -> v [36, Cin, T4]
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> v: array<f32>;
// winograd_output: m [36, Cout (padded to 4), T4] as vec4s along t (binding 2 unused) -> y,
// with the epilogue
@group(0) @binding(1) var<storage, read> m: array<vec4<f32>>;
#include conv_epilogue

// Invocation i: input channel i / T4, tile i % T4 (one past the batch, padding T to T4, reads
// sample N - 1 and is written as zeros).
@compute @workgroup_size(64)
fn winograd_input(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    let count = ((tiles() + 3u) / 4u) * 4u;
    if (i >= p.cin * count) { return; }
    let ci = i / count;
    let o = tile_origin(i % count);
    let in_batch = o.x < p.n;
    let base = (min(o.x, p.n - 1u) * p.cin + ci) * p.h * p.w;
    let iy = i32(o.y) - i32(p.ph);
    let ix = i32(o.z) - i32(p.pw);
    #for r in 0..6: let row_in{r} = in_batch && iy + {r} >= 0 && iy + {r} < i32(p.h);
    #for c in 0..6: let col_in{c} = ix + {c} >= 0 && ix + {c} < i32(p.w);
    #for r in 0..6: let row{r} = base + u32(clamp(iy + {r}, 0, i32(p.h) - 1)) * p.w;
    #for c in 0..6: let col{c} = u32(clamp(ix + {c}, 0, i32(p.w) - 1));
    #for r in 0..6, c in 0..6: let d{r}_{c} = select(0.0, f32(x[row{r} + col{c}]), row_in{r} && col_in{c});
    #for c in 0..6: let bd{c} = input_transform(array<f32, 6>(d0_{c}, d1_{c}, d2_{c}, d3_{c}, d4_{c}, d5_{c}));
    #for k in 0..6: let bdb{k} = input_transform(array<f32, 6>(bd0[{k}], bd1[{k}], bd2[{k}], bd3[{k}], bd4[{k}], bd5[{k}]));
    let stride = p.cin * count;
    #for k in 0..6, l in 0..6: v[{k*6+l}u * stride + i] = bdb{k}[{l}];
}

// Invocation i: output channel i / (T4 / 4), tiles 4 (i % (T4 / 4)) and the three after it.
@compute @workgroup_size(64)
fn winograd_output(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    let count = tiles();
    let quads = (count + 3u) / 4u;
    if (i >= p.cout * quads) { return; }
    let co = i / quads;
    let first = (i % quads) * 4u;
    // m[e][co][t]: entry e's rows are Cout padded to 4 rows of T4 / 4 vec4s
    let stride = ((p.cout + 3u) / 4u) * 4u * quads;
    #for e in 0..36: let m{e} = m[{e}u * stride + i];
    #for l in 0..6: let am{l} = output_transform(array<vec4<f32>, 6>(m{0*6+l}, m{1*6+l}, m{2*6+l}, m{3*6+l}, m{4*6+l}, m{5*6+l}));
    #for r in 0..4: let ym{r} = output_transform(array<vec4<f32>, 6>(am0[{r}], am1[{r}], am2[{r}], am3[{r}], am4[{r}], am5[{r}]));
    let b = channel_bias(co);
    for (var u = 0u; u < 4u; u++) {
        if (first + u < count) {
            let o = tile_origin(first + u);
            let i0 = ((o.x * p.cout + co) * p.oh + o.y) * p.ow + o.z;
            #for r in 0..4, s in 0..4: if (o.y + {r}u < p.oh && o.z + {s}u < p.ow) { store(i0 + {r}u * p.ow + {s}u, o.x, co, b, ym{r}[{s}][u]); }
        }
    }
}
