// Writes a grid of [N, C, H, W] images in [-1, 1] into a rectangle of an Rgba8Unorm storage
// texture that the app shows (no CPU readback). One invocation per texel of the rectangle.

struct Params {
    n: u32,
    channels: u32,
    height: u32,
    width: u32,
    columns: u32,
    scale: u32,
    gap: u32,
    origin_x: u32,
    origin_y: u32,
    area_width: u32,
    area_height: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> images: array<f32>;
@group(0) @binding(2) var out: texture_storage_2d<rgba8unorm, write>;

@compute @workgroup_size(8, 8)
fn grid_to_texture(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x >= p.area_width || id.y >= p.area_height) {
        return;
    }
    let cell_w = p.width * p.scale + p.gap;
    let cell_h = p.height * p.scale + p.gap;
    let col = id.x / cell_w;
    let row = id.y / cell_h;
    let ix = id.x % cell_w;
    let iy = id.y % cell_h;
    let image = row * p.columns + col;
    // Background between and around the images (a dark grey, as egui's dark theme).
    var color = vec4<f32>(0.11, 0.11, 0.11, 1.0);
    if (ix >= p.gap && iy >= p.gap && col < p.columns && image < p.n) {
        let x = (ix - p.gap) / p.scale;
        let y = (iy - p.gap) / p.scale;
        let plane = p.height * p.width;
        let base = image * p.channels * plane + y * p.width + x;
        var rgb = vec3<f32>(images[base]);
        if (p.channels >= 3u) {
            rgb = vec3<f32>(images[base], images[base + plane], images[base + 2u * plane]);
        }
        // Pixel values are display values (as in the PNG grids): egui reads texels as sRGB.
        color = vec4<f32>(clamp((rgb + 1.0) * 0.5, vec3<f32>(0.0), vec3<f32>(1.0)), 1.0);
    }
    textureStore(out, vec2<u32>(p.origin_x + id.x, p.origin_y + id.y), color);
}
