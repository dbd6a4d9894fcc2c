// The Winograd F(4x4, 3x3) input and output transforms, shared by conv_winograd.wgsl (in
// registers) and conv_winograd_gemm.wgsl (around the blocked matmul).

// B^T times six values: a column, then a row, of the input patch.
fn input_transform(d: array<f32, 6>) -> array<f32, 6> {
    return array<f32, 6>(
        4.0 * d[0] - 5.0 * d[2] + d[4],
        d[3] + d[4] - 4.0 * (d[1] + d[2]),
        d[4] - d[3] + 4.0 * (d[1] - d[2]),
        d[4] - d[2] + 2.0 * (d[3] - d[1]),
        d[4] - d[2] + 2.0 * (d[1] - d[3]),
        4.0 * d[1] - 5.0 * d[3] + d[5],
    );
}

// A^T times six vec4s (four output channels each): a column, then a row, of M.
fn output_transform(m: array<vec4<f32>, 6>) -> array<vec4<f32>, 4> {
    let plus12 = m[1] + m[2];
    let minus12 = m[1] - m[2];
    let plus34 = m[3] + m[4];
    let minus34 = m[3] - m[4];
    return array<vec4<f32>, 4>(
        m[0] + plus12 + plus34,
        minus12 + 2.0 * minus34,
        plus12 + 4.0 * plus34,
        minus12 + 8.0 * minus34 + m[5],
    );
}
