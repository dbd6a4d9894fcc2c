// Implicit-GEMM conv2d weight gradient (the tiled implementation's backward for weights):
// per group g, dW_g^T [K4, Cout_g] = X_col [K4, N*P] x dY_g^T [N*P, Cout_g] without a column
// matrix. The input arrives zero-padded (the geometry has padding 0), so gathers need no
// bounds checks. The pixel reduction q = n*P + p is split in p.slices slices (z = g * slices + s), each
// writing a partial sum the caller adds up. A workgroup owns C output channels (dY reads are
// workgroup-uniform) and W*R kernel offsets, R per invocation interleaved across lanes (input
// gathers per lane), as the forward kernel. Output: partial[s][g*cout_g + co][k], k padded to K4.
// With SHARE = 1 (a workgroup is one subgroup and C a multiple of W) each lane reads the dY
// values of C / W channels and subgroupBroadcast hands them to every lane: on lavapipe a read
// at a workgroup-uniform address costs a gather of every lane.
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> dy_g: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> partial: array<f32>;

@compute @workgroup_size({{W}})
fn conv_weight_grad_tiled(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let slices = p.slices;
    let z = wid.z + p.part_base;
    let g = z / slices;
    let s = z % slices;
    let pixels = p.oh * p.ow;
    let plane_size = p.h * p.w;
    let cols = p.n * pixels;
    let per_slice = ((cols + slices - 1u) / slices + 3u) / 4u * 4u;
    let q_begin = s * per_slice;
    let q_end = min(q_begin + per_slice, cols);
    let row0 = wid.x * {{W}}u * {{R}}u + lid;
    let col0 = wid.y * {{C}}u;
    // dY row base of each owned output channel (clamped; not stored past cout_g): all of them,
    // or with SHARE those this lane reads (channels h * W + lid).
    #for s in 0..{{UNSHARED}} {
    #for c in 0..{{C}}: let dyc{c} = (g * p.cout_g + min(col0 + {c}u, p.cout_g - 1u)) * pixels;
    #end
    #for s in 0..{{SHARE}} {
    #for h in 0..{{CH}}: let dyl{h} = (g * p.cout_g + min(col0 + {h*{{W}}+0}u + lid, p.cout_g - 1u)) * pixels;
    #end
    // Offset of each owned kernel offset (channel, row, column) from a window's origin; rows
    // past k read a valid element and are not stored.
    #for r in 0..{{R}} {
    let kk{r} = min(row0 + {r}u * {{W}}u, p.k - 1u);
    let koff{r} = min(kk{r} / (p.kh * p.kw), p.cin_g - 1u) * plane_size + ((kk{r} / p.kw) % p.kh) * p.dh * p.w + (kk{r} % p.kw) * p.dw;
    #end
    #for r in 0..{{R}}, c in 0..{{C}}: var acc{r}_{c} = 0.0;
    // Pixel cursor (image, row, column) of the step's first pixel: decoded once, then advanced
    // by counting (integer division per step is slow on CPU adapters).
    var n = q_begin / pixels;
    var oh = (q_begin % pixels) / p.ow;
    var ow = q_begin % p.ow;
    for (var q0 = q_begin; q0 < q_end; q0 += 4u) {
        // The 4 output pixels of this step (uniform): window origin in x and dY offset; pixels
        // past the slice read valid elements and multiply a zero dY.
        #for e in 0..4 {
        let qok{e} = q0 + {e}u < q_end;
        let origin{e} = (min(n, p.n - 1u) * p.cin + g * p.cin_g) * plane_size + oh * p.sh * p.w + ow * p.sw;
        let dyoff{e} = select(0u, n * p.cout * pixels + oh * p.ow + ow, qok{e});
        ow += 1u;
        if (ow == p.ow) { ow = 0u; oh += 1u; if (oh == p.oh) { oh = 0u; n += 1u; } }
        #end
        #for s in 0..{{UNSHARED}} {
        #for c in 0..{{C}}: let b{c} = vec4<f32>(select(0.0, f32(dy_g[dyoff0 + dyc{c}]), qok0), select(0.0, f32(dy_g[dyoff1 + dyc{c}]), qok1), select(0.0, f32(dy_g[dyoff2 + dyc{c}]), qok2), select(0.0, f32(dy_g[dyoff3 + dyc{c}]), qok3));
        #end
        #for s in 0..{{SHARE}} {
        #for h in 0..{{CH}}: let mine{h} = vec4<f32>(select(0.0, f32(dy_g[dyoff0 + dyl{h}]), qok0), select(0.0, f32(dy_g[dyoff1 + dyl{h}]), qok1), select(0.0, f32(dy_g[dyoff2 + dyl{h}]), qok2), select(0.0, f32(dy_g[dyoff3 + dyl{h}]), qok3));
        #for h in 0..{{CH}}, l in 0..{{W}}: let b{h*{{W}}+l} = subgroupBroadcast(mine{h}, {l}u);
        #end
        #for r in 0..{{R}} {
        let a{r} = vec4<f32>(f32(x[origin0 + koff{r}]), f32(x[origin1 + koff{r}]), f32(x[origin2 + koff{r}]), f32(x[origin3 + koff{r}]));
        #for c in 0..{{C}}: acc{r}_{c} = fma(a{r}.w, b{c}.w, fma(a{r}.z, b{c}.z, fma(a{r}.y, b{c}.y, fma(a{r}.x, b{c}.x, acc{r}_{c}))));
        #end
    }
    #for r in 0..{{R}}, c in 0..{{C}}: if (row0 + {r}u * {{W}}u < p.k4 && col0 + {c}u < p.cout_g) { partial[(s * p.cout + g * p.cout_g + col0 + {c}u) * p.k4 + row0 + {r}u * {{W}}u] = acc{r}_{c}; }
}
