// Register-blocked batched matmul C[b] = A[b] x B[b] (A: MxK, B: KxN, row-major; K and N
// multiples of 4). Each invocation owns an R x (4*C4) block of C in named vec4 accumulators;
// a workgroup of W invocations shares the same R rows of A, read as vec4 along k, while B
// is read as vec4 along n. k advances by 4 with every FMA unrolled. R, C4 and W are chosen per
// adapter (big register tiles and W=8 on CPU adapters, 4x4 tiles and W=64 on GPUs). With
// AG > 0 (AR = 0) the workgroup is one subgroup of W lanes and its R = AG x W rows of A are
// read W at a time, lane l reading row g x W + l, and handed to every lane by
// subgroupBroadcast: on lavapipe a load at a workgroup-uniform address costs as much as a
// gather, so this reads A with W times fewer loads. With AG = 0 (AR = R) every lane reads
// every row (no subgroups needed). BIAS 1
// adds bias[n] to every row as C is stored (a Linear layer's bias), BIAS 2 bias[m] to every
// column; with BIAS 0 `bias` is a placeholder the kernel does not read. B may be packed
// integer weights (shaders/weights.wgsl; 4-bit rows padded to N = multiple of 8) with one
// scale per column, dequantised in registers and applied to the sums as C is stored. With
// TEXELS 1 (f32, float B) A and B are read from their copies as rgba32float texels
// (src/gpu/texels.rs): 1.5x the kernel's speed on Mesa 25's lavapipe, whose storage loads are
// slow here, and no faster on Mesa 22.3.
struct Params { m: u32, n: u32, k: u32, a_batch: u32, b_batch: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<{{T}}>>;
#include weights
@group(0) @binding(3) var<storage, read> bias: array<vec4<{{T}}>>; // [N] or [M], padded to 4
@group(0) @binding(4) var<storage, read_write> c: array<vec4<{{T}}>>;
const BIAS: u32 = {{BIAS}}u;
#for t in 0..{{TEXELS}} {
#include texels
@group(0) @binding(5) var a_texels: texture_2d<f32>;
@group(0) @binding(6) var b_texels: texture_2d<f32>;
fn a_vec4(i: u32) -> vec4<f32> { return textureLoad(a_texels, texel_at(i), 0); }
fn b_vec4(i: u32) -> vec4<f32> { return textureLoad(b_texels, texel_at(i), 0); }
#end
#for t in 0..{{STORAGE}} {
fn a_vec4(i: u32) -> vec4<f32> { return vec4<f32>(a[i]); }
fn b_vec4(i: u32) -> vec4<f32> { return weight_vec4(i); }
#end

// The bias of row `row` (rows past M read the last one; they are not stored).
fn row_bias(row: u32) -> f32 {
    let r = min(row, p.m - 1u);
    return f32(bias[r / 4u][r % 4u]);
}

@compute @workgroup_size({{W}})
fn matmul_blocked(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n4 = p.n / 4u;
    let k4 = p.k / 4u;
    let row0 = wid.y * {{R}}u;
    let col0 = (wid.x * {{W}}u + lid) * {{C4}}u;
    let a_base = wid.z * (p.a_batch / 4u);
    let b_base = wid.z * (p.b_batch / 4u);
    let c_base = wid.z * (p.m * n4);
    // Rows past M and columns past N read the last valid ones; their results are not stored.
    #for r in 0..{{AR}}: let arow{r} = a_base + min(row0 + {r}u, p.m - 1u) * k4;
    #for g in 0..{{AG}}: let arow_mine{g} = a_base + min(row0 + {g}u * {{W}}u + lid, p.m - 1u) * k4;
    #for j in 0..{{C4}}: let bcol{j} = b_base + min(col0 + {j}u, n4 - 1u);
    #for r in 0..{{R}}, j in 0..{{C4}}: var acc{r}_{j} = vec4<f32>(0.0);
    for (var kk = 0u; kk < k4; kk++) {
        let b_row = kk * 4u * n4;
        #for r in 0..{{AR}}: let a{r} = a_vec4(arow{r} + kk);
        #for g in 0..{{AG}} {
        let mine{g} = a_vec4(arow_mine{g} + kk);
        #for l in 0..{{W}}: let a{g*{{W}}+l} = subgroupBroadcast(mine{g}, {l}u);
        #end
        // One column group at a time: its four B vectors, then every row's FMAs.
        #for j in 0..{{C4}} {
        let b0_{j} = b_vec4(bcol{j} + b_row);
        let b1_{j} = b_vec4(bcol{j} + b_row + n4);
        let b2_{j} = b_vec4(bcol{j} + b_row + 2u * n4);
        let b3_{j} = b_vec4(bcol{j} + b_row + 3u * n4);
        #for r in 0..{{R}}: acc{r}_{j} = fma(vec4<f32>(a{r}.w), b3_{j}, fma(vec4<f32>(a{r}.z), b2_{j}, fma(vec4<f32>(a{r}.y), b1_{j}, fma(vec4<f32>(a{r}.x), b0_{j}, acc{r}_{j}))));
        #end
    }
    // Packed B: each column's scale (1 for float weights).
    let scales_at = words_of(k4 * p.n);
    #for j in 0..{{C4}}: let scale{j} = vec4<f32>(weight_scale(scales_at, 4u * (bcol{j} - b_base)), weight_scale(scales_at, 4u * (bcol{j} - b_base) + 1u), weight_scale(scales_at, 4u * (bcol{j} - b_base) + 2u), weight_scale(scales_at, 4u * (bcol{j} - b_base) + 3u));
    #for j in 0..{{C4}}: var add{j} = vec4<f32>(0.0);
    #for r in 0..{{R}}: var add_row{r} = 0.0;
    if (BIAS == 1u) {
        #for j in 0..{{C4}}: add{j} = vec4<f32>(bias[bcol{j} - b_base]);
    }
    if (BIAS == 2u) {
        #for r in 0..{{R}}: add_row{r} = row_bias(row0 + {r}u);
    }
    #for r in 0..{{R}}, j in 0..{{C4}}: if (row0 + {r}u < p.m && col0 + {j}u < n4) { c[c_base + (row0 + {r}u) * n4 + col0 + {j}u] = vec4<{{T}}>(acc{r}_{j} * scale{j} + add{j} + add_row{r}); }
}
