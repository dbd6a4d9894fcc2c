// Spatial resampling of NCHW planes, one destination element per invocation, all gathers.
// Linear maps from an [in_h, in_w] plane to an [out_h, out_w] plane, each with its
// transpose (out -> in, the backward):
//   window_sum:    out[o] = scale(o) * sum of the k x k window of in at o * stride - pad
//                  (avg_pool2d forward); the window is clipped to the plane (padding counts
//                  as zeros), scale(o) = mul, or with count_pad = 0 one over the number of
//                  window pixels inside the plane (PyTorch's count_include_pad=False)
//   window_spread: in[i] = sum of scale(o) * out[o] over the windows o that contain i
//                  (avg_pool2d backward)
//   interp_forward / interp_backward: PyTorch's F.interpolate (align_corners=False) by
//                  `mode`: each output index has along each axis 1 (nearest: floor(o * in /
//                  out) in exact integers), 2 (bilinear: negative source coordinates clamped
//                  to 0) or 4 (bicubic: A = -0.75) taps at consecutive input indices clamped
//                  to the plane; the backward gathers over the output pixels whose taps
//                  touch each input.
// Forward only (used by the Inception feature network):
//   window_max:    out[o] = max of the k x k window at o * stride - pad, padding skipped
//                  (max_pool2d; pad <= k / 2, so every window holds a pixel of the plane)

struct Params {
    planes: u32,  // N * C
    in_h: u32,
    in_w: u32,
    out_h: u32,
    out_w: u32,
    k: u32,
    stride: u32,
    mul: f32,
    scale_h: f32, // in_h / out_h (interpolation)
    scale_w: f32,
    pad: u32,       // window padding (pooling)
    count_pad: u32, // 1: window sums times mul (padding counted); 0: divided by the pixels inside
    mode: u32,      // interpolation: 0 nearest, 1 bilinear, 2 bicubic
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{T}}>;

fn flat_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 64u + lid;
}

// Clipped extent [first, end) along one axis of the window starting at o * stride - pad.
fn window_extent(o: u32, n_in: u32) -> vec2<i32> {
    let start = i32(o * p.stride) - i32(p.pad);
    return vec2<i32>(max(start, 0), min(start + i32(p.k), i32(n_in)));
}

// The factor window (oy, ox) multiplies its sum by.
fn window_scale(ey: vec2<i32>, ex: vec2<i32>) -> f32 {
    if (p.count_pad != 0u) { return p.mul; }
    return 1.0 / f32((ey.y - ey.x) * (ex.y - ex.x));
}

@compute @workgroup_size(64)
fn window_sum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.planes * p.out_h * p.out_w) { return; }
    let ox = i % p.out_w;
    let oy = (i / p.out_w) % p.out_h;
    let base = (i / (p.out_w * p.out_h)) * p.in_h * p.in_w;
    let ey = window_extent(oy, p.in_h);
    let ex = window_extent(ox, p.in_w);
    var acc = 0.0;
    for (var y = ey.x; y < ey.y; y++) {
        let row = base + u32(y) * p.in_w;
        for (var x = ex.x; x < ex.y; x++) {
            acc += f32(src[row + u32(x)]);
        }
    }
    dst[i] = {{T}}(acc * window_scale(ey, ex));
}

@compute @workgroup_size(64)
fn window_max(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.planes * p.out_h * p.out_w) { return; }
    let ox = i % p.out_w;
    let oy = (i / p.out_w) % p.out_h;
    let base = (i / (p.out_w * p.out_h)) * p.in_h * p.in_w;
    let ey = window_extent(oy, p.in_h);
    let ex = window_extent(ox, p.in_w);
    var acc = f32(src[base + u32(ey.x) * p.in_w + u32(ex.x)]);
    for (var y = ey.x; y < ey.y; y++) {
        let row = base + u32(y) * p.in_w;
        for (var x = ex.x; x < ex.y; x++) {
            acc = max(acc, f32(src[row + u32(x)]));
        }
    }
    dst[i] = {{T}}(acc);
}

// Windows [first, last] along one axis that contain index i (empty when first > last).
fn windows_of(i: u32, n_out: u32) -> vec2<i32> {
    let j = i32(i + p.pad);
    let first = (j - i32(p.k) + i32(p.stride)) / i32(p.stride);
    return vec2<i32>(max(first, 0), min(j / i32(p.stride), i32(n_out) - 1));
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
        let ey = window_extent(u32(oy), p.in_h);
        for (var ox = rx.x; ox <= rx.y; ox++) {
            let scale = window_scale(ey, window_extent(u32(ox), p.in_w));
            acc += scale * f32(src[base + u32(oy) * p.out_w + u32(ox)]);
        }
    }
    dst[i] = {{T}}(acc);
}

const NEAREST: u32 = 0u;
const BILINEAR: u32 = 1u;
const A: f32 = -0.75; // bicubic

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

// The taps of output index o along one axis: input indices first, first + 1, ..,
// first + count - 1 (each clamped to the plane) with weights w[0..count].
struct Taps {
    first: i32,
    count: i32,
    w: vec4<f32>,
}

fn axis_taps(o: u32, n_in: u32, n_out: u32, scale: f32) -> Taps {
    if (p.mode == NEAREST) {
        return Taps(i32(o * n_in / n_out), 1, vec4<f32>(1.0, 0.0, 0.0, 0.0));
    }
    if (p.mode == BILINEAR) {
        // PyTorch clamps negative source coordinates to 0.
        let s = max((f32(o) + 0.5) * scale - 0.5, 0.0);
        let f = floor(s);
        return Taps(i32(f), 2, vec4<f32>(1.0 - (s - f), s - f, 0.0, 0.0));
    }
    let s = source(o, scale);
    return Taps(i32(s.x) - 1, 4, cubic_weights(s.y));
}

@compute @workgroup_size(64)
fn interp_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.planes * p.out_h * p.out_w) { return; }
    let ox = i % p.out_w;
    let oy = (i / p.out_w) % p.out_h;
    let base = (i / (p.out_w * p.out_h)) * p.in_h * p.in_w;
    let ty = axis_taps(oy, p.in_h, p.out_h, p.scale_h);
    let tx = axis_taps(ox, p.in_w, p.out_w, p.scale_w);
    var acc = 0.0;
    for (var m = 0; m < ty.count; m++) {
        let row = base + clamp_index(ty.first + m, p.in_h) * p.in_w;
        var line = 0.0;
        for (var n = 0; n < tx.count; n++) {
            line += tx.w[n] * f32(src[row + clamp_index(tx.first + n, p.in_w)]);
        }
        acc += ty.w[m] * line;
    }
    dst[i] = {{T}}(acc);
}

// The nearest resize, one output row per invocation: interp_forward's integer divisions per
// element (lanes of a CPU adapter divide one at a time) made a U-Net's 2x upsampling cost
// ~5 ms per call on lavapipe. Along the row the source column floor(ox * in_w / out_w)
// advances by counting.
@compute @workgroup_size(64)
fn nearest_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let r = flat_id(wid, nwg, lid);
    if (r >= p.planes * p.out_h) { return; }
    let src_row = ((r / p.out_h) * p.in_h + (r % p.out_h) * p.in_h / p.out_h) * p.in_w;
    let dst_row = r * p.out_w;
    var ix = 0u;
    var rest = 0u; // ox * in_w mod out_w
    for (var ox = 0u; ox < p.out_w; ox++) {
        dst[dst_row + ox] = src[src_row + ix];
        rest += p.in_w;
        while (rest >= p.out_w) {
            rest -= p.out_w;
            ix += 1u;
        }
    }
}

// The nearest resize's backward (the transpose of nearest_rows), one input row per
// invocation: input column ix receives the output columns [ox0, ox1) of the output rows
// touching its row, ox1 found by counting.
@compute @workgroup_size(64)
fn nearest_rows_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lid: u32) {
    let r = flat_id(wid, nwg, lid);
    if (r >= p.planes * p.in_h) { return; }
    let base = (r / p.in_h) * p.out_h * p.out_w;
    let ry = outputs_touching(r % p.in_h, p.in_h, p.out_h, p.scale_h);
    var ox0 = 0u;
    for (var ix = 0u; ix < p.in_w; ix++) {
        // Output columns copying input column ix: ix * out_w <= ox * in_w < (ix + 1) * out_w.
        var ox1 = ox0;
        while (ox1 * p.in_w < (ix + 1u) * p.out_w) {
            ox1 += 1u;
        }
        var acc = 0.0;
        for (var oy = ry.x; oy < ry.y; oy++) {
            var line = 0.0;
            for (var ox = ox0; ox < ox1; ox++) {
                line += f32(src[base + oy * p.out_w + ox]);
            }
            acc += line;
        }
        dst[r * p.in_w + ix] = {{T}}(acc);
        ox0 = ox1;
    }
}

// Total weight input index i receives from output index o along one axis (1 for nearest:
// outputs_touching is exact there).
fn tap_weight(o: u32, i: u32, n_in: u32, n_out: u32, scale: f32) -> f32 {
    if (p.mode == NEAREST) { return 1.0; }
    let t = axis_taps(o, n_in, n_out, scale);
    var total = 0.0;
    for (var m = 0; m < t.count; m++) {
        total += select(0.0, t.w[m], clamp_index(t.first + m, n_in) == i);
    }
    return total;
}

// Output indices [first, end) along one axis whose taps may touch input index i. Nearest:
// exactly the o with floor(o * n_in / n_out) == i, [ceil(i * n_out / n_in), ceil((i + 1) *
// n_out / n_in)). Bilinear and bicubic: a safe superset (interior taps reach i when
// floor(source) is in [i - 2, i + 1]; border taps are clamped).
fn outputs_touching(i: u32, n_in: u32, n_out: u32, scale: f32) -> vec2<u32> {
    if (p.mode == NEAREST) {
        return vec2<u32>((i * n_out + n_in - 1u) / n_in, ((i + 1u) * n_out + n_in - 1u) / n_in);
    }
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
fn interp_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
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
        let wy = tap_weight(oy, iy, p.in_h, p.out_h, p.scale_h);
        if (wy == 0.0) { continue; }
        var line = 0.0;
        for (var ox = rx.x; ox < rx.y; ox++) {
            line += tap_weight(ox, ix, p.in_w, p.out_w, p.scale_w) * f32(src[base + oy * p.out_w + ox]);
        }
        acc += wy * line;
    }
    dst[i] = {{T}}(acc);
}
