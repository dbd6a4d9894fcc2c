// Naive conv2d forward (the baseline): one output element per invocation, looping over its
// group's input channels and the kernel window. NCHW input, OIHW weights.
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> wts: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> y: array<{{T}}>;

@compute @workgroup_size(64)
fn conv_forward_naive(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i >= p.n * p.cout * p.oh * p.ow) { return; }
    let ow = i % p.ow;
    let oh = (i / p.ow) % p.oh;
    let co = (i / (p.ow * p.oh)) % p.cout;
    let n = i / (p.ow * p.oh * p.cout);
    let g = co / p.cout_g;
    var acc = 0.0;
    for (var ci = 0u; ci < p.cin_g; ci++) {
        let x_plane = (n * p.cin + g * p.cin_g + ci) * p.h * p.w;
        let w_base = (co * p.cin_g + ci) * p.kh * p.kw;
        for (var r = 0u; r < p.kh; r++) {
            let ih = i32(oh * p.sh + r * p.dh) - i32(p.ph);
            if (ih < 0 || ih >= i32(p.h)) { continue; }
            for (var c = 0u; c < p.kw; c++) {
                let iw = i32(ow * p.sw + c * p.dw) - i32(p.pw);
                if (iw < 0 || iw >= i32(p.w)) { continue; }
                acc += f32(x[x_plane + u32(ih) * p.w + u32(iw)]) * f32(wts[w_base + r * p.kw + c]);
            }
        }
    }
    y[i] = {{T}}(acc);
}
