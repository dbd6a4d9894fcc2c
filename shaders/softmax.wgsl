// Softmax over the last axis, max-subtracted for stability; the backward uses the saved
// output: gx = y * (gy - sum(gy * y)). Two forms:
//   softmax_forward / softmax_backward: one row per invocation (short rows: each walk of a
//     row is one loop, and an invocation may loop at most ~60 000 times on lavapipe).
//   Long rows in chunks of `chunk` elements, one (row, chunk) per invocation:
//     softmax_chunk_lse:   the chunk's logsumexp, lse_c = m_c + log(sum exp(x - m_c)).
//     softmax_row_lse:     one row per invocation, the row's logsumexp from its chunks' lse_c.
//     softmax_normalize:   y = exp(x - lse_row).
//     softmax_chunk_dot:   the chunk's share of sum(gy * y) (the row sums are a `sum` op).
//     softmax_chunk_backward: gx = y * (gy - dot_row).
// Chunk values (lse, dots) are f32 whatever the storage type T.
struct Params { rows: u32, len: u32, chunk: u32, chunks: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(1) var<storage, read> y_saved: array<{{T}}>;
@group(0) @binding(2) var<storage, read> gy: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> gx: array<{{T}}>;
// softmax_chunk_lse: (x) -> (chunk_lse); softmax_row_lse: (chunk_lse_saved) -> (row_lse);
// softmax_normalize: (x, row_lse_saved) -> (y)
@group(0) @binding(2) var<storage, read_write> chunk_lse: array<f32>;
@group(0) @binding(1) var<storage, read> chunk_lse_saved: array<f32>;
@group(0) @binding(2) var<storage, read_write> row_lse: array<f32>;
@group(0) @binding(2) var<storage, read> row_lse_saved: array<f32>;
@group(0) @binding(3) var<storage, read_write> y_chunked: array<{{T}}>;
// softmax_chunk_dot: (y_saved, gy) -> (chunk_dot); softmax_chunk_backward: (y_saved, gy,
// row_dot) -> (gx_chunked)
@group(0) @binding(3) var<storage, read_write> chunk_dot: array<f32>;
@group(0) @binding(3) var<storage, read> row_dot: array<f32>;
@group(0) @binding(4) var<storage, read_write> gx_chunked: array<{{T}}>;

const MIN: f32 = -3.4028234663852886e38;

fn invocation(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 64u + lid;
}

@compute @workgroup_size(64)
fn softmax_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let row = invocation(wid, nwg, lid);
    if (row >= p.rows) { return; }
    let base = row * p.len;
    var mx = MIN;
    for (var j = 0u; j < p.len; j++) {
        mx = max(mx, f32(x[base + j]));
    }
    var total = 0.0;
    for (var j = 0u; j < p.len; j++) {
        total += exp(f32(x[base + j]) - mx);
    }
    let inv = 1.0 / total;
    for (var j = 0u; j < p.len; j++) {
        y[base + j] = {{T}}(exp(f32(x[base + j]) - mx) * inv);
    }
}

@compute @workgroup_size(64)
fn softmax_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let row = invocation(wid, nwg, lid);
    if (row >= p.rows) { return; }
    let base = row * p.len;
    var dot = 0.0;
    for (var j = 0u; j < p.len; j++) {
        dot += f32(gy[base + j]) * f32(y_saved[base + j]);
    }
    for (var j = 0u; j < p.len; j++) {
        let yj = f32(y_saved[base + j]);
        gx[base + j] = {{T}}(yj * (f32(gy[base + j]) - dot));
    }
}

// The (row, chunk) of an invocation of the chunked kernels: elements [start, end) of the
// flat tensor, `slot` its index in the [rows, chunks] chunk values.
struct Chunk { row: u32, slot: u32, start: u32, end: u32 }

fn chunk_of(slot: u32) -> Chunk {
    let row = slot / p.chunks;
    let first = (slot - row * p.chunks) * p.chunk;
    let start = row * p.len + first;
    return Chunk(row, slot, start, start + min(p.chunk, p.len - first));
}

@compute @workgroup_size(64)
fn softmax_chunk_lse(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lid: u32) {
    let slot = invocation(wid, nwg, lid);
    if (slot >= p.rows * p.chunks) { return; }
    let c = chunk_of(slot);
    var mx = MIN;
    for (var j = c.start; j < c.end; j++) {
        mx = max(mx, f32(x[j]));
    }
    var total = 0.0;
    for (var j = c.start; j < c.end; j++) {
        total += exp(f32(x[j]) - mx);
    }
    chunk_lse[slot] = mx + log(total);
}

@compute @workgroup_size(64)
fn softmax_row_lse(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let row = invocation(wid, nwg, lid);
    if (row >= p.rows) { return; }
    let base = row * p.chunks;
    var mx = MIN;
    for (var c = 0u; c < p.chunks; c++) {
        mx = max(mx, chunk_lse_saved[base + c]);
    }
    var total = 0.0;
    for (var c = 0u; c < p.chunks; c++) {
        total += exp(chunk_lse_saved[base + c] - mx);
    }
    row_lse[row] = mx + log(total);
}

@compute @workgroup_size(64)
fn softmax_normalize(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lid: u32) {
    let slot = invocation(wid, nwg, lid);
    if (slot >= p.rows * p.chunks) { return; }
    let c = chunk_of(slot);
    let lse = row_lse_saved[c.row];
    for (var j = c.start; j < c.end; j++) {
        y_chunked[j] = {{T}}(exp(f32(x[j]) - lse));
    }
}

@compute @workgroup_size(64)
fn softmax_chunk_dot(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lid: u32) {
    let slot = invocation(wid, nwg, lid);
    if (slot >= p.rows * p.chunks) { return; }
    let c = chunk_of(slot);
    var dot = 0.0;
    for (var j = c.start; j < c.end; j++) {
        dot += f32(gy[j]) * f32(y_saved[j]);
    }
    chunk_dot[slot] = dot;
}

@compute @workgroup_size(64)
fn softmax_chunk_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lid: u32) {
    let slot = invocation(wid, nwg, lid);
    if (slot >= p.rows * p.chunks) { return; }
    let c = chunk_of(slot);
    let dot = row_dot[c.row];
    for (var j = c.start; j < c.end; j++) {
        gx_chunked[j] = {{T}}(f32(y_saved[j]) * (f32(gy[j]) - dot));
    }
}
