// Casts between f32 and f16 through packed u32 words, so it runs on every adapter
// (no SHADER_F16 needed): two f16 values per word, low half first.
struct Params { n: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src_f32: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst_packed: array<u32>;
@group(0) @binding(1) var<storage, read> src_packed: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst_f32: array<f32>;

fn flat_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 64u + lid;
}

// One output word (two halves) per invocation.
@compute @workgroup_size(64)
fn f32_to_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let w = flat_id(wid, nwg, lid);
    let i = 2u * w;
    if (i >= p.n) { return; }
    var hi = 0.0;
    if (i + 1u < p.n) { hi = src_f32[i + 1u]; }
    dst_packed[w] = pack2x16float(vec2<f32>(src_f32[i], hi));
}

@compute @workgroup_size(64)
fn f16_to_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= p.n) { return; }
    let pair = unpack2x16float(src_packed[i / 2u]);
    dst_f32[i] = select(pair.x, pair.y, (i & 1u) == 1u);
}
