// Multiply-accumulate throughput of the adapter's arithmetic (`wgdiff bench mac`, src/bench/mac.rs):
// every invocation runs `p.rounds` loop iterations of 8 unrolled rounds (a long loop body, as in
// the conv and matmul kernels, so the loop's own cost is small) of 8 independent accumulations of
// 4 products each, on operands held in registers, and stores its sums (so nothing is optimised
// away); round r of all is iteration r / 8's sub-round r % 8. `fma_f32`:
// vec4 FMAs, the float kernels' inner step. `unpack_i8`: int8 words unpacked to f32 and FMA'd,
// one word per 4 products (the packed-weight kernels' register dequantisation without reuse).
// `dot4_i8`: dot4I8Packed of two int8 words, what int8 activations times int8 weights would
// run. The integer operand changes every round (xor with the round's number) so that no sum can be
// computed ahead. In `fma_f32` each accumulator is the multiplicand, `acc = acc * a + b`, so every
// FMA needs the one before it: with a fixed product added (`acc = a * b + acc`), Mesa 25's lavapipe
// folded the repeated additions and the probe read 363-381 GFLOP/s on 2 vCPUs whose AVX2 FMAs can
// do ~180 (BENCHMARKS.md, "Mesa 25's lavapipe"). |a| <= 1/2 and b in [1/4, 3/4] keep every
// accumulator between b / (1 + |a|) and b / (1 - |a|): no overflow, no denormals.
struct Params { rounds: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> seed: array<u32>;
@group(0) @binding(2) var<storage, read_write> sums: array<u32>;

@compute @workgroup_size(64)
fn fma_f32(@builtin(global_invocation_id) gid: vec3<u32>) {
    let s = seed[gid.x % 64u];
    let a = 0.5 * unpack4x8snorm(s);
    #for j in 0..8: let b{j} = 0.5 + 0.25 * unpack4x8snorm(s ^ ({j}u * 0x01010101u));
    #for j in 0..8: var acc{j} = vec4<f32>(0.0);
    for (var i = 0u; i < p.rounds; i++) {
        #for u in 0..8 {
        #for j in 0..8: acc{j} = fma(acc{j}, a, b{j});
        #end
    }
    let total = acc0 + acc1 + acc2 + acc3 + acc4 + acc5 + acc6 + acc7;
    sums[gid.x] = bitcast<u32>(total.x + total.y + total.z + total.w);
}

@compute @workgroup_size(64)
fn unpack_i8(@builtin(global_invocation_id) gid: vec3<u32>) {
    let s = seed[gid.x % 64u];
    let a = unpack4x8snorm(s);
    #for j in 0..8: let w{j} = s ^ ({j}u * 0x01010101u);
    #for j in 0..8: var acc{j} = vec4<f32>(0.0);
    for (var i = 0u; i < p.rounds; i++) {
        #for u in 0..8 {
        let r{u} = i * 8u + {u}u;
        #for j in 0..8: acc{j} = fma(a, vec4<f32>(unpack4xI8(w{j} ^ r{u})), acc{j});
        #end
    }
    let total = acc0 + acc1 + acc2 + acc3 + acc4 + acc5 + acc6 + acc7;
    sums[gid.x] = bitcast<u32>(total.x + total.y + total.z + total.w);
}

@compute @workgroup_size(64)
fn dot4_i8(@builtin(global_invocation_id) gid: vec3<u32>) {
    let s = seed[gid.x % 64u];
    #for j in 0..8: let w{j} = s ^ ({j}u * 0x01010101u);
    #for j in 0..8: var acc{j} = 0i;
    for (var i = 0u; i < p.rounds; i++) {
        #for u in 0..8 {
        let x{u} = s ^ (i * 8u + {u}u);
        #for j in 0..8: acc{j} += dot4I8Packed(x{u}, w{j});
        #end
    }
    sums[gid.x] = bitcast<u32>(acc0 + acc1 + acc2 + acc3 + acc4 + acc5 + acc6 + acc7);
}
