//! One walk over a network's layers that yields both its summary rows (output shapes computed
//! analytically) and its named parameters and buffers, so the two always agree.

use super::LayerRow;
use crate::nn::{AttentionBlock, Conv2d, ConvTranspose2d, GroupNorm, Linear, ResBlock, SpatialConv, Weight};
use crate::Tensor;

/// Rows, parameters and buffers collected in layer order.
#[derive(Default)]
pub struct LayerWalk {
    pub rows: Vec<LayerRow>,
    pub params: Vec<(String, Tensor)>,
    pub buffers: Vec<(String, Tensor)>,
    /// Every conv, transposed conv, linear and 1x1 projection weight (what compression touches).
    pub weights: Vec<WeightInfo>,
    /// The `Conv2d` and `Linear` weights by parameter name: handles to the layers' own
    /// [`Weight`]s, which loading a compressed checkpoint (`pipeline`) gives their integer forms.
    pub packable: Vec<(String, Weight)>,
    /// The spatial side of the last conv's output (where the layers that follow work).
    side: Option<usize>,
}

/// The layer a weight belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightRole {
    /// `Conv2d` [Cout, Cin/g, KH, KW].
    Conv,
    /// `ConvTranspose2d` [Cin, Cout/g, KH, KW].
    ConvTranspose,
    /// `Linear` [fan_in, fan_out] (`x @ w`).
    Linear,
    /// An attention block's 1x1 projection [Cout, Cin] (`w @ x`).
    Projection,
}

impl WeightRole {
    /// The axis of the weight's output channels.
    pub fn out_axis(self) -> usize {
        match self {
            WeightRole::Conv | WeightRole::Projection => 0,
            WeightRole::ConvTranspose | WeightRole::Linear => 1,
        }
    }
}

/// A weight as compression sees it: its parameter name, layer, and the spatial side its layer
/// works at (a conv: the smaller of its input's and output's; a linear: its block's; `None`
/// before the first conv, e.g. the time embedding).
#[derive(Clone, Debug, PartialEq)]
pub struct WeightInfo {
    pub name: String,
    pub role: WeightRole,
    pub side: Option<usize>,
}

/// Output [N, Cout, OH, OW] of `conv` on an input of `shape`.
fn conv_output(conv: &Conv2d, shape: &[usize]) -> Vec<usize> {
    let k = conv.weight.shape()[2];
    let (s, p) = (conv.opts.stride.0, conv.opts.padding.0);
    let size = |i: usize| (i + 2 * p).saturating_sub(k) / s + 1;
    vec![shape[0], conv.weight.shape()[0], size(shape[2]), size(shape[3])]
}

impl LayerWalk {
    /// A row owning `tensors` (name suffix, tensor), trainable parameters or fixed buffers.
    pub fn layer(
        &mut self,
        name: &str,
        kind: String,
        output_shape: Vec<usize>,
        tensors: &[(&str, &Tensor)],
        trainable: bool,
    ) {
        let list = if trainable {
            &mut self.params
        } else {
            &mut self.buffers
        };
        list.extend(
            tensors
                .iter()
                .map(|(suffix, t)| (format!("{name}.{suffix}"), (*t).clone())),
        );
        self.rows.push(LayerRow {
            name: name.to_string(),
            kind,
            output_shape,
            params: tensors.iter().map(|(_, t)| t.numel()).sum(),
            trainable,
        });
    }

    /// A row for a block whose parameters belong to the rows of its children.
    pub fn block(&mut self, name: &str, kind: String, output_shape: &[usize]) {
        self.layer(name, kind, output_shape.to_vec(), &[], true);
    }

    /// Records the weight of layer `name`, whose layer works at spatial side `side`.
    fn weight(&mut self, name: &str, role: WeightRole, side: Option<usize>) {
        self.weights.push(WeightInfo {
            name: format!("{name}.weight"),
            role,
            side,
        });
    }

    /// Records the `Weight` of the `Conv2d` or `Linear` `name`.
    fn packable(&mut self, name: &str, weight: &Weight) {
        self.packable.push((format!("{name}.weight"), weight.clone()));
    }

    /// Records a conv's weight and the side the layers after it work at.
    fn conv_weight(&mut self, name: &str, role: WeightRole, input: &[usize], out: &[usize]) {
        self.weight(name, role, Some(input[2].min(out[2])));
        self.side = Some(out[2]);
    }

    pub fn conv(&mut self, name: &str, conv: &Conv2d, input: &[usize]) -> Vec<usize> {
        let out = conv_output(conv, input);
        self.conv_weight(name, WeightRole::Conv, input, &out);
        self.packable(name, &conv.weight);
        let w = conv.weight.shape();
        let kind = format!(
            "Conv2d({}->{}, k{} s{} p{}{})",
            input[1],
            out[1],
            w[2],
            conv.opts.stride.0,
            conv.opts.padding.0,
            groups_suffix(conv.opts.groups)
        );
        let weight = conv.weight.float();
        let tensors: Vec<(&str, &Tensor)> = std::iter::once(("weight", &weight))
            .chain(conv.bias.as_ref().map(|b| ("bias", b)))
            .collect();
        self.layer(name, kind, out.clone(), &tensors, true);
        out
    }

    pub fn conv_transpose(&mut self, name: &str, conv: &ConvTranspose2d, input: &[usize]) -> Vec<usize> {
        let out = conv.output_shape(input);
        self.conv_weight(name, WeightRole::ConvTranspose, input, &out);
        let kind = format!(
            "ConvTranspose2d({}->{}, k{} s{} op{}{})",
            input[1],
            out[1],
            conv.weight.shape()[2],
            conv.opts.stride.0,
            conv.output_padding,
            groups_suffix(conv.opts.groups)
        );
        let tensors: Vec<(&str, &Tensor)> = std::iter::once(("weight", &conv.weight))
            .chain(conv.bias.as_ref().map(|b| ("bias", b)))
            .collect();
        self.layer(name, kind, out.clone(), &tensors, true);
        out
    }

    pub fn norm(&mut self, name: &str, norm: &GroupNorm, input: &[usize]) -> Vec<usize> {
        let kind = format!("GroupNorm({}, {})", norm.groups, input[1]);
        let tensors = [("weight", &norm.gamma), ("bias", &norm.beta)];
        self.layer(name, kind, input.to_vec(), &tensors, true);
        input.to_vec()
    }

    /// `input` [N, fan_in] -> [N, fan_out].
    pub fn linear(&mut self, name: &str, linear: &Linear, input: &[usize]) -> Vec<usize> {
        let [fan_in, fan_out] = [linear.weight.shape()[0], linear.weight.shape()[1]];
        let out = vec![input[0], fan_out];
        self.weight(name, WeightRole::Linear, self.side);
        self.packable(name, &linear.weight);
        let weight = linear.weight.float();
        let tensors = [("weight", &weight), ("bias", &linear.bias)];
        self.layer(
            name,
            format!("Linear({fan_in}->{fan_out})"),
            out.clone(),
            &tensors,
            true,
        );
        out
    }

    /// One conv row, or `name.0`..`name.2` for a bottleneck chain.
    pub fn spatial_conv(&mut self, name: &str, conv: &SpatialConv, input: &[usize]) -> Vec<usize> {
        match conv.layers.as_slice() {
            [single] => self.conv(name, single, input),
            chain => chain.iter().enumerate().fold(input.to_vec(), |shape, (i, c)| {
                self.conv(&format!("{name}.{i}"), c, &shape)
            }),
        }
    }

    /// The block row, then norm1, conv1, time, norm2, conv2, skip.
    pub fn resblock(&mut self, name: &str, block: &ResBlock, input: &[usize], temb: &[usize]) -> Vec<usize> {
        let cout = block.time.weight.shape()[1];
        let dropout = if block.dropout > 0.0 {
            format!(", dropout {}", block.dropout)
        } else {
            String::new()
        };
        let out = vec![input[0], cout, input[2], input[3]];
        self.block(name, format!("ResBlock({}->{cout}{dropout})", input[1]), &out);
        let h = self.norm(&format!("{name}.norm1"), &block.norm1, input);
        let h = self.spatial_conv(&format!("{name}.conv1"), &block.conv1, &h);
        self.linear(&format!("{name}.time"), &block.time, temb);
        let h = self.norm(&format!("{name}.norm2"), &block.norm2, &h);
        self.spatial_conv(&format!("{name}.conv2"), &block.conv2, &h);
        if let Some(skip) = &block.skip {
            self.conv(&format!("{name}.skip"), skip, input);
        }
        out
    }

    /// The block row, then norm, qkv (1x1), out (1x1).
    pub fn attention(&mut self, name: &str, block: &AttentionBlock, input: &[usize]) -> Vec<usize> {
        let c = input[1];
        self.block(name, format!("AttentionBlock({c}, {} heads)", block.heads), input);
        self.norm(&format!("{name}.norm"), &block.norm, input);
        self.weight(&format!("{name}.qkv"), WeightRole::Projection, Some(input[2]));
        self.weight(&format!("{name}.out"), WeightRole::Projection, Some(input[2]));
        let qkv = [("weight", &block.qkv_weight), ("bias", &block.qkv_bias)];
        let qkv_shape = vec![input[0], 3 * c, input[2], input[3]];
        self.layer(
            &format!("{name}.qkv"),
            format!("Conv1x1({c}->{})", 3 * c),
            qkv_shape,
            &qkv,
            true,
        );
        let out = [("weight", &block.out_weight), ("bias", &block.out_bias)];
        self.layer(
            &format!("{name}.out"),
            format!("Conv1x1({c}->{c})"),
            input.to_vec(),
            &out,
            true,
        );
        input.to_vec()
    }
}

fn groups_suffix(groups: usize) -> String {
    if groups > 1 {
        format!(" g{groups}")
    } else {
        String::new()
    }
}
