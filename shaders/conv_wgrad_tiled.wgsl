// Implicit-GEMM conv2d weight gradient (the tiled implementation's backward for weights):
// per group g, dW_g^T [K4, Cout_g] = X_col [K4, N*P] x dY_g^T [N*P, Cout_g] without a column
// matrix. The pixel reduction q = n*P + p is split in S slices (wid.z = g * S + s), each
// writing a partial sum the caller adds up. Each invocation owns R kernel offsets x C output
// channels; the reduction index is workgroup-uniform, so input gathers are uniform loads and
// only dY is read per lane. Output: partial[s][g*cout_g + co][k], rows k padded to K4.
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> dy_g: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> partial: array<f32>;

// Input value at (ih, iw) of channel plane `plane`, or 0 when outside or `ok` is false.
fn gather(plane: u32, ih: i32, iw: i32, ok: bool) -> f32 {
    let inside = ok && ih >= 0 && ih < i32(p.h) && iw >= 0 && iw < i32(p.w);
    let idx = select(0u, plane * p.h * p.w + u32(ih) * p.w + u32(iw), inside);
    return select(0.0, f32(x[idx]), inside);
}

@compute @workgroup_size({{W}})
fn conv_weight_grad_tiled(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let slices = {{S}}u;
    let g = wid.z / slices;
    let s = wid.z % slices;
    let pixels = p.oh * p.ow;
    let cols = p.n * pixels;
    let per_slice = ((cols + slices - 1u) / slices + 3u) / 4u * 4u;
    let q_begin = s * per_slice;
    let q_end = min(q_begin + per_slice, cols);
    let row0 = wid.y * {{R}}u;
    let col0 = (wid.x * {{W}}u + lid) * {{C}}u;
    // dY row base of each owned output channel (clamped; not stored past cout_g).
    #for c in 0..{{C}}: let dyc{c} = (g * p.cout_g + min(col0 + {c}u, p.cout_g - 1u)) * pixels;
    // Kernel offsets of the owned rows, decoded once: channel, row and column shifts.
    #for r in 0..{{R}} {
    let kk{r} = row0 + {r}u;
    let kci{r} = min(kk{r} / (p.kh * p.kw), p.cin_g - 1u);
    let kdr{r} = i32(((kk{r} / p.kw) % p.kh) * p.dh);
    let kdc{r} = i32((kk{r} % p.kw) * p.dw);
    let kok{r} = kk{r} < p.k;
    #end
    #for r in 0..{{R}}, c in 0..{{C}}: var acc{r}_{c} = 0.0;
    for (var q0 = q_begin; q0 < q_end; q0 += 4u) {
        // The 4 output pixels of this step, decoded once (uniform).
        #for e in 0..4 {
        let q{e} = q0 + {e}u;
        let qc{e} = min(q{e}, cols - 1u);
        let pix{e} = qc{e} % pixels;
        let plane{e} = (qc{e} / pixels) * p.cin + g * p.cin_g;
        let ih{e} = i32((pix{e} / p.ow) * p.sh) - i32(p.ph);
        let iw{e} = i32((pix{e} % p.ow) * p.sw) - i32(p.pw);
        let qok{e} = q{e} < cols;
        let dyoff{e} = (qc{e} / pixels) * p.cout * pixels + pix{e};
        #end
        #for r in 0..{{R}}: let a{r} = vec4<f32>(gather(plane0 + kci{r}, ih0 + kdr{r}, iw0 + kdc{r}, qok0 && kok{r}), gather(plane1 + kci{r}, ih1 + kdr{r}, iw1 + kdc{r}, qok1 && kok{r}), gather(plane2 + kci{r}, ih2 + kdr{r}, iw2 + kdc{r}, qok2 && kok{r}), gather(plane3 + kci{r}, ih3 + kdr{r}, iw3 + kdc{r}, qok3 && kok{r}));
        #for c in 0..{{C}} {
        let b{c} = vec4<f32>(f32(dy_g[dyoff0 + dyc{c}]), f32(dy_g[dyoff1 + dyc{c}]), f32(dy_g[dyoff2 + dyc{c}]), f32(dy_g[dyoff3 + dyc{c}]));
        #for r in 0..{{R}}: acc{r}_{c} += dot(a{r}, b{c});
        #end
    }
    #for r in 0..{{R}}, c in 0..{{C}}: if (row0 + {r}u < p.k4 && col0 + {c}u < p.cout_g) { partial[(s * p.cout + g * p.cout_g + col0 + {c}u) * p.k4 + row0 + {r}u] = acc{r}_{c}; }
}
