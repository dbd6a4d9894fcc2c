//! The Winograd F(4x4, 3x3) forward for 3x3 stride-1 convs: the weights transformed once, then
//! either the register kernel (shaders/conv_winograd.wgsl, its tile autotuned) or, for
//! ungrouped convs, the batched-GEMM form (shaders/conv_winograd_gemm.wgsl: the input
//! transform, the blocked matmul over the 36 entries, the output transform), whichever
//! measures faster; the epilogue added as the output is stored. The weight gradient of an
//! ungrouped Winograd conv: the tiled kernel's or the batched GEMM's
//! (shaders/conv_winograd_wgrad.wgsl), measured the same way.

use super::epilogue::{ConvAddends, Epilogue};
use super::geometry::{flat_groups, ConvGeometry, K4_PARAM};
use super::options::ConvOptions;
use crate::gpu::{Cost, SplitAxis};
use crate::ops::kernel_for;
use crate::ops::packed::WeightOperand;
use crate::{shader, DType, Gpu, Result, Tensor};

/// Whether `ConvImpl::Winograd` computes this conv with its own kernel (3x3, stride 1,
/// dilation 1, any padding and groups) rather than the tiled one: the kernel also needs
/// subgroups of one fixed size (a workgroup is one subgroup sharing its weight loads), and
/// one workgroup per subgroup-sized run of 4x4 tiles must fit the dispatch limit.
pub fn winograd_applies(gpu: &Gpu, geo: &ConvGeometry) -> bool {
    let max_groups = gpu.limits.max_compute_workgroups_per_dimension as usize;
    (geo.kh, geo.kw) == (3, 3)
        && geo.opts.stride == (1, 1)
        && geo.opts.dilation == (1, 1)
        && gpu
            .fixed_subgroup_size()
            .is_some_and(|lanes| winograd_tiles(geo).div_ceil(lanes as usize) <= max_groups)
}

/// The 4x4 output tiles of a Winograd conv (the last rows or columns of a size that is not a
/// multiple of 4 are part of a tile).
fn winograd_tiles(geo: &ConvGeometry) -> usize {
    geo.n * geo.oh.div_ceil(4) * geo.ow.div_ceil(4)
}

/// A Winograd kernel's register tile: quads of output channels x 4x4 output tiles per
/// invocation (36 sums of four channels per quad and tile), invocations per workgroup (one
/// subgroup).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WinogradTile {
    quads: u32,
    tiles: u32,
    lanes: u32,
}

impl WinogradTile {
    /// Tiles worth measuring for `cout_g` output channels and `tiles` 4x4 output tiles with
    /// `lanes` invocations (the subgroup size): on CPU adapters 8..32 channels x 1 tile (2
    /// tiles ran ~3% faster on lavapipe, but compiling their unrolled code raised the peak RSS
    /// of `bench train` by 76 MB), on GPUs fewer sums per invocation.
    fn candidates(gpu: &Gpu, lanes: u32, cout_g: usize, tiles: usize) -> Vec<WinogradTile> {
        // (quads of output channels, tiles per invocation)
        let shapes: &[(u32, u32)] = if gpu.is_cpu() {
            &[(4, 1), (8, 1), (2, 1)]
        } else {
            &[(1, 1), (2, 1), (1, 2)]
        };
        let all: Vec<WinogradTile> = shapes
            .iter()
            .map(|&(quads, tiles)| WinogradTile { quads, tiles, lanes })
            .collect();
        let fits = |t: &&WinogradTile| {
            4 * t.quads as usize <= 2 * cout_g.max(4) && (t.tiles * t.lanes) as usize <= 2 * tiles.max(16)
        };
        let kept: Vec<WinogradTile> = all.iter().filter(fits).copied().collect();
        if kept.is_empty() {
            vec![*all.last().expect("a tile")]
        } else {
            kept
        }
    }
}

impl std::fmt::Display for WinogradTile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} channels x {} 4x4 tiles per invocation, {} invocations",
            4 * self.quads,
            self.tiles,
            self.lanes
        )
    }
}

/// U = G w G^T of a 3x3 weight `w` (shaders/winograd_weights.wgsl; packed integers
/// dequantised as they are read), f32: for the register kernel `[Cin/g, quads of Cout, 6x6,
/// 4]`, or (`gemm`, ungrouped) the batched GEMM's A operand `[36, Cout padded to 4, Cin]`.
fn winograd_weights(gpu: &Gpu, w: WeightOperand, geo: &ConvGeometry, gemm: bool) -> Result<Tensor> {
    let quads = geo.opts.groups * geo.cout_g().div_ceil(4);
    let (shape, entry) = match gemm {
        false => (vec![geo.cin_g(), quads, 36, 4], "winograd_weights"),
        true => (vec![36, 4 * quads, geo.cin_g()], "winograd_weights_gemm"),
    };
    let u = Tensor::empty(gpu, &shape, DType::F32)?;
    let (dtype, row) = match w {
        WeightOperand::Float(t) => (t.dtype(), geo.k()),
        WeightOperand::Packed(_) => (DType::F32, w.padded_k(geo.k())),
    };
    let kernel = kernel_for(
        gpu,
        shader!("winograd_weights"),
        entry,
        dtype,
        &w.defines(1),
        1,
        1,
    );
    let mut params = geo.params();
    params[K4_PARAM] = row as u32;
    gpu.dispatch_named(
        &kernel,
        &params,
        &[w.buffer()],
        &[u.buffer()],
        flat_groups(gpu, geo.cin_g() * quads * 4),
        Cost::memory("winograd_weights", w.byte_len() + u.byte_len()),
    );
    Ok(u)
}

/// The Winograd F(4x4, 3x3) forward (shaders/conv_winograd.wgsl), padding as it reads the
/// input: the weights (float or packed) transformed once per call in the chosen form's
/// layout, the register tile or the batched GEMM autotuned per shape, the epilogue's terms
/// added by the kernel.
pub(super) fn conv_forward_winograd(
    x: &Tensor,
    w: WeightOperand,
    add: ConvAddends,
    geo: &ConvGeometry,
) -> Result<Tensor> {
    let (gpu, dt) = (x.gpu(), x.dtype());
    let epilogue = &Epilogue::new(add, dt, gpu)?;
    let lanes = gpu
        .fixed_subgroup_size()
        .expect("winograd_applies checked the subgroups");
    let shapes = WinogradTile::candidates(gpu, lanes, geo.cout_g(), winograd_tiles(geo));
    let mut labels: Vec<String> = shapes.iter().map(|t| t.to_string()).collect();
    // (the GEMM form last: a cache of choices made before it existed stays valid)
    if geo.opts.groups == 1 {
        labels.push(GEMM_FORM.into());
    }
    let key = format!("{}:winograd", geo.tuning_key(dt));
    let run = |c: usize, y: &Tensor| match shapes.get(c) {
        Some(&shape) => {
            dispatch_winograd(x, &winograd_weights(gpu, w, geo, false)?, epilogue, y, geo, shape);
            Ok(())
        }
        None => winograd_gemm(x, &winograd_weights(gpu, w, geo, true)?, epilogue, y, geo),
    };
    let choice = gpu.tuner().choose(gpu, &key, &labels, 0, |c| {
        run(c, &Tensor::empty(gpu, &geo.output_shape(), dt)?)
    })?;
    let y = Tensor::empty(gpu, &geo.output_shape(), dt)?;
    run(choice, &y)?;
    Ok(y)
}

/// Makes the Winograd forward and weight gradient of input shape `x` and weight shape `w` under
/// `opts` in `dtype` run their batched-GEMM forms (tests and benchmarks; see `Autotuner::set`). Errors where that
/// form does not apply (grouped, or not Winograd's 3x3 stride-1 shape).
pub fn pin_winograd_gemm(gpu: &Gpu, x: &[usize], w: &[usize], opts: ConvOptions, dtype: DType) -> Result<()> {
    let geo = ConvGeometry::new(x, w, opts)?;
    if !winograd_applies(gpu, &geo) || opts.groups != 1 {
        return Err(crate::Error::shape(
            "pin_winograd_gemm",
            format!("the Winograd GEMM form does not run {}", geo.describe()),
        ));
    }
    gpu.tuner()
        .set(&format!("{}:winograd", geo.tuning_key(dtype)), GEMM_FORM);
    gpu.tuner()
        .set(&weight_grad_key(&geo, dtype), WEIGHT_GRAD_GEMM_FORM);
    Ok(())
}

/// The autotuner's label of the batched-GEMM form.
const GEMM_FORM: &str = "gemm: input transform, blocked matmul over the 36 entries, output transform";

/// The autotuner's label of the weight gradient's batched-GEMM form.
const WEIGHT_GRAD_GEMM_FORM: &str =
    "gemm: input and gradient transforms, blocked matmul over the 36 entries, weight transform";

/// The autotuner's key of the Winograd conv's weight gradient.
fn weight_grad_key(geo: &ConvGeometry, dtype: DType) -> String {
    format!("{}:winograd weight grad", geo.tuning_key(dtype))
}

/// dw of a Winograd conv (ungrouped, where [`winograd_applies`]): `tiled` (the implicit-GEMM
/// kernel) or the batched-GEMM form, whichever measures faster for the rounded shape (`tiled`
/// where nothing is timed).
pub(super) fn winograd_weight_grad(
    x: &Tensor,
    dy: &Tensor,
    geo: &ConvGeometry,
    tiled: impl Fn() -> Result<Tensor>,
) -> Result<Tensor> {
    let gpu = x.gpu();
    let labels = ["tiled".to_string(), WEIGHT_GRAD_GEMM_FORM.to_string()];
    let run = |c: usize| match c {
        0 => tiled(),
        _ => winograd_gemm_weight_grad(x, dy, geo),
    };
    let choice = gpu
        .tuner()
        .choose(gpu, &weight_grad_key(geo, x.dtype()), &labels, 0, |c| {
            run(c).map(drop)
        })?;
    run(choice)
}

/// The weight gradient as a batched GEMM (shaders/conv_winograd_wgrad.wgsl): every tile's input
/// patch transformed as the forward does (`winograd_input`: V [36, Cin, T4], the tile count T
/// padded to a multiple of 4 with zero tiles), every 4x4 tile of
/// dY by A (`winograd_grad_tiles`: Q [36, T4, Cout padded to 4]), M = V x Q for the 36 entries
/// by the blocked matmul (the sum over the batch's tiles is its inner dimension), and
/// dW = G^T M G (`winograd_weight_grad`).
fn winograd_gemm_weight_grad(x: &Tensor, dy: &Tensor, geo: &ConvGeometry) -> Result<Tensor> {
    let (gpu, dt) = (x.gpu(), x.dtype());
    let tiles = 4 * winograd_tiles(geo).div_ceil(4);
    let cols = 4 * geo.cout.div_ceil(4);
    let v = Tensor::empty(gpu, &[36, geo.cin, tiles], DType::F32)?;
    // (the module's output entry needs the epilogue's constants; none of its terms here)
    let defines = Epilogue::new(ConvAddends::default(), dt, gpu)?.defines();
    let input = kernel_for(
        gpu,
        shader!("conv_winograd_gemm"),
        "winograd_input",
        dt,
        &defines,
        1,
        1,
    );
    gpu.dispatch_named(
        &input,
        &geo.params(),
        &[x.buffer()],
        &[v.buffer()],
        flat_groups(gpu, geo.cin * tiles),
        Cost::memory("winograd_input", x.byte_len() + v.byte_len()),
    );
    let q = Tensor::empty(gpu, &[36, tiles, cols], DType::F32)?;
    let kernel = |entry| kernel_for(gpu, shader!("conv_winograd_wgrad"), entry, dt, &[], 1, 1);
    gpu.dispatch_named(
        &kernel("winograd_grad_tiles"),
        &geo.params(),
        &[dy.buffer()],
        &[q.buffer()],
        flat_groups(gpu, tiles * cols / 4),
        Cost::memory("winograd_grad_tiles", dy.byte_len() + q.byte_len()),
    );
    let m = v.matmul(&q)?;
    let dw = Tensor::empty(gpu, &geo.weight_shape(), dt)?;
    gpu.dispatch_named(
        &kernel("winograd_weight_grad"),
        &geo.params(),
        &[m.buffer()],
        &[dw.buffer()],
        flat_groups(gpu, geo.cin * cols / 4),
        Cost::memory("winograd_weight_grad", m.byte_len() + dw.byte_len()),
    );
    Ok(dw)
}

/// The Winograd forward as a batched GEMM (ungrouped convs): every tile's input patch
/// transformed once (`winograd_input`: V [36, Cin, T4], the tile count padded to a multiple of 4), M = U x V for the 36 entries by the
/// blocked matmul (U, `u` [36, Cout padded to 4, Cin]), and the output transform with the
/// epilogue's terms into `y` (`winograd_output`).
fn winograd_gemm(x: &Tensor, u: &Tensor, epilogue: &Epilogue, y: &Tensor, geo: &ConvGeometry) -> Result<()> {
    let (gpu, dt) = (x.gpu(), x.dtype());
    let tiles = 4 * winograd_tiles(geo).div_ceil(4);
    let v = Tensor::empty(gpu, &[36, geo.cin, tiles], DType::F32)?;
    let defines = epilogue.defines();
    let kernel =
        |entry, inputs| kernel_for(gpu, shader!("conv_winograd_gemm"), entry, dt, &defines, inputs, 1);
    gpu.dispatch_named(
        &kernel("winograd_input", 1),
        &geo.params(),
        &[x.buffer()],
        &[v.buffer()],
        flat_groups(gpu, geo.cin * tiles),
        Cost::memory("winograd_input", x.byte_len() + v.byte_len()),
    );
    let m = u.matmul(&v)?;
    gpu.dispatch_named(
        &kernel("winograd_output", 5),
        &geo.params(),
        &[&[m.buffer(), m.buffer()], &epilogue.buffers()[..]].concat(),
        &[y.buffer()],
        flat_groups(gpu, geo.cout * tiles / 4),
        Cost::memory("winograd_output", m.byte_len() + y.byte_len()),
    );
    Ok(())
}

/// One Winograd forward dispatch: y = conv(x, w) + the epilogue's terms, `u` the transformed
/// weights.
fn dispatch_winograd(
    x: &Tensor,
    u: &Tensor,
    epilogue: &Epilogue,
    y: &Tensor,
    geo: &ConvGeometry,
    shape: WinogradTile,
) {
    let gpu = x.gpu();
    let mut defines = vec![
        ("QUADS", shape.quads.to_string()),
        ("LOADS", (36 * shape.quads).div_ceil(shape.lanes).to_string()),
        ("TILES", shape.tiles.to_string()),
        ("W", shape.lanes.to_string()),
    ];
    defines.extend(epilogue.defines());
    let kernel = kernel_for(
        gpu,
        shader!("conv_winograd"),
        "conv_forward_winograd",
        x.dtype(),
        &defines,
        5,
        1,
    );
    let groups = [
        winograd_tiles(geo).div_ceil((shape.tiles * shape.lanes) as usize) as u32,
        geo.cout_g().div_ceil(4 * shape.quads as usize) as u32,
        geo.opts.groups as u32,
    ];
    gpu.dispatch_parts(
        &kernel,
        &geo.params(),
        &[&[x.buffer(), u.buffer()], &epilogue.buffers()[..]].concat(),
        &[y.buffer()],
        groups,
        SplitAxis::X,
        Cost::new("conv2d", geo.flops(), x.byte_len() + u.byte_len() + y.byte_len()),
    );
}
