//! The tiled implicit-GEMM forward (shaders/conv_tiled.wgsl): register tiles over a zero-padded
//! input, no column buffer, float or packed integer weights, the epilogue added as it stores.

use super::epilogue::{ConvAddends, Epilogue};
use super::geometry::{ConvGeometry, K4_PARAM};
use super::options::ConvOptions;
use crate::gpu::{Cost, SplitAxis};
use crate::ops::kernel_for;
use crate::ops::matmul::BlockShape;
use crate::ops::packed::WeightOperand;
use crate::{shader, DType, Result, Tensor};

/// `x` zero-padded by the conv's padding, and the geometry of the same conv on it (padding 0):
/// the implicit-GEMM kernels then gather without bounds checks.
pub(super) fn padded_input(x: &Tensor, geo: &ConvGeometry) -> Result<(Tensor, ConvGeometry)> {
    let (ph, pw) = geo.opts.padding;
    Ok((
        x.pad(&[(0, 0), (0, 0), (ph, ph), (pw, pw)])?,
        geo.on_padded_input()?,
    ))
}

/// Pins the tile the tiled forward of float weights uses for input shape `x` and weight
/// shape `w` under `opts` in `dtype` (tests and benchmarks that force a tile; see `Autotuner::set`).
pub fn pin_conv_tile(
    gpu: &crate::Gpu,
    x: &[usize],
    w: &[usize],
    opts: ConvOptions,
    dtype: DType,
    tile: BlockShape,
) -> Result<()> {
    let geo = ConvGeometry::new(x, w, opts)?.on_padded_input()?;
    if !BlockShape::candidates(gpu, geo.cout_g(), geo.n * geo.pixels()).contains(&tile) {
        return Err(crate::Error::shape(
            "pin_conv_tile",
            format!("the tile {tile} is not a candidate for this conv on this adapter"),
        ));
    }
    let key = format!("{}:tile", geo.tuning_key(dtype));
    gpu.tuner().set(&key, &tile.to_string());
    Ok(())
}

/// The implicit-GEMM forward of float weights (rows padded to K4 here).
pub(super) fn conv_forward_tiled(
    x: &Tensor,
    w: &Tensor,
    add: ConvAddends,
    geo: &ConvGeometry,
) -> Result<Tensor> {
    let k = geo.k();
    let w4 = w.reshape(&[geo.cout, k])?.pad_axis(1, 0, geo.k4() - k)?;
    tiled_forward(x, WeightOperand::Float(&w4), add, geo)
}

/// The implicit-GEMM forward on the zero-padded input; the bias (zeros when None) and the
/// residual are added by the kernel. Float weights have their tile autotuned per shape;
/// packed weights take the fixed rule's tile, untimed (see [`WeightOperand`]).
pub(crate) fn tiled_forward(
    x: &Tensor,
    weights: WeightOperand,
    add: ConvAddends,
    geo: &ConvGeometry,
) -> Result<Tensor> {
    let (gpu, dt) = (x.gpu(), x.dtype());
    add.check(geo, dt)?;
    let (x, geo) = &padded_input(x, geo)?;
    let epilogue = &Epilogue::new(add, dt, gpu)?;
    let tiles = BlockShape::candidates(gpu, geo.cout_g(), geo.n * geo.pixels());
    let labels: Vec<String> = tiles.iter().map(|t| t.to_string()).collect();
    let key = format!("{}:tile", geo.tuning_key(dt));
    let choice = match weights {
        WeightOperand::Float(_) => gpu.tuner().choose(gpu, &key, &labels, 0, |c| {
            let scratch = Tensor::empty(gpu, &geo.output_shape(), dt)?;
            dispatch_tiled(x, weights, epilogue, &scratch, geo, tiles[c]);
            Ok(())
        })?,
        WeightOperand::Packed(_) => 0,
    };
    let y = Tensor::empty(gpu, &geo.output_shape(), dt)?;
    dispatch_tiled(x, weights, epilogue, &y, geo, tiles[choice]);
    Ok(y)
}

/// One tiled forward dispatch: y = conv(x, weights) + the epilogue's terms.
fn dispatch_tiled(
    x: &Tensor,
    weights: WeightOperand,
    epilogue: &Epilogue,
    y: &Tensor,
    geo: &ConvGeometry,
    tile: BlockShape,
) {
    let gpu = x.gpu();
    let mut defines = vec![
        ("R", tile.rows.to_string()),
        ("C4", tile.col4.to_string()),
        ("C", (4 * tile.col4).to_string()),
        ("W", tile.lanes.to_string()),
    ];
    defines.extend(tile.row_read_defines());
    defines.extend(epilogue.defines());
    defines.extend(weights.defines(2));
    let kernel = kernel_for(
        gpu,
        shader!("conv_tiled"),
        "conv_forward_tiled",
        x.dtype(),
        &defines,
        5,
        1,
    );
    let cols = geo.n * geo.pixels();
    let groups = [
        cols.div_ceil((4 * tile.col4 * tile.lanes) as usize) as u32,
        geo.cout_g().div_ceil(tile.rows as usize) as u32,
        geo.opts.groups as u32,
    ];
    let mut params = geo.params();
    params[K4_PARAM] = weights.padded_k(geo.k()) as u32;
    gpu.dispatch_parts(
        &kernel,
        &params,
        &[&[x.buffer(), weights.buffer()], &epilogue.buffers()[..]].concat(),
        &[y.buffer()],
        groups,
        SplitAxis::X,
        Cost::new(
            "conv2d",
            geo.flops(),
            x.byte_len() + weights.byte_len() + y.byte_len(),
        ),
    );
}
