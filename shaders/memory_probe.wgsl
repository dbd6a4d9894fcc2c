// What bounds a kernel besides its FMAs (`wgdiff bench mac`, src/bench/memory.rs): every
// invocation runs `p.rounds` loop iterations of 8 unrolled reads into 8 independent sums and
// stores their total (so no read is optimised away); read s of an invocation is iteration s / 8's
// sub-read s % 8. `read_vec4`: lane-contiguous vec4 loads, read s of invocation i at
// (s * p.stride + i) & p.mask, so the invocations of a dispatch sweep the buffer once per
// 8 x p.rounds reads when p.stride is their number (streamed), or a small buffer again and again
// (cached). `read_workgroup`: a workgroup copies 1024 vec4s (16 KiB, the WebGPU limit) into
// workgroup memory once, then its lanes read consecutive vec4s of it at a uniform offset s x 64
// per read. `empty`: nothing, for the cost of a dispatch and of a submit. The implicit-GEMM
// conv's gather is shaders/gather_probe.wgsl.
struct Params { rounds: u32, stride: u32, mask: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> data: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> sums: array<f32>;

var<workgroup> tile: array<vec4<f32>, 1024>;

@compute @workgroup_size(64)
fn read_vec4(@builtin(global_invocation_id) gid: vec3<u32>) {
    #for u in 0..8: var acc{u} = vec4<f32>(0.0);
    for (var i = 0u; i < p.rounds; i++) {
        #for u in 0..8: acc{u} += data[((i * 8u + {u}u) * p.stride + gid.x) & p.mask];
    }
    let total = acc0 + acc1 + acc2 + acc3 + acc4 + acc5 + acc6 + acc7;
    sums[gid.x] = total.x + total.y + total.z + total.w;
}

@compute @workgroup_size(64)
fn read_workgroup(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    #for j in 0..16: tile[lid + {j}u * 64u] = data[(wid.x * 1024u + lid + {j}u * 64u) & p.mask];
    workgroupBarrier();
    #for u in 0..8: var acc{u} = vec4<f32>(0.0);
    for (var i = 0u; i < p.rounds; i++) {
        #for u in 0..8: acc{u} += tile[(lid + (i * 8u + {u}u) * 64u) & 1023u];
    }
    let total = acc0 + acc1 + acc2 + acc3 + acc4 + acc5 + acc6 + acc7;
    sums[gid.x] = total.x + total.y + total.z + total.w;
}

@compute @workgroup_size(1)
fn empty() {}
