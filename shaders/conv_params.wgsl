// Sizes of one convolution, shared by every conv kernel (filled by ops::conv::ConvGeometry::params).
struct Conv {
    n: u32, cin: u32, h: u32, w: u32, cout: u32, kh: u32, kw: u32,
    sh: u32, sw: u32, ph: u32, pw: u32, dh: u32, dw: u32,
    groups: u32, oh: u32, ow: u32, cin_g: u32, cout_g: u32, k: u32, k4: u32,
    // Slices of the weight gradient's pixel reduction (1 for every other kernel): a uniform,
    // not a template constant, so every slice count shares one compiled pipeline.
    slices: u32,
    // First workgroup of this dispatch along the kernel's split axis, when Gpu::dispatch_parts
    // splits a long dispatch into parts (x of conv_forward_tiled, z of the weight gradient).
    part_base: u32,
}
