//! `ConvOptions`: a convolution's stride, padding, dilation and groups, built by name from the
//! default (`ConvOptions::default().stride(2).padding(1)`).

/// Stride, padding, dilation (each as (height, width)) and groups of a convolution; build
/// with named settings from the default (stride 1, padding 0, dilation 1, one group):
/// `ConvOptions::default().stride(2).padding(1)`, `.stride_hw(2, 1).padding_hw(1, 0)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvOptions {
    /// Step between output pixels along (height, width).
    pub stride: (usize, usize),
    /// Zeros added on both sides along (height, width).
    pub padding: (usize, usize),
    /// Step between kernel taps along (height, width).
    pub dilation: (usize, usize),
    /// Channel groups: input and output channels split into `groups` independent convs.
    pub groups: usize,
}

impl Default for ConvOptions {
    fn default() -> Self {
        ConvOptions {
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
        }
    }
}

impl ConvOptions {
    /// The same stride along height and width.
    #[must_use]
    pub fn stride(self, both: usize) -> ConvOptions {
        self.stride_hw(both, both)
    }

    /// Stride `h` along the height and `w` along the width.
    #[must_use]
    pub fn stride_hw(self, h: usize, w: usize) -> ConvOptions {
        ConvOptions {
            stride: (h, w),
            ..self
        }
    }

    /// The same zero padding on all four sides.
    #[must_use]
    pub fn padding(self, both: usize) -> ConvOptions {
        self.padding_hw(both, both)
    }

    /// `h` zero rows above and below, `w` zero columns left and right.
    #[must_use]
    pub fn padding_hw(self, h: usize, w: usize) -> ConvOptions {
        ConvOptions {
            padding: (h, w),
            ..self
        }
    }

    /// The same dilation along height and width.
    #[must_use]
    pub fn dilation(self, both: usize) -> ConvOptions {
        self.dilation_hw(both, both)
    }

    /// Dilation `h` along the height and `w` along the width.
    #[must_use]
    pub fn dilation_hw(self, h: usize, w: usize) -> ConvOptions {
        ConvOptions {
            dilation: (h, w),
            ..self
        }
    }

    /// `groups` channel groups (the channel count for a depthwise conv).
    #[must_use]
    pub fn groups(self, groups: usize) -> ConvOptions {
        ConvOptions { groups, ..self }
    }
}
