// Naive batched matmul, C[b] = A[b] x B[b]: one output element per invocation, operands
// addressed through strides (so transposes cost nothing). The baseline for benchmarks.
struct Params {
    m: u32, n: u32, k: u32, batch: u32,
    a_batch: u32, a_row: u32, a_col: u32,
    b_batch: u32, b_row: u32, b_col: u32,
}
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<{{T}}>;
@group(0) @binding(2) var<storage, read> b: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> c: array<{{T}}>;

@compute @workgroup_size(8, 8)
fn matmul_naive(@builtin(global_invocation_id) gid: vec3<u32>) {
    let col = gid.x;
    let row = gid.y;
    let bat = gid.z;
    if (col >= p.n || row >= p.m) { return; }
    var acc = 0.0;
    let a0 = bat * p.a_batch + row * p.a_row;
    let b0 = bat * p.b_batch + col * p.b_col;
    for (var i = 0u; i < p.k; i++) {
        acc += f32(a[a0 + i * p.a_col]) * f32(b[b0 + i * p.b_row]);
    }
    c[(bat * p.m + row) * p.n + col] = {{T}}(acc);
}
