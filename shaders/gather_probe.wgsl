// The implicit-GEMM conv's gather (shaders/conv_tiled.wgsl) for `wgdiff bench mac`
// (src/bench/memory.rs): invocation i owns 16 consecutive pixels from i x 16 and reads each at a
// workgroup-uniform kernel offset s x p.stride, 16 scalar f32 loads per read s, `p.rounds`
// iterations of 8 unrolled reads into 8 sums (as shaders/memory_probe.wgsl), indices & p.mask.
struct Params { rounds: u32, stride: u32, mask: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> data: array<f32>;
@group(0) @binding(2) var<storage, read_write> sums: array<f32>;

@compute @workgroup_size(64)
fn read_gather(@builtin(global_invocation_id) gid: vec3<u32>) {
    let origin = gid.x * 16u;
    #for u in 0..8: var acc{u} = 0.0;
    for (var i = 0u; i < p.rounds; i++) {
        #for u in 0..8 {
        let off{u} = origin + (i * 8u + {u}u) * p.stride;
        acc{u} += ((data[(off{u} + 0u) & p.mask] + data[(off{u} + 1u) & p.mask]) + (data[(off{u} + 2u) & p.mask] + data[(off{u} + 3u) & p.mask])) + ((data[(off{u} + 4u) & p.mask] + data[(off{u} + 5u) & p.mask]) + (data[(off{u} + 6u) & p.mask] + data[(off{u} + 7u) & p.mask])) + (((data[(off{u} + 8u) & p.mask] + data[(off{u} + 9u) & p.mask]) + (data[(off{u} + 10u) & p.mask] + data[(off{u} + 11u) & p.mask])) + ((data[(off{u} + 12u) & p.mask] + data[(off{u} + 13u) & p.mask]) + (data[(off{u} + 14u) & p.mask] + data[(off{u} + 15u) & p.mask])));
        #end
    }
    sums[gid.x] = ((acc0 + acc1) + (acc2 + acc3)) + ((acc4 + acc5) + (acc6 + acc7));
}
