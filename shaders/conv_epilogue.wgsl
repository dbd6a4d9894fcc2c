// The output terms the tiled and Winograd conv forwards add as they store (ops::conv's
// Epilogue): bindings 3-5 and the output at 6. Which terms are present is fixed per pipeline,
// so the absent ones (one-element placeholders) compile away.
@group(0) @binding(3) var<storage, read> bias: array<{{T}}>; // [Cout]
@group(0) @binding(4) var<storage, read> sample_bias: array<{{T}}>; // [N, Cout]
@group(0) @binding(5) var<storage, read> residual: array<{{T}}>; // the output's shape
@group(0) @binding(6) var<storage, read_write> y: array<{{T}}>;

const BIAS: bool = {{BIAS}};
const SAMPLE_BIAS: bool = {{SAMPLE_BIAS}};
const RESIDUAL: bool = {{RESIDUAL}};

// The bias of output channel c (0 without one).
fn channel_bias(c: u32) -> f32 {
    if (BIAS) {
        return f32(bias[c]);
    }
    return 0.0;
}

// Stores output element i (output channel `out_row` of sample n, whose channel_bias is `b`)
// from its accumulated sum.
fn store(i: u32, n: u32, out_row: u32, b: f32, acc: f32) {
    var v = acc + b;
    if (SAMPLE_BIAS) {
        v += f32(sample_bias[n * p.cout + out_row]);
    }
    if (RESIDUAL) {
        v += f32(residual[i]);
    }
    y[i] = {{T}}(v);
}
