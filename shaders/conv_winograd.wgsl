// Winograd F(2x2, 3x3) conv2d forward for 3x3, stride-1, undilated convs: per 2x2 output
// tile, Y = A^T [sum_ci (G g G^T) . (B^T d B)] A with d the tile's 4x4 input patch: 16
// multiplies per tile, channel pair and input channel instead of 36. The weights are
// transformed once per call (`winograd_weights` in conv_weights.wgsl); the input patches are
// transformed in registers as they are read, and the output transform runs in the epilogue
// with the terms of conv_epilogue.wgsl (biases, residual). Each invocation owns R output
// channels (the same for the whole workgroup, which is one subgroup of W lanes) x TILES
// tiles (its own). Padding is applied as the patches are read (reads outside the input are
// clamped to a valid element and replaced by 0), so the input needs no padded copy. The
// workgroup's weights for one input channel (R x 16 values) are read once, W vec4s at a time,
// one per lane, and handed to every lane by subgroupBroadcast: on lavapipe a load at a
// workgroup-uniform address costs a gather, and loading each weight in every lane made this
// kernel 2.3x slower. Rows are numbered r = h * RPL + a, RPL = W / 4 rows per load.
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> u: array<vec4<f32>>;
#include conv_epilogue

// One row (4 values along x) of the transformed input V = B^T d B from the row `t` of B^T d.
fn input_row(t: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(t.x - t.z, t.y + t.z, t.z - t.y, t.y - t.w);
}

@compute @workgroup_size({{W}})
fn conv_forward_winograd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wid.z;
    let tiles_h = (p.oh + 1u) / 2u;
    let tiles_w = (p.ow + 1u) / 2u;
    let per_image = tiles_h * tiles_w;
    let tiles = p.n * per_image;
    let plane_size = p.h * p.w;
    let row0 = wid.y * {{R}}u;
    let tile0 = ((wid.x + p.part_base) * {{W}}u + lid) * {{TILES}}u;
    // Per tile: its sample, output origin, the offsets of its patch's rows and columns in the
    // group's first input channel plane (clamped into the input), and which patch elements lie
    // inside the input (the others are padding). Tiles past the last read the last one.
    #for t in 0..{{TILES}} {
    let tt{t} = min(tile0 + {t}u, tiles - 1u);
    let n{t} = tt{t} / per_image;
    let oy{t} = ((tt{t} % per_image) / tiles_w) * 2u;
    let ox{t} = ((tt{t} % per_image) % tiles_w) * 2u;
    let base{t} = (n{t} * p.cin + g * p.cin_g) * plane_size;
    let iy{t} = i32(oy{t}) - i32(p.ph);
    let ix{t} = i32(ox{t}) - i32(p.pw);
    #for i in 0..4: let r{i}_{t} = base{t} + u32(clamp(iy{t} + {i}, 0, i32(p.h) - 1)) * p.w;
    #for j in 0..4: let c{j}_{t} = u32(clamp(ix{t} + {j}, 0, i32(p.w) - 1));
    let cx{t} = vec4<i32>(ix{t}) + vec4<i32>(0, 1, 2, 3);
    let cols_in{t} = (cx{t} >= vec4<i32>(0)) & (cx{t} < vec4<i32>(i32(p.w)));
    #for i in 0..4: let in{i}_{t} = cols_in{t} & vec4<bool>(iy{t} + {i} >= 0 && iy{t} + {i} < i32(p.h));
    #end
    // This lane's share of the workgroup's transformed weights: vec4 number h * W + lid of
    // the R x 4 (rows past cout_g read the group's last vec4 and are not stored).
    let urow = (g * p.cout_g + row0) * 4u + lid;
    let ulast = (g * p.cout_g + p.cout_g) * 4u - 1u;
    #for h in 0..{{LOADS}}, a in 0..{{RPL}}, t in 0..{{TILES}}, i in 0..4: var m{h}_{a}_{t}_{i} = vec4<f32>(0.0);
    var plane = 0u;
    for (var ci = 0u; ci < p.cin_g; ci++) {
        #for t in 0..{{TILES}} {
        #for i in 0..4: let d{i}_{t} = select(vec4<f32>(0.0), vec4<f32>(f32(x[plane + r{i}_{t} + c0_{t}]), f32(x[plane + r{i}_{t} + c1_{t}]), f32(x[plane + r{i}_{t} + c2_{t}]), f32(x[plane + r{i}_{t} + c3_{t}])), in{i}_{t});
        let v0_{t} = input_row(d0_{t} - d2_{t});
        let v1_{t} = input_row(d1_{t} + d2_{t});
        let v2_{t} = input_row(d2_{t} - d1_{t});
        let v3_{t} = input_row(d1_{t} - d3_{t});
        #end
        let ubase = ci * p.cout * 4u;
        #for h in 0..{{LOADS}} {
        {
        let mine{h} = u[ubase + min(urow + {h*{{W}}+0}u, ulast)];
        #for a in 0..{{RPL}}, i in 0..4: let u{a}_{i} = subgroupBroadcast(mine{h}, {a*4+i}u);
        #for a in 0..{{RPL}}, t in 0..{{TILES}}, i in 0..4: m{h}_{a}_{t}_{i} = fma(u{a}_{i}, v{i}_{t}, m{h}_{a}_{t}_{i});
        }
        #end
        plane += plane_size;
    }
    // Output transform Y = A^T M A per (channel, tile), then the epilogue.
    #for t in 0..{{TILES}}: let ybase{t} = n{t} * p.cout * p.oh * p.ow + oy{t} * p.ow + ox{t};
    #for h in 0..{{LOADS}}, a in 0..{{RPL}} {
    if (row0 + {h*{{RPL}}+a}u < p.cout_g) {
        let out_row = g * p.cout_g + row0 + {h*{{RPL}}+a}u;
        let plane_out = out_row * p.oh * p.ow;
        let b = channel_bias(out_row);
        #for t in 0..{{TILES}} {
        if (tile0 + {t}u < tiles) {
            let s0 = m{h}_{a}_{t}_0 + m{h}_{a}_{t}_1 + m{h}_{a}_{t}_2;
            let s1 = m{h}_{a}_{t}_1 - m{h}_{a}_{t}_2 - m{h}_{a}_{t}_3;
            let i0 = ybase{t} + plane_out;
            let right = ox{t} + 1u < p.ow;
            store(i0, n{t}, out_row, b, s0.x + s0.y + s0.z);
            if (right) { store(i0 + 1u, n{t}, out_row, b, s0.y - s0.z - s0.w); }
            if (oy{t} + 1u < p.oh) {
                store(i0 + p.ow, n{t}, out_row, b, s1.x + s1.y + s1.z);
                if (right) { store(i0 + p.ow + 1u, n{t}, out_row, b, s1.y - s1.z - s1.w); }
            }
        }
        #end
    }
    #end
}
