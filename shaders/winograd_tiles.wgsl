// The 4x4 output tiles of a Winograd F(4x4, 3x3) conv over the batch (a last row or column of
// tiles may reach past the output), shared by conv_winograd_gemm.wgsl and
// conv_winograd_wgrad.wgsl; needs the conv's params `p` (conv_params.wgsl).

// The tile count over the batch.
fn tiles() -> u32 {
    return p.n * ((p.oh + 3u) / 4u) * ((p.ow + 3u) / 4u);
}

// Tile t's sample and output origin (row, column).
fn tile_origin(t: u32) -> vec3<u32> {
    let tiles_w = (p.ow + 3u) / 4u;
    let per_image = ((p.oh + 3u) / 4u) * tiles_w;
    return vec3<u32>(t / per_image, ((t % per_image) / tiles_w) * 4u, ((t % per_image) % tiles_w) * 4u);
}
