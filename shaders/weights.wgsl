// The weight operand of the tiled conv, the blocked matmul and the dequantising kernel
// (ops::packed::WeightOperand), bound at WEIGHTS_BINDING as `wts`. FLOAT_WEIGHTS: vec4s of
// T. INT_WEIGHTS: signed integers packed into u32 words, low bits first (WBITS 8: four per
// word, one run of 4 per word; WBITS 4: eight per word, runs 2i and 2i+1 in word i's low and
// high halves), then one f32 scale per output channel after the words of all runs
// (`words_of(runs)`). `weight_vec4(i)` is run i of 4 consecutive weights (integer values for
// packed weights: the kernel multiplies its sums by `weight_scale`, 1 for float weights).
#for f in 0..{{FLOAT_WEIGHTS}} {
@group(0) @binding({{WEIGHTS_BINDING}}) var<storage, read> wts: array<vec4<{{T}}>>;
fn weight_vec4(i: u32) -> vec4<f32> { return vec4<f32>(wts[i]); }
fn words_of(runs: u32) -> u32 { return 0u; }
fn weight_scale(scales_at: u32, c: u32) -> f32 { return 1.0; }
#end
#for q in 0..{{INT_WEIGHTS}} {
@group(0) @binding({{WEIGHTS_BINDING}}) var<storage, read> wts: array<u32>;
const WBITS: u32 = {{WBITS}}u;
fn weight_vec4(i: u32) -> vec4<f32> {
    if (WBITS == 8u) {
        return vec4<f32>(unpack4xI8(wts[i]));
    }
    let word = bitcast<i32>(wts[i >> 1u]);
    let s = (i & 1u) << 4u;
    return vec4<f32>(vec4<i32>(extractBits(word, s, 4u), extractBits(word, s + 4u, 4u), extractBits(word, s + 8u, 4u), extractBits(word, s + 12u, 4u)));
}
fn words_of(runs: u32) -> u32 { return runs * WBITS / 8u; }
fn weight_scale(scales_at: u32, c: u32) -> f32 { return bitcast<f32>(wts[scales_at + c]); }
#end
