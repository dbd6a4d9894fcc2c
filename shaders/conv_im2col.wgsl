// im2col / col2im for GEMM-based convolution. Column matrix layout: [groups, K4, N * OH * OW]
// with k = (ci_local * KH + kh) * KW + kw and rows k >= K zero (K4 = K rounded up to 4, what
// the blocked matmul wants), so each group's conv is one matmul W_g [Cout_g, K4] x col_g. col2im is the gather form of the scatter-add: each
// input element sums the column entries that read it (no atomics).
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> col: array<{{T}}>;
@group(0) @binding(1) var<storage, read> dcol: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dx: array<{{T}}>;

// One workgroup per (image n = wid.y, row g * K4 + k = wid.z) of the column matrix: the
// kernel offset is decoded once (uniform), and lanes walk the output pixels row by row, so
// no lane divides (integer division is slow per lane on CPU adapters) and workgroups are
// few and large (each costs a thread hand-off on lavapipe).
@compute @workgroup_size(64)
fn im2col(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n = wid.y;
    let k = wid.z % p.k4;
    let g = wid.z / p.k4;
    let c = k % p.kw;
    let r = (k / p.kw) % p.kh;
    let ci = min(k / (p.kw * p.kh), p.cin_g - 1u);
    let plane = (n * p.cin + g * p.cin_g + ci) * p.h * p.w;
    let out_row = wid.z * (p.n * p.oh * p.ow) + n * p.oh * p.ow;
    for (var oh = 0u; oh < p.oh; oh++) {
        let ih = i32(oh * p.sh + r * p.dh) - i32(p.ph);
        let row_ok = k < p.k && ih >= 0 && ih < i32(p.h);
        for (var ow = lid; ow < p.ow; ow += 64u) {
            let iw = i32(ow * p.sw + c * p.dw) - i32(p.pw);
            let inside = row_ok && iw >= 0 && iw < i32(p.w);
            let idx = select(0u, plane + u32(ih) * p.w + u32(iw), inside);
            col[out_row + oh * p.ow + ow] = {{T}}(select(0.0, f32(x[idx]), inside));
        }
    }
}

@compute @workgroup_size(64)
fn col2im(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i >= p.n * p.cin * p.h * p.w) { return; }
    let iw = i % p.w;
    let ih = (i / p.w) % p.h;
    let ci = (i / (p.w * p.h)) % p.cin;
    let n = i / (p.w * p.h * p.cin);
    let g = ci / p.cin_g;
    let ci_local = ci % p.cin_g;
    let cols = p.n * p.oh * p.ow;
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
            let k = (ci_local * p.kh + r) * p.kw + c;
            acc += f32(dcol[(g * p.k4 + k) * cols + (n * p.oh + oh) * p.ow + ow]);
        }
    }
    dx[i] = {{T}}(acc);
}
