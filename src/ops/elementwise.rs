//! Elementwise ops: unary maps (neg, exp, log, sqrt, relu, silu, gelu in its exact and tanh
//! forms, sigmoid, tanh, clamp, scalar pow/affine/reciprocal, abs, square, sin, cos) and
//! broadcasting binary maps, with backward. Kernels: shaders/elementwise.wgsl.

use super::{check_rank, check_same_dtype, flat_groups, kernel_for, needs_f32_fallback, pack8};
use crate::gpu::Cost;
use crate::tensor::contiguous_strides;
use crate::{shader, DType, Error, Result, Tensor};

/// Which GELU: PyTorch's `F.gelu(x)` is [`GeluForm::Exact`], `F.gelu(x, approximate="tanh")`
/// is [`GeluForm::Tanh`]; they differ by up to 4.7e-4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeluForm {
    /// x * Phi(x) with Phi the standard normal CDF, (1 + erf(x / sqrt 2)) / 2 (the float32
    /// erf in shaders/elementwise.wgsl is within 1.5e-7 of the true one).
    Exact,
    /// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
    Tanh,
}

/// A unary map; ids match `unary()` in shaders/elementwise.wgsl.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unary {
    Neg,
    Exp,
    Log,
    Sqrt,
    Relu,
    Silu,
    /// GELU in the given form.
    Gelu(GeluForm),
    Sigmoid,
    Tanh,
    Clamp(f32, f32),
    /// x^p for a scalar p.
    Pow(f32),
    /// a*x + b (scalar add/sub/mul/div are special cases).
    Affine(f32, f32),
    /// a / x.
    Reciprocal(f32),
    Abs,
    Square,
    Sin,
    Cos,
}

impl Unary {
    /// Op names of the forward and backward kernels, for the profiler.
    fn names(self) -> [&'static str; 2] {
        match self {
            Unary::Neg => ["neg", "neg_backward"],
            Unary::Exp => ["exp", "exp_backward"],
            Unary::Log => ["log", "log_backward"],
            Unary::Sqrt => ["sqrt", "sqrt_backward"],
            Unary::Relu => ["relu", "relu_backward"],
            Unary::Silu => ["silu", "silu_backward"],
            Unary::Gelu(GeluForm::Exact) => ["gelu_exact", "gelu_exact_backward"],
            Unary::Gelu(GeluForm::Tanh) => ["gelu_tanh", "gelu_tanh_backward"],
            Unary::Sigmoid => ["sigmoid", "sigmoid_backward"],
            Unary::Tanh => ["tanh", "tanh_backward"],
            Unary::Clamp(..) => ["clamp", "clamp_backward"],
            Unary::Pow(_) => ["pow_scalar", "pow_scalar_backward"],
            Unary::Affine(..) => ["affine", "affine_backward"],
            Unary::Reciprocal(_) => ["reciprocal", "reciprocal_backward"],
            Unary::Abs => ["abs", "abs_backward"],
            Unary::Square => ["square", "square_backward"],
            Unary::Sin => ["sin", "sin_backward"],
            Unary::Cos => ["cos", "cos_backward"],
        }
    }

    fn id_and_scalars(self) -> (u32, f32, f32) {
        match self {
            Unary::Neg => (0, 0.0, 0.0),
            Unary::Exp => (1, 0.0, 0.0),
            Unary::Log => (2, 0.0, 0.0),
            Unary::Sqrt => (3, 0.0, 0.0),
            Unary::Relu => (4, 0.0, 0.0),
            Unary::Silu => (5, 0.0, 0.0),
            Unary::Gelu(GeluForm::Tanh) => (6, 0.0, 0.0),
            Unary::Sigmoid => (7, 0.0, 0.0),
            Unary::Tanh => (8, 0.0, 0.0),
            Unary::Clamp(lo, hi) => (9, lo, hi),
            Unary::Pow(p) => (10, p, 0.0),
            Unary::Affine(a, b) => (11, a, b),
            Unary::Reciprocal(a) => (12, a, 0.0),
            Unary::Abs => (13, 0.0, 0.0),
            Unary::Square => (14, 0.0, 0.0),
            Unary::Sin => (15, 0.0, 0.0),
            Unary::Cos => (16, 0.0, 0.0),
            Unary::Gelu(GeluForm::Exact) => (17, 0.0, 0.0),
        }
    }
}

/// A broadcasting binary map; ids match `binary()` in shaders/elementwise.wgsl.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
    /// 1 where equal, else 0 (no gradient).
    Equal,
}

impl Binary {
    /// Op names of the forward and backward kernels, for the profiler.
    fn names(self) -> [&'static str; 2] {
        match self {
            Binary::Add => ["add", "add_backward"],
            Binary::Sub => ["sub", "sub_backward"],
            Binary::Mul => ["mul", "mul_backward"],
            Binary::Div => ["div", "div_backward"],
            Binary::Pow => ["pow", "pow_backward"],
            Binary::Maximum => ["maximum", "maximum_backward"],
            Binary::Minimum => ["minimum", "minimum_backward"],
            Binary::Equal => ["equal", "equal_backward"],
        }
    }
}

/// Shape two operands broadcast to (NumPy rules).
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        if i + s.len() >= rank {
            s[i + s.len() - rank]
        } else {
            1
        }
    };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// Strides that read `shape` (right-aligned) while iterating `out`: 0 on broadcast dims.
pub(crate) fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let own = contiguous_strides(shape);
    let pad = out.len() - shape.len();
    (0..out.len())
        .map(|i| {
            if i < pad || shape[i - pad] == 1 {
                0
            } else {
                own[i - pad]
            }
        })
        .collect()
}

/// `shape` and the two operands' strides with size-1 dims dropped and neighbouring dims
/// merged where both operands step through them alike (same shapes become one dim, a
/// per-channel operand two), so the kernels decode few dims.
fn merge_dims(shape: &[usize], sa: &[usize], sb: &[usize]) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let mut dims: Vec<[usize; 3]> = Vec::new();
    for k in (0..shape.len()).filter(|&k| shape[k] != 1) {
        let [d, a, b] = [shape[k], sa[k], sb[k]];
        match dims.last_mut() {
            Some(last) if last[1] == a * d && last[2] == b * d => *last = [last[0] * d, a, b],
            _ => dims.push([d, a, b]),
        }
    }
    if dims.is_empty() {
        dims.push([1, 0, 0]);
    }
    (
        dims.iter().map(|d| d[0]).collect(),
        dims.iter().map(|d| d[1]).collect(),
        dims.iter().map(|d| d[2]).collect(),
    )
}

fn elementwise_params(n: usize, a: f32, b: f32, shape: &[usize], sa: &[usize], sb: &[usize]) -> Vec<u32> {
    let mut p = vec![n as u32, shape.len() as u32, a.to_bits(), b.to_bits()];
    p.extend(pack8(shape, 1));
    p.extend(pack8(sa, 0));
    p.extend(pack8(sb, 0));
    p
}

impl Tensor {
    /// Applies a unary map.
    pub fn unary(&self, op: Unary) -> Result<Tensor> {
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            return self.to_dtype(DType::F32)?.unary(op)?.to_dtype(DType::F16);
        }
        let gpu = self.gpu();
        let (id, a, b) = op.id_and_scalars();
        let out = Tensor::empty(gpu, self.shape(), self.dtype())?;
        let n = self.numel();
        let kernel = kernel_for(
            gpu,
            shader!("elementwise"),
            "unary_forward",
            self.dtype(),
            &[("OP", id.to_string())],
            1,
            1,
        );
        let params = elementwise_params(n, a, b, &[], &[], &[]);
        gpu.dispatch_named(
            &kernel,
            &params,
            &[self.buffer()],
            &[out.buffer()],
            flat_groups(gpu, n),
            Cost::memory(op.names()[0], 2 * self.byte_len()),
        );
        let x = self.clone();
        Ok(out.with_grad_fn(
            "unary",
            vec![self.clone()],
            Box::new(move |g| Ok(vec![Some(unary_backward(&x, g, op)?)])),
        ))
    }

    pub fn neg(&self) -> Result<Tensor> {
        self.unary(Unary::Neg)
    }
    pub fn exp(&self) -> Result<Tensor> {
        self.unary(Unary::Exp)
    }
    pub fn log(&self) -> Result<Tensor> {
        self.unary(Unary::Log)
    }
    pub fn sqrt(&self) -> Result<Tensor> {
        self.unary(Unary::Sqrt)
    }
    pub fn relu(&self) -> Result<Tensor> {
        self.unary(Unary::Relu)
    }
    pub fn silu(&self) -> Result<Tensor> {
        self.unary(Unary::Silu)
    }
    /// GELU in the given form: `GeluForm::Exact` is PyTorch's default `F.gelu(x)`,
    /// `GeluForm::Tanh` is `F.gelu(x, approximate="tanh")`.
    pub fn gelu(&self, form: GeluForm) -> Result<Tensor> {
        self.unary(Unary::Gelu(form))
    }
    pub fn sigmoid(&self) -> Result<Tensor> {
        self.unary(Unary::Sigmoid)
    }
    pub fn tanh(&self) -> Result<Tensor> {
        self.unary(Unary::Tanh)
    }
    pub fn abs(&self) -> Result<Tensor> {
        self.unary(Unary::Abs)
    }
    pub fn square(&self) -> Result<Tensor> {
        self.unary(Unary::Square)
    }
    pub fn sin(&self) -> Result<Tensor> {
        self.unary(Unary::Sin)
    }
    pub fn cos(&self) -> Result<Tensor> {
        self.unary(Unary::Cos)
    }
    pub fn clamp(&self, lo: f32, hi: f32) -> Result<Tensor> {
        self.unary(Unary::Clamp(lo, hi))
    }
    /// x^p for a scalar exponent.
    pub fn powf(&self, p: f32) -> Result<Tensor> {
        self.unary(Unary::Pow(p))
    }
    pub fn add_scalar(&self, s: f32) -> Result<Tensor> {
        self.unary(Unary::Affine(1.0, s))
    }
    pub fn sub_scalar(&self, s: f32) -> Result<Tensor> {
        self.unary(Unary::Affine(1.0, -s))
    }
    pub fn mul_scalar(&self, s: f32) -> Result<Tensor> {
        self.unary(Unary::Affine(s, 0.0))
    }
    pub fn div_scalar(&self, s: f32) -> Result<Tensor> {
        self.unary(Unary::Affine(1.0 / s, 0.0))
    }
    /// s - x.
    pub fn rsub_scalar(&self, s: f32) -> Result<Tensor> {
        self.unary(Unary::Affine(-1.0, s))
    }
    /// s / x.
    pub fn rdiv_scalar(&self, s: f32) -> Result<Tensor> {
        self.unary(Unary::Reciprocal(s))
    }

    /// Applies a binary map with broadcasting.
    pub fn binary(&self, other: &Tensor, op: Binary) -> Result<Tensor> {
        check_same_dtype("binary", self, other)?;
        if needs_f32_fallback(self.gpu(), self.dtype()) {
            let (a, b) = (self.to_dtype(DType::F32)?, other.to_dtype(DType::F32)?);
            return a.binary(&b, op)?.to_dtype(DType::F16);
        }
        let out_shape = broadcast_shape(self.shape(), other.shape()).ok_or_else(|| {
            Error::shape(
                "binary",
                format!(
                    "{op:?}: shapes {:?} and {:?} do not broadcast",
                    self.shape(),
                    other.shape()
                ),
            )
        })?;
        check_rank("binary", &out_shape)?;
        let gpu = self.gpu();
        let out = Tensor::empty(gpu, &out_shape, self.dtype())?;
        let n = out.numel();
        let (shape, sa, sb) = merge_dims(
            &out_shape,
            &broadcast_strides(self.shape(), &out_shape),
            &broadcast_strides(other.shape(), &out_shape),
        );
        let params = elementwise_params(n, 0.0, 0.0, &shape, &sa, &sb);
        // Same shape, both contiguous: the vec4 kernel (no broadcasting cursor).
        let entry = if sa == [1] && sb == [1] {
            "binary_forward_same_shape"
        } else {
            "binary_forward"
        };
        let kernel = kernel_for(
            gpu,
            shader!("elementwise"),
            entry,
            self.dtype(),
            &[("OP", (op as u32).to_string())],
            2,
            1,
        );
        gpu.dispatch_named(
            &kernel,
            &params,
            &[self.buffer(), other.buffer()],
            &[out.buffer()],
            flat_groups(gpu, n),
            Cost::memory(op.names()[0], self.byte_len() + other.byte_len() + out.byte_len()),
        );
        // Sums and differences need no inputs in their backward: only shapes are kept, so the
        // inputs' buffers are freed as soon as nothing else holds them.
        let saved = match op {
            Binary::Add | Binary::Sub => None,
            _ => Some((self.clone(), other.clone())),
        };
        let grads_for = [self, other].map(|t| t.tracks_grad().then(|| t.shape().to_vec()));
        Ok(out.with_grad_fn(
            "binary",
            vec![self.clone(), other.clone()],
            Box::new(move |g| binary_backward(saved.as_ref(), &grads_for, g, op, &params)),
        ))
    }

    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, Binary::Add)
    }
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, Binary::Sub)
    }
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, Binary::Mul)
    }
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, Binary::Div)
    }
    /// Elementwise power with a tensor exponent.
    pub fn pow(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, Binary::Pow)
    }
    pub fn maximum(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, Binary::Maximum)
    }
    pub fn minimum(&self, other: &Tensor) -> Result<Tensor> {
        self.binary(other, Binary::Minimum)
    }
}

fn unary_backward(x: &Tensor, g: &Tensor, op: Unary) -> Result<Tensor> {
    let gpu = x.gpu();
    let (id, a, b) = op.id_and_scalars();
    let gx = Tensor::empty(gpu, x.shape(), x.dtype())?;
    let n = x.numel();
    let kernel = kernel_for(
        gpu,
        shader!("elementwise"),
        "unary_backward",
        x.dtype(),
        &[("OP", id.to_string())],
        2,
        1,
    );
    let params = elementwise_params(n, a, b, &[], &[], &[]);
    gpu.dispatch_named(
        &kernel,
        &params,
        &[x.buffer(), g.buffer()],
        &[gx.buffer()],
        flat_groups(gpu, n),
        Cost::memory(op.names()[1], 3 * x.byte_len()),
    );
    Ok(gx)
}

fn binary_backward(
    saved: Option<&(Tensor, Tensor)>,
    grads_for: &[Option<Vec<usize>>; 2],
    g: &Tensor,
    op: Binary,
    params: &[u32],
) -> Result<Vec<Option<Tensor>>> {
    let (ga_full, gb_full) = match (op, saved) {
        (Binary::Add, _) => (g.clone(), g.clone()),
        (Binary::Sub, _) => (g.clone(), g.neg()?),
        (_, None) => {
            return Err(Error::Autograd(format!(
                "internal: the backward of {op:?} needs its saved inputs"
            )))
        }
        (_, Some((a, b))) => {
            let gpu = a.gpu();
            let ga = Tensor::empty(gpu, g.shape(), g.dtype())?;
            let gb = Tensor::empty(gpu, g.shape(), g.dtype())?;
            let kernel = kernel_for(
                gpu,
                shader!("elementwise"),
                "binary_backward",
                g.dtype(),
                &[("OP", (op as u32).to_string())],
                3,
                2,
            );
            gpu.dispatch_named(
                &kernel,
                params,
                &[a.buffer(), b.buffer(), g.buffer()],
                &[ga.buffer(), gb.buffer()],
                flat_groups(gpu, g.numel()),
                Cost::memory(op.names()[1], a.byte_len() + b.byte_len() + 3 * g.byte_len()),
            );
            (ga, gb)
        }
    };
    let [a_shape, b_shape] = grads_for;
    Ok(vec![
        a_shape.as_ref().map(|s| ga_full.sum_to_shape(s)).transpose()?,
        b_shape.as_ref().map(|s| gb_full.sum_to_shape(s)).transpose()?,
    ])
}
