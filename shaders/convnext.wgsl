// The fused ConvNeXt block's MLP (src/ops/blocks.rs; its depthwise conv is depthwise7.wgsl).
// Invocations walk the flat N*H*W pixel range in order (4W pixels per workgroup), so per-pixel
// loads are contiguous across lanes and every weight load has a workgroup-uniform address
// (loop counters and template indices only):
//   pointwise_mlp:    y = x + b2 + W2 gelu(W1 z + b1) (1x1 convs C -> 4C -> C, GELU tanh),
//                     four consecutive pixels per invocation (4W per workgroup). z and the output accumulators of the four pixels sit in two
//                     private vec4 arrays of C entries; the hidden layer is produced 16 units
//                     at a time as a 16 x 4-pixel register tile (w1 rows read as vec4 along
//                     c, uniform), activated and folded into the outputs (w2 read as vec4
//                     along the hidden dim, uniform), so the 4C hidden activations never
//                     leave registers (unless SAVE: then they are also stored for the
//                     backward). Needs C = 4 * C4 (then 4C is a multiple of 16).
// Both compute in f32 on storage type T.

struct Params {
    n: u32,
    c: u32,
    h: u32,
    w: u32,
}
@group(0) @binding(0) var<uniform> p: Params;

// pointwise_mlp: (z, x, w1 [4C, C], b1 [4C], w2 [C, 4C], b2 [C]) -> y; weights as vec4 rows
@group(0) @binding(1) var<storage, read> z_in: array<{{T}}>;
@group(0) @binding(2) var<storage, read> res: array<{{T}}>;
@group(0) @binding(3) var<storage, read> w1: array<vec4<{{T}}>>;
@group(0) @binding(4) var<storage, read> b1: array<{{T}}>;
@group(0) @binding(5) var<storage, read> w2: array<vec4<{{T}}>>;
@group(0) @binding(6) var<storage, read> b2: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> y: array<{{T}}>;
// With SAVE = true also the pre-GELU hidden activations [N, 4C, H, W] (for the backward).
@group(0) @binding(8) var<storage, read_write> hidden: array<{{T}}>;

const GELU_C: f32 = 0.7978845608028654; // sqrt(2/pi), as in elementwise.wgsl

fn gelu4(v: vec4<f32>) -> vec4<f32> {
    return 0.5 * v * (1.0 + tanh(clamp(GELU_C * (v + 0.044715 * v * v * v), vec4<f32>(-15.0), vec4<f32>(15.0))));
}

// Flat pixel index of this invocation (the grid may be 2-D when N*H*W is large).
fn pixel(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * {{W}}u + lid;
}

@compute @workgroup_size({{W}})
fn pointwise_mlp(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let q0 = pixel(wid, nwg, lid) * 4u;
    let hw = p.h * p.w;
    let total = p.n * hw;
    if (q0 >= total) { return; }
    // Base index of channel 0 of each of the four pixels (past the end: the last pixel).
    #for e in 0..4: let base{e} = (min(q0 + {e}u, total - 1u) / hw) * {{C}}u * hw + min(q0 + {e}u, total - 1u) % hw;
    #for e in 0..4: let hbase{e} = base{e} + (min(q0 + {e}u, total - 1u) / hw) * 3u * {{C}}u * hw;
    var zv: array<vec4<f32>, {{C}}>;
    var out: array<vec4<f32>, {{C}}>;
    for (var c = 0u; c < {{C}}u; c++) {
        let o = c * hw;
        zv[c] = vec4<f32>(f32(z_in[base0 + o]), f32(z_in[base1 + o]), f32(z_in[base2 + o]), f32(z_in[base3 + o]));
        out[c] = f32(b2[c]) + vec4<f32>(f32(res[base0 + o]), f32(res[base1 + o]), f32(res[base2 + o]), f32(res[base3 + o]));
    }
    // 16 hidden units x 4 pixels at a time: expand, GELU, fold into the outputs.
    for (var j0 = 0u; j0 < 4u * {{C}}u; j0 += 16u) {
        #for r in 0..16: var h{r} = vec4<f32>(f32(b1[j0 + {r}u]));
        for (var c4 = 0u; c4 < {{C4}}u; c4++) {
            #for e in 0..4: let z{e} = zv[c4 * 4u + {e}u];
            #for r in 0..16: let wr{r} = vec4<f32>(w1[(j0 + {r}u) * {{C4}}u + c4]); h{r} = fma(vec4<f32>(wr{r}.w), z3, fma(vec4<f32>(wr{r}.z), z2, fma(vec4<f32>(wr{r}.y), z1, fma(vec4<f32>(wr{r}.x), z0, h{r}))));
        }
        if ({{SAVE}}) {
            #for r in 0..16, e in 0..4: if (q0 + {e}u < total) { hidden[hbase{e} + (j0 + {r}u) * hw] = {{T}}(h{r}[{e}]); }
        }
        #for r in 0..16: h{r} = gelu4(h{r});
        for (var c = 0u; c < {{C}}u; c++) {
            var o = out[c];
            #for g in 0..4: let v{g} = vec4<f32>(w2[c * {{C}}u + j0 / 4u + {g}u]); o = fma(vec4<f32>(v{g}.w), h{g*4+3}, fma(vec4<f32>(v{g}.z), h{g*4+2}, fma(vec4<f32>(v{g}.y), h{g*4+1}, fma(vec4<f32>(v{g}.x), h{g*4+0}, o))));
            out[c] = o;
        }
    }
    for (var c = 0u; c < {{C}}u; c++) {
        let o = c * hw;
        #for e in 0..4: if (q0 + {e}u < total) { y[base{e} + o] = {{T}}(out[c][{e}]); }
    }
}
