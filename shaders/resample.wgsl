// Spatial resampling of NCHW planes, one destination element per invocation, all gathers.
// Two linear maps from an [in_h, in_w] plane to an [out_h, out_w] plane, each with its
// transpose (out -> in, the backward):
//   window_sum:    out[o] = mul * sum of the k x k window of in at o * stride
//                  (avg_pool2d forward; the backward of nearest 2x upsampling)
//   window_spread: in[i] = mul * sum of out[o] over the windows o that contain i
//                  (avg_pool2d backward; nearest 2x upsampling is k = stride = 2, mul = 1)
//   bicubic_forward / bicubic_backward: PyTorch's bicubic interpolation
//                  (align_corners=False, A = -0.75, border indices clamped) and its
//                  transpose, gathered over the output pixels whose taps touch each input.

struct Params {
    planes: u32,  // N * C
    in_h: u32,
    in_w: u32,
    out_h: u32,
    out_w: u32,
    k: u32,
    stride: u32,
    mul: f32,
    scale_h: f32, // in_h / out_h (bicubic)
    scale_w: f32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{T}}>;

fn flat_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 64u + lid;
}

@compute @workgroup_size(64)
fn window_sum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.planes * p.out_h * p.out_w) { return; }
    let ox = i % p.out_w;
    let oy = (i / p.out_w) % p.out_h;
    let base = (i / (p.out_w * p.out_h)) * p.in_h * p.in_w;
    var acc = 0.0;
    for (var dy = 0u; dy < p.k; dy++) {
        let row = base + (oy * p.stride + dy) * p.in_w + ox * p.stride;
        for (var dx = 0u; dx < p.k; dx++) {
            acc += f32(src[row + dx]);
        }
    }
    dst[i] = {{T}}(acc * p.mul);
}

// Windows [first, last] along one axis that contain index i (empty when first > last).
fn windows_of(i: u32, n_out: u32) -> vec2<i32> {
    let first = (i32(i) - i32(p.k) + i32(p.stride)) / i32(p.stride);
    return vec2<i32>(max(first, 0), min(i32(i / p.stride), i32(n_out) - 1));
}

@compute @workgroup_size(64)
fn window_spread(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.planes * p.in_h * p.in_w) { return; }
    let ix = i % p.in_w;
    let iy = (i / p.in_w) % p.in_h;
    let base = (i / (p.in_w * p.in_h)) * p.out_h * p.out_w;
    let ry = windows_of(iy, p.out_h);
    let rx = windows_of(ix, p.out_w);
    var acc = 0.0;
    for (var oy = ry.x; oy <= ry.y; oy++) {
        for (var ox = rx.x; ox <= rx.y; ox++) {
            acc += f32(src[base + u32(oy) * p.out_w + u32(ox)]);
        }
    }
    dst[i] = {{T}}(acc * p.mul);
}

const A: f32 = -0.75;

// The four cubic convolution weights for fractional offset t (taps at -1, 0, 1, 2).
fn cubic_weights(t: f32) -> vec4<f32> {
    let near = vec2<f32>(t, 1.0 - t);
    let far = vec2<f32>(t + 1.0, 2.0 - t);
    let wn = ((A + 2.0) * near - (A + 3.0)) * near * near + 1.0;
    let wf = ((A * far - 5.0 * A) * far + 8.0 * A) * far - 4.0 * A;
    return vec4<f32>(wf.x, wn.x, wn.y, wf.y);
}

// Source position of output index o: (floor, fraction).
fn source(o: u32, scale: f32) -> vec2<f32> {
    let s = (f32(o) + 0.5) * scale - 0.5;
    let f = floor(s);
    return vec2<f32>(f, s - f);
}

fn clamp_index(v: i32, n: u32) -> u32 {
    return u32(clamp(v, 0, i32(n) - 1));
}

@compute @workgroup_size(64)
fn bicubic_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.planes * p.out_h * p.out_w) { return; }
    let ox = i % p.out_w;
    let oy = (i / p.out_w) % p.out_h;
    let base = (i / (p.out_w * p.out_h)) * p.in_h * p.in_w;
    let sy = source(oy, p.scale_h);
    let sx = source(ox, p.scale_w);
    let wy = cubic_weights(sy.y);
    let wx = cubic_weights(sx.y);
    var acc = 0.0;
    for (var m = 0; m < 4; m++) {
        let row = base + clamp_index(i32(sy.x) - 1 + m, p.in_h) * p.in_w;
        var line = 0.0;
        for (var n = 0; n < 4; n++) {
            line += wx[n] * f32(src[row + clamp_index(i32(sx.x) - 1 + n, p.in_w)]);
        }
        acc += wy[m] * line;
    }
    dst[i] = {{T}}(acc);
}

// Total weight input index i receives from output index o along one axis.
fn tap_weight(o: u32, i: u32, n_in: u32, scale: f32) -> f32 {
    let s = source(o, scale);
    let w = cubic_weights(s.y);
    var total = 0.0;
    for (var m = 0; m < 4; m++) {
        total += select(0.0, w[m], clamp_index(i32(s.x) - 1 + m, n_in) == i);
    }
    return total;
}

// Output indices [first, last] whose taps may touch input index i (a safe superset:
// interior taps reach i when floor(source) is in [i - 2, i + 1]; border taps are clamped).
fn outputs_touching(i: u32, n_in: u32, n_out: u32, scale: f32) -> vec2<u32> {
    var first = 0;
    if (i > 0u) {
        first = max(i32(floor((f32(i) - 1.5) / scale - 0.5)) - 1, 0);
    }
    var last = i32(n_out) - 1;
    if (i + 1u < n_in) {
        last = min(i32(ceil((f32(i) + 2.5) / scale - 0.5)) + 1, last);
    }
    return vec2<u32>(u32(first), u32(max(last, first - 1) + 1));
}

@compute @workgroup_size(64)
fn bicubic_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.planes * p.in_h * p.in_w) { return; }
    let ix = i % p.in_w;
    let iy = (i / p.in_w) % p.in_h;
    let base = (i / (p.in_w * p.in_h)) * p.out_h * p.out_w;
    let ry = outputs_touching(iy, p.in_h, p.out_h, p.scale_h);
    let rx = outputs_touching(ix, p.in_w, p.out_w, p.scale_w);
    var acc = 0.0;
    for (var oy = ry.x; oy < ry.y; oy++) {
        let wy = tap_weight(oy, iy, p.in_h, p.scale_h);
        if (wy == 0.0) { continue; }
        var line = 0.0;
        for (var ox = rx.x; ox < rx.y; ox++) {
            line += tap_weight(ox, ix, p.in_w, p.scale_w) * f32(src[base + oy * p.out_w + ox]);
        }
        acc += wy * line;
    }
    dst[i] = {{T}}(acc);
}
