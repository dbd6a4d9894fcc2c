// flip_transpose, for computing a stride-1 conv's input gradient as another conv:
// w [Cout, Cin/g, KH, KW] -> w' [Cin, Cout/g, KH, KW] with in/out channels swapped within
// each group and the window flipped: w'[g*cin_g + ci, co, r, c] = w[g*cout_g + co, ci, KH-1-r, KW-1-c].
#include conv_params
@group(0) @binding(0) var<uniform> p: Conv;
@group(0) @binding(1) var<storage, read> wts: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> flipped: array<{{T}}>;

@compute @workgroup_size(64)
fn flip_transpose(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i >= p.cout * p.cin_g * p.kh * p.kw) { return; }
    let c = i % p.kw;
    let r = (i / p.kw) % p.kh;
    let co = (i / (p.kw * p.kh)) % p.cout_g;
    let cin = i / (p.kw * p.kh * p.cout_g);
    let g = cin / p.cin_g;
    let ci = cin % p.cin_g;
    let src = (((g * p.cout_g + co) * p.cin_g + ci) * p.kh + (p.kh - 1u - r)) * p.kw + (p.kw - 1u - c);
    flipped[i] = wts[src];
}
