//! `ConvGeometry`: every size of one convolution, checked, and what the kernels take from it
//! (the `Conv` uniform of shaders/conv_params.wgsl, tuning keys, flat dispatch grids).

use super::options::ConvOptions;
use crate::ops::FLAT_WG;
use crate::{DType, Error, Gpu, Result};

/// Every size of one convolution, in the order of the WGSL `Conv` struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeometry {
    pub n: usize,
    pub cin: usize,
    pub h: usize,
    pub w: usize,
    pub cout: usize,
    pub kh: usize,
    pub kw: usize,
    pub opts: ConvOptions,
    pub oh: usize,
    pub ow: usize,
}

/// Index of `slices` in the `Conv` uniform: the weight gradient's split-K slice count.
pub(super) const SLICES_PARAM: usize = 20;
/// Index of `k4` in the `Conv` uniform: the padded reduction the tiled kernel walks (4-bit
/// packed weights pad it to a multiple of 8).
pub(super) const K4_PARAM: usize = 19;

impl ConvGeometry {
    /// Geometry of `conv2d(x [N,Cin,H,W], w [Cout,Cin/groups,KH,KW])`, checked.
    pub fn new(x: &[usize], w: &[usize], opts: ConvOptions) -> Result<ConvGeometry> {
        let bad = |msg: String| Error::shape("conv2d", msg);
        let ([n, cin, h, wd], [cout, cin_g, kh, kw]) = (
            <[usize; 4]>::try_from(x).map_err(|_| bad(format!("input must be [N, C, H, W], got {x:?}")))?,
            <[usize; 4]>::try_from(w)
                .map_err(|_| bad(format!("weight must be [Cout, Cin/groups, KH, KW], got {w:?}")))?,
        );
        let g = opts.groups;
        if g == 0 || cin % g != 0 || cout % g != 0 || cin / g != cin_g {
            return Err(bad(format!("input {x:?} and weight {w:?} do not fit groups={g} (need Cin = groups * weight dim 1, Cout divisible by groups)")));
        }
        if opts.stride.0 == 0 || opts.stride.1 == 0 || opts.dilation.0 == 0 || opts.dilation.1 == 0 {
            return Err(bad(format!(
                "stride {:?} and dilation {:?} must be at least 1 along both axes",
                opts.stride, opts.dilation
            )));
        }
        let span = |size: usize, k: usize, s: usize, p: usize, d: usize| {
            let eff = d * (k - 1) + 1;
            (size + 2 * p).checked_sub(eff).map(|v| v / s + 1)
        };
        let (Some(oh), Some(ow)) = (
            span(h, kh, opts.stride.0, opts.padding.0, opts.dilation.0),
            span(wd, kw, opts.stride.1, opts.padding.1, opts.dilation.1),
        ) else {
            return Err(bad(format!(
                "kernel {kh}x{kw} (dilation {:?}) is larger than the padded input {h}x{wd}",
                opts.dilation
            )));
        };
        Ok(ConvGeometry {
            n,
            cin,
            h,
            w: wd,
            cout,
            kh,
            kw,
            opts,
            oh,
            ow,
        })
    }

    /// Whether `crate::ops::depthwise7`'s kernels compute this conv: a 7x7 kernel, padding 3,
    /// stride 1, undilated, one filter per channel (the ConvNeXt block's depthwise conv).
    pub fn is_depthwise7(&self) -> bool {
        let o = &self.opts;
        (self.kh, self.kw) == (7, 7)
            && o.padding == (3, 3)
            && o.stride == (1, 1)
            && o.dilation == (1, 1)
            && self.cin_g() == 1
            && self.cout_g() == 1
    }

    pub fn cin_g(&self) -> usize {
        self.cin / self.opts.groups
    }
    pub fn cout_g(&self) -> usize {
        self.cout / self.opts.groups
    }
    /// Reduction length of one output: Cin/groups * KH * KW.
    pub fn k(&self) -> usize {
        self.cin_g() * self.kh * self.kw
    }
    pub fn pixels(&self) -> usize {
        self.oh * self.ow
    }
    /// The same conv on its input zero-padded by `opts.padding` (the padding then 0): what the
    /// tiled forward runs after padding the input.
    pub fn on_padded_input(&self) -> Result<ConvGeometry> {
        let (ph, pw) = self.opts.padding;
        let padded = [self.n, self.cin, self.h + 2 * ph, self.w + 2 * pw];
        let opts = ConvOptions {
            padding: (0, 0),
            ..self.opts
        };
        ConvGeometry::new(&padded, &self.weight_shape(), opts)
    }
    pub fn input_shape(&self) -> [usize; 4] {
        [self.n, self.cin, self.h, self.w]
    }
    pub fn weight_shape(&self) -> [usize; 4] {
        [self.cout, self.cin_g(), self.kh, self.kw]
    }
    pub fn output_shape(&self) -> [usize; 4] {
        [self.n, self.cout, self.oh, self.ow]
    }
    /// Reduction length padded to a multiple of 4 (rows of the im2col matrix).
    pub fn k4(&self) -> usize {
        self.k().next_multiple_of(4)
    }
    /// Multiply-adds times two.
    pub fn flops(&self) -> f64 {
        2.0 * (self.n * self.cout * self.pixels()) as f64 * self.k() as f64
    }

    /// The same convolution on `n` images.
    pub(super) fn with_batch(&self, n: usize) -> ConvGeometry {
        ConvGeometry { n, ..*self }
    }

    /// The kernels' `Conv` uniform (shaders/conv_params.wgsl), `slices` ([`SLICES_PARAM`]) 1,
    /// `part_base` 0.
    pub(super) fn params(&self) -> [u32; 22] {
        let o = &self.opts;
        [
            self.n,
            self.cin,
            self.h,
            self.w,
            self.cout,
            self.kh,
            self.kw,
            o.stride.0,
            o.stride.1,
            o.padding.0,
            o.padding.1,
            o.dilation.0,
            o.dilation.1,
            o.groups,
            self.oh,
            self.ow,
            self.cin_g(),
            self.cout_g(),
            self.k(),
            self.k4(),
            1,
            0,
        ]
        .map(|v| v as u32)
    }

    /// Readable shape, e.g. "B16 C64->64 32x32 k3 s1 p1 g1".
    pub fn describe(&self) -> String {
        let o = &self.opts;
        let sq = |a: (usize, usize)| {
            if a.0 == a.1 {
                a.0.to_string()
            } else {
                format!("{}x{}", a.0, a.1)
            }
        };
        let k = if self.kh == self.kw {
            self.kh.to_string()
        } else {
            format!("{}x{}", self.kh, self.kw)
        };
        let mut s = format!(
            "B{} C{}->{} {}x{} k{} s{} p{} g{}",
            self.n,
            self.cin,
            self.cout,
            self.h,
            self.w,
            k,
            sq(o.stride),
            sq(o.padding),
            o.groups
        );
        if o.dilation != (1, 1) {
            s += &format!(" d{}", sq(o.dilation));
        }
        s
    }

    /// Key for remembered per-shape choices: sizes rounded up to powers of two.
    pub(super) fn tuning_key(&self, dtype: DType) -> String {
        let r = |v: usize| v.next_power_of_two();
        let o = &self.opts;
        format!(
            "conv:{dtype:?}:n{}:c{}->{}:{}x{}:k{}x{}:s{:?}:d{:?}:g{}",
            r(self.n),
            r(self.cin),
            r(self.cout),
            r(self.h),
            r(self.w),
            self.kh,
            self.kw,
            o.stride,
            o.dilation,
            if o.groups == 1 {
                "1".to_string()
            } else if o.groups == self.cin {
                "dw".into()
            } else {
                r(o.groups).to_string()
            }
        )
    }
}

/// Workgroups of the conv kernels that run one invocation per element (`FLAT_WG` each).
pub(super) fn flat_groups(gpu: &Gpu, n: usize) -> [u32; 3] {
    gpu.grid((n as u32).div_ceil(FLAT_WG))
}
