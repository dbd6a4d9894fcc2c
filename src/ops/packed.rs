//! Weights as 8- or 4-bit signed integers with one f32 scale per output channel, packed into
//! u32 words on the device, and the operand through which the tiled conv and blocked matmul read them.
//!
//! The forwards that dequantise them in registers are `Tensor::conv2d_packed` (ops/conv) and
//! `Tensor::matmul_packed` (ops/matmul); this file imports neither.

use crate::{DType, Error, Gpu, Result, Tensor};

pub use crate::checkpoint::compressed::WeightBits;

/// Which kernel reads the words, with the unpadded sizes of its weight.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Layout {
    /// A conv weight [Cout, Cin/groups, KH, KW]: Cout rows of K = Cin/groups x KH x KW.
    Conv { shape: [usize; 4] },
    /// A Linear weight [K, N] (`x @ w`): K rows of N, one scale per column.
    Matmul { k: usize, n: usize },
}

/// Integer weights on the device: the packed rows (each padded with zeros to
/// [`WeightBits::row_multiple`]) then one f32 scale per output channel, in one buffer.
pub struct PackedWeights {
    bits: WeightBits,
    layout: Layout,
    words: Tensor,
}

/// The kernel's weight operand: float vec4s laid out as the kernel reads them, or packed
/// integers (the template values of shaders/weights.wgsl). Packed weights run the fixed rule's
/// tile (the first of `BlockShape::candidates`), untimed: timing every candidate compiles its unrolled kernel, and on
/// lavapipe that took ~400 s for the shapes of one compressed U-Net, against a few percent
/// between the tiles the tuner picked (`wgdiff bench conv --variants tiled,tiled-int8`).
#[derive(Clone, Copy)]
pub(crate) enum WeightOperand<'a> {
    Float(&'a Tensor),
    Packed(&'a PackedWeights),
}

impl WeightOperand<'_> {
    pub(crate) fn buffer(&self) -> &wgpu::Buffer {
        match self {
            WeightOperand::Float(t) => t.buffer(),
            WeightOperand::Packed(p) => p.words.buffer(),
        }
    }

    pub(crate) fn byte_len(&self) -> u64 {
        match self {
            WeightOperand::Float(t) => t.byte_len(),
            WeightOperand::Packed(p) => p.words.byte_len(),
        }
    }

    /// FLOAT_WEIGHTS, INT_WEIGHTS, WBITS and WEIGHTS_BINDING (the kernel's binding of `wts`).
    pub(crate) fn defines(&self, binding: u32) -> [(&'static str, String); 4] {
        let bits = match self {
            WeightOperand::Float(_) => 32,
            WeightOperand::Packed(p) => p.bits.bits(),
        };
        let packed = matches!(self, WeightOperand::Packed(_)) as u32;
        [
            ("FLOAT_WEIGHTS", (1 - packed).to_string()),
            ("INT_WEIGHTS", packed.to_string()),
            ("WBITS", bits.to_string()),
            ("WEIGHTS_BINDING", binding.to_string()),
        ]
    }

    /// The padded row length the kernel walks for a reduction of `k`.
    pub(crate) fn padded_k(&self, k: usize) -> usize {
        match self {
            WeightOperand::Float(_) => k.next_multiple_of(4),
            WeightOperand::Packed(p) => k.next_multiple_of(p.bits.row_multiple()),
        }
    }
}

/// Packs `rows` x `len` integers (`value(row, col)`) into words, each row padded with zeros to
/// `padded_len`, then appends `scales` as f32 bits.
fn pack_words(
    bits: WeightBits,
    (rows, padded_rows): (usize, usize),
    (len, padded_len): (usize, usize),
    value: impl Fn(usize, usize) -> i8,
    scales: &[f32],
) -> Vec<u32> {
    let per_word = bits.per_word();
    let mask = (1u32 << bits.bits()) - 1;
    let mut words = vec![0u32; (padded_rows * padded_len).div_ceil(per_word)];
    for r in 0..rows {
        for c in 0..len {
            let i = r * padded_len + c;
            let v = value(r, c) as i32 as u32 & mask;
            words[i / per_word] |= v << ((i % per_word) * bits.bits());
        }
    }
    words.extend(scales.iter().map(|s| s.to_bits()));
    words
}

/// Errors unless every value fits `bits`, the counts match and every scale is finite and
/// positive; `what` names the weight.
fn check_values(
    what: &str,
    bits: WeightBits,
    values: &[i8],
    expected: usize,
    scales: &[f32],
    channels: usize,
) -> Result<()> {
    let fault = if values.len() != expected {
        Some(format!("{} values for {expected} weights", values.len()))
    } else if scales.len() != channels {
        Some(format!("{} scales for {channels} output channels", scales.len()))
    } else if let Some(v) = values.iter().find(|v| v.unsigned_abs() > bits.max() as u8) {
        Some(format!(
            "value {v} outside {}'s range -{m}..={m}",
            bits.name(),
            m = bits.max()
        ))
    } else {
        scales
            .iter()
            .find(|s| !(s.is_finite() && **s > 0.0))
            .map(|s| format!("scale {s} is not a finite positive number"))
    };
    match fault {
        Some(fault) => Err(Error::shape("packed weights", format!("{what}: {fault}"))),
        None => Ok(()),
    }
}

impl PackedWeights {
    /// A conv weight of `shape` [Cout, Cin/groups, KH, KW] from its integer `values`
    /// (row-major) and one scale per output channel: weight = value x scale.
    pub fn conv(
        gpu: &Gpu,
        bits: WeightBits,
        shape: [usize; 4],
        values: &[i8],
        scales: &[f32],
    ) -> Result<PackedWeights> {
        let (cout, k) = (shape[0], shape[1] * shape[2] * shape[3]);
        check_values("conv weight", bits, values, cout * k, scales, cout)?;
        let padded = k.next_multiple_of(bits.row_multiple());
        let words = pack_words(bits, (cout, cout), (k, padded), |r, c| values[r * k + c], scales);
        PackedWeights::upload(gpu, bits, Layout::Conv { shape }, &words)
    }

    /// A Linear weight [k, n] from its integer `values` (row-major) and one scale per column.
    pub fn matmul(
        gpu: &Gpu,
        bits: WeightBits,
        k: usize,
        n: usize,
        values: &[i8],
        scales: &[f32],
    ) -> Result<PackedWeights> {
        check_values("matmul weight", bits, values, k * n, scales, n)?;
        let rows = (k, k.next_multiple_of(4));
        let cols = (n, n.next_multiple_of(bits.row_multiple()));
        let padded_scales: Vec<f32> = (0..cols.1)
            .map(|c| scales.get(c).copied().unwrap_or(1.0))
            .collect();
        let words = pack_words(bits, rows, cols, |r, c| values[r * n + c], &padded_scales);
        PackedWeights::upload(gpu, bits, Layout::Matmul { k, n }, &words)
    }

    fn upload(gpu: &Gpu, bits: WeightBits, layout: Layout, words: &[u32]) -> Result<PackedWeights> {
        let t = Tensor::empty(gpu, &[words.len()], DType::F32)?;
        gpu.write(t.buffer(), bytemuck::cast_slice(words));
        Ok(PackedWeights {
            bits,
            layout,
            words: t,
        })
    }

    pub fn bits(&self) -> WeightBits {
        self.bits
    }

    /// Which kernel reads these weights, with the float weight's sizes.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Bytes on the device (words and scales).
    pub fn byte_len(&self) -> u64 {
        self.words.byte_len()
    }

    /// The float weight's shape: [Cout, Cin/groups, KH, KW] or [K, N].
    pub fn shape(&self) -> Vec<usize> {
        match &self.layout {
            Layout::Conv { shape } => shape.to_vec(),
            Layout::Matmul { k, n } => vec![*k, *n],
        }
    }
}

/// Errors unless `x` can run on packed weights in `op`: f32, and not tracking gradients
/// (packed weights are for inference).
pub(crate) fn check_packed_input(x: &Tensor, op: &'static str) -> Result<()> {
    if x.dtype() != DType::F32 {
        return Err(Error::shape(
            op,
            format!("packed weights run on f32 inputs, got {:?}", x.dtype()),
        ));
    }
    if crate::autograd::grad_enabled() && x.tracks_grad() {
        return Err(Error::shape(
            op,
            "packed weights are for inference: run under no_grad, or train on the float weights",
        ));
    }
    Ok(())
}
