// The roof's probes of loads besides storage buffers (`wgdiff bench mac`,
// src/roofline/texel_probe.rs): the loop of shaders/memory_probe.wgsl's `read_vec4` (read s of
// invocation i at (s * p.stride + i) & p.mask, `p.rounds` iterations of 8 reads into 8 sums), its
// vec4s read as rgba32float texels of the engine's texel operand (`read_texel`, texel e at
// texels.wgsl's `texel_at(e)`) or from a 64 KiB uniform array (`read_uniform`, WebGPU's limit
// for one uniform binding).
#include texels
struct Params { rounds: u32, stride: u32, mask: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var texels: texture_2d<f32>;
@group(0) @binding(2) var<storage, read_write> sums: array<f32>;
@group(0) @binding(3) var<uniform> block: array<vec4<f32>, 4096>;

fn texel(e: u32) -> vec4<f32> {
    return textureLoad(texels, texel_at(e), 0);
}

@compute @workgroup_size(64)
fn read_texel(@builtin(global_invocation_id) gid: vec3<u32>) {
    #for u in 0..8: var acc{u} = vec4<f32>(0.0);
    for (var i = 0u; i < p.rounds; i++) {
        #for u in 0..8: acc{u} += texel(((i * 8u + {u}u) * p.stride + gid.x) & p.mask);
    }
    let total = acc0 + acc1 + acc2 + acc3 + acc4 + acc5 + acc6 + acc7;
    sums[gid.x] = total.x + total.y + total.z + total.w;
}

@compute @workgroup_size(64)
fn read_uniform(@builtin(global_invocation_id) gid: vec3<u32>) {
    #for u in 0..8: var acc{u} = vec4<f32>(0.0);
    for (var i = 0u; i < p.rounds; i++) {
        #for u in 0..8: acc{u} += block[((i * 8u + {u}u) * p.stride + gid.x) & p.mask];
    }
    let total = acc0 + acc1 + acc2 + acc3 + acc4 + acc5 + acc6 + acc7;
    sums[gid.x] = total.x + total.y + total.z + total.w;
}
