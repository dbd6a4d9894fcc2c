// The fused ConvNeXt block forward (src/ops/blocks.rs), two kernels, one pixel (n, h, w)
// per invocation, W invocations per workgroup over consecutive pixels of the flat N*H*W
// range, so per-pixel loads are contiguous across lanes and every weight load has a
// workgroup-uniform address (a loop counter or template index only):
//   dwconv_layernorm: d = depthwise 7x7 conv (padding 3) + bias, then LayerNorm over the
//                     channels of the pixel: z = (d - mean) * rstd * gamma + beta. d is
//                     written to z, re-read for the variance (two passes, no E[d^2] - mean^2
//                     cancellation) and overwritten with the result.
//   pointwise_mlp:    y = x + b2 + W2 gelu(W1 z + b1) (1x1 convs C -> 4C -> C, GELU tanh).
//                     z is held in C/4 named vec4 registers and the output in C/4 named vec4
//                     accumulators; each hidden unit j is computed, activated and folded
//                     into the accumulators at once, so the 4C hidden activations never
//                     leave registers. Needs C = 4 * C4.
// Both compute in f32 on storage type T.

struct Params {
    n: u32,
    c: u32,
    h: u32,
    w: u32,
    eps: f32,
}
@group(0) @binding(0) var<uniform> p: Params;

// dwconv_layernorm: (x, dw_w [C, 49], dw_b, gamma, beta) -> z
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read> dw_w: array<{{T}}>;
@group(0) @binding(3) var<storage, read> dw_b: array<{{T}}>;
@group(0) @binding(4) var<storage, read> gamma: array<{{T}}>;
@group(0) @binding(5) var<storage, read> beta: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> z_out: array<{{T}}>;

// pointwise_mlp: (z, x, w1 [4C, C] as vec4 rows, b1 [4C], w2 [C, 4C], b2 [C]) -> y
@group(0) @binding(1) var<storage, read> z_in: array<{{T}}>;
@group(0) @binding(2) var<storage, read> res: array<{{T}}>;
@group(0) @binding(3) var<storage, read> w1: array<vec4<{{T}}>>;
@group(0) @binding(4) var<storage, read> b1: array<{{T}}>;
@group(0) @binding(5) var<storage, read> w2: array<{{T}}>;
@group(0) @binding(6) var<storage, read> b2: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> y: array<{{T}}>;

const GELU_C: f32 = 0.7978845608028654; // sqrt(2/pi), as in elementwise.wgsl

fn gelu(v: f32) -> f32 {
    return 0.5 * v * (1.0 + tanh(clamp(GELU_C * (v + 0.044715 * v * v * v), -15.0, 15.0)));
}

// Flat pixel index of this invocation (the grid may be 2-D when N*H*W is large).
fn pixel(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * {{W}}u + lid;
}

@compute @workgroup_size({{W}})
fn dwconv_layernorm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let q = pixel(wid, nwg, lid);
    let hw = p.h * p.w;
    if (q >= p.n * hw) { return; }
    let n = q / hw;
    let s = q % hw;
    let oh = i32(s / p.w) - 3;
    let ow = i32(s % p.w) - 3;
    var sum = 0.0;
    for (var c = 0u; c < p.c; c++) {
        let plane = (n * p.c + c) * hw;
        var acc = f32(dw_b[c]);
        for (var r = 0u; r < 7u; r++) {
            let ih = oh + i32(r);
            let row_ok = ih >= 0 && ih < i32(p.h);
            for (var k = 0u; k < 7u; k++) {
                let iw = ow + i32(k);
                let inside = row_ok && iw >= 0 && iw < i32(p.w);
                let idx = select(0u, plane + u32(ih) * p.w + u32(iw), inside);
                acc += f32(dw_w[c * 49u + r * 7u + k]) * select(0.0, f32(x[idx]), inside);
            }
        }
        z_out[plane + s] = {{T}}(acc);
        sum += f32({{T}}(acc));
    }
    let mean = sum / f32(p.c);
    var sq = 0.0;
    for (var c = 0u; c < p.c; c++) {
        let d = f32(z_out[(n * p.c + c) * hw + s]) - mean;
        sq += d * d;
    }
    let rstd = inverseSqrt(sq / f32(p.c) + p.eps);
    for (var c = 0u; c < p.c; c++) {
        let i = (n * p.c + c) * hw + s;
        z_out[i] = {{T}}((f32(z_out[i]) - mean) * rstd * f32(gamma[c]) + f32(beta[c]));
    }
}

@compute @workgroup_size({{W}})
fn pointwise_mlp(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let q = pixel(wid, nwg, lid);
    let hw = p.h * p.w;
    if (q >= p.n * hw) { return; }
    let base = (q / hw) * {{C}}u * hw + q % hw;
    let hidden = 4u * {{C}}u;
    #for k in 0..{{C4}}: let z{k} = vec4<f32>(f32(z_in[base + {k*4+0}u * hw]), f32(z_in[base + {k*4+1}u * hw]), f32(z_in[base + {k*4+2}u * hw]), f32(z_in[base + {k*4+3}u * hw]));
    #for k in 0..{{C4}}: var acc{k} = vec4<f32>(f32(b2[{k*4+0}u]), f32(b2[{k*4+1}u]), f32(b2[{k*4+2}u]), f32(b2[{k*4+3}u]));
    for (var j = 0u; j < hidden; j++) {
        let row = j * {{C4}}u;
        var hv = vec4<f32>(0.0);
        #for k in 0..{{C4}}: hv = fma(vec4<f32>(w1[row + {k}u]), z{k}, hv);
        let a = vec4<f32>(gelu(f32(b1[j]) + hv.x + hv.y + hv.z + hv.w));
        #for k in 0..{{C4}}: acc{k} = fma(a, vec4<f32>(f32(w2[{k*4+0}u * hidden + j]), f32(w2[{k*4+1}u * hidden + j]), f32(w2[{k*4+2}u * hidden + j]), f32(w2[{k*4+3}u * hidden + j])), acc{k});
    }
    #for k in 0..{{C4}} {
    #for e in 0..4: y[base + {k*4+0}u * hw + {e}u * hw] = {{T}}(acc{k}[{e}] + f32(res[base + {k*4+0}u * hw + {e}u * hw]));
    #end
}
