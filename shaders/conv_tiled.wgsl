// Implicit-GEMM conv2d forward, tiled for the adapter: per group g, Y_g [Cout_g, N*P] =
// W_g [Cout_g, K4] x X_col [K4, N*P] [+ bias per channel] [+ bias per sample and channel]
// [+ residual] (conv_epilogue.wgsl) without materialising X_col. Each invocation owns
// R output channels x (4*C4) output pixels in named vec4 accumulators; a workgroup of W
// invocations shares the same output channels, so weights are read as vec4 along k at a
// workgroup-uniform address (weights are repacked with K padded to K4 = multiple of 4, pad
// = 0), while input values are gathered per pixel. The input arrives zero-padded (the
// geometry has padding 0), so a gather is one add and one load: window origin per pixel +
// kernel offset (uniform, advanced by counting). On CPU adapters (lavapipe) large
// R x 4*C4 tiles with W = 8 and no workgroup memory are fastest; there, with AG > 0 (AR =
// 0), the workgroup is one subgroup and its R = AG x W weight rows are read W at a time (lane
// l reads row g x W + l) and handed to every lane by subgroupBroadcast, W times fewer loads
// (shaders/matmul_blocked.wgsl); AG = 0 (AR = R): every lane reads every row. Weights may be packed
// integers (shaders/weights.wgsl; 4-bit rows padded to K4 = multiple of 8), dequantised in
// registers: the sums are scaled by their channel's scale as they are stored.
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
#include weights
#include conv_epilogue

@compute @workgroup_size({{W}})
fn conv_forward_tiled(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wid.z;
    let pixels = p.oh * p.ow;
    let cols = p.n * pixels;
    let row0 = wid.y * {{R}}u;
    let col0 = ((wid.x + p.part_base) * {{W}}u + lid) * (4u * {{C4}}u);
    // Weight rows (output channels past cout_g read the last one; not stored).
    #for r in 0..{{AR}}: let wrow{r} = (g * p.cout_g + min(row0 + {r}u, p.cout_g - 1u)) * p.k4 / 4u;
    #for h in 0..{{AG}}: let wrow_mine{h} = (g * p.cout_g + min(row0 + {h}u * {{W}}u + lid, p.cout_g - 1u)) * p.k4 / 4u;
    let plane_size = p.h * p.w;
    // Per output pixel: its window origin in the group's first input channel plane.
    #for q in 0..{{C}} {
    let qq{q} = min(col0 + {q}u, cols - 1u);
    let origin{q} = ((qq{q} / pixels) * p.cin + g * p.cin_g) * plane_size + ((qq{q} % pixels) / p.ow) * p.sh * p.w + ((qq{q} % pixels) % p.ow) * p.sw;
    #end
    // Kernel-offset cursor (input channel, row, column): offsets past k (K4 padding, zero
    // weights) read a valid element of the last channel.
    var ci = 0u;
    var kr = 0u;
    var kc = 0u;
    #for r in 0..{{R}}, j in 0..{{C4}}: var acc{r}_{j} = vec4<f32>(0.0);
    for (var kk = 0u; kk < p.k4 / 4u; kk++) {
        // The 4 kernel offsets of this step (uniform) as offsets from a window origin.
        #for e in 0..4 {
        let off{e} = min(ci, p.cin_g - 1u) * plane_size + kr * p.dh * p.w + kc * p.dw;
        kc += 1u;
        if (kc == p.kw) { kc = 0u; kr += 1u; if (kr == p.kh) { kr = 0u; ci += 1u; } }
        #end
        #for r in 0..{{AR}}: let a{r} = weight_vec4(wrow{r} + kk);
        #for h in 0..{{AG}} {
        let mine{h} = weight_vec4(wrow_mine{h} + kk);
        #for l in 0..{{W}}: let a{h*{{W}}+l} = subgroupBroadcast(mine{h}, {l}u);
        #end
        #for j in 0..{{C4}} {
        #for e in 0..4: let b{e}_{j} = vec4<f32>(f32(x[origin{j*4+0} + off{e}]), f32(x[origin{j*4+1} + off{e}]), f32(x[origin{j*4+2} + off{e}]), f32(x[origin{j*4+3} + off{e}]));
        #for r in 0..{{R}}: acc{r}_{j} = fma(vec4<f32>(a{r}.w), b3_{j}, fma(vec4<f32>(a{r}.z), b2_{j}, fma(vec4<f32>(a{r}.y), b1_{j}, fma(vec4<f32>(a{r}.x), b0_{j}, acc{r}_{j}))));
        #end
    }
    // Each pixel's sample and the output offset of its channel 0 (decoded once; stores add
    // the channel's plane).
    #for q in 0..{{C}}: let n{q} = qq{q} / pixels;
    #for q in 0..{{C}}: let ybase{q} = n{q} * p.cout * pixels + qq{q} % pixels;
    #for r in 0..{{R}}, j in 0..{{C4}} {
    if (row0 + {r}u < p.cout_g) {
        let out_row = g * p.cout_g + row0 + {r}u;
        let plane = out_row * pixels;
        let b = channel_bias(out_row);
        let sums = acc{r}_{j} * weight_scale(words_of(p.cout * p.k4 / 4u), out_row);
        if (col0 + {j*4+0}u < cols) { store(ybase{j*4+0} + plane, n{j*4+0}, out_row, b, sums.x); }
        if (col0 + {j*4+1}u < cols) { store(ybase{j*4+1} + plane, n{j*4+1}, out_row, b, sums.y); }
        if (col0 + {j*4+2}u < cols) { store(ybase{j*4+2} + plane, n{j*4+2}, out_row, b, sums.z); }
        if (col0 + {j*4+3}u < cols) { store(ybase{j*4+3} + plane, n{j*4+3}, out_row, b, sums.w); }
    }
    #end
}
