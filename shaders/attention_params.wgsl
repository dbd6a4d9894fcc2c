// What both attention kernel files share (shaders/attention.wgsl, attention_sliced.wgsl):
// head dims, the uniform (filled by ops::attention::Plan::params) and the bindings.
const D: u32 = {{D}}u;   // head dim of q and k
const DV: u32 = {{DV}}u; // head dim of v and the output

struct Params {
    rows: u32,   // rows this dispatch covers: P * len_q (query kernels) or P * len_kv (key kernel)
    len_q: u32,  // queries per problem
    len_kv: u32, // keys (and values) per problem
    scale: f32,  // factor on q.k (1 / sqrt(D) unless the caller chose one)
}
@group(0) @binding(0) var<uniform> p: Params;

// attn_forward: (q, k, v) -> (o, lse)
// attn_backward_q: (q, k, v, o_saved, lse_saved, gout) -> (gq, delta)
// attn_backward_kv: (q, k, v, gout, lse_saved, delta_saved) -> (gk, gv)
@group(0) @binding(1) var<storage, read> q: array<{{T}}>;
@group(0) @binding(2) var<storage, read> k: array<{{T}}>;
@group(0) @binding(3) var<storage, read> v: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> o: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;
@group(0) @binding(4) var<storage, read> o_saved: array<{{T}}>;
@group(0) @binding(5) var<storage, read> lse_saved: array<f32>;
@group(0) @binding(6) var<storage, read> gout: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> gq: array<{{T}}>;
@group(0) @binding(8) var<storage, read_write> delta: array<f32>;
@group(0) @binding(4) var<storage, read> gout_kv: array<{{T}}>;
@group(0) @binding(6) var<storage, read> delta_saved: array<f32>;
@group(0) @binding(7) var<storage, read_write> gk: array<{{T}}>;
@group(0) @binding(8) var<storage, read_write> gv: array<{{T}}>;

// Most negative finite f32 (WGSL has no infinity literal); exp(MIN - x) is 0.
const MIN: f32 = -3.4028234663852886e38;
