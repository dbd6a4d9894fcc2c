// Shows a sample-grid texture in the app: one triangle covering the viewport egui gives the
// paint callback, each pixel the nearest texel, no sampler, no blending. On a CPU adapter this
// costs a fraction of egui's general textured-mesh shader over the same pixels.

@group(0) @binding(0) var grid: texture_2d<f32>;

struct Corner {
    @builtin(position) position: vec4<f32>,
    // 0..1 across the viewport, (0, 0) at the top left
    @location(0) uv: vec2<f32>,
};

@vertex
fn vs_main(@builtin(vertex_index) index: u32) -> Corner {
    // (0,0), (2,0), (0,2) in uv: the triangle covers the unit square
    let uv = vec2<f32>(f32((index << 1u) & 2u), f32(index & 2u));
    var out: Corner;
    out.position = vec4<f32>(uv.x * 2.0 - 1.0, 1.0 - uv.y * 2.0, 0.0, 1.0);
    out.uv = uv;
    return out;
}

fn texel(uv: vec2<f32>) -> vec4<f32> {
    let size = vec2<i32>(textureDimensions(grid));
    let at = clamp(vec2<i32>(floor(uv * vec2<f32>(size))), vec2<i32>(0), size - vec2<i32>(1));
    return textureLoad(grid, at, 0);
}

// For a framebuffer egui writes gamma-encoded colours into (Rgba8Unorm, Bgra8Unorm).
@fragment
fn fs_gamma(in: Corner) -> @location(0) vec4<f32> {
    return texel(in.uv);
}

// For an sRGB framebuffer, which encodes what it is given: the texel decoded to linear first.
@fragment
fn fs_linear(in: Corner) -> @location(0) vec4<f32> {
    let c = texel(in.uv);
    let low = c.rgb / 12.92;
    let high = pow((c.rgb + vec3<f32>(0.055)) / 1.055, vec3<f32>(2.4));
    return vec4<f32>(select(high, low, c.rgb <= vec3<f32>(0.04045)), c.a);
}
