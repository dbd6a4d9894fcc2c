// Where vec4 `i` of an operand copied into texels sits (src/gpu/texels.rs: rows of
// TEXEL_ROW = 2^TEXEL_SHIFT rgba32float texels).
const TEXEL_SHIFT: u32 = 11u;
fn texel_at(i: u32) -> vec2<u32> {
    return vec2<u32>(i & ((1u << TEXEL_SHIFT) - 1u), i >> TEXEL_SHIFT);
}
