//! What a convolution adds to its output (`ConvAddends`: bias, per-sample bias, residual) and
//! the `Epilogue` through which the tiled and Winograd kernels add it as they store.

use super::geometry::ConvGeometry;
use crate::{DType, Error, Gpu, Result, Tensor};

/// What a convolution adds to its output ([`Tensor::conv2d_plus`]).
#[derive(Clone, Copy, Default)]
pub struct ConvAddends<'a> {
    /// `[Cout]`: one bias per output channel (PyTorch's conv bias).
    pub bias: Option<&'a Tensor>,
    /// `[N, Cout]`: one bias per sample and channel (e.g. a projected time embedding).
    pub sample_bias: Option<&'a Tensor>,
    /// A tensor of the output's shape (a residual connection).
    pub residual: Option<&'a Tensor>,
}

impl ConvAddends<'_> {
    /// Errors unless the bias is `[Cout]`, the sample bias `[N, Cout]` and the residual the
    /// output's shape, all in the input's dtype (the kernels read them as `T`).
    pub(super) fn check(&self, geo: &ConvGeometry, dtype: DType) -> Result<()> {
        let terms = [
            ("conv bias", self.bias, vec![geo.cout]),
            ("conv sample bias", self.sample_bias, vec![geo.n, geo.cout]),
            ("conv residual", self.residual, geo.output_shape().to_vec()),
        ];
        for (what, term, shape) in terms {
            if let Some(t) = term.filter(|t| t.shape() != shape.as_slice() || t.dtype() != dtype) {
                return Err(Error::shape(
                    what,
                    format!(
                        "{what} {:?} {:?} should be {shape:?} {dtype:?} (the input's dtype; cast it with to_dtype)",
                        t.shape(),
                        t.dtype(),
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The tiled and Winograd forwards' output terms, each a tensor or (when absent) a
/// one-element placeholder the kernel does not read: the bias `[Cout]`, the sample bias
/// `[N, Cout]`, the residual. Which are present is a template constant, so each combination
/// is its own pipeline and a plain conv's epilogue pays for none of them.
pub(super) struct Epilogue {
    terms: [(Tensor, bool); 3],
}

impl Epilogue {
    pub(super) fn new(add: ConvAddends, dt: DType, gpu: &Gpu) -> Result<Epilogue> {
        let term = |t: Option<&Tensor>| -> Result<(Tensor, bool)> {
            Ok(match t {
                Some(t) => (t.clone(), true),
                None => (Tensor::empty(gpu, &[1], dt)?, false),
            })
        };
        Ok(Epilogue {
            terms: [term(add.bias)?, term(add.sample_bias)?, term(add.residual)?],
        })
    }

    /// The template constants choosing the kernel's variant.
    pub(super) fn defines(&self) -> [(&'static str, String); 3] {
        let on = |i: usize| self.terms[i].1.to_string();
        [("BIAS", on(0)), ("SAMPLE_BIAS", on(1)), ("RESIDUAL", on(2))]
    }

    /// The terms' buffers, bound after the input and the weights.
    pub(super) fn buffers(&self) -> [&wgpu::Buffer; 3] {
        self.terms.each_ref().map(|(t, _)| t.buffer())
    }
}
