// Winograd F(4x4, 3x3) conv2d forward for 3x3, stride-1, undilated convs: per 4x4 output
// tile, Y = A^T [sum_ci (G g G^T) . (B^T d B)] A with d the tile's 6x6 input patch: 36
// multiplies per tile, output channel and input channel instead of 144. The weights are
// transformed once per call (`winograd_weights` in conv_weights.wgsl) into vec4s over four
// output channels; the input patches are transformed in registers as they are read, and the
// output transform runs in the epilogue with the terms of conv_epilogue.wgsl (biases,
// residual). Each invocation owns 4 x QUADS output channels (the same for the whole
// workgroup, which is one subgroup of W lanes) x TILES tiles (its own). Padding is applied
// as the patches are read (reads outside the input are clamped to a valid element and
// replaced by 0), so the input needs no padded copy. The workgroup's weights for one input
// channel (36 x QUADS vec4s) are read once, W at a time, one per lane, and handed to every
// lane by subgroupBroadcast: on lavapipe a load at a workgroup-uniform address costs a
// gather, and loading each weight in every lane made an F(2x2) kernel 2.3x slower.
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> u: array<vec4<f32>>;
#include conv_epilogue

#include winograd_transforms

@compute @workgroup_size({{W}})
fn conv_forward_winograd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wid.z;
    let tiles_h = (p.oh + 3u) / 4u;
    let tiles_w = (p.ow + 3u) / 4u;
    let per_image = tiles_h * tiles_w;
    let tiles = p.n * per_image;
    let plane_size = p.h * p.w;
    let quads_g = (p.cout_g + 3u) / 4u;
    let quad0 = wid.y * {{QUADS}}u;
    let tile0 = ((wid.x + p.part_base) * {{W}}u + lid) * {{TILES}}u;
    // Per tile: its sample, output origin, the offsets of its patch's rows and columns in the
    // group's first input channel plane (clamped into the input), and which patch rows and
    // columns lie inside the input (the others are padding). Tiles past the last read the last one.
    #for t in 0..{{TILES}} {
    let tt{t} = min(tile0 + {t}u, tiles - 1u);
    let n{t} = tt{t} / per_image;
    let oy{t} = ((tt{t} % per_image) / tiles_w) * 4u;
    let ox{t} = ((tt{t} % per_image) % tiles_w) * 4u;
    let base{t} = (n{t} * p.cin + g * p.cin_g) * plane_size;
    let iy{t} = i32(oy{t}) - i32(p.ph);
    let ix{t} = i32(ox{t}) - i32(p.pw);
    #for i in 0..6: let r{i}_{t} = base{t} + u32(clamp(iy{t} + {i}, 0, i32(p.h) - 1)) * p.w;
    #for j in 0..6: let c{j}_{t} = u32(clamp(ix{t} + {j}, 0, i32(p.w) - 1));
    #for i in 0..6: let row_in{i}_{t} = iy{t} + {i} >= 0 && iy{t} + {i} < i32(p.h);
    #for j in 0..6: let col_in{j}_{t} = ix{t} + {j} >= 0 && ix{t} + {j} < i32(p.w);
    #end
    // This lane's share of the workgroup's transformed weights for one input channel: vec4
    // number h * W + lid of its 36 x QUADS (past the group's last quad: the group's last vec4,
    // never used).
    let quads = p.groups * quads_g;
    let ufirst = (g * quads_g + quad0) * 36u + lid;
    let ulast = (g * quads_g + quads_g) * 36u - 1u;
    #for h in 0..{{LOADS}}: let uoff{h} = min(ufirst + {h*{{W}}+0}u, ulast);
    #for q in 0..{{QUADS}}, e in 0..36, t in 0..{{TILES}}: var m{q}_{e}_{t} = vec4<f32>(0.0);
    var plane = 0u;
    var ubase = 0u;
    for (var ci = 0u; ci < p.cin_g; ci++) {
        #for t in 0..{{TILES}} {
        #for i in 0..6, j in 0..6: let d{i}_{j}_{t} = select(0.0, f32(x[plane + r{i}_{t} + c{j}_{t}]), row_in{i}_{t} && col_in{j}_{t});
        #for j in 0..6: let bd{j}_{t} = input_transform(array<f32, 6>(d0_{j}_{t}, d1_{j}_{t}, d2_{j}_{t}, d3_{j}_{t}, d4_{j}_{t}, d5_{j}_{t}));
        #for k in 0..6: let bdb{k}_{t} = input_transform(array<f32, 6>(bd0_{t}[{k}], bd1_{t}[{k}], bd2_{t}[{k}], bd3_{t}[{k}], bd4_{t}[{k}], bd5_{t}[{k}]));
        #for k in 0..6, l in 0..6: let v{k*6+l}_{t} = vec4<f32>(bdb{k}_{t}[{l}]);
        #end
        #for h in 0..{{LOADS}} {
        let mine{h} = u[ubase + uoff{h}];
        #for l in 0..{{W}}: let w{h*{{W}}+l} = subgroupBroadcast(mine{h}, {l}u);
        #end
        #for q in 0..{{QUADS}}, e in 0..36, t in 0..{{TILES}}: m{q}_{e}_{t} = fma(w{q*36+e}, v{e}_{t}, m{q}_{e}_{t});
        plane += plane_size;
        ubase += quads * 36u;
    }
    // Output transform Y = A^T M A per (quad of channels, tile), then the epilogue.
    #for t in 0..{{TILES}}: let ybase{t} = n{t} * p.cout * p.oh * p.ow + oy{t} * p.ow + ox{t};
    #for q in 0..{{QUADS}}, t in 0..{{TILES}} {
    if (quad0 + {q}u < quads_g && tile0 + {t}u < tiles) {
        #for l in 0..6: let am{l} = output_transform(array<vec4<f32>, 6>(m{q}_{0*6+l}_{t}, m{q}_{1*6+l}_{t}, m{q}_{2*6+l}_{t}, m{q}_{3*6+l}_{t}, m{q}_{4*6+l}_{t}, m{q}_{5*6+l}_{t}));
        #for r in 0..4: let ym{r} = output_transform(array<vec4<f32>, 6>(am0[{r}], am1[{r}], am2[{r}], am3[{r}], am4[{r}], am5[{r}]));
        // Channel by channel (a loop, not unrolled: 16 stores of code instead of 64).
        for (var c = 0u; c < 4u; c++) {
            let row = (quad0 + {q}u) * 4u + c;
            if (row < p.cout_g) {
                let out_row = g * p.cout_g + row;
                let b = channel_bias(out_row);
                let i0 = ybase{t} + out_row * p.oh * p.ow;
                #for r in 0..4, s in 0..4: if (oy{t} + {r}u < p.oh && ox{t} + {s}u < p.ow) { store(i0 + {r}u * p.ow + {s}u, n{t}, out_row, b, ym{r}[{s}][c]); }
            }
        }
    }
    #end
}
