// Direct convolution kernels (no GEMM): the forward for grouped/depthwise and small-channel
// convs (a workgroup shares one (n, output channel), so weights are uniform loads; each
// invocation computes 4 consecutive output pixels), and the gather-form backward passes:
// input gradient (one input element per invocation, a transposed conv without atomics) and
// weight gradient (one weight per invocation, reducing over batch and output pixels).
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
// forward: (x, w) -> y
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> wts: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> y: array<{{T}}>;
// input grad: (dy, w) -> dx
@group(0) @binding(1) var<storage, read> dy: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> dx: array<{{T}}>;
// weight grad: (x, dy) -> dw
@group(0) @binding(2) var<storage, read> dy_w: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> dw: array<{{T}}>;

fn x_at(plane: u32, ih: i32, iw: i32) -> f32 {
    let inside = ih >= 0 && ih < i32(p.h) && iw >= 0 && iw < i32(p.w);
    let idx = select(0u, plane + u32(ih) * p.w + u32(iw), inside);
    return select(0.0, f32(x[idx]), inside);
}

// wid.y = n * cout + co; invocation covers flattened output pixels 4*t .. 4*t+3.
@compute @workgroup_size(64)
fn conv_forward_direct(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let co = wid.y % p.cout;
    let n = wid.y / p.cout;
    let g = co / p.cout_g;
    let pixels = p.oh * p.ow;
    let first = (wid.x * 64u + lid) * 4u;
    if (first >= pixels) { return; }
    var oh: array<i32, 4>;
    var ow: array<i32, 4>;
    for (var j = 0u; j < 4u; j++) {
        let q = min(first + j, pixels - 1u);
        oh[j] = i32((q / p.ow) * p.sh) - i32(p.ph);
        ow[j] = i32((q % p.ow) * p.sw) - i32(p.pw);
    }
    var acc = vec4<f32>(0.0);
    for (var ci = 0u; ci < p.cin_g; ci++) {
        let plane = (n * p.cin + g * p.cin_g + ci) * p.h * p.w;
        let w_base = (co * p.cin_g + ci) * p.kh * p.kw;
        for (var r = 0u; r < p.kh; r++) {
            let dr = i32(r * p.dh);
            for (var c = 0u; c < p.kw; c++) {
                let wv = f32(wts[w_base + r * p.kw + c]);
                let dc = i32(c * p.dw);
                acc += wv * vec4<f32>(
                    x_at(plane, oh[0] + dr, ow[0] + dc),
                    x_at(plane, oh[1] + dr, ow[1] + dc),
                    x_at(plane, oh[2] + dr, ow[2] + dc),
                    x_at(plane, oh[3] + dr, ow[3] + dc));
            }
        }
    }
    let out_base = (n * p.cout + co) * pixels;
    for (var j = 0u; j < 4u; j++) {
        if (first + j < pixels) {
            y[out_base + first + j] = {{T}}(acc[j]);
        }
    }
}

@compute @workgroup_size(64)
fn conv_input_grad_direct(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i >= p.n * p.cin * p.h * p.w) { return; }
    let iw = i % p.w;
    let ih = (i / p.w) % p.h;
    let ci = (i / (p.w * p.h)) % p.cin;
    let n = i / (p.w * p.h * p.cin);
    let g = ci / p.cin_g;
    let ci_local = ci % p.cin_g;
    var acc = 0.0;
    for (var r = 0u; r < p.kh; r++) {
        let oh_s = i32(ih + p.ph) - i32(r * p.dh);
        if (oh_s < 0 || oh_s % i32(p.sh) != 0) { continue; }
        let oh = u32(oh_s) / p.sh;
        if (oh >= p.oh) { continue; }
        for (var c = 0u; c < p.kw; c++) {
            let ow_s = i32(iw + p.pw) - i32(c * p.dw);
            if (ow_s < 0 || ow_s % i32(p.sw) != 0) { continue; }
            let ow = u32(ow_s) / p.sw;
            if (ow >= p.ow) { continue; }
            for (var col = 0u; col < p.cout_g; col++) {
                let co = g * p.cout_g + col;
                acc += f32(dy[((n * p.cout + co) * p.oh + oh) * p.ow + ow])
                     * f32(wts[((co * p.cin_g + ci_local) * p.kh + r) * p.kw + c]);
            }
        }
    }
    dx[i] = {{T}}(acc);
}

@compute @workgroup_size(64)
fn conv_weight_grad_direct(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                           @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i >= p.cout * p.cin_g * p.kh * p.kw) { return; }
    let c = i % p.kw;
    let r = (i / p.kw) % p.kh;
    let ci_local = (i / (p.kw * p.kh)) % p.cin_g;
    let co = i / (p.kw * p.kh * p.cin_g);
    let g = co / p.cout_g;
    var acc = 0.0;
    for (var n = 0u; n < p.n; n++) {
        let plane = (n * p.cin + g * p.cin_g + ci_local) * p.h * p.w;
        let dy_plane = (n * p.cout + co) * p.oh * p.ow;
        for (var oh = 0u; oh < p.oh; oh++) {
            let ih = i32(oh * p.sh + r * p.dh) - i32(p.ph);
            if (ih < 0 || ih >= i32(p.h)) { continue; }
            for (var ow = 0u; ow < p.ow; ow++) {
                let iw = i32(ow * p.sw + c * p.dw) - i32(p.pw);
                if (iw < 0 || iw >= i32(p.w)) { continue; }
                acc += f32(dy_w[dy_plane + oh * p.ow + ow]) * f32(x[plane + u32(ih) * p.w + u32(iw)]);
            }
        }
    }
    dw[i] = {{T}}(acc);
}
